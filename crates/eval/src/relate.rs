//! The summary of a relate batch (`rampart relate --jsonl`): reports by status, prompts by
//! action, and for labelled prompts the four-label accuracy, the per-label counts and the
//! confusion matrix; time per prompt (nearest-rank percentiles, [`percentile`]) and the
//! model calls' tokens and cost.
//!
//! ```
//! use rampart_core::Action;
//! use rampart_eval::relate::{RelateBatch, RelateTally};
//! use rampart_relational::{Backend, RelationalCost, RelationalLabel, RelationalStatusKind};
//!
//! let tally = |expected: &str, label, us| RelateTally {
//!     expected: Some(expected.into()),
//!     label: Some(label),
//!     status: RelationalStatusKind::Ok,
//!     action: Action::Allow,
//!     elapsed_us: us,
//!     cost: RelationalCost::default(),
//! };
//! let mut batch = RelateBatch::default();
//! batch.add(tally("reciprocal", RelationalLabel::Reciprocal, 1_000));
//! batch.add(tally("extractive", RelationalLabel::Manipulative, 3_000));
//! batch.error();
//! let s = batch.finish("relational".into(), Some(Backend::Local));
//! assert_eq!((s.related, s.errors, s.labelled, s.correct), (2, 1, 2, 1));
//! assert_eq!(s.confusion["extractive"]["manipulative"], 1);
//! assert_eq!(s.time_ms.p50, Some(1.0));
//! assert!(s.human().contains("accuracy (4 labels): 0.500 (1/2)"));
//! ```

use crate::metrics::percentile;
use rampart_core::Action;
use rampart_relational::{
    Backend, RelationalCost, RelationalLabel, RelationalReport, RelationalStatusKind,
};
use serde::Serialize;
use std::collections::BTreeMap;

/// The summary file's `schema`.
pub const RELATE_SUMMARY_SCHEMA: &str = "rampart.relate_summary.v1";

/// What the summary keeps of one related prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct RelateTally {
    /// The record's `label`, when it has one (any text: labels outside the four are counted
    /// apart).
    pub expected: Option<String>,
    /// The label the evaluation gave, if it gave one.
    pub label: Option<RelationalLabel>,
    /// The report's status.
    pub status: RelationalStatusKind,
    /// The pipeline's action.
    pub action: Action,
    /// Wall time of the whole pipeline, microseconds.
    pub elapsed_us: u64,
    /// The evaluation's model calls.
    pub cost: RelationalCost,
}

impl RelateTally {
    /// The tally of one relational report, with the pipeline's action and time.
    pub fn of(
        report: &RelationalReport,
        action: Action,
        elapsed_us: u64,
        expected: Option<String>,
    ) -> RelateTally {
        RelateTally {
            expected,
            label: report.label,
            status: report.status.kind(),
            action,
            elapsed_us,
            cost: report.cost.clone(),
        }
    }
}

/// A batch being related: its tallies and its error count, in any order.
#[derive(Debug, Default)]
pub struct RelateBatch {
    errors: u64,
    tallies: Vec<RelateTally>,
}

impl RelateBatch {
    /// Counts one related prompt.
    pub fn add(&mut self, t: RelateTally) {
        self.tallies.push(t);
    }

    /// Counts one line that could not be related.
    pub fn error(&mut self) {
        self.errors += 1;
    }

    /// Prompts related so far.
    pub fn related(&self) -> u64 {
        self.tallies.len() as u64
    }

