//! The OpenAI-compatible proxy: `POST /v1/chat/completions`, `POST /v1/completions`, and
//! the output check `POST /v1/scan/output`.
//!
//! Request flow (chat):
//! 1. The body is parsed as JSON; only `messages` (and `stream`) are interpreted, every other
//!    field is forwarded untouched. Each message's text (string content, or the `text` of
//!    each content part; an assistant message's tool-call arguments) becomes one segment with
//!    the message's role (`system`, `developer`, `user`, `assistant`, `tool`; `function` is
//!    `tool`). Trust per role comes from the pipeline's policy.
//! 2. The pipeline decides; the decision is recorded (metrics + audit) before anything is
//!    forwarded. BLOCK answers `400` with `code: "rampart_blocked"` and a summary of the
//!    decision (rule IDs, categories, spans; never text); the upstream sees nothing.
//!    SANITIZE forwards the sanitized texts in place of the originals.
//! 3. With `[canary] enabled`, a fresh canary is planted in the system prompt (see
//!    [`crate::canary`]).
//! 4. The request goes to `proxy.upstream_url` + the endpoint path, with
//!    `Authorization: Bearer $OPENAI_API_KEY` (`proxy.upstream_api_key_env`) when set. The
//!    client's own `Authorization` is a Rampart key and is never forwarded, nor are other
//!    client headers.
//! 5. The response is scanned ([`crate::output`]) before the client sees it. Plain JSON
//!    responses are passed through byte for byte when allowed; a blocked response is `400`
//!    with `code: "rampart_output_blocked"` (a 4xx, so OpenAI SDKs do not retry it and
//!    regenerate). Streams are guarded by [`crate::sse::StreamGuard`]: on a leak the client
//!    gets a final `data: {"error": …}` event, then `data: [DONE]`.
//!
//! Status codes: no upstream configured 503 (`service_unavailable`); upstream unreachable or
//! a malformed/oversized upstream answer 502 (`upstream_error`); no response within
//! `proxy.timeout_ms` (or a stream idle for `proxy.stream_idle_timeout_ms`) 504. Failing
//! open makes no sense for a forward (there is no answer to pass on), so these are always
//! errors. Upstream error statuses (4xx/5xx) are passed through with their body (after the
//! body is checked for canary and secret leaks).
//!
//! Every response carries `x-rampart-action` (the request's action; for plain responses the
//! stricter of request and response) and `x-rampart-request-id`.

use crate::api::{ApiJson, outcome_json};
use crate::canary::{Canary, CanarySet, Placement};
use crate::output::{OutputContext, OutputOutcome, OutputScanner, PromptIndex, ScanOutputRequest};
use crate::sse::{SseParser, StreamGuard, data_event};
use crate::state::{AppState, Caller, ServiceError};
use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use rampart_core::{
    Action, Decision, FailMode, Role, SanitizedSegment, ScanOutcome, ScanRequest, Segment,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// Endpoint label of the chat proxy (metrics, audit).
const EP_CHAT: &str = "/v1/chat/completions";
/// Endpoint label of a chat response scan.
const EP_CHAT_RESPONSE: &str = "/v1/chat/completions#response";
/// Endpoint label of the legacy completions proxy.
const EP_COMPLETIONS: &str = "/v1/completions";
/// Endpoint label of a legacy completions response scan.
const EP_COMPLETIONS_RESPONSE: &str = "/v1/completions#response";
/// Endpoint label of the output check.
const EP_SCAN_OUTPUT: &str = "/v1/scan/output";
/// Most canaries one `/v1/scan/output` call may give.
const MAX_CANARIES: usize = 32;

/// `[proxy]`: the OpenAI-compatible upstream.
///
/// ```toml
/// [proxy]
/// upstream_url = "http://127.0.0.1:11434/v1"   # the path (/chat/completions) is appended
/// upstream_api_key_env = "OPENAI_API_KEY"       # sent as Bearer when set and non-empty
/// timeout_ms = 120000                           # until the response (all of it, when not streamed)
/// stream_idle_timeout_ms = 60000                # longest gap between streamed chunks
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
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            upstream_url: None,
            upstream_api_key_env: "OPENAI_API_KEY".into(),
            timeout_ms: 120_000,
            stream_idle_timeout_ms: 60_000,
        }
    }
}

impl ProxyConfig {
    /// Semantic checks.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(u) = &self.upstream_url
            && !(u.starts_with("http://") || u.starts_with("https://"))
        {
            return Err("proxy.upstream_url must start with http:// or https://".into());
        }
        if self.timeout_ms == 0 || self.stream_idle_timeout_ms == 0 {
            return Err("proxy timeouts must be greater than zero".into());
        }
        if self.upstream_api_key_env.is_empty() {
            return Err("proxy.upstream_api_key_env must not be empty".into());
        }
        Ok(())
    }

    /// The full URL of an endpoint (`path` like `/chat/completions`).
    fn endpoint(&self, path: &str) -> Option<String> {
        self.upstream_url
            .as_deref()
            .map(|u| format!("{}{path}", u.trim_end_matches('/')))
    }
}

