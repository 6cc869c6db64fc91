//! Turn mapping: a chat request's messages as the turns of a conversation, and a message
//! (or a completed answer) as an assistant turn.

use super::wire::role_of;
use rampart_core::Role;
use rampart_core::conversation::{ToolCall, Turn};
use serde_json::Value;

/// The conversation of a chat request: one turn per message, in order (so turn indexes are
/// message indexes). The text is the string content, or the content parts' texts joined by
/// line breaks; an assistant's `tool_calls` (and legacy `function_call`) become tool calls;
/// a tool message keeps its `tool_call_id`. Called after [`extract_chat`] accepted the body.
pub(super) fn conversation_turns(body: &Value) -> Vec<Turn> {
    body.get("messages")
        .and_then(Value::as_array)
        .map(|ms| ms.iter().map(message_turn).collect())
        .unwrap_or_default()
}

fn message_turn(m: &Value) -> Turn {
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .and_then(role_of)
        .unwrap_or(Role::User);
    let mut t = assistant_turn(m);
    t.role = role;
    t.tool_call_id = m
        .get("tool_call_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    t
}

/// A message's text and tool calls, as an assistant turn.
pub(super) fn assistant_turn(m: &Value) -> Turn {
    let text = match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let call = |id: Option<&Value>, f: &Value| ToolCall {
        id: id.and_then(Value::as_str).map(str::to_string),
        name: f
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        arguments: f
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    };
    let mut tool_calls: Vec<ToolCall> = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("function").map(|f| call(c.get("id"), f)))
        .collect();
    if let Some(f) = m.get("function_call").filter(|f| f.is_object()) {
        tool_calls.push(call(None, f));
    }
    let mut t = Turn::new(Role::Assistant, text);
    t.tool_calls = tool_calls;
    t
}

#[cfg(test)]
mod tests {
    use super::super::wire::message_slots;
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_become_turns_one_for_one() {
        let body = json!({"messages": [
            {"role": "developer", "content": "dev"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "[1]"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "r1"},
            {"role": "function", "name": "g", "content": "r2"},
            {"role": "assistant", "content": "ok", "function_call": {"name": "h", "arguments": "{\"x\":1}"}}
        ]});
        let turns = conversation_turns(&body);
        let roles: Vec<Role> = turns.iter().map(|t| t.role).collect();
        assert_eq!(
            roles,
            [
                Role::Developer,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Tool,
                Role::Assistant
            ]
        );
        assert_eq!(turns[1].text, "a\nb");
        let calls: Vec<(Option<&str>, &str, &str)> = turns[2]
            .tool_calls
            .iter()
            .map(|c| (c.id.as_deref(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(calls, [(Some("c1"), "f", "{}"), (Some("c2"), "g", "[1]")]);
        assert_eq!(turns[3].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(turns[5].text, "ok");
        assert_eq!(turns[5].tool_calls[0].name, "h");
        // Where each message's texts live, for SANITIZE.
        assert_eq!(
            message_slots(&body, 1),
            [
                (Some("/messages/1/content/0/text".into()), "a".to_string()),
                (Some("/messages/1/content/2/text".into()), "b".to_string())
            ]
        );
        assert_eq!(message_slots(&body, 2).len(), 2);
    }
}