    /// Lines that could not be related so far.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// The summary, for the relational layer `layer` whose backend is `backend`.
    pub fn finish(self, layer: String, backend: Option<Backend>) -> RelateSummary {
        let mut s = RelateSummary {
            schema: RELATE_SUMMARY_SCHEMA,
            layer,
            backend,
            related: self.related(),
            errors: self.errors,
            ok: 0,
            failed: 0,
            skipped: 0,
            actions: BTreeMap::new(),
            labelled: 0,
            correct: 0,
            accuracy: None,
            labels: BTreeMap::new(),
            confusion: BTreeMap::new(),
            other_labels: BTreeMap::new(),
            time_ms: TimeStats::default(),
            cost: RelationalCost::default(),
        };
        let mut times: Vec<u64> = Vec::with_capacity(self.tallies.len());
        let any_labels = self.tallies.iter().any(|t| t.expected.is_some());
        if any_labels {
            for l in RelationalLabel::ALL {
                s.labels.insert(l.name().into(), LabelStats::default());
            }
        }
        for t in &self.tallies {
            match t.status {
                RelationalStatusKind::Ok => s.ok += 1,
                RelationalStatusKind::Failed => s.failed += 1,
                RelationalStatusKind::Skipped => s.skipped += 1,
            }
            *s.actions.entry(t.action.name().to_string()).or_default() += 1;
            times.push(t.elapsed_us);
            s.cost.merge(&t.cost);
            if let Some(p) = t.label
                && any_labels
                && let Some(ls) = s.labels.get_mut(p.name())
            {
                ls.predicted += 1;
            }
            let Some(expected) = &t.expected else {
                continue;
            };
            let Some(want) = RelationalLabel::from_name(expected) else {
                *s.other_labels.entry(expected.clone()).or_default() += 1;
                continue;
            };
            s.labelled += 1;
            let got = t.label.map_or("none", |l| l.name());
            *s.confusion
                .entry(want.name().to_string())
                .or_default()
                .entry(got.to_string())
                .or_default() += 1;
            let right = t.label == Some(want);
            let ls = s.labels.entry(want.name().to_string()).or_default();
            ls.expected += 1;
            if right {
                ls.correct += 1;
                s.correct += 1;
            }
        }
        for ls in s.labels.values_mut() {
            ls.accuracy = (ls.expected > 0).then(|| ls.correct as f64 / ls.expected as f64);
        }
        s.accuracy = (s.labelled > 0).then(|| s.correct as f64 / s.labelled as f64);
        times.sort_unstable();
        if !times.is_empty() {
            let to_ms = |us: u64| us as f64 / 1000.0;
            s.time_ms = TimeStats {
                mean: Some(to_ms(times.iter().sum::<u64>()) / times.len() as f64),
                p50: percentile(&times, 50.0).map(to_ms),
                p95: percentile(&times, 95.0).map(to_ms),
                max: times.last().map(|&t| to_ms(t)),
            };
        }
        s
    }
}

/// Per expected label: how many, how many predicted, how many right.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct LabelStats {
    /// Prompts expected to have the label.
    pub expected: u64,
    /// Prompts the evaluation gave the label.
    pub predicted: u64,
    /// Prompts expected to have it that got it.
    pub correct: u64,
    /// `correct / expected`.
    pub accuracy: Option<f64>,
}

/// Time per prompt (the whole pipeline), milliseconds.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct TimeStats {
    /// Mean.
    pub mean: Option<f64>,
    /// Median (nearest rank).
    pub p50: Option<f64>,
    /// 95th percentile (nearest rank).
    pub p95: Option<f64>,
    /// Slowest.
    pub max: Option<f64>,
}

/// The batch summary (`--summary FILE`, and on stderr in words, [`RelateSummary::human`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelateSummary {
    /// [`RELATE_SUMMARY_SCHEMA`].
    pub schema: &'static str,
    /// The relational layer.
    pub layer: String,
    /// Its backend (`local`, `llm` or `circle` in JSON).
    pub backend: Option<Backend>,
    /// Prompts related (each has a report, possibly failed or skipped).
    pub related: u64,
    /// Lines that could not be related (error records).
    pub errors: u64,
    /// Reports whose status is ok.
    pub ok: u64,
    /// Reports whose status is failed.
    pub failed: u64,
    /// Reports whose status is skipped.
    pub skipped: u64,
    /// Prompts by the pipeline's action.
    pub actions: BTreeMap<String, u64>,
    /// Prompts whose `label` is one of the four (the denominator of `accuracy`).
    pub labelled: u64,
    /// Of those, prompts whose predicted label is the expected one.
    pub correct: u64,
    /// `correct / labelled` (a failed or skipped evaluation counts as wrong).
    pub accuracy: Option<f64>,
    /// Per label (the four, in order).
    pub labels: BTreeMap<String, LabelStats>,
    /// Expected label → predicted label → prompts; `none` when the evaluation gave no label.
    pub confusion: BTreeMap<String, BTreeMap<String, u64>>,
    /// Labels outside the four (not in the accuracy), with their counts.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub other_labels: BTreeMap<String, u64>,
    /// Time per prompt.
    pub time_ms: TimeStats,
    /// Model calls, tokens and cost over the batch.
    pub cost: RelationalCost,
}

