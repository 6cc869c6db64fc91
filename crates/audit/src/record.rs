//! What one audit record holds.

use rampart_core::{Action, RiskClass, Strength};
use rampart_judge::{CacheStatus, ExplainOutcome, IntentLabel, JudgeTriggerKind};
use rampart_llm::OutcomeKind;
use rampart_relational::{
    Backend, ExchangeType, RelationalLabel, RelationalStatusKind, ViolationKind,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One decision as logged: identifiers, the keyed hash of the input, the verdict, the
/// findings (rule IDs, never matched text) and the layer timings. Never prompt text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// When the decision was made, Unix epoch milliseconds.
    pub time_ms: i64,
    /// The service's request ID.
    pub request_id: String,
    /// The API key's ID (never the key), if the caller authenticated.
    pub key_id: Option<String>,
    /// The endpoint: `scan`, `scan_batch`, `scan_output`, `chat_completions`, `completions`…
    pub endpoint: String,
    /// Keyed hash of the input ([`Decision::input_hash`](rampart_core::Decision)).
    pub input_hash: String,
    /// Which hash key ([`Decision::hash_key_id`](rampart_core::Decision)).
    pub hash_key_id: String,
    /// The verdict: stored as `ALLOW`, `SANITIZE` or `BLOCK`.
    pub action: Action,
    /// The risk: stored as `low_risk`, `medium_risk` or `high_risk`.
    pub risk: RiskClass,
    /// The policy version that decided.
    pub policy_version: String,
    /// The findings, in the decision's order.
    pub findings: Vec<AuditFinding>,
    /// Wall time per layer, microseconds (a repeated layer name gets `#2`, `#3`…).
    pub layer_timings_us: BTreeMap<String, u64>,
    /// Total wall time, microseconds.
    pub elapsed_us: u64,
    /// Whether a layer failed or timed out and the fail mode decided.
    pub degraded: bool,
    /// The intent layer's part of the decision, when the pipeline has a judge layer
    /// (schema version 2; absent from records written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<AuditJudge>,
    /// The relational layer's part of the decision, when the pipeline has one (schema
    /// version 3; absent from records written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relational: Option<AuditRelational>,
}

/// The relational layer's report as logged: how the evaluation ended, the label, the ayni
/// balance, the exchange type, the violations' kinds and what it cost. The per-layer
/// triples, evidence and evaluator runs are left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRelational {
    /// The relational layer's name.
    pub layer: String,
    /// `local`, `llm` or `circle`.
    pub backend: Backend,
    /// `ok`, `failed` or `skipped`.
    pub status: RelationalStatusKind,
    /// Why it failed or was skipped (never input text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `reciprocal`, `borderline`, `manipulative` or `extractive`, when evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<RelationalLabel>,
    /// The ayni balance in [-1, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<f64>,
    /// The exchange type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<ExchangeType>,
    /// The kinds of the trust violations, once each, sorted by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<ViolationKind>,
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

impl AuditRelational {
    /// The loggable part of a relational report.
    pub fn from_report(r: &rampart_relational::RelationalReport) -> AuditRelational {
        // Sorted by name, as when they were logged as strings.
        let mut violations: Vec<ViolationKind> = r.violations.iter().map(|v| v.kind).collect();
        violations.sort_by_key(|k| k.name());
        violations.dedup();
        AuditRelational {
            layer: r.layer.clone(),
            backend: r.backend,
            status: r.status.kind(),
            reason: r.status.reason().map(str::to_string),
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

/// The intent layer's report as logged: why it was asked, how the call ended, the verdict
/// and what it cost. The explanation is the decision's, which the judge layer has already
/// redacted (runs copied from the input replaced by span references); evidence spans, the
/// failure detail and the verdicts with and without the judge are left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditJudge {
    /// The judge layer's name.
    pub layer: String,
    /// Whether the model was asked (or the cache answered for it).
    pub called: bool,
    /// The kinds of the triggers that fired (`deferred`, `ambiguous_score`…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<JudgeTriggerKind>,
    /// How the call ended (`ok`, `timeout`, `http_error`…), when called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeKind>,
    /// `benign`, `suspicious` or `malicious`, when the judge gave a verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_label: Option<IntentLabel>,
    /// The verdict's confidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
    /// The verdict's explanation, as redacted by the judge layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
    /// Cache status: `off`, `hit`, `miss` or `replay_miss`.
    pub cache: CacheStatus,
    /// The model asked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// The judge prompt's version id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prompt_id: String,
    /// The judge prompt's hash.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prompt_hash: String,
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
    /// Score mode: how the explanation call ended (`ok`, `timeout`…), `deferred` while a
    /// deferred call has not reported, `dropped` when it was never made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain_outcome: Option<ExplainOutcome>,
    /// A deferred explanation call's latency, milliseconds (an inline call's is in
    /// `latency_ms`). Its tokens and cost are added to the record's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain_latency_ms: Option<u64>,
}

/// A deferred explanation (score mode) for the decision row it belongs to: written by
/// [`AuditWriter::record_explanation`](crate::AuditWriter::record_explanation), which
/// updates that row's judge part ([`AuditJudge::apply_explanation`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditExplanation {
    /// The decision's row ID (what [`AuditWriter::append`](crate::AuditWriter::append)
    /// returned).
    pub decision_id: i64,
    /// The decision's request ID: a row with another one is not updated.
    pub request_id: String,
    /// How the call ended (`dropped` when it was never made).
    pub outcome: ExplainOutcome,
    /// The verdict's explanation with the model's words, as redacted by the judge layer,
    /// when the call answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
    /// The call's input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// The call's output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// The call's cost in USD, when the model is priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The call's latency, milliseconds.
    #[serde(default)]
    pub latency_ms: u64,
}

impl AuditExplanation {
    /// The audit form of a deferred explanation for row `decision_id` of `request_id`.
    pub fn from_explanation(
        decision_id: i64,
        request_id: &str,
        e: &rampart_judge::Explanation,
    ) -> AuditExplanation {
        AuditExplanation {
            decision_id,
            request_id: request_id.to_string(),
            outcome: e.outcome,
            explanation: e.verdict.as_ref().map(|v| v.explanation.clone()),
            input_tokens: e.input_tokens,
            output_tokens: e.output_tokens,
            cost_usd: e.cost_usd,
            latency_ms: e.latency_ms,
        }
    }
}

impl AuditJudge {
    /// The loggable part of a judge report.
    pub fn from_report(j: &rampart_judge::JudgeReport) -> AuditJudge {
        AuditJudge {
            layer: j.layer.clone(),
            called: j.called,
            triggers: j.triggers.iter().map(|t| t.kind()).collect(),
            outcome: j.outcome,
            intent_label: j
                .intent_label
                .or(j.verdict.as_ref().map(|v| v.intent_label)),
            confidence: j.verdict.as_ref().map(|v| v.confidence),
            explanation: j.verdict.as_ref().map(|v| v.explanation.clone()),
            cache: j.cache,
            model: j.model.clone(),
            prompt_id: j.prompt_id.clone(),
            prompt_hash: j.prompt_hash.clone(),
            input_tokens: j.input_tokens,
            output_tokens: j.output_tokens,
            cost_usd: j.cost_usd,
            latency_ms: j.latency_ms,
            explain_outcome: j.explain_outcome,
            explain_latency_ms: None,
        }
    }

