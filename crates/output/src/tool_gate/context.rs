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