/// Sets `proxy.upstream_url` (the `RAMPART_UPSTREAM_URL` override; empty unsets it).
pub fn set_upstream_url(cfg: &mut ProxyConfig, url: String) {
    cfg.upstream_url = (!url.trim().is_empty()).then(|| url.trim().to_string());
}

/// The proxy and output-check routes (the caller adds authentication).
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/scan/output", post(scan_output))
}

fn caller_of(ext: Option<Extension<Caller>>) -> Caller {
    ext.map(|Extension(c)| c).unwrap_or_else(|| Caller {
        request_id: "unknown".into(),
        key_id: None,
    })
}

/// Adds the Rampart headers to a response.
fn with_headers(mut resp: Response, action: Action, caller: &Caller) -> Response {
    let h = resp.headers_mut();
    h.insert("x-rampart-action", HeaderValue::from_static(action.name()));
    if let Ok(v) = HeaderValue::from_str(&caller.request_id) {
        h.insert("x-rampart-request-id", v);
    }
    resp
}

fn error_response(e: ServiceError, caller: &Caller, action: Option<Action>) -> Response {
    let resp = e.into_response();
    match action {
        Some(a) => with_headers(resp, a, caller),
        None => {
            let mut resp = resp;
            if let Ok(v) = HeaderValue::from_str(&caller.request_id) {
                resp.headers_mut().insert("x-rampart-request-id", v);
            }
            resp
        }
    }
}

/// A summary of a decision for error bodies: no text, only evidence.
fn decision_summary(d: &Decision, request_id: &str) -> Value {
    json!({
        "request_id": request_id,
        "action": d.action,
        "risk": d.risk,
        "categories": d.categories,
        "findings": d.findings.iter().map(|f| json!({
            "rule_id": f.rule_id,
            "category": f.category,
            "segment": f.segment,
            "role": f.role,
            "span": f.span,
            "counted": f.counted,
        })).collect::<Vec<_>>(),
        "reasons": d.reasons,
        "degraded": d.degraded,
        "input_hash": d.input_hash,
        "policy_version": d.policy_version,
    })
}

