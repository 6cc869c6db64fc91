//! The OpenAI request shapes: the texts a chat or completions request gives the model, each
//! with the place it lives in the body ([`Slot`]), so a sanitized text can be put back.

use super::Kind;
use crate::state::ServiceError;
use rampart_core::{Role, Segment};
use serde_json::Value;

/// Where a segment's text lives in the request JSON.
#[derive(Debug, Clone)]
pub(super) enum Slot {
    /// `messages[i].content` (a string).
    Content(usize),
    /// `messages[i].content[j].text`.
    Part(usize, usize),
    /// `messages[i].tool_calls[j].function.arguments`.
    ToolArgs(usize, usize),
    /// `messages[i].function_call.arguments` (the legacy single function call).
    FunctionArgs(usize),
    /// `prompt` (a string).
    Prompt,
    /// `prompt[j]`.
    PromptItem(usize),
    /// `suffix`.
    Suffix,
    /// Several strings scanned as one segment, each with its JSON pointer into the body
    /// (`None` for an object key, which has no place to rewrite): the texts in the tool,
    /// function and response-format definitions, or the `name`s of the messages of one role.
    /// One segment for many strings keeps a request with many tools within the pipeline's
    /// segment limit; SANITIZE scans the pieces one by one ([`sanitize_groups`]).
    Group(Vec<(Option<String>, String)>),
}

impl Slot {
    pub(super) fn get_mut<'a>(&self, body: &'a mut Value) -> Option<&'a mut Value> {
        match self {
            Slot::Content(i) => body.get_mut("messages")?.get_mut(*i)?.get_mut("content"),
            Slot::Part(i, j) => body
                .get_mut("messages")?
                .get_mut(*i)?
                .get_mut("content")?
                .get_mut(*j)?
                .get_mut("text"),
            Slot::ToolArgs(i, j) => body
                .get_mut("messages")?
                .get_mut(*i)?
                .get_mut("tool_calls")?
                .get_mut(*j)?
                .get_mut("function")?
                .get_mut("arguments"),
            Slot::FunctionArgs(i) => body
                .get_mut("messages")?
                .get_mut(*i)?
                .get_mut("function_call")?
                .get_mut("arguments"),
            Slot::Prompt => body.get_mut("prompt"),
            Slot::PromptItem(j) => body.get_mut("prompt")?.get_mut(*j),
            Slot::Suffix => body.get_mut("suffix"),
            // Each piece gets its own text: see `sanitize_groups`.
            Slot::Group(_) => None,
        }
    }
}

/// The request's segments, where each came from, and the system prompt text.
#[derive(Debug, Default)]
pub(super) struct Extracted {
    pub(super) segments: Vec<Segment>,
    pub(super) slots: Vec<Slot>,
    pub(super) system_prompt: String,
}

impl Extracted {
    /// Adds one message text as a segment of `role` (nothing when empty); a system or
    /// developer text is also part of the system prompt.
    fn push(&mut self, role: Role, text: &str, slot: Slot) {
        if matches!(role, Role::System | Role::Developer) {
            if !self.system_prompt.is_empty() {
                self.system_prompt.push('\n');
            }
            self.system_prompt.push_str(text);
        }
        if !text.is_empty() {
            self.segments.push(Segment::new(role, text));
            self.slots.push(slot);
        }
    }

    /// Adds the arguments of an assistant's tool call: text the model wrote for a tool, read
    /// by the tool gate (predicates, provenance) when the call was made, not a prompt. Scanned
    /// as trusted: its findings are reported, never counted (a `user_email` argument is not
    /// an injection, a password the user asked to set is not a leak).
    /// (`tool_calls` on a message of another role are that role's text.)
    fn push_arguments(&mut self, role: Role, text: &str, slot: Slot) {
        if !text.is_empty() {
            let mut s = Segment::new(role, text);
            if role == Role::Assistant {
                s.trust = Some(rampart_core::Trust::Trusted);
            }
            self.segments.push(s);
            self.slots.push(slot);
        }
    }

    /// Adds `pieces` (JSON pointer, text) as one segment; nothing when all are empty.
    fn push_group(&mut self, role: Role, pieces: Vec<(Option<String>, String)>) {
        let pieces: Vec<(Option<String>, String)> =
            pieces.into_iter().filter(|(_, t)| !t.is_empty()).collect();
        if pieces.is_empty() {
            return;
        }
        let text = pieces
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        self.segments.push(Segment::new(role, text));
        self.slots.push(Slot::Group(pieces));
    }
}

pub(super) fn role_of(name: &str) -> Option<Role> {
    Some(match name {
        "system" => Role::System,
        "developer" => Role::Developer,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" | "function" => Role::Tool,
        _ => return None,
    })
}

