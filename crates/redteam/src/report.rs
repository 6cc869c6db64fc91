//! The coverage matrix: every family (and transform) of variants scored by every pipeline,
//! TPR on attack variants and FPR of the same transforms on benign variants; rendered as
//! Markdown, an SVG heatmap and JSON, compared with a previous matrix, checked against
//! floors (the CI gate). Scoring is `rampart_eval`'s: nothing here decides a verdict.

use crate::registry::{Family, Registry};
use rampart_datasets::{LoadedDataset, Record};
use rampart_eval::metrics::wilson;
use rampart_eval::{NamedPipeline, Outcome as EvalOutcome, RunOptions};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The version of the matrix JSON ([`CoverageMatrix::version`]).
pub const MATRIX_VERSION: u32 = 1;

/// Why a report could not be made or checked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// Scoring failed.
    #[error("scoring with pipeline `{pipeline}`: {source}")]
    Eval {
        /// The pipeline.
        pipeline: String,
        /// What went wrong.
        source: rampart_eval::EvalError,
    },
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// A gate file is not valid.
    #[error("gate file {path}: {message}")]
    Gate {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A previous matrix (`--baseline`) is not valid.
    #[error("baseline {path}: {message}")]
    Baseline {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Which variants a pipeline scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Single-prompt variants (text and segments): the per-message pipelines.
    Prompts,
    /// Conversation variants (splitting across turns, compositions ending in turns),
    /// replayed call by call through the conversation scanner, as `rampart eval` does.
    Conversations,
}

/// Whether a pipeline could be scored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PipelineStatus {
    /// Built and scored.
    Ok,
    /// Not scored, and why (a model not installed, no judge endpoint…).
    NotConfigured(String),
}

impl PipelineStatus {
    /// `ok` or `not_configured: <why>`.
    pub fn as_string(&self) -> String {
        match self {
            PipelineStatus::Ok => "ok".to_owned(),
            PipelineStatus::NotConfigured(why) => format!("not_configured: {why}"),
        }
    }
}

impl Serialize for PipelineStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_string())
    }
}

impl<'de> Deserialize<'de> for PipelineStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == "ok" {
            return Ok(PipelineStatus::Ok);
        }
        match s.strip_prefix("not_configured:") {
            Some(why) => Ok(PipelineStatus::NotConfigured(why.trim_start().to_owned())),
            None => Err(serde::de::Error::custom(format!(
                "status `{s}`: expected `ok` or `not_configured: <why>`"
            ))),
        }
    }
}

/// A pipeline of the report.
#[derive(Debug)]
pub struct ReportPipeline {
    /// Its column name (`rules`, `default`, `conversation`…).
    pub name: String,
    /// Where its configuration came from (a path, or `embedded:default`).
    pub config: String,
    /// What it scores.
    pub scope: Scope,
    /// The pipeline, or why there is none (its configuration could not be read or built,
    /// or the endpoint it needs is not there).
    pub pipeline: Result<NamedPipeline, Box<dyn std::error::Error + Send + Sync>>,
}

/// The variants to score, with the skips of their generation.
#[derive(Debug, Clone, Default)]
pub struct Variants {
    /// Variants of attack prompts.
    pub attack: Vec<Record>,
    /// Variants of benign prompts.
    pub benign: Vec<Record>,
    /// Source records a transform could not apply to, by transform id (`family.name`).
    pub skipped: BTreeMap<String, usize>,
}

/// A pipeline's entry in the matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineEntry {
    /// Column name.
    pub name: String,
    /// Its configuration; always written, empty when absent.
    #[serde(default)]
    pub config: String,
    /// `ok` or `not_configured: <why>`.
    pub status: PipelineStatus,
}

/// One pipeline's figures for a family or transform.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// `tp / n_attack`; null without attack variants.
    pub tpr: Option<f64>,
    /// Attack variants flagged.
    pub tp: u64,
    /// Attack variants scored.
    pub n_attack: u64,
    /// `fp / n_benign`; null without benign variants.
    pub fpr: Option<f64>,
    /// Benign variants flagged.
    pub fp: u64,
    /// Benign variants scored.
    pub n_benign: u64,
}

impl Cell {
    fn add(&mut self, attack: bool, flagged: bool) {
        if attack {
            self.n_attack += 1;
            self.tp += u64::from(flagged);
        } else {
            self.n_benign += 1;
            self.fp += u64::from(flagged);
        }
    }