/// "CTRL_001 (control_phrase), SYS_004 (system_marker)": the counted rules, or every rule
/// when none counted.
fn rules_line(d: &Decision) -> String {
    let mut seen = Vec::<(String, String)>::new();
    let any_counted = d.findings.iter().any(|f| f.counted);
    for f in d.findings.iter().filter(|f| f.counted || !any_counted) {
        let item = (f.rule_id.clone(), f.category.name().to_string());
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    if seen.is_empty() {
        return d
            .reasons
            .first()
            .cloned()
            .unwrap_or_else(|| "policy".to_string());
    }
    seen.iter()
        .map(|(r, c)| format!("{r} ({c})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The OpenAI-shaped error object for a blocked request or response.
fn blocked_error(d: &Decision, request_id: &str, response: bool) -> Value {
    let (what, code) = if response {
        ("Response blocked by Rampart", "rampart_output_blocked")
    } else {
        ("Request blocked by Rampart", "rampart_blocked")
    };
    json!({"error": {
        "message": format!("{what}: {}", rules_line(d)),
        "type": "invalid_request_error",
        "param": null,
        "code": code,
        "rampart": decision_summary(d, request_id),
    }})
}

fn blocked_response(d: &Decision, caller: &Caller, response: bool) -> Response {
    let body = blocked_error(d, &caller.request_id, response);
    with_headers(
        (StatusCode::BAD_REQUEST, axum::Json(body)).into_response(),
        Action::Block,
        caller,
    )
}

/// Where a segment's text lives in the request JSON.
#[derive(Debug, Clone)]
enum Slot {
    /// `messages[i].content` (a string).
    Content(usize),
    /// `messages[i].content[j].text`.
    Part(usize, usize),
    /// `messages[i].tool_calls[j].function.arguments`.
    ToolArgs(usize, usize),
    /// `prompt` (a string).
    Prompt,
    /// `prompt[j]`.
    PromptItem(usize),
    /// `suffix`.
    Suffix,
}

impl Slot {
    fn get_mut<'a>(&self, body: &'a mut Value) -> Option<&'a mut Value> {
        match *self {
            Slot::Content(i) => body.get_mut("messages")?.get_mut(i)?.get_mut("content"),
            Slot::Part(i, j) => body
                .get_mut("messages")?
                .get_mut(i)?
                .get_mut("content")?
                .get_mut(j)?
                .get_mut("text"),
            Slot::ToolArgs(i, j) => body
                .get_mut("messages")?
                .get_mut(i)?
                .get_mut("tool_calls")?
                .get_mut(j)?
                .get_mut("function")?
                .get_mut("arguments"),
            Slot::Prompt => body.get_mut("prompt"),
            Slot::PromptItem(j) => body.get_mut("prompt")?.get_mut(j),
            Slot::Suffix => body.get_mut("suffix"),
        }
    }
}

/// The request's segments, where each came from, and the system prompt text.
#[derive(Debug, Default)]
struct Extracted {
    segments: Vec<Segment>,
    slots: Vec<Slot>,
    system_prompt: String,
}

fn role_of(name: &str) -> Option<Role> {
    Some(match name {
        "system" => Role::System,
        "developer" => Role::Developer,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" | "function" => Role::Tool,
        _ => return None,
    })
}

fn extract_chat(body: &Value) -> Result<Extracted, ServiceError> {
    let bad = |m: String| ServiceError::BadRequest(m);
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("\"messages\" must be an array of messages".into()))?;
    if messages.is_empty() {
        return Err(bad("\"messages\" must not be empty".into()));
    }
    let mut out = Extracted::default();
    for (i, m) in messages.iter().enumerate() {
        let role_name = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("messages[{i}]: missing \"role\"")))?;
        let role = role_of(role_name).ok_or_else(|| {
            bad(format!(
                "messages[{i}]: unknown role (expected system, developer, user, assistant, tool)"
            ))
        })?;
        let push = |text: &str, slot: Slot, out: &mut Extracted| {
            if matches!(role, Role::System | Role::Developer) {
                if !out.system_prompt.is_empty() {
                    out.system_prompt.push('\n');
                }
                out.system_prompt.push_str(text);
            }
            if !text.is_empty() {
                out.segments.push(Segment::new(role, text));
                out.slots.push(slot);
            }
        };
        match m.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => push(s, Slot::Content(i), &mut out),
            Some(Value::Array(parts)) => {
                for (j, p) in parts.iter().enumerate() {
                    match p {
                        Value::Object(o) => {
                            if let Some(t) = o.get("text").and_then(Value::as_str) {
                                push(t, Slot::Part(i, j), &mut out);
                            } else if o.get("type").and_then(Value::as_str) == Some("text") {
                                return Err(bad(format!(
                                    "messages[{i}].content[{j}]: a text part needs a \"text\" string"
                                )));
                            }
                        }
                        _ => {
                            return Err(bad(format!(
                                "messages[{i}].content[{j}]: content parts must be objects"
                            )));
                        }
                    }
                }
            }
            Some(_) => {
                return Err(bad(format!(
                    "messages[{i}].content must be a string, an array of parts, or null"
                )));
            }
        }
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for (j, c) in calls.iter().enumerate() {
                if let Some(a) = c
                    .get("function")
                    .and_then(|f| f.get("arguments"))
                    .and_then(Value::as_str)
                {
                    push(a, Slot::ToolArgs(i, j), &mut out);
                }
            }
        }
    }
    Ok(out)
}

fn extract_completions(body: &Value) -> Result<Extracted, ServiceError> {
    let bad = |m: &str| ServiceError::BadRequest(m.to_string());
    let mut out = Extracted::default();
    match body.get("prompt") {
        Some(Value::String(s)) => {
            out.segments.push(Segment::new(Role::User, s.as_str()));
            out.slots.push(Slot::Prompt);
        }
        Some(Value::Array(items)) => {
            for (j, it) in items.iter().enumerate() {
                match it {
                    Value::String(s) => {
                        out.segments.push(Segment::new(Role::User, s.as_str()));
                        out.slots.push(Slot::PromptItem(j));
                    }
                    _ => {
                        return Err(bad(
                            "\"prompt\" must be a string or an array of strings (token-id \
                             prompts cannot be scanned)",
                        ));
                    }
                }
            }
        }
        None => return Err(bad("missing \"prompt\"")),
        Some(_) => {
            return Err(bad(
                "\"prompt\" must be a string or an array of strings (token-id prompts cannot \
                 be scanned)",
            ));
        }
    }
    if let Some(Value::String(s)) = body.get("suffix") {
        out.segments.push(Segment::new(Role::User, s.as_str()));
        out.slots.push(Slot::Suffix);
    }
    Ok(out)
}

/// Plants the canary: into the first system/developer message, or a new first system
/// message.
fn plant_canary(body: &mut Value, text: &str, placement: Placement) {
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    let target = match placement {
        Placement::Message => None,
        _ => messages.iter().position(|m| {
            matches!(
                m.get("role").and_then(Value::as_str),
                Some("system" | "developer")
            ) && matches!(m.get("content"), Some(Value::String(_) | Value::Array(_)))
        }),
    };
    if let Some(i) = target
        && let Some(content) = messages.get_mut(i).and_then(|m| m.get_mut("content"))
    {
        match content {
            Value::String(s) => {
                *s = match placement {
                    Placement::Start => format!("{text}\n\n{s}"),
                    _ => format!("{s}\n\n{text}"),
                };
                return;
            }
            Value::Array(parts) => {
                let part = json!({"type": "text", "text": text});
                match placement {
                    Placement::Start => parts.insert(0, part),
                    _ => parts.push(part),
                }
                return;
            }
            _ => {}
        }
    }
    messages.insert(0, json!({"role": "system", "content": text}));
}

