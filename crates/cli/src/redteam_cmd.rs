//! `rampart redteam generate|list`: mutated variants of attack (and benign) prompts, by
//! transform family, for `rampart eval` to score. The work is done by `rampart_redteam`.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use rampart_redteam::{CategoryFrom, Family, GenerateOptions, Registry, Source};
use std::path::{Path, PathBuf};

mod findings;
mod report;

/// `rampart redteam …`
#[derive(Debug, Subcommand)]
pub enum RedteamCommand {
    /// Write a dataset of variants: every selected transform applied to every selected record.
    #[command(
        after_help = "Writes FILE (dataset JSONL: each record's `mutation` says family, \
                      transform, params, seed and source) and FILE's stem + .manifest.json \
                      (counts per family and transform, every skip with its reason). The \
                      same datasets, options and seed give byte-identical files. Score with \
                      `rampart eval --dataset FILE`: with the default --category, its \"by \
                      category\" table is the TPR (attacks) and FPR (benign) per family."
    )]
    Generate(GenerateArgs),
    /// Score every family of variants with every pipeline: the coverage matrix (Markdown,
    /// SVG heatmap, JSON), optionally against a previous matrix and a gate file.
    #[command(after_help = report::AFTER_HELP)]
    Report(report::ReportArgs),
    /// The red-team report from a coverage matrix and the remediation decisions: blind
    /// spots, what was fixed (before/after), what was not and why, accepted risks, and a
    /// defense-in-depth diagram (Markdown + SVG).
    #[command(after_help = findings::AFTER_HELP)]
    Findings(findings::FindingsArgs),
    /// List the families and transforms (stable ids).
    List,
}

/// What a variant's `category` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CategoryArg {
    /// The family id (`encoding`).
    Family,
    /// The transform id (`encoding.base64`).
    Transform,
    /// The source record's category.
    Source,
}

impl From<CategoryArg> for CategoryFrom {
    fn from(c: CategoryArg) -> Self {
        match c {
            CategoryArg::Family => CategoryFrom::Family,
            CategoryArg::Transform => CategoryFrom::Transform,
            CategoryArg::Source => CategoryFrom::Source,
        }
    }
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Source dataset (repeatable), as for `rampart eval`: a JSONL file, a built-in set, NAME
    /// for DATA_DIR/NAME.jsonl, or NAME:train|validation|heldout for a hash part. Choose
    /// training splits for anything you tune on.
    #[arg(long = "dataset", value_name = "FILE_OR_NAME", required = true)]
    pub datasets: Vec<String>,
    /// Transform family (repeatable; default: all). `rampart redteam list` lists them.
    #[arg(long = "family", value_name = "FAMILY", value_parser = parse_family)]
    pub families: Vec<Family>,
    /// Only these transforms, by id (FAMILY.NAME, repeatable).
    #[arg(long = "transform", value_name = "ID")]
    pub transforms: Vec<String>,
    /// The seed: it fixes which records are drawn and every transform's parameters.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// At most K records of each dataset (drawn with the seed). Default: all.
    #[arg(long, value_name = "K")]
    pub per_source: Option<usize>,
    /// Also mutate benign records (they stay benign: the transform's false-positive rate).
    /// Attack records are always mutated.
    #[arg(long)]
    pub benign: bool,
    /// What each variant's `category` holds.
    #[arg(long, value_enum, default_value_t = CategoryArg::Family)]
    pub category: CategoryArg,
    /// The dataset file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Directory of fetched datasets (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Never draw a progress bar (none is drawn when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
}

fn parse_family(s: &str) -> Result<Family, String> {
    s.parse()
        .map_err(|e: rampart_redteam::RedteamError| e.to_string())
}

/// `FILE`'s manifest: `x.jsonl` → `x.manifest.json`.
pub fn manifest_path(out: &Path) -> PathBuf {
    out.with_extension("manifest.json")
}

pub fn run(cmd: &RedteamCommand) -> Result<u8> {
    match cmd {
        RedteamCommand::List => list(),
        RedteamCommand::Generate(args) => generate(args),
        RedteamCommand::Report(args) => report::run(args),
        RedteamCommand::Findings(args) => findings::run(args),
    }
}

fn list() -> Result<u8> {
    let reg = Registry::builtin();
    for f in Family::ALL {
        let ids: Vec<&str> = reg
            .entries()
            .iter()
            .filter(|e| e.family == f)
            .map(|e| e.id)
            .collect();
        outln!("{:<15} {}", f.id(), ids.join(" "))?;
    }
    Ok(0)
}

fn generate(args: &GenerateArgs) -> Result<u8> {
    if manifest_path(&args.out) == args.out {
        bail!("--out {}: name the dataset FILE.jsonl", args.out.display());
    }
    let data_dir = args
        .data_dir
        .clone()
        .unwrap_or_else(rampart_datasets::default_data_dir);
    let loaded = crate::load_datasets(&args.datasets, &data_dir, |_| {})?;
    let sources: Vec<Source<'_>> = loaded
        .iter()
        .map(|d| Source {
            name: &d.name,
            records: &d.records,
        })
        .collect();
    let opts = GenerateOptions {
        seed: args.seed,
        per_source: args.per_source,
        families: args.families.clone(),
        transforms: args.transforms.clone(),
        benign: args.benign,
        category: args.category.into(),
    };
    let reg = Registry::builtin();
    let n_transforms = rampart_redteam::select(&reg, &opts)?.len();
    let total = rampart_redteam::planned_records(&sources, &opts);
    eprintln!(
        "rampart: redteam: {total} source record(s) x {n_transforms} transform(s), seed {}",
        args.seed
    );
    let bar = crate::progress_bar(
        args.no_progress,
        total,
        "{spinner} redteam [{elapsed_precise}] {wide_bar} {pos}/{len} records (eta {eta})",
    )?;
    let generated = rampart_redteam::generate(&reg, &sources, &opts, &|n| bar.inc(n));
    bar.finish_and_clear();
    let generated = generated?;

    rampart_datasets::write_records(&args.out, &generated.records)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let manifest = manifest_path(&args.out);
    let mut json = serde_json::to_vec_pretty(&generated.manifest)?;
    json.push(b'\n');
    std::fs::write(&manifest, json).with_context(|| format!("writing {}", manifest.display()))?;

    let m = &generated.manifest;
    outln!(
        "{:<15} {:>8} {:>8} {:>8}  skip reasons",
        "family",
        "attack",
        "benign",
        "skipped"
    )?;
    for (family, t) in &m.families {
        let reasons: Vec<String> = t
            .skipped_reasons
            .iter()
            .map(|(r, n)| format!("{r} ({n})"))
            .collect();
        outln!(
            "{family:<15} {:>8} {:>8} {:>8}  {}",
            t.attack,
            t.benign,
            t.skipped,
            reasons.join("; ")
        )?;
    }
    eprintln!(
        "rampart: redteam: {} variant(s), {} skip(s); wrote {} and {}",
        m.generated,
        m.skipped,
        args.out.display(),
        manifest.display()
    );
    Ok(0)
}
