//! Middleware: request ids, API keys (`Authorization: Bearer …` or `X-Api-Key`), per-key
//! token-bucket rate limits, the admin check, and per-request metrics and logs.

use crate::state::{AppState, Caller, ServiceError};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The request-id header, read and echoed.
pub(crate) const REQUEST_ID: &str = "x-request-id";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A caller-supplied id when it is short and printable, else a fresh one.
fn request_id(headers: &HeaderMap) -> String {
    if let Some(v) = headers.get(REQUEST_ID).and_then(|v| v.to_str().ok())
        && !v.is_empty()
        && v.len() <= 128
        && v.bytes().all(|b| b.is_ascii_graphic())
    {
        return v.to_string();
    }
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("req-{:x}-{:x}-{n:x}", t, std::process::id())
}

fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        let v = v.trim();
        if let Some(rest) = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
        {
            return Some(rest.trim());
        }
    }
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

fn authenticate(state: &AppState, req: &Request, admin: bool) -> Result<Caller, ServiceError> {
    let request_id = request_id(req.headers());
    let keys = state.keys();
    if keys.is_empty() {
        if admin {
            return Err(ServiceError::Unauthorized(
                "admin endpoints need an admin API key ([[auth.keys]] with admin = true); \
                 use SIGHUP to reload a server without keys"
                    .into(),
            ));
        }
        return Ok(Caller {
            request_id,
            key_id: None,
        });
    }
    let Some(presented) = presented_key(req.headers()) else {
        return Err(ServiceError::Unauthorized(
            "missing API key (Authorization: Bearer <key> or X-Api-Key)".into(),
        ));
    };
    let Some(entry) = keys.lookup(presented) else {
        return Err(ServiceError::Unauthorized("invalid API key".into()));
    };
    if admin && !entry.admin {
        return Err(ServiceError::Forbidden(
            "this API key is not an admin key".into(),
        ));
    }
    if let Err(retry_after_s) = state.take_token(entry) {
        state.metrics().rate_limited();
        return Err(ServiceError::RateLimited { retry_after_s });
    }
    Ok(Caller {
        request_id,
        key_id: Some(entry.id.clone()),
    })
}

fn finish(mut resp: Response, request_id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        resp.headers_mut().insert(REQUEST_ID, v);
    }
    resp
}

/// Authenticates `/v1/*` requests and inserts the [`Caller`].
pub(crate) async fn require_key(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    guard(&state, req, next, false).await
}

/// Authenticates `/admin/*` requests (admin keys only) and inserts the [`Caller`].
pub(crate) async fn require_admin(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    guard(&state, req, next, true).await
}

/// The body of both middlewares: authenticate (`admin` keys only when asked), run the
/// handler with the [`Caller`], echo the request id.
async fn guard(state: &AppState, mut req: Request, next: Next, admin: bool) -> Response {
    match authenticate(state, &req, admin) {
        Ok(caller) => {
            let id = caller.request_id.clone();
            req.extensions_mut().insert(caller.clone());
            let mut resp = next.run(req).await;
            // For the request log line (`observe`).
            resp.extensions_mut().insert(caller);
            finish(resp, &id)
        }
        Err(e) => {
            let id = request_id(req.headers());
            finish(e.into_response(), &id)
        }
    }
}

/// The matched route as one of [`crate::ROUTES`]' paths (a static name for the metrics
/// labels and the log line), or `unmatched`.
fn route_name(matched: Option<&MatchedPath>) -> &'static str {
    let Some(m) = matched else {
        return "unmatched";
    };
    crate::ROUTES
        .iter()
        .map(|&(_, path)| path)
        .find(|&path| path == m.as_str())
        .unwrap_or("unmatched")
}

/// Counts and times every request, and logs one line per request (no bodies).
pub(crate) async fn observe(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let endpoint = route_name(req.extensions().get::<MatchedPath>());
    let method = req.method().clone();
    let resp = next.run(req).await;
    let secs = started.elapsed().as_secs_f64();
    let status = resp.status().as_u16();
    state.metrics().observe_request(endpoint, status, secs);
    let rid = resp
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    let key_id = resp
        .extensions()
        .get::<Caller>()
        .and_then(|c| c.key_id.as_deref())
        .unwrap_or("-");
    let action = resp
        .headers()
        .get("x-rampart-action")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    tracing::info!(
        target: "rampart::http",
        request_id = rid,
        key_id,
        method = %method,
        endpoint,
        status,
        action,
        latency_us = (secs * 1e6) as u64,
        "request"
    );
    resp
}
