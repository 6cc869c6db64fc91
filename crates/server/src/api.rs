//! The router and the check API: `POST /v1/scan`, `POST /v1/scan/batch`, `POST /v1/relate`.

use crate::auth;
use crate::ops;
use crate::state::{AppState, Caller, ServiceError};
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use bytes::Bytes;
use rampart_core::conversation::{ConversationRequest, Turn};
use rampart_core::{ScanOutcome, ScanRequest, Segment};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// The whole application.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    let max_body = state.config().server.max_body_bytes;
    let v1 = Router::new()
        .route("/v1/scan", post(scan))
        .route("/v1/scan/batch", post(batch))
        .route("/v1/relate", post(relate))
        .route("/v1/tools/check", post(crate::tools::check))
        .merge(crate::proxy::routes())
        .route_layer(from_fn_with_state(state.clone(), auth::require_key));
    let admin = Router::new()
        .route("/admin/reload", post(ops::reload))
        .route(
            "/admin/breakglass",
            post(crate::tools::breakglass_grant).get(crate::tools::breakglass_list),
        )
        .route(
            "/admin/breakglass/{id}",
            axum::routing::delete(crate::tools::breakglass_revoke),
        )
        .route_layer(from_fn_with_state(state.clone(), auth::require_admin));
    let approvals = Router::new()
        .route("/admin/approvals", get(crate::tools::approvals_list))
        .route(
            "/admin/approvals/{id}/approve",
            post(crate::tools::approval_approve),
        )
        .route(
            "/admin/approvals/{id}/deny",
            post(crate::tools::approval_deny),
        )
        .route_layer(from_fn_with_state(state.clone(), auth::require_approver));
    let operations = Router::new()
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(ops::openapi))
        .route_layer(from_fn_with_state(state.clone(), auth::operations_access));
    Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .merge(operations)
        .merge(v1)
        .merge(admin)
        .merge(approvals)
        .route_layer(from_fn_with_state(max_body, refuse_declared_oversize))
        .route_layer(from_fn_with_state(state.clone(), auth::observe))
        .fallback(not_found)
        .layer(axum::middleware::map_response(json_method_not_allowed))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}

/// Requests that match no route: the observing middleware runs on matched routes only, so
/// these are counted here (endpoint `unmatched`).
async fn not_found(State(state): State<Arc<AppState>>) -> ServiceError {
    let e = ServiceError::NotFound;
    state
        .metrics()
        .observe_request("unmatched", StatusCode::NOT_FOUND.as_u16(), 0.0);
    e
}

/// A known path asked with a method it does not serve gets the JSON error shape like every
/// other error: axum's own 405 has an empty body. Its `Allow` header is kept. Done on the
/// response, so admin paths still authenticate first (a method fallback would run outside
/// their authentication layer), and only empty 405s are replaced (never an upstream's).
async fn json_method_not_allowed(resp: Response) -> Response {
    use axum::body::HttpBody;
    if resp.status() != StatusCode::METHOD_NOT_ALLOWED || resp.body().size_hint().exact() != Some(0)
    {
        return resp;
    }
    let allow = resp.headers().get(header::ALLOW).cloned();
    let mut out = ServiceError::MethodNotAllowed.into_response();
    if let Some(allow) = allow {
        out.headers_mut().insert(header::ALLOW, allow);
    }
    out
}

/// The message of a 413 for a body over `server.max_body_bytes`.
const BODY_TOO_LARGE: &str = "request body is over the server's limit (server.max_body_bytes)";

/// Refuses a request whose declared `Content-Length` is over `server.max_body_bytes` before
/// reading any of its body: waiting for a body that will be refused anyway would let a client
/// hold the connection with a short one. Bodies without a length (chunked) are bounded as
/// they are read ([`ApiBytes`]).
async fn refuse_declared_oversize(State(max): State<usize>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::try_from(max).unwrap_or(u64::MAX)) {
        return ServiceError::TooLarge(BODY_TOO_LARGE.into()).into_response();
    }
    next.run(req).await
}

/// A raw body whose errors are [`ServiceError`]s (413 over `server.max_body_bytes`), so they
/// have the JSON error shape like every other error.
#[derive(Debug)]
pub(crate) struct ApiBytes(pub(crate) Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ServiceError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ServiceError> {
        Bytes::from_request(req, state)
            .await
            .map(ApiBytes)
            .map_err(|rej| {
                if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ServiceError::TooLarge(BODY_TOO_LARGE.into())
                } else {
                    ServiceError::BadRequest(format!(
                        "cannot read the request body: {}",
                        rej.body_text()
                    ))
                }
            })
    }
}

/// A JSON body whose errors are [`ServiceError`]s: 413 over `server.max_body_bytes`, 400
/// for malformed JSON (messages never quote long strings from the body).
#[derive(Debug)]
pub(crate) struct ApiJson<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ServiceError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ServiceError> {
        let ApiBytes(bytes) = ApiBytes::from_request(req, state).await?;
        serde_json::from_slice(&bytes)
            .map(ApiJson)
            .map_err(|e| ServiceError::BadRequest(json_error_message(&e)))
    }
}

