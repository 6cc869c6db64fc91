//! Configuration of an LLM endpoint, as it appears in TOML (for example inside a judge layer's
//! `options`), and its validation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::endpoint::Endpoint;

/// The wire protocol of the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// OpenAI-compatible chat completions (`POST {base_url}/chat/completions`): OpenAI, Azure
    /// OpenAI (v1 API), vLLM, Ollama, llama.cpp's server, LiteLLM and others.
    Openai,
    /// Anthropic's Messages API (`POST {base_url}/messages`).
    Anthropic,
}

impl Protocol {
    /// The lowercase name used in configuration.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Openai => "openai",
            Protocol::Anthropic => "anthropic",
        }
    }
}

/// How the API key (read from `api_key_env`) is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthStyle {
    /// `Authorization: Bearer KEY` (the default for `openai`).
    Bearer,
    /// `api-key: KEY` (Azure OpenAI keys).
    ApiKey,
    /// `x-api-key: KEY` (the default for `anthropic`).
    XApiKey,
}

/// How a structured (JSON) answer is asked for when a request carries a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Structured {
    /// `response_format: {type: "json_schema", json_schema: {name, schema, strict: true}}`
    /// (OpenAI, Azure, vLLM, the C++ `llama-server`, Ollama 0.5+). The default for `openai`.
    JsonSchema,
    /// `response_format: {type: "json_object"}`: any JSON object; the schema is checked here.
    /// OpenAI requires the word "JSON" in the messages in this mode.
    JsonObject,
    /// `response_format: {type: "json_object", schema}`: the form llama.cpp's servers (the
    /// C++ `llama-server` and `llama-cpp-python`'s, which rejects `json_schema`) and some
    /// hosted open-model APIs turn into a grammar. OpenAI rejects it.
    JsonObjectSchema,
    /// Nothing is sent: the prompt asks for JSON and the reply is extracted tolerantly. The
    /// default (and the only mode) for `anthropic`, whose Messages API has no `response_format`.
    None,
}

/// Which request field carries the output-token limit on the `openai` protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`: understood by every OpenAI-compatible server.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: required by OpenAI's reasoning models, which reject
    /// `max_tokens`.
    MaxCompletionTokens,
}

/// Price of one model in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// USD per 1,000,000 input (prompt) tokens.
    pub input_per_mtok: f64,
    /// USD per 1,000,000 output (completion) tokens.
    pub output_per_mtok: f64,
}

/// A spending limit for one window; each part is optional.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// Input + output tokens.
    #[serde(default)]
    pub tokens: Option<u64>,
    /// US dollars, from the price table.
    #[serde(default)]
    pub usd: Option<f64>,
}

/// Budgets: a sliding 60-second window and the current UTC day.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// Limit over the last 60 seconds (sliding).
    #[serde(default)]
    pub per_minute: Option<Limit>,
    /// Limit over the current UTC calendar day (resets at 00:00 UTC).
    #[serde(default)]
    pub per_day: Option<Limit>,
}

/// One LLM endpoint and how to call it, complete. Configuration files write it as an
/// [`Endpoint`] table (the same keys), which [`Endpoint::resolve`] turns into this with the
/// environment's overrides applied; it reads and writes as that table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Endpoint", into = "Endpoint")]
pub struct LlmConfig {
    /// Wire protocol.
    pub protocol: Protocol,
    /// Base URL, e.g. `https://api.openai.com/v1`, `http://127.0.0.1:8080/v1`,
    /// `https://api.anthropic.com/v1`. `/chat/completions` or `/messages` is appended (a query
    /// string in the base URL is kept).
    pub base_url: String,
    /// Model name sent in the request.
    pub model: String,
    /// Name of the environment variable holding the API key. Optional: local servers need
    /// none, and an unset or empty variable sends no key (see [`crate::LlmClient::warnings`]).
    pub api_key_env: Option<String>,
    /// How the key is sent; default `bearer` for `openai`, `x_api_key` for `anthropic`.
    pub auth: Option<AuthStyle>,
    /// Extra headers sent with every request; they override the automatic ones (e.g.
    /// `anthropic-version`, sent as `2023-06-01` unless set here).
    pub headers: BTreeMap<String, String>,
    /// Deadline of one [`crate::LlmClient::complete`] call in milliseconds, covering the wait
    /// for a concurrency slot, every attempt and every backoff. Default 10,000.
    pub timeout_ms: u64,
    /// Retries after the first attempt, on HTTP 429 and 5xx only (at most 10). Default 2.
    pub max_retries: u32,
    /// Base of the exponential backoff in milliseconds (attempt n waits about
    /// `backoff_ms * 2^(n-1)`, with jitter). Default 250.
    pub backoff_ms: u64,
    /// Cap on one backoff wait, and on an honoured `Retry-After` (a longer `Retry-After` ends
    /// the retries), in milliseconds (at most 60,000). Default 4,000.
    pub max_backoff_ms: u64,
    /// Most calls in flight at once across all threads sharing this client. Default 4.
    pub concurrency: usize,
    /// Output-token limit of a request (a [`crate::ChatRequest`] may lower or raise it).
    /// Default 512.
    pub max_tokens: u32,
    /// Sampling temperature (default 0, for repeatable answers).
    pub temperature: f64,
    /// How a JSON answer is asked for; default `json_schema` for `openai`, `none` for
    /// `anthropic`.
    pub structured: Option<Structured>,
    /// `openai` only: the name of the output-token limit field.
    pub max_tokens_field: MaxTokensField,
    /// `anthropic` only: when a schema is asked for, end the messages with an assistant turn
    /// `{` so the reply continues a JSON object (not every Claude model accepts a prefill).
    pub prefill_json: bool,
    /// Price table, keyed by model name (the server-reported name is tried first, then
    /// `model`).
    pub prices: BTreeMap<String, Price>,
    /// Token and cost budgets.
    pub budget: BudgetConfig,
    /// Largest response body read, in bytes (default 1 MiB); a larger one is an HTTP error.
    pub max_response_bytes: u64,
}

