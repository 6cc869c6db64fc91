//! `rampart eval`: run pipeline configurations over labelled datasets, write the logs and
//! reports, check gates.

use crate::PipelineArgs;
use anyhow::{Context, Result, bail};
use clap::Args;
use rampart_eval::{GateSet, NamedPipeline, RunOptions, RunStamp, Summary};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Exit status when the run completed but a gate failed.
pub const EXIT_GATE_FAILED: u8 = 4;

/// Name of the embedded default configuration.
const DEFAULT_NAME: &str = "default";

/// `rampart eval …`
#[derive(Debug, Args)]
#[command(
    after_help = "Exit status of `eval`: 0 done and every gate passed, 4 a gate failed \
                        (each failed gate is named on stderr), 1 error, 2 usage error.\n\
                        Files: OUT_DIR/evals/eval_{YYYYMMDD_HHMMSS}_{DATASET}.jsonl (per-prompt \
                        logs, no prompt text), eval_{ts}_summary.md, eval_{ts}_summary.json, \
                        eval_{ts}_report.html."
)]
pub struct EvalArgs {
    /// Dataset (repeatable): a JSONL file, a built-in set (Clean_Benign_Corpus_v1,
    /// Handwritten_Attacks_v1, Embedded_Injections_v1, Trigger_Benign_v1,
    /// Multilingual_Attacks_v1, Conversations_v1), or NAME for DATA_DIR/NAME.jsonl; NAME:train,
    /// NAME:validation, NAME:heldout for a hash part. Records with `turns` are conversations,
    /// replayed call by call. `Agent_Traces_v1` (`:tune`, `:test`) or a file of agent traces
    /// replays agent conversations through the proxy's scan and the traces' tool policies
    /// (attacks stopped, benign traces passed; on their own, not with prompt datasets).
    #[arg(long = "dataset", value_name = "FILE_OR_NAME", required = true)]
    pub datasets: Vec<String>,
    /// Pipeline configuration to evaluate (repeatable, compared side by side): FILE (named
    /// by its file stem), NAME=FILE, or `default` (the embedded configuration). Without
    /// --config: the embedded configuration, named `default`.
    #[arg(long = "config", value_name = "FILE|NAME=FILE")]
    pub configs: Vec<String>,
    /// Add a rule pack to every rules layer of every configuration (repeatable).
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// Do not load the embedded default rule pack.
    #[arg(long)]
    pub no_default_rules: bool,
    /// On layer error or timeout, ALLOW (marked degraded) instead of BLOCK.
    #[arg(long)]
    pub fail_open: bool,
    /// Directory of fetched datasets (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Where the reports go (under OUT_DIR/evals/).
    #[arg(long, value_name = "DIR", default_value = "reports")]
    pub out_dir: PathBuf,
    /// Gate file (TOML): thresholds the run must meet; exit status 4 when one fails.
    #[arg(long, value_name = "FILE")]
    pub gate: Option<PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Never draw a progress bar (none is drawn when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// Evaluate at most N records of each dataset (the first N).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Judge layers answer from their cache only (`mode = "replay"`): no model calls, free
    /// and deterministic. A prompt not in the cache is a `replay_miss`, which the layer's
    /// fail mode decides. Needs a configuration with a judge layer that has a cache.
    #[arg(long)]
    pub judge_cache_only: bool,
    /// Conversation options for conversation records (a TOML file with a `[conversation]`
    /// table; other tables are ignored): thresholds, window, state and ledger policy.
    /// Default: the built-in defaults. Each conversation is replayed with a fresh state.
    #[arg(long, value_name = "FILE")]
    pub conversation_config: Option<PathBuf>,
}

impl EvalArgs {
    fn pipeline_args(&self, config: Option<PathBuf>) -> PipelineArgs {
        PipelineArgs {
            config,
            rules: self.rules.clone(),
            no_default_rules: self.no_default_rules,
            fail_open: self.fail_open,
        }
    }

    /// `--data-dir`, else $RAMPART_DATA_DIR, else ./data.
    pub(crate) fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(rampart_datasets::default_data_dir)
    }
}

/// Splits a `--config` value into (name, file); `None` as the file means the embedded
/// configuration.
fn parse_config_spec(spec: &str) -> Result<(String, Option<PathBuf>)> {
    if Path::new(spec).is_file() {
        let name = Path::new(spec)
            .file_stem()
            .map_or_else(|| spec.to_string(), |s| s.to_string_lossy().into_owned());
        return Ok((name, Some(PathBuf::from(spec))));
    }
    if spec == DEFAULT_NAME {
        return Ok((DEFAULT_NAME.to_string(), None));
    }
    if let Some((name, file)) = spec.split_once('=') {
        let name = name.trim();
        if name.is_empty() {
            bail!("--config {spec:?}: empty NAME in NAME=FILE");
        }
        if file == DEFAULT_NAME && !Path::new(file).is_file() {
            return Ok((name.to_string(), None));
        }
        return Ok((name.to_string(), Some(PathBuf::from(file))));
    }
    bail!("--config {spec:?}: no such file (use FILE, NAME=FILE or `default`)")
}