/// A serde error message with any quoted string longer than 40 bytes elided, so a prompt
/// put in the wrong place is never echoed.
pub(crate) fn json_error_message(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg.as_str();
    while let Some(start) = rest.find(['"', '`']) {
        let q = rest[start..].chars().next().unwrap_or('"');
        let close = if q == '`' { '`' } else { '"' };
        out.push_str(&rest[..=start]);
        let after = &rest[start + 1..];
        match after.find(close) {
            Some(end) => {
                let inner = &after[..end];
                if inner.len() > 40 {
                    out.push('…');
                } else {
                    out.push_str(inner);
                }
                out.push(close);
                rest = &after[end + 1..];
            }
            None => {
                out.push('…');
                rest = "";
            }
        }
    }
    out.push_str(rest);
    format!("invalid request body: {out}")
}

/// `/v1/scan`'s body: `{"text": …}`, `{"segments": [{"role", "text", "trust"?}]}` or a
/// conversation `{"turns": [{"role", "text", "tool_calls"?, "tool_call_id"?, "trust"?}],
/// "conversation_id"?}`, with an optional `id` echoed in the decision.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScanBody {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    segments: Option<Vec<Segment>>,
    #[serde(default)]
    turns: Option<Vec<Turn>>,
    #[serde(default)]
    conversation_id: Option<String>,
}

/// What a `/v1/scan` body asks for.
#[derive(Debug)]
pub(crate) enum ScanInput {
    /// One request (`text` or `segments`).
    Single(ScanRequest),
    /// A conversation (`turns`).
    Conversation(ConversationRequest),
}

impl ScanBody {
    pub(crate) fn into_input(self) -> Result<ScanInput, ServiceError> {
        let given = [
            self.text.is_some(),
            self.segments.is_some(),
            self.turns.is_some(),
        ];
        match given.iter().filter(|g| **g).count() {
            0 => {
                return Err(ServiceError::BadRequest(
                    "missing \"text\", \"segments\" or \"turns\"".into(),
                ));
            }
            1 => {}
            _ => {
                return Err(ServiceError::BadRequest(
                    "give exactly one of \"text\", \"segments\" or \"turns\"".into(),
                ));
            }
        }
        if let Some(turns) = self.turns {
            return Ok(ScanInput::Conversation(ConversationRequest {
                id: self.id,
                conversation_id: self.conversation_id,
                turns,
            }));
        }
        if self.conversation_id.is_some() {
            return Err(ServiceError::BadRequest(
                "\"conversation_id\" goes with \"turns\"".into(),
            ));
        }
        let mut req = match (self.text, self.segments) {
            (Some(t), _) => ScanRequest::text(t),
            (None, Some(s)) => ScanRequest::segments(s),
            (None, None) => {
                return Err(ServiceError::BadRequest(
                    "missing \"text\", \"segments\" or \"turns\"".into(),
                ));
            }
        };
        req.id = self.id;
        Ok(ScanInput::Single(req))
    }
}

impl AppState {
    /// Scans a `/v1/scan` body's input: one request with the pipeline, a conversation with
    /// the API's conversation scanner (stateful with a `[conversation]` section, else
    /// stateless). The outcome's decision carries the conversation part for a conversation.
    /// A conversation is scanned in the caller's partition of the state (per API key).
    pub(crate) async fn scan_input(
        &self,
        caller: &Caller,
        input: ScanInput,
    ) -> Result<ScanOutcome, ServiceError> {
        match input {
            ScanInput::Single(req) => self.scan(req).await,
            ScanInput::Conversation(req) => {
                let scanner = self.api_conversation_scanner(caller.key_id.as_deref());
                let o = self.scan_conversation(scanner, Arc::new(req)).await?;
                Ok(ScanOutcome {
                    decision: o.decision,
                    sanitized: o.sanitized,
                })
            }
        }
    }
}

/// The decision JSON (as `rampart scan --json --include-sanitized` prints it): the core
/// decision, plus `sanitized` when the action is SANITIZE.
pub(crate) fn outcome_json(outcome: &ScanOutcome) -> Result<serde_json::Value, ServiceError> {
    let mut v = serde_json::to_value(&outcome.decision)
        .map_err(|e| ServiceError::Internal(format!("cannot encode the decision: {e}")))?;
    if let (Some(s), serde_json::Value::Object(m)) = (&outcome.sanitized, &mut v) {
        m.insert(
            "sanitized".into(),
            serde_json::to_value(s)
                .map_err(|e| ServiceError::Internal(format!("cannot encode: {e}")))?,
        );
    }
    Ok(v)
}

/// Bytes reserved for a decision's JSON before encoding it: an ALLOW decision for a 1 KB
/// prompt is about 520 B, one with findings about 2 KB (the buffer grows once). Kept at or
/// under 1 KiB so that the allocation is served from the allocator's per-thread cache.
const DECISION_JSON_CAPACITY: usize = 1024;

