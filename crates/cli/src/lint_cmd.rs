//! `rampart lint`: the guardrail linter for Python LLM applications (crate `rampart-lint`).

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use rampart_lint::{LintConfig, Linter, Severity, report};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Exit status when a finding is at or above `--fail-on`.
pub const EXIT_FINDINGS: u8 = 4;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Text for people: each finding with the value's path and the fix.
    Human,
    /// One JSON document.
    Json,
    /// SARIF 2.1.0, for code-scanning tools.
    Sarif,
}

/// The lowest severity that fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Any finding.
    Note,
    /// Warnings and errors.
    Warning,
    /// Errors only.
    Error,
    /// Never (exit 0 whatever is found).
    Never,
}

/// Options of `rampart lint`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit status: 0 nothing at or above --fail-on, 4 findings at or above \
    it, 3 some files could not be read (named in the output), 1 a usage or configuration error. \
    Configuration: --config FILE reads its [lint] section; without it, [tool.rampart.lint] of \
    ./pyproject.toml when there is one. Suppress a finding with \
    `# rampart: ignore[RL003] -- the reason` on its line or the line above. Rules: \
    docs/LINTER_RULES.md."
)]
pub struct LintArgs {
    /// Python files and folders (folders are walked, respecting .gitignore).
    #[arg(value_name = "PATH", default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Write the report to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A TOML file whose [lint] section configures the linter.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The project's Rampart tool policy (overrides the configuration's `tool_policy`).
    #[arg(long, value_name = "FILE")]
    pub tool_policy: Option<PathBuf>,
    /// The lowest severity that makes the run fail (exit 4).
    #[arg(long, value_enum, default_value_t = FailOn::Warning)]
    pub fail_on: FailOn,
    /// Print docs/LINTER_RULES.md (generated from the rule data) and exit.
    #[arg(long)]
    pub rules_doc: bool,
}

#[derive(Debug, serde::Deserialize)]
struct ConfigFile {
    lint: Option<LintConfig>,
}

#[derive(Debug, serde::Deserialize)]
struct PyTool {
    rampart: Option<PyRampart>,
}

#[derive(Debug, serde::Deserialize)]
struct PyRampart {
    lint: Option<LintConfig>,
}

/// The configuration: `--config`'s [lint], else pyproject.toml's [tool.rampart.lint], else
/// the defaults. Relative paths in it are relative to the file.
fn load_config(args: &LintArgs) -> Result<LintConfig> {
    let (mut cfg, base) = if let Some(p) = &args.config {
        let src = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let f: ConfigFile =
            toml::from_str(&src).with_context(|| format!("{}: [lint] section", p.display()))?;
        (
            f.lint.unwrap_or_default(),
            p.parent().map(Path::to_path_buf),
        )
    } else if Path::new("pyproject.toml").is_file() {
        let src = std::fs::read_to_string("pyproject.toml").context("reading pyproject.toml")?;
        // Other tools' sections are theirs: only [tool.rampart.lint] is read strictly.
        let f: toml::Table = toml::from_str(&src).context("pyproject.toml is not TOML")?;
        let ours = f
            .get("tool")
            .and_then(|t| t.get("rampart"))
            .map(|r| toml::Value::Table(toml::Table::from_iter([("rampart".into(), r.clone())])));
        let cfg = match ours {
            Some(v) => {
                let t: PyTool = v
                    .try_into()
                    .context("pyproject.toml: [tool.rampart.lint]")?;
                t.rampart.and_then(|r| r.lint).unwrap_or_default()
            }
            None => LintConfig::default(),
        };
        (cfg, None)
    } else {
        (LintConfig::default(), None)
    };
    if let (Some(p), Some(base)) = (&cfg.tool_policy, &base)
        && p.is_relative()
    {
        cfg.tool_policy = Some(base.join(p));
    }
    if let Some(p) = &args.tool_policy {
        cfg.tool_policy = Some(p.clone());
    }
    Ok(cfg)
}

/// Runs `rampart lint`.
pub fn run(args: &LintArgs) -> Result<u8> {
    let config = load_config(args)?;
    let linter = Linter::new(config)?;
    if args.rules_doc {
        out!("{}", linter.rules().markdown())?;
        return Ok(0);
    }
    for p in &args.paths {
        if !p.exists() {
            bail!("{}: no such file or folder", p.display());
        }
    }
    let started = Instant::now();
    let report = linter.lint_paths(&args.paths);
    let seconds = started.elapsed().as_secs_f64();
    let text = match args.format {
        Format::Human => report::human(&linter, &report),
        Format::Json => serde_json::to_string_pretty(&report::json(&linter, &report))? + "\n",
        Format::Sarif => serde_json::to_string_pretty(&report::sarif(&linter, &report))? + "\n",
    };
    match &args.output {
        Some(p) => std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?,
        None => out!("{text}")?,
    }
    eprintln!(
        "rampart: linted {} file(s) in {:.3} s ({:.0} files/s)",
        report.files,
        seconds,
        report.files as f64 / seconds.max(1e-9)
    );
    let floor = match args.fail_on {
        FailOn::Never => None,
        FailOn::Note => Some(Severity::Note),
        FailOn::Warning => Some(Severity::Warning),
        FailOn::Error => Some(Severity::Error),
    };
    let failing = floor.is_some_and(|f| {
        report
            .results
            .iter()
            .flat_map(|r| &r.findings)
            .any(|x| linter.severity(x.rule) >= f)
    });
    Ok(if failing {
        EXIT_FINDINGS
    } else if !report.skipped.is_empty() {
        crate::EXIT_BATCH_ERRORS
    } else {
        0
    })
}
