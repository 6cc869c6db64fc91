//! `rampart owasp`: the OWASP Top 10 for LLM Applications (2025) report,
//! `docs/reports/OWASP_LLM_Top10.md`.
//!
//! It combines what is computed with what is written by hand:
//! - computed: which rules of the shipped packs carry each id (`owasp = [...]` in the packs),
//!   which layer kinds and capabilities address it (`Registry::owasp`), detection and
//!   false-positive rates of the rules-only and the default pipeline on the built-in sets
//!   (the attack categories the notes name as evidence), and, with `--matrix`, the red-team
//!   coverage matrix of `rampart redteam report`;
//! - written: the coverage claim, threat model, residual risk and scope of each risk, in
//!   `docs/reports/owasp_notes.toml` (embedded; `--notes` reads another file).
//!
//! The report is deterministic apart from its date line, and names the command that made it.

use anyhow::{Context, Result, bail};
use clap::Args;
use rampart_core::{Action, Capability, Owasp, Pipeline, Protection, ScanRequest};
use rampart_datasets::Label;
use rampart_rules::RulePack;
use rayon::prelude::*;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The embedded notes.
pub const NOTES_SRC: &str = include_str!("../../../docs/reports/owasp_notes.toml");
const NOTES_ORIGIN: &str = "<embedded>/docs/reports/owasp_notes.toml";
/// Where the notes live in the repository (named in the report).
const NOTES_PATH: &str = "docs/reports/owasp_notes.toml";
/// The only version of the notes and of the coverage matrix this command reads.
const NOTES_VERSION: u32 = 1;
const MATRIX_VERSION: u32 = 1;
/// A family under this TPR is counted as a blind spot in the matrix summary (the issue's
/// target for the fused pipeline).
const FAMILY_FLOOR: f64 = 0.8;

/// `rampart owasp` options.
#[derive(Debug, Args)]
pub struct OwaspArgs {
    /// The red-team coverage matrix (`rampart redteam report`'s coverage_matrix.json), cited
    /// as evidence where the notes say so.
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// Write the report to FILE (default: standard output).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Hand-written notes (TOML). Default: the embedded docs/reports/owasp_notes.toml.
    #[arg(long, value_name = "FILE")]
    pub notes: Option<PathBuf>,
    /// Do not scan the built-in datasets (faster; the report then has no measured rates).
    #[arg(long)]
    pub no_measure: bool,
}

/// A coverage level. Ordered: none < partial < full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Nothing in Rampart addresses the risk.
    None,
    /// Some vectors are addressed, others are not.
    Partial,
    /// The vectors in scope are addressed and the measured rates meet the bar.
    Full,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Partial => "partial",
            Level::Full => "full",
        }
    }
}

/// The notes file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notes {
    version: u32,
    /// Benign datasets for the false-positive rates.
    #[serde(default)]
    benign: Vec<String>,
    risks: Vec<RiskNotes>,
    changes_2023: Changes2023,
}

