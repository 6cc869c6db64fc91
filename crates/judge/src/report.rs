//! What the intent layer (an LLM judge) records in a decision, under the key `judge`: why it
//! was or was not asked, how the call ended, and its verdict. The layer turns the verdict
//! into the pipeline's generic facts (a failure, a floor, a resolution of deferred bands:
//! see `layer.rs`); everything else is evidence for analysts.
//!
//! A report never holds input text: explanations are redacted by the judge layer before they
//! reach a report (runs copied from the input become span references), evidence is spans.

use rampart_core::{Action, Detection, Finding, LayerReport, Report, RiskClass, Span};
use rampart_llm::OutcomeKind;
use serde::{Deserialize, Serialize};

/// Kind of the intent layer, the layer that resolves other layers' deferred (undecided)
/// bands; also its report's key in a decision.
pub const JUDGE_KIND: &str = "judge";

/// The judge's reading of what the user is trying to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentLabel {
    /// An ordinary request.
    Benign,
    /// Possibly an attack: at least SANITIZE.
    Suspicious,
    /// An attack: BLOCK.
    Malicious,
}

impl IntentLabel {
    /// Every label, mildest first.
    pub const ALL: [IntentLabel; 3] = [
        IntentLabel::Benign,
        IntentLabel::Suspicious,
        IntentLabel::Malicious,
    ];

    /// The label's name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            IntentLabel::Benign => "benign",
            IntentLabel::Suspicious => "suspicious",
            IntentLabel::Malicious => "malicious",
        }
    }
}

impl std::fmt::Display for IntentLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One piece of evidence the judge relied on: a signal it names, and where in the input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeEvidence {
    /// The signal, e.g. `"instruction override"` or a rule ID the judge was shown. Redacted
    /// like the explanation.
    pub signal: String,
    /// The segment the span is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<usize>,
    /// Where in that segment's original text (located by the judge layer, never trusted
    /// from the model as offsets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Span>,
}

/// The judge's verdict: `{intent_label, confidence, explanation, evidence}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeVerdict {
    /// benign, suspicious or malicious.
    pub intent_label: IntentLabel,
    /// The judge's confidence in 0..=1.
    pub confidence: f32,
    /// Why, for an analyst; runs copied from the input are replaced by span references.
    pub explanation: String,
    /// The signals and spans it relied on.
    #[serde(default)]
    pub evidence: Vec<JudgeEvidence>,
}

/// Why the judge was asked. Several may fire for one request; all are recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "trigger", rename_all = "snake_case", deny_unknown_fields)]
pub enum JudgeTrigger {
    /// A named layer's score lies in the ambiguous band.
    AmbiguousScore {
        /// The layer.
        layer: String,
        /// Its score.
        score: f32,
        /// The band, inclusive.
        band: [f32; 2],
    },
    /// A layer deferred its ambiguous band to the judge: its own verdict is undecided.
    Deferred {
        /// The layer.
        layer: String,
        /// Its score.
        score: f32,
    },
    /// Rules and a classifier disagree.
    LayerConflict {
        /// The rule layer.
        rules: String,
        /// Whether the rules found (counted) risk.
        rules_flagged: bool,
        /// The classifier layer.
        classifier: String,
        /// The classifier's score.
        score: f32,
    },
    /// A finding of a rule or category marked "needs judgement".
    NeedsJudgement {
        /// The rule.
        rule_id: String,
    },
    /// A conversation-level signal (e.g. risk rising across turns).
    Conversation {
        /// What fired (never input text).
        reason: String,
    },
    /// Asked directly (`rampart judge`), not by the contract.
    Direct,
}

