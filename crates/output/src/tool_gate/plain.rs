//! The tool calls of a plain (not streamed) chat answer: taken out to be decided, then
//! written back as decided.

use super::call::{HeldCall, decision_entry, refusal_text, refused};
use super::verdict::ToolVerdict;
use rampart_tools::ToolAction;
use serde_json::{Map, Value, json};

/// A plain chat completion with tool calls: [`PlainAnswer::calls`] are decided by the
/// caller, in order, and [`PlainAnswer::apply`] writes the verdicts into the answer.
#[derive(Debug, Clone)]
pub struct PlainAnswer {
    answer: Value,
    choices: Vec<ChoiceCalls>,
}

/// The calls of one choice.
#[derive(Debug, Clone)]
struct ChoiceCalls {
    /// Position in `choices`.
    pos: usize,
    /// The choice's `index`.
    index: u64,
    calls: Vec<HeldCall>,
}

/// Why verdicts could not be written into an answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlainGateError {
    /// Not one verdict per call.
    #[error("{got} verdicts for {expected} tool calls")]
    Verdicts {
        /// The calls.
        expected: usize,
        /// The verdicts given.
        got: usize,
    },
    /// The rewritten answer could not be encoded.
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// The answer is not JSON this gate can read (a lone surrogate, a number out of range,
    /// truncated text): its tool calls cannot be checked, so it must not be passed on.
    #[error("the answer is not JSON the tool gate can read ({0}); it is withheld")]
    NotJson(String),
}

impl PlainAnswer {
    /// The answer's calls; `Ok(None)` when it has no tool call (it is then passed on
    /// unchanged). An answer that is not JSON is an error, never passed on: a client's
    /// parser may read calls in it that this one could not (issue 35: a lone `\ud800` or
    /// `1e400` let a call through ungated).
    pub fn parse(bytes: &[u8]) -> Result<Option<PlainAnswer>, PlainGateError> {
        let answer = serde_json::from_slice::<Value>(bytes)
            .map_err(|e| PlainGateError::NotJson(e.to_string()))?;
        let Some(list) = answer.get("choices").and_then(Value::as_array) else {
            return Ok(None);
        };
        let mut choices = Vec::new();
        for (pos, c) in list.iter().enumerate() {
            let index = c.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
            let Some(m) = c.get("message").and_then(Value::as_object) else {
                continue;
            };
            let calls = message_calls(m);
            if !calls.is_empty() {
                choices.push(ChoiceCalls { pos, index, calls });
            }
        }
        Ok((!choices.is_empty()).then_some(PlainAnswer { answer, choices }))
    }

    /// Every call, choice by choice, in the order the verdicts are expected.
    pub fn calls(&self) -> impl Iterator<Item = &HeldCall> {
        self.choices.iter().flat_map(|c| c.calls.iter())
    }

    /// The answer with the verdicts (one per call of [`PlainAnswer::calls`], in order)
    /// applied, and the strictest action.
    pub fn apply(
        mut self,
        verdicts: &[ToolVerdict],
    ) -> Result<(Vec<u8>, ToolAction), PlainGateError> {
        let expected = self.calls().count();
        if verdicts.len() != expected {
            return Err(PlainGateError::Verdicts {
                expected,
                got: verdicts.len(),
            });
        }
        let mut entries = Vec::new();
        let mut strictest = ToolAction::Allow;
        let mut rest = verdicts;
        for choice in &self.choices {
            let (mine, later) = rest.split_at(choice.calls.len());
            rest = later;
            for (call, verdict) in choice.calls.iter().zip(mine) {
                strictest = strictest.max(verdict.action());
                entries.push(decision_entry(choice.index, call, verdict));
            }
            if let Some(c) = self
                .answer
                .get_mut("choices")
                .and_then(|cs| cs.get_mut(choice.pos))
            {
                apply_choice(c, &choice.calls, mine);
            }
        }
        if let Value::Object(top) = &mut self.answer {
            top.insert("rampart".into(), json!({"tool_decisions": entries}));
        }
        Ok((serde_json::to_vec(&self.answer)?, strictest))
    }
}

/// A message's calls: its `tool_calls`, then its legacy `function_call`.
fn message_calls(m: &Map<String, Value>) -> Vec<HeldCall> {
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
    calls
}

/// One choice with its calls decided: the refused calls are taken out and named in the
/// refusal; `finish_reason` becomes `stop` when no call is left.
fn apply_choice(c: &mut Value, calls: &[HeldCall], verdicts: &[ToolVerdict]) {
    let kept: Vec<Value> = calls
        .iter()
        .zip(verdicts)
        .filter(|(c, v)| !c.legacy && v.action() == ToolAction::Allow)
        .map(|(c, _)| c.shape(None))
        .collect();
    let legacy_kept = calls
        .iter()
        .zip(verdicts)
        .any(|(c, v)| c.legacy && v.action() == ToolAction::Allow);
    let Some(m) = c.get_mut("message").and_then(Value::as_object_mut) else {
        return;
    };
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
    if let Some(text) = refusal_text(&refused(calls, verdicts)) {
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

fn string_at(v: &Value, ptr: &str) -> String {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}
