//! The proxy's enforcement of tool calls (`[tools]`, `enforce_proxy`): every `tool_calls`
//! entry (and legacy `function_call`) of a chat answer is decided by the tool policy before
//! the client sees it.
//!
//! * **Plain answers** ([`gate_plain`]): an allowed call stays; a blocked or confirmed call
//!   is removed from `tool_calls` and named in the message's `refusal` (and `content` when
//!   the model sent none): tool and rules, never argument values. When no call is left,
//!   `finish_reason` `tool_calls` / `function_call` becomes `stop`. The answer gains a
//!   top-level extension object `rampart.tool_decisions[]` (OpenAI client libraries keep
//!   unknown fields): per call its decision, the arguments' hash and, for CONFIRM, the
//!   approval token with its expiry and the held call (name and arguments) for a human to
//!   look at.
//! * **Streamed answers** ([`StreamGate`]): tool-call deltas are taken out of the events
//!   and held (never forwarded) until the choice's `finish_reason` (or `[DONE]`, or the end
//!   of the stream) says the calls are complete; then each is decided, and one event
//!   carries the allowed calls whole, the refusal, and `rampart.tool_decisions`. Content
//!   deltas flow as before (through the output guard when it is on).
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
//!   (JSON `{"role", "attributes"}`), per `[tools] request_caller`.

use crate::sse::{SseEvent, data_event};
use crate::state::{AppState, Caller, ServiceError};
use crate::tools::{
    PendingCall, ToolGovernance, ToolVerdict, approval_json, arguments_of, binding, sha256_hex,
};
use axum::http::header::HeaderMap;
use bytes::Bytes;
use rampart_core::{Decision, Role};
use rampart_tools::{ArgumentsError, CallContext, CallerInfo, MAX_ARGUMENT_BYTES, ToolAction};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
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
/// Most calls held per choice of a streamed answer; more are refused.
const MAX_CALLS_PER_CHOICE: usize = 128;

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
) -> Result<Option<ProxyTools>, ServiceError> {
    let Some(gov) = state.tools().filter(|g| g.config().enforce_proxy) else {
        return Ok(None);
    };
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
    let requested = match headers.get(CALLER_HEADER) {
        None => None,
        Some(v) => {
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
            Some(serde_json::from_str::<CallerInfo>(s).map_err(|_| bad())?)
        }
    };
    let config = state.config();
    let key = caller.key_id.as_deref();
    let conversation = hint
        .map(str::to_string)
        .unwrap_or_else(|| conversation_of(body));
    Ok(Some(ProxyTools {
        gov: gov.clone(),
        binding: binding(key, Some(&conversation)),
        conversation: Some(conversation),
        key_id: caller.key_id.clone(),
        context: CallContext {
            max_injection_score: injection_score,
            tools_called: tools_called(body),
            caller: gov.caller_info(&config, key, requested),
            now_ms: None,
        },
        tokens,
    }))
}

/// A conversation key for a request without `x-rampart-conversation-id`: a hash of its
/// messages up to and including the first user message (stable while the conversation
/// grows).
fn conversation_of(body: &Value) -> String {
    let mut prefix = Vec::new();
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        prefix.push(rampart_tools::canonical_arguments(m));
        if m.get("role").and_then(Value::as_str) == Some("user") {
            break;
        }
    }
    let h = sha256_hex(prefix.join("\n").as_bytes());
    format!("h:{}", &h[..32])
}

/// The history's assistant tool calls, by name, in order.
fn tools_called(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for c in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(n) = c.pointer("/function/name").and_then(Value::as_str) {
                out.push(n.to_string());
            }
        }
        if let Some(n) = m.pointer("/function_call/name").and_then(Value::as_str) {
            out.push(n.to_string());
        }
    }
    out
}

/// The highest injection score of the request's tool results (and retrieved documents):
/// per finding counted in such a segment, its points over 3. With `[conversation]` state
/// only the calls scanned now count (earlier calls' tool results are not rescanned).
pub(crate) fn tool_result_score(d: &Decision) -> Option<f32> {
    d.findings
        .iter()
        .filter(|f| matches!(f.role, Role::Tool | Role::Retrieved) && f.counted)
        .map(|f| (f32::from(f.points) / 3.0).min(1.0))
        .reduce(f32::max)
}

