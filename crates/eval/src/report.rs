//! The machine-readable summary of a run ([`Summary`], written as `eval_{ts}_summary.json`):
//! one [`DatasetReport`] per (dataset, configuration), plus pooled reports.

use crate::gate::GateResult;
use crate::log::{EvalLogRecord, JudgeLog, Outcome};
use crate::metrics::{Confusion, Interval, Latency, RocPoint, roc_auc, tpr_at_fpr, wilson};

/// A point of the ROC curve as stored in a summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OperatingPoint {
    /// True positive rate.
    pub tpr: f64,
    /// False positive rate.
    pub fpr: f64,
    /// Flag prompts scoring at least this; `None` flags nothing.
    pub threshold: Option<f64>,
}

impl From<RocPoint> for OperatingPoint {
    fn from(p: RocPoint) -> Self {
        Self {
            tpr: p.tpr,
            fpr: p.fpr,
            threshold: p.threshold.is_finite().then_some(p.threshold),
        }
    }
}
use crate::runner::{ConfigInfo, EvalRun};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `schema` value of every summary.
pub const SUMMARY_SCHEMA: &str = "rampart.eval_summary.v1";

/// The published four-label accuracy on the PromptGuard 680 the report is compared with.
pub const PROMPTGUARD_REFERENCE_ACCURACY: f64 = 0.557;

/// Datasets whose name starts with this are PromptGuard sets (reference shown, aggregated).
pub const PROMPTGUARD_PREFIX: &str = "promptguard_";

/// Name of the report pooling every dataset of the run (when there are several).
pub const POOLED_ALL: &str = "(all)";
/// Name of the report pooling every `promptguard_*` dataset of the run.
pub const POOLED_PROMPTGUARD: &str = "(promptguard)";

/// Attribution label for a flagged prompt that no single layer flagged on its own (the
/// combined score of all findings did).
pub const ATTR_COMBINED: &str = "(combined)";
/// Attribution label for a prompt that could not be scanned (counted as flagged).
pub const ATTR_INPUT_ERROR: &str = "(input_error)";

/// A dataset as loaded for the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetInfo {
    /// Name in reports.
    pub name: String,
    /// Origin (`builtin:NAME` or a path).
    pub origin: String,
    /// Readable records.
    pub records: u64,
    /// Records evaluated (under `--limit`, fewer).
    pub evaluated: u64,
    /// Rows that could not be read.
    pub row_errors: u64,
    /// The eval log file name (relative to the summary's directory).
    pub log_file: String,
}

/// Counts and rates for a slice of a dataset (a category, a language).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// The confusion counts.
    pub confusion: Confusion,
    /// True positive rate.
    pub tpr: Option<f64>,
    /// False positive rate.
    pub fpr: Option<f64>,
    /// Accuracy.
    pub accuracy: Option<f64>,
}

impl Breakdown {
    fn from_confusion(confusion: Confusion) -> Self {
        Self {
            confusion,
            tpr: confusion.tpr(),
            fpr: confusion.fpr(),
            accuracy: confusion.accuracy(),
        }
    }
}

/// Which layer caught each true positive and which caused each false positive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribution {
    /// True positives per deciding layer.
    pub true_positives: BTreeMap<String, u64>,
    /// False positives per deciding layer.
    pub false_positives: BTreeMap<String, u64>,
}

/// Fine labels (PromptGuard and the like) against actions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FineLabels {
    /// label → action → prompts.
    pub matrix: BTreeMap<String, BTreeMap<String, u64>>,
    /// Prompts whose verdict matched the label's expected verdict (ALLOW for
    /// reciprocal/borderline/benign, flagged for manipulative/extractive/attack/harmful).
    pub correct: u64,
    /// Prompts.
    pub total: u64,
    /// `correct / total`.
    pub accuracy: Option<f64>,
    /// The same per label.
    pub accuracy_by_label: BTreeMap<String, f64>,
    /// The published reference accuracy, for PromptGuard sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_accuracy: Option<f64>,
    /// True label → predicted label → prompts: the four-label confusion matrix. The
    /// pipeline's verdict is mapped to a PromptGuard label by [`predicted_label`].
    #[serde(default)]
    pub predicted: BTreeMap<String, BTreeMap<String, u64>>,
    /// Prompts whose predicted label equals the true label.
    #[serde(default)]
    pub strict_correct: u64,
    /// `strict_correct / total`: accuracy over the four labels themselves.
    #[serde(default)]
    pub strict_accuracy: Option<f64>,
}

/// The PromptGuard label a verdict stands for. When the configuration has a relational layer
/// and it gave a label, that label: the relational layer's own four-way judgement.
/// Otherwise the action is mapped: ALLOW → `reciprocal`; flagged with a counted
/// system-marker finding (prompt extraction, system-prompt markers) → `extractive`; any
/// other flagged prompt → `manipulative`. `borderline` is never predicted by the mapping (a
/// deterministic verdict has no "allowed but risky" class), so without a relational layer
/// borderline prompts always count as misclassified in the strict accuracy.
pub fn predicted_label(log: &EvalLogRecord) -> &'static str {
    if let Some(label) = log.relational.as_ref().and_then(|r| r.label) {
        return label.name();
    }
    if log.action == rampart_core::Action::Allow {
        return "reciprocal";
    }
    let extraction = log
        .findings
        .iter()
        .any(|f| f.points > 0 && f.category == rampart_core::Category::SystemMarker);
    if extraction {
        "extractive"
    } else {
        "manipulative"
    }
}