/// Which proxied endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Completions,
}

impl Kind {
    fn path(self) -> &'static str {
        match self {
            Kind::Chat => "/chat/completions",
            Kind::Completions => "/completions",
        }
    }
    fn endpoint(self) -> &'static str {
        match self {
            Kind::Chat => EP_CHAT,
            Kind::Completions => EP_COMPLETIONS,
        }
    }
    fn response_endpoint(self) -> &'static str {
        match self {
            Kind::Chat => EP_CHAT_RESPONSE,
            Kind::Completions => EP_COMPLETIONS_RESPONSE,
        }
    }
}

async fn chat_completions(
    State(state): State<Arc<AppState>>,
    caller: Option<Extension<Caller>>,
    body: Bytes,
) -> Response {
    let caller = caller_of(caller);
    proxy(state, caller, body, Kind::Chat).await
}

async fn completions(
    State(state): State<Arc<AppState>>,
    caller: Option<Extension<Caller>>,
    body: Bytes,
) -> Response {
    let caller = caller_of(caller);
    proxy(state, caller, body, Kind::Completions).await
}

async fn proxy(state: Arc<AppState>, caller: Caller, raw: Bytes, kind: Kind) -> Response {
    match proxy_inner(&state, &caller, raw, kind).await {
        Ok(r) => r,
        Err((e, action)) => error_response(e, &caller, action),
    }
}

type ProxyResult = Result<Response, (ServiceError, Option<Action>)>;

async fn proxy_inner(
    state: &Arc<AppState>,
    caller: &Caller,
    raw: Bytes,
    kind: Kind,
) -> ProxyResult {
    let mut body: Value = serde_json::from_slice(&raw).map_err(|e| {
        (
            ServiceError::BadRequest(crate::api::json_error_message(&e)),
            None,
        )
    })?;
    if !body.is_object() {
        return Err((
            ServiceError::BadRequest("the request body must be a JSON object".into()),
            None,
        ));
    }
    let extracted = match kind {
        Kind::Chat => extract_chat(&body),
        Kind::Completions => extract_completions(&body),
    }
    .map_err(|e| (e, None))?;
    let mut segments = extracted.segments;
    if segments.is_empty() {
        // Nothing textual (e.g. images only): the decision is still made and recorded.
        segments.push(Segment::new(Role::User, ""));
    }
    let outcome = state
        .scan(ScanRequest::segments(segments))
        .await
        .map_err(|e| (e, None))?;
    state
        .record(caller, kind.endpoint(), &outcome.decision)
        .await
        .map_err(|e| (e, None))?;
    let action = outcome.decision.action;
    match action {
        Action::Block => return Ok(blocked_response(&outcome.decision, caller, false)),
        Action::Sanitize => apply_sanitized(&mut body, &extracted.slots, &outcome),
        Action::Allow => {}
    }

    let config = state.config();
    let Some(url) = config.proxy.endpoint(kind.path()) else {
        return Err((
            ServiceError::Unavailable(
                "no upstream is configured for the proxy: set proxy.upstream_url (or \
                 RAMPART_UPSTREAM_URL)"
                    .into(),
            ),
            Some(action),
        ));
    };

    // The output context: canary (chat only) and the system prompt.
    let mut canaries = Vec::new();
    if config.canary.enabled && kind == Kind::Chat {
        let canary = Canary::generate(&config.canary.prefix)
            .map_err(|e| (ServiceError::Internal(e.to_string()), Some(action)))?;
        plant_canary(
            &mut body,
            &config.canary.render(&canary),
            config.canary.placement,
        );
        canaries.push(canary);
    }
    let ctx = OutputContext {
        canaries: CanarySet::new(&canaries),
        system_prompt: PromptIndex::new(
            &extracted.system_prompt,
            config.output.system_prompt_min_words,
        ),
    };
    // Output scanning off: only the planted canary is looked for.
    let scanner =
        (config.output.enabled || !canaries.is_empty()).then(|| state.proxy_output_scanner());

    // Forward.
    let forward = serde_json::to_vec(&body)
        .map_err(|e| (ServiceError::Internal(e.to_string()), Some(action)))?;
    let mut req = state
        .http_client()
        .post(&url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(forward);
    if let Ok(key) = std::env::var(&config.proxy.upstream_api_key_env)
        && !key.is_empty()
    {
        req = req.bearer_auth(key);
    }
    let timeout = Duration::from_millis(config.proxy.timeout_ms);
    let started = tokio::time::Instant::now();
    let resp = match tokio::time::timeout(timeout, req.send()).await {
        Err(_) => {
            return Err((
                ServiceError::Timeout(format!(
                    "the upstream did not answer within {} ms (proxy.timeout_ms)",
                    config.proxy.timeout_ms
                )),
                Some(action),
            ));
        }
        Ok(Err(e)) if e.is_timeout() => {
            return Err((
                ServiceError::Timeout("the upstream request timed out".into()),
                Some(action),
            ));
        }
        Ok(Err(e)) => {
            let what = if e.is_connect() {
                "cannot connect to the upstream"
            } else {
                "the upstream request failed"
            };
            tracing::warn!(request_id = %caller.request_id, error = %e, "upstream failed");
            return Err((
                ServiceError::BadGateway(format!("{what} ({})", upstream_host(&url))),
                Some(action),
            ));
        }
        Ok(Ok(r)) => r,
    };

    let status = resp.status();
    let is_stream = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if is_stream && status.is_success() {
        return Ok(stream_response(
            state.clone(),
            caller.clone(),
            resp,
            kind,
            scanner,
            ctx,
            action,
            Duration::from_millis(config.proxy.stream_idle_timeout_ms),
        ));
    }

    // Plain response: read it whole (bounded, within the deadline).
    let max = config.output.max_response_bytes;
    let remaining = timeout.saturating_sub(started.elapsed());
    let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
    let bytes = match tokio::time::timeout(remaining, read_limited(resp, max)).await {
        Err(_) => {
            return Err((
                ServiceError::Timeout(format!(
                    "the upstream's answer did not complete within {} ms (proxy.timeout_ms)",
                    config.proxy.timeout_ms
                )),
                Some(action),
            ));
        }
        Ok(Err(e)) => return Err((e, Some(action))),
        Ok(Ok(b)) => b,
    };
    let mut final_action = action;
    let mut out_bytes = bytes.clone();
    if let Some(scanner) = scanner {
        match scan_plain_response(state, &scanner, &ctx, &bytes, kind, caller).await {
            Ok(PlainVerdict::Pass) => {}
            Ok(PlainVerdict::Blocked(d)) => return Ok(blocked_response(&d, caller, true)),
            Ok(PlainVerdict::Sanitized(b)) => {
                out_bytes = b;
                final_action = final_action.max(Action::Sanitize);
            }
            Err(e) => return Err((e, Some(action))),
        }
    }
    let mut r = Response::new(Body::from(out_bytes));
    *r.status_mut() = StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        content_type.unwrap_or_else(|| HeaderValue::from_static("application/json")),
    );
    Ok(with_headers(r, final_action, caller))
}