/// A call as the model sent it.
#[derive(Debug, Clone, Default)]
pub(crate) struct HeldCall {
    id: Option<String>,
    name: String,
    arguments: String,
    /// The legacy `function_call`.
    legacy: bool,
    /// The arguments grew past the limit (no longer appended; the call is blocked).
    oversize: bool,
}

impl HeldCall {
    fn arguments(&self) -> Result<Value, ArgumentsError> {
        if self.oversize {
            return Err(ArgumentsError::TooLarge {
                bytes: self.arguments.len(),
                max: MAX_ARGUMENT_BYTES,
            });
        }
        arguments_of(&Value::String(self.arguments.clone()))
    }

    /// The call in the answer's shape (OpenAI).
    fn shape(&self, index: Option<usize>) -> Value {
        let f = json!({"name": self.name, "arguments": self.arguments});
        if self.legacy {
            return f;
        }
        let mut v = json!({"id": self.id, "type": "function", "function": f});
        if let (Some(i), Value::Object(m)) = (index, &mut v) {
            m.insert("index".into(), i.into());
        }
        v
    }
}

impl ProxyTools {
    /// Decides and audits one call; an unauditable decision is a BLOCK (fail closed).
    async fn decide(&self, state: &AppState, caller: &Caller, call: &HeldCall) -> ToolVerdict {
        let mut v = self.gov.decide(
            PendingCall {
                tool: &call.name,
                arguments: call.arguments(),
                conversation: self.conversation.as_deref(),
                binding: self.binding.clone(),
                caller_key: self.key_id.as_deref(),
                context: self.context.clone(),
                tokens: &self.tokens,
            },
            crate::tools::now_ms(),
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
}

/// One entry of `rampart.tool_decisions`.
fn decision_entry(choice: u64, call: &HeldCall, v: &ToolVerdict) -> Value {
    let mut e = v.answer(call.id.as_deref());
    if let Value::Object(m) = &mut e {
        m.remove("id");
        m.insert("choice".into(), choice.into());
        m.insert("tool_call_id".into(), json!(call.id));
        if call.legacy {
            m.insert("legacy_function_call".into(), true.into());
        }
        if v.action() == ToolAction::Confirm {
            m.insert("held_call".into(), call.shape(None));
        }
        if let Some(a) = &v.approval {
            m.insert("approval".into(), approval_json(a));
        }
    }
    e
}

/// The refusal text for calls that were not allowed: tool, action and rules (no values).
fn refusal_text(refused: &[(&HeldCall, &ToolVerdict)]) -> Option<String> {
    if refused.is_empty() {
        return None;
    }
    let parts: Vec<String> = refused
        .iter()
        .map(|(c, v)| {
            let d = &v.decision;
            let what = match d.action {
                ToolAction::Confirm => "is held by Rampart until a human approves it",
                _ => "was blocked by Rampart",
            };
            let mut s = format!(
                "The call to tool `{}` {what} (rules: {})",
                c.name,
                d.rules.join(", ")
            );
            if let (Some(a), Some(k)) = (&d.failed_argument, &d.failed_check) {
                s.push_str(&format!("; argument `{a}` failed `{k}`"));
            } else if let Some(k) = &d.failed_check {
                s.push_str(&format!("; arguments failed `{k}`"));
            }
            s.push('.');
            s
        })
        .collect();
    Some(parts.join(" "))
}

/// Plain chat answer: decides every call; `None` when the answer has none (unchanged).
pub(crate) async fn gate_plain(
    state: &AppState,
    caller: &Caller,
    tools: &ProxyTools,
    bytes: &[u8],
) -> Result<Option<(Bytes, ToolAction)>, ServiceError> {
    let Ok(mut v) = serde_json::from_slice::<Value>(bytes) else {
        return Ok(None);
    };
    let Some(choices) = v.get_mut("choices").and_then(Value::as_array_mut) else {
        return Ok(None);
    };
    let mut entries = Vec::new();
    let mut strictest = ToolAction::Allow;
    for (pos, c) in choices.iter_mut().enumerate() {
        let index = c.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
        let Some(m) = c.get_mut("message").and_then(Value::as_object_mut) else {
            continue;
        };
        let mut calls = Vec::new();
        if let Some(Value::Array(tcs)) = m.get("tool_calls") {
            for tc in tcs {
                calls.push(HeldCall {
                    id: tc.get("id").and_then(Value::as_str).map(str::to_string),
                    name: string_at(tc, "/function/name"),
                    arguments: string_at(tc, "/function/arguments"),
                    legacy: false,
                    oversize: false,
                });
            }
        }
        if let Some(f) = m.get("function_call").filter(|f| f.is_object()) {
            calls.push(HeldCall {
                id: None,
                name: string_at(f, "/name"),
                arguments: string_at(f, "/arguments"),
                legacy: true,
                oversize: false,
            });
        }
        if calls.is_empty() {
            continue;
        }
        let mut verdicts = Vec::with_capacity(calls.len());
        for call in &calls {
            verdicts.push(tools.decide(state, caller, call).await);
        }
        let kept: Vec<Value> = calls
            .iter()
            .zip(&verdicts)
            .filter(|(c, v)| !c.legacy && v.action() == ToolAction::Allow)
            .map(|(c, _)| c.shape(None))
            .collect();
        let legacy_kept = calls
            .iter()
            .zip(&verdicts)
            .any(|(c, v)| c.legacy && v.action() == ToolAction::Allow);
        let refused: Vec<(&HeldCall, &ToolVerdict)> = calls
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.action() != ToolAction::Allow)
            .collect();
        for (call, verdict) in calls.iter().zip(&verdicts) {
            strictest = strictest.max(verdict.action());
            entries.push(decision_entry(index, call, verdict));
        }
        if m.contains_key("tool_calls") {
            if kept.is_empty() {
                m.remove("tool_calls");
            } else {
                m.insert("tool_calls".into(), Value::Array(kept.clone()));
            }
        }
        if !legacy_kept {
            m.remove("function_call");
        }
        if let Some(text) = refusal_text(&refused) {
            let content_empty = m
                .get("content")
                .is_none_or(|c| c.is_null() || c.as_str() == Some(""));
            if content_empty {
                m.insert("content".into(), Value::String(text.clone()));
            }
            m.insert("refusal".into(), Value::String(text));
        }
        if kept.is_empty()
            && !legacy_kept
            && let Some(Value::String(f)) = c.get("finish_reason")
            && (f == "tool_calls" || f == "function_call")
        {
            c["finish_reason"] = json!("stop");
        }
    }
    if entries.is_empty() {
        return Ok(None);
    }
    if let Value::Object(top) = &mut v {
        top.insert("rampart".into(), json!({"tool_decisions": entries}));
    }
    let out = serde_json::to_vec(&v).map_err(|e| ServiceError::Internal(e.to_string()))?;
    Ok(Some((Bytes::from(out), strictest)))
}

fn string_at(v: &Value, ptr: &str) -> String {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// What the stream gate gives back for one upstream event.
#[derive(Debug)]
pub(crate) enum GateItem {
    /// Forward this event (unchanged, or with the tool-call deltas taken out).
    Event(SseEvent),
    /// The calls of one choice are complete: decide them ([`StreamGate::release`]), then
    /// forward `then` (the event that completed them, `finish_reason` to be adjusted).
    Complete {
        choice: u64,
        calls: Vec<HeldCall>,
        overflow: bool,
        then: Option<SseEvent>,
    },
}

#[derive(Debug, Default)]
struct ChoiceCalls {
    calls: BTreeMap<u64, HeldCall>,
    overflow: bool,
}

/// Holds the tool-call deltas of a streamed answer until each choice's calls are complete
/// (see the module documentation). Pure: the relay decides and audits.
#[derive(Debug, Default)]
pub(crate) struct StreamGate {
    held: BTreeMap<u64, ChoiceCalls>,
    /// `id`, `object`, `created`, `model` of the latest chunk (copied to the events the gate
    /// writes).
    meta: Map<String, Value>,
}

impl StreamGate {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Takes one upstream event.
    pub(crate) fn push(&mut self, ev: SseEvent) -> Vec<GateItem> {
        let Some(data) = ev.data.as_deref() else {
            return vec![GateItem::Event(ev)];
        };
        if data.trim() == "[DONE]" {
            let mut out = self.complete_all();
            out.push(GateItem::Event(ev));
            return out;
        }
        let Ok(mut v) = serde_json::from_str::<Value>(data) else {
            return vec![GateItem::Event(ev)];
        };
        for k in ["id", "object", "created", "model", "system_fingerprint"] {
            if let Some(x) = v.get(k) {
                self.meta.insert(k.into(), x.clone());
            }
        }
        let Some(choices) = v.get_mut("choices").and_then(Value::as_array_mut) else {
            return vec![GateItem::Event(ev)];
        };
        let mut changed = false;
        let mut finished = Vec::new();
        for (pos, c) in choices.iter_mut().enumerate() {
            let index = c.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
            if let Some(Value::Object(delta)) = c.get_mut("delta") {
                if let Some(tcs) = delta.remove("tool_calls") {
                    changed = true;
                    for (tpos, tc) in tcs.as_array().into_iter().flatten().enumerate() {
                        let at = tc
                            .get("index")
                            .and_then(Value::as_u64)
                            .unwrap_or(tpos as u64);
                        self.fold(index, at, tc.get("id"), tc.get("function"), false);
                    }
                }
                if let Some(f) = delta.remove("function_call") {
                    changed = true;
                    self.fold(index, u64::MAX, None, Some(&f), true);
                }
            }
            let finishing = c.get("finish_reason").is_some_and(|f| !f.is_null());
            if finishing && self.held.contains_key(&index) {
                finished.push(index);
            }
        }
        if changed {
            // Choices left with nothing to say are dropped, and the event with them.
            choices.retain(|c| {
                let delta_empty = c
                    .get("delta")
                    .and_then(Value::as_object)
                    .is_none_or(|d| d.values().all(|x| x.is_null() || x == ""));
                let finishing = c.get("finish_reason").is_some_and(|f| !f.is_null());
                !delta_empty || finishing
            });
        }
        let keep = !changed || choices_nonempty(&v) || v.get("usage").is_some_and(|u| !u.is_null());
        let event_name = ev.event.clone();
        let rewritten = |v: &Value| SseEvent {
            raw: data_event(&v.to_string()),
            event: event_name.clone(),
            data: Some(v.to_string()),
        };
        let mut out = Vec::new();
        if finished.is_empty() {
            if keep {
                out.push(GateItem::Event(if changed { rewritten(&v) } else { ev }));
            }
            return out;
        }
        let then = keep.then(|| if changed { rewritten(&v) } else { ev });
        let n = finished.len();
        for (i, choice) in finished.into_iter().enumerate() {
            let held = self.held.remove(&choice).unwrap_or_default();
            out.push(GateItem::Complete {
                choice,
                calls: held.calls.into_values().collect(),
                overflow: held.overflow,
                // The completing event follows the last choice's decisions.
                then: None,
            });
            if i + 1 == n
                && let Some(GateItem::Complete { then: t, .. }) = out.last_mut()
            {
                *t = then.clone();
            }
        }
        out
    }

    /// The stream ended: the calls still held are complete.
    pub(crate) fn finish(&mut self) -> Vec<GateItem> {
        self.complete_all()
    }

    fn complete_all(&mut self) -> Vec<GateItem> {
        std::mem::take(&mut self.held)
            .into_iter()
            .map(|(choice, h)| GateItem::Complete {
                choice,
                calls: h.calls.into_values().collect(),
                overflow: h.overflow,
                then: None,
            })
            .collect()
    }

    fn fold(&mut self, choice: u64, at: u64, id: Option<&Value>, f: Option<&Value>, legacy: bool) {
        let held = self.held.entry(choice).or_default();
        if !held.calls.contains_key(&at) && held.calls.len() >= MAX_CALLS_PER_CHOICE {
            held.overflow = true;
            return;
        }
        let call = held.calls.entry(at).or_insert_with(|| HeldCall {
            legacy,
            ..HeldCall::default()
        });
        if let Some(id) = id.and_then(Value::as_str) {
            call.id = Some(id.to_string());
        }
        let Some(f) = f else { return };
        if let Some(n) = f.get("name").and_then(Value::as_str)
            && call.name.len() + n.len() <= 1024
        {
            call.name.push_str(n);
        }
        if let Some(a) = f.get("arguments").and_then(Value::as_str) {
            if call.oversize || call.arguments.len() + a.len() > MAX_ARGUMENT_BYTES {
                call.oversize = true;
            } else {
                call.arguments.push_str(a);
            }
        }
    }

    /// The events that release one choice's decided calls: the allowed calls whole, the
    /// refusal and the decisions in one event; then `then` with `finish_reason` set to
    /// `stop` when no call is left.
    pub(crate) fn release(
        &self,
        choice: u64,
        calls: &[HeldCall],
        verdicts: &[ToolVerdict],
        overflow: bool,
        then: Option<SseEvent>,
    ) -> Vec<SseEvent> {
        let mut delta = Map::new();
        let kept: Vec<Value> = calls
            .iter()
            .zip(verdicts)
            .filter(|(c, v)| !c.legacy && v.action() == ToolAction::Allow)
            .enumerate()
            .map(|(i, (c, _))| c.shape(Some(i)))
            .collect();
        let legacy = calls
            .iter()
            .zip(verdicts)
            .find(|(c, v)| c.legacy && v.action() == ToolAction::Allow)
            .map(|(c, _)| c.shape(None));
        let any_kept = !kept.is_empty() || legacy.is_some();
        if !kept.is_empty() {
            delta.insert("tool_calls".into(), Value::Array(kept));
        }
        if let Some(l) = legacy {
            delta.insert("function_call".into(), l);
        }
        let refused: Vec<(&HeldCall, &ToolVerdict)> = calls
            .iter()
            .zip(verdicts)
            .filter(|(_, v)| v.action() != ToolAction::Allow)
            .collect();
        let mut text = refusal_text(&refused).unwrap_or_default();
        if overflow {
            text.push_str(&format!(
                " More than {MAX_CALLS_PER_CHOICE} tool calls: the rest were blocked by Rampart."
            ));
        }
        if !text.trim().is_empty() {
            delta.insert("refusal".into(), Value::String(text.trim().to_string()));
        }
        let entries: Vec<Value> = calls
            .iter()
            .zip(verdicts)
            .map(|(c, v)| decision_entry(choice, c, v))
            .collect();
        let mut ev = self.meta.clone();
        ev.insert(
            "choices".into(),
            json!([{"index": choice, "delta": delta, "logprobs": null, "finish_reason": null}]),
        );
        ev.insert("rampart".into(), json!({"tool_decisions": entries}));
        let data = Value::Object(ev).to_string();
        let mut out = vec![SseEvent {
            raw: data_event(&data),
            event: None,
            data: Some(data),
        }];
        if let Some(t) = then {
            out.push(if any_kept {
                t
            } else {
                finish_as_stop(t, choice)
            });
        }
        out
    }
}

fn choices_nonempty(v: &Value) -> bool {
    v.get("choices")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty())
}

/// The completing event with `finish_reason` `tool_calls` / `function_call` of `choice`
/// set to `stop` (no call left).
fn finish_as_stop(ev: SseEvent, choice: u64) -> SseEvent {
    let Some(mut v) = ev
        .data
        .as_deref()
        .and_then(|d| serde_json::from_str::<Value>(d).ok())
    else {
        return ev;
    };
    let mut changed = false;
    for (pos, c) in v
        .get_mut("choices")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let index = c.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
        if index == choice
            && let Some(Value::String(f)) = c.get("finish_reason")
            && (f == "tool_calls" || f == "function_call")
        {
            c["finish_reason"] = json!("stop");
            changed = true;
        }
    }
    if !changed {
        return ev;
    }
    let data = v.to_string();
    SseEvent {
        raw: data_event(&data),
        event: ev.event,
        data: Some(data),
    }
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
            let mut verdicts = Vec::with_capacity(calls.len());
            for c in &calls {
                verdicts.push(tools.decide(state, caller, c).await);
            }
            gate.release(choice, &calls, &verdicts, overflow, then)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(data: &str) -> SseEvent {
        SseEvent {
            raw: Bytes::from(format!("data: {data}\n\n")),
            event: None,
            data: Some(data.to_string()),
        }
    }

