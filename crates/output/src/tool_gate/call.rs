//! A tool call as the model sent it, and what the client sees of its decision.

use super::verdict::{ToolVerdict, approval_json, arguments_of};
use rampart_tools::{ArgumentsError, MAX_ARGUMENT_BYTES, ToolAction};
use serde_json::{Value, json};

/// A call as the model sent it (a `tool_calls` entry or the legacy `function_call`).
#[derive(Debug, Clone, Default)]
pub struct HeldCall {
    pub(crate) id: Option<String>,
    pub(crate) name: String,
    pub(crate) arguments: String,
    /// The legacy `function_call`.
    pub(crate) legacy: bool,
    /// The arguments grew past the limit (no longer appended; the call is blocked).
    pub(crate) oversize: bool,
}

impl HeldCall {
    /// The call's id (`tool_calls[].id`; none for the legacy `function_call`).
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The tool's name as the model sent it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments' text as the model sent it.
    pub fn arguments_text(&self) -> &str {
        &self.arguments
    }

    /// Whether this is the legacy `function_call`.
    pub fn is_legacy(&self) -> bool {
        self.legacy
    }

    /// The parsed arguments (size and depth bounded), or why they cannot be used.
    pub fn arguments(&self) -> Result<Value, ArgumentsError> {
        if self.oversize {
            return Err(ArgumentsError::TooLarge {
                bytes: self.arguments.len(),
                max: MAX_ARGUMENT_BYTES,
            });
        }
        arguments_of(&Value::String(self.arguments.clone()))
    }

    /// The call in the answer's shape (OpenAI).
    pub(crate) fn shape(&self, index: Option<usize>) -> Value {
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

/// One entry of `rampart.tool_decisions`.
pub(crate) fn decision_entry(choice: u64, call: &HeldCall, v: &ToolVerdict) -> Value {
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

/// The calls of one choice that were not allowed, with their verdicts.
pub(crate) fn refused<'a>(
    calls: &'a [HeldCall],
    verdicts: &'a [ToolVerdict],
) -> Vec<(&'a HeldCall, &'a ToolVerdict)> {
    calls
        .iter()
        .zip(verdicts)
        .filter(|(_, v)| v.action() != ToolAction::Allow)
        .collect()
}

/// The refusal text for calls that were not allowed: tool, action and rules (no values).
pub(crate) fn refusal_text(refused: &[(&HeldCall, &ToolVerdict)]) -> Option<String> {
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