impl JudgeTrigger {
    /// The trigger's kind, without its data.
    pub fn kind(&self) -> JudgeTriggerKind {
        match self {
            JudgeTrigger::AmbiguousScore { .. } => JudgeTriggerKind::AmbiguousScore,
            JudgeTrigger::Deferred { .. } => JudgeTriggerKind::Deferred,
            JudgeTrigger::LayerConflict { .. } => JudgeTriggerKind::LayerConflict,
            JudgeTrigger::NeedsJudgement { .. } => JudgeTriggerKind::NeedsJudgement,
            JudgeTrigger::Conversation { .. } => JudgeTriggerKind::Conversation,
            JudgeTrigger::Direct => JudgeTriggerKind::Direct,
        }
    }

    /// A short name of the trigger kind (its `trigger` tag in JSON).
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }
}

/// The variant of a [`JudgeTrigger`], without its data; serialized as its tag
/// (`ambiguous_score`, `deferred`…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeTriggerKind {
    /// [`JudgeTrigger::AmbiguousScore`].
    AmbiguousScore,
    /// [`JudgeTrigger::Deferred`].
    Deferred,
    /// [`JudgeTrigger::LayerConflict`].
    LayerConflict,
    /// [`JudgeTrigger::NeedsJudgement`].
    NeedsJudgement,
    /// [`JudgeTrigger::Conversation`].
    Conversation,
    /// [`JudgeTrigger::Direct`].
    Direct,
}

impl JudgeTriggerKind {
    /// Every kind, in declaration order.
    pub const ALL: [JudgeTriggerKind; 6] = [
        JudgeTriggerKind::AmbiguousScore,
        JudgeTriggerKind::Deferred,
        JudgeTriggerKind::LayerConflict,
        JudgeTriggerKind::NeedsJudgement,
        JudgeTriggerKind::Conversation,
        JudgeTriggerKind::Direct,
    ];

    /// The snake_case name (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            JudgeTriggerKind::AmbiguousScore => "ambiguous_score",
            JudgeTriggerKind::Deferred => "deferred",
            JudgeTriggerKind::LayerConflict => "layer_conflict",
            JudgeTriggerKind::NeedsJudgement => "needs_judgement",
            JudgeTriggerKind::Conversation => "conversation",
            JudgeTriggerKind::Direct => "direct",
        }
    }
}

impl std::fmt::Display for JudgeTriggerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether the verdict came from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheStatus {
    /// No cache configured.
    Off,
    /// Found in the cache: no call was made.
    Hit,
    /// Not found: the model was called (and a verdict stored).
    Miss,
    /// Replay-only mode and not found: no call was made; the outcome says so.
    ReplayMiss,
}

impl CacheStatus {
    /// Every status.
    pub const ALL: [CacheStatus; 4] = [
        CacheStatus::Off,
        CacheStatus::Hit,
        CacheStatus::Miss,
        CacheStatus::ReplayMiss,
    ];

    /// The status as serialized (`off`, `hit`, `miss`, `replay_miss`).
    pub fn name(self) -> &'static str {
        match self {
            CacheStatus::Off => "off",
            CacheStatus::Hit => "hit",
            CacheStatus::Miss => "miss",
            CacheStatus::ReplayMiss => "replay_miss",
        }
    }
}