/// Sets every judge layer of `config` to answer from its cache only; whether it has one.
fn replay_judges(config: &mut rampart_core::PipelineConfig) -> Result<bool> {
    let mut any = false;
    for layer in config
        .layers
        .iter_mut()
        .filter(|l| l.kind == rampart_judge::JUDGE_KIND)
    {
        rampart_judge::force_replay(&mut layer.options)
            .map_err(|e| anyhow::anyhow!("--judge-cache-only: {e}"))?;
        any = true;
    }
    Ok(any)
}

pub fn run(args: &EvalArgs) -> Result<u8> {
    // Everything that can fail fast does so before any scan.
    let gates = args
        .gate
        .as_deref()
        .map(GateSet::load)
        .transpose()
        .context("reading the gate file")?;

    let conversation = args
        .conversation_config
        .as_deref()
        .map(rampart_eval::replay::load_options)
        .transpose()
        .context("reading the conversation options")?
        .unwrap_or_default();

    let specs: Vec<(String, Option<PathBuf>)> = if args.configs.is_empty() {
        vec![(DEFAULT_NAME.to_string(), None)]
    } else {
        args.configs
            .iter()
            .map(|s| parse_config_spec(s))
            .collect::<Result<_>>()?
    };
    let mut configs = Vec::with_capacity(specs.len());
    let mut judged = false;
    for (name, file) in specs {
        let origin = file.as_ref().map_or_else(
            || "the embedded configuration".to_string(),
            |p| p.display().to_string(),
        );
        let pipeline = (|| -> Result<rampart_core::Pipeline> {
            let mut config = args.pipeline_args(file).load()?;
            if args.judge_cache_only {
                judged |= replay_judges(&mut config)?;
            }
            Ok(rampart_core::Pipeline::from_config_with(
                config,
                &rampart::registry(),
            )?)
        })()
        .with_context(|| format!("configuration {name:?} ({origin})"))?;
        configs.push(NamedPipeline::new(name, pipeline));
    }
    if args.judge_cache_only && !judged {
        bail!("--judge-cache-only: no configuration has a judge layer (kind = \"judge\")");
    }
    if let Some(sets) = agent_trace_specs(&args.datasets)? {
        return run_agent_traces(args, &configs, &sets);
    }

    let data_dir = args.data_dir();
    let datasets = crate::load_datasets(&args.datasets, &data_dir, |d| {
        if d.records.is_empty() {
            eprintln!("rampart: {}: no readable records", d.name);
        }
    })?;

    let opts = RunOptions {
        threads: args.threads,
        limit: args.limit,
        conversation,
    };
    let total = rampart_eval::planned_scans(configs.len(), &datasets, &opts);
    let bar = crate::progress_bar(
        args.no_progress,
        total,
        "{spinner} eval [{elapsed_precise}] {wide_bar} {pos}/{len} prompts ({per_sec}, eta {eta})",
    )?;

    let stamp = RunStamp::reserve(&args.out_dir)?;
    let result = rampart_eval::run(
        &stamp.run_id,
        &stamp.timestamp_utc,
        &configs,
        datasets,
        &opts,
        &|n| bar.inc(n),
    );
    bar.finish_and_clear();
    let run = match result {
        Ok(r) => r,
        Err(e) => {
            stamp.release(&args.out_dir);
            return Err(e.into());
        }
    };

    let mut summary = Summary::compute(&run);
    if let Some(g) = &gates {
        summary.gates = g.check(&summary);
    }
    let written = match rampart_eval::write_all(&run, &summary, &args.out_dir) {
        Ok(w) => w,
        Err(e) => {
            stamp.release(&args.out_dir);
            return Err(e.into());
        }
    };

    let mut out = crate::out::stdout();
    out.write_all(rampart_eval::render::terminal_summary(&summary).as_bytes())?;
    out.flush()?;
    eprintln!(
        "rampart: {} scans in {:.2} s ({:.0} prompts/s); reports:",
        summary.scans, summary.wall_seconds, summary.prompts_per_second
    );
    for p in written.all() {
        eprintln!("  {}", p.display());
    }
    if summary.gates_passed() {
        if !summary.gates.is_empty() {
            eprintln!("rampart: all {} gate check(s) passed", summary.gates.len());
        }
        Ok(0)
    } else {
        for g in summary.gates.iter().filter(|g| !g.passed) {
            eprintln!(
                "rampart: gate failed: {} [{}]: {}",
                g.name, g.config, g.detail
            );
        }
        Ok(EXIT_GATE_FAILED)
    }
}

/// An agent-trace set named on the command line: the embedded Agent_Traces_v1 (one part or
/// both), or a trace file with its `policies/` beside it.
enum TraceSpec {
    Embedded(Option<rampart_agentbench::Split>),
    File(PathBuf, Option<rampart_agentbench::Split>),
}

