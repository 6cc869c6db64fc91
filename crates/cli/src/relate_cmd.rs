//! `rampart relate`: the relational evaluator (PromptGuard) on one layered prompt or a JSONL
//! batch: per layer truth / indeterminacy / falsehood, the trust violations, the ayni
//! balance, the exchange type, the label, and what the evaluation cost; for labelled
//! batches, the four-label accuracy and confusion matrix.

use crate::scan::{ChunkLine, exit_code, json_line, open_batch, read_bounded, read_chunk};
use crate::{EXIT_ALLOW, EXIT_BATCH_ERRORS, PipelineArgs};
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use rampart_core::{Action, Pipeline};
use rampart_eval::relate::{RelateBatch, RelateTally};
use rampart_relational::{Backend, RelationalStatus};
use rampart_relational::{RelateOutcome, RelateRecord, RelateSetup, Relator, layered_request};
use rayon::prelude::*;
use serde::Serialize;
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

fn read_options(path: &Path) -> Result<toml::Table> {
    let src =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    toml::from_str(&src)
        .map_err(|e: toml::de::Error| anyhow::anyhow!("{}: {}", path.display(), e.message().trim()))
}

/// The pipeline with its relational layer: the configuration's, or the one the command
/// line's options describe.
fn relator(args: &RelateArgs) -> Result<Relator> {
    let mut config = args.pipeline.load()?;
    if let Some(ms) = args.layer_timeout_ms {
        if ms == 0 {
            bail!("--layer-timeout-ms must be greater than 0");
        }
        config.policy.layer_timeout_ms = ms;
    }
    let setup = RelateSetup {
        backend: args.backend.map(Backend::from),
        options: args
            .relational_config
            .as_deref()
            .map(read_options)
            .transpose()?,
        llm_url: args.llm_url.clone(),
        llm_model: args.llm_model.clone(),
    };
    let layer = setup.apply(&mut config)?;
    let pipeline = Pipeline::from_config_with(config, &rampart::registry())
        .context("building the pipeline with its relational layer")?;
    Ok(Relator::new(pipeline, layer))
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
    let relator = relator(args)?;
    if let Some(path) = &args.jsonl {
        if let Some(n) = args.threads {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build_global()
                .context("configuring worker threads")?;
        }
        return run_batch(&relator, args, path);
    }
    let limit = relator.pipeline().config().limits.max_bytes;
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
    let outcome = relator.relate(&req)?;
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
    if let Some(why) = &r.why {
        writeln!(out, "  why: {why}")?;
    }
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
    let record: RelateRecord = match json_line(raw) {
        None => return LineResult::Blank,
        Some(Err(message)) => return LineResult::Error { id: None, message },
        Some(Ok(r)) => r,
    };
    let id = record.id();
    match relator.relate_record(record) {
        Ok((outcome, expected)) => LineResult::Related {
            outcome: Box::new(outcome),
            expected,
        },
        Err(e) => LineResult::Error {
            id,
            message: e.to_string(),
        },
    }
}

/// One line's output, rendered by a worker, and what the summary needs of it.
struct Rendered {
    bytes: Vec<u8>,
    tally: Option<RelateTally>,
    error: bool,
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
            Rendered {
                bytes,
                tally: Some(RelateTally::of(
                    &outcome.report,
                    outcome.action,
                    outcome.pipeline_elapsed_us,
                    expected,
                )),
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
        .pipeline()
        .config()
        .limits
        .max_bytes
        .saturating_mul(6)
        .saturating_add(64 * 1024);
    let mut reader = reader;
    let mut out = io::BufWriter::new(crate::out::stdout());
    let mut batch = RelateBatch::default();
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
                batch.error();
            }
            if let Some(t) = r.tally {
                worst = worst.max(t.action);
                batch.add(t);
            }
        }
        out.flush()?;
        bar.inc(bytes);
        bar.set_message(format!(
            "{} related, {} errors",
            batch.related(),
            batch.errors()
        ));
        if eof {
            break;
        }
    }
    bar.finish_and_clear();
    out.flush()?;
    let s = batch.finish(relator.layer().to_string(), relator.backend());
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
