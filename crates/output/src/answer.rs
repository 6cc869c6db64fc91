//! What an output scan reads of an OpenAI answer (streamed answers: [`crate::sse`]).

use serde_json::Value;

/// The texts of a plain (not streamed) chat or completions answer, with their JSON pointers:
/// per choice its `text`, its message's `content`, `refusal` and `reasoning_content` (strings,
/// or the `text` of each part), and each tool call's (and the legacy function call's)
/// `arguments` and `name`.
pub fn response_texts(v: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(choices) = v.get("choices").and_then(Value::as_array) else {
        return out;
    };
    for (i, c) in choices.iter().enumerate() {
        if let Some(t) = c.get("text").and_then(Value::as_str) {
            out.push((format!("/choices/{i}/text"), t.to_string()));
        }
        let Some(m) = c.get("message") else { continue };
        for field in ["content", "refusal", "reasoning_content"] {
            match m.get(field) {
                Some(Value::String(t)) => {
                    out.push((format!("/choices/{i}/message/{field}"), t.clone()))
                }
                Some(Value::Array(parts)) => {
                    for (j, p) in parts.iter().enumerate() {
                        if let Some(t) = p.get("text").and_then(Value::as_str) {
                            out.push((format!("/choices/{i}/message/{field}/{j}/text"), t.into()));
                        }
                    }
                }
                _ => {}
            }
        }
        let mut call_texts = |prefix: String, call: &Value| {
            for field in ["arguments", "name"] {
                if let Some(t) = call.get(field).and_then(Value::as_str) {
                    out.push((format!("{prefix}/{field}"), t.to_string()));
                }
            }
        };
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for (j, call) in calls.iter().enumerate() {
                if let Some(f) = call.get("function") {
                    call_texts(format!("/choices/{i}/message/tool_calls/{j}/function"), f);
                }
            }
        }
        // The legacy single function call.
        if let Some(f) = m.get("function_call") {
            call_texts(format!("/choices/{i}/message/function_call"), f);
        }
    }
    out
}