/// Everything measured for one dataset (or pool) under one configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DatasetReport {
    /// Dataset name (or [`POOLED_ALL`], [`POOLED_PROMPTGUARD`]).
    pub dataset: String,
    /// Configuration name.
    pub config: String,
    /// Prompts evaluated.
    pub prompts: u64,
    /// Attacks among them.
    pub attacks: u64,
    /// Benign prompts among them.
    pub benign: u64,
    /// Prompts that could not be scanned (counted as flagged).
    pub scan_errors: u64,
    /// Confusion counts.
    pub confusion: Confusion,
    /// True positive rate (recall).
    pub tpr: Option<f64>,
    /// False positive rate.
    pub fpr: Option<f64>,
    /// Precision.
    pub precision: Option<f64>,
    /// F1.
    pub f1: Option<f64>,
    /// Accuracy.
    pub accuracy: Option<f64>,
    /// Prompts by final action.
    pub actions: BTreeMap<String, u64>,
    /// Prompts with a score (some layer yields one).
    pub scored: u64,
    /// ROC-AUC over the scored prompts (needs both classes).
    pub roc_auc: Option<f64>,
    /// Best TPR with FPR ≤ 1% (and its threshold).
    pub tpr_at_1pct_fpr: Option<OperatingPoint>,
    /// Best TPR with FPR ≤ 0.1%.
    pub tpr_at_0_1pct_fpr: Option<OperatingPoint>,
    /// Whole-scan latency.
    pub latency: Option<Latency>,
    /// Latency per layer, over the prompts that reached it (its `count`; a cascade's
    /// skipped layers are not counted).
    pub layer_latency: BTreeMap<String, Latency>,
    /// Per category.
    pub by_category: BTreeMap<String, Breakdown>,
    /// Per language.
    pub by_language: BTreeMap<String, Breakdown>,
    /// Per channel (`user`, `tool`, `retrieved`; see `Record::channel`). Filled only when
    /// the prompts span more than one channel or carry `position`/`carrier` fields, so the
    /// summary of a single-channel set is unchanged.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_channel: BTreeMap<String, Breakdown>,
    /// Per payload position (`start`, `middle`, `end`; `(none)` for prompts without one,
    /// such as benign carriers). Filled only when some prompt has a `position`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_position: BTreeMap<String, Breakdown>,
    /// Per carrier (`email`, `html_page`…; `(none)` for prompts without one). Filled only
    /// when some prompt has a `carrier`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_carrier: BTreeMap<String, Breakdown>,
    /// Per-layer attribution of flags.
    pub attribution: Attribution,
    /// Attack category → layer → attacks that layer flagged on its own (its own action is
    /// not ALLOW). The key `(final)` counts the attacks the pipeline flagged.
    pub layer_detection: BTreeMap<String, BTreeMap<String, u64>>,
    /// Attacks per category (the denominators of `layer_detection`).
    pub attacks_by_category: BTreeMap<String, u64>,
    /// Fine labels × action, when the data has labels other than attack/benign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fine_labels: Option<FineLabels>,
    /// The intent layer (LLM judge): calls, cost, latency and how it changed decisions,
    /// when the configuration has a judge layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeStats>,
    /// The relational layer: evaluations by status and label, cost and time, when the
    /// configuration has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relational: Option<RelationalStats>,
    /// Conversation records (replayed call by call): rates over conversations with their
    /// intervals, where attacks were first flagged, the benign ones flagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<ConversationStats>,
}

/// A rate over conversations with its 95% Wilson interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RateBreakdown {
    /// The confusion counts.
    pub confusion: Confusion,
    /// True positive rate.
    pub tpr: Option<f64>,
    /// Its 95% Wilson interval.
    pub tpr_interval: Option<Interval>,
    /// False positive rate.
    pub fpr: Option<f64>,
    /// Its 95% Wilson interval.
    pub fpr_interval: Option<Interval>,
}

impl RateBreakdown {
    fn from_confusion(c: Confusion) -> Self {
        Self {
            confusion: c,
            tpr: c.tpr(),
            tpr_interval: wilson(c.tp, c.positives()),
            fpr: c.fpr(),
            fpr_interval: wilson(c.fp, c.negatives()),
        }
    }
}

/// Where one attack conversation was first flagged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstFlag {
    /// The record id.
    pub id: String,
    /// Its category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// The first flagged call, 1-based.
    pub call: usize,
    /// Index in `turns` of that call's last message.
    pub message: usize,
    /// The record's `attack_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack_turn: Option<usize>,
    /// What flagged it.
    pub flagged_by: Vec<String>,
}

/// What conversation records gave (one outcome per conversation: flagged when any call
/// was).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConversationStats {
    /// Conversations evaluated.
    pub conversations: u64,
    /// Rates over conversations, with intervals.
    pub overall: RateBreakdown,
    /// The same per category.
    pub by_category: BTreeMap<String, RateBreakdown>,
    /// Attacks flagged.
    pub attacks_flagged: u64,
    /// Median first flagged call (1-based) over the attacks flagged.
    pub first_flag_call_median: Option<f64>,
    /// Median message index of the first flag over the attacks flagged.
    pub first_flag_message_median: Option<f64>,
    /// Attacks flagged per first flagged call (`"1"`, `"2"`…).
    pub first_flag_calls: BTreeMap<String, u64>,
    /// Attacks first flagged on a call that ends before their `attack_turn`: flagged for
    /// something else than the attack.
    pub flagged_before_attack_turn: u64,
    /// Every attack flagged, in record order.
    pub first_flags: Vec<FirstFlag>,
    /// Every benign conversation flagged, in record order, with what flagged it.
    pub flagged_benign: Vec<FirstFlag>,
    /// Conversations with a call the scanner refused (counted as flagged).
    pub errors: u64,
    /// Per-message decisions of the benign conversations: what a user of a chat meets per
    /// message, the first call and the later ones apart.
    #[serde(default)]
    pub benign_messages: MessageStats,
}

/// Per-call (per-message) decisions over benign conversations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageStats {
    /// Calls scanned.
    pub calls: u64,
    /// Of them, not ALLOW.
    pub flagged: u64,
    /// Calls after each conversation's first.
    pub later_calls: u64,
    /// Of them, not ALLOW.
    pub later_flagged: u64,
    /// What flagged the flagged calls (finding ids joined by `+`), by count.
    pub flagged_by: BTreeMap<String, u64>,
    /// Calls by the content kind of their newest message (code, log, document, non_english,
    /// chat): `[calls, flagged]`.
    #[serde(default)]
    pub by_kind: BTreeMap<String, [u64; 2]>,
}