/// Most retries accepted in a configuration.
pub const MAX_RETRIES_LIMIT: u32 = 10;
/// Largest `max_backoff_ms` accepted in a configuration.
pub const MAX_BACKOFF_LIMIT_MS: u64 = 60_000;

impl LlmConfig {
    /// A configuration with every optional field at its default.
    pub fn new(protocol: Protocol, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Endpoint::default().complete(protocol, base_url.into(), model.into())
    }

    /// The structured-output mode in effect (the protocol's default when unset).
    pub fn structured_mode(&self) -> Structured {
        self.structured.unwrap_or(match self.protocol {
            Protocol::Openai => Structured::JsonSchema,
            Protocol::Anthropic => Structured::None,
        })
    }

    /// The auth style in effect (the protocol's default when unset).
    pub fn auth_style(&self) -> AuthStyle {
        self.auth.unwrap_or(match self.protocol {
            Protocol::Openai => AuthStyle::Bearer,
            Protocol::Anthropic => AuthStyle::XApiKey,
        })
    }

    /// The full endpoint URL: the base URL with the protocol's path appended before any query
    /// string.
    pub fn endpoint_url(&self) -> String {
        let path = match self.protocol {
            Protocol::Openai => "chat/completions",
            Protocol::Anthropic => "messages",
        };
        let (base, query) = match self.base_url.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (self.base_url.as_str(), None),
        };
        let mut url = format!("{}/{path}", base.trim_end_matches('/'));
        if let Some(q) = query {
            url.push('?');
            url.push_str(q);
        }
        url
    }

    /// The price of `model`, if the table has it.
    pub fn price_of(&self, model: &str) -> Option<Price> {
        self.prices.get(model).copied()
    }
}

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmConfigError {
    /// `base_url` is not an absolute http(s) URL.
    #[error("llm base_url {url:?} is not an absolute http:// or https:// URL: {reason}")]
    BadUrl {
        /// The configured URL.
        url: String,
        /// Why it was rejected.
        reason: String,
    },
    /// `model` is empty.
    #[error("llm model must not be empty")]
    EmptyModel,
    /// A numeric option is out of range.
    #[error("llm option {field} = {value} is out of range: {expected}")]
    OutOfRange {
        /// Option name.
        field: &'static str,
        /// The configured value, as text.
        value: String,
        /// The accepted range.
        expected: &'static str,
    },
    /// An extra header has an invalid name or value.
    #[error("llm header {name:?} is not a valid HTTP header name and value")]
    BadHeader {
        /// The header name as configured.
        name: String,
    },
    /// The option does not exist for the protocol.
    #[error("llm option {field} = {value} is not supported by protocol {protocol}: {hint}")]
    Unsupported {
        /// Option name.
        field: &'static str,
        /// The configured value.
        value: String,
        /// The protocol.
        protocol: &'static str,
        /// What to do instead.
        hint: &'static str,
    },
    /// A USD budget is set but the configured model has no price, so it could not be enforced.
    #[error(
        "llm budget sets a usd limit but prices has no entry for model {model:?}; add \
         [prices.\"{model}\"] input_per_mtok/output_per_mtok"
    )]
    UsdBudgetWithoutPrice {
        /// The configured model.
        model: String,
    },
    /// A price or budget is negative or not finite.
    #[error("llm {field} must be a finite number >= 0 (got {value})")]
    BadAmount {
        /// Where the amount is.
        field: String,
        /// The configured value.
        value: f64,
    },
    /// The HTTP client could not be built.
    #[error("llm HTTP client: {0}")]
    Http(String),
}