    /// Records a deferred explanation: its outcome and latency; its explanation (when the
    /// call answered) replaces the score's; its tokens and cost are added.
    pub fn apply_explanation(&mut self, e: &AuditExplanation) {
        self.explain_outcome = Some(e.outcome);
        self.explain_latency_ms = Some(e.latency_ms);
        if let Some(x) = &e.explanation {
            self.explanation = Some(x.clone());
        }
        self.input_tokens += e.input_tokens;
        self.output_tokens += e.output_tokens;
        self.cost_usd = match (self.cost_usd, e.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

/// One finding as logged: which rule, never where or what it matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditFinding {
    /// Rule ID, e.g. `CTRL_001`.
    pub rule_id: String,
    /// Category name, e.g. `control_phrase`.
    pub category: String,
    /// `weak` or `strong`.
    pub strength: Strength,
    /// The layer that produced it.
    pub layer: String,
}

impl AuditRecord {
    /// Builds the record of `d`. `time_ms` is Unix epoch milliseconds (see
    /// [`now_ms`](crate::now_ms)).
    pub fn from_decision(
        d: &rampart_core::Decision,
        request_id: &str,
        key_id: Option<&str>,
        endpoint: &str,
        time_ms: i64,
    ) -> AuditRecord {
        let findings = d
            .findings
            .iter()
            .map(|f| AuditFinding {
                rule_id: f.rule_id.clone(),
                category: f.category.name().to_string(),
                strength: f.strength,
                layer: f.layer.clone(),
            })
            .collect();
        let mut layer_timings_us = BTreeMap::new();
        for l in &d.layers {
            let mut name = l.layer.clone();
            let mut n = 1;
            while layer_timings_us.contains_key(&name) {
                n += 1;
                name = format!("{}#{n}", l.layer);
            }
            layer_timings_us.insert(name, l.elapsed_us);
        }
        AuditRecord {
            time_ms,
            request_id: request_id.to_string(),
            key_id: key_id.map(str::to_string),
            endpoint: endpoint.to_string(),
            input_hash: d.input_hash.clone(),
            hash_key_id: d.hash_key_id.clone(),
            action: d.action,
            risk: d.risk,
            policy_version: d.policy_version.clone(),
            findings,
            layer_timings_us,
            elapsed_us: d.elapsed_us,
            degraded: d.degraded,
            judge: d
                .reports
                .find::<rampart_judge::JudgeReport>()
                .as_ref()
                .map(AuditJudge::from_report),
            relational: d
                .reports
                .find::<rampart_relational::RelationalReport>()
                .as_ref()
                .map(AuditRelational::from_report),
        }
    }

    /// The distinct rule IDs of the findings, in first-seen order.
    pub fn rule_ids(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for f in &self.findings {
            if !out.contains(&f.rule_id.as_str()) {
                out.push(&f.rule_id);
            }
        }
        out
    }
}

/// A record read back from the log, with its row ID. Serialized flat: `{"id": …, "time_ms":
/// …, …}` (the JSONL export format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRecord {
    /// The row ID (what [`AuditWriter::append`](crate::AuditWriter::append) returned).
    pub id: i64,
    /// The record.
    #[serde(flatten)]
    pub record: AuditRecord,
}
