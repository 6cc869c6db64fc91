//! What a relational layer (PromptGuard's multi-layer, neutrosophic judgement) records in a
//! decision, under the key `relational`: a truth / indeterminacy / falsehood triple per
//! prompt layer, the trust violations, the ayni balance, the exchange type and the label.
//!
//! A report never holds input text: evidence is rule IDs and signal names, and an LLM
//! evaluator's reasoning is redacted before it reaches a report.

use rampart_core::{Report, Role};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Kind of the relational layer.
pub const RELATIONAL_KIND: &str = "relational";

/// How far the sum of a triple may be from 1 before it is refused rather than rescaled.
pub const TRIPLE_SUM_TOLERANCE: f64 = 0.25;

/// A layer of a prompt, in order of authority: the deployer's instructions, a developer
/// template, the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptLayer {
    /// The deployer's instructions (`system` segments).
    System,
    /// A developer template (`developer` segments).
    Application,
    /// The input (`user` segments).
    User,
}

impl PromptLayer {
    /// Every layer, highest authority first.
    pub const ALL: [PromptLayer; 3] = [
        PromptLayer::System,
        PromptLayer::Application,
        PromptLayer::User,
    ];

    /// The layer a segment role belongs to: `system` → system, `developer` → application,
    /// `user` → user. Other roles (tool results, documents, model output) are not layers of
    /// a prompt in this model: `None`.
    pub fn of_role(role: Role) -> Option<PromptLayer> {
        match role {
            Role::System => Some(PromptLayer::System),
            Role::Developer => Some(PromptLayer::Application),
            Role::User => Some(PromptLayer::User),
            Role::Tool | Role::Retrieved | Role::Assistant => None,
        }
    }

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            PromptLayer::System => "system",
            PromptLayer::Application => "application",
            PromptLayer::User => "user",
        }
    }

    /// Whether the layer is written by the deployer (system, application) rather than the
    /// user.
    pub fn is_trusted(self) -> bool {
        !matches!(self, PromptLayer::User)
    }
}

impl fmt::Display for PromptLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a triple was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TripleError {
    /// A component is NaN or infinite.
    #[error("{component} is not a finite number")]
    NotFinite {
        /// `truth`, `indeterminacy` or `falsehood`.
        component: &'static str,
    },
    /// A component is outside [0, 1].
    #[error("{component} = {value} is outside [0, 1]")]
    OutOfRange {
        /// `truth`, `indeterminacy` or `falsehood`.
        component: &'static str,
        /// The value given.
        value: f64,
    },
    /// The components sum too far from 1 ([`TRIPLE_SUM_TOLERANCE`]).
    #[error("truth + indeterminacy + falsehood = {sum:.3}, too far from 1 (tolerance {tol})", tol = TRIPLE_SUM_TOLERANCE)]
    Sum {
        /// The sum given.
        sum: f64,
    },
}

/// A neutrosophic value: degrees of truth (reciprocity), indeterminacy and falsehood
/// (violation), each in [0, 1].
///
/// Rampart's triples sum to 1: an evaluator splits its belief between the three, so a layer
/// cannot be fully reciprocal and fully violating at once. [`Neutrosophic::checked`] accepts
/// a sum within [`TRIPLE_SUM_TOLERANCE`] of 1 and rescales it; anything else is an error,
/// never a silent default (`DESIGN.md` of `rampart-relational` says why).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Neutrosophic {
    /// Truth: the layer takes part in a reciprocal exchange.
    pub truth: f64,
    /// Indeterminacy: the evidence leaves it open.
    pub indeterminacy: f64,
    /// Falsehood: the layer violates the exchange.
    pub falsehood: f64,
}

impl Neutrosophic {
    /// A checked triple: every component finite and in [0, 1], the sum within
    /// [`TRIPLE_SUM_TOLERANCE`] of 1; the result is rescaled to sum to exactly 1.
    pub fn checked(truth: f64, indeterminacy: f64, falsehood: f64) -> Result<Self, TripleError> {
        for (component, value) in [
            ("truth", truth),
            ("indeterminacy", indeterminacy),
            ("falsehood", falsehood),
        ] {
            if !value.is_finite() {
                return Err(TripleError::NotFinite { component });
            }
            if !(0.0..=1.0).contains(&value) {
                return Err(TripleError::OutOfRange { component, value });
            }
        }
        let sum = truth + indeterminacy + falsehood;
        if (sum - 1.0).abs() > TRIPLE_SUM_TOLERANCE {
            return Err(TripleError::Sum { sum });
        }
        Ok(Self {
            truth: truth / sum,
            indeterminacy: indeterminacy / sum,
            falsehood: falsehood / sum,
        })
    }

