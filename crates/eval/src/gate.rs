//! Gates: thresholds a run must meet (a TOML file, versioned, strict).
//!
//! ```toml
//! version = 1
//! baseline = "baseline.json"   # a summary JSON, relative to this file (optional)
//!
//! [[gate]]
//! name = "benign FPR"          # optional; a name is made from the fields otherwise
//! dataset = "Clean_Benign_Corpus_v1"
//! config = "default"           # optional: every configuration of the run otherwise
//! metric = "fpr"
//! max = 0.02                   # exactly one of max, min, max_regression
//!
//! [[gate]]
//! dataset = "Handwritten_Attacks_v1"
//! metric = "tpr"
//! max_regression = 0.02        # no worse than the baseline by more than this
//! ```
//!
//! A gate whose metric is undefined (an FPR on an attack-only set), whose dataset or
//! configuration was not evaluated, or whose baseline lacks the value fails: a gate never
//! passes for want of data.

use crate::error::EvalError;
use crate::report::Summary;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The gate file version this build reads.
pub const GATE_VERSION: u32 = 1;

/// A metric a gate can bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Metric {
    /// True positive rate (0..1).
    Tpr,
    /// False positive rate (0..1).
    Fpr,
    /// Precision (0..1).
    Precision,
    /// F1 (0..1).
    F1,
    /// Accuracy (0..1).
    Accuracy,
    /// ROC-AUC (0..1; needs scores).
    RocAuc,
    /// TPR at 1% FPR (needs scores).
    #[serde(rename = "tpr_at_1pct_fpr")]
    TprAt1pctFpr,
    /// TPR at 0.1% FPR (needs scores).
    #[serde(rename = "tpr_at_0_1pct_fpr")]
    TprAt01pctFpr,
    /// Four-label accuracy (datasets with fine labels).
    FourLabelAccuracy,
    /// Median whole-scan latency, microseconds.
    LatencyP50Us,
    /// 95th percentile latency, microseconds.
    LatencyP95Us,
    /// 99th percentile latency, microseconds.
    LatencyP99Us,
}

impl Metric {
    /// The name used in gate files.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Tpr => "tpr",
            Metric::Fpr => "fpr",
            Metric::Precision => "precision",
            Metric::F1 => "f1",
            Metric::Accuracy => "accuracy",
            Metric::RocAuc => "roc_auc",
            Metric::TprAt1pctFpr => "tpr_at_1pct_fpr",
            Metric::TprAt01pctFpr => "tpr_at_0_1pct_fpr",
            Metric::FourLabelAccuracy => "four_label_accuracy",
            Metric::LatencyP50Us => "latency_p50_us",
            Metric::LatencyP95Us => "latency_p95_us",
            Metric::LatencyP99Us => "latency_p99_us",
        }
    }

    /// Whether larger values are better (a regression is then a decrease).
    pub fn higher_is_better(self) -> bool {
        !matches!(
            self,
            Metric::Fpr | Metric::LatencyP50Us | Metric::LatencyP95Us | Metric::LatencyP99Us
        )
    }

    fn is_latency(self) -> bool {
        matches!(
            self,
            Metric::LatencyP50Us | Metric::LatencyP95Us | Metric::LatencyP99Us
        )
    }

    fn show(self, v: f64) -> String {
        if self.is_latency() {
            format!("{v:.0} µs")
        } else {
            format!("{:.2}%", v * 100.0)
        }
    }
}

/// One `[[gate]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    /// Shown in results; made from the other fields when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Dataset name, or a pool (`(all)`, `(promptguard)`).
    pub dataset: String,
    /// Configuration name; every configuration of the run when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// What is bounded.
    pub metric: Metric,
    /// Fails when the value is above this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Fails when the value is below this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Fails when the value is worse than the baseline's by more than this (in the metric's
    /// unit: a rate for rates, microseconds for latencies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_regression: Option<f64>,
    /// Baseline summary for this gate, relative to the gate file (overrides the file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<PathBuf>,
}

/// A gate file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateFile {
    /// Must be [`GATE_VERSION`].
    pub version: u32,
    /// Default baseline summary for `max_regression` gates, relative to the gate file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<PathBuf>,
    /// The gates.
    #[serde(default, rename = "gate")]
    pub gates: Vec<Gate>,
}

/// The verdict of one gate for one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateResult {
    /// The gate's name.
    pub name: String,
    /// Configuration checked.
    pub config: String,
    /// Passed or not.
    pub passed: bool,
    /// What was compared, e.g. `fpr on Clean_Benign_Corpus_v1 [default] = 0.35% <= 2.00%`.
    pub detail: String,
}

/// A parsed gate file with its baselines loaded.
#[derive(Debug, Clone)]
pub struct GateSet {
    /// Where it was read from.
    pub path: PathBuf,
    /// The file.
    pub file: GateFile,
    baselines: Vec<(PathBuf, Summary)>,
}

impl GateSet {
    /// Reads and validates a gate file and loads the baselines it names.
    pub fn load(path: &Path) -> Result<GateSet, EvalError> {
        let src = std::fs::read_to_string(path).map_err(|e| EvalError::io(path, e))?;
        Self::parse(&src, path)
    }

