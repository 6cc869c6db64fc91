//! The red-team report (`docs/reports/Adversarial_Testing_Report.md`), generated from a
//! coverage matrix and a file of remediation decisions: the blind spots the matrix shows
//! (families and transforms under the detection target, transforms whose benign variants are
//! flagged too often), the decision taken on each (fixed, fixable by rules or by a model,
//! needs the judge or conversation state, accepted risk), before/after figures against a
//! previous matrix, and a defense-in-depth diagram (SVG) of which layer catches what.
//!
//! Every blind spot must have a decision: a new one fails the report
//! ([`FindingsError::Undecided`]) until someone decides what to do about it, so the report
//! cannot silently go stale when the matrix changes.

use crate::report::{Cell, CoverageMatrix, Row, pct, with_ci, xml};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The only version of the decisions file this build reads.
pub const DECISIONS_VERSION: u32 = 1;

/// Why the report could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FindingsError {
    /// The decisions file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The decisions file is not valid.
    #[error("decisions file {path}: {message}")]
    Decisions {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Blind spots without a decision.
    #[error(
        "{} blind spot(s) without a decision in the decisions file (add a [[decision]] with this scope and metric): {}",
        .0.len(),
        .0.join(", ")
    )]
    Undecided(Vec<String>),
    /// Blind spots whose decision says `fixed`: the matrix says otherwise.
    #[error(
        "{} blind spot(s) decided `fixed` but still under the target or over the ceiling (decide them again: a fix that did not hold, or one that holds on another pipeline only, is not `fixed`): {}",
        .0.len(),
        .0.join(", ")
    )]
    FixedButOpen(Vec<String>),
}

/// What was decided about a blind spot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Fixed in this release (the matrix shows before and after).
    Fixed,
    /// A rule (or a rule-pack change) would fix it; not done yet.
    FixableByRules,
    /// A model (training data of the family, training splits only) would fix it.
    FixableByModel,
    /// Needs the LLM judge: the signal is intent, not wording.
    NeedsJudge,
    /// Needs conversation state: the attack is spread over turns.
    NeedsConversation,
    /// Accepted risk, with the criteria and the residual risk.
    AcceptedRisk,
    /// Intended behaviour (e.g. a SANITIZE on invisible characters counted as "flagged").
    ByDesign,
}

impl Verdict {
    /// Words for the report.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Fixed => "fixed",
            Verdict::FixableByRules => "fixable by rules",
            Verdict::FixableByModel => "fixable by a model",
            Verdict::NeedsJudge => "needs the judge",
            Verdict::NeedsConversation => "needs conversation state",
            Verdict::AcceptedRisk => "accepted risk",
            Verdict::ByDesign => "by design",
        }
    }
}

/// Why a risk is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// Nothing in the text tells the attack from benign text.
    NoDetectableSignal,
    /// Closing it costs more (latency, false alarms, upkeep) than the risk is worth.
    CostBeyondValue,
    /// Catching it would flag too many benign prompts.
    FalseAlarmCost,
    /// Outside what a prompt firewall can see or should decide.
    OutOfScope,
}

impl Criterion {
    fn label(self) -> &'static str {
        match self {
            Criterion::NoDetectableSignal => "no detectable signal",
            Criterion::CostBeyondValue => "cost beyond value",
            Criterion::FalseAlarmCost => "false-alarm cost",
            Criterion::OutOfScope => "out of scope",
        }
    }
}

/// Which figure a decision is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Detection: TPR on attack variants under the target.
    Tpr,
    /// False alarms: FPR on benign variants over the ceiling.
    Fpr,
}

impl Metric {
    fn label(self) -> &'static str {
        match self {
            Metric::Tpr => "detection",
            Metric::Fpr => "false alarms",
        }
    }
}

/// The thresholds that make a blind spot.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// The pipeline the detection target is on (`cascade`).
    pub pipeline: String,
    /// A family or transform under this TPR is a detection blind spot.
    pub min_tpr: f64,
    /// The pipelines the false-alarm ceiling is on (`["default", "cascade"]`): a row over it
    /// on any of them is a blind spot, reported with the worst.
    pub fpr_pipelines: Vec<String>,
    /// A transform whose benign variants are flagged more often than this is a false-alarm
    /// blind spot.
    pub max_fpr: f64,
}

/// One remediation decision.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// A family id (`padding`) or a transform id (`padding.before`); a transform's own
    /// decision wins over its family's.
    pub scope: String,
    /// Detection or false alarms.
    pub metric: Metric,
    /// What was decided.
    pub verdict: Verdict,
    /// The layer that catches it, should catch it, or was changed.
    pub layer: String,
    /// What was done, or what would be done.
    pub action: String,
    /// Why this decision.
    pub why: String,
    /// For an accepted risk: why it is accepted.
    #[serde(default)]
    pub criteria: Vec<Criterion>,
    /// For an accepted risk: what an attacker can still do.
    #[serde(default)]
    pub residual: Option<String>,
    /// Where the change or its test is (a path, a test name).
    #[serde(default)]
    pub reference: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionsToml {
    version: u32,
    target: Target,
    #[serde(default)]
    decision: Vec<Decision>,
}

/// The decisions file (`docs/reports/redteam_decisions.toml`).
#[derive(Debug, Clone, PartialEq)]
pub struct Decisions {
    /// The thresholds.
    pub target: Target,
    /// The decisions, in file order.
    pub decisions: Vec<Decision>,
}