    /// The triple left by evidence of violation `falsehood` and of ambiguity
    /// `indeterminacy` (each clamped to [0, 1]): truth is the rest. When the two exceed 1
    /// together, falsehood keeps its value and indeterminacy gets what remains.
    pub fn from_evidence(falsehood: f64, indeterminacy: f64) -> Self {
        let f = clamp01(falsehood);
        let i = clamp01(indeterminacy).min(1.0 - f);
        Self {
            truth: (1.0 - f - i).max(0.0),
            indeterminacy: i,
            falsehood: f,
        }
    }
}

fn clamp01(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

/// A kind of trust violation: the exchange between layers is broken, whatever the scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A layer claims authority it does not have: it speaks as the system, the assistant or
    /// a tool, or fakes turns.
    RoleConfusion,
    /// A lower layer overrides or replaces a higher layer's instructions.
    InstructionOverride,
    /// A lower layer tries to take a higher layer's content (the system prompt, hidden
    /// context, secrets).
    SystemExtraction,
    /// A lower layer is so much larger than the layers above it that it crowds them out.
    ContextSaturation,
}

impl ViolationKind {
    /// Every kind, in declaration order.
    pub const ALL: [ViolationKind; 4] = [
        ViolationKind::RoleConfusion,
        ViolationKind::InstructionOverride,
        ViolationKind::SystemExtraction,
        ViolationKind::ContextSaturation,
    ];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::RoleConfusion => "role_confusion",
            ViolationKind::InstructionOverride => "instruction_override",
            ViolationKind::SystemExtraction => "system_extraction",
            ViolationKind::ContextSaturation => "context_saturation",
        }
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One trust violation: which kind, by which layer, on what evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustViolation {
    /// The kind.
    pub kind: ViolationKind,
    /// The layer that commits it.
    pub layer: PromptLayer,
    /// Rule IDs or signal names (never input text), sorted.
    #[serde(default)]
    pub evidence: Vec<String>,
}

/// The kind of value exchange between the layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExchangeType {
    /// A layer takes without giving: it works against a layer above it.
    Extractive,
    /// Balanced give and take.
    Reciprocal,
    /// Every layer coherent and sure: the exchange creates value.
    Generative,
    /// No significant exchange either way.
    Neutral,
}

impl ExchangeType {
    /// Every exchange type, in declaration order.
    pub const ALL: [ExchangeType; 4] = [
        ExchangeType::Extractive,
        ExchangeType::Reciprocal,
        ExchangeType::Generative,
        ExchangeType::Neutral,
    ];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            ExchangeType::Extractive => "extractive",
            ExchangeType::Reciprocal => "reciprocal",
            ExchangeType::Generative => "generative",
            ExchangeType::Neutral => "neutral",
        }
    }
}

impl fmt::Display for ExchangeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// PromptGuard's four labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelationalLabel {
    /// An ordinary request.
    Reciprocal,
    /// A single-layer jailbreak.
    Manipulative,
    /// A multi-layer attack aimed at the system layer (e.g. leaking it).
    Extractive,
    /// Between reciprocal and manipulative.
    Borderline,
}

impl RelationalLabel {
    /// Every label.
    pub const ALL: [RelationalLabel; 4] = [
        RelationalLabel::Reciprocal,
        RelationalLabel::Borderline,
        RelationalLabel::Manipulative,
        RelationalLabel::Extractive,
    ];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            RelationalLabel::Reciprocal => "reciprocal",
            RelationalLabel::Manipulative => "manipulative",
            RelationalLabel::Extractive => "extractive",
            RelationalLabel::Borderline => "borderline",
        }
    }

    /// The label named `name`.
    pub fn from_name(name: &str) -> Option<RelationalLabel> {
        Self::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Whether the label is an attack (manipulative, extractive).
    pub fn is_attack(self) -> bool {
        matches!(
            self,
            RelationalLabel::Manipulative | RelationalLabel::Extractive
        )
    }
}

impl fmt::Display for RelationalLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which evaluator backend produced a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Derived from Rampart's own layers (offline).
    Local,
    /// An LLM asked per layer.
    Llm,
    /// The Fire Circle: several evaluators in rounds.
    Circle,
}

impl Backend {
    /// Every backend.
    pub const ALL: [Backend; 3] = [Backend::Local, Backend::Llm, Backend::Circle];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::Llm => "llm",
            Backend::Circle => "circle",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One layer's assessment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerAssessment {
    /// The layer.
    pub layer: PromptLayer,
    /// The request's segments that make it up.
    pub segments: Vec<usize>,
    /// Its size in bytes.
    pub bytes: usize,
    /// Its triple.
    pub value: Neutrosophic,
    /// The signals behind the triple: rule IDs, `layer:score` entries, names of ambiguity
    /// signals (never input text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// An LLM evaluator's reasoning, redacted (runs copied from the input removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
}

