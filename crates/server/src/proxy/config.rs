//! `[proxy]`: the upstream, its timeouts, and spotlighting.

use crate::state::ServiceError;
use serde::{Deserialize, Serialize};

/// `[proxy]`: the OpenAI-compatible upstream.
///
/// ```toml
/// [proxy]
/// upstream_url = "http://127.0.0.1:11434/v1"   # the path (/chat/completions) is appended
/// upstream_api_key_env = "OPENAI_API_KEY"       # sent as Bearer when set and non-empty
/// timeout_ms = 120000                           # until the response (all of it, when not streamed)
/// stream_idle_timeout_ms = 60000                # longest gap between streamed chunks
/// spotlight = "off"                             # off | delimit | datamark (tool messages)
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxyConfig {
    /// Base URL of the OpenAI-compatible upstream, e.g. `https://api.openai.com/v1`.
    /// Absent: the proxy endpoints answer 503. Env: `RAMPART_UPSTREAM_URL`.
    pub upstream_url: Option<String>,
    /// Environment variable holding the upstream API key. Default `OPENAI_API_KEY`.
    pub upstream_api_key_env: String,
    /// Deadline for the upstream's answer in milliseconds (headers and, when not streamed,
    /// the whole body). Default 120000.
    pub timeout_ms: u64,
    /// Longest wait between two chunks of a streamed answer, in milliseconds. Default 60000.
    pub stream_idle_timeout_ms: u64,
    /// Spotlighting of tool messages in what is forwarded ([`Spotlight`]). Default off.
    pub spotlight: Spotlight,
}

/// `[proxy] spotlight`: marks tool output in the forwarded chat request as data, of the kind
/// described by Hines et al. 2024, "Defending Against Indirect Prompt Injection Attacks With
/// Spotlighting". Applied after the scan (decisions are made on the original text) to the
/// content of every `tool` / `function` message, with a system message telling the model
/// how the data is marked; a request without tool content is forwarded unchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Spotlight {
    /// Forward tool messages as they are.
    #[default]
    Off,
    /// Wrap each tool text between per-request random markers (`<<DATA-…>>` …
    /// `<</DATA-…>>`, 64 random bits from the OS CSPRNG): text inside cannot forge the end
    /// marker, since it is drawn after the text was written.
    Delimit,
    /// Replace each run of whitespace (line ends kept) in tool texts by a per-request random
    /// marker of two rare symbols, so every word of the data carries the mark.
    Datamark,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            upstream_url: None,
            upstream_api_key_env: "OPENAI_API_KEY".into(),
            timeout_ms: 120_000,
            stream_idle_timeout_ms: 60_000,
            spotlight: Spotlight::Off,
        }
    }
}

impl ProxyConfig {
    /// Semantic checks.
    pub fn validate(&self) -> Result<(), ProxyConfigError> {
        if let Some(u) = &self.upstream_url {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(ProxyConfigError::Scheme);
            }
            // The parse error never quotes the URL (its query may hold a key).
            reqwest::Url::parse(u).map_err(ProxyConfigError::Url)?;
        }
        if self.timeout_ms == 0 || self.stream_idle_timeout_ms == 0 {
            return Err(ProxyConfigError::Timeouts);
        }
        if self.upstream_api_key_env.is_empty() {
            return Err(ProxyConfigError::ApiKeyEnv);
        }
        Ok(())
    }

    /// The full URL of an endpoint (`path` like `/chat/completions`): the path is joined to
    /// the upstream's path, and the upstream's query (e.g. Azure's `?api-version=…`) is kept.
    pub(super) fn endpoint(&self, path: &str) -> Result<reqwest::Url, ServiceError> {
        let Some(base) = self.upstream_url.as_deref() else {
            return Err(ServiceError::Unavailable(
                "no upstream is configured for the proxy: set proxy.upstream_url (or \
                 RAMPART_UPSTREAM_URL)"
                    .into(),
            ));
        };
        let mut url = reqwest::Url::parse(base).map_err(|e| {
            ServiceError::Internal(format!("proxy.upstream_url is not a valid URL: {e}"))
        })?;
        let joined = format!("{}{path}", url.path().trim_end_matches('/'));
        url.set_path(&joined);
        Ok(url)
    }
}

/// A `[proxy]` section that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyConfigError {
    /// `upstream_url` is neither `http://` nor `https://`.
    #[error("proxy.upstream_url must start with http:// or https://")]
    Scheme,
    /// `upstream_url` does not parse (the message never quotes it: its query may hold a
    /// key).
    #[error("proxy.upstream_url is not a valid URL: {0}")]
    Url(#[source] url::ParseError),
    /// A timeout is zero.
    #[error("proxy timeouts must be greater than zero")]
    Timeouts,
    /// `upstream_api_key_env` is empty.
    #[error("proxy.upstream_api_key_env must not be empty")]
    ApiKeyEnv,
}

/// Sets `proxy.upstream_url` (the `RAMPART_UPSTREAM_URL` override; empty unsets it).
pub fn set_upstream_url(cfg: &mut ProxyConfig, url: String) {
    cfg.upstream_url = (!url.trim().is_empty()).then(|| url.trim().to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation_and_env_override() {
        let mut c = ProxyConfig::default();
        assert!(c.validate().is_ok());
        set_upstream_url(&mut c, "ftp://x".into());
        assert!(c.validate().is_err());
        set_upstream_url(&mut c, "http://127.0.0.1:1/v1/".into());
        assert_eq!(
            c.endpoint("/chat/completions").map(String::from).ok(),
            Some("http://127.0.0.1:1/v1/chat/completions".to_string())
        );
        set_upstream_url(&mut c, String::new());
        assert_eq!(c.upstream_url, None);
        assert!(matches!(
            c.endpoint("/chat/completions"),
            Err(ServiceError::Unavailable(_))
        ));
        set_upstream_url(&mut c, "http://[::1".into());
        assert!(c.validate().is_err());
    }
}