impl std::fmt::Display for CacheStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything the judge layer records in a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeReport {
    /// The judge layer's name.
    pub layer: String,
    /// Whether the model was asked (or the cache answered for it).
    pub called: bool,
    /// The triggers that fired (empty when not called).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<JudgeTrigger>,
    /// Why the judge was not called (no trigger fired, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_called: Option<String>,
    /// How the call ended (absent when not called). Only `ok` carries a verdict; every
    /// other outcome is a failure that the layer's fail mode decides, never read as benign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeKind>,
    /// Detail of a failed outcome (never input text or model text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_detail: Option<String>,
    /// The verdict, when the outcome is ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<JudgeVerdict>,
    /// The verdict's label, duplicated at the top for filters and dashboards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_label: Option<IntentLabel>,
    /// Cache status.
    pub cache: CacheStatus,
    /// The model asked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// The judge prompt's version id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prompt_id: String,
    /// BLAKE3 of the judge prompt template (first 16 hex digits).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prompt_hash: String,
    /// Input tokens, from the response's `usage` (0 on a cache hit).
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cost in USD from the price table, when the model is priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Latency of the call (or the cache lookup), in milliseconds.
    #[serde(default)]
    pub latency_ms: u64,
    /// HTTP attempts made (retries included).
    #[serde(default)]
    pub attempts: u32,
    /// The verdict the other layers gave on their own (deferred layers with their own
    /// verdicts), before the SANITIZE and data-channel adjustments. Set by the pipeline
    /// when the judge gave a verdict: with [`JudgeReport::action_with_judge`] it shows how
    /// the judge changed the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_without_judge: Option<Action>,
    /// The verdict with the judge, computed the same way (before the adjustments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_with_judge: Option<Action>,
    /// Which mode gave the verdict (absent when not called): `structured` or `score`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<crate::JudgeMode>,
    /// Why the structured mode ran although score mode is configured (the server returns
    /// no log-probabilities, the protocol has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode_fallback: Option<String>,
    /// Score mode: the calibrated P(attack); also the judge layer's score in the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// Score mode: ln P(yes) − ln P(no) of the first answer token, before calibration (what
    /// a calibration is fitted on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_logit: Option<f32>,
    /// Score mode: how the call for the explanation ended, when one was made (the label is
    /// the score's whatever it says); `deferred` when the layer defers explanations (the
    /// service: the call is made after the decision is returned and its result goes to the
    /// audit row), `dropped` when the deferred queue was full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain_outcome: Option<ExplainOutcome>,
    /// Score mode, deferred explanations: the pending explanation's number in this process
    /// (what [`crate::DeferredExplanations::take`] takes it by).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain_ticket: Option<u64>,
}

/// How score mode's explanation call ended: a call's outcome, or, when the layer defers
/// explanations, `deferred` (asked for after the decision) or `dropped` (not asked: the
/// queue of deferred explanations was full, or the service stopped first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExplainOutcome {
    /// [`OutcomeKind::Ok`]: the explanation joined the verdict.
    Ok,
    /// [`OutcomeKind::Refused`].
    Refused,
    /// [`OutcomeKind::Unparseable`].
    Unparseable,
    /// [`OutcomeKind::Empty`].
    Empty,
    /// [`OutcomeKind::Truncated`].
    Truncated,
    /// [`OutcomeKind::Timeout`].
    Timeout,
    /// [`OutcomeKind::HttpError`].
    HttpError,
    /// [`OutcomeKind::BudgetExhausted`].
    BudgetExhausted,
    /// The call is made after the decision is returned.
    Deferred,
    /// The deferred call was never made.
    Dropped,
}

impl ExplainOutcome {
    /// Every outcome, in declaration order.
    pub const ALL: [ExplainOutcome; 10] = [
        ExplainOutcome::Ok,
        ExplainOutcome::Refused,
        ExplainOutcome::Unparseable,
        ExplainOutcome::Empty,
        ExplainOutcome::Truncated,
        ExplainOutcome::Timeout,
        ExplainOutcome::HttpError,
        ExplainOutcome::BudgetExhausted,
        ExplainOutcome::Deferred,
        ExplainOutcome::Dropped,
    ];

    /// The snake_case name (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            ExplainOutcome::Deferred => "deferred",
            ExplainOutcome::Dropped => "dropped",
            other => other.call().map_or("", OutcomeKind::name),
        }
    }

    /// The call's outcome, when a call was made.
    pub fn call(self) -> Option<OutcomeKind> {
        Some(match self {
            ExplainOutcome::Ok => OutcomeKind::Ok,
            ExplainOutcome::Refused => OutcomeKind::Refused,
            ExplainOutcome::Unparseable => OutcomeKind::Unparseable,
            ExplainOutcome::Empty => OutcomeKind::Empty,
            ExplainOutcome::Truncated => OutcomeKind::Truncated,
            ExplainOutcome::Timeout => OutcomeKind::Timeout,
            ExplainOutcome::HttpError => OutcomeKind::HttpError,
            ExplainOutcome::BudgetExhausted => OutcomeKind::BudgetExhausted,
            ExplainOutcome::Deferred | ExplainOutcome::Dropped => return None,
        })
    }
}

