//! `rampart discover [mine] …`, `rampart discover validate FILE`, `rampart discover to-rule …`.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use rampart_datasets::{CLEAN_BENIGN_NAME, Record, default_data_dir, load};
use rampart_discover::{
    BENIGN_CORPUS_NAME, Corpus, DEFAULT_OUTPUT_PATH, MineInput, MineOptions, Recommendation,
    RunContext, ToRuleOptions, existing_rules_matcher, find_candidate, mine, read_eval_log,
    to_jsonl, to_rule, validate_jsonl,
};
use rampart_rules::RulePack;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `rampart discover …`: mining is the default; `validate` and `to-rule` are subcommands.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct DiscoverArgs {
    #[command(subcommand)]
    pub command: Option<DiscoverCommand>,
    // Boxed: keeps `rampart`'s command enum small.
    #[command(flatten)]
    pub mine: Box<MineArgs>,
}

#[derive(Debug, Subcommand)]
pub enum DiscoverCommand {
    /// Mine candidate patterns from eval logs (the same as `rampart discover --log …`).
    Mine(Box<MineArgs>),
    /// Check a pattern_candidates.v1 file against the schema; exits 1 when it is invalid.
    Validate {
        /// The file.
        file: PathBuf,
    },
    /// Turn a candidate into a rule-pack entry (TOML, with must_match examples, tested).
    ToRule(ToRuleArgs),
}

#[derive(Debug, Args)]
pub struct MineArgs {
    /// Eval log files (reports/evals/eval_{YYYYMMDD_HHMMSS}_{DATASET}.jsonl) of one run.
    #[arg(long = "log", value_name = "FILE", num_args = 1.., required = true)]
    pub logs: Vec<PathBuf>,
    /// Where datasets named in the logs are looked up (DIR/NAME.jsonl) when not built in
    /// [default: $RAMPART_DATA_DIR, else data].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// A dataset (file or name) to join log prompt ids to text, by its name (repeatable).
    /// Datasets the logs name and this does not give are loaded by name.
    #[arg(long = "dataset", value_name = "FILE_OR_NAME")]
    pub datasets: Vec<String>,
    /// The clean benign corpus for the regression check.
    #[arg(long, value_name = "NAME_OR_FILE", default_value = CLEAN_BENIGN_NAME)]
    pub benign: String,
    /// Output file.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_OUTPUT_PATH)]
    pub out: PathBuf,
    /// Minimum number of attack prompts (TP + FN) a pattern must match.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub min_support: u64,
    /// At most N candidates are written.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max: usize,
    /// Attack match rate must be at least this multiple of the benign match rate.
    #[arg(long, value_name = "X", default_value_t = 3.0)]
    pub min_lift: f64,
    /// Policy version the logs were evaluated under (default: the embedded configuration's).
    #[arg(long, value_name = "V")]
    pub policy_version: Option<String>,
    /// The configuration to mine when the logs hold several.
    #[arg(long, value_name = "NAME")]
    pub config_name: Option<String>,
    /// Extra rule packs counted as "already covered" besides the default pack (repeatable).
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ToRuleArgs {
    /// The pattern_candidates.v1 file.
    pub file: PathBuf,
    /// The candidate's pattern_id.
    #[arg(long = "id", value_name = "PATTERN_ID")]
    pub id: String,
    /// Rule pack to append to (created when missing). Default: print a new pack to stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Turn a candidate recommended `exclude` into a rule anyway.
    #[arg(long)]
    pub force: bool,
    /// Rule id to use (default: the lowest free id of the category's prefix).
    #[arg(long, value_name = "ID")]
    pub rule_id: Option<String>,
}

pub fn run(args: &DiscoverArgs) -> Result<u8> {
    match &args.command {
        None => run_mine(&args.mine),
        Some(DiscoverCommand::Mine(m)) => run_mine(m),
        Some(DiscoverCommand::Validate { file }) => run_validate(file),
        Some(DiscoverCommand::ToRule(t)) => run_to_rule(t),
    }
}

/// `git rev-parse HEAD`, or "unknown".
fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| (7..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_string())
}

/// Loads a dataset (file, built-in name, or DATA_DIR/NAME.jsonl) into `datasets` by its name.
fn load_into(
    datasets: &mut BTreeMap<String, Vec<Record>>,
    spec: &str,
    data_dir: &Path,
    hint: &str,
) -> Result<()> {
    let d = load(spec, data_dir).with_context(|| format!("loading dataset {spec}{hint}"))?;
    if let Some(first) = d.errors.first() {
        eprintln!(
            "rampart: warning: dataset {}: {} unreadable row(s) left out (first: {first})",
            d.name,
            d.errors.len()
        );
    }
    datasets.insert(d.name, d.records);
    Ok(())
}

