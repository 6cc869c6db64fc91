//! `rampart relate`: the relational evaluator (PromptGuard) on one layered prompt or a JSONL
//! batch: per layer truth / indeterminacy / falsehood, the trust violations, the ayni
//! balance, the exchange type, the label, and what the evaluation cost; for labelled
//! batches, the four-label accuracy and confusion matrix.

use crate::scan::{
    ChunkLine, exit_code, id_string, json_error, open_batch, read_bounded, read_chunk,
};
use crate::{EXIT_ALLOW, EXIT_BATCH_ERRORS, PipelineArgs};
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use rampart_core::{Action, InputError, Pipeline, PipelineConfig, ScanRequest};
use rampart_relational::{
    Backend, RELATIONAL_KIND, RelationalCost, RelationalLabel, RelationalStatus,
};
use rampart_relational::{
    PromptSegment, RelateOutcome, attach_relational_layer, layer_backend, layered_request,
    prompt_request, relational_layer_name,
};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Exit status of a usage error (as clap's): a single prompt without a user layer.
pub const EXIT_USAGE: u8 = 2;
/// Exit status when the relational evaluation of a single prompt failed (no label; the
/// reason is named on stderr and in the output).
pub const EXIT_RELATE_FAILED: u8 = 5;
/// Lines read and related together (small: an LLM backend takes seconds per prompt, and
/// results are written chunk by chunk).
const CHUNK_LINES: usize = 64;
/// The summary file's `schema`.
pub const SUMMARY_SCHEMA: &str = "rampart.relate_summary.v1";

/// The backend of the relational layer `relate` adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// Derived from the pipeline's own layers (offline).
    Local,
    /// An LLM asked per layer.
    Llm,
    /// The Fire Circle: several evaluators in rounds.
    Circle,
}

impl From<BackendArg> for Backend {
    fn from(b: BackendArg) -> Backend {
        match b {
            BackendArg::Local => Backend::Local,
            BackendArg::Llm => Backend::Llm,
            BackendArg::Circle => Backend::Circle,
        }
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Exit status of `relate`: as `scan`'s for the pipeline's action (0 ALLOW, \
                  10 SANITIZE, 20 BLOCK; a batch: the strictest), 5 the evaluation of a single \
                  prompt failed (no label), 1 error, 2 usage error (a prompt with no user \
                  layer), 3 batch with per-line errors."
)]
pub struct RelateArgs {
    /// The system layer: the deployer's instructions.
    #[arg(long, value_name = "TEXT", conflicts_with = "jsonl")]
    pub system: Option<String>,
    /// The application layer: a developer template (`developer` segments).
    #[arg(
        long,
        visible_alias = "developer",
        value_name = "TEXT",
        conflicts_with = "jsonl"
    )]
    pub application: Option<String>,
    /// The user layer (required for a single prompt); `-` reads it from stdin.
    #[arg(long, value_name = "TEXT", conflicts_with = "jsonl")]
    pub user: Option<String>,
    /// Relate a JSONL batch, `-` for stdin: `{"id"?, "segments": [{"role", "text"}…],
    /// "label"?}` per line, or `{"id"?, "text", "label"?}` (one user segment). Roles:
    /// system, developer (or application), user. `label` (reciprocal, borderline,
    /// manipulative, extractive) turns on the accuracy summary. Also accepted and ignored:
    /// category, source, split, language, carrier, position, meta.
    #[arg(long, value_name = "FILE")]
    pub jsonl: Option<PathBuf>,
    /// Backend of the relational layer added to a configuration without one (default
    /// local); with a configuration that has one, it must agree with it.
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub backend: Option<BackendArg>,
    /// TOML file holding the added relational layer's options, as they would stand under
    /// `[[layers]]` (backend, block, [local], [llm], [circle], fail_mode…).
    #[arg(long, value_name = "FILE")]
    pub relational_config: Option<PathBuf>,
    /// For the llm backend: the model endpoint's base URL (OpenAI protocol).
    #[arg(long, value_name = "URL")]
    pub llm_url: Option<String>,
    /// For the llm backend: the model name.
    #[arg(long, value_name = "NAME")]
    pub llm_model: Option<String>,
    /// Time budget per layer in milliseconds (overrides `[policy] layer_timeout_ms`; an LLM
    /// backend needs seconds).
    #[arg(long, value_name = "MS")]
    pub layer_timeout_ms: Option<u64>,
    /// Print one JSON object per prompt.
    #[arg(long)]
    pub json: bool,
    /// Write the batch summary (accuracy, confusion matrix, time, cost) to FILE as JSON.
    #[arg(long, value_name = "FILE", requires = "jsonl")]
    pub summary: Option<PathBuf>,
    /// Worker threads for batches (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Never draw a progress bar (none is drawn when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
}