impl Decisions {
    /// Reads and checks a decisions file.
    pub fn load(path: &Path) -> Result<Decisions, FindingsError> {
        let text = std::fs::read_to_string(path).map_err(|source| FindingsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses a decisions file (`path` for messages).
    pub fn parse(text: &str, path: &Path) -> Result<Decisions, FindingsError> {
        let bad = |message: String| FindingsError::Decisions {
            path: path.to_path_buf(),
            message,
        };
        let f: DecisionsToml = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if f.version != DECISIONS_VERSION {
            return Err(bad(format!(
                "version {} (this build reads {DECISIONS_VERSION})",
                f.version
            )));
        }
        if f.target.fpr_pipelines.is_empty() {
            return Err(bad("target.fpr_pipelines is empty".to_owned()));
        }
        for (name, v) in [("min_tpr", f.target.min_tpr), ("max_fpr", f.target.max_fpr)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(format!("target.{name} = {v} is not a rate in 0..1")));
            }
        }
        let mut seen = BTreeSet::new();
        for d in &f.decision {
            let id = format!("{} ({})", d.scope, d.metric.label());
            if !seen.insert((d.scope.clone(), d.metric)) {
                return Err(bad(format!("two decisions for {id}")));
            }
            for (field, v) in [("layer", &d.layer), ("action", &d.action), ("why", &d.why)] {
                if v.trim().is_empty() {
                    return Err(bad(format!("decision {id}: `{field}` is empty")));
                }
            }
            let accepted = d.verdict == Verdict::AcceptedRisk;
            if accepted
                && (d.criteria.is_empty() || d.residual.as_deref().is_none_or(str::is_empty))
            {
                return Err(bad(format!(
                    "decision {id}: an accepted risk needs `criteria` and a `residual` risk statement"
                )));
            }
            if !accepted && (!d.criteria.is_empty() || d.residual.is_some()) {
                return Err(bad(format!(
                    "decision {id}: `criteria` and `residual` are for accepted risks only"
                )));
            }
        }
        Ok(Decisions {
            target: f.target,
            decisions: f.decision,
        })
    }

    fn find(&self, row: &Row, metric: Metric) -> Option<&Decision> {
        let own = self
            .decisions
            .iter()
            .find(|d| d.metric == metric && row.transform.as_deref() == Some(d.scope.as_str()));
        own.or_else(|| {
            self.decisions
                .iter()
                .find(|d| d.metric == metric && d.scope == row.family)
        })
    }
}

/// A blind spot: a row under the detection target or over the false-alarm ceiling.
#[derive(Debug, Clone)]
pub struct BlindSpot<'a> {
    /// The family or transform row.
    pub row: &'a Row,
    /// Detection or false alarms.
    pub metric: Metric,
    /// The pipeline the figure is from.
    pub pipeline: String,
    /// The cell.
    pub cell: Cell,
    /// The decision, if any.
    pub decision: Option<&'a Decision>,
}

/// The cell a detection target is read from: the target pipeline's, else (a row the target
/// pipeline does not score, e.g. variants split across turns) the best pipeline that scored it.
fn tpr_cell<'a>(row: &'a Row, pipeline: &'a str) -> Option<(&'a str, &'a Cell)> {
    if let Some(c) = row.cells.get(pipeline).filter(|c| c.n_attack > 0) {
        return Some((pipeline, c));
    }
    row.cells
        .iter()
        .filter(|(_, c)| c.n_attack > 0)
        .max_by(|a, b| {
            let ta = a.1.tpr.unwrap_or(0.0);
            let tb = b.1.tpr.unwrap_or(0.0);
            ta.total_cmp(&tb).then_with(|| b.0.cmp(a.0))
        })
        .map(|(p, c)| (p.as_str(), c))
}

/// The cell a false-alarm ceiling is read from: the worst of the listed pipelines that scored
/// benign variants of the row, else (none of them did) the best pipeline that did.
fn fpr_cell<'a>(row: &'a Row, pipelines: &'a [String]) -> Option<(&'a str, &'a Cell)> {
    let listed = pipelines
        .iter()
        .filter_map(|p| {
            row.cells
                .get(p)
                .filter(|c| c.n_benign > 0)
                .map(|c| (p.as_str(), c))
        })
        .max_by(|a, b| {
            let fa = a.1.fpr.unwrap_or(0.0);
            let fb = b.1.fpr.unwrap_or(0.0);
            // Ties go to the pipeline listed first.
            fa.total_cmp(&fb).then(std::cmp::Ordering::Greater)
        });
    if listed.is_some() {
        return listed;
    }
    row.cells
        .iter()
        .filter(|(_, c)| c.n_benign > 0)
        .min_by(|a, b| {
            let fa = a.1.fpr.unwrap_or(1.0);
            let fb = b.1.fpr.unwrap_or(1.0);
            fa.total_cmp(&fb).then_with(|| a.0.cmp(b.0))
        })
        .map(|(p, c)| (p.as_str(), c))
}

