//! Middleware: request ids, API keys (`Authorization: Bearer …` or `X-Api-Key`), per-key
//! token-bucket rate limits, the per-address limit on failed authentications, the admin
//! check, and per-request metrics and logs.

use crate::config::AuthSection;
use crate::state::{AppState, Caller, KeyEntry, ServiceError};
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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

/// Failed authentications per client address, as a token bucket per address: `max_failures`
/// tokens, refilled over `failure_window_ms`; a failure takes one, and an address with none
/// left is refused (429) before its key is even looked at, so guessing stops paying off.
/// At most `max_tracked_clients` addresses are remembered.
#[derive(Debug, Default)]
pub(crate) struct FailureLimiter {
    clients: Mutex<HashMap<IpAddr, Allowance>>,
}

#[derive(Debug, Clone, Copy)]
struct Allowance {
    tokens: f64,
    last: Instant,
}

impl Allowance {
    fn refilled(self, cfg: &AuthSection, now: Instant) -> Allowance {
        let cap = f64::from(cfg.max_failures);
        let rate = cap / (cfg.failure_window_ms as f64 / 1000.0);
        Allowance {
            tokens: (self.tokens + now.duration_since(self.last).as_secs_f64() * rate).min(cap),
            last: now,
        }
    }
}

/// A request refused because the shared state cannot be read (fail closed; logged).
fn state_unavailable(e: &str) -> ServiceError {
    tracing::error!(error = %e, "shared state unavailable: request refused");
    ServiceError::Unavailable(format!(
        "the shared state is unavailable ({e}); retry later"
    ))
}

