//! `POST /v1/scan/output`: a model answer checked on request (no upstream).

use super::reply::caller_of;
use super::{EP_SCAN_OUTPUT, MAX_CANARIES};
use crate::api::{ApiJson, outcome_json};
use crate::output::ScanOutputRequest;
use crate::state::{AppState, Caller, ServiceError};
use axum::extract::{Extension, State};
use rampart_core::{SanitizedSegment, ScanOutcome};
use rampart_output::canary::{Canary, CanarySet};
use rampart_output::{OutputContext, PromptIndex};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// `POST /v1/scan/output`.
pub(super) async fn scan_output(
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