/// Request fields the model reads as definitions: tool and function definitions (their
/// JSON-schema parameters included) and the response format's JSON schema.
const DEFINITION_FIELDS: [&str; 3] = ["tools", "functions", "response_format"];

/// Deepest nesting searched in a definition: far beyond what a real schema needs. A deeper
/// definition is refused rather than forwarded partly unscanned.
const MAX_DEFINITION_DEPTH: usize = 64;

/// JSON-schema keywords whose object maps names (property names, definition names) to
/// schemas: a `description` key directly inside one is a name, not a description.
const NAME_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Every text the model can read in a definition, at any depth: every string value (with
/// its JSON pointer) and every object key (no pointer: a key cannot be rewritten in place).
/// Not only `description`s: names, property names, `enum`, `const`, `default`, `examples`
/// and `title` values are rendered to the model too. A `description` that is not a string
/// is refused: upstreams render arrays and objects to the model as well, so forwarding one
/// unscanned would be a blind spot.
fn definition_texts(
    v: &Value,
    pointer: &str,
    field: &str,
    depth: usize,
    in_name_map: bool,
    out: &mut Vec<(Option<String>, String)>,
) -> Result<(), ServiceError> {
    if depth > MAX_DEFINITION_DEPTH {
        return Err(ServiceError::BadRequest(format!(
            "\"{field}\" is nested more than {MAX_DEFINITION_DEPTH} levels deep"
        )));
    }
    let visit = |x: &Value, p: String, names: bool, out: &mut Vec<_>| match x {
        Value::String(t) => {
            out.push((Some(p), t.clone()));
            Ok(())
        }
        Value::Object(_) | Value::Array(_) => definition_texts(x, &p, field, depth + 1, names, out),
        _ => Ok(()),
    };
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let p = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push((None, k.clone()));
                if k == "description" && !in_name_map && !x.is_string() {
                    return Err(ServiceError::BadRequest(format!(
                        "\"{p}\": a description must be a string"
                    )));
                }
                let names = !in_name_map && NAME_MAPS.contains(&k.as_str());
                visit(x, p, names, out)?;
            }
        }
        Value::Array(items) => {
            for (j, x) in items.iter().enumerate() {
                visit(x, format!("{pointer}/{j}"), false, out)?;
            }
        }
        Value::String(t) => out.push((Some(pointer.to_string()), t.clone())),
        _ => {}
    }
    Ok(())
}

/// A chat request's segments: one per message text (content, content parts, tool-call and
/// function-call arguments) with the message's role, in message order; then the messages'
/// `name`s, one segment per role; then every description in the definitions (tools,
/// functions, response format) as one `tool` segment. Definitions are scanned as `tool`
/// text because they often come from third parties (MCP servers, plugin manifests), where
/// a poisoned description is an injection the model reads; the policy's trust for `tool`
/// applies.
pub(super) fn extract_chat(body: &Value) -> Result<Extracted, ServiceError> {
    let bad = |m: String| ServiceError::BadRequest(m);
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("\"messages\" must be an array of messages".into()))?;
    if messages.is_empty() {
        return Err(bad("\"messages\" must not be empty".into()));
    }
    let mut out = Extracted::default();
    let mut names = std::collections::BTreeMap::<Role, Vec<(Option<String>, String)>>::new();
    for (i, m) in messages.iter().enumerate() {
        let role_name = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("messages[{i}]: missing \"role\"")))?;
        let role = role_of(role_name).ok_or_else(|| {
            bad(format!(
                "messages[{i}]: unknown role (expected system, developer, user, assistant, tool)"
            ))
        })?;
        extract_content(&mut out, i, role, m.get("content"))?;
        extract_call_arguments(&mut out, i, role, m)?;
        if let Some(n) = m.get("name").and_then(Value::as_str) {
            names
                .entry(role)
                .or_default()
                .push((Some(format!("/messages/{i}/name")), n.to_string()));
        }
    }
    for (role, pieces) in names {
        out.push_group(role, pieces);
    }
    let mut definitions = Vec::new();
    for field in DEFINITION_FIELDS {
        if let Some(v) = body.get(field) {
            definition_texts(v, &format!("/{field}"), field, 0, false, &mut definitions)?;
        }
    }
    out.push_group(Role::Tool, definitions);
    Ok(out)
}