/// The unit an address is limited as: an IPv4 address, or an IPv6 /64 (what one host
/// usually holds).
pub(crate) fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl FailureLimiter {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Allowance>> {
        self.clients.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Err(seconds)` when `client` has no failure left, with the seconds until it has one.
    pub(crate) fn check(&self, client: IpAddr, cfg: &AuthSection, now: Instant) -> Result<(), u64> {
        let clients = self.lock();
        let Some(a) = clients.get(&client_key(client)) else {
            return Ok(());
        };
        let a = a.refilled(cfg, now);
        if a.tokens >= 1.0 {
            return Ok(());
        }
        let rate = f64::from(cfg.max_failures) / (cfg.failure_window_ms as f64 / 1000.0);
        Err(((1.0 - a.tokens) / rate).ceil().max(1.0) as u64)
    }

    /// Counts one failed authentication from `client`.
    pub(crate) fn failed(&self, client: IpAddr, cfg: &AuthSection, now: Instant) {
        let key = client_key(client);
        let mut clients = self.lock();
        if !clients.contains_key(&key) && clients.len() >= cfg.max_tracked_clients {
            let cap = f64::from(cfg.max_failures);
            // Whole allowances carry nothing: forget them first, then the least recent.
            clients.retain(|_, a| a.refilled(cfg, now).tokens < cap);
            while clients.len() >= cfg.max_tracked_clients {
                let Some(oldest) = clients.iter().min_by_key(|(_, a)| a.last).map(|(k, _)| *k)
                else {
                    break;
                };
                clients.remove(&oldest);
            }
        }
        let fresh = Allowance {
            tokens: f64::from(cfg.max_failures),
            last: now,
        };
        let a = clients.entry(key).or_insert(fresh);
        let mut refilled = a.refilled(cfg, now);
        refilled.tokens = (refilled.tokens - 1.0).max(0.0);
        *a = refilled;
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.lock().len()
    }

    #[cfg(test)]
    fn is_tracked(&self, client: IpAddr) -> bool {
        self.lock().contains_key(&client_key(client))
    }
}

/// What a route needs of the API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Any valid key (none when authentication is off).
    Key,
    /// An admin key.
    Admin,
    /// An approver or admin key.
    Approver,
}

fn authenticate(state: &AppState, req: &Request, need: Need) -> Result<Caller, ServiceError> {
    let request_id = request_id(req.headers());
    let keys = state.keys();
    if keys.is_empty() {
        if need == Need::Approver {
            return Err(ServiceError::Unauthorized(
                "approvals need an approver API key ([[auth.keys]] with approver = true), \
                 other than the key that made the call"
                    .into(),
            ));
        }
        if need == Need::Admin {
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
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let cfg = state.config();
    if let Some(store) = state.shared_state() {
        let presented = presented_key(req.headers());
        let entry = presented.and_then(|p| keys.lookup(p));
        return authenticate_shared(
            state,
            store.as_ref(),
            &cfg.auth,
            client,
            presented,
            entry,
            need,
        )
        .map(|key_id| Caller {
            request_id,
            key_id: Some(key_id),
        });
    }
    let now = Instant::now();
    if let Some(ip) = client
        && let Err(retry_after_s) = state.auth_failures().check(ip, &cfg.auth, now)
    {
        state.metrics().auth_failures_limited();
        return Err(ServiceError::AuthFailuresLimited { retry_after_s });
    }
    let Some(presented) = presented_key(req.headers()) else {
        return Err(ServiceError::Unauthorized(
            "missing API key (Authorization: Bearer <key> or X-Api-Key)".into(),
        ));
    };
    let Some(entry) = keys.lookup(presented) else {
        if let Some(ip) = client {
            state.auth_failures().failed(ip, &cfg.auth, now);
        }
        return Err(ServiceError::Unauthorized("invalid API key".into()));
    };
    permitted(entry, need)?;
    if let Err(retry_after_s) = state.take_token(entry) {
        state.metrics().rate_limited();
        return Err(ServiceError::RateLimited { retry_after_s });
    }
    Ok(Caller {
        request_id,
        key_id: Some(entry.id.clone()),
    })
}

/// Whether `entry` may call what needs `need`.
fn permitted(entry: &KeyEntry, need: Need) -> Result<(), ServiceError> {
    if need == Need::Admin && !entry.admin {
        return Err(ServiceError::Forbidden(
            "this API key is not an admin key".into(),
        ));
    }
    if need == Need::Approver && !(entry.approver || entry.admin) {
        return Err(ServiceError::Forbidden(
            "this API key is not an approver key ([[auth.keys]] approver = true)".into(),
        ));
    }
    Ok(())
}

/// [`authenticate`] with the limits in the shared state, in one round trip: the address's
/// failed-login allowance is read with, for a valid key that may make the call, a token
/// taken from its rate limit, or, for an invalid key, the failure counted. Refused (503)
/// when the shared state cannot be read.
fn authenticate_shared(
    state: &AppState,
    store: &dyn rampart_state::SharedStore,
    cfg: &AuthSection,
    client: Option<IpAddr>,
    presented: Option<&str>,
    entry: Option<&KeyEntry>,
    need: Need,
) -> Result<String, ServiceError> {
    let allowed = entry.map(|e| permitted(e, need));
    let mut ops = Vec::with_capacity(2);
    if let Some(ip) = client {
        ops.push(failure_op(ip, cfg, false));
        if presented.is_some() && entry.is_none() {
            ops.push(failure_op(ip, cfg, true));
        }
    }
    if let (Some(e), Some(Ok(()))) = (entry, &allowed) {
        ops.push(state.rate_op(e));
    }
    let replies = store
        .execute_many(&ops)
        .map_err(|e| state_unavailable(&crate::state::state_error(&e)))?;
    let mut replies = replies.into_iter();
    if client.is_some() {
        match bucket_outcome(replies.next())? {
            Ok(()) => {}
            Err(retry_after_s) => {
                state.metrics().auth_failures_limited();
                return Err(ServiceError::AuthFailuresLimited { retry_after_s });
            }
        }
    }
    let Some(_) = presented else {
        return Err(ServiceError::Unauthorized(
            "missing API key (Authorization: Bearer <key> or X-Api-Key)".into(),
        ));
    };
    let (Some(entry), Some(allowed)) = (entry, allowed) else {
        return Err(ServiceError::Unauthorized("invalid API key".into()));
    };
    allowed?;
    match bucket_outcome(replies.next())? {
        Ok(()) => Ok(entry.id.clone()),
        Err(retry_after_s) => {
            state.metrics().rate_limited();
            Err(ServiceError::RateLimited { retry_after_s })
        }
    }
}

/// The failed-login bucket operation of `client`: with `count`, one failure counted (down
/// to zero); without, a check that one more is allowed.
fn failure_op(client: IpAddr, cfg: &AuthSection, count: bool) -> rampart_state::Op {
    let cap = f64::from(cfg.max_failures);
    rampart_state::Op::Bucket {
        key: format!("authfail:{}", client_key(client)),
        capacity: cap,
        per_s: cap / (cfg.failure_window_ms as f64 / 1000.0),
        take: if count { 1.0 } else { 0.0 },
        need: 1.0,
        force: count,
        now_ms: crate::tools::now_ms(),
    }
}

/// `Ok(Ok(()))` allowed, `Ok(Err(seconds))` over the limit, `Err` a reply that is not a
/// bucket's.
fn bucket_outcome(reply: Option<rampart_state::Reply>) -> Result<Result<(), u64>, ServiceError> {
    match reply {
        Some(rampart_state::Reply::Bucket { allowed: true, .. }) => Ok(Ok(())),
        Some(rampart_state::Reply::Bucket { retry_after_ms, .. }) => {
            Ok(Err(retry_after_ms.div_ceil(1000).max(1)))
        }
        other => Err(state_unavailable(&format!("unexpected reply {other:?}"))),
    }
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
    guard(&state, req, next, Need::Key).await
}

/// Authenticates `/admin/*` requests (admin keys only) and inserts the [`Caller`].
pub(crate) async fn require_admin(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    guard(&state, req, next, Need::Admin).await
}

/// Guards the operations pages (`/metrics`, `/openapi.json`): open without keys; with
/// keys, open to a valid key, and without one as `[auth] open_operations` says (default:
/// loopback clients only).
pub(crate) async fn operations_access(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    use crate::config::OpenOperations;
    if state.keys().is_empty() || presented_key(req.headers()).is_none() {
        let client = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        let open = state.keys().is_empty()
            || match state.config().auth.open_operations {
                OpenOperations::Always => true,
                OpenOperations::Never => false,
                OpenOperations::Loopback => client.is_some_and(|ip| ip.is_loopback()),
            };
        if open {
            return next.run(req).await;
        }
        let id = request_id(req.headers());
        return finish(
            ServiceError::Unauthorized(
                "this page needs an API key from clients other than loopback \
                 ([auth] open_operations)"
                    .into(),
            )
            .into_response(),
            &id,
        );
    }
    guard(&state, req, next, Need::Key).await
}

/// Authenticates `/admin/approvals*` requests (approver or admin keys) and inserts the
/// [`Caller`].
pub(crate) async fn require_approver(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    guard(&state, req, next, Need::Approver).await
}

/// The body of the middlewares: authenticate (with the key `need`s), run the handler
/// with the [`Caller`], echo the request id.
async fn guard(state: &AppState, mut req: Request, next: Next, need: Need) -> Response {
    match authenticate(state, &req, need) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cfg(max_failures: u32, window_ms: u64, tracked: usize) -> AuthSection {
        AuthSection {
            max_failures,
            failure_window_ms: window_ms,
            max_tracked_clients: tracked,
            ..AuthSection::default()
        }
    }

    #[test]
    fn failures_run_out_and_come_back_per_address() {
        let c = cfg(3, 3000, 100);
        let l = FailureLimiter::default();
        let a = IpAddr::from([10, 0, 0, 1]);
        let b = IpAddr::from([10, 0, 0, 2]);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(l.check(a, &c, t0).is_ok());
            l.failed(a, &c, t0);
        }
        assert_eq!(l.check(a, &c, t0), Err(1));
        assert!(
            l.check(b, &c, t0).is_ok(),
            "another address is not affected"
        );
        assert!(
            l.check(a, &c, t0 + Duration::from_millis(1000)).is_ok(),
            "one forgiven"
        );
    }

    #[test]
    fn an_ipv6_64_is_one_client() {
        let c = cfg(1, 60_000, 100);
        let l = FailureLimiter::default();
        let t0 = Instant::now();
        let v6 = |s: &str| -> IpAddr { s.parse().expect("an IPv6 address") };
        l.failed(v6("2001:db8::1"), &c, t0);
        assert!(l.check(v6("2001:db8::2"), &c, t0).is_err());
        assert!(l.check(v6("2001:db8:0:1::1"), &c, t0).is_ok());
    }

    #[test]
    fn tracked_addresses_are_bounded() {
        let c = cfg(5, 60_000, 8);
        let l = FailureLimiter::default();
        let t0 = Instant::now();
        for i in 0..100u32 {
            l.failed(
                IpAddr::from(i.to_be_bytes()),
                &c,
                t0 + Duration::from_millis(u64::from(i)),
            );
        }
        assert_eq!(l.tracked(), 8);
        // The least recent are forgotten, the most recent kept.
        assert!(!l.is_tracked(IpAddr::from(0u32.to_be_bytes())));
        assert!(l.is_tracked(IpAddr::from(99u32.to_be_bytes())));
    }
}
