//! The proxy's enforcement of tool calls (`[tools]`, `enforce_proxy`) over HTTP: the tool
//! context of a request (headers, caller, conversation), each call decided by the
//! governance's [`rampart_output::tool_gate::ToolGate`] and audited before the client sees
//! it, and the answer rewritten by [`PlainAnswer`] (plain) or [`StreamGate`] (streamed).
//!
//! * **Approval** (resubmission): the client resends the request with
//!   `x-rampart-approval: <token>` (several headers, or comma-separated). The upstream's new
//!   answer is checked again; a CONFIRM call whose tool, canonical arguments and
//!   conversation match a presented token redeems it (single use) and is ALLOWed. Nothing
//!   is cached: a model that answers differently gets a new decision (and a new token).
//! * **Conversation** (what tokens are bound to, and the break-glass scope): the
//!   `x-rampart-conversation-id` header, else a hash of the messages up to the first user
//!   message; with the API key.
//! * **Context**: `max_injection_score` is the highest score of a finding in a tool-result
//!   segment of the request's scan (points / 3); `tools_called` are the history's assistant
//!   calls; the caller is the key's pinned caller over the `x-rampart-caller` header's
//!   (JSON `{"role", "attributes"}`), per `[tools] request_caller`; the conversation (the
//!   request's messages as the client sent them, with the spans the scan flagged) is what
//!   provenance requirements attribute argument values against.

use crate::state::{AppState, Caller, ServiceError};
use crate::tools::{ToolGovernance, now_ms};
use axum::http::header::HeaderMap;
use bytes::Bytes;
use rampart_output::sse::SseEvent;
use rampart_output::tool_gate::{
    GateItem, HeldCall, PendingCall, PlainAnswer, StreamGate, ToolVerdict, binding,
    conversation_of, tools_called,
};
use rampart_tools::{CallContext, CallerInfo, SharedConversation, ToolAction};
use serde_json::Value;
use std::sync::Arc;

/// Header carrying approval tokens on a resubmitted request.
pub(crate) const APPROVAL_HEADER: &str = "x-rampart-approval";
/// Response header of a plain answer with tool calls: the strictest tool decision.
pub(crate) const TOOL_ACTION_HEADER: &str = "x-rampart-tool-action";
/// Header carrying the caller's role and attributes (JSON) for the proxy.
pub(crate) const CALLER_HEADER: &str = "x-rampart-caller";
/// Most approval tokens one request may present.
const MAX_TOKENS: usize = 16;
/// Longest `x-rampart-caller` header.
const MAX_CALLER_HEADER_BYTES: usize = 4096;

/// What the proxy knows to decide the tool calls of one request's answer.
#[derive(Debug, Clone)]
pub(crate) struct ProxyTools {
    gov: Arc<ToolGovernance>,
    conversation: Option<String>,
    binding: String,
    key_id: Option<String>,
    context: CallContext,
    tokens: Vec<String>,
}

/// The tool context of a chat request, when `[tools]` enforces the proxy. Malformed
/// approval or caller headers are 400.
pub(crate) fn proxy_tools(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    hint: Option<&str>,
    body: &Value,
    injection_score: Option<f32>,
    provenance: Option<SharedConversation>,
) -> Result<Option<ProxyTools>, ServiceError> {
    let Some(gov) = state.tools().filter(|g| g.config().enforce_proxy) else {
        return Ok(None);
    };
    let tokens = approval_tokens(headers)?;
    let requested = requested_caller(headers)?;
    let config = state.config();
    let key = caller.key_id.as_deref();
    let conversation = hint
        .map(str::to_string)
        .unwrap_or_else(|| conversation_of(body));
    let bound = binding(key, Some(&conversation));
    // What the server saw in the tool results is remembered for the conversation: a later
    // check reads it whatever the client then reports.
    if let Some(score) = injection_score {
        gov.gate()
            .note_injection_score(key, &bound, score, crate::tools::now_ms());
    }
    Ok(Some(ProxyTools {
        gov: gov.clone(),
        binding: bound,
        conversation: Some(conversation),
        key_id: caller.key_id.clone(),
        context: CallContext {
            max_injection_score: injection_score,
            tools_called: tools_called(body),
            caller: gov.caller_info(&config, key, requested),
            now_ms: None,
            conversation: provenance,
        },
        tokens,
    }))
}

