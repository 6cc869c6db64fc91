//! `rampart redteam findings`: the red-team report (`Adversarial_Testing_Report.md`) and the
//! defense-in-depth diagram, generated from a coverage matrix and the remediation decisions.
//! The work is done by `rampart_redteam::findings`.

use anyhow::{Context, Result};
use clap::Args;
use rampart_redteam::findings::{self, Decisions, ReportInputs};
use rampart_redteam::report::CoverageMatrix;
use std::path::PathBuf;

pub const AFTER_HELP: &str = "A blind spot is a family or transform under the decisions \
file's detection target, or whose benign variants are flagged over its false-alarm ceiling. \
Every blind spot needs a [[decision]] (fixed, fixable_by_rules, fixable_by_model, \
needs_judge, needs_conversation, accepted_risk with criteria and residual risk, by_design): \
without one, or with `fixed` while the matrix still shows it, the command fails and names it, \
so the report cannot go stale silently. Exit status: 0 written, 1 error (unreadable matrix or \
decisions, undecided blind spots).";

#[derive(Debug, Args)]
pub struct FindingsArgs {
    /// The coverage matrix (`rampart redteam report`'s JSON; default:
    /// OUT_DIR/coverage_matrix.json, where `report` writes it).
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// The matrix before the fixes: fixed rows show `before → after`.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// The remediation decisions (TOML, version 1).
    #[arg(
        long,
        value_name = "FILE",
        default_value = "docs/reports/redteam_decisions.toml"
    )]
    pub decisions: PathBuf,
    /// Where the report and the diagram go (Adversarial_Testing_Report.md,
    /// defense_in_depth.svg). The tracked copies are regenerated with `--out-dir docs/reports`.
    #[arg(long, value_name = "DIR", default_value = super::report::DEFAULT_OUT_DIR)]
    pub out_dir: PathBuf,
    /// The Markdown report (default: OUT_DIR/Adversarial_Testing_Report.md).
    #[arg(long, value_name = "FILE")]
    pub out_md: Option<PathBuf>,
    /// The defense-in-depth diagram (SVG), linked from the report by its file name (default:
    /// OUT_DIR/defense_in_depth.svg).
    #[arg(long, value_name = "FILE")]
    pub out_svg: Option<PathBuf>,
}

pub fn run(args: &FindingsArgs) -> Result<u8> {
    let out = |given, name| super::report::out_path(given, &args.out_dir, name);
    let matrix_path = out(args.matrix.as_ref(), "coverage_matrix.json");
    let out_md = out(args.out_md.as_ref(), "Adversarial_Testing_Report.md");
    let out_svg = out(args.out_svg.as_ref(), "defense_in_depth.svg");
    let matrix = CoverageMatrix::load(&matrix_path)
        .with_context(|| format!("coverage matrix {}", matrix_path.display()))?;
    let baseline = args
        .baseline
        .as_deref()
        .map(CoverageMatrix::load)
        .transpose()?;
    let decisions = Decisions::load(&args.decisions)?;
    let mut command = format!(
        "rampart redteam findings --matrix {} --decisions {}",
        matrix_path.display(),
        args.decisions.display()
    );
    if let Some(b) = &args.baseline {
        command.push_str(&format!(" --baseline {}", b.display()));
    }
    if args.out_dir != std::path::Path::new(super::report::DEFAULT_OUT_DIR) {
        command.push_str(&format!(" --out-dir {}", args.out_dir.display()));
    }
    let svg_name = out_svg
        .file_name()
        .map_or_else(|| "defense_in_depth.svg".into(), |n| n.to_string_lossy());
    let md = findings::report(
        &matrix,
        &ReportInputs {
            command: &command,
            decisions: &decisions,
            baseline: baseline.as_ref(),
            svg_name: &svg_name,
        },
    )?;
    // Both are made before either is written: a failed report leaves the old pair in place.
    let svg = findings::svg(&matrix, Some(&decisions.target));
    super::report::write(&out_md, &md)?;
    super::report::write(&out_svg, &svg)?;
    let spots = findings::blind_spots(&matrix, &decisions).len();
    eprintln!(
        "wrote {} and {} ({spots} blind spot(s), every one decided)",
        out_md.display(),
        out_svg.display()
    );
    Ok(0)
}
