//! What the proxy's client gets besides the upstream's answer: the Rampart headers, errors,
//! and the OpenAI-shaped error of a blocked request or response (evidence, never text).

use crate::state::{Caller, ServiceError};
use axum::extract::Extension;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rampart_conversation::ConversationReport;
use rampart_core::{Action, Decision, Report};
use serde_json::{Value, json};

pub(super) fn caller_of(ext: Option<Extension<Caller>>) -> Caller {
    ext.map(|Extension(c)| c).unwrap_or_else(|| Caller {
        request_id: "unknown".into(),
        key_id: None,
    })
}

/// Adds the Rampart headers to a response.
pub(super) fn with_headers(mut resp: Response, action: Action, caller: &Caller) -> Response {
    let h = resp.headers_mut();
    h.insert("x-rampart-action", HeaderValue::from_static(action.name()));
    if let Ok(v) = HeaderValue::from_str(&caller.request_id) {
        h.insert("x-rampart-request-id", v);
    }
    resp
}

pub(super) fn error_response(e: ServiceError, caller: &Caller, action: Option<Action>) -> Response {
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
    let mut v = json!({
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
    });
    // The per-conversation part: numbers, rule ids and message indexes, never text.
    if let (Some(c), Value::Object(m)) = (d.reports.raw(ConversationReport::KEY), &mut v) {
        m.insert(ConversationReport::KEY.into(), c.clone());
    }
    v
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
    // The conversation part's own findings (forged history, conversation risk, …) when it
    // is what blocks.
    if let Some(c) = d
        .reports
        .find::<ConversationReport>()
        .filter(|c| c.action == Action::Block)
    {
        for f in &c.findings {
            let item = (f.id.clone(), "conversation".to_string());
            if !seen.contains(&item) {
                seen.push(item);
            }
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
pub(super) fn blocked_error(d: &Decision, request_id: &str, response: bool) -> Value {
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

pub(super) fn blocked_response(d: &Decision, caller: &Caller, response: bool) -> Response {
    let body = blocked_error(d, &caller.request_id, response);
    with_headers(
        (StatusCode::BAD_REQUEST, axum::Json(body)).into_response(),
        Action::Block,
        caller,
    )
}