/// The texts of message `i`'s content: a string, or the `text` of each content part.
fn extract_content(
    out: &mut Extracted,
    i: usize,
    role: Role,
    content: Option<&Value>,
) -> Result<(), ServiceError> {
    let bad = |m: String| ServiceError::BadRequest(m);
    match content {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => out.push(role, s, Slot::Content(i)),
        Some(Value::Array(parts)) => {
            for (j, p) in parts.iter().enumerate() {
                match p {
                    Value::Object(o) => {
                        if let Some(t) = o.get("text").and_then(Value::as_str) {
                            out.push(role, t, Slot::Part(i, j));
                        } else if o.get("type").and_then(Value::as_str) == Some("text") {
                            return Err(bad(format!(
                                "messages[{i}].content[{j}]: a text part needs a \"text\" string"
                            )));
                        }
                    }
                    _ => {
                        return Err(bad(format!(
                            "messages[{i}].content[{j}]: content parts must be objects"
                        )));
                    }
                }
            }
        }
        Some(_) => {
            return Err(bad(format!(
                "messages[{i}].content must be a string, an array of parts, or null"
            )));
        }
    }
    Ok(())
}

/// The arguments of message `i`'s tool calls and legacy function call. Arguments are a JSON
/// text; an object or array in their place is rendered to the model by some upstreams, so
/// it is refused rather than forwarded unscanned.
fn extract_call_arguments(
    out: &mut Extracted,
    i: usize,
    role: Role,
    m: &Value,
) -> Result<(), ServiceError> {
    let bad = |m: String| ServiceError::BadRequest(m);
    if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
        for (j, c) in calls.iter().enumerate() {
            match c.get("function").and_then(|f| f.get("arguments")) {
                None | Some(Value::Null) => {}
                Some(Value::String(a)) => out.push_arguments(role, a, Slot::ToolArgs(i, j)),
                Some(_) => {
                    return Err(bad(format!(
                        "messages[{i}].tool_calls[{j}].function.arguments must be a string"
                    )));
                }
            }
        }
    }
    match m.get("function_call").and_then(|f| f.get("arguments")) {
        None | Some(Value::Null) => {}
        Some(Value::String(a)) => out.push_arguments(role, a, Slot::FunctionArgs(i)),
        Some(_) => {
            return Err(bad(format!(
                "messages[{i}].function_call.arguments must be a string"
            )));
        }
    }
    Ok(())
}

fn extract_completions(body: &Value) -> Result<Extracted, ServiceError> {
    let bad = |m: &str| ServiceError::BadRequest(m.to_string());
    let mut out = Extracted::default();
    match body.get("prompt") {
        Some(Value::String(s)) => {
            out.segments.push(Segment::new(Role::User, s.as_str()));
            out.slots.push(Slot::Prompt);
        }
        Some(Value::Array(items)) => {
            for (j, it) in items.iter().enumerate() {
                match it {
                    Value::String(s) => {
                        out.segments.push(Segment::new(Role::User, s.as_str()));
                        out.slots.push(Slot::PromptItem(j));
                    }
                    _ => {
                        return Err(bad(
                            "\"prompt\" must be a string or an array of strings (token-id \
                             prompts cannot be scanned)",
                        ));
                    }
                }
            }
        }
        None => return Err(bad("missing \"prompt\"")),
        Some(_) => {
            return Err(bad(
                "\"prompt\" must be a string or an array of strings (token-id prompts cannot \
                 be scanned)",
            ));
        }
    }
    if let Some(Value::String(s)) = body.get("suffix") {
        out.segments.push(Segment::new(Role::User, s.as_str()));
        out.slots.push(Slot::Suffix);
    }
    Ok(out)
}

/// A parsed proxy request: the body as it will be forwarded, and its scannable texts.
pub(super) struct ParsedRequest {
    pub(super) body: Value,
    pub(super) extracted: Extracted,
}

/// Step 1: the body as JSON, and its segments (only the fields read here are interpreted).
pub(super) fn parse_request(raw: &[u8], kind: Kind) -> Result<ParsedRequest, ServiceError> {
    let body: Value = serde_json::from_slice(raw)
        .map_err(|e| ServiceError::BadRequest(crate::api::json_error_message(&e)))?;
    if !body.is_object() {
        return Err(ServiceError::BadRequest(
            "the request body must be a JSON object".into(),
        ));
    }
    let extracted = match kind {
        Kind::Chat => extract_chat(&body),
        Kind::Completions => extract_completions(&body),
    }?;
    Ok(ParsedRequest { body, extracted })
}