impl MessageStats {
    /// Flagged calls over calls.
    pub fn rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.flagged as f64 / self.calls as f64
        }
    }

    /// Flagged later calls over later calls.
    pub fn later_rate(&self) -> f64 {
        if self.later_calls == 0 {
            0.0
        } else {
            self.later_flagged as f64 / self.later_calls as f64
        }
    }
}

impl ConversationStats {
    /// Computes the stats over the log records of conversation records; `None` when there
    /// is none.
    pub fn compute<'a>(
        logs: impl IntoIterator<Item = &'a EvalLogRecord>,
    ) -> Option<ConversationStats> {
        let mut s = ConversationStats::default();
        let mut overall = Confusion::default();
        let mut by_cat: BTreeMap<String, Confusion> = BTreeMap::new();
        let (mut calls, mut messages) = (Vec::new(), Vec::new());
        for l in logs {
            let Some(c) = &l.conversation else { continue };
            let flagged = matches!(l.outcome, Outcome::TruePositive | Outcome::FalsePositive);
            s.conversations += 1;
            if l.error.is_some() {
                s.errors += 1;
            }
            overall.add(l.attack, flagged);
            if !l.attack {
                let m = &mut s.benign_messages;
                m.calls += c.calls as u64;
                m.flagged += c.flagged_calls as u64;
                m.later_calls += c.calls.saturating_sub(1) as u64;
                m.later_flagged += c.flagged_later_calls as u64;
                for by in &c.flagged_calls_by {
                    *m.flagged_by.entry(by.clone()).or_default() += 1;
                }
                for k in &c.call_kinds {
                    m.by_kind.entry(k.clone()).or_default()[0] += 1;
                }
                for k in &c.flagged_call_kinds {
                    m.by_kind.entry(k.clone()).or_default()[1] += 1;
                }
            }
            by_cat
                .entry(key_or(l.category.as_deref(), NONE_KEY))
                .or_default()
                .add(l.attack, flagged);
            let (Some(call), Some(message)) = (c.first_flag_call, c.first_flag_message) else {
                continue;
            };
            let flag = FirstFlag {
                id: l.prompt_id.clone(),
                category: l.category.clone(),
                call,
                message,
                attack_turn: c.attack_turn,
                flagged_by: c.flagged_by.clone(),
            };
            if l.attack {
                s.attacks_flagged += 1;
                calls.push(call as f64);
                messages.push(message as f64);
                *s.first_flag_calls.entry(call.to_string()).or_default() += 1;
                if c.attack_turn.is_some_and(|a| message < a) {
                    s.flagged_before_attack_turn += 1;
                }
                s.first_flags.push(flag);
            } else {
                s.flagged_benign.push(flag);
            }
        }
        if s.conversations == 0 {
            return None;
        }
        s.overall = RateBreakdown::from_confusion(overall);
        s.by_category = by_cat
            .into_iter()
            .map(|(k, c)| (k, RateBreakdown::from_confusion(c)))
            .collect();
        s.first_flag_call_median = median(&mut calls);
        s.first_flag_message_median = median(&mut messages);
        Some(s)
    }
}

/// The median (the mean of the two middle values for an even count); `None` when empty.
fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// What a configuration's relational layer did over a dataset (or pool).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelationalStats {
    /// The relational layer's name.
    pub layer: String,
    /// Its backend.
    pub backend: String,
    /// Prompts with a relational report.
    pub evaluated: u64,
    /// Of them, evaluated to a label.
    pub ok: u64,
    /// Of them, failed (no label: the layer's fail mode decided, and the strict accuracy
    /// fell back to the action mapping).
    pub failed: u64,
    /// Of them, skipped (no user layer).
    pub skipped: u64,
    /// Labels given.
    pub labels: BTreeMap<String, u64>,
    /// Why evaluations failed, by reason.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failures: BTreeMap<String, u64>,
    /// Model calls.
    pub calls: u64,
    /// Input tokens over the calls.
    pub input_tokens: u64,
    /// Output tokens over the calls.
    pub output_tokens: u64,
    /// Cost in USD (priced models only).
    pub cost_usd: f64,
    /// Wall time of the evaluations that ran (skipped ones left out), microseconds.
    pub latency_us: Option<Latency>,
}

impl RelationalStats {
    /// Computes the stats over the log records that carry a relational report; `None` when
    /// none does (the configuration has no relational layer).
    pub fn compute<'a>(
        logs: impl IntoIterator<Item = &'a EvalLogRecord>,
    ) -> Option<RelationalStats> {
        let mut s = RelationalStats::default();
        let mut times = Vec::new();
        for l in logs {
            let Some(r) = &l.relational else { continue };
            if s.evaluated == 0 {
                s.layer = r.layer.clone();
                s.backend = r.backend.name().to_string();
            }
            s.evaluated += 1;
            match r.status.as_str() {
                "ok" => s.ok += 1,
                "skipped" => {
                    s.skipped += 1;
                    continue;
                }
                _ => {
                    s.failed += 1;
                    let reason = r.reason.clone().unwrap_or_default();
                    *s.failures.entry(reason).or_default() += 1;
                }
            }
            if let Some(label) = r.label {
                *s.labels.entry(label.name().to_string()).or_default() += 1;
            }
            s.calls += r.calls;
            s.input_tokens += r.input_tokens;
            s.output_tokens += r.output_tokens;
            s.cost_usd += r.cost_usd;
            times.push(r.elapsed_us);
        }
        if s.evaluated == 0 {
            return None;
        }
        s.latency_us = Latency::of(&times);
        Some(s)
    }
}

