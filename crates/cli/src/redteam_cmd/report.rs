//! `rampart redteam report`: generates the variants in memory (as `generate` does, same
//! seed rules), scores them with every pipeline through `rampart_eval`, writes the coverage
//! matrix (Markdown, SVG, JSON) and checks the gate file. The work is
//! `rampart_redteam::report`'s.

use crate::PipelineArgs;
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use rampart_datasets::Record;
use rampart_eval::{NamedPipeline, RunOptions, RunStamp};
use rampart_redteam::report::{
    CoverageMatrix, Meta, RedteamGates, ReportPipeline, Scope, Variants,
};
use rampart_redteam::{GenerateOptions, Registry, Source};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub const AFTER_HELP: &str = "Pipelines (columns; --pipeline picks some, in this order): \
rules (CONFIGS/rules.toml), linear (CONFIGS/linear.toml), default (the embedded rules + linear \
configuration), cascade (CONFIGS/cascade.toml: rules + linear, the transformer where linear \
leaves a prompt open; not_configured when its model is not installed: `rampart models setup`), \
fused (CONFIGS/fused.toml: the retired fused pipeline, scored only when named; not_configured \
when its models are not installed), judge (CONFIGS/judge.toml; not_configured unless \
--judge-url, $RAMPART_JUDGE_URL or the file's base_url answers), conversation (the embedded \
configuration through the conversation scanner, on the variants split across turns; the other \
pipelines score the single-prompt variants). Default: every one but fused.\n\
A source that is already a generated file (every record has `mutation`) is scored as it is \
(its skips are not known: 0).\n\
Exit status: 0 done and every gate passed, 4 a gate failed (each named on stderr), 1 error, \
2 usage error.";

/// A column of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum PipelineArg {
    /// Rules only.
    Rules,
    /// The linear classifier only.
    Linear,
    /// Rules + linear (the embedded default).
    Default,
    /// Rules + linear, and the transformer where the linear score leaves a prompt open (the
    /// recommended classifier pipeline).
    Cascade,
    /// Rules, linear and the transformer, fused (retired; only when named).
    Fused,
    /// Rules, linear and the LLM judge.
    Judge,
    /// The default pipeline through the conversation scanner (turn variants).
    Conversation,
}

impl PipelineArg {
    /// The columns scored when no --pipeline is given (not the retired `fused`).
    const ALL: [PipelineArg; 6] = [
        PipelineArg::Rules,
        PipelineArg::Linear,
        PipelineArg::Default,
        PipelineArg::Cascade,
        PipelineArg::Judge,
        PipelineArg::Conversation,
    ];

