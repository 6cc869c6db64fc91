//! Conversations as input: ordered turns, as an OpenAI-style client sends them, and what the
//! conversation state knew before a turn ([`ConversationContext`]), which layers may read.
//! The state and the per-conversation report live in `rampart-conversation`.

use crate::input::{Role, Trust};
use serde::{Deserialize, Serialize};

/// Default most turns accepted in one conversation request.
pub const DEFAULT_MAX_TURNS: usize = 256;

/// A tool call an assistant turn made (OpenAI `tool_calls[].function`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The call's id, matched by the tool turn that answers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the JSON text the model wrote.
    #[serde(default)]
    pub arguments: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Who wrote it.
    pub role: Role,
    /// The text (empty for an assistant turn that only calls tools).
    #[serde(default)]
    pub text: String,
    /// Tool calls of an assistant turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool turn answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Overrides the policy's trust level for this turn's role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<Trust>,
}

impl Turn {
    /// A turn with text only.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            text: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            trust: None,
        }
    }

    /// The text that stands for this turn in the hash chain and in scans: the text, then one
    /// line per tool call (`[tool_call NAME ARGUMENTS]`), so a call's arguments are part of
    /// the conversation's identity and are scanned like any other text.
    pub fn content(&self) -> String {
        if self.tool_calls.is_empty() {
            return self.text.clone();
        }
        let mut s = self.text.clone();
        for c in &self.tool_calls {
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str("[tool_call ");
            s.push_str(&c.name);
            s.push(' ');
            s.push_str(&c.arguments);
            s.push(']');
        }
        s
    }

    /// Bytes of text, tool calls included.
    pub fn bytes(&self) -> usize {
        self.text.len()
            + self
                .tool_calls
                .iter()
                .map(|c| c.name.len() + c.arguments.len())
                .sum::<usize>()
    }
}

/// A conversation to judge: every message so far, oldest first; the last non-assistant
/// messages are the new input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationRequest {
    /// Caller-supplied request ID, echoed in the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A client-sent conversation id: a hint that attaches evidence, never the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// The messages.
    pub turns: Vec<Turn>,
}

/// The lineage's evidence: every branch that grew from the same first message, pruned
/// branches included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationEvidence {
    /// Turns blocked.
    pub blocks: u32,
    /// Turns sanitized.
    pub sanitizes: u32,
    /// Turns the model refused.
    pub refusals: u32,
    /// Near-identical rephrasings of blocked turns.
    pub rephrasings_after_block: u32,
}

/// What the conversation state knew before this turn, handed to layers that look at the
/// conversation (the judge's conversation trigger and prompt). Set by the server side only:
/// it is never read from a client's JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationContext {
    /// Conversation risk before this turn.
    pub risk: f32,
    /// Escalation term before this turn.
    pub escalation: f32,
    /// Per-turn risks of the earlier calls on the path, oldest first (bounded).
    pub turn_risks: Vec<f32>,
    /// Lineage evidence.
    pub evidence: ConversationEvidence,
    /// Whether this turn is a near-identical rephrasing of a blocked one.
    pub rephrasing: bool,
    /// Recent earlier messages (role, text), oldest first, bounded; prompt text, so layers
    /// must fence it and never log it.
    pub history: Vec<(Role, String)>,
}

impl Eq for ConversationContext {}

impl ConversationContext {
    /// How much the per-turn risk rose over the last `n` earlier calls plus `current`
    /// (last minus first; 0 with fewer than two points).
    pub fn rise(&self, current: f32, n: usize) -> f32 {
        let start = self.turn_risks.len().saturating_sub(n.saturating_sub(1));
        let first = self.turn_risks.get(start).copied().unwrap_or(current);
        (current - first).max(0.0)
    }
}