/// What a configuration's judge layer did over a dataset (or pool).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JudgeStats {
    /// The judge layer's name.
    pub layer: String,
    /// Prompts the judge was asked about (its triggers fired): model calls and cache hits.
    /// Of a conversation record, every call of its replay the judge was asked about.
    pub calls: u64,
    /// Of them, answered by the cache (no model call).
    pub cache_hits: u64,
    /// Of them, not in the cache in replay-only mode (no call; the fail mode decided).
    pub replay_misses: u64,
    /// Input tokens over the calls.
    pub input_tokens: u64,
    /// Output tokens over the calls.
    pub output_tokens: u64,
    /// Cost in USD over the priced calls.
    pub cost_usd: f64,
    /// Calls whose model has a price (the others cost nothing here).
    pub priced_calls: u64,
    /// Latency of the judged prompts that went to the model (cache hits and replay misses
    /// left out), milliseconds.
    pub latency_ms: Option<Latency>,
    /// Calls by outcome (`ok`, `timeout`, `http_error`…; `replay_miss` for a prompt not in
    /// the cache in replay-only mode).
    pub outcomes: BTreeMap<String, u64>,
    /// Calls by trigger kind (a call with several triggers counts under each).
    pub triggers: BTreeMap<String, u64>,
    /// Verdicts by intent label.
    pub labels: BTreeMap<String, u64>,
    /// On the calls with a verdict: `"ALLOW -> BLOCK"` → prompts, the verdict the other
    /// layers gave on their own and the verdict with the judge.
    pub transitions: BTreeMap<String, u64>,
    /// On the calls with a verdict: the other layers' verdicts against the labels.
    pub without_judge: Breakdown,
    /// On the calls with a verdict: the verdicts with the judge against the labels.
    pub with_judge: Breakdown,
}

impl JudgeStats {
    /// Computes the stats over the log records that carry a judge report; `None` when none
    /// does (the configuration has no judge layer).
    pub fn compute<'a>(logs: impl IntoIterator<Item = &'a EvalLogRecord>) -> Option<JudgeStats> {
        use rampart_core::Action;
        let mut s = JudgeStats::default();
        let mut any = false;
        let mut latencies = Vec::new();
        let (mut without, mut with) = (Confusion::default(), Confusion::default());
        for l in logs {
            let Some(j) = &l.judge else { continue };
            if !any {
                s.layer = j.layer.clone();
                any = true;
            }
            // A conversation's calls, tokens and latencies are every judged call's; its
            // decision (the transitions below) is the deciding call's.
            let calls = match &l.conversation {
                Some(c) if !c.judge_calls.is_empty() => c.judge_calls.iter().collect(),
                _ => vec![j],
            };
            for c in calls.into_iter().filter(|c| c.called) {
                s.count_call(c, &mut latencies);
            }
            if !j.called {
                continue;
            }
            if let (Some(a), Some(b)) = (j.action_without_judge, j.action_with_judge) {
                *s.transitions
                    .entry(format!("{} -> {}", a.name(), b.name()))
                    .or_default() += 1;
                without.add(l.attack, a != Action::Allow);
                with.add(l.attack, b != Action::Allow);
            }
        }
        if !any {
            return None;
        }
        s.latency_ms = Latency::of(&latencies);
        s.without_judge = Breakdown::from_confusion(without);
        s.with_judge = Breakdown::from_confusion(with);
        Some(s)
    }

    /// Counts one judged call: cache, tokens, cost, latency (model calls only), outcome,
    /// triggers and label.
    fn count_call(&mut self, j: &JudgeLog, latencies: &mut Vec<u64>) {
        use rampart_judge::CacheStatus;
        self.calls += 1;
        match j.cache {
            CacheStatus::Hit => self.cache_hits += 1,
            CacheStatus::ReplayMiss => self.replay_misses += 1,
            CacheStatus::Off | CacheStatus::Miss => latencies.push(j.latency_ms),
        }
        self.input_tokens += j.input_tokens;
        self.output_tokens += j.output_tokens;
        if let Some(c) = j.cost_usd {
            self.cost_usd += c;
            self.priced_calls += 1;
        }
        let outcome = match (j.outcome, j.cache) {
            (Some(o), _) => o.name(),
            (None, CacheStatus::ReplayMiss) => "replay_miss",
            (None, _) => "(none)",
        };
        *self.outcomes.entry(outcome.to_string()).or_default() += 1;
        for t in &j.triggers {
            *self.triggers.entry(t.clone()).or_default() += 1;
        }
        if let Some(label) = j.intent_label {
            *self.labels.entry(label.name().to_string()).or_default() += 1;
        }
    }
}

/// Key of the slice of prompts without a value (no category, position, carrier…).
pub const NONE_KEY: &str = "(none)";

/// Key of the overall column of [`DatasetReport::layer_detection`].
pub const FINAL_COLUMN: &str = "(final)";

fn key_or(v: Option<&str>, missing: &str) -> String {
    v.filter(|s| !s.is_empty()).unwrap_or(missing).to_string()
}

impl DatasetReport {
    /// Computes the report over log records (all of one configuration).
    pub fn compute<'a>(
        dataset: &str,
        config: &str,
        logs: impl IntoIterator<Item = &'a EvalLogRecord>,
    ) -> DatasetReport {
        let mut r = DatasetReport {
            dataset: dataset.to_string(),
            config: config.to_string(),
            ..Default::default()
        };
        let logs: Vec<&EvalLogRecord> = logs.into_iter().collect();
        r.judge = JudgeStats::compute(logs.iter().copied());
        r.relational = RelationalStats::compute(logs.iter().copied());
        r.conversations = ConversationStats::compute(logs.iter().copied());
        let mut tally = Tally::default();
        for l in logs {
            tally.add(&mut r, l);
        }
        tally.finish(&mut r, dataset);
        r
    }

    /// The value of a gate metric, `None` when undefined.
    pub fn metric(&self, m: crate::gate::Metric) -> Option<f64> {
        use crate::gate::Metric;
        match m {
            Metric::Tpr => self.tpr,
            Metric::Fpr => self.fpr,
            Metric::Precision => self.precision,
            Metric::F1 => self.f1,
            Metric::Accuracy => self.accuracy,
            Metric::RocAuc => self.roc_auc,
            Metric::TprAt1pctFpr => self.tpr_at_1pct_fpr.map(|p| p.tpr),
            Metric::TprAt01pctFpr => self.tpr_at_0_1pct_fpr.map(|p| p.tpr),
            Metric::FourLabelAccuracy => self.fine_labels.as_ref().and_then(|f| f.accuracy),
            Metric::LatencyP50Us => self.latency.map(|l| l.p50 as f64),
            Metric::LatencyP95Us => self.latency.map(|l| l.p95 as f64),
            Metric::LatencyP99Us => self.latency.map(|l| l.p99 as f64),
        }
    }
}