/// The hand-written part of one risk.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RiskNotes {
    id: Owasp,
    claim: Level,
    /// A measured rate under this lowers a full claim to partial.
    min_tpr: Option<f64>,
    why: String,
    #[serde(default)]
    evidence: Vec<String>,
    #[serde(default)]
    matrix: bool,
    #[serde(default)]
    cited: Vec<Cited>,
    residual: String,
    out_of_scope: String,
    threat_model: Option<ThreatModel>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cited {
    figure: String,
    command: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThreatModel {
    vectors: String,
    mitigation: String,
    detection: String,
    response: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Changes2023 {
    intro: String,
    rows: Vec<Row2023>,
    #[serde(default)]
    new_in_2025: Vec<New2025>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row2023 {
    id_2023: String,
    name_2023: String,
    now: Vec<Owasp>,
    note: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct New2025 {
    id: Owasp,
    note: String,
}

impl Notes {
    /// Parses and checks the notes: version 1, each of the ten risks exactly once, a threat
    /// model for every risk claimed as covered, evidence written `DATASET:CATEGORY`.
    pub fn parse(src: &str, origin: &str) -> Result<Notes> {
        let notes: Notes = toml::from_str(src).with_context(|| origin.to_string())?;
        if notes.version != NOTES_VERSION {
            bail!(
                "{origin}: version {} (this rampart reads version {NOTES_VERSION})",
                notes.version
            );
        }
        for o in Owasp::ALL {
            let n = notes.risks.iter().filter(|r| r.id == o).count();
            if n != 1 {
                bail!("{origin}: risk {o} must appear exactly once in [[risks]], found {n}");
            }
        }
        for r in &notes.risks {
            if r.claim > Level::None && r.threat_model.is_none() {
                bail!(
                    "{origin}: risk {} claims {} coverage but has no [risks.threat_model]",
                    r.id,
                    r.claim.name()
                );
            }
            if let Some(t) = r.min_tpr
                && !(0.0..=1.0).contains(&t)
            {
                bail!("{origin}: risk {}: min_tpr must be in 0..=1, got {t}", r.id);
            }
            if let Some(e) = r.evidence.iter().find(|e| split_evidence(e).is_none()) {
                bail!(
                    "{origin}: risk {}: evidence {e:?} must be DATASET:CATEGORY",
                    r.id
                );
            }
        }
        Ok(notes)
    }

    fn risk(&self, id: Owasp) -> Option<&RiskNotes> {
        self.risks.iter().find(|r| r.id == id)
    }
}

fn split_evidence(e: &str) -> Option<(&str, &str)> {
    e.split_once(':')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
}

/// The coverage matrix `rampart redteam report` writes (version 1). Only the fields the
/// report uses are read; unknown ones are ignored (the matrix is another command's output,
/// not configuration).
#[derive(Debug, Deserialize)]
pub struct Matrix {
    version: u32,
    command: String,
    generated: String,
    seed: u64,
    #[serde(default)]
    attack_sources: Vec<String>,
    #[serde(default)]
    benign_sources: Vec<String>,
    pipelines: Vec<MatrixPipeline>,
    families: Vec<MatrixRow>,
}

#[derive(Debug, Deserialize)]
struct MatrixPipeline {
    name: String,
    #[serde(default)]
    config: String,
    status: String,
}

#[derive(Debug, Deserialize)]
struct MatrixRow {
    family: String,
    cells: BTreeMap<String, MatrixCell>,
}

#[derive(Debug, Deserialize)]
struct MatrixCell {
    tpr: Option<f64>,
    n_attack: usize,
    fpr: Option<f64>,
    n_benign: usize,
}

impl Matrix {
    /// Parses a coverage matrix.
    pub fn parse(src: &str, origin: &str) -> Result<Matrix> {
        let m: Matrix = serde_json::from_str(src).with_context(|| origin.to_string())?;
        if m.version != MATRIX_VERSION {
            bail!(
                "{origin}: coverage matrix version {} (this rampart reads version {MATRIX_VERSION})",
                m.version
            );
        }
        Ok(m)
    }

    /// Per configured pipeline: the family summary.
    fn summaries(&self) -> Vec<MatrixSummary> {
        self.pipelines
            .iter()
            .filter(|p| p.status == "ok")
            .map(|p| {
                let cells: Vec<(&str, &MatrixCell)> = self
                    .families
                    .iter()
                    .filter_map(|f| f.cells.get(&p.name).map(|c| (f.family.as_str(), c)))
                    .collect();
                let tprs: Vec<(&str, f64)> = cells
                    .iter()
                    .filter(|(_, c)| c.n_attack > 0)
                    .filter_map(|(f, c)| c.tpr.map(|t| (*f, t)))
                    .collect();
                let min = tprs
                    .iter()
                    .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)))
                    .map(|(f, t)| ((*f).to_string(), *t));
                let mean = (!tprs.is_empty())
                    .then(|| tprs.iter().map(|(_, t)| t).sum::<f64>() / tprs.len() as f64);
                let mut below: Vec<String> = tprs
                    .iter()
                    .filter(|(_, t)| *t < FAMILY_FLOOR)
                    .map(|(f, _)| (*f).to_string())
                    .collect();
                below.sort();
                let max_fpr = cells
                    .iter()
                    .filter(|(_, c)| c.n_benign > 0)
                    .filter_map(|(f, c)| c.fpr.map(|t| (*f, t)))
                    .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(a.0)))
                    .map(|(f, t)| (f.to_string(), t));
                MatrixSummary {
                    pipeline: p.name.clone(),
                    config: p.config.clone(),
                    families: tprs.len(),
                    min,
                    mean,
                    below,
                    max_fpr,
                }
            })
            .collect()
    }

    fn not_configured(&self) -> Vec<(&str, &str)> {
        self.pipelines
            .iter()
            .filter(|p| p.status != "ok")
            .map(|p| (p.name.as_str(), p.status.as_str()))
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
struct MatrixSummary {
    pipeline: String,
    config: String,
    families: usize,
    min: Option<(String, f64)>,
    mean: Option<f64>,
    below: Vec<String>,
    max_fpr: Option<(String, f64)>,
}

/// One shipped rule: its pack, id and OWASP ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleEntry {
    /// The pack's name.
    pub pack: String,
    /// The rule id.
    pub id: String,
    /// Its OWASP ids.
    pub owasp: Vec<Owasp>,
}

/// Every pack Rampart ships: the default pack, the conversation layer's history pack and the
/// relational layer's assistant-voice pack.
pub fn shipped_packs() -> Result<Vec<RulePack>> {
    let sources = [
        (
            rampart_rules::DEFAULT_PACK_SRC,
            rampart_rules::DEFAULT_PACK_ORIGIN,
        ),
        (
            rampart_conversation::HISTORY_PACK_SRC,
            rampart_conversation::HISTORY_PACK_ORIGIN,
        ),
        (
            rampart_relational::local::VOICE_PACK_SRC,
            "relational/rules/voice.toml",
        ),
    ];
    sources
        .iter()
        .map(|(src, origin)| RulePack::parse(src, origin).map_err(anyhow::Error::from))
        .collect()
}

fn rule_entries(packs: &[RulePack]) -> Vec<RuleEntry> {
    packs
        .iter()
        .flat_map(|p| {
            p.rules.iter().map(|r| RuleEntry {
                pack: p.name.clone(),
                id: r.id.clone(),
                owasp: r.owasp.clone(),
            })
        })
        .collect()
}

/// One layer kind or capability and the risks it addresses (owned, for the renderer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectionEntry {
    /// A layer kind (`Some`) or a capability.
    pub layer: Option<String>,
    /// The capability, when not a layer.
    pub capability: Option<Capability>,
    /// Its risks.
    pub owasp: Vec<Owasp>,
}

fn protections() -> Vec<ProtectionEntry> {
    rampart::registry()
        .owasp()
        .into_iter()
        .map(|e| match e.protection {
            Protection::Layer(kind) => ProtectionEntry {
                layer: Some(kind.to_string()),
                capability: None,
                owasp: e.owasp,
            },
            Protection::Capability(c) => ProtectionEntry {
                layer: None,
                capability: Some(c),
                owasp: e.owasp,
            },
        })
        .collect()
}