/// Tokens and cost of the model calls behind a report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelationalCost {
    /// Model calls made (retries inside one call not counted).
    pub calls: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// USD, over the calls whose model has a price.
    pub cost_usd: f64,
    /// The same per model.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_model: BTreeMap<String, ModelCost>,
}

/// Tokens and cost of one model's calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelCost {
    /// Calls.
    pub calls: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// USD (0 when the model has no price).
    pub cost_usd: f64,
    /// Whether the model has a price in the configuration.
    pub priced: bool,
}

impl RelationalCost {
    /// Adds one call of `model`.
    pub fn add_call(&mut self, model: &str, input: u64, output: u64, usd: Option<f64>) {
        self.calls += 1;
        self.input_tokens += input;
        self.output_tokens += output;
        self.cost_usd += usd.unwrap_or(0.0);
        let m = self.by_model.entry(model.to_string()).or_default();
        m.calls += 1;
        m.input_tokens += input;
        m.output_tokens += output;
        m.cost_usd += usd.unwrap_or(0.0);
        m.priced |= usd.is_some();
    }

    /// Adds another account to this one.
    pub fn merge(&mut self, other: &RelationalCost) {
        self.calls += other.calls;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
        for (k, v) in &other.by_model {
            let m = self.by_model.entry(k.clone()).or_default();
            m.calls += v.calls;
            m.input_tokens += v.input_tokens;
            m.output_tokens += v.output_tokens;
            m.cost_usd += v.cost_usd;
            m.priced |= v.priced;
        }
    }
}

/// How an evaluation ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RelationalStatus {
    /// Every layer was assessed; the label stands.
    Ok,
    /// No label: the evaluator (or the circle) failed. The layer's fail mode decides.
    Failed {
        /// Why (an outcome name and detail, never input text).
        reason: String,
    },
    /// Not evaluated: the request has no user layer, so there is no exchange to judge. The
    /// layer allows; nothing is labelled.
    Skipped {
        /// Why.
        reason: String,
    },
}

impl RelationalStatus {
    /// The status without its reason.
    pub fn kind(&self) -> RelationalStatusKind {
        match self {
            RelationalStatus::Ok => RelationalStatusKind::Ok,
            RelationalStatus::Failed { .. } => RelationalStatusKind::Failed,
            RelationalStatus::Skipped { .. } => RelationalStatusKind::Skipped,
        }
    }

    /// Why it failed or was skipped (`None` when ok).
    pub fn reason(&self) -> Option<&str> {
        match self {
            RelationalStatus::Ok => None,
            RelationalStatus::Failed { reason } | RelationalStatus::Skipped { reason } => {
                Some(reason)
            }
        }
    }
}

/// The variant of a [`RelationalStatus`], without its reason; serialized as its tag (`ok`,
/// `failed`, `skipped`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelationalStatusKind {
    /// [`RelationalStatus::Ok`].
    Ok,
    /// [`RelationalStatus::Failed`].
    Failed,
    /// [`RelationalStatus::Skipped`].
    Skipped,
}

impl RelationalStatusKind {
    /// Every status kind.
    pub const ALL: [RelationalStatusKind; 3] = [
        RelationalStatusKind::Ok,
        RelationalStatusKind::Failed,
        RelationalStatusKind::Skipped,
    ];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            RelationalStatusKind::Ok => "ok",
            RelationalStatusKind::Failed => "failed",
            RelationalStatusKind::Skipped => "skipped",
        }
    }
}

impl fmt::Display for RelationalStatusKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One evaluator's part in a report: the only one for the `local` and `llm` backends, one
/// per member for the circle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluatorRun {
    /// The evaluator's name (configuration).
    pub name: String,
    /// Its backend (`local` or `llm`).
    pub backend: Backend,
    /// The model, for an LLM evaluator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How its last call ended: `ok`, or an outcome name (`refused`, `unparseable`,
    /// `empty`, `truncated`, `invalid_triple`, `timeout`, `http_error`,
    /// `budget_exhausted`…), with what the configuration made of it.
    pub outcome: String,
    /// Its per-layer assessments (its final ones, in the circle).
    #[serde(default)]
    pub layers: Vec<LayerAssessment>,
    /// Whether it still votes (circle: dropped in round 1, or lost its vote later).
    pub active: bool,
    /// The round it failed in (circle), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_round: Option<u8>,
    /// Patterns it reported (circle, round 2 onwards).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<String>,
    /// Its calls' tokens and cost.
    #[serde(default)]
    pub cost: RelationalCost,
    /// Its wall time, milliseconds.
    pub elapsed_ms: u64,
}