    fn finish(&mut self) {
        self.tpr = rate(self.tp, self.n_attack);
        self.fpr = rate(self.fp, self.n_benign);
    }
}

fn rate(k: u64, n: u64) -> Option<f64> {
    (n > 0).then(|| k as f64 / n as f64)
}

/// A row: a family, or a transform (then `transform` is its id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// The transform id (`encoding.base64`), in the transform rows only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    /// The family id.
    pub family: String,
    /// Attack variants generated.
    pub n_attack: u64,
    /// Benign variants generated.
    pub n_benign: u64,
    /// Source records the transforms could not apply to.
    pub skipped: u64,
    /// By pipeline name; a pipeline that scored none of the row's variants (not configured,
    /// or out of its scope) has no cell.
    pub cells: BTreeMap<String, Cell>,
}

impl Row {
    /// The row's id: the transform id, else the family id.
    pub fn key(&self) -> &str {
        self.transform.as_deref().unwrap_or(&self.family)
    }
}

/// The coverage matrix (`docs/reports/coverage_matrix.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoverageMatrix {
    /// [`MATRIX_VERSION`].
    pub version: u32,
    /// The command line that made it.
    pub command: String,
    /// When, RFC 3339.
    pub generated: String,
    /// The generation seed.
    pub seed: u64,
    /// Attack sources (as given: `name:split` or a file); always written, empty when
    /// absent (`rampart owasp` reads matrices without them).
    #[serde(default)]
    pub attack_sources: Vec<String>,
    /// Benign sources; empty when absent.
    #[serde(default)]
    pub benign_sources: Vec<String>,
    /// The pipelines, in column order.
    pub pipelines: Vec<PipelineEntry>,
    /// One row per family, in registry order.
    pub families: Vec<Row>,
    /// One row per transform, in registry order.
    pub transforms: Vec<Row>,
}

/// What the matrix records about its run.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    /// The command line.
    pub command: String,
    /// When, RFC 3339.
    pub generated: String,
    /// The seed.
    pub seed: u64,
    /// Attack sources.
    pub attack_sources: Vec<String>,
    /// Benign sources.
    pub benign_sources: Vec<String>,
}

/// The transform id of a variant (`family.transform`), from its `mutation`.
fn transform_id(r: &Record) -> Option<(String, String)> {
    r.mutation
        .as_ref()
        .map(|m| (m.family.clone(), format!("{}.{}", m.family, m.transform)))
}

/// Rows in registry order, then any other id by name (variants read from files).
fn order_key(reg: &Registry, family: &str, transform: Option<&str>) -> (usize, usize, String) {
    let f = Family::ALL
        .iter()
        .position(|x| x.id() == family)
        .unwrap_or(usize::MAX);
    let t = transform.map_or(0, |t| {
        reg.entries()
            .iter()
            .position(|e| e.id == t)
            .unwrap_or(usize::MAX)
    });
    (f, t, transform.unwrap_or(family).to_owned())
}

/// The number of scans [`score`] makes (for a progress bar).
pub fn planned_scans(pipelines: &[ReportPipeline], variants: &Variants) -> u64 {
    pipelines
        .iter()
        .filter(|p| p.pipeline.is_ok())
        .map(|p| {
            variants
                .attack
                .iter()
                .chain(&variants.benign)
                .filter(|r| in_scope(p.scope, r))
                .count() as u64
        })
        .sum()
}