/// The pipeline `relate` runs, and the relational layer whose report it shows.
#[derive(Debug)]
struct Relator {
    pipeline: Pipeline,
    layer: String,
}

fn read_options(path: &Path) -> Result<toml::Table> {
    let src =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    toml::from_str(&src)
        .map_err(|e: toml::de::Error| anyhow::anyhow!("{}: {}", path.display(), e.message().trim()))
}

/// Sets `llm.llm.{protocol, base_url, model}` from `--llm-url` / `--llm-model` (the llm
/// backend's `[llm]` table holds the model endpoint as a `rampart_llm::LlmConfig` table).
fn set_llm_endpoint(table: &mut toml::Table, url: Option<&str>, model: Option<&str>) -> Result<()> {
    let outer = table
        .entry("llm")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(outer) = outer.as_table_mut() else {
        bail!("the relational options' `llm` is not a table");
    };
    // `base_url_env` / `model_env` may name the endpoint instead.
    let has_env: Vec<&str> = ["base_url_env", "model_env"]
        .into_iter()
        .filter(|k| outer.contains_key(*k))
        .collect();
    let inner = outer
        .entry("llm")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(inner) = inner.as_table_mut() else {
        bail!("the relational options' `llm.llm` is not a table");
    };
    inner
        .entry("protocol")
        .or_insert_with(|| toml::Value::String("openai".into()));
    if let Some(u) = url {
        inner.insert("base_url".into(), u.into());
    }
    if let Some(m) = model {
        inner.insert("model".into(), m.into());
    }
    let has_inner = |k: &str| inner.contains_key(k);
    let missing = [("base_url", "base_url_env"), ("model", "model_env")]
        .into_iter()
        .any(|(key, env)| !has_inner(key) && !has_env.contains(&env));
    if missing {
        bail!(
            "the llm backend needs a model endpoint: give --llm-url and --llm-model (or an \
             [llm.llm] table with base_url and model, or [llm] base_url_env and model_env, in \
             --relational-config)"
        );
    }
    Ok(())
}

/// The configuration with its relational layer: the one it has (checked against
/// `--backend`), or one added from the command line's options.
fn relate_config(args: &RelateArgs) -> Result<(PipelineConfig, String)> {
    let mut config = args.pipeline.load()?;
    if let Some(ms) = args.layer_timeout_ms {
        if ms == 0 {
            bail!("--layer-timeout-ms must be greater than 0");
        }
        config.policy.layer_timeout_ms = ms;
    }
    let wanted = args.backend.map(Backend::from);
    let llm_flags = args.llm_url.is_some() || args.llm_model.is_some();
    if let Some(name) = relational_layer_name(&config) {
        if args.relational_config.is_some() || llm_flags {
            bail!(
                "the configuration already has a relational layer ({name:?}): --relational-config, \
                 --llm-url and --llm-model only set up the layer `relate` adds to a configuration \
                 without one"
            );
        }
        let have = config
            .layers
            .iter()
            .rev()
            .find(|l| l.kind == RELATIONAL_KIND)
            .map(|l| layer_backend(&l.options))
            .transpose()?
            .unwrap_or(Backend::Local);
        if let Some(b) = wanted
            && b != have
        {
            bail!(
                "--backend {b} contradicts the configuration's relational layer {name:?}, whose \
                 backend is {have}"
            );
        }
        return Ok((config, name));
    }
    let mut table = match &args.relational_config {
        Some(p) => read_options(p)?,
        None => toml::Table::new(),
    };
    let from_file = table
        .contains_key("backend")
        .then(|| layer_backend(&table))
        .transpose()?;
    let backend = match (wanted, from_file) {
        (Some(b), Some(f)) if b != f => {
            bail!("--backend {b} contradicts --relational-config, whose backend is {f}")
        }
        (Some(b), _) | (None, Some(b)) => b,
        (None, None) if llm_flags => Backend::Llm,
        (None, None) => Backend::Local,
    };
    if llm_flags && backend != Backend::Llm {
        bail!("--llm-url and --llm-model set up the llm backend, not {backend}");
    }
    table.insert("backend".into(), backend.name().into());
    if backend == Backend::Llm && (llm_flags || !table.contains_key("llm")) {
        set_llm_endpoint(
            &mut table,
            args.llm_url.as_deref(),
            args.llm_model.as_deref(),
        )?;
    }
    if backend == Backend::Circle && !table.contains_key("circle") {
        bail!("the circle backend needs its members: give a [circle] table in --relational-config");
    }
    let name = attach_relational_layer(&mut config, table)?;
    Ok((config, name))
}