impl RelateSummary {
    /// The summary in words, one line per part, each line starting `rampart: relate:` or two
    /// spaces.
    pub fn human(&self) -> String {
        let mut o = String::new();
        let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}"));
        o.push_str(&format!(
            "rampart: relate: {} related ({} ok, {} failed, {} skipped), {} errors; backend {}\n",
            self.related,
            self.ok,
            self.failed,
            self.skipped,
            self.errors,
            self.backend.map_or("?", Backend::name)
        ));
        if self.labelled > 0 {
            o.push_str(&format!(
                "  accuracy (4 labels): {:.3} ({}/{})\n",
                self.accuracy.unwrap_or(0.0),
                self.correct,
                self.labelled
            ));
            o.push_str("  confusion (rows: expected, columns: predicted)\n");
            let cols: Vec<&str> = RelationalLabel::ALL
                .iter()
                .map(|l| l.name())
                .chain(["none"])
                .collect();
            o.push_str(&format!("  {:<14}", ""));
            for c in &cols {
                o.push_str(&format!(" {c:>12}"));
            }
            o.push('\n');
            for l in RelationalLabel::ALL {
                o.push_str(&format!("  {:<14}", l.name()));
                let row = self.confusion.get(l.name());
                for c in &cols {
                    let n = row.and_then(|r| r.get(*c)).copied().unwrap_or(0);
                    o.push_str(&format!(" {n:>12}"));
                }
                o.push('\n');
            }
            o.push_str("  per label:");
            for l in RelationalLabel::ALL {
                if let Some(ls) = self.labels.get(l.name()) {
                    let acc = ls.accuracy.map_or("-".to_string(), |a| format!("{a:.3}"));
                    o.push_str(&format!(
                        "  {} {}/{} ({acc}), predicted {}",
                        l.name(),
                        ls.correct,
                        ls.expected,
                        ls.predicted
                    ));
                    o.push(';');
                }
            }
            o.pop();
            o.push('\n');
        }
        if !self.other_labels.is_empty() {
            let other: Vec<String> = self
                .other_labels
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            o.push_str(&format!(
                "  labels outside the four (not in the accuracy): {}\n",
                other.join(", ")
            ));
        }
        o.push_str(&format!(
            "  time per prompt: mean {} ms, p50 {} ms, p95 {} ms\n",
            f(self.time_ms.mean),
            f(self.time_ms.p50),
            f(self.time_ms.p95)
        ));
        o.push_str(&format!(
            "  model calls: {}, tokens: {} input / {} output, cost ${:.4}\n",
            self.cost.calls, self.cost.input_tokens, self.cost.output_tokens, self.cost.cost_usd
        ));
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(expected: Option<&str>, label: Option<RelationalLabel>, us: u64) -> RelateTally {
        RelateTally {
            expected: expected.map(Into::into),
            label,
            status: if label.is_some() {
                RelationalStatusKind::Ok
            } else {
                RelationalStatusKind::Failed
            },
            action: Action::Allow,
            elapsed_us: us,
            cost: RelationalCost::default(),
        }
    }

    #[test]
    fn the_summary_counts_labels_confusion_and_time() {
        let mut b = RelateBatch::default();
        use RelationalLabel::*;
        b.add(tally(Some("reciprocal"), Some(Reciprocal), 1000));
        b.add(tally(Some("extractive"), Some(Manipulative), 2000));
        b.add(tally(Some("extractive"), None, 3000));
        b.add(tally(Some("benign"), Some(Reciprocal), 4000));
        b.add(tally(None, Some(Reciprocal), 100_000));
        let s = b.finish("relational".into(), None);
        assert_eq!((s.related, s.labelled, s.correct), (5, 3, 1));
        assert_eq!((s.ok, s.failed), (4, 1));
        assert!((s.accuracy.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.confusion["extractive"]["manipulative"], 1);
        assert_eq!(s.confusion["extractive"]["none"], 1);
        assert_eq!(s.labels["reciprocal"].predicted, 3);
        assert_eq!(s.labels["extractive"].expected, 2);
        assert_eq!(s.other_labels["benign"], 1);
        assert_eq!(s.time_ms.p50, Some(3.0));
        assert_eq!(s.time_ms.p95, Some(100.0));
        let h = s.human();
        assert!(h.contains("accuracy (4 labels): 0.333 (1/3)"), "{h}");
    }
}