/// The text places of message `i` (JSON pointer, text): its string content or content
/// parts, then its tool-call and function-call arguments.
pub(super) fn message_slots(body: &Value, i: usize) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    let Some(m) = body.get("messages").and_then(|ms| ms.get(i)) else {
        return out;
    };
    match m.get("content") {
        Some(Value::String(s)) => out.push((Some(format!("/messages/{i}/content")), s.clone())),
        Some(Value::Array(parts)) => {
            for (j, p) in parts.iter().enumerate() {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    out.push((Some(format!("/messages/{i}/content/{j}/text")), t.into()));
                }
            }
        }
        _ => {}
    }
    for (j, c) in m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(a) = c.pointer("/function/arguments").and_then(Value::as_str) {
            out.push((
                Some(format!("/messages/{i}/tool_calls/{j}/function/arguments")),
                a.into(),
            ));
        }
    }
    if let Some(a) = m
        .pointer("/function_call/arguments")
        .and_then(Value::as_str)
    {
        out.push((
            Some(format!("/messages/{i}/function_call/arguments")),
            a.into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extracts_roles_parts_and_tool_args() {
        let body = json!({"model": "m", "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "1", "content": "result"}
        ]});
        let e = extract_chat(&body).expect("valid");
        let roles: Vec<Role> = e.segments.iter().map(|s| s.role).collect();
        assert_eq!(
            roles,
            [Role::System, Role::User, Role::Assistant, Role::Tool]
        );
        assert_eq!(e.system_prompt, "sys");
        assert!(extract_chat(&json!({"messages": [{"role": "wizard", "content": "x"}]})).is_err());
        assert!(extract_chat(&json!({"messages": "x"})).is_err());
    }

    #[test]
    fn completions_prompt_forms() {
        assert_eq!(
            extract_completions(&json!({"prompt": "a"}))
                .expect("ok")
                .segments
                .len(),
            1
        );
        assert_eq!(
            extract_completions(&json!({"prompt": ["a", "b"], "suffix": "c"}))
                .expect("ok")
                .segments
                .len(),
            3
        );
        assert!(extract_completions(&json!({"prompt": [1, 2, 3]})).is_err());
    }

    #[test]
    fn definitions_and_names_are_extracted_as_groups() {
        let body = json!({"messages": [
            {"role": "system", "content": "sys", "name": "boss"},
            {"role": "user", "content": "hi", "name": "alice"},
            {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{\"a\":1}"}}
        ], "tools": [{"type": "function", "function": {"name": "t", "description": "tool doc",
            "parameters": {"type": "object", "properties": {"description": {"type": "string", "description": "param doc"}, "a/b": {"description": "slash"}}}}}],
           "functions": [{"name": "g", "description": "legacy doc"}],
           "response_format": {"type": "json_schema", "json_schema": {"name": "r", "description": "format doc",
            "schema": {"type": "object", "properties": {"x": {"type": "array", "items": {"description": "deep doc"}}}}}}});
        let e = extract_chat(&body).expect("valid");
        let got: Vec<(Role, &str)> = e
            .segments
            .iter()
            .map(|s| (s.role, s.text.as_str()))
            .collect();
        assert_eq!(
            got[..5],
            [
                (Role::System, "sys"),
                (Role::User, "hi"),
                (Role::Assistant, "{\"a\":1}"),
                (Role::System, "boss"),
                (Role::User, "alice"),
            ]
        );
        let Some(tool) = e.segments.get(5) else {
            panic!("a tool segment");
        };
        assert_eq!(tool.role, Role::Tool);
        assert_eq!(e.system_prompt, "sys");
        let Some(Slot::Group(pieces)) = e.slots.last() else {
            panic!("a group slot");
        };
        let joined: Vec<&str> = pieces.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(tool.text, joined.join("\n\n"));
        // Every string value and every key, names and property names included.
        for t in [
            "tool doc",
            "slash",
            "param doc",
            "legacy doc",
            "format doc",
            "deep doc",
            "t",
            "g",
            "r",
            "a/b",
            "description",
            "object",
            "function",
            "json_schema",
        ] {
            assert!(joined.contains(&t), "{t}: {joined:?}");
        }
        for (p, t) in pieces {
            if let Some(p) = p {
                assert_eq!(
                    body.pointer(p).and_then(Value::as_str),
                    Some(t.as_str()),
                    "{p}"
                );
            }
        }
        assert!(pieces.iter().any(|(p, _)| p.as_deref()
            == Some("/tools/0/function/parameters/properties/a~1b/description")));
        // Nesting past the bound is refused, not forwarded unscanned.
        let mut deep = json!({"description": "bottom"});
        for _ in 0..=MAX_DEFINITION_DEPTH {
            deep = json!({"items": deep});
        }
        let body =
            json!({"messages": [{"role": "user", "content": "hi"}], "response_format": deep});
        assert!(matches!(
            extract_chat(&body),
            Err(ServiceError::BadRequest(_))
        ));
    }
}