impl Relator {
    fn build(args: &RelateArgs) -> Result<Relator> {
        let (config, layer) = relate_config(args)?;
        let pipeline = Pipeline::from_config_with(config, &rampart::registry())
            .context("building the pipeline with its relational layer")?;
        Ok(Relator { pipeline, layer })
    }

    /// Relates one request; input refused by the pipeline's limits is an error saying which.
    fn relate(&self, req: &ScanRequest) -> std::result::Result<RelateOutcome, String> {
        match self.pipeline.scan(req) {
            Ok(out) => Ok(RelateOutcome::from_decision(&out.decision, &self.layer)),
            Err(e) => Err(input_error(&e)),
        }
    }
}

/// An input error, with the setting behind the limit.
fn input_error(e: &InputError) -> String {
    match e {
        InputError::TooLarge { .. } => format!(
            "prompt refused, not related: {e}; the limit is the pipeline's [limits] max_bytes, \
             over all layers together"
        ),
        InputError::TooManySegments { .. } => format!(
            "prompt refused, not related: {e}; the limit is the pipeline's [limits] max_segments"
        ),
        _ => format!("prompt refused, not related: {e}"),
    }
}

pub fn run(args: &RelateArgs) -> Result<u8> {
    if args.jsonl.is_none() && args.user.is_none() {
        eprintln!(
            "rampart: error: a prompt with no user layer: give --user TEXT (the relational \
             evaluator judges the exchange between the user layer and the layers above it), or \
             --jsonl FILE"
        );
        return Ok(EXIT_USAGE);
    }
    let relator = Relator::build(args)?;
    if let Some(path) = &args.jsonl {
        if let Some(n) = args.threads {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build_global()
                .context("configuring worker threads")?;
        }
        return run_batch(&relator, args, path);
    }
    let limit = relator.pipeline.config().limits.max_bytes;
    let user = match args.user.as_deref() {
        Some("-") => {
            if io::stdin().is_terminal() {
                eprintln!("rampart: reading the user layer from stdin (end with Ctrl-D)");
            }
            read_bounded(io::stdin().lock(), limit).context("reading the user layer from stdin")?
        }
        other => other.unwrap_or_default().to_string(),
    };
    let req = match layered_request(args.system.clone(), args.application.clone(), Some(user)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rampart: error: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let outcome = relator.relate(&req).map_err(anyhow::Error::msg)?;
    let mut out = crate::out::stdout();
    let mut buf = Vec::new();
    if args.json {
        write_json(&mut buf, &outcome, None, None)?;
    } else {
        write_human(&mut buf, &outcome, None)?;
    }
    out.write_all(&buf)?;
    out.flush()?;
    if let RelationalStatus::Failed { reason } = &outcome.report.status {
        eprintln!("rampart: the relational evaluation failed: {reason}");
        return Ok(EXIT_RELATE_FAILED);
    }
    Ok(exit_code(outcome.action))
}

/// One JSON output line: the outcome, with the batch line and the expected label.
#[derive(Debug, Serialize)]
struct JsonRecord<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected: Option<&'a str>,
    #[serde(flatten)]
    outcome: &'a RelateOutcome,
}

fn write_json(
    out: &mut Vec<u8>,
    outcome: &RelateOutcome,
    line: Option<usize>,
    expected: Option<&str>,
) -> Result<()> {
    serde_json::to_writer(
        &mut *out,
        &JsonRecord {
            line,
            expected,
            outcome,
        },
    )?;
    out.push(b'\n');
    Ok(())
}

fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

