//! Step 6 for a plain (not streamed) answer: read it whole, scan it, gate its tool calls, and
//! answer with it, its sanitized form, or a block.

use super::Kind;
use super::handler::AnswerContext;
use super::reply::{blocked_response, with_headers};
use super::rewrite::rescan_pieces;
use super::upstream::read_limited;
use crate::config::ServerConfig;
use crate::state::{AppState, Caller, ServiceError};
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use rampart_core::{Action, Decision, FailMode};
use rampart_output::answer::response_texts;
use rampart_output::{OutputContext, OutputOutcome, OutputScanner};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Step 6 (plain): reads the whole answer (bounded, within what is left of
/// `proxy.timeout_ms`), scans it, gates its tool calls, and answers with it, its sanitized
/// form, or a block.
pub(super) async fn respond_plain(
    state: &AppState,
    caller: &Caller,
    config: &ServerConfig,
    resp: reqwest::Response,
    started: tokio::time::Instant,
    answer: AnswerContext,
) -> Result<Response, ServiceError> {
    let AnswerContext {
        kind,
        output,
        action,
        answers,
        tools,
    } = answer;
    let status = resp.status();
    let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
    let bytes = read_answer(config, resp, started).await?;
    let mut final_action = action;
    let mut out_bytes = bytes.clone();
    let mut tool_action = None;
    if let Some(scanner) = output.scanner {
        match scan_plain_response(state, &scanner, &output.ctx, &bytes, kind, caller).await? {
            PlainVerdict::Pass => {}
            PlainVerdict::Blocked(d) => return Ok(blocked_response(&d, caller, true)),
            PlainVerdict::Sanitized(b) => {
                out_bytes = b;
                final_action = final_action.max(Action::Sanitize);
            }
        }
    }
    if status.is_success()
        && let Some(t) = &tools
        && let Some((b, strictest)) =
            crate::tool_gate::gate_plain(state, caller, t, &out_bytes).await?
    {
        out_bytes = b;
        tool_action = Some(strictest);
    }
    if status.is_success()
        && kind == Kind::Chat
        && let Some(a) = &answers
    {
        a.record_completion(&out_bytes).await;
    }
    let mut r = Response::new(Body::from(out_bytes));
    *r.status_mut() = StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        content_type.unwrap_or_else(|| HeaderValue::from_static("application/json")),
    );
    if let Some(a) = tool_action {
        r.headers_mut().insert(
            crate::tool_gate::TOOL_ACTION_HEADER,
            HeaderValue::from_static(a.name()),
        );
    }
    Ok(with_headers(r, final_action, caller))
}

/// The whole answer, bounded by `output.max_response_bytes`, within what is left of
/// `proxy.timeout_ms`.
async fn read_answer(
    config: &ServerConfig,
    resp: reqwest::Response,
    started: tokio::time::Instant,
) -> Result<Bytes, ServiceError> {
    let max = config.output.max_response_bytes;
    let timeout = Duration::from_millis(config.proxy.timeout_ms);
    let remaining = timeout.saturating_sub(started.elapsed());
    match tokio::time::timeout(remaining, read_limited(resp, max)).await {
        Err(_) => Err(ServiceError::Timeout(format!(
            "the upstream's answer did not complete within {} ms (proxy.timeout_ms)",
            config.proxy.timeout_ms
        ))),
        Ok(r) => r,
    }
}

enum PlainVerdict {
    Pass,
    Blocked(Box<Decision>),
    Sanitized(Bytes),
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
    let mut d = outcome.decision;
    // Redact piece by piece so each JSON string gets its own sanitized text; decided before
    // the record so that an escalation to BLOCK is what is recorded.
    let rescan = match (&parsed, d.action) {
        (Some(_), Action::Sanitize) => Some(
            rescan_pieces(&texts, |text| async move {
                let o = run_scan(state, scanner, ctx, text).await?;
                Ok((o.decision.action, o.sanitized.map(|s| s.text)))
            })
            .await,
        ),
        _ => None,
    };
    if let Some(Ok(Err(why))) = &rescan {
        d.action = Action::Block;
        d.reasons.push(why.reason("a text of the answer"));
    }
    // Every response decision is audited, ALLOW included.
    state.record(caller, kind.response_endpoint(), &d).await?;
    match (d.action, parsed, rescan.transpose()?) {
        (Action::Allow, _, _) => Ok(PlainVerdict::Pass),
        (Action::Sanitize, Some(mut v), Some(Ok(rewrites))) => {
            for (ptr, text) in rewrites {
                if let Some(slot) = v.pointer_mut(&ptr) {
                    // The log-probabilities were read as one text: they cannot be rewritten
                    // token by token, so they go.
                    *slot = if ptr.ends_with("/logprobs") {
                        Value::Null
                    } else {
                        Value::String(text)
                    };
                }
            }
            let b = serde_json::to_vec(&v).map_err(|e| ServiceError::Internal(e.to_string()))?;
            Ok(PlainVerdict::Sanitized(Bytes::from(b)))
        }
        _ => Ok(PlainVerdict::Blocked(Box::new(d))),
    }
}