impl LlmConfig {
    /// Check every option; [`crate::LlmClient::new`] calls this.
    pub fn validate(&self) -> Result<(), LlmConfigError> {
        validate_url(&self.base_url)?;
        if self.model.trim().is_empty() {
            return Err(LlmConfigError::EmptyModel);
        }
        range("timeout_ms", self.timeout_ms, 1, 600_000, "1..=600000")?;
        range(
            "max_retries",
            u64::from(self.max_retries),
            0,
            u64::from(MAX_RETRIES_LIMIT),
            "0..=10",
        )?;
        range(
            "backoff_ms",
            self.backoff_ms,
            0,
            MAX_BACKOFF_LIMIT_MS,
            "0..=60000",
        )?;
        range(
            "max_backoff_ms",
            self.max_backoff_ms,
            0,
            MAX_BACKOFF_LIMIT_MS,
            "0..=60000",
        )?;
        range("concurrency", self.concurrency as u64, 1, 1024, "1..=1024")?;
        range(
            "max_tokens",
            u64::from(self.max_tokens),
            1,
            1_000_000,
            "1..=1000000",
        )?;
        range(
            "max_response_bytes",
            self.max_response_bytes,
            1024,
            64 << 20,
            "1024..=67108864",
        )?;
        if !(self.temperature.is_finite() && (0.0..=2.0).contains(&self.temperature)) {
            return Err(LlmConfigError::OutOfRange {
                field: "temperature",
                value: self.temperature.to_string(),
                expected: "0.0..=2.0",
            });
        }
        if self.protocol == Protocol::Anthropic {
            if let Some(
                s
                @ (Structured::JsonSchema | Structured::JsonObject | Structured::JsonObjectSchema),
            ) = self.structured
            {
                return Err(LlmConfigError::Unsupported {
                    field: "structured",
                    value: format!("{s:?}"),
                    protocol: "anthropic",
                    hint: "the Messages API has no response_format; use structured = \"none\" \
                           (prompt + tolerant extraction), optionally prefill_json = true",
                });
            }
            if self.max_tokens_field != MaxTokensField::MaxTokens {
                return Err(LlmConfigError::Unsupported {
                    field: "max_tokens_field",
                    value: "max_completion_tokens".into(),
                    protocol: "anthropic",
                    hint: "the Messages API always uses max_tokens",
                });
            }
        }
        for (name, value) in &self.headers {
            let ok = ureq::http::HeaderName::from_bytes(name.as_bytes()).is_ok()
                && ureq::http::HeaderValue::from_str(value).is_ok();
            if !ok {
                return Err(LlmConfigError::BadHeader { name: name.clone() });
            }
        }
        for (model, p) in &self.prices {
            amount(&format!("prices.{model}.input_per_mtok"), p.input_per_mtok)?;
            amount(
                &format!("prices.{model}.output_per_mtok"),
                p.output_per_mtok,
            )?;
        }
        let mut usd_limit = false;
        for (name, limit) in [
            ("budget.per_minute", self.budget.per_minute),
            ("budget.per_day", self.budget.per_day),
        ] {
            if let Some(l) = limit
                && let Some(u) = l.usd
            {
                amount(&format!("{name}.usd"), u)?;
                usd_limit = true;
            }
        }
        if usd_limit && self.price_of(&self.model).is_none() {
            return Err(LlmConfigError::UsdBudgetWithoutPrice {
                model: self.model.clone(),
            });
        }
        Ok(())
    }
}

fn range(
    field: &'static str,
    value: u64,
    lo: u64,
    hi: u64,
    expected: &'static str,
) -> Result<(), LlmConfigError> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(LlmConfigError::OutOfRange {
            field,
            value: value.to_string(),
            expected,
        })
    }
}

fn amount(field: &str, value: f64) -> Result<(), LlmConfigError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(LlmConfigError::BadAmount {
            field: field.to_string(),
            value,
        })
    }
}