/// What [`DatasetReport::compute`] gathers prompt by prompt besides the report's own
/// counters, turned into the report's rates, latencies and breakdowns by [`Tally::finish`].
#[derive(Default)]
struct Tally {
    /// (score, is attack) of every prompt with a score.
    scored: Vec<(f64, bool)>,
    /// Whole-scan time of every prompt, microseconds.
    total_us: Vec<u64>,
    /// Time of every layer run, by layer, microseconds.
    layer_us: BTreeMap<String, Vec<u64>>,
    /// Confusion counts by slice.
    slices: SliceTally,
    /// Fine labels against actions.
    fine: FineTally,
}

impl Tally {
    /// Counts one prompt, in the report's counters and in the tally.
    fn add(&mut self, r: &mut DatasetReport, l: &EvalLogRecord) {
        let flagged = matches!(l.outcome, Outcome::TruePositive | Outcome::FalsePositive);
        count_prompt(r, l, flagged);
        if let Some(s) = l.score {
            self.scored.push((f64::from(s), l.attack));
        }
        self.add_latency(l);
        let cat = self.slices.add(l, flagged);
        if flagged {
            attribute(r, l);
        }
        if l.attack {
            count_detection(r, l, cat, flagged);
        }
        self.fine.add(l, flagged);
    }

    /// The prompt's whole-scan time and the time of each layer that ran.
    fn add_latency(&mut self, l: &EvalLogRecord) {
        self.total_us.push(l.elapsed_us);
        // Layers a cascade skipped did not run: they are left out of the latency (so a
        // layer's sample count is the number of prompts that reached it).
        for layer in &l.layers {
            if matches!(layer.status, rampart_core::LayerStatus::Skipped { .. }) {
                continue;
            }
            self.layer_us
                .entry(layer.layer.clone())
                .or_default()
                .push(layer.elapsed_us);
        }
    }

    /// Fills the report's rates, latencies, breakdowns and fine labels.
    fn finish(self, r: &mut DatasetReport, dataset: &str) {
        let c = r.confusion;
        r.tpr = c.tpr();
        r.fpr = c.fpr();
        r.precision = c.precision();
        r.f1 = c.f1();
        r.accuracy = c.accuracy();
        r.scored = self.scored.len() as u64;
        r.roc_auc = roc_auc(&self.scored);
        r.tpr_at_1pct_fpr = tpr_at_fpr(&self.scored, 0.01).map(Into::into);
        r.tpr_at_0_1pct_fpr = tpr_at_fpr(&self.scored, 0.001).map(Into::into);
        r.latency = Latency::of(&self.total_us);
        r.layer_latency = self
            .layer_us
            .into_iter()
            .filter_map(|(k, v)| Latency::of(&v).map(|l| (k, l)))
            .collect();
        self.slices.finish(r);
        r.fine_labels = self.fine.finish(dataset);
    }
}

/// The report's own per-prompt counters: prompts, classes, errors, confusion, actions.
fn count_prompt(r: &mut DatasetReport, l: &EvalLogRecord, flagged: bool) {
    r.prompts += 1;
    if l.attack {
        r.attacks += 1;
    } else {
        r.benign += 1;
    }
    if l.error.is_some() {
        r.scan_errors += 1;
    }
    r.confusion.add(l.attack, flagged);
    *r.actions.entry(l.action.name().to_string()).or_default() += 1;
}

/// Credits a flagged prompt to the layer that decided it.
fn attribute(r: &mut DatasetReport, l: &EvalLogRecord) {
    let who = if l.error.is_some() {
        ATTR_INPUT_ERROR.to_string()
    } else {
        l.deciding_layer
            .clone()
            .unwrap_or_else(|| ATTR_COMBINED.to_string())
    };
    let map = if l.attack {
        &mut r.attribution.true_positives
    } else {
        &mut r.attribution.false_positives
    };
    *map.entry(who).or_default() += 1;
}

/// Counts an attack under its category `cat`: in all, by each layer that flagged it, and
/// in the final verdict.
fn count_detection(r: &mut DatasetReport, l: &EvalLogRecord, cat: String, flagged: bool) {
    *r.attacks_by_category.entry(cat.clone()).or_default() += 1;
    let row = r.layer_detection.entry(cat).or_default();
    for layer in &l.layers {
        let c = row.entry(layer.layer.clone()).or_default();
        if layer.action != rampart_core::Action::Allow {
            *c += 1;
        }
    }
    let c = row.entry(FINAL_COLUMN.to_string()).or_default();
    if flagged {
        *c += 1;
    }
}

/// Confusion counts by category, language, channel, payload position and carrier.
#[derive(Default)]
struct SliceTally {
    by_cat: BTreeMap<String, Confusion>,
    by_lang: BTreeMap<String, Confusion>,
    by_channel: BTreeMap<String, Confusion>,
    by_position: BTreeMap<String, Confusion>,
    by_carrier: BTreeMap<String, Confusion>,
    /// Whether any prompt has a payload position.
    any_position: bool,
    /// Whether any prompt has a carrier.
    any_carrier: bool,
}

