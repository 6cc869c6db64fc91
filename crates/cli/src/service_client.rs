//! A client of a running service's admin and approver endpoints (`rampart breakglass`,
//! `rampart approvals`): the API key from an environment variable (never from the command
//! line, where `ps` shows it), bounded answers, no redirects, clear errors.

use anyhow::{Context, Result, bail};
use std::time::Duration;

/// Most bytes read from the service's answer.
const MAX_RESPONSE_BYTES: u64 = 1 << 20;
/// Connect and whole-request timeout.
const TIMEOUT: Duration = Duration::from_secs(15);

/// At most 300 characters of an answer, for error messages.
pub(crate) fn clip(s: &str) -> String {
    let t: String = s.chars().take(300).collect();
    if t.len() < s.len() {
        format!("{t}…")
    } else {
        t
    }
}

pub(crate) struct Client {
    base: String,
    key: String,
    agent: ureq::Agent,
    role: &'static str,
}

impl Client {
    /// A client of the service at `server` with the API key in the environment variable
    /// `key_env` (a `role` key: `admin`, `approver`, named in errors).
    pub(crate) fn new(server: &str, key_env: &str, role: &'static str) -> Result<Client> {
        let key = std::env::var(key_env).unwrap_or_default();
        if key.trim().is_empty() {
            bail!(
                "${key_env} is not set: put an {role} API key in it (or name another variable \
                 with --{role}-key-env)"
            );
        }
        let base = server.trim().trim_end_matches('/').to_string();
        let uri: ureq::http::Uri = base
            .parse()
            .with_context(|| format!("--server {base:?} is not a URL"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            bail!("--server {base:?} must be an http:// or https:// URL");
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(TIMEOUT))
            .user_agent(concat!("rampart-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Client {
            base,
            key: key.trim().to_string(),
            agent,
            role,
        })
    }

    /// Sends the request; the answer's body on 2xx, a clear error otherwise.
    pub(crate) fn call(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<String> {
        let url = format!("{}{path}", self.base);
        let auth = format!("Bearer {}", self.key);
        let sent = match method {
            "POST" => self
                .agent
                .post(&url)
                .header("authorization", &auth)
                .header("content-type", "application/json")
                .send(body.unwrap_or_default()),
            "DELETE" => self
                .agent
                .delete(&url)
                .header("authorization", &auth)
                .call(),
            _ => self.agent.get(&url).header("authorization", &auth).call(),
        };
        let resp = sent.map_err(|e| match e {
            ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
                anyhow::anyhow!("cannot reach the service at {}: {e}", self.base)
            }
            ureq::Error::Timeout(_) => {
                anyhow::anyhow!("the service at {} did not answer in time", self.base)
            }
            e => anyhow::anyhow!("{method} {url}: {e}"),
        })?;
        let status = resp.status().as_u16();
        let text = match resp
            .into_body()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_string()
        {
            Ok(t) => t,
            Err(ureq::Error::BodyExceedsLimit(_)) => {
                bail!("{method} {url}: the answer exceeds {MAX_RESPONSE_BYTES} bytes")
            }
            Err(e) => bail!("{method} {url}: reading the answer: {e}"),
        };
        if (200..300).contains(&status) {
            return Ok(text);
        }
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| {
                v.pointer("/error/message")
                    .and_then(|m| m.as_str())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| clip(&text));
        let hint = match status {
            401 | 403 => format!(" (is it an {} key?)", self.role),
            404 if method == "DELETE" => " (no such active grant)".into(),
            404 if path.contains("/approvals/") => " (no such pending approval)".into(),
            404 => " (does this service have tool governance enabled?)".into(),
            _ => String::new(),
        };
        bail!("{method} {path}: HTTP {status}: {message}{hint}")
    }
}
