//! An LLM endpoint as configuration files write it, and its one resolution into an
//! [`LlmConfig`]: the file's values, then the environment's overrides, then the checks.
//!
//! A layer that calls a model (the judge, the relational evaluator's llm backend) names its
//! endpoint with an `llm` table and, beside it, two optional variables that replace the
//! table's `base_url` and `model` when they are set and not empty:
//!
//! ```toml
//! base_url_env = "RAMPART_JUDGE_URL"
//! model_env = "RAMPART_JUDGE_MODEL"
//! llm = { protocol = "openai", base_url = "http://127.0.0.1:8080/v1", model = "smollm2-135m", api_key_env = "RAMPART_JUDGE_API_KEY" }
//! ```
//!
//! The table may leave out `base_url` and `model` when the variables supply them, so
//! [`Endpoint`] holds every [`LlmConfig`] key with those (and `protocol`) optional; a key
//! still missing after the overrides is an error naming it. The API key itself is read from
//! `api_key_env` by [`crate::LlmClient::new`], never stored in a configuration.
//!
//! ```
//! use rampart_llm::{Endpoint, EndpointError, EndpointEnv, Protocol};
//!
//! let e: Endpoint = toml::from_str(
//!     "protocol = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\ntimeout_ms = 5000",
//! )
//! .unwrap();
//! let env = EndpointEnv {
//!     base_url_env: None,
//!     model_env: Some("MY_MODEL"),
//! };
//! // The variable supplies the model the file leaves out.
//! let config = e
//!     .resolve_with(env, |name| (name == "MY_MODEL").then(|| "gpt-4o-mini".to_string()))
//!     .unwrap();
//! assert_eq!((config.protocol, config.model.as_str()), (Protocol::Openai, "gpt-4o-mini"));
//! assert_eq!(config.timeout_ms, 5000);
//! // Unset, it is missing.
//! assert_eq!(e.resolve_with(env, |_| None), Err(EndpointError::Missing("model")));
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::{
    AuthStyle, BudgetConfig, LlmConfig, LlmConfigError, MaxTokensField, Price, Protocol, Structured,
};

/// The `llm` table of a layer's options: every [`LlmConfig`] key, read strictly, with
/// `protocol`, `base_url` and `model` optional until [`Endpoint::resolve`]. The other keys
/// have [`LlmConfig`]'s defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// See [`LlmConfig::protocol`]. Required by the time the endpoint is resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// See [`LlmConfig::base_url`]; an environment variable may supply or replace it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// See [`LlmConfig::model`]; an environment variable may supply or replace it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// See [`LlmConfig::api_key_env`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// See [`LlmConfig::auth`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthStyle>,
    /// See [`LlmConfig::headers`].
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// See [`LlmConfig::timeout_ms`].
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// See [`LlmConfig::max_retries`].
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// See [`LlmConfig::backoff_ms`].
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
    /// See [`LlmConfig::max_backoff_ms`].
    #[serde(default = "default_max_backoff_ms")]
    pub max_backoff_ms: u64,
    /// See [`LlmConfig::concurrency`].
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// See [`LlmConfig::max_tokens`].
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// See [`LlmConfig::temperature`].
    #[serde(default)]
    pub temperature: f64,
    /// See [`LlmConfig::structured`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Structured>,
    /// See [`LlmConfig::max_tokens_field`].
    #[serde(default)]
    pub max_tokens_field: MaxTokensField,
    /// See [`LlmConfig::prefill_json`].
    #[serde(default)]
    pub prefill_json: bool,
    /// See [`LlmConfig::prices`].
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// See [`LlmConfig::budget`].
    #[serde(default)]
    pub budget: BudgetConfig,
    /// See [`LlmConfig::max_response_bytes`].
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: u64,
}