/// The human block for one outcome.
fn write_human(out: &mut Vec<u8>, o: &RelateOutcome, expected: Option<&str>) -> io::Result<()> {
    let r = &o.report;
    let mut head = format!("{:<8}", o.action.name());
    match &r.status {
        RelationalStatus::Ok => {
            let label = r.label.map_or("-", |l| l.name());
            head.push_str(&format!(" {label:<12}"));
            if let Some(b) = r.balance {
                head.push_str(&format!(" balance {b:+.3}"));
            }
            if let Some(x) = r.exchange {
                head.push_str(&format!("  exchange {x}"));
            }
        }
        RelationalStatus::Failed { reason } => head.push_str(&format!(" failed: {reason}")),
        RelationalStatus::Skipped { reason } => head.push_str(&format!(" skipped: {reason}")),
    }
    head.push_str(&format!("  backend {}", r.backend));
    if let Some(id) = &o.id {
        head.push_str(&format!("  id={id}"));
    }
    if let Some(e) = expected {
        head.push_str(&format!("  expected={e}"));
    }
    if o.degraded {
        head.push_str("  (degraded)");
    }
    writeln!(out, "{head}")?;
    if !r.layers.is_empty() {
        writeln!(
            out,
            "  {:<12} {:>6} {:>6} {:>6} {:>9}  evidence",
            "layer", "T", "I", "F", "bytes"
        )?;
    }
    for l in &r.layers {
        writeln!(
            out,
            "  {:<12} {:>6.3} {:>6.3} {:>6.3} {:>9}  {}",
            l.layer.name(),
            l.value.truth,
            l.value.indeterminacy,
            l.value.falsehood,
            l.bytes,
            if l.evidence.is_empty() {
                "-".to_string()
            } else {
                l.evidence.join(", ")
            }
        )?;
        if let Some(reason) = &l.reasoning {
            writeln!(out, "  {:<12} reasoning: {reason}", "")?;
        }
    }
    for v in &r.violations {
        let ev = if v.evidence.is_empty() {
            String::new()
        } else {
            format!(" ({})", v.evidence.join(", "))
        };
        writeln!(out, "  violation: {} by the {} layer{ev}", v.kind, v.layer)?;
    }
    for e in &r.evaluators {
        let model = e
            .model
            .as_deref()
            .map(|m| format!(", {m}"))
            .unwrap_or_default();
        let state = match (e.active, e.failed_round) {
            (true, _) => String::new(),
            (false, Some(n)) => format!(", lost its vote in round {n}"),
            (false, None) => ", no vote".to_string(),
        };
        let patterns = if e.patterns.is_empty() {
            String::new()
        } else {
            format!(", patterns: {}", e.patterns.join(", "))
        };
        writeln!(
            out,
            "  evaluator: {} ({}{model}) {}{state}, {} ms{patterns}",
            e.name, e.backend, e.outcome, e.elapsed_ms
        )?;
    }
    if let Some(c) = &r.consensus {
        writeln!(
            out,
            "  consensus: {} active, {} rounds, falsehood range {:.3}{}{}",
            c.active,
            c.rounds,
            c.falsehood_range,
            if c.dissent { " (dissent)" } else { "" },
            if c.patterns.is_empty() {
                String::new()
            } else {
                format!(", patterns: {}", c.patterns.join(", "))
            }
        )?;
    }
    writeln!(
        out,
        "  cost: {} calls, {} input / {} output tokens, ${:.4}",
        r.cost.calls, r.cost.input_tokens, r.cost.output_tokens, r.cost.cost_usd
    )?;
    writeln!(
        out,
        "  time: relational {}, pipeline {}",
        ms(r.elapsed_us),
        ms(o.pipeline_elapsed_us)
    )
}

/// One line of a batch. Dataset fields are accepted and ignored, as by `rampart scan`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchLine {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    segments: Option<Vec<PromptSegment>>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default, rename = "category")]
    _category: Option<serde_json::Value>,
    #[serde(default, rename = "source")]
    _source: Option<serde_json::Value>,
    #[serde(default, rename = "split")]
    _split: Option<serde_json::Value>,
    #[serde(default, rename = "language")]
    _language: Option<serde_json::Value>,
    #[serde(default, rename = "carrier")]
    _carrier: Option<serde_json::Value>,
    #[serde(default, rename = "position")]
    _position: Option<serde_json::Value>,
    #[serde(default, rename = "meta")]
    _meta: Option<serde_json::Value>,
}