/// What the circle agreed on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CircleConsensus {
    /// Evaluators that kept their vote to the end.
    pub active: usize,
    /// Rounds completed.
    pub rounds: u8,
    /// Highest minus lowest falsehood among the active evaluators (any layer).
    pub falsehood_range: f64,
    /// Whether that range reaches the dissent threshold (0.3 by default).
    pub dissent: bool,
    /// Patterns reported by at least half the active evaluators, sorted.
    #[serde(default)]
    pub patterns: Vec<String>,
}

/// The relational judgement of one request.
///
/// Not `deny_unknown_fields`: serde cannot combine it with the flattened `status`, and with
/// both no report would ever read back (a decision's reports are checked to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationalReport {
    /// The pipeline layer that made it.
    pub layer: String,
    /// The backend.
    pub backend: Backend,
    /// Ok, or failed with a reason.
    #[serde(flatten)]
    pub status: RelationalStatus,
    /// Per prompt layer present, highest authority first (the consensus, for the circle).
    #[serde(default)]
    pub layers: Vec<LayerAssessment>,
    /// Trust violations, sorted.
    #[serde(default)]
    pub violations: Vec<TrustViolation>,
    /// The ayni balance in [-1, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<f64>,
    /// The exchange type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<ExchangeType>,
    /// The label (none when the evaluation failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<RelationalLabel>,
    /// Which rules gave the exchange type and the label ([`crate::model::explain`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Per evaluator.
    #[serde(default)]
    pub evaluators: Vec<EvaluatorRun>,
    /// The circle's consensus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consensus: Option<CircleConsensus>,
    /// Tokens and cost over every evaluator.
    #[serde(default)]
    pub cost: RelationalCost,
    /// Wall time of the evaluation, microseconds.
    pub elapsed_us: u64,
}

impl Report for RelationalReport {
    const KEY: &'static str = RELATIONAL_KIND;
}

impl RelationalReport {
    /// Whether the evaluation failed (no label).
    pub fn failed(&self) -> bool {
        matches!(self.status, RelationalStatus::Failed { .. })
    }

    /// The number of prompt layers present.
    pub fn layer_count(&self) -> usize {
        self.layers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_triples_rescale_within_tolerance_and_refuse_the_rest() {
        let t = Neutrosophic::checked(0.7, 0.2, 0.2).unwrap();
        assert!((t.truth + t.indeterminacy + t.falsehood - 1.0).abs() < 1e-12);
        assert!((t.truth - 0.7 / 1.1).abs() < 1e-12);
        assert!(matches!(
            Neutrosophic::checked(1.0, 1.0, 1.0),
            Err(TripleError::Sum { .. })
        ));
        assert!(matches!(
            Neutrosophic::checked(1.2, 0.0, 0.0),
            Err(TripleError::OutOfRange {
                component: "truth",
                ..
            })
        ));
        assert!(matches!(
            Neutrosophic::checked(0.5, f64::NAN, 0.5),
            Err(TripleError::NotFinite {
                component: "indeterminacy"
            })
        ));
        assert!(matches!(
            Neutrosophic::checked(0.0, 0.0, 0.0),
            Err(TripleError::Sum { .. })
        ));
    }

    #[test]
    fn evidence_leaves_truth_as_the_rest() {
        let t = Neutrosophic::from_evidence(0.6, 0.3);
        assert!((t.truth - 0.1).abs() < 1e-12);
        let t = Neutrosophic::from_evidence(0.9, 0.5);
        assert_eq!((t.truth, t.falsehood), (0.0, 0.9));
        assert!((t.indeterminacy - 0.1).abs() < 1e-12);
        let t = Neutrosophic::from_evidence(f64::NAN, 2.0);
        assert_eq!((t.truth, t.indeterminacy, t.falsehood), (0.0, 1.0, 0.0));
    }

    #[test]
    fn roles_map_to_layers() {
        assert_eq!(
            PromptLayer::of_role(Role::System),
            Some(PromptLayer::System)
        );
        assert_eq!(
            PromptLayer::of_role(Role::Developer),
            Some(PromptLayer::Application)
        );
        assert_eq!(PromptLayer::of_role(Role::User), Some(PromptLayer::User));
        assert_eq!(PromptLayer::of_role(Role::Tool), None);
        assert_eq!(
            RelationalLabel::from_name("extractive"),
            Some(RelationalLabel::Extractive)
        );
    }
}