fn default_timeout_ms() -> u64 {
    10_000
}
fn default_max_retries() -> u32 {
    2
}
fn default_backoff_ms() -> u64 {
    250
}
fn default_max_backoff_ms() -> u64 {
    4_000
}
fn default_concurrency() -> usize {
    4
}
fn default_max_tokens() -> u32 {
    512
}
fn default_max_response_bytes() -> u64 {
    1 << 20
}

impl Default for Endpoint {
    /// An empty `llm` table: nothing named, every other key at its default.
    fn default() -> Self {
        Endpoint {
            protocol: None,
            base_url: None,
            model: None,
            api_key_env: None,
            auth: None,
            headers: BTreeMap::new(),
            timeout_ms: default_timeout_ms(),
            max_retries: default_max_retries(),
            backoff_ms: default_backoff_ms(),
            max_backoff_ms: default_max_backoff_ms(),
            concurrency: default_concurrency(),
            max_tokens: default_max_tokens(),
            temperature: 0.0,
            structured: None,
            max_tokens_field: MaxTokensField::default(),
            prefill_json: false,
            prices: BTreeMap::new(),
            budget: BudgetConfig::default(),
            max_response_bytes: default_max_response_bytes(),
        }
    }
}

/// The environment variables that may override an endpoint's `base_url` and `model` (the
/// `base_url_env` and `model_env` options beside the `llm` table). A variable that is unset
/// or empty overrides nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointEnv<'a> {
    /// The variable that replaces `base_url`.
    pub base_url_env: Option<&'a str>,
    /// The variable that replaces `model`.
    pub model_env: Option<&'a str>,
}