fn validate_url(url: &str) -> Result<(), LlmConfigError> {
    let bad = |reason: &str| LlmConfigError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let uri: ureq::http::Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(_) => return Err(bad("scheme must be http or https")),
        None => return Err(bad("missing scheme")),
    }
    match uri.host() {
        Some(h) if !h.is_empty() => Ok(()),
        _ => Err(bad("missing host")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_url_keeps_query_and_trims_slash() {
        let mut c = LlmConfig::new(Protocol::Openai, "http://h:1/v1/", "m");
        assert_eq!(c.endpoint_url(), "http://h:1/v1/chat/completions");
        c.base_url = "https://r.example/openai/deployments/d?api-version=2024-10-21".into();
        assert_eq!(
            c.endpoint_url(),
            "https://r.example/openai/deployments/d/chat/completions?api-version=2024-10-21"
        );
        c.protocol = Protocol::Anthropic;
        c.base_url = "https://api.anthropic.com/v1".into();
        assert_eq!(c.endpoint_url(), "https://api.anthropic.com/v1/messages");
    }

    #[test]
    fn validate_rejects_bad_values() {
        let ok = LlmConfig::new(Protocol::Openai, "http://127.0.0.1:8080/v1", "m");
        assert_eq!(ok.validate(), Ok(()));
        for url in ["", "127.0.0.1:8080", "ftp://h/v1", "http://", "not a url"] {
            let mut c = ok.clone();
            c.base_url = url.into();
            assert!(
                matches!(c.validate(), Err(LlmConfigError::BadUrl { .. })),
                "{url:?}"
            );
        }
        let mut c = ok.clone();
        c.model = " ".into();
        assert_eq!(c.validate(), Err(LlmConfigError::EmptyModel));
        let mut c = ok.clone();
        c.concurrency = 0;
        assert!(matches!(
            c.validate(),
            Err(LlmConfigError::OutOfRange {
                field: "concurrency",
                ..
            })
        ));
        let mut c = ok.clone();
        c.timeout_ms = 0;
        assert!(matches!(
            c.validate(),
            Err(LlmConfigError::OutOfRange {
                field: "timeout_ms",
                ..
            })
        ));
        let mut c = ok.clone();
        c.max_retries = 11;
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.temperature = f64::NAN;
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.headers.insert("bad header".into(), "v".into());
        assert!(matches!(
            c.validate(),
            Err(LlmConfigError::BadHeader { .. })
        ));
        let mut c = ok.clone();
        c.budget.per_day = Some(Limit {
            tokens: None,
            usd: Some(1.0),
        });
        assert!(matches!(
            c.validate(),
            Err(LlmConfigError::UsdBudgetWithoutPrice { .. })
        ));
        c.prices.insert(
            "m".into(),
            Price {
                input_per_mtok: 1.0,
                output_per_mtok: -2.0,
            },
        );
        assert!(matches!(
            c.validate(),
            Err(LlmConfigError::BadAmount { .. })
        ));
        let mut c = ok.clone();
        c.protocol = Protocol::Anthropic;
        c.structured = Some(Structured::JsonSchema);
        assert!(matches!(
            c.validate(),
            Err(LlmConfigError::Unsupported { .. })
        ));
    }

    #[test]
    fn toml_nests_and_rejects_unknown_fields() {
        #[derive(Deserialize)]
        struct Layer {
            llm: LlmConfig,
        }
        let l: Layer = toml::from_str(
            r#"
            [llm]
            protocol = "openai"
            base_url = "http://127.0.0.1:8080/v1"
            model = "gpt-4o-mini"
            api_key_env = "OPENAI_API_KEY"
            structured = "json_object"
            headers = { "x-team" = "sec" }
            [llm.prices."gpt-4o-mini"]
            input_per_mtok = 0.15
            output_per_mtok = 0.6
            [llm.budget.per_minute]
            tokens = 100000
            [llm.budget.per_day]
            usd = 5.0
            "#,
        )
        .expect("valid toml");
        assert_eq!(l.llm.structured_mode(), Structured::JsonObject);
        assert_eq!(l.llm.timeout_ms, 10_000);
        assert_eq!(l.llm.budget.per_day.and_then(|d| d.usd), Some(5.0));
        assert_eq!(l.llm.validate(), Ok(()));
        let err = toml::from_str::<Layer>(
            "[llm]\nprotocol = \"openai\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\ntimeout = 5\n",
        );
        assert!(err.is_err());
        let err = toml::from_str::<Layer>(
            "[llm]\nprotocol = \"gemini\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\n",
        );
        assert!(err.is_err());
    }
}