/// The measured pipelines, in report order.
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

/// Scans the notes' evidence sets and benign sets with the measured pipelines.
fn measure(notes: &Notes, rule_owasp: &BTreeMap<String, Vec<Owasp>>) -> Result<Measured> {
    let rules = rampart_rules::rules_pipeline().context("building the rules-only pipeline")?;
    let default = Pipeline::from_config_with(crate::default_config()?, &rampart::registry())
        .context("building the default pipeline")?;
    let pipelines = [&rules, &default];
    let data_dir = rampart_datasets::default_data_dir();
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
        let loaded = rampart_datasets::load(dataset, &data_dir)
            .with_context(|| format!("loading evidence dataset {dataset}"))?;
        for category in categories {
            let rows: Vec<ScanRequest> = loaded
                .records
                .iter()
                .filter(|r| r.label == Label::Attack && r.category.as_deref() == Some(category))
                .map(|r| r.to_request())
                .collect();
            if rows.is_empty() {
                bail!("evidence {dataset}:{category}: no attack rows of that category");
            }
            let results = scan_all(&pipelines, &rows)?;
            let mut by_risk_rules: BTreeMap<Owasp, usize> = BTreeMap::new();
            for (_, rule_ids) in &results {
                let risks: BTreeSet<Owasp> = rule_ids
                    .iter()
                    .filter_map(|id| rule_owasp.get(id))
                    .flatten()
                    .copied()
                    .collect();
                for o in risks {
                    *by_risk_rules.entry(o).or_default() += 1;
                }
            }
            let set = format!("{dataset}:{category}");
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
        let loaded = rampart_datasets::load(dataset, &data_dir)
            .with_context(|| format!("loading benign dataset {dataset}"))?;
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

/// Per row: flagged per pipeline, and the rule ids the rules pipeline found.
fn scan_all(
    pipelines: &[&Pipeline],
    rows: &[ScanRequest],
) -> Result<Vec<(Vec<bool>, Vec<String>)>> {
    rows.par_iter()
        .map(|req| {
            let mut flagged = Vec::with_capacity(pipelines.len());
            let mut ids = Vec::new();
            for (i, p) in pipelines.iter().enumerate() {
                let outcome = p.scan(req).context("scanning an evidence row")?;
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
            Ok((flagged, ids))
        })
        .collect()
}

fn count_flagged(results: &[(Vec<bool>, Vec<String>)], n: usize) -> Vec<usize> {
    (0..n)
        .map(|i| results.iter().filter(|(f, _)| f[i]).count())
        .collect()
}

/// Everything the report is made of.
pub struct Inputs<'a> {
    /// The hand-written notes.
    pub notes: &'a Notes,
    /// Every shipped rule.
    pub rules: &'a [RuleEntry],
    /// Layer kinds and capabilities.
    pub protections: &'a [ProtectionEntry],
    /// Measured figures, when measured.
    pub measured: Option<&'a Measured>,
    /// The coverage matrix, when given.
    pub matrix: Option<&'a Matrix>,
    /// The command line that made the report.
    pub command: &'a str,
    /// The date (YYYY-MM-DD): the only part that changes from run to run.
    pub date: &'a str,
}

/// The coverage of one risk and why it is not the claim, when lowered.
fn coverage(inputs: &Inputs<'_>, id: Owasp) -> (Level, Option<String>) {
    let Some(notes) = inputs.notes.risk(id) else {
        return (Level::None, None);
    };
    let addressed = inputs.rules.iter().any(|r| r.owasp.contains(&id))
        || inputs.protections.iter().any(|p| p.owasp.contains(&id));
    if !addressed {
        let why = (notes.claim > Level::None).then(|| {
            format!(
                "claimed {}, but no rule, layer or capability carries {id}",
                notes.claim.name()
            )
        });
        return (Level::None, why);
    }
    if notes.claim == Level::Full
        && let Some(min) = notes.min_tpr
    {
        let mut under = Vec::new();
        if let Some(m) = inputs.measured {
            let default = MEASURED.len() - 1;
            for e in &notes.evidence {
                if let Some(s) = m.sets.get(e)
                    && s.n > 0
                    && (s.flagged[default] as f64 / s.n as f64) < min
                {
                    under.push(format!("{e} ({})", pct(s.flagged[default], s.n)));
                }
            }
        }
        if notes.matrix
            && let Some(m) = inputs.matrix
            && let Some(best) = strongest(&m.summaries())
            && let Some((family, tpr)) = &best.min
            && *tpr < min
        {
            under.push(format!(
                "red-team family {family} on {} ({:.1} %)",
                best.pipeline,
                tpr * 100.0
            ));
        }
        if !under.is_empty() {
            return (
                Level::Partial,
                Some(format!(
                    "claimed full, lowered: under the {:.0} % bar: {}",
                    min * 100.0,
                    under.join("; ")
                )),
            );
        }
    }
    if notes.claim == Level::None {
        return (
            Level::Partial,
            Some(format!("claimed none, but parts of Rampart carry {id}")),
        );
    }
    (notes.claim, None)
}

/// The configured pipeline with the highest mean family TPR (ties: name).
fn strongest(summaries: &[MatrixSummary]) -> Option<&MatrixSummary> {
    summaries
        .iter()
        .filter(|s| s.mean.is_some())
        .max_by(|a, b| {
            a.mean
                .unwrap_or(0.0)
                .total_cmp(&b.mean.unwrap_or(0.0))
                .then(b.pipeline.cmp(&a.pipeline))
        })
}

fn pct(k: usize, n: usize) -> String {
    if n == 0 {
        "n/a".into()
    } else {
        format!("{:.1} %", k as f64 * 100.0 / n as f64)
    }
}

/// Rule ids, compact: per prefix, runs of consecutive numbers as ranges
/// (`CTRL_001–065, SYS_015–020, SYS_027`).
pub fn compact_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> String {
    let mut by_prefix: BTreeMap<&str, BTreeSet<(u32, usize)>> = BTreeMap::new();
    let mut odd: BTreeSet<&str> = BTreeSet::new();
    for id in ids {
        match id.split_once('_') {
            Some((p, n)) if n.bytes().all(|b| b.is_ascii_digit()) => match n.parse::<u32>() {
                Ok(v) => {
                    by_prefix.entry(p).or_default().insert((v, n.len()));
                }
                Err(_) => {
                    odd.insert(id);
                }
            },
            _ => {
                odd.insert(id);
            }
        }
    }
    let mut parts = Vec::new();
    for (prefix, nums) in by_prefix {
        let nums: Vec<(u32, usize)> = nums.into_iter().collect();
        let mut i = 0;
        while i < nums.len() {
            let mut j = i;
            while j + 1 < nums.len() && nums[j + 1].0 == nums[j].0 + 1 {
                j += 1;
            }
            let (a, wa) = nums[i];
            let (b, wb) = nums[j];
            if i == j {
                parts.push(format!("{prefix}_{a:0wa$}"));
            } else {
                parts.push(format!("{prefix}_{a:0wa$}–{b:0wb$}"));
            }
            i = j + 1;
        }
    }
    parts.extend(odd.into_iter().map(str::to_string));
    parts.join(", ")
}

fn layers_for(inputs: &Inputs<'_>, id: Owasp) -> Vec<String> {
    inputs
        .protections
        .iter()
        .filter(|p| p.owasp.contains(&id))
        .filter_map(|p| p.layer.as_ref().map(|l| format!("`{l}`")))
        .collect()
}

fn capabilities_for(inputs: &Inputs<'_>, id: Owasp) -> Vec<Capability> {
    inputs
        .protections
        .iter()
        .filter(|p| p.owasp.contains(&id))
        .filter_map(|p| p.capability)
        .collect()
}

fn rules_for<'a>(inputs: &'a Inputs<'_>, id: Owasp) -> Vec<&'a RuleEntry> {
    inputs
        .rules
        .iter()
        .filter(|r| r.owasp.contains(&id))
        .collect()
}

fn or_none(v: Vec<String>) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The report, as Markdown.
pub fn render(inputs: &Inputs<'_>) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail; `let _` keeps the renderer free of unwraps.
    let w = &mut s;
    let _ = writeln!(
        w,
        "# OWASP Top 10 for LLM Applications (2025): Rampart's coverage\n"
    );
    let _ = writeln!(
        w,
        "Generated by `{}` on {}. Do not edit: the coverage claims, threat models, residual \
         risks and scope come from `{NOTES_PATH}`; the rules, layers, capabilities and measured \
         figures are computed (rule packs' `owasp` ids, the layer registry, scans of the \
         built-in sets, the red-team coverage matrix). Regenerate after changing rules, \
         layers or the notes.\n",
        inputs.command, inputs.date
    );
    let _ = writeln!(
        w,
        "Coverage: **full**: the vectors in scope are addressed and the measured rates meet \
         the bar; **partial**: some vectors are addressed, others are not (see residual risk); \
         **none**: nothing in Rampart addresses the risk (see out of scope). A claim in the \
         notes is lowered to none when no rule, layer or capability carries the id, and from \
         full to partial when a measured rate is under the bar.\n"
    );
    let _ = writeln!(w, "## Summary\n");
    let _ = writeln!(
        w,
        "| id | risk | coverage | rules | layers | other capabilities |\n|---|---|---|---:|---|---|"
    );
    for id in Owasp::ALL {
        let (level, _) = coverage(inputs, id);
        let caps: Vec<String> = capabilities_for(inputs, id)
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        let _ = writeln!(
            w,
            "| {id} | {} | {} | {} | {} | {} |",
            id.title(),
            level.name(),
            rules_for(inputs, id).len(),
            or_none(layers_for(inputs, id)),
            or_none(caps)
        );
    }
    let _ = writeln!(w);
    render_measurement(inputs, w);
    for id in Owasp::ALL {
        render_risk(inputs, id, w);
    }
    render_2023(inputs, w);
    s
}

fn render_measurement(inputs: &Inputs<'_>, w: &mut String) {
    let _ = writeln!(w, "## How the evidence was measured\n");
    match inputs.measured {
        Some(m) => {
            let _ = writeln!(
                w,
                "Attack rows of the built-in sets, by category (the notes name which categories \
                 exercise which risk), scanned with two pipelines. A row counts as detected when \
                 the decision is SANITIZE or BLOCK, as in `rampart eval`.\n"
            );
            for (name, what) in MEASURED {
                let _ = writeln!(w, "- `{name}`: {what}");
            }
            let _ = writeln!(
                w,
                "\nFalse-positive rate of the same pipelines on the benign rows:\n"
            );
            let _ = writeln!(
                w,
                "| benign set | rows | {} |\n|---|---:|{}",
                MEASURED.map(|(n, _)| format!("`{n}` FPR")).join(" | "),
                "---:|".repeat(MEASURED.len())
            );
            for b in &m.benign {
                let rates: Vec<String> = b.flagged.iter().map(|&k| pct(k, b.n)).collect();
                let _ = writeln!(w, "| {} | {} | {} |", b.set, b.n, rates.join(" | "));
            }
            let _ = writeln!(w);
        }
        None => {
            let _ = writeln!(
                w,
                "The built-in sets were not scanned for this report (`--no-measure`): no \
                 measured detection rates below.\n"
            );
        }
    }
    match inputs.matrix {
        Some(m) => {
            let _ = writeln!(
                w,
                "Red-team coverage matrix: `{}` (generated {}, seed {}; attacks {}; benign {}). \
                 Each family's TPR is over mutated attack prompts, its FPR over the same \
                 transforms applied to benign prompts. Blind spot: a family under {:.0} % TPR.\n",
                m.command,
                m.generated,
                m.seed,
                or_none(m.attack_sources.clone()),
                or_none(m.benign_sources.clone()),
                FAMILY_FLOOR * 100.0
            );
            for (name, status) in m.not_configured() {
                let _ = writeln!(w, "- pipeline `{name}`: {status}");
            }
            if !m.not_configured().is_empty() {
                let _ = writeln!(w);
            }
        }
        None => {
            let _ = writeln!(
                w,
                "No red-team coverage matrix was given (`--matrix`, from `rampart redteam \
                 report`).\n"
            );
        }
    }
}

fn render_risk(inputs: &Inputs<'_>, id: Owasp, w: &mut String) {
    let _ = writeln!(w, "## {id}: {}\n", id.title());
    let (level, lowered) = coverage(inputs, id);
    let Some(notes) = inputs.notes.risk(id) else {
        return;
    };
    let _ = writeln!(w, "**Coverage: {}.** {}", level.name(), notes.why);
    if let Some(l) = lowered {
        let _ = writeln!(w, "({l}.)");
    }
    let _ = writeln!(w);
    let rules = rules_for(inputs, id);
    let mut packs: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in &rules {
        packs.entry(&r.pack).or_default().push(&r.id);
    }
    let by_pack: Vec<String> = packs
        .iter()
        .map(|(p, ids)| {
            format!(
                "`{p}` ({}): {}",
                ids.len(),
                compact_ids(ids.iter().copied())
            )
        })
        .collect();
    let _ = writeln!(
        w,
        "- **Rules ({}):** {}",
        rules.len(),
        if by_pack.is_empty() {
            "none".into()
        } else {
            by_pack.join("; ")
        }
    );
    let _ = writeln!(w, "- **Layers:** {}", or_none(layers_for(inputs, id)));
    let caps: Vec<String> = capabilities_for(inputs, id)
        .iter()
        .map(|c| format!("{} ({})", c.name(), c.location()))
        .collect();
    let _ = writeln!(w, "- **Other capabilities:** {}\n", or_none(caps));

    let measured_rows: Vec<&SetResult> = inputs
        .measured
        .map(|m| {
            notes
                .evidence
                .iter()
                .filter_map(|e| m.sets.get(e))
                .collect()
        })
        .unwrap_or_default();
    let summaries = if notes.matrix {
        inputs.matrix.map(Matrix::summaries).unwrap_or_default()
    } else {
        Vec::new()
    };
    if !measured_rows.is_empty() || !summaries.is_empty() || !notes.cited.is_empty() {
        let _ = writeln!(w, "**Measured evidence**\n");
    }
    if !measured_rows.is_empty() {
        let _ = writeln!(
            w,
            "| attack set | rows | {} | a rule carrying {id} fired (`rules`) |\n|---|---:|{}---:|",
            MEASURED.map(|(n, _)| format!("`{n}`")).join(" | "),
            "---:|".repeat(MEASURED.len())
        );
        let mut n = 0;
        let mut total = vec![0; MEASURED.len()];
        let mut own = 0;
        for r in &measured_rows {
            let rates: Vec<String> = r.flagged.iter().map(|&k| pct(k, r.n)).collect();
            let by = r.by_risk_rules.get(&id).copied().unwrap_or(0);
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} |",
                r.set,
                r.n,
                rates.join(" | "),
                pct(by, r.n)
            );
            n += r.n;
            own += by;
            for (t, k) in total.iter_mut().zip(&r.flagged) {
                *t += k;
            }
        }
        if measured_rows.len() > 1 {
            let rates: Vec<String> = total.iter().map(|&k| pct(k, n)).collect();
            let _ = writeln!(
                w,
                "| **all** | {n} | {} | {} |",
                rates.join(" | "),
                pct(own, n)
            );
        }
        let _ = writeln!(w);
    } else if !notes.evidence.is_empty() && inputs.measured.is_none() {
        let _ = writeln!(
            w,
            "Evidence sets (not measured for this report): {}.\n",
            notes.evidence.join(", ")
        );
    }
    if !summaries.is_empty() {
        let _ = writeln!(
            w,
            "Red-team matrix, per pipeline:\n\n| pipeline | families | mean TPR | lowest TPR | families under {:.0} % | highest benign FPR |\n|---|---:|---:|---|---|---|",
            FAMILY_FLOOR * 100.0
        );
        for m in &summaries {
            let lowest = m
                .min
                .as_ref()
                .map_or("n/a".into(), |(f, t)| format!("{f} {:.1} %", t * 100.0));
            let fpr = m
                .max_fpr
                .as_ref()
                .map_or("n/a".into(), |(f, t)| format!("{f} {:.1} %", t * 100.0));
            let _ = writeln!(
                w,
                "| `{}`{} | {} | {} | {} | {} | {} |",
                m.pipeline,
                if m.config.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", m.config)
                },
                m.families,
                m.mean
                    .map_or("n/a".into(), |t| format!("{:.1} %", t * 100.0)),
                lowest,
                if m.below.is_empty() {
                    "none".into()
                } else {
                    m.below.join(", ")
                },
                fpr
            );
        }
        let _ = writeln!(w);
    }
    for c in &notes.cited {
        let _ = writeln!(w, "- {} (`{}`)", c.figure, c.command);
    }
    if !notes.cited.is_empty() {
        let _ = writeln!(w);
    }
    if level > Level::None
        && let Some(t) = &notes.threat_model
    {
        let _ = writeln!(w, "**Threat model**\n");
        let _ = writeln!(w, "- *Vectors:* {}", t.vectors);
        let _ = writeln!(w, "- *Mitigation:* {}", t.mitigation);
        let _ = writeln!(w, "- *Detection:* {}", t.detection);
        let _ = writeln!(w, "- *Response:* {}\n", t.response);
    }
    let _ = writeln!(w, "**Residual risk.** {}\n", notes.residual);
    let _ = writeln!(w, "**Out of scope.** {}\n", notes.out_of_scope);
}