impl From<OutcomeKind> for ExplainOutcome {
    fn from(k: OutcomeKind) -> Self {
        match k {
            OutcomeKind::Ok => ExplainOutcome::Ok,
            OutcomeKind::Refused => ExplainOutcome::Refused,
            OutcomeKind::Unparseable => ExplainOutcome::Unparseable,
            OutcomeKind::Empty => ExplainOutcome::Empty,
            OutcomeKind::Truncated => ExplainOutcome::Truncated,
            OutcomeKind::Timeout => ExplainOutcome::Timeout,
            OutcomeKind::HttpError => ExplainOutcome::HttpError,
            OutcomeKind::BudgetExhausted => ExplainOutcome::BudgetExhausted,
        }
    }
}

impl std::fmt::Display for ExplainOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl JudgeReport {
    /// The detection a judge layer gives the pipeline for this report and its findings. A
    /// call that gave no verdict fails the layer (its fail mode decides; the report is
    /// kept); a verdict is a floor under the layer's own verdict (suspicious is at least
    /// SANITIZE, malicious is BLOCK, whatever the policy maps their risk to) and decides the
    /// bands other layers deferred.
    pub fn into_detection(self, findings: Vec<Finding>) -> Detection {
        let failure = self.failed().then(|| self.failure_message());
        let verdict = self.verdict.as_ref();
        let floor = verdict.and_then(|v| match v.intent_label {
            IntentLabel::Benign => None,
            IntentLabel::Suspicious => Some((RiskClass::MediumRisk, Action::Sanitize)),
            IntentLabel::Malicious => Some((RiskClass::HighRisk, Action::Block)),
        });
        let resolution = verdict.map(|v| {
            format!(
                "the judge decided: {} ({:.2})",
                v.intent_label, v.confidence
            )
        });
        // Score mode's calibrated P(attack) is the layer's score, like a classifier's: the
        // decision lists it and whatever reads layer scores (evaluation curves, fusion by
        // name) can use it. A verdict from the structured mode has no score.
        let score = verdict.and(self.score);
        Detection {
            findings,
            score,
            report: Some(LayerReport::new(self)),
            failure,
            floor,
            resolution,
            ..Detection::default()
        }
    }

    /// The layer status message of a judge whose call failed (never input or model text).
    fn failure_message(&self) -> String {
        let outcome = self.outcome.map_or("none", |o| o.name());
        match &self.outcome_detail {
            Some(d) => format!("judge outcome {outcome}: {d}"),
            None => format!("judge outcome {outcome}"),
        }
    }

    /// A report for a judge that was not asked, and why.
    pub fn not_called(layer: &str, why: impl Into<String>) -> JudgeReport {
        JudgeReport {
            layer: layer.to_string(),
            called: false,
            triggers: Vec::new(),
            not_called: Some(why.into()),
            outcome: None,
            outcome_detail: None,
            verdict: None,
            intent_label: None,
            cache: CacheStatus::Off,
            model: String::new(),
            prompt_id: String::new(),
            prompt_hash: String::new(),
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: None,
            latency_ms: 0,
            attempts: 0,
            action_without_judge: None,
            action_with_judge: None,
            mode: None,
            mode_fallback: None,
            score: None,
            score_logit: None,
            explain_outcome: None,
            explain_ticket: None,
        }
    }

    /// Whether the judge was asked and did not return a verdict: the layer failed, and the
    /// fail mode decides.
    pub fn failed(&self) -> bool {
        self.called && self.verdict.is_none()
    }
}

impl Report for JudgeReport {
    const KEY: &'static str = JUDGE_KIND;

    fn record_effect(&mut self, without: Action, with: Action) {
        self.action_without_judge = Some(without);
        self.action_with_judge = Some(with);
    }
}