/// What one batch line gave.
enum LineResult {
    Related {
        outcome: Box<RelateOutcome>,
        expected: Option<String>,
    },
    Error {
        id: Option<String>,
        message: String,
    },
    Blank,
}

fn relate_line(relator: &Relator, raw: &[u8]) -> LineResult {
    let text = match std::str::from_utf8(raw) {
        Ok(t) => t,
        Err(e) => {
            return LineResult::Error {
                id: None,
                message: format!("invalid UTF-8 at byte {} of the line", e.valid_up_to()),
            };
        }
    };
    if text.trim().is_empty() {
        return LineResult::Blank;
    }
    let line: BatchLine = match serde_json::from_str(text) {
        Ok(l) => l,
        Err(e) => {
            return LineResult::Error {
                id: None,
                message: json_error(&e),
            };
        }
    };
    let id = line.id.as_ref().map(id_string);
    let err = |message: String| LineResult::Error {
        id: id.clone(),
        message,
    };
    let segments = match (line.text, line.segments) {
        (Some(t), None) => vec![PromptSegment {
            role: "user".into(),
            text: t,
        }],
        (None, Some(s)) => s,
        _ => return err("a record needs exactly one of `text` or `segments`".into()),
    };
    let mut req = match prompt_request(segments) {
        Ok(r) => r,
        Err(e) => return err(e.to_string()),
    };
    req.id = id.clone();
    match relator.relate(&req) {
        Ok(o) => LineResult::Related {
            outcome: Box::new(o),
            expected: line.label,
        },
        Err(message) => err(message),
    }
}

/// One line's output, rendered by a worker, and what the summary needs of it.
struct Rendered {
    bytes: Vec<u8>,
    tally: Option<Tally>,
    error: bool,
}

/// What the summary keeps of one related prompt.
struct Tally {
    expected: Option<String>,
    label: Option<RelationalLabel>,
    status: &'static str,
    action: Action,
    elapsed_us: u64,
    cost: RelationalCost,
}

#[derive(Debug, Serialize)]
struct ErrorRecord<'a> {
    line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    error: &'a str,
}

fn render(n: usize, r: LineResult, json: bool) -> Rendered {
    let mut bytes = Vec::new();
    match r {
        LineResult::Blank => Rendered {
            bytes,
            tally: None,
            error: false,
        },
        LineResult::Error { id, message } => {
            let res = if json {
                serde_json::to_writer(
                    &mut bytes,
                    &ErrorRecord {
                        line: n,
                        id,
                        error: &message,
                    },
                )
                .map(|()| bytes.push(b'\n'))
                .map_err(anyhow::Error::from)
            } else {
                let id = id.map(|i| format!(" (id {i})")).unwrap_or_default();
                writeln!(bytes, "line {n}{id}: error: {message}").map_err(Into::into)
            };
            if res.is_err() {
                bytes = format!("line {n}: error\n").into_bytes();
            }
            Rendered {
                bytes,
                tally: None,
                error: true,
            }
        }
        LineResult::Related { outcome, expected } => {
            let res = if json {
                write_json(&mut bytes, &outcome, Some(n), expected.as_deref())
            } else {
                write_human(&mut bytes, &outcome, expected.as_deref()).map_err(Into::into)
            };
            if let Err(e) = res {
                // Rendering into memory cannot fail short of a bug; say so on the line itself.
                let rec = serde_json::json!({"line": n, "error": format!("cannot render the result: {e}")});
                bytes = rec.to_string().into_bytes();
                bytes.push(b'\n');
                return Rendered {
                    bytes,
                    tally: None,
                    error: true,
                };
            }
            let r = &outcome.report;
            Rendered {
                bytes,
                tally: Some(Tally {
                    expected,
                    label: r.label,
                    status: match r.status {
                        RelationalStatus::Ok => "ok",
                        RelationalStatus::Failed { .. } => "failed",
                        RelationalStatus::Skipped { .. } => "skipped",
                    },
                    action: outcome.action,
                    elapsed_us: outcome.pipeline_elapsed_us,
                    cost: r.cost.clone(),
                }),
                error: false,
            }
        }
    }
}

