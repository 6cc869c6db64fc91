//! The measured part of the report: detection on the attack sets the notes name as evidence,
//! false positives on their benign sets, with the rules-only and the default pipeline.

use super::OwaspError;
use super::notes::{Notes, split_evidence};
use rampart_core::{Action, Owasp, Pipeline, ScanRequest};
use rampart_datasets::Label;
use rampart_rules::RulePack;
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The measured pipelines, in report order: their names and what they are.
pub const MEASURED: [(&str, &str); 2] = [
    (
        "rules",
        "the embedded default rule pack alone (`rampart eval --config configs/rules.toml`)",
    ),
    (
        "default",
        "the binary's default pipeline, rules + linear (`rampart eval`)",
    ),
];

/// The pipelines [`MEASURED`] describes.
#[derive(Debug, Clone, Copy)]
pub struct MeasuredPipelines<'a> {
    /// The embedded default rule pack alone; its findings are mapped to risks.
    pub rules: &'a Pipeline,
    /// The product's default pipeline.
    pub default: &'a Pipeline,
}

impl<'a> MeasuredPipelines<'a> {
    fn in_order(&self) -> [&'a Pipeline; 2] {
        [self.rules, self.default]
    }
}

/// Detection on one evidence set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetResult {
    /// `DATASET:CATEGORY`.
    pub set: String,
    /// Attack rows in it.
    pub n: usize,
    /// Flagged (SANITIZE or BLOCK) per measured pipeline, in [`MEASURED`] order.
    pub flagged: Vec<usize>,
    /// Rows where the rules pipeline found a rule of the risk (per risk id).
    pub by_risk_rules: BTreeMap<Owasp, usize>,
}

/// False positives on one benign set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenignResult {
    /// The dataset.
    pub set: String,
    /// Benign rows.
    pub n: usize,
    /// Flagged per measured pipeline.
    pub flagged: Vec<usize>,
}

/// What the built-in sets measured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Measured {
    /// Attack sets, by `DATASET:CATEGORY`.
    pub sets: BTreeMap<String, SetResult>,
    /// Benign sets.
    pub benign: Vec<BenignResult>,
}

/// Scans the notes' evidence sets and benign sets (loaded from `data_dir` when not built
/// in) with the measured pipelines. The rule ids the rules pipeline finds are mapped to risks
/// through the rules of `packs` that come from the embedded default pack.
pub fn measure(
    notes: &Notes,
    packs: &[RulePack],
    pipelines: &MeasuredPipelines<'_>,
    data_dir: &Path,
) -> Result<Measured, OwaspError> {
    let rule_owasp: BTreeMap<&str, &[Owasp]> = packs
        .iter()
        .filter(|p| p.origin == rampart_rules::DEFAULT_PACK_ORIGIN)
        .flat_map(|p| p.rules.iter().map(|r| (r.id.as_str(), r.owasp.as_slice())))
        .collect();
    let pipelines = pipelines.in_order();
    let mut wanted: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in &notes.risks {
        for e in &r.evidence {
            if let Some((d, c)) = split_evidence(e) {
                wanted.entry(d).or_default().insert(c);
            }
        }
    }
    let mut out = Measured::default();
    for (dataset, categories) in wanted {
        let loaded = load(dataset, data_dir, "evidence")?;
        for category in categories {
            let rows: Vec<ScanRequest> = loaded
                .records
                .iter()
                .filter(|r| r.label == Label::Attack && r.category.as_deref() == Some(category))
                .map(|r| r.to_request())
                .collect();
            let set = format!("{dataset}:{category}");
            if rows.is_empty() {
                return Err(OwaspError::NoEvidenceRows { set });
            }
            let results = scan_all(&pipelines, &rows)?;
            let mut by_risk_rules: BTreeMap<Owasp, usize> = BTreeMap::new();
            for row in &results {
                let risks: BTreeSet<Owasp> = row
                    .rule_ids
                    .iter()
                    .filter_map(|id| rule_owasp.get(id.as_str()))
                    .flat_map(|o| o.iter())
                    .copied()
                    .collect();
                for o in risks {
                    *by_risk_rules.entry(o).or_default() += 1;
                }
            }
            out.sets.insert(
                set.clone(),
                SetResult {
                    set,
                    n: rows.len(),
                    flagged: count_flagged(&results, pipelines.len()),
                    by_risk_rules,
                },
            );
        }
    }
    for dataset in &notes.benign {
        let loaded = load(dataset, data_dir, "benign")?;
        let rows: Vec<ScanRequest> = loaded
            .records
            .iter()
            .filter(|r| r.label == Label::Benign && r.turns.is_none())
            .map(|r| r.to_request())
            .collect();
        let results = scan_all(&pipelines, &rows)?;
        out.benign.push(BenignResult {
            set: dataset.clone(),
            n: rows.len(),
            flagged: count_flagged(&results, pipelines.len()),
        });
    }
    Ok(out)
}

fn load(
    dataset: &str,
    data_dir: &Path,
    role: &'static str,
) -> Result<rampart_datasets::LoadedDataset, OwaspError> {
    rampart_datasets::load(dataset, data_dir).map_err(|source| OwaspError::Load {
        role,
        dataset: dataset.to_owned(),
        source,
    })
}

/// What the measured pipelines made of one row.
struct RowResult {
    /// Flagged, per pipeline.
    flagged: Vec<bool>,
    /// The rule ids the rules pipeline found.
    rule_ids: Vec<String>,
}

/// Scans every row with every pipeline.
fn scan_all(pipelines: &[&Pipeline], rows: &[ScanRequest]) -> Result<Vec<RowResult>, OwaspError> {
    rows.par_iter()
        .map(|req| {
            let mut flagged = Vec::with_capacity(pipelines.len());
            let mut ids = Vec::new();
            for (i, p) in pipelines.iter().enumerate() {
                let outcome = p.scan(req).map_err(|source| OwaspError::Scan { source })?;
                flagged.push(outcome.decision.action != Action::Allow);
                if i == 0 {
                    ids = outcome
                        .decision
                        .findings
                        .iter()
                        .map(|f| f.rule_id.clone())
                        .collect();
                }
            }
            Ok(RowResult {
                flagged,
                rule_ids: ids,
            })
        })
        .collect()
}

fn count_flagged(results: &[RowResult], n: usize) -> Vec<usize> {
    (0..n)
        .map(|i| results.iter().filter(|r| r.flagged[i]).count())
        .collect()
}