/// Why an endpoint cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// A required key is neither in the table nor supplied by its variable.
    #[error("missing field `{0}`")]
    Missing(&'static str),
    /// The resolved configuration fails [`LlmConfig::validate`].
    #[error(transparent)]
    Invalid(#[from] LlmConfigError),
}

impl Endpoint {
    /// The endpoint to call: the table's values, then `env`'s variables where they are set
    /// and not empty, then [`LlmConfig::validate`].
    pub fn resolve(&self, env: EndpointEnv<'_>) -> Result<LlmConfig, EndpointError> {
        self.resolve_with(env, |name| std::env::var(name).ok())
    }

    /// [`Endpoint::resolve`] with the variables read through `var` (for tests, and callers
    /// that hold their own environment).
    pub fn resolve_with(
        &self,
        env: EndpointEnv<'_>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<LlmConfig, EndpointError> {
        let config = LlmConfig::try_from(self.with_overrides(env, var))?;
        config.validate()?;
        Ok(config)
    }

    /// The table with `env`'s variables applied where `var` finds them set and not empty,
    /// unchecked: where [`Endpoint::resolve`] would send requests, for a caller that only
    /// needs to know.
    pub fn with_overrides(
        &self,
        env: EndpointEnv<'_>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Endpoint {
        let over = |name: Option<&str>| name.and_then(&var).filter(|v| !v.is_empty());
        let mut e = self.clone();
        if let Some(url) = over(env.base_url_env) {
            e.base_url = Some(url);
        }
        if let Some(model) = over(env.model_env) {
            e.model = Some(model);
        }
        e
    }

    /// The complete configuration for `protocol`, `base_url` and `model`, with this table's
    /// other keys.
    pub(crate) fn complete(self, protocol: Protocol, base_url: String, model: String) -> LlmConfig {
        LlmConfig {
            protocol,
            base_url,
            model,
            api_key_env: self.api_key_env,
            auth: self.auth,
            headers: self.headers,
            timeout_ms: self.timeout_ms,
            max_retries: self.max_retries,
            backoff_ms: self.backoff_ms,
            max_backoff_ms: self.max_backoff_ms,
            concurrency: self.concurrency,
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            structured: self.structured,
            max_tokens_field: self.max_tokens_field,
            prefill_json: self.prefill_json,
            prices: self.prices,
            budget: self.budget,
            max_response_bytes: self.max_response_bytes,
        }
    }
}

/// The table's values as they stand, without overrides or checks: the keys are required in
/// the order serde reads them (`protocol`, `base_url`, `model`).
impl TryFrom<Endpoint> for LlmConfig {
    type Error = EndpointError;

    fn try_from(mut e: Endpoint) -> Result<LlmConfig, EndpointError> {
        let protocol = e.protocol.ok_or(EndpointError::Missing("protocol"))?;
        let base_url = e
            .base_url
            .take()
            .ok_or(EndpointError::Missing("base_url"))?;
        let model = e.model.take().ok_or(EndpointError::Missing("model"))?;
        Ok(e.complete(protocol, base_url, model))
    }
}

impl From<LlmConfig> for Endpoint {
    fn from(c: LlmConfig) -> Endpoint {
        Endpoint {
            protocol: Some(c.protocol),
            base_url: Some(c.base_url),
            model: Some(c.model),
            api_key_env: c.api_key_env,
            auth: c.auth,
            headers: c.headers,
            timeout_ms: c.timeout_ms,
            max_retries: c.max_retries,
            backoff_ms: c.backoff_ms,
            max_backoff_ms: c.max_backoff_ms,
            concurrency: c.concurrency,
            max_tokens: c.max_tokens,
            temperature: c.temperature,
            structured: c.structured,
            max_tokens_field: c.max_tokens_field,
            prefill_json: c.prefill_json,
            prices: c.prices,
            budget: c.budget,
            max_response_bytes: c.max_response_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(src: &str) -> Endpoint {
        toml::from_str(src).expect("valid endpoint")
    }

    #[test]
    fn variables_override_only_when_set_and_not_empty() {
        let e = table("protocol = \"openai\"\nbase_url = \"http://file/v1\"\nmodel = \"file\"");
        let env = EndpointEnv {
            base_url_env: Some("URL"),
            model_env: Some("MODEL"),
        };
        let vars = |url: &'static str, model: &'static str| {
            move |name: &str| match name {
                "URL" => Some(url.to_string()),
                "MODEL" => Some(model.to_string()),
                _ => None,
            }
        };
        let c = e
            .resolve_with(env, vars("http://env/v1", ""))
            .expect("valid");
        assert_eq!(
            (c.base_url.as_str(), c.model.as_str()),
            ("http://env/v1", "file")
        );
        let c = e.resolve_with(env, vars("", "env")).expect("valid");
        assert_eq!(
            (c.base_url.as_str(), c.model.as_str()),
            ("http://file/v1", "env")
        );
        let c = e
            .resolve_with(EndpointEnv::default(), vars("http://env/v1", "env"))
            .expect("valid");
        assert_eq!(c.model, "file");
    }

    #[test]
    fn missing_keys_are_named_in_order_and_values_are_checked() {
        let none = EndpointEnv::default();
        let no = |_: &str| None;
        assert_eq!(
            Endpoint::default().resolve_with(none, no),
            Err(EndpointError::Missing("protocol"))
        );
        let e = table("protocol = \"openai\"\nmodel = \"m\"");
        let err = e.resolve_with(none, no).unwrap_err();
        assert_eq!(err.to_string(), "missing field `base_url`");
        let e = table("protocol = \"openai\"\nbase_url = \"ftp://h\"\nmodel = \"m\"");
        assert!(matches!(
            e.resolve_with(none, no),
            Err(EndpointError::Invalid(LlmConfigError::BadUrl { .. }))
        ));
    }

    #[test]
    fn the_table_is_strict_and_round_trips_through_the_config() {
        assert!(toml::from_str::<Endpoint>("timeout = 5").is_err());
        assert_eq!(table(""), Endpoint::default());
        let c = LlmConfig::new(Protocol::Anthropic, "https://api.anthropic.com/v1", "c");
        let back: LlmConfig = Endpoint::from(c.clone()).try_into().expect("complete");
        assert_eq!(back, c);
        let text = toml::to_string(&c).expect("serializes");
        assert_eq!(toml::from_str::<LlmConfig>(&text).expect("reads back"), c);
    }
}