/// `Some` when every `--dataset` is an agent-trace set (`Agent_Traces_v1[:tune|:test]`, or a
/// `.jsonl` file of traces); an error when they are mixed with prompt datasets (a trace is
/// replayed through the proxy and the tool policy, not scored prompt by prompt).
fn agent_trace_specs(names: &[String]) -> Result<Option<Vec<TraceSpec>>> {
    use rampart_agentbench::{NAME_V1, Split};
    let part = |p: Option<&str>| -> Result<Option<Split>> {
        match p {
            None => Ok(None),
            Some("tune") => Ok(Some(Split::Tune)),
            Some("test") => Ok(Some(Split::Test)),
            Some(x) => bail!("{NAME_V1} has the parts `tune` and `test`, not `{x}`"),
        }
    };
    let mut specs = Vec::new();
    for n in names {
        let (base, p) = match n.rsplit_once(':') {
            Some((b, p)) if p == "tune" || p == "test" => (b, Some(p)),
            _ => (n.as_str(), None),
        };
        if base.eq_ignore_ascii_case(NAME_V1) {
            specs.push(TraceSpec::Embedded(part(p)?));
        } else if is_trace_file(Path::new(base)) {
            specs.push(TraceSpec::File(PathBuf::from(base), part(p)?));
        }
    }
    match specs.len() {
        0 => Ok(None),
        n if n == names.len() => Ok(Some(specs)),
        _ => bail!(
            "agent traces ({NAME_V1} or a trace file) are replayed on their own: give them without prompt datasets"
        ),
    }
}

/// A JSONL file whose first record has `messages`, `policy` and `label`.
fn is_trace_file(p: &Path) -> bool {
    let Ok(f) = std::fs::File::open(p) else {
        return false;
    };
    let mut first = String::new();
    let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(f), &mut first);
    serde_json::from_str::<serde_json::Value>(&first).is_ok_and(|v| {
        v.get("messages").is_some() && v.get("policy").is_some() && v.get("label").is_some()
    })
}

/// Replays agent traces through each configuration's pipeline and the traces' policies:
/// the figures on stdout, `OUT_DIR/evals/{run}_summary.{md,json}` and the per-trace
/// outcomes `{run}_{config}_traces.jsonl`.
fn run_agent_traces(args: &EvalArgs, configs: &[NamedPipeline], specs: &[TraceSpec]) -> Result<u8> {
    use rampart_agentbench::{Report, TraceSet, replay_all};
    let mut traces = Vec::new();
    let mut policies = std::collections::BTreeMap::new();
    for spec in specs {
        let set = match spec {
            TraceSpec::Embedded(split) => TraceSet::embedded(*split)?,
            TraceSpec::File(path, split) => TraceSet::from_file(path, *split)?,
        };
        traces.extend(set.traces);
        policies.extend(set.policies);
    }
    if let Some(n) = args.limit {
        traces.truncate(n);
    }
    if let Some(n) = args.threads {
        // The replay runs on rayon's global pool; a second build in one process is refused
        // and harmless.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global();
    }
    let stamp = RunStamp::reserve(&args.out_dir)?;
    let dir = args.out_dir.join("evals");
    let mut md = format!(
        "# Agent traces replay ({})\n\n{} traces. Command: `rampart eval {}`\n\n",
        stamp.timestamp_utc,
        traces.len(),
        args.datasets
            .iter()
            .map(|d| format!("--dataset {d}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut json = serde_json::Map::new();
    let mut out = crate::out::stdout();
    for c in configs {
        let started = std::time::Instant::now();
        let outcomes = replay_all(&c.pipeline, &traces, &policies)?;
        let secs = started.elapsed().as_secs_f64();
        let report = Report::of(&outcomes);
        let table = report.markdown();
        writeln!(
            out,
            "configuration {} ({} traces, {secs:.1} s)\n\n{table}",
            c.name,
            outcomes.len()
        )?;
        if !report.succeeded.is_empty() {
            writeln!(
                out,
                "attacks that succeeded: {}\n",
                report.succeeded.join(", ")
            )?;
        }
        md.push_str(&format!(
            "## Configuration `{}` ({secs:.1} s)\n\n{table}\n",
            c.name
        ));
        let lines = outcomes
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<Vec<_>, _>>()?
            .join("\n");
        let traces_file = dir.join(format!("{}_{}_traces.jsonl", stamp.run_id, c.name));
        std::fs::write(&traces_file, lines + "\n")
            .with_context(|| format!("{}", traces_file.display()))?;
        json.insert(c.name.clone(), serde_json::to_value(&report)?);
    }
    out.flush()?;
    let md_file = dir.join(format!("{}_summary.md", stamp.run_id));
    std::fs::write(&md_file, md).with_context(|| format!("{}", md_file.display()))?;
    let json_file = dir.join(format!("{}_summary.json", stamp.run_id));
    std::fs::write(&json_file, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("{}", json_file.display()))?;
    eprintln!(
        "rampart: reports:\n  {}\n  {}",
        md_file.display(),
        json_file.display()
    );
    Ok(0)
}