/// The approval tokens of [`APPROVAL_HEADER`] (several headers, or comma-separated).
fn approval_tokens(headers: &HeaderMap) -> Result<Vec<String>, ServiceError> {
    let mut tokens = Vec::new();
    for v in headers.get_all(APPROVAL_HEADER) {
        let s = v.to_str().map_err(|_| {
            ServiceError::BadRequest(format!("{APPROVAL_HEADER} must be printable ASCII"))
        })?;
        tokens.extend(
            s.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string),
        );
    }
    if tokens.len() > MAX_TOKENS || tokens.iter().any(|t| t.len() > 256) {
        return Err(ServiceError::BadRequest(format!(
            "at most {MAX_TOKENS} approval tokens of at most 256 bytes"
        )));
    }
    Ok(tokens)
}

/// The caller's role and attributes as [`CALLER_HEADER`] states them.
fn requested_caller(headers: &HeaderMap) -> Result<Option<CallerInfo>, ServiceError> {
    let Some(v) = headers.get(CALLER_HEADER) else {
        return Ok(None);
    };
    let bad = || {
        ServiceError::BadRequest(format!(
            "{CALLER_HEADER} must be JSON {{\"role\", \"attributes\"}} of at most \
             {MAX_CALLER_HEADER_BYTES} bytes"
        ))
    };
    if v.len() > MAX_CALLER_HEADER_BYTES {
        return Err(bad());
    }
    let s = v.to_str().map_err(|_| bad())?;
    Ok(Some(
        serde_json::from_str::<CallerInfo>(s).map_err(|_| bad())?,
    ))
}

impl ProxyTools {
    /// Decides and audits one call; an unauditable decision is a BLOCK (fail closed).
    async fn decide(&self, state: &AppState, caller: &Caller, call: &HeldCall) -> ToolVerdict {
        let mut v = self.gov.gate().decide(
            PendingCall {
                tool: call.name(),
                arguments: call.arguments(),
                conversation: self.conversation.as_deref(),
                binding: self.binding.clone(),
                caller_key: self.key_id.as_deref(),
                context: self.context.clone(),
                tokens: &self.tokens,
            },
            now_ms(),
        );
        if let Err(e) = state
            .record_tool(caller, rampart_audit::ToolEndpoint::Proxy, &v)
            .await
        {
            tracing::error!(request_id = %caller.request_id, error = %e, "a tool decision could not be audited; blocked");
            v.fail_closed("the decision could not be audited");
        }
        v
    }

    /// Decides the calls in order.
    async fn decide_all<'a>(
        &self,
        state: &AppState,
        caller: &Caller,
        calls: impl Iterator<Item = &'a HeldCall>,
    ) -> Vec<ToolVerdict> {
        let mut verdicts = Vec::new();
        for call in calls {
            verdicts.push(self.decide(state, caller, call).await);
        }
        verdicts
    }
}

/// Plain chat answer: decides every call; `None` when the answer has none (unchanged).
pub(crate) async fn gate_plain(
    state: &AppState,
    caller: &Caller,
    tools: &ProxyTools,
    bytes: &[u8],
) -> Result<Option<(Bytes, ToolAction)>, ServiceError> {
    let answer = match PlainAnswer::parse(bytes) {
        Ok(Some(a)) => a,
        Ok(None) => return Ok(None),
        // Fail closed: what this parser cannot read, a client's parser may read calls in.
        Err(e) => return Err(ServiceError::BadGateway(e.to_string())),
    };
    let verdicts = tools.decide_all(state, caller, answer.calls()).await;
    let (out, strictest) = answer
        .apply(&verdicts)
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
    Ok(Some((Bytes::from(out), strictest)))
}

/// Decides the calls of a completed choice and gives the events to forward.
pub(crate) async fn release_item(
    state: &AppState,
    caller: &Caller,
    tools: &ProxyTools,
    gate: &StreamGate,
    item: GateItem,
) -> Vec<SseEvent> {
    match item {
        GateItem::Event(ev) => vec![ev],
        GateItem::Complete {
            choice,
            calls,
            overflow,
            then,
        } => {
            let verdicts = tools.decide_all(state, caller, calls.iter()).await;
            gate.release(choice, &calls, &verdicts, overflow, then)
        }
    }
}