/// The same object as [`outcome_json`] (the decision's fields in the decision's order, then
/// `sanitized` when present), encoded straight into the response body: no intermediate
/// `serde_json::Value` tree, one buffer.
pub(crate) fn outcome_response(outcome: &ScanOutcome) -> Result<Response, ServiceError> {
    #[derive(serde::Serialize)]
    struct Body<'a> {
        #[serde(flatten)]
        decision: &'a rampart_core::Decision,
        #[serde(skip_serializing_if = "Option::is_none")]
        sanitized: Option<&'a Vec<rampart_core::SanitizedSegment>>,
    }
    let mut buf = Vec::with_capacity(DECISION_JSON_CAPACITY);
    let body = Body {
        decision: &outcome.decision,
        sanitized: outcome.sanitized.as_ref(),
    };
    serde_json::to_writer(&mut buf, &body)
        .map_err(|e| ServiceError::Internal(format!("cannot encode the decision: {e}")))?;
    let mut resp = Response::new(axum::body::Body::from(buf));
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        "x-rampart-action",
        HeaderValue::from_static(outcome.decision.action.name()),
    );
    Ok(resp)
}

async fn scan(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<ScanBody>,
) -> Result<Response, ServiceError> {
    let outcome = state.scan_input(&caller, body.into_input()?).await?;
    state.record(&caller, "/v1/scan", &outcome.decision).await?;
    outcome_response(&outcome)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    items: Vec<serde_json::Value>,
}

async fn batch(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<BatchBody>,
) -> Result<Response, ServiceError> {
    let max = state.config().server.max_batch_items;
    if body.items.len() > max {
        return Err(ServiceError::TooLarge(format!(
            "batch has {} items; the limit is {max} (server.max_batch_items)",
            body.items.len()
        )));
    }
    if body.items.is_empty() {
        return Err(ServiceError::BadRequest("batch has no items".into()));
    }
    let mut results = Vec::with_capacity(body.items.len());
    let mut errors = 0usize;
    for (index, item) in body.items.into_iter().enumerate() {
        let item_caller = Caller {
            request_id: format!("{}#{index}", caller.request_id),
            key_id: caller.key_id.clone(),
        };
        let res = async {
            let body: ScanBody = serde_json::from_value(item)
                .map_err(|e| ServiceError::BadRequest(json_error_message(&e)))?;
            let outcome = state.scan_input(&item_caller, body.into_input()?).await?;
            state
                .record(&item_caller, "/v1/scan/batch", &outcome.decision)
                .await?;
            outcome_json(&outcome)
        }
        .await;
        results.push(match res {
            Ok(decision) => serde_json::json!({"index": index, "decision": decision}),
            Err(e) => {
                errors += 1;
                let mut v = e.body();
                if let serde_json::Value::Object(m) = &mut v {
                    m.insert("index".into(), index.into());
                    m.insert("status".into(), e.status().as_u16().into());
                }
                v
            }
        });
    }
    Ok(Json(serde_json::json!({"results": results, "errors": errors})).into_response())
}

/// `/v1/relate`'s body: `{"segments": [{"role", "text"}…]}` (roles system, developer or
/// application, user) or `{"system"?, "application"?, "user"}`, with an optional `id`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RelateBody {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    segments: Option<Vec<rampart_relational::PromptSegment>>,
    #[serde(default)]
    system: Option<String>,
    #[serde(default, alias = "developer")]
    application: Option<String>,
    #[serde(default)]
    user: Option<String>,
}

impl RelateBody {
    pub(crate) fn into_request(self) -> Result<ScanRequest, ServiceError> {
        let layered = self.system.is_some() || self.application.is_some() || self.user.is_some();
        let req = match self.segments {
            Some(_) if layered => {
                return Err(ServiceError::BadRequest(
                    "give either \"segments\" or \"system\"/\"application\"/\"user\", not both"
                        .into(),
                ));
            }
            Some(segments) => rampart_relational::prompt_request(segments),
            None => rampart_relational::layered_request(self.system, self.application, self.user),
        };
        let mut req = req.map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        req.id = self.id;
        Ok(req)
    }
}

async fn relate(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<RelateBody>,
) -> Result<Response, ServiceError> {
    let req = body.into_request()?;
    let (outcome, layer) = state.relate(req).await?;
    state
        .record(&caller, "/v1/relate", &outcome.decision)
        .await?;
    let body = rampart_relational::RelateOutcome::from_decision(&outcome.decision, &layer);
    let buf = serde_json::to_vec(&body)
        .map_err(|e| ServiceError::Internal(format!("cannot encode the report: {e}")))?;
    let mut resp = Response::new(axum::body::Body::from(buf));
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        "x-rampart-action",
        HeaderValue::from_static(outcome.decision.action.name()),
    );
    Ok(resp)
}
