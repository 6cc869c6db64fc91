//! A conversation as a chat request carries it (OpenAI or Anthropic `messages`), with what
//! provenance needs beyond the texts: which tool call produced each tool result, and which
//! spans the detectors flagged.

use crate::{ArgumentProvenance, Index, Kind, Message, Origin, ProvenanceError, Source};
use rampart_core::Role;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::Range;

/// Where in its message a text lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "in", content = "index", rename_all = "snake_case")]
pub enum Part {
    /// The message's `content` string.
    Content,
    /// `content[i]`: a text part, an Anthropic `tool_result` or `tool_use` block.
    Part(usize),
    /// `tool_calls[i].function.arguments` (`function_call.arguments`: index 0).
    ToolCall(usize),
}

/// One text of the conversation.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The message's index in the request's `messages`.
    pub message: usize,
    /// Where in the message.
    pub part: Part,
    /// Its role (an Anthropic `tool_result` block in a user message is [`Role::Tool`]).
    pub role: Role,
    /// Its trust.
    pub source: Source,
    /// The text.
    pub text: String,
    /// Spans the detectors scored as injections (bytes of `text`), with their scores.
    pub flagged: Vec<(Range<usize>, f32)>,
    /// For a tool result: the call (index into [`Conversation::calls`]) that produced it.
    pub produced_by: Option<usize>,
}

/// A tool call the assistant made earlier in the conversation.
#[derive(Debug, Clone)]
pub struct PriorCall {
    /// Its id (`tool_calls[].id`, Anthropic `tool_use.id`).
    pub id: Option<String>,
    /// The tool.
    pub name: String,
    /// Its arguments (`Null` when they were not JSON).
    pub arguments: Value,
    /// The assistant message that made it.
    pub message: usize,
}

/// A tool result whose value the user's own request vouches for: it was produced by a call
/// whose every argument the user (or the system prompt) wrote, and it holds exactly one
/// untrusted value of the argument's kind ("pay the bill in bills/march.txt").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedDocument {
    /// The assistant message that made the call.
    pub call_message: usize,
    /// The tool called.
    pub tool: String,
}

/// The conversation so far, ready for [`Conversation::attribute`].
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    entries: Vec<Entry>,
    calls: Vec<PriorCall>,
}

impl Conversation {
    /// An empty conversation.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads OpenAI chat messages (string or part contents, `tool_calls`, `tool` and legacy
    /// `function` results) or Anthropic messages (`text`, `tool_use` and `tool_result`
    /// blocks). System, developer and user texts are trusted; assistant turns, tool results
    /// and unknown roles are not (an assistant turn may repeat what a tool returned).
    pub fn from_messages(messages: &Value) -> Result<Self, ProvenanceError> {
        let list = messages
            .as_array()
            .ok_or_else(|| ProvenanceError::Shape("`messages` is not an array".into()))?;
        if list.len() > crate::MAX_MESSAGES {
            return Err(ProvenanceError::TooLarge {
                bytes: 0,
                messages: list.len(),
            });
        }
        let mut c = Conversation::new();
        for (i, m) in list.iter().enumerate() {
            c.read_message(i, m)?;
        }
        Ok(c)
    }

    /// Adds a trusted text outside `messages` (Anthropic's top-level `system`), as message
    /// index `message`.
    pub fn push_trusted(&mut self, message: usize, text: &str) {
        self.push(
            message,
            Part::Content,
            Role::System,
            Source::Trusted,
            text,
            None,
        );
    }

    /// The texts, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The assistant's earlier tool calls, in order.
    pub fn calls(&self) -> &[PriorCall] {
        &self.calls
    }