impl SliceTally {
    /// Counts one prompt in each slice; returns its category key.
    fn add(&mut self, l: &EvalLogRecord, flagged: bool) -> String {
        let cat = key_or(l.category.as_deref(), "(none)");
        self.by_cat
            .entry(cat.clone())
            .or_default()
            .add(l.attack, flagged);
        self.by_lang
            .entry(key_or(l.language.as_deref(), "(unknown)"))
            .or_default()
            .add(l.attack, flagged);
        self.by_channel
            .entry(l.channel.map_or(NONE_KEY, |c| c.name()).to_string())
            .or_default()
            .add(l.attack, flagged);
        self.any_position |= l.position.is_some();
        self.by_position
            .entry(l.position.map_or(NONE_KEY, |p| p.name()).to_string())
            .or_default()
            .add(l.attack, flagged);
        self.any_carrier |= l.carrier.is_some();
        self.by_carrier
            .entry(key_or(l.carrier.as_deref(), NONE_KEY))
            .or_default()
            .add(l.attack, flagged);
        cat
    }

    /// The report's breakdowns.
    fn finish(self, r: &mut DatasetReport) {
        r.by_category = self
            .by_cat
            .into_iter()
            .map(|(k, c)| (k, Breakdown::from_confusion(c)))
            .collect();
        r.by_language = self
            .by_lang
            .into_iter()
            .map(|(k, c)| (k, Breakdown::from_confusion(c)))
            .collect();
        // Shown only where they say something, so the reports of sets without embedded
        // payloads and with one channel stay as they were.
        let breakdowns = |m: BTreeMap<String, Confusion>| {
            m.into_iter()
                .map(|(k, c)| (k, Breakdown::from_confusion(c)))
                .collect()
        };
        if self.by_channel.len() > 1 || self.any_position || self.any_carrier {
            r.by_channel = breakdowns(self.by_channel);
        }
        if self.any_position {
            r.by_position = breakdowns(self.by_position);
        }
        if self.any_carrier {
            r.by_carrier = breakdowns(self.by_carrier);
        }
    }
}

/// Fine labels against actions and predicted labels, with per-label accuracy counts.
#[derive(Default)]
struct FineTally {
    fine: FineLabels,
    /// Whether any prompt has a label other than attack and benign.
    present: bool,
    /// Label → (correct, prompts).
    label_counts: BTreeMap<String, (u64, u64)>,
}

impl FineTally {
    /// Counts one prompt.
    fn add(&mut self, l: &EvalLogRecord, flagged: bool) {
        let fine = &mut self.fine;
        let label = l.label.name().to_string();
        if !matches!(
            l.label,
            rampart_datasets::Label::Attack | rampart_datasets::Label::Benign
        ) {
            self.present = true;
        }
        *fine
            .matrix
            .entry(label.clone())
            .or_default()
            .entry(l.action.name().to_string())
            .or_default() += 1;
        let predicted = predicted_label(l);
        *fine
            .predicted
            .entry(l.label.name().to_string())
            .or_default()
            .entry(predicted.to_string())
            .or_default() += 1;
        if predicted == l.label.name() {
            fine.strict_correct += 1;
        }
        let correct = flagged == l.label.is_attack();
        let e = self.label_counts.entry(label).or_default();
        e.1 += 1;
        fine.total += 1;
        if correct {
            e.0 += 1;
            fine.correct += 1;
        }
    }

    /// The fine labels of the report: `None` without fine labels, and for the pool of every
    /// dataset, which mixes sets (its fine-label matrix would mean nothing).
    fn finish(self, dataset: &str) -> Option<FineLabels> {
        if !self.present || dataset == POOLED_ALL {
            return None;
        }
        let mut fine = self.fine;
        fine.accuracy = (fine.total > 0).then(|| fine.correct as f64 / fine.total as f64);
        fine.strict_accuracy =
            (fine.total > 0).then(|| fine.strict_correct as f64 / fine.total as f64);
        fine.accuracy_by_label = self
            .label_counts
            .into_iter()
            .filter(|(_, (_, n))| *n > 0)
            .map(|(k, (ok, n))| (k, ok as f64 / n as f64))
            .collect();
        if dataset.starts_with(PROMPTGUARD_PREFIX) || dataset == POOLED_PROMPTGUARD {
            fine.reference_accuracy = Some(PROMPTGUARD_REFERENCE_ACCURACY);
        }
        Some(fine)
    }
}

/// The whole run, machine-readable (`eval_{ts}_summary.json`; also the baseline format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Always [`SUMMARY_SCHEMA`].
    pub schema: String,
    /// `eval_{YYYYMMDD_HHMMSS}`.
    pub eval_run_id: String,
    /// Start of the run, ISO 8601 UTC.
    pub timestamp_utc: String,
    /// Wall time of the scans, in seconds.
    pub wall_seconds: f64,
    /// (configuration, prompt) scans made.
    pub scans: u64,
    /// Scans per second of wall time.
    pub prompts_per_second: f64,
    /// Worker threads.
    pub threads: u64,
    /// The configurations, in run order.
    pub configs: Vec<ConfigInfo>,
    /// The datasets, in run order.
    pub datasets: Vec<DatasetInfo>,
    /// One report per dataset and configuration (dataset-major, in run order), then the
    /// pooled reports ([`POOLED_ALL`], [`POOLED_PROMPTGUARD`]).
    pub reports: Vec<DatasetReport>,
    /// Gate results, when gates were checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<GateResult>,
}

