//! What a chat request tells the tool policy about its conversation.

use rampart_core::{Decision, Role};
use rampart_tools::provenance::{Conversation, Part, ProvenanceError, Source};
use serde_json::Value;

/// A conversation key for a request without a client-given conversation id: a hash of its
/// messages up to and including the first user message (stable while the conversation
/// grows).
pub fn conversation_of(body: &Value) -> String {
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
pub fn tools_called(body: &Value) -> Vec<String> {
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
/// per finding counted in such a segment, its points over 3. With conversation state only
/// the calls scanned now count (earlier calls' tool results are not rescanned).
pub fn tool_result_score(d: &Decision) -> Option<f32> {
    d.findings
        .iter()
        .filter(|f| matches!(f.role, Role::Tool | Role::Retrieved) && f.counted)
        .map(|f| (f32::from(f.points) / 3.0).min(1.0))
        .reduce(f32::max)
}

/// Lower-case hex SHA-256.
fn sha256_hex(b: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Where a scanned segment's text lives in the request's `messages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentPlace {
    /// The texts of message `i`, joined by line breaks (string content, or text parts).
    Message(usize),
    /// One text of message `i`.
    Piece(usize, Part),
    /// Not a message text (tool definitions, names).
    Elsewhere,
}

/// The request's conversation for argument provenance, with the spans the scan flagged in
/// its tool results and retrieved documents (per counted finding, its points over 3, as
/// [`tool_result_score`]). `places[i]` says where segment `i` of the scan lives.
pub fn flagged_conversation(
    messages: &Value,
    decision: &Decision,
    places: &[SegmentPlace],
) -> Result<Conversation, ProvenanceError> {
    let mut c = Conversation::from_messages(messages)?;
    for f in decision
        .findings
        .iter()
        .filter(|f| matches!(f.role, Role::Tool | Role::Retrieved) && f.counted)
    {
        let score = (f32::from(f.points) / 3.0).min(1.0);
        let span = f.span.start..f.span.end;
        match places.get(f.segment) {
            Some(SegmentPlace::Message(i)) => c.flag_joined(*i, span, score),
            Some(SegmentPlace::Piece(i, part)) => c.flag(*i, *part, span, score),
            Some(SegmentPlace::Elsewhere) | None => {}
        }
    }
    Ok(c)
}

/// The texts of a conversation a scan must look at for injections (tool results and other
/// untrusted texts that are not the assistant's), as segments of role [`Role::Tool`], with
/// where each lives ([`flagged_conversation`] maps the findings back).
pub fn untrusted_segments(c: &Conversation) -> (Vec<rampart_core::Segment>, Vec<SegmentPlace>) {
    c.entries()
        .iter()
        .filter(|e| e.source == Source::Untrusted && e.role == Role::Tool)
        .map(|e| {
            (
                rampart_core::Segment::new(Role::Tool, e.text.clone()),
                SegmentPlace::Piece(e.message, e.part),
            )
        })
        .unzip()
}

/// A check call's `messages`, read: the conversation, and the untrusted texts the pipeline
/// must scan ([`CallConversation::segments`]) before [`CallConversation::into_context`] adds
/// what they tell to the call's context. Two steps so the scan can run where the caller
/// runs scans (the service's blocking pool, the library's thread).
#[derive(Debug)]
pub struct CallConversation<'a> {
    messages: &'a Value,
    plain: Conversation,
    places: Vec<SegmentPlace>,
    segments: Vec<rampart_core::Segment>,
}

impl<'a> CallConversation<'a> {
    /// Reads OpenAI or Anthropic `messages` (at most 1 MiB of text and 512 messages).
    pub fn read(messages: &'a Value) -> Result<Self, ProvenanceError> {
        let plain = Conversation::from_messages(messages)?;
        let bytes: usize = plain.entries().iter().map(|e| e.text.len()).sum();
        if bytes > rampart_tools::provenance::MAX_CONVERSATION_BYTES {
            return Err(ProvenanceError::TooLarge {
                bytes,
                messages: plain.entries().len(),
            });
        }
        let (segments, places) = untrusted_segments(&plain);
        Ok(CallConversation {
            messages,
            plain,
            places,
            segments,
        })
    }

    /// The texts to scan (tool results), as segments; empty when there are none.
    pub fn segments(&mut self) -> Vec<rampart_core::Segment> {
        std::mem::take(&mut self.segments)
    }

    /// Adds to `context` the conversation (with the spans `decision`, the scan of
    /// [`CallConversation::segments`], flagged), the highest such score as the floor of
    /// `max_injection_score`, and the assistant's calls as `tools_called` when it lists none.
    pub fn into_context(
        self,
        decision: Option<&Decision>,
        context: &mut rampart_tools::CallContext,
    ) -> Result<(), ProvenanceError> {
        let conversation = match decision {
            Some(d) => {
                if let Some(score) = tool_result_score(d) {
                    context.max_injection_score =
                        Some(context.max_injection_score.map_or(score, |s| s.max(score)));
                }
                flagged_conversation(self.messages, d, &self.places)?
            }
            None => self.plain,
        };
        if context.tools_called.is_empty() {
            context.tools_called = conversation
                .calls()
                .iter()
                .map(|c| c.name.clone())
                .collect();
        }
        context.conversation = Some(rampart_tools::SharedConversation(std::sync::Arc::new(
            conversation,
        )));
        Ok(())
    }
}

/// Every text of a conversation as the segments of one scan, with where each lives: as the
/// proxy reads a chat request. An assistant's tool-call arguments are scanned as trusted (their
/// findings reported, not counted): the model wrote them for a tool, and the tool gate decides
/// them with provenance when the call is made.
pub fn conversation_segments(c: &Conversation) -> (Vec<rampart_core::Segment>, Vec<SegmentPlace>) {
    c.entries()
        .iter()
        .map(|e| {
            let mut s = rampart_core::Segment::new(e.role, e.text.clone());
            if e.role == Role::Assistant && matches!(e.part, Part::ToolCall(_)) {
                s.trust = Some(rampart_core::Trust::Trusted);
            }
            (s, SegmentPlace::Piece(e.message, e.part))
        })
        .unzip()
}