    /// Parses a gate file; `path` names it in errors and anchors relative baseline paths.
    pub fn parse(src: &str, path: &Path) -> Result<GateSet, EvalError> {
        let bad = |message: String| EvalError::Gate {
            path: path.to_path_buf(),
            message,
        };
        let file: GateFile = toml::from_str(src).map_err(|e| {
            let line = e
                .span()
                .map(|s| src.get(..s.start).unwrap_or(src).matches('\n').count() + 1);
            bad(match line {
                Some(l) => format!("line {l}: {}", e.message().trim()),
                None => e.message().trim().to_string(),
            })
        })?;
        if file.version != GATE_VERSION {
            return Err(bad(format!(
                "unsupported gate file version {} (this build reads {GATE_VERSION})",
                file.version
            )));
        }
        if file.gates.is_empty() {
            return Err(bad("no [[gate]] entries".into()));
        }
        let base_dir = path.parent().unwrap_or(Path::new("."));
        let mut baselines: Vec<(PathBuf, Summary)> = Vec::new();
        for (i, g) in file.gates.iter().enumerate() {
            let which = format!("gate {} ({})", i + 1, gate_name(g));
            let bounds = [g.max, g.min, g.max_regression];
            if bounds.iter().flatten().count() != 1 {
                return Err(bad(format!(
                    "{which}: give exactly one of `max`, `min`, `max_regression`"
                )));
            }
            if bounds.iter().flatten().any(|v| !v.is_finite()) {
                return Err(bad(format!("{which}: the bound must be a finite number")));
            }
            if g.max_regression.is_some_and(|m| m < 0.0) {
                return Err(bad(format!("{which}: `max_regression` must be >= 0")));
            }
            if g.dataset.trim().is_empty() {
                return Err(bad(format!("{which}: empty `dataset`")));
            }
            if g.baseline.is_some() && g.max_regression.is_none() {
                return Err(bad(format!(
                    "{which}: `baseline` is only used with `max_regression`"
                )));
            }
            if g.max_regression.is_some() {
                let Some(rel) = g.baseline.as_ref().or(file.baseline.as_ref()) else {
                    return Err(bad(format!(
                        "{which}: `max_regression` needs a `baseline` (in the gate or at the top)"
                    )));
                };
                let p = base_dir.join(rel);
                if !baselines.iter().any(|(q, _)| *q == p) {
                    let s = read_summary(&p)?;
                    baselines.push((p, s));
                }
            }
        }
        Ok(GateSet {
            path: path.to_path_buf(),
            file,
            baselines,
        })
    }

    /// Checks every gate against a run's summary: one result per gate and configuration.
    pub fn check(&self, summary: &Summary) -> Vec<GateResult> {
        let base_dir = self.path.parent().unwrap_or(Path::new("."));
        let mut out = Vec::new();
        for g in &self.file.gates {
            let name = gate_name(g);
            let configs: Vec<String> = match &g.config {
                Some(c) => vec![c.clone()],
                None => summary.configs.iter().map(|c| c.name.clone()).collect(),
            };
            for config in configs {
                let what = format!("{} on {} [{config}]", g.metric.name(), g.dataset);
                let fail = |detail: String| GateResult {
                    name: name.clone(),
                    config: config.clone(),
                    passed: false,
                    detail,
                };
                let Some(report) = summary.report(&g.dataset, &config) else {
                    out.push(fail(format!("{what}: not evaluated in this run")));
                    continue;
                };
                let Some(value) = report.metric(g.metric) else {
                    out.push(fail(format!("{what}: undefined in this run")));
                    continue;
                };
                let v = g.metric.show(value);
                let (passed, detail) = if let Some(max) = g.max {
                    (
                        value <= max,
                        format!(
                            "{what} = {v} {} {}",
                            if value <= max { "<=" } else { ">" },
                            g.metric.show(max)
                        ),
                    )
                } else if let Some(min) = g.min {
                    (
                        value >= min,
                        format!(
                            "{what} = {v} {} {}",
                            if value >= min { ">=" } else { "<" },
                            g.metric.show(min)
                        ),
                    )
                } else if let Some(margin) = g.max_regression {
                    let rel = g.baseline.as_ref().or(self.file.baseline.as_ref());
                    let base = rel.and_then(|r| {
                        let p = base_dir.join(r);
                        self.baselines.iter().find(|(q, _)| *q == p).map(|(_, s)| s)
                    });
                    let Some(bv) = base
                        .and_then(|b| b.report(&g.dataset, &config))
                        .and_then(|r| r.metric(g.metric))
                    else {
                        out.push(fail(format!(
                            "{what} = {v}: the baseline has no defined value to compare with"
                        )));
                        continue;
                    };
                    // A small epsilon absorbs float noise in values that are equal.
                    let worse_by = if g.metric.higher_is_better() {
                        bv - value
                    } else {
                        value - bv
                    };
                    let ok = worse_by <= margin + 1e-12;
                    (
                        ok,
                        format!(
                            "{what} = {v}, baseline {} (allowed regression {}){}",
                            g.metric.show(bv),
                            g.metric.show(margin),
                            if ok { "" } else { ": regressed" }
                        ),
                    )
                } else {
                    // Unreachable after validation; fail rather than pass.
                    (false, format!("{what}: no bound"))
                };
                out.push(GateResult {
                    name: name.clone(),
                    config,
                    passed,
                    detail,
                });
            }
        }
        out
    }
}

fn gate_name(g: &Gate) -> String {
    if let Some(n) = &g.name {
        return n.clone();
    }
    let kind = if g.max.is_some() {
        "max"
    } else if g.min.is_some() {
        "min"
    } else {
        "no regression of"
    };
    format!("{kind} {} on {}", g.metric.name(), g.dataset)
}

/// Reads a summary JSON (a baseline).
pub fn read_summary(path: &Path) -> Result<Summary, EvalError> {
    let src = std::fs::read_to_string(path).map_err(|e| EvalError::io(path, e))?;
    serde_json::from_str(&src).map_err(|e| EvalError::Json {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}
