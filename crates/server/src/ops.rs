//! Operations endpoints: `/healthz`, `/readyz`, `/metrics`, `/openapi.json`,
//! `/admin/reload`. None reveals keys, prompt text or rule patterns.

use crate::state::{AppState, Caller, ServiceError, error_chain, layer_names};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use std::sync::Arc;

/// Liveness: the process answers.
pub(crate) async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

/// Readiness: a pipeline is built (it was probed when built) and the audit writer, when
/// configured, is alive.
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let p = state.pipeline();
    let audit = if state.audit_enabled() {
        if state.audit_alive() { "ok" } else { "closed" }
    } else {
        "disabled"
    };
    // The shared state is needed for decisions (limits, approvals): not reachable, not ready.
    let shared = match state.shared_state() {
        None => "memory".to_string(),
        Some(store) => match store.ping() {
            Ok(()) => format!("{}: ok", store.backend()),
            Err(e) => format!(
                "{}: unavailable ({})",
                store.backend(),
                crate::state::state_error(&e)
            ),
        },
    };
    let ready = audit != "closed" && !shared.contains("unavailable");
    let body = serde_json::json!({
        "status": if ready { "ready" } else { "not_ready" },
        "pipeline": {
            "layers": layer_names(&p),
            "policy_version": p.config().policy.version,
        },
        "audit": audit,
        "state": shared,
        "conversation": if state.conversation_stateful() { "stateful" } else { "stateless" },
        // Where it is kept: `memory`, or the shared state (`redis`, whose reachability is
        // `state` above: without it conversations are refused, so the replica is not ready).
        "conversation_store": state.conversation_store(),
        "conversation_persistence": state.conversation_persistence(),
        "uptime_s": state.uptime().as_secs(),
    });
    let status = if ready {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// Prometheus text exposition.
pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    if let Some(stats) = state.audit_stats() {
        state.metrics().set_audit_stats(&stats);
    }
    // Both counts are O(1) (no walk of the state under its lock).
    if let Some((nodes, ledger)) = state.conversation_sizes() {
        state.metrics().set_conversation_state(nodes, ledger);
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics().encode(),
    )
        .into_response()
}

/// The OpenAPI document.
pub(crate) async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::OPENAPI_JSON,
    )
        .into_response()
}

/// Rebuilds the pipeline from the configuration and swaps it in; a bad configuration or
/// pack is rejected (422) and the previous pipeline keeps serving.
pub(crate) async fn reload(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<serde_json::Value>, ServiceError> {
    tracing::info!(request_id = %caller.request_id, key_id = ?caller.key_id, "reload requested");
    let info = state
        .reload()
        .await
        .map_err(|e| ServiceError::ReloadFailed(error_chain(&e)))?;
    Ok(Json(serde_json::json!({
        "status": "reloaded",
        "layers": info.layers,
        "policy_version": info.policy_version,
    })))
}
