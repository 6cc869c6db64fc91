//! The tool calls of a streamed chat answer: held until each choice's calls are complete,
//! then released as decided.

use super::call::{HeldCall, decision_entry, refusal_text, refused};
use super::verdict::ToolVerdict;
use crate::sse::{SseEvent, data_event};
use rampart_tools::{MAX_ARGUMENT_BYTES, ToolAction};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Most calls held per choice of a streamed answer; more are refused.
pub const MAX_CALLS_PER_CHOICE: usize = 128;

/// What the stream gate gives back for one upstream event.
#[derive(Debug)]
pub enum GateItem {
    /// Forward this event (unchanged, or with the tool-call deltas taken out).
    Event(SseEvent),
    /// The calls of one choice are complete: decide them ([`StreamGate::release`]), then
    /// forward `then` (the event that completed them, `finish_reason` to be adjusted).
    Complete {
        /// The choice's index.
        choice: u64,
        /// Its calls, by call index.
        calls: Vec<HeldCall>,
        /// More than [`MAX_CALLS_PER_CHOICE`] calls were sent; the rest are refused.
        overflow: bool,
        /// The event that completed the calls, to forward after the decisions.
        then: Option<SseEvent>,
    },
}

#[derive(Debug, Default)]
struct ChoiceCalls {
    calls: BTreeMap<u64, HeldCall>,
    overflow: bool,
}

/// Holds the tool-call deltas of a streamed answer until each choice's calls are complete
/// (see the module documentation). Pure: the caller decides (and audits).
#[derive(Debug, Default)]
pub struct StreamGate {
    held: BTreeMap<u64, ChoiceCalls>,
    /// `id`, `object`, `created`, `model` of the latest chunk (copied to the events the gate
    /// writes).
    meta: Map<String, Value>,
}

impl StreamGate {
    /// A gate holding nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one upstream event.
    pub fn push(&mut self, ev: SseEvent) -> Vec<GateItem> {
        let Some(data) = ev.data.as_deref() else {
            return vec![GateItem::Event(ev)];
        };
        if data.trim() == "[DONE]" {
            let mut out = self.complete_all();
            out.push(GateItem::Event(ev));
            return out;
        }
        let Ok(mut v) = serde_json::from_str::<Value>(data) else {
            // Fail closed: an event this parser cannot read (a lone surrogate, a number out
            // of range) may hold a call a client's parser reads; it is withheld, and the
            // client is told.
            let notice = serde_json::json!({"error": {
                "message": "Rampart withheld an event of the upstream's stream: it is not JSON the tool gate can read",
                "type": "rampart_unreadable_event",
            }});
            return vec![GateItem::Event(SseEvent {
                raw: data_event(&notice.to_string()),
                event: None,
                data: Some(notice.to_string()),
            })];
        };
        for k in ["id", "object", "created", "model", "system_fingerprint"] {
            if let Some(x) = v.get(k) {
                self.meta.insert(k.into(), x.clone());
            }
        }
        let Some((changed, finished)) = self.take_calls(&mut v) else {
            return vec![GateItem::Event(ev)];
        };
        let keep = !changed || choices_nonempty(&v) || v.get("usage").is_some_and(|u| !u.is_null());
        let forwarded = keep.then(|| {
            if changed {
                SseEvent {
                    raw: data_event(&v.to_string()),
                    event: ev.event.clone(),
                    data: Some(v.to_string()),
                }
            } else {
                ev
            }
        });
        if finished.is_empty() {
            return forwarded.map(GateItem::Event).into_iter().collect();
        }
        let n = finished.len();
        let mut then = forwarded;
        finished
            .into_iter()
            .enumerate()
            .map(|(i, choice)| {
                let held = self.held.remove(&choice).unwrap_or_default();
                GateItem::Complete {
                    choice,
                    calls: held.calls.into_values().collect(),
                    overflow: held.overflow,
                    // The completing event follows the last choice's decisions.
                    then: if i + 1 == n { then.take() } else { None },
                }
            })
            .collect()
    }

    /// Takes the tool-call deltas out of an event's choices (held, folded by call index);
    /// whether the event changed and the choices whose calls it completed (`finish_reason`);
    /// `None` when it has no `choices`.
    fn take_calls(&mut self, v: &mut Value) -> Option<(bool, Vec<u64>)> {
        let choices = v.get_mut("choices").and_then(Value::as_array_mut)?;
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
        Some((changed, finished))
    }

    /// The stream ended: the calls still held are complete.
    pub fn finish(&mut self) -> Vec<GateItem> {
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

    /// The events that release one choice's decided calls (`verdicts`: one per call, in
    /// order): the allowed calls whole, the refusal and the decisions in one event; then
    /// `then` with `finish_reason` set to `stop` when no call is left.
    pub fn release(
        &self,
        choice: u64,
        calls: &[HeldCall],
        verdicts: &[ToolVerdict],
        overflow: bool,
        then: Option<SseEvent>,
    ) -> Vec<SseEvent> {
        let (delta, any_kept) = release_delta(calls, verdicts, overflow);
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

/// The delta that releases decided calls: the allowed calls whole and the refusal; and
/// whether any call was allowed.
fn release_delta(
    calls: &[HeldCall],
    verdicts: &[ToolVerdict],
    overflow: bool,
) -> (Map<String, Value>, bool) {
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
    let mut text = refusal_text(&refused(calls, verdicts)).unwrap_or_default();
    if overflow {
        text.push_str(&format!(
            " More than {MAX_CALLS_PER_CHOICE} tool calls: the rest were blocked by Rampart."
        ));
    }
    if !text.trim().is_empty() {
        delta.insert("refusal".into(), Value::String(text.trim().to_string()));
    }
    (delta, any_kept)
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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rampart_tools::ArgumentsError;

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
