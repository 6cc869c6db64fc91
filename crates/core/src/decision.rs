//! What a scan returns: the action, the risk, and the evidence. Never the raw prompt.

use crate::input::Role;
use crate::report::Reports;
use crate::vocab::{Category, RiskClass, Strength};
use rampart_normalize::{TransformKind, ViewKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The verdict. Ordered: `Allow < Sanitize < Block`, so the ratchet is `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    /// Pass the input on unchanged.
    Allow,
    /// Pass the input on with the matched markers removed.
    Sanitize,
    /// Do not pass the input on.
    Block,
}

impl Action {
    /// Every action, in order (`Allow < Sanitize < Block`).
    pub const ALL: [Action; 3] = [Action::Allow, Action::Sanitize, Action::Block];

    /// `ALLOW`, `SANITIZE` or `BLOCK`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Allow => "ALLOW",
            Action::Sanitize => "SANITIZE",
            Action::Block => "BLOCK",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A byte span in one segment's original text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Span {
    /// Start byte (inclusive).
    pub start: usize,
    /// End byte (exclusive).
    pub end: usize,
}

impl From<std::ops::Range<usize>> for Span {
    fn from(r: std::ops::Range<usize>) -> Self {
        Span {
            start: r.start,
            end: r.end,
        }
    }
}

/// One piece of evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The layer that produced it.
    pub layer: String,
    /// Rule ID (or detector-specific ID), e.g. `CTRL_001`.
    pub rule_id: String,
    /// Category.
    pub category: Category,
    /// Weak or strong.
    pub strength: Strength,
    /// Points this finding gives its category (0–3) before trust is applied.
    pub points: u8,
    /// The rule's severity hint.
    pub severity: RiskClass,
    /// Index of the segment it was found in.
    pub segment: usize,
    /// Role of that segment.
    pub role: Role,
    /// Whether it counts towards the risk (false in trusted segments).
    pub counted: bool,
    /// Span in the segment's original text.
    pub span: Span,
    /// Normalized view it was found in.
    pub view: ViewKind,
    /// Decoders and obfuscations undone to find it (outermost first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<TransformKind>,
    /// Why it matters (the rule's rationale).
    pub rationale: String,
}

/// A transform the normalizer applied to one segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedTransform {
    /// Segment index.
    pub segment: usize,
    /// Which transform.
    pub kind: TransformKind,
    /// How many characters or runs it changed.
    pub count: usize,
    /// First place it applied, in the segment's original text.
    pub span: Span,
    /// Decode depth.
    pub depth: usize,
}

/// How a layer finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LayerStatus {
    /// It ran to completion.
    Ok,
    /// It failed; the policy's fail mode decided its action.
    Error {
        /// What went wrong (never input text).
        message: String,
    },
    /// It ran past its time budget; the policy's fail mode decided its action.
    Timeout {
        /// The budget, in milliseconds.
        budget_ms: u64,
    },
    /// Its `run_if` condition did not hold, so it did not run (a cascade); it contributes
    /// nothing to the verdict.
    Skipped {
        /// Which condition (never input text).
        reason: String,
    },
}

/// One layer's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerResult {
    /// Layer name (`normalize`, `rules`, …).
    pub layer: String,
    /// How it finished.
    #[serde(flatten)]
    pub status: LayerStatus,
    /// The layer's own risk.
    pub risk: RiskClass,
    /// The layer's own action.
    pub action: Action,
    /// A probability-like score, for layers that produce one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// For classifier layers that score spans of the text (localized detection): the span
    /// whose score is the layer's score, i.e. where in the input the layer looked hardest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localized: Option<crate::detector::SpanScore>,
    /// Per-category signal strength 0–3 (counted findings only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub categories: BTreeMap<Category, u8>,
    /// Number of findings the layer produced.
    pub findings: usize,
    /// The layer's score fell in its `defer` band: its own verdict is undecided, its
    /// findings are not counted, and the judge decides (when the judge gives no verdict,
    /// the layer's own verdict is restored and this stays true, with a reason).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undecided: bool,
    /// The layer is configured `score_only`: its score feeds later layers and is reported,
    /// but it is not the decision's (readers that take "the" score of a decision, such as
    /// the conversation's turn risk and the evaluation's ROC, skip it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub score_only: bool,
    /// Wall time in microseconds.
    pub elapsed_us: u64,
}

/// The full decision for one request. Contains IDs, hashes, spans and rule IDs: never the
/// prompt text, so it is safe to log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The request's ID, if the caller gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The verdict.
    pub action: Action,
    /// The overall risk.
    pub risk: RiskClass,
    /// Per-category signal strength 0–3 over all layers.
    pub categories: BTreeMap<Category, u8>,
    /// Per-layer results, in pipeline order.
    pub layers: Vec<LayerResult>,
    /// Every finding, sorted by segment, rule ID, span.
    pub findings: Vec<Finding>,
    /// Every transform applied by normalization.
    pub transforms: Vec<AppliedTransform>,
    /// One-line reasons for the action.
    pub reasons: Vec<String>,
    /// True when a layer failed or timed out and the fail mode decided.
    pub degraded: bool,
    /// Keyed BLAKE3 hash of the input (hex), for correlating without storing text.
    pub input_hash: String,
    /// Identifies the hash key (first bytes of its own hash), never the key.
    pub hash_key_id: String,
    /// Total bytes of input.
    pub input_bytes: usize,
    /// Number of segments.
    pub segments: usize,
    /// Policy version string from the configuration.
    pub policy_version: String,
    /// Total wall time in microseconds.
    pub elapsed_us: u64,
    /// The layers' own reports (an intent layer's `judge`, a relational layer's
    /// `relational`) and the service's (`conversation`), each a top-level member named by
    /// its key; look them up by type with [`Reports::get`].
    #[serde(flatten)]
    pub reports: Reports,
}

/// A segment's text after sanitization, returned to the caller beside the decision (it is
/// prompt text, so it is not part of the loggable [`Decision`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SanitizedSegment {
    /// Segment index.
    pub segment: usize,
    /// Role.
    pub role: Role,
    /// The text with matched markers replaced by the policy's marker.
    pub text: String,
    /// How many spans were neutralized.
    pub removed: usize,
}

/// What a scan returns: the loggable decision, plus sanitized text when the action is
/// SANITIZE.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanOutcome {
    /// The decision.
    pub decision: Decision,
    /// Sanitized segments (only segments that changed), when the action is SANITIZE.
    pub sanitized: Option<Vec<SanitizedSegment>>,
}