fn run_batch(relator: &Relator, args: &RelateArgs, path: &Path) -> Result<u8> {
    let (reader, bar) = open_batch(
        path,
        args.no_progress,
        "{spinner} relate [{elapsed_precise}] {bar:40} {bytes}/{total_bytes} (eta {eta}) {msg}",
    )?;
    // A JSON line can escape each input byte into up to 6 bytes; allow that much plus slack.
    let max_line = relator
        .pipeline
        .config()
        .limits
        .max_bytes
        .saturating_mul(6)
        .saturating_add(64 * 1024);
    let mut reader = reader;
    let mut out = io::BufWriter::new(crate::out::stdout());
    let mut summary = SummaryBuilder::default();
    let mut worst = Action::Allow;
    let mut line_no = 0usize;
    loop {
        let (chunk, bytes, eof): (Vec<ChunkLine>, u64, bool) =
            read_chunk(&mut reader, &mut line_no, max_line, CHUNK_LINES)?;
        let rendered: Vec<Rendered> = chunk
            .par_iter()
            .map(|(n, raw)| {
                let r = match raw {
                    Ok(bytes) => relate_line(relator, bytes),
                    Err(msg) => LineResult::Error {
                        id: None,
                        message: msg.clone(),
                    },
                };
                render(*n, r, args.json)
            })
            .collect();
        for r in rendered {
            out.write_all(&r.bytes)?;
            if r.error {
                summary.errors += 1;
            }
            if let Some(t) = r.tally {
                worst = worst.max(t.action);
                summary.add(t);
            }
        }
        out.flush()?;
        bar.inc(bytes);
        bar.set_message(format!(
            "{} related, {} errors",
            summary.related, summary.errors
        ));
        if eof {
            break;
        }
    }
    bar.finish_and_clear();
    out.flush()?;
    let s = summary.finish(relator);
    if let Some(p) = &args.summary {
        let mut json = serde_json::to_vec_pretty(&s)?;
        json.push(b'\n');
        std::fs::write(p, json).with_context(|| format!("writing {}", p.display()))?;
    }
    eprint!("{}", s.human());
    if s.errors > 0 {
        return Ok(EXIT_BATCH_ERRORS);
    }
    if s.related == 0 {
        return Ok(EXIT_ALLOW);
    }
    Ok(exit_code(worst))
}

/// Per expected label: how many, how many predicted, how many right.
#[derive(Debug, Default, Clone, Serialize)]
struct LabelStats {
    expected: u64,
    predicted: u64,
    correct: u64,
    accuracy: Option<f64>,
}

/// Time per prompt (the whole pipeline), milliseconds.
#[derive(Debug, Default, Clone, Serialize)]
struct TimeStats {
    mean: Option<f64>,
    p50: Option<f64>,
    p95: Option<f64>,
    max: Option<f64>,
}

/// The batch summary (`--summary FILE`, and on stderr in words).
#[derive(Debug, Serialize)]
struct Summary {
    schema: &'static str,
    /// The relational layer and its backend.
    layer: String,
    backend: Option<String>,
    /// Prompts related (each has a report, possibly failed or skipped).
    related: u64,
    /// Lines that could not be related (error records).
    errors: u64,
    /// Reports by status.
    ok: u64,
    failed: u64,
    skipped: u64,
    /// Prompts by the pipeline's action.
    actions: BTreeMap<String, u64>,
    /// Prompts whose `label` is one of the four (the denominator of `accuracy`).
    labelled: u64,
    /// Of those, prompts whose predicted label is the expected one.
    correct: u64,
    /// `correct / labelled` (a failed or skipped evaluation counts as wrong).
    accuracy: Option<f64>,
    /// Per label (the four, in order).
    labels: BTreeMap<String, LabelStats>,
    /// Expected label → predicted label → prompts; `none` when the evaluation gave no label.
    confusion: BTreeMap<String, BTreeMap<String, u64>>,
    /// Labels outside the four (not in the accuracy), with their counts.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    other_labels: BTreeMap<String, u64>,
    time_ms: TimeStats,
    /// Model calls, tokens and cost over the batch.
    cost: RelationalCost,
}

#[derive(Default)]
struct SummaryBuilder {
    related: u64,
    errors: u64,
    tallies: Vec<Tally>,
}

impl SummaryBuilder {
    fn add(&mut self, t: Tally) {
        self.related += 1;
        self.tallies.push(t);
    }

