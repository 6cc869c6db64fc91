//! Conversations: the input (ordered turns, as an OpenAI-style client sends them) and the
//! per-conversation part of a decision (risk and its history). The state that produces the
//! report lives in `rampart-conversation`; these are the types every interface shares.

use crate::decision::Action;
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

/// How the conversation risk was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateMode {
    /// Server-side state (serve, proxy): earlier calls and pruned branches count.
    Stateful,
    /// Only the turns of this request (scan, eval): every call in it is replayed.
    Stateless,
}

/// One call of the conversation scanned for this request (the newest, and earlier ones the
/// state had not seen).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRisk {
    /// Index of the call's last message in `turns`.
    pub message: usize,
    /// Per-turn risk in `[0, 1]`.
    pub risk: f32,
    /// The per-turn action.
    pub action: Action,
    /// Risk of the conversation window (recent user turns joined, fragments reassembled),
    /// when one was scanned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_risk: Option<f32>,
    /// Conversation risk after this call.
    pub conversation_risk: f32,
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

/// What the forged-history check found (only where assistant answers are recorded: the
/// proxy, or an evaluation that simulates one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryReport {
    /// Assistant turns this deployment returned (indexes in `turns`).
    pub verified: Vec<usize>,
    /// Assistant turns it never returned.
    pub forged: Vec<usize>,
    /// The configured policy: `report`, `drop` or `block`.
    pub policy: String,
    /// Turns removed before forwarding (policy `drop`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<usize>,
}

/// A conversation-level finding: rule ids and numbers, never text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationFinding {
    /// `HIST_001` (forged assistant turn), `HIST_002`…`HIST_011` and `HIST_020` (claimed
    /// earlier agreement: rules, classifier), `CONV_001` (conversation risk), `CONV_002`
    /// (rephrasing of a blocked or refused turn), `CONV_003` (window), `CONV_004` (repeated
    /// refusals).
    pub id: String,
    /// The message it concerns, when it concerns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<usize>,
    /// Why it matters.
    pub rationale: String,
}

/// The per-conversation part of a decision. Hashes and numbers only, never text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationReport {
    /// Stateful (server) or stateless (this request only).
    pub state: StateMode,
    /// Messages in the request.
    pub messages: usize,
    /// Conversation risk in `[0, 1]` after this request.
    pub risk: f32,
    /// Largest per-turn risk on the path.
    pub peak: f32,
    /// Decayed, weighted accumulation of per-turn risks on the path.
    pub accumulated: f32,
    /// Escalation term (risk rising over recent turns).
    pub escalation: f32,
    /// Scored calls on the path.
    pub turns: u32,
    /// The calls scanned for this request, oldest first.
    pub scanned: Vec<TurnRisk>,
    /// Calls before those that the state had not seen and that were not scanned (over the
    /// replay bound).
    pub unscanned: usize,
    /// Lineage evidence.
    pub evidence: ConversationEvidence,
    /// Whether the newest turn is a near-identical rephrasing of a blocked one.
    pub rephrasing: bool,
    /// Messages of the longest prefix the state already knew (0: nothing).
    pub inherited_from_prefix_len: usize,
    /// Whether the client's conversation id was seen before.
    pub hint_matched: bool,
    /// The forged-history check, where assistant answers are recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryReport>,
    /// Message index of each segment of the per-turn decision.
    pub segment_messages: Vec<usize>,
    /// Conversation-level findings.
    pub findings: Vec<ConversationFinding>,
    /// The conversation part's own action (the decision's action is the higher of it and the
    /// per-turn action).
    pub action: Action,
    /// Why the conversation part decided what it did.
    pub reasons: Vec<String>,
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