/// Every blind spot of the matrix, families first (registry order), then transforms; the
/// `original` family (the unmutated prompts) is the baseline, not a transform, and is left out.
pub fn blind_spots<'a>(m: &'a CoverageMatrix, d: &'a Decisions) -> Vec<BlindSpot<'a>> {
    let mut out = Vec::new();
    for row in m.families.iter().chain(m.transforms.iter()) {
        if row.family == "original" {
            continue;
        }
        if let Some((p, c)) = tpr_cell(row, &d.target.pipeline)
            && c.tpr.is_some_and(|t| t < d.target.min_tpr)
        {
            out.push(BlindSpot {
                row,
                metric: Metric::Tpr,
                pipeline: p.to_owned(),
                cell: *c,
                decision: d.find(row, Metric::Tpr),
            });
        }
        if let Some((p, c)) = fpr_cell(row, &d.target.fpr_pipelines)
            && c.fpr.is_some_and(|f| f > d.target.max_fpr)
        {
            out.push(BlindSpot {
                row,
                metric: Metric::Fpr,
                pipeline: p.to_owned(),
                cell: *c,
                decision: d.find(row, Metric::Fpr),
            });
        }
    }
    out
}

/// `now (was before)`, for a rate of a row in both matrices.
fn before_after(now: Option<f64>, was: Option<f64>) -> String {
    match (now, was) {
        (Some(n), Some(w)) => format!(
            "{} → {} ({:+.1})",
            pct(Some(w)),
            pct(Some(n)),
            (n - w) * 100.0
        ),
        (Some(n), None) => format!("{} (new)", pct(Some(n))),
        (None, Some(w)) => format!("{} → not measured", pct(Some(w))),
        (None, None) => "–".to_owned(),
    }
}

fn row_of<'a>(m: &'a CoverageMatrix, scope: &str) -> Option<&'a Row> {
    m.transforms
        .iter()
        .find(|r| r.transform.as_deref() == Some(scope))
        .or_else(|| m.families.iter().find(|r| r.family == scope))
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// What [`report`] needs besides the matrix.
#[derive(Debug, Clone, Copy)]
pub struct ReportInputs<'a> {
    /// The command line that generated the report (shown at the top).
    pub command: &'a str,
    /// The decisions.
    pub decisions: &'a Decisions,
    /// The matrix before the fixes, for before/after figures.
    pub baseline: Option<&'a CoverageMatrix>,
    /// The SVG's file name, linked from the report.
    pub svg_name: &'a str,
}

/// The Markdown report. Fails when a blind spot has no decision, or a decision names a scope
/// the matrix does not have.
pub fn report(m: &CoverageMatrix, inp: &ReportInputs<'_>) -> Result<String, FindingsError> {
    let d = inp.decisions;
    check_scopes(m, d)?;
    let spots = blind_spots(m, d);
    let undecided: Vec<String> = spots
        .iter()
        .filter(|s| s.decision.is_none())
        .map(|s| format!("{} ({:?})", s.row.key(), s.metric).to_lowercase())
        .collect();
    if !undecided.is_empty() {
        return Err(FindingsError::Undecided(undecided));
    }
    let still_open: Vec<String> = spots
        .iter()
        .filter_map(|s| {
            let d = s.decision.filter(|d| d.verdict == Verdict::Fixed)?;
            Some(format!(
                "{} ({:?}, decision `{}`)",
                s.row.key(),
                s.metric,
                d.scope
            ))
        })
        .map(|x| x.to_lowercase())
        .collect();
    if !still_open.is_empty() {
        return Err(FindingsError::FixedButOpen(still_open));
    }
    let mut s = String::new();
    header(&mut s, m, inp);
    family_summary(&mut s, m, inp);
    blind_spot_tables(&mut s, &spots);
    remediation(&mut s, m, inp);
    by_design(&mut s, d);
    accepted(&mut s, d);
    defense_in_depth(&mut s, m, inp);
    Ok(s)
}

/// Every decision's scope must be a family or transform of the matrix (a typo would
/// otherwise leave a blind spot silently undecided).
fn check_scopes(m: &CoverageMatrix, d: &Decisions) -> Result<(), FindingsError> {
    let unknown: Vec<&str> = d
        .decisions
        .iter()
        .map(|x| x.scope.as_str())
        .filter(|sc| row_of(m, sc).is_none())
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(FindingsError::Decisions {
            path: PathBuf::from("decisions"),
            message: format!(
                "scope(s) not in the matrix (family or transform ids): {}",
                unknown.join(", ")
            ),
        })
    }
}