    /// Marks a span of a text as scored `score` for injection. A detector's span holds the
    /// words it matched; the values the instruction names sit around them, so the span is
    /// widened to its paragraph (text between blank lines), at most [`FLAG_WIDEN_BYTES`]
    /// each side. A text that is not there, or a span outside it, is ignored (the scan and
    /// this reading saw different requests).
    pub fn flag(&mut self, message: usize, part: Part, span: Range<usize>, score: f32) {
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| e.message == message && e.part == part)
            && span.end <= e.text.len()
            && span.start <= span.end
            && e.text.is_char_boundary(span.start)
            && e.text.is_char_boundary(span.end)
        {
            let wide = paragraph(&e.text, span);
            e.flagged.push((wide, score));
        }
    }

    /// [`Conversation::flag`] for a span of a message's texts joined by line breaks (the
    /// string content, or the text parts in order), as a scan of the whole message reports
    /// it: each part the span overlaps gets its piece.
    pub fn flag_joined(&mut self, message: usize, span: Range<usize>, score: f32) {
        let mut offset = 0;
        let mut pieces = Vec::new();
        for e in self
            .entries
            .iter()
            .filter(|e| e.message == message && !matches!(e.part, Part::ToolCall(_)))
        {
            let end = offset + e.text.len();
            if span.start < end && offset < span.end.max(span.start + 1) {
                let from = span.start.saturating_sub(offset).min(e.text.len());
                let to = (span.end - offset.min(span.end)).min(e.text.len());
                pieces.push((e.part, from..to));
            }
            offset = end + 1;
        }
        for (part, r) in pieces {
            self.flag(message, part, r, score);
        }
    }

    /// The provenance of each leaf of `arguments`, message indices as in the request, with
    /// the document the user named where one vouches for an untrusted value.
    ///
    /// `documents` names the tools that fetch one document, with the argument that names it
    /// (`read_file` → `path`): only their results can vouch.
    pub fn attribute(
        &self,
        arguments: &Value,
        trusted_values: &[String],
        documents: &BTreeMap<String, String>,
    ) -> Result<Vec<ArgumentProvenance>, ProvenanceError> {
        let messages: Vec<Message<'_>> = self
            .entries
            .iter()
            .map(|e| Message {
                role: e.role,
                source: e.source,
                text: &e.text,
                flagged: e.flagged.clone(),
            })
            .collect();
        let mut kinds = Vec::new();
        crate::leaf_kinds(arguments, &mut kinds);
        for c in &self.calls {
            crate::leaf_kinds(&c.arguments, &mut kinds);
        }
        let index = Index::build_for(&messages, trusted_values, &kinds)?;
        let mut out = index.of_arguments(arguments);
        for p in &mut out {
            p.named_document = self.vouching(&index, p, documents);
            match &mut p.origin {
                Origin::Trusted {
                    message: Some(m), ..
                }
                | Origin::Untrusted { message: m, .. } => {
                    *m = self.entries.get(*m).map_or(*m, |e| e.message);
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// The document the user named that holds this untrusted value as its only one of its
    /// kind: fetched by a tool of `documents` whose naming argument the user wrote, with
    /// nothing in it the scan flagged at any score (a document that carries something
    /// that reads as an instruction vouches for nothing). Free text and tokens are never
    /// vouched for: a document's sentence or word is not a value the user asked to take
    /// from it.
    fn vouching(
        &self,
        index: &Index<'_>,
        p: &ArgumentProvenance,
        documents: &BTreeMap<String, String>,
    ) -> Option<NamedDocument> {
        let Origin::Untrusted { message, .. } = &p.origin else {
            return None;
        };
        if matches!(p.kind, Kind::Text | Kind::Token | Kind::Short) {
            return None;
        }
        let entry = self.entries.get(*message)?;
        if !entry.flagged.is_empty() {
            return None;
        }
        let call = &self.calls[entry.produced_by?];
        let naming = call.arguments.get(documents.get(&call.name)?)?;
        let mut leaves = Vec::new();
        leaf_texts(naming, &mut leaves);
        let named = !leaves.is_empty() && leaves.iter().all(|v| index.written_by_trusted(v));
        (named && index.distinct_untrusted_in(*message, p.kind) == 1).then(|| NamedDocument {
            call_message: call.message,
            tool: call.name.clone(),
        })
    }

    fn push(
        &mut self,
        message: usize,
        part: Part,
        role: Role,
        source: Source,
        text: &str,
        produced_by: Option<usize>,
    ) {
        if text.is_empty() {
            return;
        }
        self.entries.push(Entry {
            message,
            part,
            role,
            source,
            text: text.to_string(),
            flagged: Vec::new(),
            produced_by,
        });
    }

    /// The call an OpenAI `tool_call_id` (or Anthropic `tool_use_id`) names.
    fn call_by_id(&self, id: Option<&str>) -> Option<usize> {
        let id = id?;
        self.calls.iter().rposition(|c| c.id.as_deref() == Some(id))
    }

    fn read_message(&mut self, i: usize, m: &Value) -> Result<(), ProvenanceError> {
        let role_name = m.get("role").and_then(Value::as_str).unwrap_or("");
        let (role, source) = match role_name {
            "system" => (Role::System, Source::Trusted),
            "developer" => (Role::Developer, Source::Trusted),
            "user" => (Role::User, Source::Trusted),
            "assistant" => (Role::Assistant, Source::Untrusted),
            "tool" | "function" => (Role::Tool, Source::Untrusted),
            _ => (Role::Tool, Source::Untrusted),
        };
        let produced_by = match role_name {
            "tool" => self.call_by_id(m.get("tool_call_id").and_then(Value::as_str)),
            // The legacy `function` result names the function: the last call of it.
            "function" => m.get("name").and_then(Value::as_str).and_then(|n| {
                self.calls
                    .iter()
                    .rposition(|c| c.name == n && c.id.is_none())
            }),
            _ => None,
        };
        match m.get("content") {
            Some(Value::String(s)) => self.push(i, Part::Content, role, source, s, produced_by),
            Some(Value::Array(parts)) => {
                for (j, part) in parts.iter().enumerate() {
                    self.read_part(i, j, part, role, source, produced_by);
                }
            }
            Some(Value::Null) | None => {}
            Some(_) => {
                return Err(ProvenanceError::Shape(format!(
                    "messages[{i}].content is neither a string nor a list of parts"
                )));
            }
        }
        if role_name == "assistant" {
            self.read_calls(i, m);
        }
        Ok(())
    }

    fn read_part(
        &mut self,
        i: usize,
        j: usize,
        part: &Value,
        role: Role,
        source: Source,
        produced_by: Option<usize>,
    ) {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "tool_result" => {
                let by = self.call_by_id(part.get("tool_use_id").and_then(Value::as_str));
                let text = block_text(part.get("content"));
                self.push(i, Part::Part(j), Role::Tool, Source::Untrusted, &text, by);
            }
            "tool_use" => {
                let input = part.get("input").cloned().unwrap_or(Value::Null);
                self.push(
                    i,
                    Part::Part(j),
                    role,
                    Source::Untrusted,
                    &input.to_string(),
                    None,
                );
                self.calls.push(PriorCall {
                    id: part.get("id").and_then(Value::as_str).map(str::to_string),
                    name: part
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    arguments: input,
                    message: i,
                });
            }
            _ => {
                if let Some(t) = part.get("text").and_then(Value::as_str) {
                    self.push(i, Part::Part(j), role, source, t, produced_by);
                }
            }
        }
    }

    /// An OpenAI assistant message's `tool_calls` (and legacy `function_call`): each
    /// call's arguments are an untrusted text, and the call is remembered for its result.
    fn read_calls(&mut self, i: usize, m: &Value) {
        let calls = m.get("tool_calls").and_then(Value::as_array);
        for (j, c) in calls.into_iter().flatten().enumerate() {
            let f = c.get("function");
            self.read_call(
                i,
                j,
                c.get("id").and_then(Value::as_str),
                f.and_then(|f| f.get("name")).and_then(Value::as_str),
                f.and_then(|f| f.get("arguments")),
            );
        }
        if let Some(f) = m.get("function_call") {
            self.read_call(
                i,
                0,
                None,
                f.get("name").and_then(Value::as_str),
                f.get("arguments"),
            );
        }
    }

    fn read_call(
        &mut self,
        i: usize,
        j: usize,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&Value>,
    ) {
        let text = match arguments {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        };
        self.push(
            i,
            Part::ToolCall(j),
            Role::Assistant,
            Source::Untrusted,
            &text,
            None,
        );
        let parsed = match arguments {
            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::Null),
            Some(v) => v.clone(),
            None => Value::Null,
        };
        self.calls.push(PriorCall {
            id: id.map(str::to_string),
            name: name.unwrap_or("").to_string(),
            arguments: parsed,
            message: i,
        });
    }
}

/// Most bytes a flagged span is widened on each side.
pub const FLAG_WIDEN_BYTES: usize = 400;

/// The paragraph around `span` (bounded by blank lines), at most [`FLAG_WIDEN_BYTES`] each
/// side, on character boundaries.
fn paragraph(text: &str, span: Range<usize>) -> Range<usize> {
    let floor = span.start.saturating_sub(FLAG_WIDEN_BYTES);
    let ceil = (span.end + FLAG_WIDEN_BYTES).min(text.len());
    let mut start = text[..span.start]
        .rfind("\n\n")
        .map_or(0, |i| i + 2)
        .max(floor);
    let mut end = text[span.end..]
        .find("\n\n")
        .map_or(text.len(), |i| span.end + i)
        .min(ceil);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    start.min(span.start)..end.max(span.end)
}

/// An Anthropic block's content: a string, or the texts of its blocks.
fn block_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The string and number leaves of a value, as text (blank strings left out).
fn leaf_texts(v: &Value, out: &mut Vec<String>) {
    crate::for_each_leaf(v, &mut |_, s| {
        if !s.trim().is_empty() {
            out.push(s.to_string());
        }
    });
}
