//! Forwarding: the request to the upstream, its answer's headers within `proxy.timeout_ms`,
//! and a plain answer's body read within a bound; the upstream named in logs and errors
//! without its query or credentials.

use crate::config::ServerConfig;
use crate::state::{AppState, Caller, ServiceError};
use axum::http::header;
use bytes::Bytes;
use std::time::Duration;

/// The upstream URL as logs and errors may show it: without credentials, and with its query
/// (which may hold an API key, e.g. `?api-key=…`) replaced by `redacted`.
fn redacted(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    // Both fail only for URLs that cannot have credentials, which then have none.
    let _ = u.set_username("");
    let _ = u.set_password(None);
    if u.query().is_some() {
        u.set_query(Some("redacted"));
    }
    u.set_fragment(None);
    u.to_string()
}

/// Step 5: sends the request upstream and waits for the answer's headers (within
/// `proxy.timeout_ms`).
pub(super) async fn forward(
    state: &AppState,
    caller: &Caller,
    config: &ServerConfig,
    url: reqwest::Url,
    payload: Vec<u8>,
) -> Result<reqwest::Response, ServiceError> {
    let upstream = redacted(&url);
    let host = upstream_host(&url);
    let mut req = state
        .http_client()
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(payload);
    if let Ok(key) = std::env::var(&config.proxy.upstream_api_key_env)
        && !key.is_empty()
    {
        req = req.bearer_auth(key);
    }
    let timeout = Duration::from_millis(config.proxy.timeout_ms);
    match tokio::time::timeout(timeout, req.send()).await {
        Err(_) => Err(ServiceError::Timeout(format!(
            "the upstream did not answer within {} ms (proxy.timeout_ms)",
            config.proxy.timeout_ms
        ))),
        Ok(Err(e)) if e.is_timeout() => Err(ServiceError::Timeout(
            "the upstream request timed out".into(),
        )),
        Ok(Err(e)) => {
            let what = if e.is_connect() {
                "cannot connect to the upstream"
            } else {
                "the upstream request failed"
            };
            // reqwest's message names the full URL: log the redacted one instead.
            let e = e.without_url();
            tracing::warn!(request_id = %caller.request_id, %upstream, error = %e, "upstream failed");
            Err(ServiceError::BadGateway(format!("{what} ({host})")))
        }
        Ok(Ok(r)) => Ok(r),
    }
}

/// Whether a `Content-Type` is `text/event-stream`: media types compare case-insensitively
/// and may carry parameters (`Text/Event-Stream; charset=utf-8`).
pub(super) fn is_event_stream(headers: &header::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// Host (and port) of the upstream, for error messages (never the path, query or
/// credentials).
fn upstream_host(url: &reqwest::Url) -> String {
    url.host_str()
        .map(|h| {
            format!(
                "{h}{}",
                url.port().map(|p| format!(":{p}")).unwrap_or_default()
            )
        })
        .unwrap_or_else(|| "upstream".into())
}

pub(super) async fn read_limited(
    mut resp: reqwest::Response,
    max: usize,
) -> Result<Bytes, ServiceError> {
    let mut buf = bytes::BytesMut::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                if buf.len() + c.len() > max {
                    return Err(ServiceError::BadGateway(format!(
                        "the upstream's answer is larger than {max} bytes \
                         (output.max_response_bytes)"
                    )));
                }
                buf.extend_from_slice(&c);
            }
            Ok(None) => return Ok(buf.freeze()),
            Err(e) if e.is_timeout() => {
                return Err(ServiceError::Timeout(
                    "the upstream's answer timed out".into(),
                ));
            }
            Err(_) => {
                return Err(ServiceError::BadGateway(
                    "the upstream's answer broke off".into(),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::{ProxyConfig, set_upstream_url};
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn upstream_query_is_kept_after_the_path_and_redacted_in_logs() {
        let mut c = ProxyConfig::default();
        set_upstream_url(
            &mut c,
            "https://user:pw@example.com/openai/?api-key=SECRET&v=1".into(),
        );
        assert!(c.validate().is_ok());
        let url = c.endpoint("/chat/completions").expect("configured");
        assert_eq!(
            url.as_str(),
            "https://user:pw@example.com/openai/chat/completions?api-key=SECRET&v=1"
        );
        assert_eq!(
            redacted(&url),
            "https://example.com/openai/chat/completions?redacted"
        );
        assert_eq!(upstream_host(&url), "example.com");
    }

    #[test]
    fn event_stream_media_type_is_case_insensitive() {
        let with = |v: &str| {
            let mut h = header::HeaderMap::new();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_str(v).expect("value"),
            );
            is_event_stream(&h)
        };
        assert!(with("text/event-stream"));
        assert!(with("Text/Event-Stream; charset=utf-8"));
        assert!(with(" TEXT/EVENT-STREAM ;charset=UTF-8"));
        assert!(!with("application/json"));
        assert!(!with("text/event-streamx"));
        assert!(!is_event_stream(&header::HeaderMap::new()));
    }
}