fn run_mine(args: &MineArgs) -> Result<u8> {
    let mut logs = Vec::new();
    for path in &args.logs {
        logs.extend(read_eval_log(path)?);
    }
    // Datasets: the ones given, then every other one the logs name, by name.
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let mut datasets: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    for spec in &args.datasets {
        load_into(&mut datasets, spec, &data_dir, "")?;
    }
    let named: BTreeSet<String> = logs.iter().map(|r| r.dataset.clone()).collect();
    for name in &named {
        if !datasets.contains_key(name) {
            load_into(
                &mut datasets,
                name,
                &data_dir,
                " (named in the logs; give the file with --dataset FILE or set --data-dir)",
            )?;
        }
    }
    let benign = load(&args.benign, &data_dir)
        .with_context(|| format!("loading the benign corpus {}", args.benign))?;
    if benign.name != BENIGN_CORPUS_NAME {
        eprintln!(
            "rampart: warning: benign corpus is named {:?}; pattern_candidates.v1 expects {BENIGN_CORPUS_NAME:?} in evidence.benign_regression, so `rampart discover validate` will reject the file",
            benign.name
        );
    }
    let mut packs = Vec::new();
    for p in &args.rules {
        packs.push(RulePack::from_path(p).map_err(|e| anyhow::anyhow!("{e}"))?);
    }
    let existing = existing_rules_matcher(packs)?;
    let policy_version = args.policy_version.clone().unwrap_or_else(|| {
        crate::default_config().map_or_else(|_| "unknown".to_string(), |c| c.policy.version)
    });
    let ctx = RunContext::new(
        git_commit(),
        policy_version,
        rampart_core::timefmt::now_rfc3339(),
    );
    let opts = MineOptions {
        min_support: args.min_support,
        max_candidates: args.max,
        min_lift: args.min_lift,
        config: args.config_name.clone(),
        ..MineOptions::default()
    };
    let input = MineInput {
        logs: &logs,
        datasets: &datasets,
        benign: Corpus {
            name: &benign.name,
            records: &benign.records,
        },
    };
    let out = mine(&input, &existing, &opts, &ctx)?;
    let text = to_jsonl(&out.candidates)?;
    if benign.name == BENIGN_CORPUS_NAME {
        let report = validate_jsonl(&text);
        if !report.is_valid() {
            let errs: Vec<String> = report
                .errors
                .iter()
                .take(5)
                .map(|e| e.to_string())
                .collect();
            bail!(
                "internal error: the mined file does not validate:\n{}",
                errs.join("\n")
            );
        }
    }
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&args.out, &text).with_context(|| format!("writing {}", args.out.display()))?;

    let s = &out.stats;
    for d in &s.datasets {
        if d.unjoined > 0 {
            eprintln!(
                "rampart: warning: dataset {}: {} log record(s) whose prompt id is not in the dataset were left out",
                d.name, d.unjoined
            );
        }
        outln!(
            "{}: {} prompts (TP {}, FN {}, FP {}, TN {})",
            d.name,
            d.prompts,
            d.buckets.true_positive,
            d.buckets.false_negative,
            d.buckets.false_positive,
            d.buckets.true_negative
        )?;
    }
    let count = |r: Recommendation| {
        out.candidates
            .iter()
            .filter(|c| c.decision.recommendation == r)
            .count()
    };
    outln!(
        "{} {}, config {}: {} supported patterns; dropped {} not over-represented, {} already covered by rules, {} subsumed, {} after exact recount, {} over the recount cap; {} over --max",
        s.eval_run_id,
        benign.name,
        s.config,
        s.supported,
        s.dropped_not_overrepresented,
        s.dropped_covered,
        s.dropped_subsumed,
        s.dropped_after_recount,
        s.dropped_recount_cap,
        s.truncated
    )?;
    outln!(
        "wrote {} candidates ({} include, {} review, {} exclude) to {}",
        out.candidates.len(),
        count(Recommendation::Include),
        count(Recommendation::Review),
        count(Recommendation::Exclude),
        args.out.display()
    )?;
    Ok(0)
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn run_validate(file: &Path) -> Result<u8> {
    let report = validate_jsonl(&read(file)?);
    for e in &report.errors {
        outln!("{}: {e}", file.display())?;
    }
    if report.is_valid() {
        outln!("ok: {} records in {}", report.records, file.display())?;
        Ok(0)
    } else {
        outln!(
            "invalid: {} error(s) in {} records of {}",
            report.errors.len(),
            report.records,
            file.display()
        )?;
        Ok(1)
    }
}

fn run_to_rule(args: &ToRuleArgs) -> Result<u8> {
    let src = read(&args.file)?;
    let report = validate_jsonl(&src);
    if !report.is_valid() {
        for e in report.errors.iter().take(10) {
            eprintln!("{}: {e}", args.file.display());
        }
        bail!(
            "{} is not a valid pattern_candidates.v1 file ({} errors; see `rampart discover validate`)",
            args.file.display(),
            report.errors.len()
        );
    }
    let candidate = find_candidate(&src, &args.id)?;
    let existing = match &args.out {
        Some(p) if p.exists() => Some((read(p)?, p.display().to_string())),
        _ => None,
    };
    let opts = ToRuleOptions {
        force: args.force,
        rule_id: args.rule_id.clone(),
    };
    let draft = match to_rule(
        &candidate,
        existing.as_ref().map(|(s, o)| (s.as_str(), o.as_str())),
        &opts,
    ) {
        Ok(d) => d,
        Err(e @ rampart_discover::DiscoverError::Excluded { .. }) => {
            bail!("{e}; pass --force to turn it into a rule anyway")
        }
        Err(e) => return Err(e.into()),
    };
    for n in &draft.notes {
        eprintln!("rampart: note: {n}");
    }
    match &args.out {
        Some(p) => {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(p, &draft.pack_toml)
                .with_context(|| format!("writing {}", p.display()))?;
            eprintln!(
                "wrote rule {} (from candidate {}) to {}; it passes `rampart rules check` and `rampart rules test`",
                draft.rule_id,
                args.id,
                p.display()
            );
        }
        None => out!("{}", draft.pack_toml)?,
    }
    Ok(0)
}