    fn name(self) -> &'static str {
        match self {
            PipelineArg::Rules => "rules",
            PipelineArg::Linear => "linear",
            PipelineArg::Default => "default",
            PipelineArg::Cascade => "cascade",
            PipelineArg::Fused => "fused",
            PipelineArg::Judge => "judge",
            PipelineArg::Conversation => "conversation",
        }
    }

    /// The configuration file under `--configs`, `None` for the embedded one.
    fn file(self) -> Option<&'static str> {
        match self {
            PipelineArg::Rules => Some("rules.toml"),
            PipelineArg::Linear => Some("linear.toml"),
            PipelineArg::Cascade => Some("cascade.toml"),
            PipelineArg::Fused => Some("fused.toml"),
            PipelineArg::Judge => Some("judge.toml"),
            PipelineArg::Default | PipelineArg::Conversation => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Attack source (repeatable): a dataset as for `generate` (FILE, built-in set, NAME,
    /// NAME:train|validation|heldout) or a file `generate` wrote. Only its attack records are
    /// mutated.
    #[arg(long = "attack", value_name = "FILE_OR_NAME", required = true)]
    pub attacks: Vec<String>,
    /// Benign source (repeatable), as --attack. Only its benign records are mutated: the FPR
    /// of each transform.
    #[arg(long = "benign", value_name = "FILE_OR_NAME", required = true)]
    pub benign: Vec<String>,
    /// The seed (which records are drawn, every transform's parameters).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// At most K records of each source (drawn with the seed). Default: all.
    #[arg(long, value_name = "K")]
    pub per_source: Option<usize>,
    /// Pipelines to score (repeatable). Default: rules, linear, default, cascade, judge and
    /// conversation (the retired fused pipeline only when named).
    #[arg(long = "pipeline", value_enum, value_name = "NAME")]
    pub pipelines: Vec<PipelineArg>,
    /// Directory of the pipeline configurations.
    #[arg(long, value_name = "DIR", default_value = "configs")]
    pub configs: PathBuf,
    /// The judge's endpoint (OpenAI-compatible base URL) for the judge pipeline.
    #[arg(long, value_name = "URL")]
    pub judge_url: Option<String>,
    /// A previous coverage_matrix.json: every figure is shown with the previous one and the
    /// change.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Gate file (TOML): floors and ceilings per family and pipeline; exit status 4 when one
    /// fails.
    #[arg(long, value_name = "FILE")]
    pub gate: Option<PathBuf>,
    /// Where the report, heatmap and matrix go (Coverage_Matrix.md, coverage_matrix.svg,
    /// coverage_matrix.json). The tracked copies are regenerated with `--out-dir docs/reports`.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_OUT_DIR)]
    pub out_dir: PathBuf,
    /// The Markdown report (default: OUT_DIR/Coverage_Matrix.md).
    #[arg(long, value_name = "FILE")]
    pub out_md: Option<PathBuf>,
    /// The SVG heatmap (default: OUT_DIR/coverage_matrix.svg).
    #[arg(long, value_name = "FILE")]
    pub out_svg: Option<PathBuf>,
    /// The matrix as JSON (default: OUT_DIR/coverage_matrix.json).
    #[arg(long, value_name = "FILE")]
    pub out_json: Option<PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Directory of fetched datasets (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Never draw a progress bar (none is drawn when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
}

/// Where `report` and `findings` write by default: not the tracked `docs/reports/` (a first
/// run overwrote them).
pub(crate) const DEFAULT_OUT_DIR: &str = "reports/redteam";

/// The path given for an output, else `name` in the output directory.
pub(crate) fn out_path(given: Option<&PathBuf>, out_dir: &Path, name: &str) -> PathBuf {
    given.cloned().unwrap_or_else(|| out_dir.join(name))
}

/// The command line as typed, each argument quoted when the shell would need it.
fn command_line() -> String {
    let quote = |a: String| {
        if !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=+,@".contains(c))
        {
            a
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    std::iter::once("rampart".to_owned())
        .chain(std::env::args().skip(1).map(quote))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether something accepts TCP connections at the URL's host and port (2 s).
fn reachable(url: &str) -> Result<(), String> {
    let rest = url
        .split_once("://")
        .map_or(url, |(_, r)| r)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    let host_port = if rest
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        || rest.ends_with(']')
    {
        rest.to_owned()
    } else if url.starts_with("https://") {
        format!("{rest}:443")
    } else {
        format!("{rest}:80")
    };
    let addrs: Vec<_> = host_port
        .to_socket_addrs()
        .map_err(|e| format!("judge endpoint {url}: {e}"))?
        .collect();
    let mut last = format!("judge endpoint {url}: no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, Duration::from_secs(2)) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("judge endpoint {url} unreachable: {e}"),
        }
    }
    Err(last)
}

/// The judge layer's endpoint: --judge-url (which then replaces the file's), else the
/// variable its `base_url_env` names, else its `llm.base_url`.
fn judge_endpoint(
    config: &mut rampart_core::PipelineConfig,
    url: Option<&str>,
) -> Result<String, String> {
    let layer = config
        .layers
        .iter_mut()
        .find(|l| l.kind == rampart_judge::JUDGE_KIND)
        .ok_or("the configuration has no judge layer")?;
    let mut opts: rampart_judge::JudgeOptions =
        rampart_core::layer_options(rampart_judge::JUDGE_KIND, &layer.options)
            .map_err(|e| e.to_string())?;
    if let Some(url) = url {
        opts.llm.base_url = Some(url.to_owned());
        opts.base_url_env = None;
        layer.options = toml::Table::try_from(&opts).map_err(|e| e.to_string())?;
        return Ok(url.to_owned());
    }
    opts.llm
        .with_overrides(opts.endpoint_env(), |name| std::env::var(name).ok())
        .base_url
        .ok_or_else(|| "no judge endpoint: give --judge-url or set RAMPART_JUDGE_URL".to_owned())
}

/// Builds one column, or says why it is not configured.
fn build(which: PipelineArg, args: &ReportArgs) -> ReportPipeline {
    let file = which.file().map(|f| args.configs.join(f));
    let config = file.as_ref().map_or_else(
        || "embedded:configs/rules+linear.toml".to_owned(),
        |p| p.display().to_string(),
    );
    let pipeline = (|| -> Result<NamedPipeline, Box<dyn std::error::Error + Send + Sync>> {
        let mut cfg = PipelineArgs {
            config: file.clone(),
            rules: Vec::new(),
            no_default_rules: false,
            fail_open: false,
        }
        .load()
        .map_err(|e| format!("{e:#}"))?;
        if which == PipelineArg::Judge {
            let url = judge_endpoint(&mut cfg, args.judge_url.as_deref())?;
            reachable(&url)?;
        }
        let p = rampart_core::Pipeline::from_config_with(cfg, &rampart::registry())?;
        Ok(NamedPipeline::new(which.name(), p))
    })();
    ReportPipeline {
        name: which.name().to_owned(),
        config,
        scope: if which == PipelineArg::Conversation {
            Scope::Conversations
        } else {
            Scope::Prompts
        },
        pipeline,
    }
}

/// Loads the sources of one side and generates (or reads) their variants.
fn variants(
    specs: &[String],
    attack: bool,
    args: &ReportArgs,
    data_dir: &Path,
    out: &mut Variants,
) -> Result<()> {
    let reg = Registry::builtin();
    let loaded = crate::load_datasets(specs, data_dir, |_| {})?;
    for (spec, d) in specs.iter().zip(loaded) {
        let keep = |r: &Record| r.label.is_attack() == attack;
        let recs: Vec<Record> = d.records.into_iter().filter(|r| keep(r)).collect();
        if recs.is_empty() {
            bail!(
                "{spec}: no {} record",
                if attack { "attack" } else { "benign" }
            );
        }
        let side = if attack {
            &mut out.attack
        } else {
            &mut out.benign
        };
        if recs.iter().all(|r| r.mutation.is_some()) {
            eprintln!(
                "rampart: redteam report: {spec}: {} generated variant(s), scored as they are",
                recs.len()
            );
            side.extend(recs);
            continue;
        }
        let opts = GenerateOptions {
            seed: args.seed,
            per_source: args.per_source,
            benign: !attack,
            ..GenerateOptions::default()
        };
        let g = rampart_redteam::generate(
            &reg,
            &[Source {
                name: &d.name,
                records: &recs,
            }],
            &opts,
            &|_| {},
        )?;
        eprintln!(
            "rampart: redteam report: {spec}: {} record(s) drawn, {} variant(s), {} skip(s)",
            g.manifest.sources.first().map_or(0, |s| s.selected),
            g.manifest.generated,
            g.manifest.skipped
        );
        for (t, tally) in &g.manifest.by_transform {
            *out.skipped.entry(t.clone()).or_default() += tally.skipped;
        }
        side.extend(g.records);
    }
    Ok(())
}

pub(super) fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

pub fn run(args: &ReportArgs) -> Result<u8> {
    // What can fail fast does so before any scan.
    let gates = args.gate.as_deref().map(RedteamGates::load).transpose()?;
    let baseline = args
        .baseline
        .as_deref()
        .map(CoverageMatrix::load)
        .transpose()?;
    let mut chosen = if args.pipelines.is_empty() {
        PipelineArg::ALL.to_vec()
    } else {
        args.pipelines.clone()
    };
    chosen.sort();
    chosen.dedup();

    let data_dir = args
        .data_dir
        .clone()
        .unwrap_or_else(rampart_datasets::default_data_dir);
    let mut vars = Variants::default();
    variants(&args.attacks, true, args, &data_dir, &mut vars)?;
    variants(&args.benign, false, args, &data_dir, &mut vars)?;

    let pipelines: Vec<ReportPipeline> = chosen.iter().map(|&p| build(p, args)).collect();
    for p in &pipelines {
        if let Err(why) = &p.pipeline {
            eprintln!("rampart: redteam report: {}: not configured: {why}", p.name);
        }
    }
    let total = rampart_redteam::report::planned_scans(&pipelines, &vars);
    eprintln!(
        "rampart: redteam report: {} attack and {} benign variant(s), {} pipeline(s), {total} scan(s)",
        vars.attack.len(),
        vars.benign.len(),
        pipelines.iter().filter(|p| p.pipeline.is_ok()).count()
    );
    let bar = crate::progress_bar(
        args.no_progress,
        total,
        "{spinner} redteam report [{elapsed_precise}] {wide_bar} {pos}/{len} scans ({per_sec}, eta {eta})",
    )?;
    let meta = Meta {
        command: command_line(),
        generated: RunStamp::at(std::time::SystemTime::now()).timestamp_utc,
        seed: args.seed,
        attack_sources: args.attacks.clone(),
        benign_sources: args.benign.clone(),
    };
    let opts = RunOptions {
        threads: args.threads,
        ..RunOptions::default()
    };
    // Without a bar (stderr not a terminal, or --no-progress), a line every tenth of the way.
    let done = AtomicU64::new(0);
    let step = (total / 10).max(1);
    let progress = |n: u64| {
        bar.inc(n);
        if bar.is_hidden() {
            let before = done.fetch_add(n, Ordering::Relaxed);
            if (before + n) / step > before / step {
                eprintln!("rampart: redteam report: {}/{total} scans", before + n);
            }
        }
    };
    let matrix = rampart_redteam::report::score(meta, &pipelines, &vars, &opts, &progress);
    bar.finish_and_clear();
    let matrix = matrix?;

    let out_md = out_path(args.out_md.as_ref(), &args.out_dir, "Coverage_Matrix.md");
    let out_svg = out_path(args.out_svg.as_ref(), &args.out_dir, "coverage_matrix.svg");
    let out_json = out_path(
        args.out_json.as_ref(),
        &args.out_dir,
        "coverage_matrix.json",
    );
    write(
        &out_md,
        &rampart_redteam::report::markdown(&matrix, baseline.as_ref()),
    )?;
    write(&out_svg, &rampart_redteam::report::svg(&matrix))?;
    write(&out_json, &matrix.to_json())?;

    outln!(
        "{:<15} {}",
        "family",
        matrix
            .pipelines
            .iter()
            .map(|p| format!("{:>14}", p.name))
            .collect::<String>()
    )?;
    for r in &matrix.families {
        let cells: String = matrix
            .pipelines
            .iter()
            .map(|p| {
                let v = r.cells.get(&p.name).and_then(|c| c.tpr);
                format!(
                    "{:>14}",
                    v.map_or_else(|| "n/a".to_owned(), |v| format!("{:.1}%", v * 100.0))
                )
            })
            .collect();
        outln!("{:<15} {cells}", r.family)?;
    }
    eprintln!(
        "rampart: redteam report: wrote {}, {} and {}",
        out_md.display(),
        out_svg.display(),
        out_json.display()
    );
    let Some(gates) = gates else {
        return Ok(0);
    };
    let results = gates.check(&matrix);
    let failed: Vec<_> = results.iter().filter(|g| !g.passed).collect();
    if failed.is_empty() {
        eprintln!("rampart: all {} gate check(s) passed", results.len());
        return Ok(0);
    }
    for g in failed {
        eprintln!("rampart: gate failed: {}: {}", g.name, g.detail);
    }
    Ok(crate::eval_cmd::EXIT_GATE_FAILED)
}
