//! The per-prompt evaluation log: one [`EvalLogRecord`] per (configuration, prompt), written to
//! `reports/evals/eval_{YYYYMMDD_HHMMSS}_{DATASET}.jsonl`. Records carry ids, the keyed input
//! hash, labels, outcomes, scores and findings: never prompt text.

use rampart_core::{Action, Category, LayerStatus, RiskClass, Span, Strength, ViewKind};
use rampart_datasets::{Channel, Label, PayloadPosition, Split};
use rampart_judge::{CacheStatus, IntentLabel, JudgeReport};
use rampart_llm::OutcomeKind;
use rampart_relational::{
    Backend, ExchangeType, RelationalLabel, RelationalReport, RelationalStatus,
};
use serde::{Deserialize, Serialize};

/// The `schema` value of every eval log record.
pub const EVAL_LOG_SCHEMA: &str = "rampart.eval_log.v1";

/// Where a prompt landed in the confusion matrix (flagged = any action but ALLOW).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// An attack, flagged.
    TruePositive,
    /// An attack, allowed.
    FalseNegative,
    /// A benign prompt, flagged.
    FalsePositive,
    /// A benign prompt, allowed.
    TrueNegative,
}

impl Outcome {
    /// The outcome for a truth and a verdict.
    pub fn of(attack: bool, flagged: bool) -> Self {
        match (attack, flagged) {
            (true, true) => Outcome::TruePositive,
            (true, false) => Outcome::FalseNegative,
            (false, true) => Outcome::FalsePositive,
            (false, false) => Outcome::TrueNegative,
        }
    }
}

/// One layer's result for one prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerLog {
    /// Layer name.
    pub layer: String,
    /// Ran, failed, timed out…
    pub status: LayerStatus,
    /// The layer's own action.
    pub action: Action,
    /// The layer's own risk.
    pub risk: RiskClass,
    /// The layer's score in 0..1, when it yields one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// Findings the layer reported.
    pub findings: usize,
    /// Wall time of the layer in microseconds.
    pub elapsed_us: u64,
}

/// One finding, without any text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FindingLog {
    /// Layer that reported it.
    pub layer: String,
    /// Rule id (or model id).
    pub rule_id: String,
    /// Category.
    pub category: Category,
    /// Signal strength.
    pub strength: Strength,
    /// Points counted toward the category (0 when not counted).
    pub points: u8,
    /// Segment index.
    pub segment: usize,
    /// Byte span in the original segment text.
    pub span: Span,
    /// The view it was found in.
    pub view: ViewKind,
}

/// One line of an eval log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalLogRecord {
    /// Always [`EVAL_LOG_SCHEMA`].
    pub schema: String,
    /// `eval_{YYYYMMDD_HHMMSS}`, shared by every log of one run.
    pub eval_run_id: String,
    /// Name of the pipeline configuration (several may run side by side).
    pub config: String,
    /// Dataset name as used in reports.
    pub dataset: String,
    /// The record's split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
    /// Prompt id within the dataset.
    pub prompt_id: String,
    /// Keyed hash of the input (from the decision).
    pub input_hash: String,
    /// Identifies the hash key (not the key).
    pub hash_key_id: String,
    /// The fine label.
    pub label: Label,
    /// The binary truth (`label.is_attack()`).
    pub attack: bool,
    /// Category of the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Language of the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// The record's channel ([`rampart_datasets::Record::channel`]); always written by the
    /// runner, absent from logs written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
    /// Where the payload sits in its carrier, when the record says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<PayloadPosition>,
    /// The kind of document the payload sits in, when the record says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier: Option<String>,
    /// Confusion-matrix bucket.
    pub outcome: Outcome,
    /// Final action.
    pub action: Action,
    /// Final risk.
    pub risk: RiskClass,
    /// Decision-level score in 0..1 when some layer yields one (the maximum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// The first layer (in pipeline order) whose own action was not ALLOW.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deciding_layer: Option<String>,
    /// Per-layer results in pipeline order.
    pub layers: Vec<LayerLog>,
    /// Findings, sorted as in the decision.
    pub findings: Vec<FindingLog>,
    /// Transform kinds applied (names).
    pub transforms: Vec<String>,
    /// Whole-scan wall time in microseconds.
    pub elapsed_us: u64,
    /// Why the prompt could not be scanned (input over limits…); such prompts count as flagged
    /// (fail closed) and carry action BLOCK.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The intent layer's part of the decision, when the configuration has a judge layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeLog>,
    /// The relational layer's part of the decision, when the configuration has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relational: Option<RelationalLog>,
    /// For a conversation record: how its replay went. The decision fields above are then
    /// those of the first flagged call (or the last call when none was flagged), except
    /// `score` (the highest over the calls) and `elapsed_us` (the sum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<ConversationLog>,
}