fn render_2023(inputs: &Inputs<'_>, w: &mut String) {
    let c = &inputs.notes.changes_2023;
    let _ = writeln!(w, "## The 2023 list and the 2025 list\n");
    let _ = writeln!(w, "{}\n", c.intro);
    let _ = writeln!(w, "| 2023 | 2023 name | 2025 | note |\n|---|---|---|---|");
    for r in &c.rows {
        let now: Vec<String> = r.now.iter().map(|o| format!("{o} {}", o.title())).collect();
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} |",
            r.id_2023,
            r.name_2023,
            now.join(", "),
            r.note
        );
    }
    let _ = writeln!(w);
    for n in &c.new_in_2025 {
        let _ = writeln!(w, "- **{} {}**: {}", n.id, n.id.title(), n.note);
    }
    if !c.new_in_2025.is_empty() {
        let _ = writeln!(w);
    }
}

fn command_line(args: &OwaspArgs) -> String {
    let mut c = String::from("rampart owasp");
    if let Some(m) = &args.matrix {
        let _ = write!(c, " --matrix {}", m.display());
    }
    if let Some(n) = &args.notes {
        let _ = write!(c, " --notes {}", n.display());
    }
    if args.no_measure {
        c.push_str(" --no-measure");
    }
    if let Some(o) = &args.out {
        let _ = write!(c, " --out {}", o.display());
    }
    c
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Runs `rampart owasp`.
pub fn run(args: &OwaspArgs) -> Result<u8> {
    let notes = match &args.notes {
        Some(p) => Notes::parse(&read(p)?, &p.display().to_string())?,
        None => Notes::parse(NOTES_SRC, NOTES_ORIGIN)?,
    };
    let matrix = match &args.matrix {
        Some(p) => Some(Matrix::parse(&read(p)?, &p.display().to_string())?),
        None => None,
    };
    let packs = shipped_packs()?;
    let rules = rule_entries(&packs);
    let rule_owasp: BTreeMap<String, Vec<Owasp>> = packs
        .iter()
        .filter(|p| p.origin == rampart_rules::DEFAULT_PACK_ORIGIN)
        .flat_map(|p| p.rules.iter().map(|r| (r.id.clone(), r.owasp.clone())))
        .collect();
    let protections = protections();
    let measured = if args.no_measure {
        None
    } else {
        Some(measure(&notes, &rule_owasp)?)
    };
    let now = rampart_core::timefmt::now_rfc3339();
    let date = now.get(..10).unwrap_or(&now);
    let command = command_line(args);
    let report = render(&Inputs {
        notes: &notes,
        rules: &rules,
        protections: &protections,
        measured: measured.as_ref(),
        matrix: matrix.as_ref(),
        command: &command,
        date,
    });
    match &args.out {
        Some(p) => {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(p, &report).with_context(|| format!("writing {}", p.display()))?;
            eprintln!("rampart owasp: wrote {}", p.display());
        }
        None => out!("{report}")?,
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

    use super::*;

    /// A coverage matrix in `rampart redteam report`'s schema (COMMON22: version 1).
    fn matrix_json(low_tpr: f64) -> String {
        format!(
            r#"{{"version": 1, "command": "rampart redteam report --seed 22", "generated": "2026-11-26T12:00:00Z", "seed": 22,
 "attack_sources": ["Handwritten_Attacks_v1:eval"], "benign_sources": ["Clean_Benign_Corpus_v1:eval"],
 "pipelines": [{{"name": "rules", "config": "configs/rules.toml", "status": "ok"}},
               {{"name": "fused", "config": "configs/fused.toml", "status": "ok"}},
               {{"name": "judge", "config": "configs/judge.toml", "status": "not_configured: no judge model"}}],
 "families": [
  {{"family": "encoding", "n_attack": 100, "n_benign": 50, "skipped": 0,
    "cells": {{"rules": {{"tpr": 0.5, "tp": 50, "n_attack": 100, "fpr": 0.02, "fp": 1, "n_benign": 50}},
               "fused": {{"tpr": {low_tpr}, "tp": 41, "n_attack": 100, "fpr": 0.0, "fp": 0, "n_benign": 50}}}}}},
  {{"family": "unicode", "n_attack": 100, "n_benign": 50, "skipped": 3,
    "cells": {{"rules": {{"tpr": 0.9, "tp": 90, "n_attack": 100, "fpr": 0.0, "fp": 0, "n_benign": 50}},
               "fused": {{"tpr": 0.99, "tp": 99, "n_attack": 100, "fpr": 0.04, "fp": 2, "n_benign": 50}}}}}}],
 "transforms": []}}"#
        )
    }

    fn measured() -> Measured {
        let mut m = Measured::default();
        let set = "Handwritten_Attacks_v1:system_prompt_extraction".to_string();
        m.sets.insert(
            set.clone(),
            SetResult {
                set,
                n: 12,
                flagged: vec![3, 10],
                by_risk_rules: BTreeMap::from([(Owasp::Llm01, 3), (Owasp::Llm07, 3)]),
            },
        );
        m.benign.push(BenignResult {
            set: "Clean_Benign_Corpus_v1".into(),
            n: 284,
            flagged: vec![1, 1],
        });
        m
    }

    fn report(notes: &Notes, matrix: Option<&Matrix>, date: &str) -> String {
        let rules = rule_entries(&shipped_packs().unwrap());
        let protections = protections();
        let m = measured();
        render(&Inputs {
            notes,
            rules: &rules,
            protections: &protections,
            measured: Some(&m),
            matrix,
            command: "rampart owasp --matrix fixture.json",
            date,
        })
    }

    /// The section of `report` about `id`: from its heading to the next one.
    fn section(report: &str, id: Owasp) -> String {
        let head = format!("## {id}: {}\n", id.title());
        let start = report.find(&head).unwrap();
        let rest = &report[start + head.len()..];
        let end = rest.find("\n## ").map_or(rest.len(), |i| i + 1);
        rest[..end].to_string()
    }

    fn coverage_line(report: &str, id: Owasp) -> String {
        section(report, id)
            .lines()
            .find(|l| l.starts_with("**Coverage:"))
            .unwrap()
            .to_string()
    }

    /// Every rule of every shipped pack names the OWASP risks it addresses: a rule added to
    /// any of them without `owasp` (and no pack default) fails here.
    #[test]
    fn every_rule_of_every_shipped_pack_has_an_owasp_id() {
        let packs = shipped_packs().unwrap();
        assert_eq!(packs.len(), 3);
        let missing: Vec<String> = packs
            .iter()
            .flat_map(|p| {
                p.rules
                    .iter()
                    .filter(|r| r.owasp.is_empty())
                    .map(move |r| format!("{}:{}", p.name, r.id))
            })
            .collect();
        assert!(missing.is_empty(), "rules without an OWASP id: {missing:?}");
    }

    /// The rules layer claims what its default pack's rules address, no more and no less.
    #[test]
    fn the_rules_layer_claims_the_union_of_the_default_packs_ids() {
        let union: BTreeSet<Owasp> = RulePack::default_pack()
            .unwrap()
            .rules
            .iter()
            .flat_map(|r| r.owasp.iter().copied())
            .collect();
        let rules_layer = protections()
            .into_iter()
            .find(|p| p.layer.as_deref() == Some(rampart_rules::RULES_KIND))
            .unwrap();
        assert_eq!(rules_layer.owasp, union.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn every_layer_kind_of_the_binary_addresses_something() {
        let registry = rampart::registry();
        for e in registry.owasp() {
            assert!(!e.owasp.is_empty(), "{} claims no OWASP risk", e.protection);
        }
        assert!(registry.kinds().count() >= 6);
    }

    #[test]
    fn the_embedded_notes_cover_the_ten_risks_and_the_2023_list() {
        let notes = Notes::parse(NOTES_SRC, NOTES_ORIGIN).unwrap();
        assert_eq!(notes.risks.len(), 10);
        assert_eq!(notes.changes_2023.rows.len(), 10);
    }

    #[test]
    fn notes_with_an_unknown_or_missing_risk_are_refused() {
        let bad = NOTES_SRC.replacen("id = \"LLM09\"", "id = \"LLM11\"", 1);
        let err = format!("{:#}", Notes::parse(&bad, "n.toml").unwrap_err());
        assert!(err.contains("unknown variant `LLM11`"), "{err}");
        let dup = NOTES_SRC.replacen("id = \"LLM09\"", "id = \"LLM08\"", 1);
        let err = format!("{:#}", Notes::parse(&dup, "n.toml").unwrap_err());
        assert!(err.contains("LLM08 must appear exactly once"), "{err}");
        let typo = NOTES_SRC.replacen("residual = ", "residul = ", 1);
        assert!(Notes::parse(&typo, "n.toml").is_err());
    }

    #[test]
    fn the_report_has_ten_sections_and_is_deterministic_apart_from_the_date() {
        let notes = Notes::parse(NOTES_SRC, NOTES_ORIGIN).unwrap();
        let matrix = Matrix::parse(&matrix_json(0.41), "fixture.json").unwrap();
        let a = report(&notes, Some(&matrix), "2026-11-26");
        let b = report(&notes, Some(&matrix), "2026-11-26");
        assert_eq!(a, b);
        let c = report(&notes, Some(&matrix), "2027-01-02");
        let differing: Vec<(&str, &str)> =
            a.lines().zip(c.lines()).filter(|(x, y)| x != y).collect();
        assert_eq!(differing.len(), 1, "{differing:?}");
        assert!(
            differing[0]
                .0
                .contains("rampart owasp --matrix fixture.json")
        );
        for id in Owasp::ALL {
            let s = section(&a, id);
            assert!(s.contains("**Residual risk.**"), "{id}");
            assert!(s.contains("**Out of scope.**"), "{id}");
        }
        assert!(a.contains("## The 2023 list and the 2025 list"));
        assert!(a.contains("| LLM07 | Insecure Plugin Design | LLM06 Excessive Agency |"));
    }

    #[test]
    fn coverage_levels_follow_the_claims_and_what_carries_each_id() {
        let notes = Notes::parse(NOTES_SRC, NOTES_ORIGIN).unwrap();
        let matrix = Matrix::parse(&matrix_json(0.41), "fixture.json").unwrap();
        let r = report(&notes, Some(&matrix), "2026-11-26");
        for (id, level) in [
            (Owasp::Llm01, "partial"),
            (Owasp::Llm03, "none"),
            (Owasp::Llm07, "partial"),
            (Owasp::Llm09, "none"),
            (Owasp::Llm10, "partial"),
        ] {
            assert!(
                coverage_line(&r, id).starts_with(&format!("**Coverage: {level}.**")),
                "{id}: {}",
                coverage_line(&r, id)
            );
        }
        // Covered risks have a threat model, uncovered ones none.
        assert!(section(&r, Owasp::Llm07).contains("**Threat model**"));
        assert!(!section(&r, Owasp::Llm03).contains("**Threat model**"));
        // Computed facts: the rules, layers and capabilities that carry the id.
        let llm07 = section(&r, Owasp::Llm07);
        assert!(llm07.contains("SYS_015–020"), "{llm07}");
        assert!(
            llm07.contains("canaries (") && llm07.contains("`relational`"),
            "{llm07}"
        );
        assert!(section(&r, Owasp::Llm06).contains("tool_policy ("));
        assert!(section(&r, Owasp::Llm02).contains("CRED_001–017"));
        // Measured evidence and the matrix summary, with the skipped pipeline named.
        assert!(llm07.contains(
            "| Handwritten_Attacks_v1:system_prompt_extraction | 12 | 25.0 % | 83.3 % | 25.0 % |"
        ));
        let llm01 = section(&r, Owasp::Llm01);
        assert!(
            llm01.contains("| `fused` (configs/fused.toml) | 2 | 70.0 % | encoding 41.0 % | encoding | unicode 4.0 % |"),
            "{llm01}"
        );
        assert!(r.contains("- pipeline `judge`: not_configured: no judge model"));
    }

    #[test]
    fn a_full_claim_is_lowered_by_a_weak_matrix_family_and_kept_by_a_strong_one() {
        let full = NOTES_SRC.replacen(
            "id = \"LLM01\"\nclaim = \"partial\"",
            "id = \"LLM01\"\nclaim = \"full\"",
            1,
        );
        assert_ne!(full, NOTES_SRC);
        let notes = Notes::parse(&full, "n.toml").unwrap();
        let weak = Matrix::parse(&matrix_json(0.41), "m.json").unwrap();
        let r = report(&notes, Some(&weak), "2026-11-26");
        assert!(coverage_line(&r, Owasp::Llm01).starts_with("**Coverage: partial.**"));
        assert!(
            section(&r, Owasp::Llm01)
                .contains("(claimed full, lowered: under the 95 % bar: red-team family encoding on fused (41.0 %).)"),
            "{}",
            section(&r, Owasp::Llm01)
        );
        let strong = Matrix::parse(&matrix_json(0.97), "m.json").unwrap();
        let r = report(&notes, Some(&strong), "2026-11-26");
        assert!(coverage_line(&r, Owasp::Llm01).starts_with("**Coverage: full.**"));
    }

    #[test]
    fn a_risk_nothing_carries_is_none_whatever_the_notes_claim() {
        let notes = Notes::parse(NOTES_SRC, NOTES_ORIGIN).unwrap();
        let rules = rule_entries(&shipped_packs().unwrap());
        let without_limits: Vec<ProtectionEntry> = protections()
            .into_iter()
            .filter(|p| !p.owasp.contains(&Owasp::Llm10))
            .collect();
        let r = render(&Inputs {
            notes: &notes,
            rules: &rules,
            protections: &without_limits,
            measured: None,
            matrix: None,
            command: "rampart owasp --no-measure",
            date: "2026-11-26",
        });
        let s = section(&r, Owasp::Llm10);
        assert!(s.trim_start().starts_with("**Coverage: none.**"), "{s}");
        assert!(s.contains("claimed partial, but no rule, layer or capability carries LLM10"));
        assert!(!s.contains("**Threat model**"));
        assert!(r.contains("`--no-measure`"));
    }

    #[test]
    fn a_matrix_of_another_version_is_refused() {
        let json = matrix_json(0.5).replacen("\"version\": 1", "\"version\": 2", 1);
        let err = format!("{:#}", Matrix::parse(&json, "m.json").unwrap_err());
        assert!(err.contains("coverage matrix version 2"), "{err}");
    }

    #[test]
    fn compact_ids_collapses_runs_per_prefix() {
        let ids = [
            "SYS_015", "SYS_016", "SYS_017", "SYS_027", "CTRL_001", "ROLE_202", "ROLE_203",
        ];
        assert_eq!(
            compact_ids(ids),
            "CTRL_001, ROLE_202–203, SYS_015–017, SYS_027"
        );
    }
}