/// A reason on one line (errors with causes span several), so that a status stays one
/// table cell and one JSON string a reader can show.
fn one_line(why: &str) -> String {
    why.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

fn in_scope(scope: Scope, r: &Record) -> bool {
    match scope {
        Scope::Prompts => !r.is_conversation(),
        Scope::Conversations => r.is_conversation(),
    }
}

/// Scores every variant with every configured pipeline (each in its scope) and builds the
/// matrix. `progress` is called with the number of scans just done.
pub fn score(
    meta: Meta,
    pipelines: &[ReportPipeline],
    variants: &Variants,
    opts: &RunOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<CoverageMatrix, ReportError> {
    let reg = Registry::builtin();
    // Row skeletons: every transform with a variant or a skip, and its family.
    let mut transforms: BTreeMap<String, Row> = BTreeMap::new();
    let blank = |family: &str, transform: &str| -> Row {
        Row {
            transform: Some(transform.to_owned()),
            family: family.to_owned(),
            n_attack: 0,
            n_benign: 0,
            skipped: 0,
            cells: BTreeMap::new(),
        }
    };
    let mut origin: HashMap<(bool, &str), String> = HashMap::new();
    for (attack, set) in [(true, &variants.attack), (false, &variants.benign)] {
        for r in set.iter() {
            let Some((family, t)) = transform_id(r) else {
                continue;
            };
            let row = transforms
                .entry(t.clone())
                .or_insert_with(|| blank(&family, &t));
            if attack {
                row.n_attack += 1;
            } else {
                row.n_benign += 1;
            }
            origin.insert((attack, r.id.as_str()), t);
        }
    }
    for (t, n) in &variants.skipped {
        let family = t.split_once('.').map_or(t.as_str(), |(f, _)| f);
        transforms
            .entry(t.clone())
            .or_insert_with(|| blank(family, t))
            .skipped += *n as u64;
    }

    let mut entries = Vec::with_capacity(pipelines.len());
    for p in pipelines {
        entries.push(PipelineEntry {
            name: p.name.clone(),
            config: p.config.clone(),
            status: match &p.pipeline {
                Ok(_) => PipelineStatus::Ok,
                Err(why) => PipelineStatus::NotConfigured(one_line(&why.to_string())),
            },
        });
        let Ok(pipeline) = &p.pipeline else {
            continue;
        };
        let mut datasets = Vec::new();
        for (name, set) in [("attack", &variants.attack), ("benign", &variants.benign)] {
            let records: Vec<Record> = set
                .iter()
                .filter(|r| in_scope(p.scope, r))
                .cloned()
                .collect();
            if !records.is_empty() {
                datasets.push(LoadedDataset {
                    name: name.to_owned(),
                    origin: format!("redteam variants ({name})"),
                    records,
                    errors: Vec::new(),
                });
            }
        }
        if datasets.is_empty() {
            continue;
        }
        let run = rampart_eval::run(
            "redteam_report",
            &meta.generated,
            std::slice::from_ref(pipeline),
            datasets,
            opts,
            progress,
        )
        .map_err(|source| ReportError::Eval {
            pipeline: p.name.clone(),
            source,
        })?;
        for log in run.datasets.iter().flat_map(|d| &d.logs) {
            let Some(t) = origin.get(&(log.attack, log.prompt_id.as_str())) else {
                continue;
            };
            let Some(row) = transforms.get_mut(t) else {
                continue;
            };
            let flagged = matches!(
                log.outcome,
                EvalOutcome::TruePositive | EvalOutcome::FalsePositive
            );
            row.cells
                .entry(p.name.clone())
                .or_default()
                .add(log.attack, flagged);
        }
    }

    let mut transforms: Vec<Row> = transforms.into_values().collect();
    transforms.sort_by_cached_key(|r| order_key(&reg, &r.family, r.transform.as_deref()));
    let mut families: Vec<Row> = Vec::new();
    for t in &transforms {
        let i = match families.iter().position(|f| f.family == t.family) {
            Some(i) => i,
            None => {
                families.push(Row {
                    transform: None,
                    family: t.family.clone(),
                    n_attack: 0,
                    n_benign: 0,
                    skipped: 0,
                    cells: BTreeMap::new(),
                });
                families.len() - 1
            }
        };
        let f = &mut families[i];
        f.n_attack += t.n_attack;
        f.n_benign += t.n_benign;
        f.skipped += t.skipped;
        for (name, c) in &t.cells {
            let fc = f.cells.entry(name.clone()).or_default();
            fc.tp += c.tp;
            fc.n_attack += c.n_attack;
            fc.fp += c.fp;
            fc.n_benign += c.n_benign;
        }
    }
    families.sort_by_cached_key(|r| order_key(&reg, &r.family, None));
    for row in families.iter_mut().chain(transforms.iter_mut()) {
        row.cells.values_mut().for_each(Cell::finish);
    }
    Ok(CoverageMatrix {
        version: MATRIX_VERSION,
        command: meta.command,
        generated: meta.generated,
        seed: meta.seed,
        attack_sources: meta.attack_sources,
        benign_sources: meta.benign_sources,
        pipelines: entries,
        families,
        transforms,
    })
}

impl CoverageMatrix {
    /// Reads a matrix written by [`CoverageMatrix::to_json`] (a `--baseline`).
    pub fn load(path: &Path) -> Result<CoverageMatrix, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReportError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let m: CoverageMatrix = serde_json::from_str(&text).map_err(|e| ReportError::Baseline {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if m.version != MATRIX_VERSION {
            return Err(ReportError::Baseline {
                path: path.to_path_buf(),
                message: format!("version {} (this build reads {MATRIX_VERSION})", m.version),
            });
        }
        Ok(m)
    }

    /// Pretty JSON with a final newline; keys in a fixed order.
    pub fn to_json(&self) -> String {
        // Serializing plain structs, maps with string keys and finite floats cannot fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// The cell of a family for a pipeline.
    pub fn family_cell(&self, family: &str, pipeline: &str) -> Option<&Cell> {
        self.families
            .iter()
            .find(|r| r.family == family)
            .and_then(|r| r.cells.get(pipeline))
    }

    fn cell(&self, transform_row: bool, key: &str, pipeline: &str) -> Option<&Cell> {
        let rows = if transform_row {
            &self.transforms
        } else {
            &self.families
        };
        rows.iter()
            .find(|r| r.key() == key)
            .and_then(|r| r.cells.get(pipeline))
    }
}

pub(crate) fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

pub(crate) fn with_ci(k: u64, n: u64) -> String {
    match wilson(k, n) {
        None => "–".to_owned(),
        Some(ci) => format!(
            "{:.1}% [{:.1}–{:.1}]",
            k as f64 / n as f64 * 100.0,
            ci.low * 100.0,
            ci.high * 100.0
        ),
    }
}

fn change(now: Option<f64>, was: Option<f64>) -> String {
    match (now, was) {
        (Some(n), Some(w)) => format!(" (was {}, {:+.1})", pct(Some(w)), (n - w) * 100.0),
        (_, Some(w)) => format!(" (was {})", pct(Some(w))),
        (Some(_), None) => " (new)".to_owned(),
        (None, None) => String::new(),
    }
}

fn cell_text(c: Option<&Cell>, was: Option<&Cell>, baseline: bool, tpr: bool, ci: bool) -> String {
    let Some(c) = c else {
        return "n/a".to_owned();
    };
    let (k, n, now, before) = if tpr {
        (c.tp, c.n_attack, c.tpr, was.and_then(|w| w.tpr))
    } else {
        (c.fp, c.n_benign, c.fpr, was.and_then(|w| w.fpr))
    };
    let mut s = if ci { with_ci(k, n) } else { pct(now) };
    if baseline && n > 0 {
        s.push_str(&change(now, before));
    }
    s
}

/// The Markdown report: header (command, date, sources, seed, pipelines, skips), the family
/// x pipeline matrix (TPR and FPR with 95 % Wilson intervals), the per-transform table and
/// the worst cells. With `baseline`, every figure is followed by the previous one and the
/// change in points.
pub fn markdown(m: &CoverageMatrix, baseline: Option<&CoverageMatrix>) -> String {
    let mut s = String::new();
    let b = baseline.is_some();
    let _ = writeln!(s, "# Coverage matrix: transform family x pipeline\n");
    let _ = writeln!(
        s,
        "Generated by `rampart redteam report` (regenerate with the command below; only the date changes).\n"
    );
    let _ = writeln!(s, "```\n{}\n```\n", m.command);
    let _ = writeln!(s, "- Date: {}", m.generated);
    let _ = writeln!(s, "- Seed: {}", m.seed);
    let _ = writeln!(s, "- Attack sources: {}", m.attack_sources.join(", "));
    let _ = writeln!(s, "- Benign sources: {}", m.benign_sources.join(", "));
    let (na, nb, sk) = m.families.iter().fold((0, 0, 0), |(a, b, k), r| {
        (a + r.n_attack, b + r.n_benign, k + r.skipped)
    });
    let _ = writeln!(
        s,
        "- Variants: {na} of attack prompts, {nb} of benign prompts; {sk} skipped (a transform that cannot apply to a prompt, e.g. homoglyphs on text without letters; counted per family below)"
    );
    if let Some(old) = baseline {
        let _ = writeln!(
            s,
            "- Compared with a previous matrix of {} (seed {}): each figure is followed by the previous one and the change in points",
            old.generated, old.seed
        );
    }
    let _ = writeln!(
        s,
        "\nTPR: share of attack variants flagged (any action but ALLOW). FPR: share of benign variants of the same transforms flagged: a transform must not make benign text look malicious. Intervals: 95 % Wilson. `n/a`: the pipeline scored no variant of the row (not configured, or out of its scope: `conversation` scores the variants split across turns, replayed call by call; the other pipelines score single prompts).\n"
    );
    let _ = writeln!(s, "## Pipelines\n");
    let _ = writeln!(s, "| pipeline | configuration | status |");
    let _ = writeln!(s, "|---|---|---|");
    for p in &m.pipelines {
        let _ = writeln!(
            s,
            "| {} | `{}` | {} |",
            p.name,
            p.config,
            p.status.as_string()
        );
    }
    let cols: Vec<&str> = m.pipelines.iter().map(|p| p.name.as_str()).collect();
    let header = |s: &mut String, first: &str, extra: &[&str]| {
        let _ = write!(s, "| {first} |");
        for e in extra {
            let _ = write!(s, " {e} |");
        }
        for c in &cols {
            let _ = write!(s, " {c} |");
        }
        let _ = write!(s, "\n|---|");
        for _ in 0..extra.len() + cols.len() {
            let _ = write!(s, "---|");
        }
        s.push('\n');
    };
    for (title, tpr) in [
        ("TPR on attack variants", true),
        ("FPR on benign variants", false),
    ] {
        let _ = writeln!(s, "\n## Matrix: {title}, by family\n");
        header(&mut s, "family", &["attack", "benign", "skipped"]);
        for r in &m.families {
            let _ = write!(
                s,
                "| {} | {} | {} | {} |",
                r.family, r.n_attack, r.n_benign, r.skipped
            );
            for c in &cols {
                let was = baseline.and_then(|o| o.cell(false, &r.family, c));
                let _ = write!(s, " {} |", cell_text(r.cells.get(*c), was, b, tpr, true));
            }
            s.push('\n');
        }
    }
    let _ = writeln!(s, "\n## Per transform: TPR / FPR\n");
    header(&mut s, "transform", &["attack", "benign", "skipped"]);
    for r in &m.transforms {
        let _ = write!(
            s,
            "| {} | {} | {} | {} |",
            r.key(),
            r.n_attack,
            r.n_benign,
            r.skipped
        );
        for c in &cols {
            let was = baseline.and_then(|o| o.cell(true, r.key(), c));
            let cell = r.cells.get(*c);
            if cell.is_none() {
                let _ = write!(s, " n/a |");
                continue;
            }
            let _ = write!(
                s,
                " {} / {} |",
                cell_text(cell, was, b, true, true),
                cell_text(cell, was, b, false, true)
            );
        }
        s.push('\n');
    }
    worst(&mut s, m);
    s
}

/// How many cells the "worst cells" lists show.
const WORST: usize = 15;

fn worst(s: &mut String, m: &CoverageMatrix) {
    let mut cells: Vec<(&str, &str, &Cell)> = m
        .transforms
        .iter()
        .flat_map(|r| r.cells.iter().map(move |(p, c)| (r.key(), p.as_str(), c)))
        .collect();
    let _ = writeln!(
        s,
        "\n## Worst cells (per transform)\n\nLowest TPR ({WORST} at most; ties by name):\n"
    );
    let _ = writeln!(s, "| transform | pipeline | TPR | attack variants |");
    let _ = writeln!(s, "|---|---|---|---|");
    cells.sort_by(|a, b| {
        let (x, y) = (a.2.tpr.unwrap_or(2.0), b.2.tpr.unwrap_or(2.0));
        x.total_cmp(&y).then(a.0.cmp(b.0)).then(a.1.cmp(b.1))
    });
    for (t, p, c) in cells.iter().filter(|c| c.2.tpr.is_some()).take(WORST) {
        let _ = writeln!(
            s,
            "| {t} | {p} | {} | {} |",
            with_ci(c.tp, c.n_attack),
            c.n_attack
        );
    }
    let _ = writeln!(
        s,
        "\nHighest FPR ({WORST} at most, FPR above 0 only; ties by name):\n"
    );
    let _ = writeln!(s, "| transform | pipeline | FPR | benign variants |");
    let _ = writeln!(s, "|---|---|---|---|");
    cells.sort_by(|a, b| {
        let (x, y) = (a.2.fpr.unwrap_or(-1.0), b.2.fpr.unwrap_or(-1.0));
        y.total_cmp(&x).then(a.0.cmp(b.0)).then(a.1.cmp(b.1))
    });
    for (t, p, c) in cells.iter().filter(|c| c.2.fp > 0).take(WORST) {
        let _ = writeln!(
            s,
            "| {t} | {p} | {} | {} |",
            with_ci(c.fp, c.n_benign),
            c.n_benign
        );
    }
}

pub(crate) fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The heatmap colour of a TPR: red (0) through yellow (0.5) to green (1).
fn colour(t: f64) -> String {
    const STOPS: [(f64, [f64; 3]); 3] = [
        (0.0, [215.0, 48.0, 39.0]),
        (0.5, [254.0, 224.0, 139.0]),
        (1.0, [26.0, 152.0, 80.0]),
    ];
    let t = t.clamp(0.0, 1.0);
    let (a, b) = if t <= 0.5 {
        (STOPS[0], STOPS[1])
    } else {
        (STOPS[1], STOPS[2])
    };
    let u = (t - a.0) / (b.0 - a.0);
    let c: Vec<u8> = (0..3)
        .map(|i| (a.1[i] + (b.1[i] - a.1[i]) * u).round() as u8)
        .collect();
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// The SVG heatmap: family (rows) x pipeline (columns), coloured by TPR, the TPR and, small,
/// the FPR of the same transforms on benign prompts in each cell; a colour legend.
pub fn svg(m: &CoverageMatrix) -> String {
    const LEFT: usize = 130;
    const TOP: usize = 70;
    const W: usize = 104;
    const H: usize = 40;
    let cols = m.pipelines.len().max(1);
    let width = LEFT + cols * W + 20;
    let legend_y = TOP + m.families.len() * H + 24;
    let height = legend_y + 50;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(
        s,
        r##"<rect width="{width}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">Coverage matrix: TPR by transform family and pipeline (seed {})</text>"#,
        m.seed
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="40" font-size="11" fill="#444444">Cell: TPR on attack variants (colour); small: FPR of the same transforms on benign variants. Grey: not scored.</text>"##
    );
    for (j, p) in m.pipelines.iter().enumerate() {
        let x = LEFT + j * W + W / 2;
        let _ = writeln!(
            s,
            r#"<text x="{x}" y="{}" font-size="12" font-weight="bold" text-anchor="middle">{}</text>"#,
            TOP - 8,
            xml(&p.name)
        );
    }
    for (i, r) in m.families.iter().enumerate() {
        let y = TOP + i * H;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="12" text-anchor="end">{}</text>"#,
            LEFT - 8,
            y + H / 2 + 4,
            xml(&r.family)
        );
        for (j, p) in m.pipelines.iter().enumerate() {
            let x = LEFT + j * W;
            let cell = r.cells.get(&p.name);
            let tpr = cell.and_then(|c| c.tpr);
            let fill = tpr.map_or_else(|| "#dddddd".to_owned(), colour);
            let _ = writeln!(
                s,
                r##"<rect x="{x}" y="{y}" width="{W}" height="{H}" fill="{fill}" stroke="#ffffff" stroke-width="2"/>"##
            );
            let main = match (&p.status, tpr) {
                (PipelineStatus::NotConfigured(_), _) => "not configured".to_owned(),
                (_, Some(t)) => format!("{:.1}%", t * 100.0),
                (_, None) => "n/a".to_owned(),
            };
            let size = if main.len() > 8 { 10 } else { 13 };
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" font-size="{size}" text-anchor="middle">{main}</text>"#,
                x + W / 2,
                y + 18
            );
            if let Some(c) = cell.filter(|c| c.n_benign > 0) {
                let _ = writeln!(
                    s,
                    r#"<text x="{}" y="{}" font-size="9" text-anchor="middle">FPR {}</text>"#,
                    x + W / 2,
                    y + 32,
                    pct(c.fpr)
                );
            }
        }
    }
    let _ = writeln!(
        s,
        r#"<defs><linearGradient id="tpr-scale" x1="0" x2="1" y1="0" y2="0"><stop offset="0" stop-color="{}"/><stop offset="0.5" stop-color="{}"/><stop offset="1" stop-color="{}"/></linearGradient></defs>"#,
        colour(0.0),
        colour(0.5),
        colour(1.0)
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="{}" font-size="11">TPR</text>"#,
        legend_y + 13
    );
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{legend_y}" width="200" height="16" fill="url(#tpr-scale)" stroke="#888888"/>"##
    );
    for (k, label) in ["0%", "50%", "100%"].iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="10" text-anchor="middle">{label}</text>"#,
            LEFT + k * 100,
            legend_y + 30
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{legend_y}" width="16" height="16" fill="#dddddd" stroke="#888888"/><text x="{}" y="{}" font-size="10">not scored</text>"##,
        LEFT + 230,
        LEFT + 252,
        legend_y + 12
    );
    s.push_str("</svg>\n");
    s
}

/// The metric a floor or ceiling is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateMetric {
    /// TPR on attack variants (a floor: `min`).
    Tpr,
    /// FPR on benign variants (a ceiling: `max`).
    Fpr,
}

/// One floor or ceiling on a family's cell.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyGate {
    /// The family id.
    pub family: String,
    /// The pipeline (column).
    pub pipeline: String,
    /// What is checked.
    pub metric: GateMetric,
    /// The figure must be at least this.
    #[serde(default)]
    pub min: Option<f64>,
    /// The figure must be at most this.
    #[serde(default)]
    pub max: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GateFileToml {
    version: u32,
    #[serde(default)]
    gate: Vec<FamilyGate>,
}

/// A gate file (`gates/redteam.toml`): floors and ceilings per family and pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct RedteamGates {
    /// The checks, in file order.
    pub gates: Vec<FamilyGate>,
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq)]
pub struct GateOutcome {
    /// `family/pipeline metric >= min` and the like.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// The measured figure, or why there is none.
    pub detail: String,
}