    fn finish(self, relator: &Relator) -> Summary {
        let backend = relator
            .pipeline
            .config()
            .layers
            .iter()
            .rev()
            .find(|l| l.kind == RELATIONAL_KIND)
            .and_then(|l| layer_backend(&l.options).ok())
            .map(|b| b.name().to_string());
        let mut s = Summary {
            schema: SUMMARY_SCHEMA,
            layer: relator.layer.clone(),
            backend,
            related: self.related,
            errors: self.errors,
            ok: 0,
            failed: 0,
            skipped: 0,
            actions: BTreeMap::new(),
            labelled: 0,
            correct: 0,
            accuracy: None,
            labels: BTreeMap::new(),
            confusion: BTreeMap::new(),
            other_labels: BTreeMap::new(),
            time_ms: TimeStats::default(),
            cost: RelationalCost::default(),
        };
        let mut times: Vec<u64> = Vec::with_capacity(self.tallies.len());
        let any_labels = self.tallies.iter().any(|t| t.expected.is_some());
        if any_labels {
            for l in RelationalLabel::ALL {
                s.labels.insert(l.name().into(), LabelStats::default());
            }
        }
        for t in &self.tallies {
            match t.status {
                "ok" => s.ok += 1,
                "failed" => s.failed += 1,
                _ => s.skipped += 1,
            }
            *s.actions.entry(t.action.name().to_string()).or_default() += 1;
            times.push(t.elapsed_us);
            s.cost.merge(&t.cost);
            if let Some(p) = t.label
                && any_labels
                && let Some(ls) = s.labels.get_mut(p.name())
            {
                ls.predicted += 1;
            }
            let Some(expected) = &t.expected else {
                continue;
            };
            let Some(want) = RelationalLabel::from_name(expected) else {
                *s.other_labels.entry(expected.clone()).or_default() += 1;
                continue;
            };
            s.labelled += 1;
            let got = t.label.map_or("none", |l| l.name());
            *s.confusion
                .entry(want.name().to_string())
                .or_default()
                .entry(got.to_string())
                .or_default() += 1;
            let right = t.label == Some(want);
            let ls = s.labels.entry(want.name().to_string()).or_default();
            ls.expected += 1;
            if right {
                ls.correct += 1;
                s.correct += 1;
            }
        }
        for ls in s.labels.values_mut() {
            ls.accuracy = (ls.expected > 0).then(|| ls.correct as f64 / ls.expected as f64);
        }
        s.accuracy = (s.labelled > 0).then(|| s.correct as f64 / s.labelled as f64);
        times.sort_unstable();
        if !times.is_empty() {
            let to_ms = |us: u64| us as f64 / 1000.0;
            let pct = |p: f64| {
                // Nearest rank.
                let rank = ((p * times.len() as f64).ceil() as usize).clamp(1, times.len());
                to_ms(times[rank - 1])
            };
            s.time_ms = TimeStats {
                mean: Some(to_ms(times.iter().sum::<u64>()) / times.len() as f64),
                p50: Some(pct(0.5)),
                p95: Some(pct(0.95)),
                max: times.last().map(|&t| to_ms(t)),
            };
        }
        s
    }
}