impl Summary {
    /// Computes every report of a run.
    pub fn compute(run: &EvalRun) -> Summary {
        let mut reports = Vec::new();
        for d in &run.datasets {
            for c in &run.configs {
                reports.push(DatasetReport::compute(
                    &d.name,
                    &c.name,
                    d.logs.iter().filter(|l| l.config == c.name),
                ));
            }
        }
        let pg: Vec<_> = run
            .datasets
            .iter()
            .filter(|d| d.name.starts_with(PROMPTGUARD_PREFIX))
            .collect();
        if run.datasets.len() > 1 {
            for c in &run.configs {
                reports.push(DatasetReport::compute(
                    POOLED_ALL,
                    &c.name,
                    run.datasets
                        .iter()
                        .flat_map(|d| d.logs.iter())
                        .filter(|l| l.config == c.name),
                ));
            }
        }
        if !pg.is_empty() {
            for c in &run.configs {
                reports.push(DatasetReport::compute(
                    POOLED_PROMPTGUARD,
                    &c.name,
                    pg.iter()
                        .flat_map(|d| d.logs.iter())
                        .filter(|l| l.config == c.name),
                ));
            }
        }
        let wall = run.wall.as_secs_f64();
        let scans = run.scans() as u64;
        Summary {
            schema: SUMMARY_SCHEMA.to_string(),
            eval_run_id: run.run_id.clone(),
            timestamp_utc: run.timestamp_utc.clone(),
            wall_seconds: wall,
            scans,
            prompts_per_second: if wall > 0.0 { scans as f64 / wall } else { 0.0 },
            threads: run.threads as u64,
            configs: run.configs.clone(),
            datasets: run
                .datasets
                .iter()
                .zip(crate::output::log_file_names(
                    &run.run_id,
                    &run.datasets
                        .iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>(),
                ))
                .map(|(d, log_file)| DatasetInfo {
                    name: d.name.clone(),
                    origin: d.origin.clone(),
                    records: d.records_total as u64,
                    evaluated: d.records_evaluated as u64,
                    row_errors: d.row_errors.len() as u64,
                    log_file,
                })
                .collect(),
            reports,
            gates: Vec::new(),
        }
    }

    /// The report for a dataset (or pool) and configuration.
    pub fn report(&self, dataset: &str, config: &str) -> Option<&DatasetReport> {
        self.reports
            .iter()
            .find(|r| r.dataset == dataset && r.config == config)
    }

    /// Whether every gate passed (true when none was checked).
    pub fn gates_passed(&self) -> bool {
        self.gates.iter().all(|g| g.passed)
    }
}

#[cfg(test)]
mod predicted_label_tests {
    use super::*;
    use crate::log::FindingLog;
    use rampart_core::{Action, Category, RiskClass, Span, Strength, ViewKind};
    use rampart_datasets::Label;

    fn rec(action: Action, findings: Vec<(Category, u8)>) -> EvalLogRecord {
        EvalLogRecord {
            schema: crate::log::EVAL_LOG_SCHEMA.into(),
            eval_run_id: "eval_x".into(),
            config: "c".into(),
            dataset: "promptguard_x".into(),
            split: None,
            prompt_id: "1".into(),
            input_hash: "h".into(),
            hash_key_id: "k".into(),
            label: Label::Extractive,
            attack: true,
            category: None,
            language: None,
            channel: None,
            position: None,
            carrier: None,
            outcome: Outcome::of(true, action != Action::Allow),
            action,
            risk: RiskClass::HighRisk,
            score: None,
            deciding_layer: None,
            layers: Vec::new(),
            findings: findings
                .into_iter()
                .map(|(category, points)| FindingLog {
                    layer: "rules".into(),
                    rule_id: "X_001".into(),
                    category,
                    strength: Strength::Strong,
                    points,
                    segment: 0,
                    span: Span { start: 0, end: 1 },
                    view: ViewKind::Folded,
                })
                .collect(),
            transforms: Vec::new(),
            elapsed_us: 1,
            error: None,
            judge: None,
            relational: None,
            conversation: None,
        }
    }

    #[test]
    fn verdicts_map_to_promptguard_labels() {
        assert_eq!(
            predicted_label(&rec(Action::Allow, vec![(Category::SystemMarker, 2)])),
            "reciprocal"
        );
        assert_eq!(
            predicted_label(&rec(Action::Block, vec![(Category::SystemMarker, 2)])),
            "extractive"
        );
        // An uncounted system-marker finding does not make it extraction.
        assert_eq!(
            predicted_label(&rec(
                Action::Block,
                vec![(Category::SystemMarker, 0), (Category::ControlPhrase, 2)]
            )),
            "manipulative"
        );
        assert_eq!(
            predicted_label(&rec(Action::Sanitize, vec![])),
            "manipulative"
        );
    }

    fn relational(
        status: &str,
        label: Option<rampart_relational::RelationalLabel>,
    ) -> crate::log::RelationalLog {
        crate::log::RelationalLog {
            layer: "relational".into(),
            backend: rampart_relational::Backend::Llm,
            status: status.into(),
            reason: (status != "ok").then(|| "timeout: no answer".into()),
            label,
            balance: label.map(|_| 0.2),
            exchange: None,
            violations: Vec::new(),
            calls: 3,
            input_tokens: 300,
            output_tokens: 60,
            cost_usd: 0.002,
            elapsed_us: 4_000,
        }
    }

    /// With a relational layer, its label is the prediction (borderline included); without
    /// a label (failed, skipped) the action mapping stands.
    #[test]
    fn a_relational_label_is_the_prediction() {
        use rampart_relational::RelationalLabel::{Borderline, Reciprocal};
        let mut r = rec(Action::Block, vec![(Category::SystemMarker, 2)]);
        r.relational = Some(relational("ok", Some(Borderline)));
        assert_eq!(predicted_label(&r), "borderline");
        r.relational = Some(relational("ok", Some(Reciprocal)));
        assert_eq!(predicted_label(&r), "reciprocal");
        r.relational = Some(relational("failed", None));
        assert_eq!(predicted_label(&r), "extractive");

        let mut ok = rec(Action::Allow, vec![]);
        ok.label = Label::Borderline;
        ok.relational = Some(relational("ok", Some(Borderline)));
        let mut skipped = rec(Action::Allow, vec![]);
        skipped.label = Label::Reciprocal;
        skipped.relational = Some(relational("skipped", None));
        let logs = [ok, r, skipped, rec(Action::Allow, vec![])];
        let d = DatasetReport::compute("promptguard_x", "c", &logs);
        let f = d.fine_labels.expect("fine labels");
        assert_eq!(f.predicted["borderline"]["borderline"], 1);
        assert_eq!(f.predicted["extractive"]["extractive"], 1);
        let s = d.relational.expect("relational stats");
        assert_eq!((s.evaluated, s.ok, s.failed, s.skipped), (3, 1, 1, 1));
        assert_eq!(s.labels["borderline"], 1);
        assert_eq!(s.failures["timeout: no answer"], 1);
        assert_eq!((s.calls, s.input_tokens, s.output_tokens), (6, 600, 120));
        assert!((s.cost_usd - 0.004).abs() < 1e-12);
        assert_eq!(s.latency_us.map(|l| l.count), Some(2));
        assert_eq!(s.backend, "llm");

        // A configuration without a relational layer: no stats.
        let d = DatasetReport::compute("d", "c", &[rec(Action::Allow, vec![])]);
        assert!(d.relational.is_none());
    }
}

