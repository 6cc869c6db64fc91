//! The per-conversation part of a decision (risk and its history), carried in the decision
//! under the key `conversation` ([`rampart_core::Reports`]). Hashes and numbers only, never
//! text.

use rampart_core::{Action, ConversationEvidence, Report};
use serde::{Deserialize, Serialize};

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

impl Report for ConversationReport {
    const KEY: &'static str = "conversation";
}