impl Summary {
    /// The summary in words (stderr).
    fn human(&self) -> String {
        let mut o = String::new();
        let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}"));
        o.push_str(&format!(
            "rampart: relate: {} related ({} ok, {} failed, {} skipped), {} errors; backend {}\n",
            self.related,
            self.ok,
            self.failed,
            self.skipped,
            self.errors,
            self.backend.as_deref().unwrap_or("?")
        ));
        if self.labelled > 0 {
            o.push_str(&format!(
                "  accuracy (4 labels): {:.3} ({}/{})\n",
                self.accuracy.unwrap_or(0.0),
                self.correct,
                self.labelled
            ));
            o.push_str("  confusion (rows: expected, columns: predicted)\n");
            let cols: Vec<&str> = RelationalLabel::ALL
                .iter()
                .map(|l| l.name())
                .chain(["none"])
                .collect();
            o.push_str(&format!("  {:<14}", ""));
            for c in &cols {
                o.push_str(&format!(" {c:>12}"));
            }
            o.push('\n');
            for l in RelationalLabel::ALL {
                o.push_str(&format!("  {:<14}", l.name()));
                let row = self.confusion.get(l.name());
                for c in &cols {
                    let n = row.and_then(|r| r.get(*c)).copied().unwrap_or(0);
                    o.push_str(&format!(" {n:>12}"));
                }
                o.push('\n');
            }
            o.push_str("  per label:");
            for l in RelationalLabel::ALL {
                if let Some(ls) = self.labels.get(l.name()) {
                    let acc = ls.accuracy.map_or("-".to_string(), |a| format!("{a:.3}"));
                    o.push_str(&format!(
                        "  {} {}/{} ({acc}), predicted {}",
                        l.name(),
                        ls.correct,
                        ls.expected,
                        ls.predicted
                    ));
                    o.push(';');
                }
            }
            o.pop();
            o.push('\n');
        }
        if !self.other_labels.is_empty() {
            let other: Vec<String> = self
                .other_labels
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            o.push_str(&format!(
                "  labels outside the four (not in the accuracy): {}\n",
                other.join(", ")
            ));
        }
        o.push_str(&format!(
            "  time per prompt: mean {} ms, p50 {} ms, p95 {} ms\n",
            f(self.time_ms.mean),
            f(self.time_ms.p50),
            f(self.time_ms.p95)
        ));
        o.push_str(&format!(
            "  model calls: {}, tokens: {} input / {} output, cost ${:.4}\n",
            self.cost.calls, self.cost.input_tokens, self.cost.output_tokens, self.cost.cost_usd
        ));
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(expected: Option<&str>, label: Option<RelationalLabel>, us: u64) -> Tally {
        Tally {
            expected: expected.map(Into::into),
            label,
            status: if label.is_some() { "ok" } else { "failed" },
            action: Action::Allow,
            elapsed_us: us,
            cost: RelationalCost::default(),
        }
    }

    #[test]
    fn llm_flags_fill_the_llm_backends_endpoint() {
        let mut t = toml::Table::new();
        set_llm_endpoint(&mut t, Some("http://127.0.0.1:8080/v1"), Some("m1")).unwrap();
        let inner = t["llm"]["llm"].as_table().unwrap();
        assert_eq!(inner["protocol"].as_str(), Some("openai"));
        assert_eq!(inner["base_url"].as_str(), Some("http://127.0.0.1:8080/v1"));
        assert_eq!(inner["model"].as_str(), Some("m1"));
        // A configured protocol and an environment variable for the model are kept.
        let mut t: toml::Table =
            toml::from_str("[llm]\nmodel_env = \"M\"\n[llm.llm]\nprotocol = \"anthropic\"\n")
                .unwrap();
        set_llm_endpoint(&mut t, Some("http://h/v1"), None).unwrap();
        assert_eq!(t["llm"]["llm"]["protocol"].as_str(), Some("anthropic"));
        let mut t = toml::Table::new();
        let e = set_llm_endpoint(&mut t, Some("http://h/v1"), None).unwrap_err();
        assert!(e.to_string().contains("--llm-model"), "{e}");
    }

    #[test]
    fn the_summary_counts_labels_confusion_and_time() {
        let relator = Relator {
            pipeline: rampart_rules::rules_pipeline().unwrap(),
            layer: "relational".into(),
        };
        let mut b = SummaryBuilder::default();
        use RelationalLabel::*;
        b.add(tally(Some("reciprocal"), Some(Reciprocal), 1000));
        b.add(tally(Some("extractive"), Some(Manipulative), 2000));
        b.add(tally(Some("extractive"), None, 3000));
        b.add(tally(Some("benign"), Some(Reciprocal), 4000));
        b.add(tally(None, Some(Reciprocal), 100_000));
        let s = b.finish(&relator);
        assert_eq!((s.related, s.labelled, s.correct), (5, 3, 1));
        assert_eq!((s.ok, s.failed), (4, 1));
        assert!((s.accuracy.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.confusion["extractive"]["manipulative"], 1);
        assert_eq!(s.confusion["extractive"]["none"], 1);
        assert_eq!(s.labels["reciprocal"].predicted, 3);
        assert_eq!(s.labels["extractive"].expected, 2);
        assert_eq!(s.other_labels["benign"], 1);
        assert_eq!(s.time_ms.p50, Some(3.0));
        assert_eq!(s.time_ms.p95, Some(100.0));
        let h = s.human();
        assert!(h.contains("accuracy (4 labels): 0.333 (1/3)"), "{h}");
    }
}