/// Host (and port) of the upstream, for error messages (never the path or credentials).
fn upstream_host(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.host_str().map(|h| {
                format!(
                    "{h}{}",
                    u.port().map(|p| format!(":{p}")).unwrap_or_default()
                )
            })
        })
        .unwrap_or_else(|| "upstream".into())
}

async fn read_limited(mut resp: reqwest::Response, max: usize) -> Result<Bytes, ServiceError> {
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

fn apply_sanitized(body: &mut Value, slots: &[Slot], outcome: &ScanOutcome) {
    for s in outcome.sanitized.iter().flatten() {
        if let Some(slot) = slots.get(s.segment)
            && let Some(v) = slot.get_mut(body)
        {
            *v = Value::String(s.text.clone());
        }
    }
}

enum PlainVerdict {
    Pass,
    Blocked(Box<Decision>),
    Sanitized(Bytes),
}

/// Texts of a plain response: JSON pointers and texts.
fn response_texts(v: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(choices) = v.get("choices").and_then(Value::as_array) else {
        return out;
    };
    for (i, c) in choices.iter().enumerate() {
        if let Some(t) = c.get("text").and_then(Value::as_str) {
            out.push((format!("/choices/{i}/text"), t.to_string()));
        }
        let Some(m) = c.get("message") else { continue };
        for field in ["content", "refusal", "reasoning_content"] {
            match m.get(field) {
                Some(Value::String(t)) => {
                    out.push((format!("/choices/{i}/message/{field}"), t.clone()))
                }
                Some(Value::Array(parts)) => {
                    for (j, p) in parts.iter().enumerate() {
                        if let Some(t) = p.get("text").and_then(Value::as_str) {
                            out.push((format!("/choices/{i}/message/{field}/{j}/text"), t.into()));
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for (j, call) in calls.iter().enumerate() {
                if let Some(a) = call
                    .get("function")
                    .and_then(|f| f.get("arguments"))
                    .and_then(Value::as_str)
                {
                    out.push((
                        format!("/choices/{i}/message/tool_calls/{j}/function/arguments"),
                        a.to_string(),
                    ));
                }
            }
        }
    }
    out
}

/// Runs the output scanner on the blocking pool within the request deadline.
async fn run_scan(
    state: &AppState,
    scanner: &Arc<OutputScanner>,
    ctx: &OutputContext,
    text: String,
) -> Result<OutputOutcome, ServiceError> {
    let (s, c) = (scanner.clone(), ctx.clone());
    let task = tokio::task::spawn_blocking(move || s.scan(&text, &c, None));
    let cfg = state.config();
    let deadline = Duration::from_millis(cfg.server.request_timeout_ms);
    match tokio::time::timeout(deadline, task).await {
        Ok(Ok(Ok(o))) => Ok(o),
        Ok(Ok(Err(e))) => Err(ServiceError::BadGateway(format!(
            "the upstream's answer cannot be scanned: {e}"
        ))),
        Ok(Err(_)) => Err(ServiceError::Internal("the response scan failed".into())),
        Err(_) => Err(ServiceError::Timeout(format!(
            "the response scan did not finish within {} ms",
            cfg.server.request_timeout_ms
        ))),
    }
}

async fn scan_plain_response(
    state: &AppState,
    scanner: &Arc<OutputScanner>,
    ctx: &OutputContext,
    bytes: &Bytes,
    kind: Kind,
    caller: &Caller,
) -> Result<PlainVerdict, ServiceError> {
    let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
    let texts = match &parsed {
        Some(v) if v.get("choices").is_some() => response_texts(v),
        // An error body or something unexpected: check it whole, as text.
        _ => vec![(String::new(), String::from_utf8_lossy(bytes).into_owned())],
    };
    if texts.iter().all(|(_, t)| t.is_empty()) {
        return Ok(PlainVerdict::Pass);
    }
    let joined = texts
        .iter()
        .map(|(_, t)| t.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let outcome = match run_scan(state, scanner, ctx, joined).await {
        Ok(o) => o,
        Err(e) => {
            let mode = state.pipeline().config().policy.fail_mode;
            if mode == FailMode::Open {
                tracing::warn!(request_id = %caller.request_id, error = %e, "response scan failed; fail mode open");
                return Ok(PlainVerdict::Pass);
            }
            return Err(e);
        }
    };
    let d = outcome.decision;
    // Every response decision is audited, ALLOW included.
    state.record(caller, kind.response_endpoint(), &d).await?;
    match d.action {
        Action::Allow => Ok(PlainVerdict::Pass),
        Action::Block => Ok(PlainVerdict::Blocked(Box::new(d))),
        Action::Sanitize => {
            // Redact piece by piece so each JSON string gets its own sanitized text.
            let Some(mut v) = parsed else {
                return Ok(PlainVerdict::Blocked(Box::new(d)));
            };
            for (ptr, text) in &texts {
                let o = run_scan(state, scanner, ctx, text.clone()).await?;
                match o.decision.action {
                    Action::Block => return Ok(PlainVerdict::Blocked(Box::new(d))),
                    Action::Sanitize => {
                        if let (Some(s), Some(slot)) = (o.sanitized, v.pointer_mut(ptr)) {
                            *slot = Value::String(s.text);
                        }
                    }
                    Action::Allow => {}
                }
            }
            let b = serde_json::to_vec(&v).map_err(|e| ServiceError::Internal(e.to_string()))?;
            Ok(PlainVerdict::Sanitized(Bytes::from(b)))
        }
    }
}

/// The streamed answer: events go through the hold-back guard on a task; the client gets
/// them through a channel.
#[allow(clippy::too_many_arguments)]
fn stream_response(
    state: Arc<AppState>,
    caller: Caller,
    mut resp: reqwest::Response,
    kind: Kind,
    scanner: Option<Arc<OutputScanner>>,
    ctx: OutputContext,
    action: Action,
    idle: Duration,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(32);
    let caller2 = caller.clone();
    tokio::spawn(async move {
        let caller = caller2;
        if scanner.is_none() {
            // Nothing to look for: pass the stream through as it comes.
            loop {
                match tokio::time::timeout(idle, resp.chunk()).await {
                    Ok(Ok(Some(c))) => {
                        if tx.send(c).await.is_err() {
                            return;
                        }
                    }
                    Ok(Ok(None)) => return,
                    Ok(Err(_)) | Err(_) => {
                        let err = json!({"error": {
                            "message": "the upstream stream broke off or went idle",
                            "type": "api_error", "param": null, "code": "upstream_error"}});
                        let _ = tx.send(data_event(&err.to_string())).await;
                        return;
                    }
                }
            }
        }
        let holdback = scanner
            .as_ref()
            .map(|s| s.config().stream_holdback_bytes)
            .unwrap_or(256)
            .max(ctx.canaries.max_reach() + 8);
        let mut guard = StreamGuard::new(holdback);
        let mut parser = SseParser::new();
        // The decision of the latest scan, when it found something.
        let mut blocking: Option<Decision> = None;
        // The decision of the latest scan that allowed its window: what the audit log gets
        // for a stream that ends allowed (its input hash covers that last window).
        let mut last_allowed: Option<Decision> = None;
        let mut scan = |w: &str, offset: usize| -> Result<Vec<std::ops::Range<usize>>, String> {
            blocking = None;
            let Some(s) = &scanner else {
                return Ok(Vec::new());
            };
            let o = s.scan(w, &ctx, None).map_err(|e| e.to_string())?;
            if o.decision.action == Action::Allow {
                last_allowed = Some(o.decision);
                return Ok(Vec::new());
            }
            let mut spans: Vec<_> = o
                .decision
                .findings
                .iter()
                .filter(|f| f.counted)
                .map(|f| f.span.start..f.span.end)
                .collect();
            if spans.is_empty() {
                // Not ALLOW without a counted finding: a layer failed and the fail mode
                // said BLOCK. The whole window is suspect.
                spans.push(0..w.len());
            }
            let mut d = o.decision;
            for f in &mut d.findings {
                f.span.start += offset;
                f.span.end += offset;
            }
            // Streams cannot be edited after the fact: SANITIZE cuts like BLOCK.
            d.action = Action::Block;
            blocking = Some(d);
            Ok(spans)
        };
        let mut ended_with_error: Option<Value> = None;
        let mut blocked = false;
        'read: loop {
            let chunk = match tokio::time::timeout(idle, resp.chunk()).await {
                Err(_) => {
                    ended_with_error = Some(json!({"error": {
                        "message": format!("the upstream stream was idle for more than {} ms", idle.as_millis()),
                        "type": "api_error", "param": null, "code": "timeout"}}));
                    break;
                }
                Ok(Err(_)) => {
                    ended_with_error = Some(json!({"error": {
                        "message": "the upstream stream broke off",
                        "type": "api_error", "param": null, "code": "upstream_error"}}));
                    break;
                }
                Ok(Ok(None)) => break,
                Ok(Ok(Some(c))) => c,
            };
            let events = match parser.push(&chunk) {
                Ok(e) => e,
                Err(e) => {
                    ended_with_error = Some(json!({"error": {
                        "message": e.to_string(), "type": "api_error", "param": null,
                        "code": "upstream_error"}}));
                    break;
                }
            };
            for ev in events {
                match guard.push(ev, &mut scan) {
                    Ok(out) => {
                        for b in out {
                            if tx.send(b).await.is_err() {
                                return; // the client went away
                            }
                        }
                    }
                    Err(_) => {
                        blocked = true;
                        break 'read;
                    }
                }
            }
        }
        if !blocked && let Some(ev) = parser.finish() {
            match guard.push(ev, &mut scan) {
                Ok(out) => {
                    for b in out {
                        if tx.send(b).await.is_err() {
                            return;
                        }
                    }
                }
                Err(_) => blocked = true,
            }
        }
        if !blocked {
            match guard.finish(&mut scan) {
                Ok(out) => {
                    for b in out {
                        if tx.send(b).await.is_err() {
                            return;
                        }
                    }
                }
                Err(_) => blocked = true,
            }
        }
        if blocked {
            let body = match &blocking {
                Some(d) => {
                    if let Err(e) = state.record(&caller, kind.response_endpoint(), d).await {
                        tracing::error!(request_id = %caller.request_id, error = %e, "recording a blocked stream failed");
                    }
                    blocked_error(d, &caller.request_id, true)
                }
                None => json!({"error": {
                    "message": "Response blocked by Rampart: the response scan failed (fail closed)",
                    "type": "api_error", "param": null, "code": "rampart_output_blocked"}}),
            };
            let _ = tx.send(data_event(&body.to_string())).await;
            let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
            return;
        }
        if let Some(d) = &last_allowed
            && let Err(e) = state.record(&caller, kind.response_endpoint(), d).await
        {
            tracing::error!(request_id = %caller.request_id, error = %e, "recording an allowed stream failed");
        }
        if let Some(err) = ended_with_error {
            let _ = tx.send(data_event(&err.to_string())).await;
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<Bytes, Infallible>(b), rx))
    });
    let mut r = Response::new(Body::from_stream(stream));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    with_headers(r, action, &caller)
}

/// `POST /v1/scan/output`.
async fn scan_output(
    State(state): State<Arc<AppState>>,
    caller: Option<Extension<Caller>>,
    ApiJson(body): ApiJson<ScanOutputRequest>,
) -> Result<axum::Json<Value>, ServiceError> {
    let caller = caller_of(caller);
    if body.canaries.len() > MAX_CANARIES {
        return Err(ServiceError::BadRequest(format!(
            "at most {MAX_CANARIES} canaries per request"
        )));
    }
    let canaries = body
        .canaries
        .iter()
        .map(|c| Canary::from_text(c.as_str()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
    let config = state.config();
    let ctx = OutputContext {
        canaries: CanarySet::new(&canaries),
        system_prompt: body
            .system_prompt
            .as_deref()
            .and_then(|p| PromptIndex::new(p, config.output.system_prompt_min_words)),
    };
    let pipeline = state.pipeline();
    let max = pipeline.config().limits.max_bytes;
    if body.text.len() > max {
        return Err(ServiceError::TooLarge(format!(
            "text is {} bytes; the limit is {max} bytes (input is never truncated)",
            body.text.len()
        )));
    }
    let scanner = state.output_scanner();
    let (id, text) = (body.id, body.text);
    let deadline = Duration::from_millis(config.server.request_timeout_ms);
    let task = tokio::task::spawn_blocking(move || {
        scanner.scan(&text, &ctx, id).map_err(ServiceError::from)
    });
    let outcome = match tokio::time::timeout(deadline, task).await {
        Ok(Ok(r)) => r?,
        Ok(Err(_)) => return Err(ServiceError::Internal("the output scan failed".into())),
        Err(_) => {
            return Err(ServiceError::Timeout(format!(
                "the output scan did not finish within {} ms",
                config.server.request_timeout_ms
            )));
        }
    };
    state
        .record(&caller, EP_SCAN_OUTPUT, &outcome.decision)
        .await?;
    let so = ScanOutcome {
        decision: outcome.decision,
        sanitized: outcome.sanitized.map(|s: SanitizedSegment| vec![s]),
    };
    Ok(axum::Json(outcome_json(&so)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_roles_parts_and_tool_args() {
        let body = json!({"model": "m", "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "1", "content": "result"}
        ]});
        let e = extract_chat(&body).expect("valid");
        let roles: Vec<Role> = e.segments.iter().map(|s| s.role).collect();
        assert_eq!(
            roles,
            [Role::System, Role::User, Role::Assistant, Role::Tool]
        );
        assert_eq!(e.system_prompt, "sys");
        assert!(extract_chat(&json!({"messages": [{"role": "wizard", "content": "x"}]})).is_err());
        assert!(extract_chat(&json!({"messages": "x"})).is_err());
    }

    #[test]
    fn completions_prompt_forms() {
        assert_eq!(
            extract_completions(&json!({"prompt": "a"}))
                .expect("ok")
                .segments
                .len(),
            1
        );
        assert_eq!(
            extract_completions(&json!({"prompt": ["a", "b"], "suffix": "c"}))
                .expect("ok")
                .segments
                .len(),
            3
        );
        assert!(extract_completions(&json!({"prompt": [1, 2, 3]})).is_err());
    }

    #[test]
    fn sanitized_text_goes_back_to_its_slot() {
        let mut body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
        ], "temperature": 0.5});
        let e = extract_chat(&body).expect("ok");
        let outcome = ScanOutcome {
            decision: rampart_core::Pipeline::default_pipeline()
                .expect("pipeline")
                .scan_text("x")
                .expect("scan")
                .decision,
            sanitized: Some(vec![SanitizedSegment {
                segment: 1,
                role: Role::User,
                text: "B!".into(),
                removed: 1,
            }]),
        };
        apply_sanitized(&mut body, &e.slots, &outcome);
        assert_eq!(body["messages"][0]["content"][1]["text"], "B!");
        assert_eq!(body["messages"][0]["content"][0]["text"], "a");
        assert_eq!(body["temperature"], 0.5);
    }

    #[test]
    fn canary_placement() {
        let mut b = json!({"messages": [{"role": "user", "content": "u"}]});
        plant_canary(&mut b, "C", Placement::End);
        assert_eq!(b["messages"][0], json!({"role": "system", "content": "C"}));
        let mut b = json!({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}]});
        plant_canary(&mut b, "C", Placement::End);
        assert_eq!(b["messages"][0]["content"], "S\n\nC");
        plant_canary(&mut b, "D", Placement::Start);
        assert_eq!(b["messages"][0]["content"], "D\n\nS\n\nC");
    }

    #[test]
    fn config_validation_and_env_override() {
        let mut c = ProxyConfig::default();
        assert!(c.validate().is_ok());
        set_upstream_url(&mut c, "ftp://x".into());
        assert!(c.validate().is_err());
        set_upstream_url(&mut c, "http://127.0.0.1:1/v1/".into());
        assert_eq!(
            c.endpoint("/chat/completions").as_deref(),
            Some("http://127.0.0.1:1/v1/chat/completions")
        );
        set_upstream_url(&mut c, String::new());
        assert_eq!(c.upstream_url, None);
    }
}