fn header(s: &mut String, m: &CoverageMatrix, inp: &ReportInputs<'_>) {
    let t = &inp.decisions.target;
    let _ = writeln!(s, "# Adversarial testing report\n");
    let _ = writeln!(
        s,
        "Generated by `rampart redteam findings` from the coverage matrix and the remediation decisions (regenerate with the command below; it fails while a blind spot has no decision).\n"
    );
    let _ = writeln!(s, "```\n{}\n```\n", inp.command);
    let _ = writeln!(s, "- Matrix: generated {} by", m.generated);
    let _ = writeln!(s, "  `{}`", m.command);
    let n_attack: u64 = m.families.iter().map(|r| r.n_attack).sum();
    let n_benign: u64 = m.families.iter().map(|r| r.n_benign).sum();
    let _ = writeln!(
        s,
        "- Variants: {n_attack} of attack prompts, {n_benign} of benign prompts (seed {}; attack sources {}; benign sources {})",
        m.seed,
        m.attack_sources.join(", "),
        m.benign_sources.join(", ")
    );
    if let Some(b) = inp.baseline {
        let _ = writeln!(
            s,
            "- Before the fixes: the matrix of {} (same sources and seed, the build before the fixes); figures below read `before → after`, and a pipeline that matrix did not score reads `(new)`",
            b.generated
        );
    }
    let _ = writeln!(
        s,
        "- Pipelines: {}",
        m.pipelines
            .iter()
            .map(|p| format!("{} ({})", p.name, p.status.as_string()))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let _ = writeln!(
        s,
        "- Blind spot: a family or transform whose TPR on the `{}` pipeline is under {:.0}% (rows that pipeline does not score use the best pipeline that scored them), or whose benign variants are flagged more often than {:.0}% by any of: {} (reported with the worst).\n",
        t.pipeline,
        t.min_tpr * 100.0,
        t.max_fpr * 100.0,
        t.fpr_pipelines
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

fn family_summary(s: &mut String, m: &CoverageMatrix, inp: &ReportInputs<'_>) {
    let d = inp.decisions;
    let t = &d.target;
    let _ = writeln!(s, "## Families against the target\n");
    let mut meets = 0;
    let mut below = Vec::new();
    let _ = writeln!(
        s,
        "| family | attack variants | TPR `{p}` | TPR default | TPR rules | benign FPR ({fp}) | status |",
        p = t.pipeline,
        fp = t.fpr_pipelines.join(" / ")
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for row in m.families.iter().filter(|r| r.family != "original") {
        let was = inp
            .baseline
            .and_then(|b| b.families.iter().find(|r| r.family == row.family));
        let (p, cell) = match tpr_cell(row, &t.pipeline) {
            Some((p, c)) => (p, Some(c)),
            None => (t.pipeline.as_str(), None),
        };
        let main = cell.map_or_else(
            || "n/a".to_owned(),
            |c| {
                let mut x = with_ci(c.tp, c.n_attack);
                if let Some(w) = was.and_then(|w| w.cells.get(p)).and_then(|w| w.tpr) {
                    let _ = write!(x, " (was {})", pct(Some(w)));
                }
                if p != t.pipeline {
                    let _ = write!(x, " [{p}]");
                }
                x
            },
        );
        let other = |name: &str| pct(row.cells.get(name).and_then(|c| c.tpr));
        let fpr = t
            .fpr_pipelines
            .iter()
            .map(|p| pct(row.cells.get(p).and_then(|c| c.fpr)))
            .collect::<Vec<_>>()
            .join(" / ");
        let status = match cell.and_then(|c| c.tpr) {
            Some(v) if v >= t.min_tpr => {
                meets += 1;
                "meets the target".to_owned()
            }
            Some(_) => {
                let verdict = d
                    .find(row, Metric::Tpr)
                    .map_or("undecided", |x| x.verdict.label());
                below.push(format!("{} ({verdict})", row.family));
                format!("below: {verdict}")
            }
            None => "not measured".to_owned(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {main} | {} | {} | {fpr} | {status} |",
            row.family,
            row.n_attack,
            other("default"),
            other("rules")
        );
    }
    let total = m.families.iter().filter(|r| r.family != "original").count();
    let _ = writeln!(
        s,
        "\n{meets} of {total} families meet the target of {:.0}% on `{}`.{}\n",
        t.min_tpr * 100.0,
        t.pipeline,
        if below.is_empty() {
            String::new()
        } else {
            format!(" Below it: {}.", below.join(", "))
        }
    );
}

fn blind_spot_tables(s: &mut String, spots: &[BlindSpot<'_>]) {
    let _ = writeln!(s, "## Blind spots\n");
    for metric in [Metric::Tpr, Metric::Fpr] {
        let rows: Vec<&BlindSpot<'_>> = spots.iter().filter(|b| b.metric == metric).collect();
        let (title, fig) = match metric {
            Metric::Tpr => ("Detection (attack variants missed)", "TPR"),
            Metric::Fpr => ("False alarms (benign variants flagged)", "FPR"),
        };
        let _ = writeln!(s, "### {title}\n");
        if rows.is_empty() {
            let _ = writeln!(s, "None.\n");
            continue;
        }
        let _ = writeln!(
            s,
            "| row | pipeline | {fig} [95% CI] | decision | layer | why |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for b in rows {
            let fig = match metric {
                Metric::Tpr => with_ci(b.cell.tp, b.cell.n_attack),
                Metric::Fpr => with_ci(b.cell.fp, b.cell.n_benign),
            };
            let kind = if b.row.transform.is_some() {
                ""
            } else {
                " (family)"
            };
            // A transform under its family's decision points to it instead of repeating it.
            let (verdict, layer, why) = match b.decision {
                None => ("undecided", String::new(), String::new()),
                Some(d) if b.row.transform.is_some() && d.scope == b.row.family => (
                    d.verdict.label(),
                    format!("as `{}`", d.scope),
                    format!("as `{}` (family)", d.scope),
                ),
                Some(d) => (d.verdict.label(), md_escape(&d.layer), md_escape(&d.why)),
            };
            let _ = writeln!(
                s,
                "| `{}`{kind} | {} | {fig} | {verdict} | {layer} | {why} |",
                b.row.key(),
                b.pipeline,
            );
        }
        let _ = writeln!(s);
    }
}

fn remediation(s: &mut String, m: &CoverageMatrix, inp: &ReportInputs<'_>) {
    let d = inp.decisions;
    let t = &d.target;
    let _ = writeln!(s, "## Remediation decisions\n");
    let _ = writeln!(s, "### Fixed\n");
    let fixed: Vec<&Decision> = d
        .decisions
        .iter()
        .filter(|x| x.verdict == Verdict::Fixed)
        .collect();
    if fixed.is_empty() {
        let _ = writeln!(s, "Nothing.\n");
    } else {
        let _ = writeln!(
            s,
            "| row | about | layer | what was done | default | `{}` | where |",
            t.pipeline
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|");
        for x in fixed {
            let now = row_of(m, &x.scope);
            let was = inp.baseline.and_then(|b| row_of(b, &x.scope));
            let fig = |p: &str| {
                let get = |r: Option<&Row>| {
                    r.and_then(|r| r.cells.get(p)).and_then(|c| match x.metric {
                        Metric::Tpr => c.tpr,
                        Metric::Fpr => c.fpr,
                    })
                };
                before_after(get(now), get(was))
            };
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {} | {} | {} | {} |",
                x.scope,
                x.metric.label(),
                md_escape(&x.layer),
                md_escape(&x.action),
                fig("default"),
                fig(&t.pipeline),
                x.reference
                    .as_deref()
                    .map_or_else(String::new, |r| format!("`{r}`"))
            );
        }
        let _ = writeln!(
            s,
            "\nFigures: {} of the row (`before → after (points)`); `default` is rules + linear, the embedded configuration.\n",
            if inp.baseline.is_some() {
                "the matrix before the fixes, then this one"
            } else {
                "no baseline was given, so only the current figure"
            }
        );
    }
    let _ = writeln!(s, "### Not fixed in this release\n");
    let open: Vec<&Decision> = d
        .decisions
        .iter()
        .filter(|x| {
            !matches!(
                x.verdict,
                Verdict::Fixed | Verdict::AcceptedRisk | Verdict::ByDesign
            )
        })
        .collect();
    if open.is_empty() {
        let _ = writeln!(s, "Nothing.\n");
    } else {
        let _ = writeln!(
            s,
            "| row | about | decision | layer | what would fix it | why not now |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for x in open {
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {} | {} | {} |",
                x.scope,
                x.metric.label(),
                x.verdict.label(),
                md_escape(&x.layer),
                md_escape(&x.action),
                md_escape(&x.why)
            );
        }
        let _ = writeln!(s);
    }
}

fn by_design(s: &mut String, d: &Decisions) {
    let _ = writeln!(s, "### By design: flagged on purpose\n");
    let list: Vec<&Decision> = d
        .decisions
        .iter()
        .filter(|x| x.verdict == Verdict::ByDesign)
        .collect();
    if list.is_empty() {
        let _ = writeln!(s, "Nothing.\n");
        return;
    }
    let _ = writeln!(s, "| row | about | layer | behaviour | why |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for x in list {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} |",
            x.scope,
            x.metric.label(),
            md_escape(&x.layer),
            md_escape(&x.action),
            md_escape(&x.why)
        );
    }
    let _ = writeln!(s);
}

fn accepted(s: &mut String, d: &Decisions) {
    let _ = writeln!(s, "## Accepted risks\n");
    let list: Vec<&Decision> = d
        .decisions
        .iter()
        .filter(|x| x.verdict == Verdict::AcceptedRisk)
        .collect();
    if list.is_empty() {
        let _ = writeln!(s, "None.\n");
        return;
    }
    for x in list {
        let _ = writeln!(s, "### `{}` ({})\n", x.scope, x.metric.label());
        let _ = writeln!(
            s,
            "- **Criteria:** {}",
            x.criteria
                .iter()
                .map(|c| c.label())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(s, "- **Why:** {}", x.why.trim());
        let _ = writeln!(
            s,
            "- **Mitigation in place:** {} ({})",
            x.action.trim(),
            x.layer
        );
        let _ = writeln!(
            s,
            "- **Residual risk:** {}\n",
            x.residual.as_deref().unwrap_or("").trim()
        );
    }
}

/// The layers, in pipeline order, with the matrix columns whose difference is what each one
/// adds. The pipelines are cumulative: rules ⊂ default (rules + linear) ⊂ the transformer
/// column (`cascade`: + the transformer where the linear score leaves a prompt open; in an
/// older matrix, the retired `fused`); judge and conversation are separate columns.
#[derive(Debug, Clone, Copy)]
struct Stack {
    /// (legend, matrix column, fill), in pipeline order.
    layers: [(&'static str, &'static str, &'static str); 3],
    /// The transformer's box in the diagram's pipeline.
    stage: &'static str,
}

impl Stack {
    /// The stack of a matrix: its transformer column is `cascade`, or `fused` in a matrix
    /// that has that column and no `cascade` (one made before the fused pipeline retired).
    fn of(m: &CoverageMatrix) -> Stack {
        let has = |name: &str| m.pipelines.iter().any(|p| p.name == name);
        let (legend, col, stage) = if !has("cascade") && has("fused") {
            ("+ transformer (fused)", "fused", "transformer + fuse")
        } else {
            ("+ transformer (cascade)", "cascade", "transformer (gated)")
        };
        Stack {
            layers: [
                ("rules", "rules", "#4575b4"),
                ("+ linear", "default", "#74add1"),
                (legend, col, "#abd9e9"),
            ],
            stage,
        }
    }

    /// The transformer's column.
    fn top(&self) -> &'static str {
        self.layers[2].1
    }

    /// Whether the row was scored by any pipeline of the stack.
    fn scored(&self, row: &Row) -> bool {
        self.layers
            .iter()
            .any(|(_, c, _)| row.cells.contains_key(*c))
    }

    /// What each layer adds for a row: the net TPR gain of each pipeline over the one before
    /// it (never below zero), and what is still missed by the best of them.
    fn gains(&self, row: &Row) -> ([f64; 3], f64) {
        let mut gains = [0.0; 3];
        let mut prev = 0.0f64;
        for (i, (_, col, _)) in self.layers.iter().enumerate() {
            if let Some(t) = row.cells.get(*col).and_then(|c| c.tpr) {
                gains[i] = (t - prev).max(0.0);
                prev = prev.max(t);
            }
        }
        (gains, (1.0 - prev).max(0.0))
    }
}

fn defense_in_depth(s: &mut String, m: &CoverageMatrix, inp: &ReportInputs<'_>) {
    let _ = writeln!(s, "## Defense in depth: which layer catches what\n");
    let stack = Stack::of(m);
    let _ = writeln!(s, "![defense in depth]({})\n", inp.svg_name);
    let _ = writeln!(
        s,
        "Each family's TPR split by the layer that adds it: the rules pipeline's TPR, then what the linear layer adds (default − rules), then what the transformer adds ({top} − default); negative differences count as zero. Normalization and decoding are not a column: they feed every layer (a decoded view is scanned by all of them). The judge and conversation columns are separate pipelines, shown where they scored the family.\n",
        top = stack.top()
    );
    let _ = writeln!(
        s,
        "| family | rules | + linear | + transformer | still missed | judge | conversation |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for row in &m.families {
        let (g, missed) = stack.gains(row);
        let other = |p: &str| pct(row.cells.get(p).and_then(|c| c.tpr));
        if stack.scored(row) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                row.family,
                pct(Some(g[0])),
                pct(Some(g[1])),
                pct(Some(g[2])),
                pct(Some(missed)),
                other("judge"),
                other("conversation")
            );
        } else {
            let _ = writeln!(
                s,
                "| {} | n/a | n/a | n/a | n/a | {} | {} |",
                row.family,
                other("judge"),
                other("conversation")
            );
        }
    }
    let _ = writeln!(s);
}

/// The defense-in-depth diagram: the layers in pipeline order across the top, then one
/// stacked bar per family, split by the layer that adds each share of the TPR, and what is
/// still missed; the judge's and the conversation scanner's TPR at the right where measured;
/// the detection target, if given, as a dashed line.
pub fn svg(m: &CoverageMatrix, target: Option<&Target>) -> String {
    const LEFT: usize = 140;
    const BAR: usize = 520;
    const TOP: usize = 150;
    const H: usize = 26;
    let stack = Stack::of(m);
    let width = LEFT + BAR + 230;
    let height = TOP + m.families.len() * H + 70;
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
        r#"<text x="10" y="22" font-size="15" font-weight="bold">Defense in depth: which layer catches each attack family (seed {})</text>"#,
        m.seed
    );
    // The pipeline, left to right.
    let stages = [
        ("normalize + decode", "#dddddd"),
        ("rules", stack.layers[0].2),
        ("linear", stack.layers[1].2),
        (stack.stage, stack.layers[2].2),
        ("judge (if unsure)", "#fdae61"),
        ("conversation", "#f46d43"),
        ("policy ratchet", "#dddddd"),
    ];
    let bw = (width - 20) / stages.len();
    for (i, (name, fill)) in stages.iter().enumerate() {
        let x = 10 + i * bw;
        let _ = writeln!(
            s,
            r##"<rect x="{x}" y="40" width="{}" height="36" rx="4" fill="{fill}" stroke="#555555"/>"##,
            bw - 14
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="62" font-size="10" text-anchor="middle">{}</text>"#,
            x + (bw - 14) / 2,
            xml(name)
        );
        if i + 1 < stages.len() {
            let _ = writeln!(
                s,
                r##"<path d="M{} 58 l10 0 m-4 -4 l4 4 l-4 4" stroke="#555555" fill="none"/>"##,
                x + bw - 13
            );
        }
    }
    let _ = writeln!(
        s,
        r##"<text x="10" y="100" font-size="11" fill="#444444">Bar: TPR of each family, split by the layer that adds it (rules, then linear: default − rules, then the transformer: {} − default); white: still missed.</text>"##,
        stack.top()
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="116" font-size="11" fill="#444444">Right: TPR of the judge and the conversation scanner, separate pipelines, where measured. Normalization feeds every layer.</text>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="11" font-weight="bold" text-anchor="middle">judge</text><text x="{}" y="{}" font-size="11" font-weight="bold" text-anchor="middle">conversation</text>"#,
        LEFT + BAR + 50,
        TOP - 8,
        LEFT + BAR + 150,
        TOP - 8
    );
    for (i, row) in m.families.iter().enumerate() {
        let y = TOP + i * H;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="12" text-anchor="end">{}</text>"#,
            LEFT - 8,
            y + 17,
            xml(&row.family)
        );
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{}" width="{BAR}" height="{}" fill="#ffffff" stroke="#888888"/>"##,
            y + 3,
            H - 6
        );
        if stack.scored(row) {
            let (g, _) = stack.gains(row);
            let mut x = LEFT as f64;
            for (k, (label, _, fill)) in stack.layers.iter().enumerate() {
                let w = g[k] * BAR as f64;
                if w <= 0.0 {
                    continue;
                }
                let _ = writeln!(
                    s,
                    r#"<rect x="{x:.1}" y="{}" width="{w:.1}" height="{}" fill="{fill}"><title>{}: {:.1}%</title></rect>"#,
                    y + 3,
                    H - 6,
                    xml(label),
                    g[k] * 100.0
                );
                if w >= 34.0 {
                    let _ = writeln!(
                        s,
                        r#"<text x="{:.1}" y="{}" font-size="10" text-anchor="middle">{:.0}%</text>"#,
                        x + w / 2.0,
                        y + 17,
                        g[k] * 100.0
                    );
                }
                x += w;
            }
        } else {
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{}" font-size="10" fill="#666666">not a single-prompt variant: see the conversation column</text>"##,
                LEFT + 8,
                y + 17
            );
        }
        for (k, p) in ["judge", "conversation"].iter().enumerate() {
            let t = row.cells.get(*p).and_then(|c| c.tpr);
            let label = t.map_or_else(|| "–".to_owned(), |v| format!("{:.1}%", v * 100.0));
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" font-size="11" text-anchor="middle">{label}</text>"#,
                LEFT + BAR + 50 + k * 100,
                y + 17
            );
        }
    }
    if let Some(t) = target {
        let x = LEFT as f64 + t.min_tpr * BAR as f64;
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#333333" stroke-dasharray="4 3"/><text x="{x:.1}" y="{}" font-size="10" text-anchor="middle">{} target {:.0}%</text>"##,
            TOP - 2,
            TOP + m.families.len() * H + 2,
            TOP - 6,
            xml(&t.pipeline),
            t.min_tpr * 100.0
        );
    }
    let ly = TOP + m.families.len() * H + 20;
    let mut x = LEFT;
    for (label, _, fill) in stack.layers {
        let _ = writeln!(
            s,
            r##"<rect x="{x}" y="{ly}" width="14" height="14" fill="{fill}" stroke="#888888"/><text x="{}" y="{}" font-size="11">{}</text>"##,
            x + 18,
            ly + 11,
            xml(label)
        );
        x += 170;
    }
    let _ = writeln!(
        s,
        r##"<rect x="{x}" y="{ly}" width="14" height="14" fill="#ffffff" stroke="#888888"/><text x="{}" y="{}" font-size="11">still missed</text>"##,
        x + 18,
        ly + 11
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::report::{PipelineEntry, PipelineStatus};
    use std::collections::BTreeMap;

    fn cell(tp: u64, fp: u64) -> Cell {
        Cell {
            tpr: Some(tp as f64 / 100.0),
            tp,
            n_attack: 100,
            fpr: Some(fp as f64 / 100.0),
            fp,
            n_benign: 100,
        }
    }

    fn row(
        family: &str,
        transform: Option<&str>,
        rules: u64,
        default: u64,
        cascade: u64,
        fp: u64,
    ) -> Row {
        let mut cells = BTreeMap::new();
        cells.insert("rules".to_owned(), cell(rules, 0));
        cells.insert("default".to_owned(), cell(default, fp));
        cells.insert("cascade".to_owned(), cell(cascade, fp));
        Row {
            transform: transform.map(str::to_owned),
            family: family.to_owned(),
            n_attack: 100,
            n_benign: 100,
            skipped: 0,
            cells,
        }
    }

    fn matrix(padding_cascade: u64) -> CoverageMatrix {
        let pipes = ["rules", "default", "cascade"].map(|p| PipelineEntry {
            name: p.to_owned(),
            config: format!("configs/{p}.toml"),
            status: PipelineStatus::Ok,
        });
        CoverageMatrix {
            version: 1,
            command: "rampart redteam report …".to_owned(),
            generated: "2026-11-26T00:00:00Z".to_owned(),
            seed: 22,
            attack_sources: vec!["a".to_owned()],
            benign_sources: vec!["b".to_owned()],
            pipelines: pipes.to_vec(),
            families: vec![
                row("original", None, 5, 90, 92, 0),
                row("encoding", None, 50, 90, 95, 40),
                row("padding", None, 5, 30, padding_cascade, 0),
            ],
            transforms: vec![
                row("encoding", Some("encoding.base64"), 50, 90, 95, 40),
                row("padding", Some("padding.before"), 5, 30, padding_cascade, 0),
            ],
        }
    }

    const DECISIONS: &str = r#"
version = 1
[target]
pipeline = "cascade"
min_tpr = 0.8
fpr_pipelines = ["default"]
max_fpr = 0.05

[[decision]]
scope = "padding"
metric = "tpr"
verdict = "fixable_by_model"
layer = "linear"
action = "train on padded variants of the training split"
why = "the payload is diluted"

[[decision]]
scope = "encoding"
metric = "fpr"
verdict = "accepted_risk"
layer = "rules"
action = "encoded text is flagged"
why = "an encoded prompt is itself a signal"
criteria = ["false_alarm_cost"]
residual = "benign encoded text gets SANITIZE or BLOCK"
"#;

    fn decisions() -> Decisions {
        Decisions::parse(DECISIONS, Path::new("d.toml")).unwrap()
    }

    fn inputs<'a>(d: &'a Decisions, b: Option<&'a CoverageMatrix>) -> ReportInputs<'a> {
        ReportInputs {
            command: "rampart redteam findings",
            decisions: d,
            baseline: b,
            svg_name: "defense_in_depth.svg",
        }
    }

    #[test]
    fn every_blind_spot_is_listed_with_its_decision() {
        let m = matrix(60);
        let d = decisions();
        let spots = blind_spots(&m, &d);
        let keys: Vec<(String, Metric)> = spots
            .iter()
            .map(|b| (b.row.key().to_owned(), b.metric))
            .collect();
        assert_eq!(
            keys,
            [
                ("encoding".to_owned(), Metric::Fpr),
                ("padding".to_owned(), Metric::Tpr),
                ("encoding.base64".to_owned(), Metric::Fpr),
                ("padding.before".to_owned(), Metric::Tpr),
            ]
        );
        // A transform without its own decision takes its family's.
        assert!(spots.iter().all(|b| b.decision.is_some()));
        let md = report(&m, &inputs(&d, None)).unwrap();
        assert!(
            md.contains("| `padding.before` | cascade | 60.0% ["),
            "{md}"
        );
        assert!(md.contains("1 of 2 families meet the target"), "{md}");
        assert!(md.contains("### `encoding` (false alarms)"), "{md}");
    }

    #[test]
    fn a_new_blind_spot_without_a_decision_fails_the_report() {
        let m = matrix(60);
        let mut d = decisions();
        d.decisions.retain(|x| x.scope != "padding");
        let err = report(&m, &inputs(&d, None)).unwrap_err();
        let FindingsError::Undecided(list) = err else {
            panic!("{err}");
        };
        assert_eq!(list, ["padding (tpr)", "padding.before (tpr)"]);
    }

    #[test]
    fn fixed_rows_show_before_and_after() {
        let before = matrix(60);
        let after = matrix(85);
        let text = DECISIONS.replace("fixable_by_model", "fixed");
        let d = Decisions::parse(&text, Path::new("d.toml")).unwrap();
        let md = report(&after, &inputs(&d, Some(&before))).unwrap();
        assert!(md.contains("60.0% → 85.0% (+25.0)"), "{md}");
        assert!(md.contains("2 of 2 families meet the target"), "{md}");
    }

    #[test]
    fn a_fixed_decision_on_a_row_still_under_the_target_fails_the_report() {
        // `fixed` while the row is still a blind spot would hide it behind a fix.
        let m = matrix(60);
        let text = DECISIONS.replace("fixable_by_model", "fixed");
        let d = Decisions::parse(&text, Path::new("d.toml")).unwrap();
        let err = report(&m, &inputs(&d, None)).unwrap_err();
        let FindingsError::FixedButOpen(list) = err else {
            panic!("{err}");
        };
        assert_eq!(
            list,
            [
                "padding (tpr, decision `padding`)",
                "padding.before (tpr, decision `padding`)"
            ]
        );
    }

    #[test]
    fn bad_decision_files_are_refused_with_the_reason() {
        let cases = [
            (DECISIONS.replace("version = 1", "version = 2"), "version 2"),
            (
                DECISIONS.replace("residual = ", "resid = "),
                "unknown field",
            ),
            (
                DECISIONS.replace("criteria = [\"false_alarm_cost\"]\n", ""),
                "needs `criteria`",
            ),
            (
                DECISIONS.replace("min_tpr = 0.8", "min_tpr = 80"),
                "not a rate",
            ),
            (
                DECISIONS.replace(
                    "scope = \"encoding\"\nmetric = \"fpr\"",
                    "scope = \"padding\"\nmetric = \"tpr\"",
                ),
                "two decisions",
            ),
            (
                DECISIONS.replace("verdict = \"fixable_by_model\"", "verdict = \"maybe\""),
                "unknown variant",
            ),
        ];
        for (text, want) in cases {
            let err = Decisions::parse(&text, Path::new("d.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
        // A scope the matrix does not have is refused (a typo would hide a blind spot).
        let d = Decisions::parse(
            &DECISIONS.replace("scope = \"padding\"", "scope = \"paddin\""),
            Path::new("d.toml"),
        )
        .unwrap();
        let err = report(&matrix(60), &inputs(&d, None))
            .unwrap_err()
            .to_string();
        assert!(err.contains("paddin"), "{err}");
    }

    #[test]
    fn the_diagram_stacks_each_layers_gain() {
        let m = matrix(60);
        let stack = Stack::of(&m);
        assert_eq!(stack.top(), "cascade");
        let (g, missed) = stack.gains(&m.families[2]);
        assert!(
            (g[0] - 0.05).abs() < 1e-9 && (g[1] - 0.25).abs() < 1e-9 && (g[2] - 0.30).abs() < 1e-9
        );
        assert!((missed - 0.40).abs() < 1e-9);
        let d = decisions();
        let svg = svg(&m, Some(&d.target));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<title>").count(), 9);
        assert!(svg.contains("cascade target 80%"), "{svg}");
        assert!(svg.contains("+ transformer (cascade)"), "{svg}");
    }

    #[test]
    fn a_matrix_from_before_the_cascade_stacks_the_fused_column() {
        // A matrix made when `fused` was the transformer column (the tracked baseline) still
        // shows what the transformer added.
        let mut m = matrix(60);
        let rename = |r: &mut Row| {
            if let Some(c) = r.cells.remove("cascade") {
                r.cells.insert("fused".to_owned(), c);
            }
        };
        m.families.iter_mut().for_each(rename);
        m.transforms.iter_mut().for_each(rename);
        for p in &mut m.pipelines {
            if p.name == "cascade" {
                p.name = "fused".to_owned();
            }
        }
        let stack = Stack::of(&m);
        assert_eq!(stack.top(), "fused");
        let (g, _) = stack.gains(&m.families[2]);
        assert!((g[2] - 0.30).abs() < 1e-9);
        assert!(svg(&m, None).contains("+ transformer (fused)"));
    }
}