impl RedteamGates {
    /// Reads and checks a gate file.
    pub fn load(path: &Path) -> Result<RedteamGates, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReportError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses a gate file (`path` for messages).
    pub fn parse(text: &str, path: &Path) -> Result<RedteamGates, ReportError> {
        let bad = |message: String| ReportError::Gate {
            path: path.to_path_buf(),
            message,
        };
        let f: GateFileToml = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if f.version != 1 {
            return Err(bad(format!("version {} (expected 1)", f.version)));
        }
        if f.gate.is_empty() {
            return Err(bad("no [[gate]]".to_owned()));
        }
        for g in &f.gate {
            if g.min.is_some() == g.max.is_some() {
                return Err(bad(format!(
                    "gate {}/{}: give exactly one of `min` and `max`",
                    g.family, g.pipeline
                )));
            }
            if let Some(v) = g.min.or(g.max)
                && !(0.0..=1.0).contains(&v)
            {
                return Err(bad(format!(
                    "gate {}/{}: {v} is not a rate in 0..1",
                    g.family, g.pipeline
                )));
            }
        }
        Ok(RedteamGates { gates: f.gate })
    }

    /// Checks every gate; a cell that was not measured fails its gate.
    pub fn check(&self, m: &CoverageMatrix) -> Vec<GateOutcome> {
        self.gates
            .iter()
            .map(|g| {
                let (metric, bound, sign) = match (g.metric, g.min, g.max) {
                    (GateMetric::Tpr, Some(v), _) => ("TPR", v, ">="),
                    (GateMetric::Fpr, Some(v), _) => ("FPR", v, ">="),
                    (GateMetric::Tpr, None, v) => ("TPR", v.unwrap_or(1.0), "<="),
                    (GateMetric::Fpr, None, v) => ("FPR", v.unwrap_or(1.0), "<="),
                };
                let name = format!(
                    "{} {}/{} {sign} {:.1}%",
                    metric,
                    g.family,
                    g.pipeline,
                    bound * 100.0
                );
                let cell = m.family_cell(&g.family, &g.pipeline);
                let value = cell.and_then(|c| match g.metric {
                    GateMetric::Tpr => c.tpr.map(|v| (v, c.tp, c.n_attack)),
                    GateMetric::Fpr => c.fpr.map(|v| (v, c.fp, c.n_benign)),
                });
                match value {
                    None => GateOutcome {
                        name,
                        passed: false,
                        detail: "not measured (no variant of the family scored by the pipeline)"
                            .to_owned(),
                    },
                    Some((v, k, n)) => {
                        let passed = if sign == ">=" { v >= bound } else { v <= bound };
                        GateOutcome {
                            name,
                            passed,
                            detail: format!("measured {:.1}% ({k}/{n})", v * 100.0),
                        }
                    }
                }
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    fn matrix() -> CoverageMatrix {
        let cell = Cell {
            tpr: Some(0.5),
            tp: 1,
            n_attack: 2,
            fpr: Some(0.0),
            fp: 0,
            n_benign: 3,
        };
        CoverageMatrix {
            version: MATRIX_VERSION,
            command: "rampart redteam report".to_owned(),
            generated: "2026-01-01T00:00:00Z".to_owned(),
            seed: 1,
            attack_sources: vec!["a:validation".to_owned()],
            benign_sources: vec!["b".to_owned()],
            pipelines: vec![
                PipelineEntry {
                    name: "rules".to_owned(),
                    config: "configs/rules.toml".to_owned(),
                    status: PipelineStatus::Ok,
                },
                PipelineEntry {
                    name: "cascade".to_owned(),
                    config: "configs/cascade.toml".to_owned(),
                    status: PipelineStatus::NotConfigured("no model".to_owned()),
                },
            ],
            families: vec![Row {
                transform: None,
                family: "encoding".to_owned(),
                n_attack: 2,
                n_benign: 3,
                skipped: 1,
                cells: BTreeMap::from([("rules".to_owned(), cell)]),
            }],
            transforms: vec![Row {
                transform: Some("encoding.base64".to_owned()),
                family: "encoding".to_owned(),
                n_attack: 2,
                n_benign: 3,
                skipped: 1,
                cells: BTreeMap::from([("rules".to_owned(), cell)]),
            }],
        }
    }

    #[test]
    fn json_round_trips_with_the_status_strings() {
        let m = matrix();
        let json = m.to_json();
        assert!(
            json.contains(r#""status": "not_configured: no model""#),
            "{json}"
        );
        assert!(json.contains(r#""transform": "encoding.base64""#));
        let back: CoverageMatrix = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
        let bad = json.replace("not_configured: no model", "broken");
        assert!(serde_json::from_str::<CoverageMatrix>(&bad).is_err());
    }

    #[test]
    fn gate_file_is_checked_and_gates_pass_fail_or_are_not_measured() {
        let p = Path::new("g.toml");
        let g = |body: &str| RedteamGates::parse(&format!("version = 1\n{body}"), p);
        assert!(g("").is_err(), "no gate");
        assert!(
            g("[[gate]]\nfamily='encoding'\npipeline='rules'\nmetric='tpr'\nmin=0.1\nmax=0.9\n")
                .is_err()
        );
        assert!(g("[[gate]]\nfamily='encoding'\npipeline='rules'\nmetric='tpr'\n").is_err());
        assert!(
            g("[[gate]]\nfamily='encoding'\npipeline='rules'\nmetric='tpr'\nmin=1.5\n").is_err()
        );
        assert!(
            g("[[gate]]\nfamily='encoding'\npipeline='rules'\nmetric='auc'\nmin=0.5\n").is_err()
        );
        assert!(
            g("[[gate]]\nfamily='encoding'\npipeline='rules'\nmetric='tpr'\nmin=0.5\nfloor=1\n")
                .is_err(),
            "unknown field"
        );
        let gates = g(
            "[[gate]]\nfamily='encoding'\npipeline='rules'\nmetric='tpr'\nmin=0.5\n\
             [[gate]]\nfamily='encoding'\npipeline='rules'\nmetric='tpr'\nmin=0.51\n\
             [[gate]]\nfamily='encoding'\npipeline='rules'\nmetric='fpr'\nmax=0.0\n\
             [[gate]]\nfamily='encoding'\npipeline='cascade'\nmetric='tpr'\nmin=0.1\n",
        )
        .unwrap();
        let r = gates.check(&matrix());
        let passed: Vec<bool> = r.iter().map(|o| o.passed).collect();
        assert_eq!(passed, [true, false, true, false]);
        assert_eq!(r[1].name, "TPR encoding/rules >= 51.0%");
        assert_eq!(r[1].detail, "measured 50.0% (1/2)");
        assert!(r[3].detail.starts_with("not measured"));
    }

    #[test]
    fn markdown_shows_intervals_not_configured_and_the_change_from_a_baseline() {
        let m = matrix();
        let md = markdown(&m, None);
        assert!(md.contains("| cascade | `configs/cascade.toml` | not_configured: no model |"));
        assert!(md.contains("| encoding | 2 | 3 | 1 | 50.0% ["), "{md}");
        assert!(!md.contains("(was"));
        let mut old = matrix();
        if let Some(c) = old.families[0].cells.get_mut("rules") {
            c.tpr = Some(0.25);
        }
        let md = markdown(&m, Some(&old));
        assert!(md.contains("(was 25.0%, +25.0)"), "{md}");
        assert!(md.contains("Compared with a previous matrix of 2026-01-01T00:00:00Z"));
    }

    #[test]
    fn heatmap_colours_span_red_to_green_and_the_svg_names_every_cell() {
        assert_eq!(colour(0.0), "#d73027");
        assert_eq!(colour(0.5), "#fee08b");
        assert_eq!(colour(1.0), "#1a9850");
        let s = svg(&matrix());
        assert!(
            s.contains(">50.0%<") && s.contains(">not configured<"),
            "{s}"
        );
        assert!(s.contains("FPR 0.0%") && s.contains("url(#tpr-scale)"));
    }
}