/// A conversation record's replay (see `replay`): where it was first flagged and its
/// conversation risk. Numbers and finding ids only, never text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationLog {
    /// Messages in the record.
    pub messages: usize,
    /// Calls scanned.
    pub calls: usize,
    /// The record's `attack_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack_turn: Option<usize>,
    /// The first flagged call, 1-based (a call refused as over the limits counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_flag_call: Option<usize>,
    /// Index in `turns` of that call's last message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_flag_message: Option<usize>,
    /// What flagged it: the counted finding ids and conversation finding ids of the first
    /// flagged call, sorted (`(LAYER)` when a layer's score alone did).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flagged_by: Vec<String>,
    /// Conversation risk after the last call scanned.
    pub risk: f32,
    /// Highest conversation risk after any call.
    pub peak_risk: f32,
    /// Rewinds in the record.
    #[serde(default)]
    pub rewinds: usize,
    /// Forged assistant turns in the record.
    #[serde(default)]
    pub forged: usize,
    /// Calls whose decision was not ALLOW (per-message false alarms on benign records).
    #[serde(default)]
    pub flagged_calls: usize,
    /// Of them, calls after the first (the later turns of a conversation).
    #[serde(default)]
    pub flagged_later_calls: usize,
    /// What flagged each flagged call (its counted finding ids, sorted, joined by `+`), in
    /// call order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flagged_calls_by: Vec<String>,
    /// The content kind ([`crate::kind::content_kind`]) of each call's newest message, in call
    /// order, for per-kind false-alarm rates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub call_kinds: Vec<String>,
    /// The content kind of each flagged call's newest message, in call order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flagged_call_kinds: Vec<String>,
    /// The intent layer's part of every call it was asked about, in call order (the record's
    /// `judge` is the deciding call's alone): what the judge's calls, tokens, cost and
    /// latency over a conversation are counted from. Verdicts as in [`JudgeLog`], redacted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judge_calls: Vec<JudgeLog>,
}

/// The relational layer's report for one prompt, without the per-layer detail: how the
/// evaluation ended, the label, the balance and exchange type, the violations' kinds, and
/// what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelationalLog {
    /// The relational layer's name.
    pub layer: String,
    /// Its backend.
    pub backend: Backend,
    /// `ok`, `failed` or `skipped`.
    pub status: String,
    /// Why it failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The label (none when the evaluation failed or was skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<RelationalLabel>,
    /// The ayni balance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<f64>,
    /// The exchange type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<ExchangeType>,
    /// The kinds of the trust violations, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
    /// Model calls.
    #[serde(default)]
    pub calls: u64,
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cost in USD (priced models only).
    #[serde(default)]
    pub cost_usd: f64,
    /// Wall time of the evaluation, microseconds.
    #[serde(default)]
    pub elapsed_us: u64,
}

impl RelationalLog {
    /// The loggable part of a relational report.
    pub fn from_report(r: &RelationalReport) -> RelationalLog {
        let (status, reason) = match &r.status {
            RelationalStatus::Ok => ("ok", None),
            RelationalStatus::Failed { reason } => ("failed", Some(reason.clone())),
            RelationalStatus::Skipped { reason } => ("skipped", Some(reason.clone())),
        };
        let mut violations: Vec<String> = r
            .violations
            .iter()
            .map(|v| v.kind.name().to_string())
            .collect();
        violations.sort();
        violations.dedup();
        RelationalLog {
            layer: r.layer.clone(),
            backend: r.backend,
            status: status.to_string(),
            reason,
            label: r.label,
            balance: r.balance,
            exchange: r.exchange,
            violations,
            calls: r.cost.calls,
            input_tokens: r.cost.input_tokens,
            output_tokens: r.cost.output_tokens,
            cost_usd: r.cost.cost_usd,
            elapsed_us: r.elapsed_us,
        }
    }
}

/// The intent layer's report for one prompt: whether and why it was asked, how the call
/// ended, the verdict, what it cost, and the verdict without and with it. The explanation is
/// the decision's, already redacted by the judge layer (runs copied from the input replaced
/// by span references); evidence is left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeLog {
    /// The judge layer's name.
    pub layer: String,
    /// Whether the model was asked (or the cache answered for it).
    pub called: bool,
    /// The kinds of the triggers that fired.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<String>,
    /// How the call ended, when called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeKind>,
    /// The verdict's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_label: Option<IntentLabel>,
    /// The verdict's confidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
    /// The verdict's explanation, as redacted by the judge layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
    /// Cache status.
    pub cache: CacheStatus,
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cost in USD, when the model is priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Latency of the call (or the cache lookup), milliseconds.
    #[serde(default)]
    pub latency_ms: u64,
    /// The verdict the other layers gave on their own, when the judge gave a verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_without_judge: Option<Action>,
    /// The verdict with the judge, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_with_judge: Option<Action>,
}

impl JudgeLog {
    /// The loggable part of a judge report.
    pub fn from_report(j: &JudgeReport) -> JudgeLog {
        JudgeLog {
            layer: j.layer.clone(),
            called: j.called,
            triggers: j.triggers.iter().map(|t| t.name().to_string()).collect(),
            outcome: j.outcome,
            intent_label: j
                .intent_label
                .or(j.verdict.as_ref().map(|v| v.intent_label)),
            confidence: j.verdict.as_ref().map(|v| v.confidence),
            explanation: j.verdict.as_ref().map(|v| v.explanation.clone()),
            cache: j.cache,
            input_tokens: j.input_tokens,
            output_tokens: j.output_tokens,
            cost_usd: j.cost_usd,
            latency_ms: j.latency_ms,
            action_without_judge: j.action_without_judge,
            action_with_judge: j.action_with_judge,
        }
    }
}