    fn forwarded(items: &[GateItem]) -> String {
        items
            .iter()
            .filter_map(|i| match i {
                GateItem::Event(e) => Some(String::from_utf8_lossy(&e.raw).into_owned()),
                GateItem::Complete { .. } => None,
            })
            .collect()
    }

    /// Nothing of a call's arguments is forwarded before the choice finishes: each event is
    /// pushed one at a time and checked.
    #[test]
    fn tool_call_deltas_are_held_until_the_choice_finishes() {
        let mut g = StreamGate::new();
        let events = [
            r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me look."},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"/etc/"}}]},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"passwd\"}"}}]},"finish_reason":null}]}"#,
        ];
        let first = g.push(ev(events[0]));
        assert!(forwarded(&first).contains("Let me look."), "content flows");
        for (i, e) in events[1..].iter().enumerate() {
            let items = g.push(ev(e));
            let out = forwarded(&items);
            // The event that opened the call keeps what else it said (the role); events
            // with nothing else are dropped.
            assert_eq!(out.contains(r#""role":"assistant""#), i == 0, "{out}");
            assert_eq!(items.len(), usize::from(i == 0), "{out}");
            assert!(!out.contains("passwd") && !out.contains("/etc"), "{out}");
            assert!(!out.contains("read_file"), "{out}");
            assert!(
                items.iter().all(|i| matches!(i, GateItem::Event(_))),
                "not complete yet"
            );
        }
        let items = g.push(ev(
            r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ));
        let [
            GateItem::Complete {
                choice: 0,
                calls,
                then: Some(_),
                ..
            },
        ] = items.as_slice()
        else {
            panic!("complete on finish: {items:?}");
        };
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, r#"{"path":"/etc/passwd"}"#);
        assert_eq!(calls[0].id.as_deref(), Some("call_1"));
    }

    #[test]
    fn held_calls_complete_at_done_and_at_the_end() {
        let mut g = StreamGate::new();
        g.push(ev(
            r#"{"choices":[{"index":0,"delta":{"function_call":{"name":"f","arguments":"{}"}},"finish_reason":null}]}"#,
        ));
        let items = g.push(ev("[DONE]"));
        assert!(matches!(items[0], GateItem::Complete { .. }));
        assert!(matches!(items[1], GateItem::Event(_)));
        let mut g = StreamGate::new();
        g.push(ev(
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{"}}]},"finish_reason":null}]}"#,
        ));
        assert_eq!(g.finish().len(), 1);
    }

    #[test]
    fn oversized_arguments_stop_growing_and_fail() {
        let mut g = StreamGate::new();
        let piece = "a".repeat(MAX_ARGUMENT_BYTES / 2 + 1);
        for _ in 0..3 {
            let d = json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":piece}}]}}]});
            g.push(ev(&d.to_string()));
        }
        let items = g.finish();
        let GateItem::Complete { calls, .. } = &items[0] else {
            panic!()
        };
        assert!(calls[0].oversize);
        assert!(calls[0].arguments.len() <= MAX_ARGUMENT_BYTES);
        assert!(matches!(
            calls[0].arguments(),
            Err(ArgumentsError::TooLarge { .. })
        ));
    }
}