#[cfg(test)]
mod breakdown_tests {
    use super::*;
    use rampart_core::{Action, RiskClass};
    use rampart_datasets::{Channel, Label, PayloadPosition};

    fn log(
        attack: bool,
        flagged: bool,
        channel: Channel,
        position: Option<PayloadPosition>,
        carrier: Option<&str>,
    ) -> EvalLogRecord {
        EvalLogRecord {
            schema: crate::log::EVAL_LOG_SCHEMA.into(),
            eval_run_id: "eval_x".into(),
            config: "c".into(),
            dataset: "d".into(),
            split: None,
            prompt_id: "p".into(),
            input_hash: "h".into(),
            hash_key_id: "k".into(),
            label: if attack { Label::Attack } else { Label::Benign },
            attack,
            category: None,
            language: None,
            channel: Some(channel),
            position,
            carrier: carrier.map(Into::into),
            outcome: Outcome::of(attack, flagged),
            action: if flagged {
                Action::Block
            } else {
                Action::Allow
            },
            risk: RiskClass::LowRisk,
            score: None,
            deciding_layer: None,
            layers: Vec::new(),
            findings: Vec::new(),
            transforms: Vec::new(),
            elapsed_us: 1,
            error: None,
            judge: None,
            relational: None,
            conversation: None,
        }
    }

    fn counts(b: &Breakdown) -> (u64, u64, u64, u64) {
        let c = b.confusion;
        (c.tp, c.fn_, c.fp, c.tn)
    }

    #[test]
    fn one_channel_without_embedding_fields_adds_no_breakdown() {
        let logs = [
            log(true, true, Channel::User, None, None),
            log(false, false, Channel::User, None, None),
        ];
        let r = DatasetReport::compute("d", "c", &logs);
        assert!(r.by_channel.is_empty() && r.by_position.is_empty() && r.by_carrier.is_empty());
        let json = serde_json::to_string(&r).unwrap();
        assert!(
            !json.contains("by_channel") && !json.contains("by_position"),
            "{json}"
        );
    }

    #[test]
    fn channels_positions_and_carriers_are_counted_per_group() {
        use Channel::{Retrieved, Tool, User};
        use PayloadPosition::{End, Middle, Start};
        let logs = [
            // user: 2 attacks (1 caught), 2 benign (1 flagged)
            log(true, true, User, None, None),
            log(true, false, User, None, None),
            log(false, true, User, None, None),
            log(false, false, User, None, None),
            // tool: 3 attacks in emails (start caught, middle missed, end caught), 1 benign
            log(true, true, Tool, Some(Start), Some("email")),
            log(true, false, Tool, Some(Middle), Some("email")),
            log(true, true, Tool, Some(End), Some("email")),
            log(false, false, Tool, None, Some("email")),
            // retrieved: 2 attacks in web pages (both middle, 1 caught), 2 benign pages
            log(true, false, Retrieved, Some(Middle), Some("html_page")),
            log(true, true, Retrieved, Some(Middle), Some("html_page")),
            log(false, false, Retrieved, None, Some("html_page")),
            log(false, true, Retrieved, None, Some("html_page")),
        ];
        let r = DatasetReport::compute("d", "c", &logs);
        let ch = &r.by_channel;
        assert_eq!(ch.keys().collect::<Vec<_>>(), ["retrieved", "tool", "user"]);
        assert_eq!(counts(&ch["user"]), (1, 1, 1, 1));
        assert_eq!(counts(&ch["tool"]), (2, 1, 0, 1));
        assert_eq!(counts(&ch["retrieved"]), (1, 1, 1, 1));
        assert_eq!(ch["tool"].tpr, Some(2.0 / 3.0));
        assert_eq!(ch["tool"].fpr, Some(0.0));
        assert_eq!(ch["retrieved"].fpr, Some(0.5));

        let pos = &r.by_position;
        assert_eq!(counts(&pos["start"]), (1, 0, 0, 0));
        assert_eq!(counts(&pos["middle"]), (1, 2, 0, 0));
        assert_eq!(counts(&pos["end"]), (1, 0, 0, 0));
        // Benign prompts have no position: their FPR is in `(none)`, and a position's FPR is
        // undefined, not 0.
        assert_eq!(counts(&pos[NONE_KEY]), (1, 1, 2, 3));
        assert_eq!(pos["middle"].tpr, Some(1.0 / 3.0));
        assert_eq!(pos["middle"].fpr, None);

        let car = &r.by_carrier;
        assert_eq!(counts(&car["email"]), (2, 1, 0, 1));
        assert_eq!(counts(&car["html_page"]), (1, 1, 1, 1));
        assert_eq!(counts(&car[NONE_KEY]), (1, 1, 1, 1));

        // Every breakdown partitions the prompts.
        for m in [ch, pos, car] {
            let total: u64 = m.values().map(|b| b.confusion.total()).sum();
            assert_eq!(total, r.prompts);
        }
    }

    #[test]
    fn a_single_channel_is_shown_when_the_set_has_embedding_fields() {
        let logs = [
            log(true, true, Channel::Tool, Some(PayloadPosition::End), None),
            log(false, false, Channel::Tool, None, None),
        ];
        let r = DatasetReport::compute("d", "c", &logs);
        assert_eq!(r.by_channel.keys().collect::<Vec<_>>(), ["tool"]);
        assert_eq!(r.by_position.keys().collect::<Vec<_>>(), ["(none)", "end"]);
        assert!(r.by_carrier.is_empty());
    }
}
