//! `rampart scan`: one input, or a JSONL batch scanned in parallel.

use crate::{EXIT_ALLOW, EXIT_BATCH_ERRORS, EXIT_BLOCK, EXIT_SANITIZE, PipelineArgs};
use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rampart_conversation::{ConversationOptions, ConversationScanner};
use rampart_core::conversation::{ConversationRequest, Turn};
use rampart_core::{Action, Role, ScanOutcome, ScanRequest, Segment};
use rampart_datasets::DatasetTurn;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Lines read and scanned together; output order always follows input order.
const CHUNK_LINES: usize = 2048;

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Text to scan (all arguments joined by spaces). Without text, --file or --jsonl, stdin
    /// is read as one text.
    pub text: Vec<String>,
    /// Scan the contents of a file as one text.
    #[arg(long, short = 'f', value_name = "FILE", conflicts_with_all = ["text", "jsonl"])]
    pub file: Option<PathBuf>,
    /// Scan a JSONL batch, `-` for stdin: `{"id":…,"text":…}`,
    /// `{"id":…,"segments":[{"role":…,"text":…}]}` or a conversation,
    /// `{"id":…,"turns":[{"role":…,"text":…,"tool_calls":[…],"tool_call_id":…}],
    /// "conversation_id":…}` per line (judged statelessly: every call of the conversation is
    /// replayed; the decision gets the per-conversation part `conversation`; dataset turns'
    /// `rewind` is applied and `forged` ignored). Also accepted and ignored: the
    /// dataset fields (label, category, source, split, language, carrier, position,
    /// mutation) and
    /// `meta`, any JSON value for the caller's own data (not copied into the decisions: `id`
    /// joins them).
    #[arg(long, value_name = "FILE", conflicts_with = "text")]
    pub jsonl: Option<PathBuf>,
    /// The role of the text, --file or stdin: `user` (default), `system`, `developer`, `tool`
    /// (a tool's output), `retrieved` (a pasted document, web page or email) or `assistant`.
    /// `tool` and `retrieved` are scanned as data channels. A batch names roles per line.
    #[arg(long, value_name = "ROLE", value_parser = parse_role, conflicts_with = "jsonl")]
    pub role: Option<Role>,
    /// Print decisions as JSON (one per line).
    #[arg(long)]
    pub json: bool,
    /// With --json, add the sanitized text to SANITIZE decisions (it is prompt text). The
    /// human format shows it with --show-matches.
    #[arg(long, requires = "json")]
    pub include_sanitized: bool,
    /// In the human format, show the matched text of each finding and the sanitized text
    /// (prompt text: off by default).
    #[arg(long)]
    pub show_matches: bool,
    /// For a batch, print only how many prompts got each action (like `rg -c`), plus per-line
    /// errors on stderr. The full pipeline still runs on every prompt.
    #[arg(long, requires = "jsonl", conflicts_with_all = ["json", "show_matches", "include_sanitized"])]
    pub summary: bool,
    /// Worker threads for batches (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Conversation options for `turns` lines: a TOML file with a `[conversation]` table
    /// (configs/conversation.toml). Default: the built-in options.
    #[arg(long, value_name = "FILE", requires = "jsonl")]
    pub conversation_config: Option<PathBuf>,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
}

/// One line of a JSONL batch. Dataset fields (label, category, …) are accepted and ignored
/// so evaluation sets can be scanned as they are, and `meta` carries whatever the caller
/// keeps with a prompt; anything else is an error.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchLine {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    segments: Option<Vec<Segment>>,
    #[serde(default)]
    turns: Option<Vec<DatasetTurn>>,
    #[serde(default)]
    conversation_id: Option<String>,
    #[serde(default, rename = "attack_turn")]
    _attack_turn: Option<serde_json::Value>,
    #[serde(default, rename = "label")]
    _label: Option<serde_json::Value>,
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
    #[serde(default, rename = "mutation")]
    _mutation: Option<serde_json::Value>,
    #[serde(default, rename = "meta")]
    _meta: Option<serde_json::Value>,
}

#[derive(Debug, Serialize)]
struct ErrorRecord<'a> {
    line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<serde_json::Value>,
    error: &'a str,
}

pub(crate) fn exit_code(action: Action) -> u8 {
    match action {
        Action::Allow => EXIT_ALLOW,
        Action::Sanitize => EXIT_SANITIZE,
        Action::Block => EXIT_BLOCK,
    }
}

pub fn run(args: &ScanArgs) -> Result<u8> {
    let pipeline = Arc::new(args.pipeline.build_for_one_run()?);
    if let Some(path) = &args.jsonl {
        let mut options = match &args.conversation_config {
            Some(p) => ConversationOptions::load(p)?,
            None => ConversationOptions::default(),
        };
        // As the pipeline's rules: the agreement pack compiles when a conversation needs it.
        options
            .compile
            .get_or_insert(rampart_rules::plans::Compile::FirstUse);
        let scanner = ConversationScanner::stateless(pipeline.clone(), options)
            .context("conversation options")?;
        if let Some(n) = args.threads {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build_global()
                .context("configuring worker threads")?;
        }
        let result = run_batch(&scanner, args, path);
        // Freeing the compiled automata and regexes (many allocations) takes milliseconds
        // that the exit, which is next, spends for nothing: the OS reclaims it at once.
        std::mem::forget(scanner);
        std::mem::forget(pipeline);
        return result;
    }
    let limit = pipeline.config().limits.max_bytes;
    let text = if let Some(path) = &args.file {
        let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        read_bounded(f, limit).with_context(|| format!("reading {}", path.display()))?
    } else if !args.text.is_empty() {
        args.text.join(" ")
    } else {
        if io::stdin().is_terminal() {
            eprintln!("rampart: reading the text to scan from stdin (end with Ctrl-D)");
        }
        read_bounded(io::stdin().lock(), limit).context("reading stdin")?
    };
    let req = ScanRequest::segments(vec![Segment::new(args.role.unwrap_or(Role::User), text)]);
    let outcome = pipeline.scan(&req)?;
    let mut out = crate::out::stdout();
    if args.json {
        write_json(&mut out, &outcome, args.include_sanitized, None)?;
    } else {
        crate::human::write(&mut out, &outcome, &req, args.show_matches)?;
    }
    out.flush()?;
    Ok(exit_code(outcome.decision.action))
}

/// A role by its name or one of its aliases (`document`, `rag`, `function`, `application`),
/// as in a JSONL batch.
fn parse_role(name: &str) -> Result<Role, String> {
    serde_json::from_value(serde_json::Value::String(name.to_string())).map_err(|_| {
        let names: Vec<&str> = Role::ALL.iter().map(|r| r.name()).collect();
        format!("unknown role {name:?}: one of {}", names.join(", "))
    })
}

/// Reads at most `limit` bytes; more is an error (never a silent truncation), and memory
/// stays bounded however large the input is.
pub(crate) fn read_bounded(r: impl Read, limit: usize) -> Result<String> {
    let mut buf = Vec::new();
    r.take(limit as u64 + 1).read_to_end(&mut buf)?;
    if buf.len() > limit {
        bail!(
            "input is larger than the limit of {limit} bytes (limits.max_bytes); refusing to scan a truncated prompt"
        );
    }
    String::from_utf8(buf).map_err(|e| {
        anyhow::anyhow!(
            "input is not valid UTF-8 (first bad byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// One decision as a JSON line; `id` replaces the decision's `id` (a batch line's `id` that
/// was not a string is echoed as it was given).
fn write_json(
    out: &mut impl Write,
    outcome: &ScanOutcome,
    include_sanitized: bool,
    id: Option<serde_json::Value>,
) -> Result<()> {
    let mut line = Vec::new();
    let sanitized = include_sanitized && outcome.sanitized.is_some();
    if sanitized || id.is_some() {
        let mut v = serde_json::to_value(&outcome.decision)?;
        if let serde_json::Value::Object(m) = &mut v {
            if sanitized {
                m.insert(
                    "sanitized".into(),
                    serde_json::to_value(&outcome.sanitized)?,
                );
            }
            if let Some(id) = id {
                m.insert("id".into(), id);
            }
        }
        serde_json::to_writer(&mut line, &v)?;
    } else {
        serde_json::to_writer(&mut line, &outcome.decision)?;
    }
    line.push(b'\n');
    // One write of the whole line: an error writing `out` stays an `io::Error` (a broken
    // pipe must be recognisable), which serde_json would wrap.
    out.write_all(&line)?;
    Ok(())
}

/// A scanned line: the outcome, the request shown by the human format and the line's `id` as
/// it was given (a number is echoed as a number; the decision's `id` is its text).
enum LineResult {
    Outcome(
        Box<ScanOutcome>,
        Box<ScanRequest>,
        Option<serde_json::Value>,
    ),
    Error {
        id: Option<serde_json::Value>,
        message: String,
    },
    Blank,
}

pub(crate) fn id_string(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A record's JSON error. serde_json counts lines within the record, which is always one
/// line of the batch: its "at line 1 column N" would contradict the batch line number the
/// error record carries, so only the column is kept.
/// One JSONL line as a `T`: `None` for a blank line, else the record or why it is not one
/// (not UTF-8, not JSON, not the record's shape).
pub(crate) fn json_line<T: serde::de::DeserializeOwned>(raw: &[u8]) -> Option<Result<T, String>> {
    let text = match std::str::from_utf8(raw) {
        Ok(t) => t,
        Err(e) => {
            return Some(Err(format!(
                "invalid UTF-8 at byte {} of the line",
                e.valid_up_to()
            )));
        }
    };
    if text.trim().is_empty() {
        return None;
    }
    Some(serde_json::from_str(text).map_err(|e| json_error(&e)))
}

pub(crate) fn json_error(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&position) {
        Some(what) => format!("invalid JSON record at column {}: {what}", e.column()),
        None => format!("invalid JSON record: {full}"),
    }
}

fn scan_line(scanner: &ConversationScanner, raw: &[u8]) -> LineResult {
    let pipeline = scanner.pipeline();
    let line: BatchLine = match json_line(raw) {
        None => return LineResult::Blank,
        Some(Err(message)) => return LineResult::Error { id: None, message },
        Some(Ok(l)) => l,
    };
    let raw_id = line.id;
    let segments = match (line.text, line.segments, line.turns) {
        (Some(t), None, None) => vec![Segment::new(rampart_core::Role::User, t)],
        (None, Some(s), None) => s,
        (None, None, Some(turns)) => {
            return scan_conversation(scanner, raw_id, turns, line.conversation_id);
        }
        _ => {
            return LineResult::Error {
                id: raw_id,
                message: "a record needs exactly one of `text`, `segments` or `turns`".into(),
            };
        }
    };
    let mut req = ScanRequest::segments(segments);
    req.id = raw_id.as_ref().map(id_string);
    match pipeline.scan(&req) {
        Ok(o) => LineResult::Outcome(Box::new(o), Box::new(req), raw_id),
        Err(e) => LineResult::Error {
            id: raw_id,
            message: e.to_string(),
        },
    }
}

/// Scans one conversation line. Dataset turns may carry `rewind: K` (the client cut the
/// conversation back to its first K messages before this turn: applied) and `forged` (who
/// wrote an assistant turn: meaningless without a ledger, ignored).
fn scan_conversation(
    scanner: &ConversationScanner,
    raw_id: Option<serde_json::Value>,
    raw: Vec<DatasetTurn>,
    conversation_id: Option<String>,
) -> LineResult {
    let id = raw_id.as_ref().map(id_string);
    let mut turns: Vec<Turn> = Vec::with_capacity(raw.len());
    for (i, t) in raw.iter().enumerate() {
        if let Some(k) = t.rewind {
            if k > turns.len() {
                return LineResult::Error {
                    id: raw_id,
                    message: format!(
                        "turns[{i}].rewind must be a number of messages kept, at most {}",
                        turns.len()
                    ),
                };
            }
            turns.truncate(k);
        }
        turns.push(t.to_turn());
    }
    let req = ConversationRequest {
        id: id.clone(),
        conversation_id,
        turns,
    };
    match scanner.scan(&req) {
        Ok(o) => {
            // The human format shows the newest call's segments.
            let segments = o
                .decision
                .reports
                .find::<rampart_conversation::ConversationReport>()
                .map(|c| {
                    c.segment_messages
                        .iter()
                        .filter_map(|&m| req.turns.get(m))
                        .map(|t| Segment {
                            role: t.role,
                            text: t.content(),
                            trust: t.trust,
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut shown = ScanRequest::segments(segments);
            shown.id = id;
            let outcome = ScanOutcome {
                decision: o.decision,
                sanitized: o.sanitized,
            };
            LineResult::Outcome(Box::new(outcome), Box::new(shown), raw_id)
        }
        Err(e) => LineResult::Error {
            id: raw_id,
            message: e.to_string(),
        },
    }
}

/// Opens a JSONL batch (`-` for stdin) with a 1 MiB buffer, and a progress bar on stderr
/// (hidden with `no_progress` or when stderr is not a terminal; a byte bar drawn with
/// `template` when the file's size is known, else a spinner).
pub(crate) fn open_batch(
    path: &Path,
    no_progress: bool,
    template: &str,
) -> Result<(Box<dyn BufRead + Send>, ProgressBar)> {
    let (reader, total): (Box<dyn BufRead + Send>, Option<u64>) = if path.as_os_str() == "-" {
        (
            Box::new(BufReader::with_capacity(1 << 20, io::stdin())),
            None,
        )
    } else {
        let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(BufReader::with_capacity(1 << 20, f)), len)
    };
    let show = !no_progress && io::stderr().is_terminal();
    let bar = match (show, total) {
        (false, _) => ProgressBar::hidden(),
        (true, Some(n)) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr())
            .with_style(
                ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            ),
        (true, None) => ProgressBar::new_spinner(),
    };
    Ok((reader, bar))
}

fn run_batch(scanner: &ConversationScanner, args: &ScanArgs, path: &Path) -> Result<u8> {
    let pipeline = scanner.pipeline();
    let (reader, bar) = open_batch(
        path,
        args.no_progress,
        "{spinner} [{elapsed_precise}] {bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta}) {msg}",
    )?;
    let show = !args.no_progress && io::stderr().is_terminal();
    // A JSON line can escape each input byte into up to 6 bytes; allow that much plus slack.
    let max_line = pipeline
        .config()
        .limits
        .max_bytes
        .saturating_mul(6)
        .saturating_add(64 * 1024);

    let mut reader = reader;
    let mut out = io::BufWriter::with_capacity(1 << 16, crate::out::stdout());
    let mut worst = Action::Allow;
    let mut counts = [0usize; 3];
    let mut errors = 0usize;
    let mut scanned = 0usize;
    let mut line_no = 0usize;
    let process = |chunk: &[ChunkLine]| -> Vec<Rendered> {
        // Scan and render in the workers; the main thread only writes bytes in order.
        chunk
            .par_iter()
            .map(|(n, raw)| {
                let r = match raw {
                    Ok(bytes) => scan_line(scanner, bytes),
                    Err(msg) => LineResult::Error {
                        id: None,
                        message: msg.clone(),
                    },
                };
                render(*n, r, args)
            })
            .collect()
    };
    let mut next = read_chunk(&mut reader, &mut line_no, max_line, CHUNK_LINES)?;
    loop {
        let (chunk, bytes, eof) = next;
        if chunk.is_empty() {
            break;
        }
        // The next chunk is read while this one is scanned, so the workers never wait for
        // input between chunks.
        let (rendered, following) = if eof {
            (process(&chunk), None)
        } else {
            rayon::join(
                || process(&chunk),
                || Some(read_chunk(&mut reader, &mut line_no, max_line, CHUNK_LINES)),
            )
        };
        for r in rendered {
            if args.summary {
                io::stderr().write_all(&r.bytes)?;
            } else {
                out.write_all(&r.bytes)?;
            }
            match r.action {
                Some(a) => {
                    scanned += 1;
                    counts[a as usize] += 1;
                    worst = worst.max(a);
                }
                None if r.error => errors += 1,
                None => {}
            }
        }
        bar.inc(bytes);
        bar.set_message(format!("{scanned} scanned, {errors} errors"));
        match following {
            Some(r) => next = r?,
            None => break,
        }
    }
    bar.finish_and_clear();
    if args.summary {
        for (a, n) in [Action::Allow, Action::Sanitize, Action::Block]
            .iter()
            .zip(counts)
        {
            writeln!(out, "{a}\t{n}")?;
        }
        writeln!(out, "ERROR\t{errors}")?;
    }
    out.flush()?;
    if !args.json && !args.summary || show {
        eprintln!("rampart: {scanned} scanned, {errors} errors, strictest action {worst}");
    }
    if errors > 0 {
        return Ok(EXIT_BATCH_ERRORS);
    }
    Ok(exit_code(worst))
}

/// One line of a chunk: its number and its bytes, or why it was skipped.
pub(crate) type ChunkLine = (usize, Result<Vec<u8>, String>);

/// Reads up to `max_lines` lines (raw bytes: invalid UTF-8 is an error for that line
/// only). Returns the lines, the bytes consumed, and whether the input ended.
pub(crate) fn read_chunk(
    reader: &mut (dyn BufRead + Send),
    line_no: &mut usize,
    max_line: usize,
    max_lines: usize,
) -> io::Result<(Vec<ChunkLine>, u64, bool)> {
    let mut chunk: Vec<ChunkLine> = Vec::with_capacity(max_lines);
    let mut bytes = 0u64;
    while chunk.len() < max_lines {
        let mut buf = Vec::new();
        let (n, overflow) = read_line_bounded(reader, &mut buf, max_line)?;
        if n == 0 {
            return Ok((chunk, bytes, true));
        }
        bytes += n as u64;
        *line_no += 1;
        if overflow {
            chunk.push((
                *line_no,
                Err(format!("line longer than {max_line} bytes; skipped")),
            ));
        } else {
            chunk.push((*line_no, Ok(buf)));
        }
    }
    Ok((chunk, bytes, false))
}

/// One batch line's output, rendered by a worker.
struct Rendered {
    bytes: Vec<u8>,
    action: Option<Action>,
    error: bool,
}

fn render(n: usize, r: LineResult, args: &ScanArgs) -> Rendered {
    let mut bytes = Vec::new();
    let (action, error, res) = match r {
        LineResult::Blank => (None, false, Ok(())),
        LineResult::Error { id, message } => {
            let res = if args.json {
                serde_json::to_writer(
                    &mut bytes,
                    &ErrorRecord {
                        line: n,
                        id,
                        error: &message,
                    },
                )
                .map_err(anyhow::Error::from)
                .and_then(|()| bytes.write_all(b"\n").map_err(Into::into))
            } else {
                writeln!(bytes, "line {n}: error: {message}").map_err(Into::into)
            };
            (None, true, res)
        }
        LineResult::Outcome(outcome, _, _) if args.summary => {
            (Some(outcome.decision.action), false, Ok(()))
        }
        LineResult::Outcome(outcome, req, raw_id) => {
            let res = if args.json {
                let echo = raw_id.filter(|v| !v.is_string());
                write_json(&mut bytes, &outcome, args.include_sanitized, echo)
            } else {
                crate::human::write(&mut bytes, &outcome, &req, args.show_matches)
                    .map_err(Into::into)
            };
            (Some(outcome.decision.action), false, res)
        }
    };
    if let Err(e) = res {
        // Rendering into memory cannot fail short of a bug; say so on the line itself.
        let rec = serde_json::json!({"line": n, "error": format!("cannot render decision: {e}")});
        bytes = rec.to_string().into_bytes();
        bytes.push(b'\n');
        return Rendered {
            bytes,
            action: None,
            error: true,
        };
    }
    Rendered {
        bytes,
        action,
        error,
    }
}

/// Reads one line (without the newline) into `buf`, keeping at most `max` bytes; the rest of
/// an over-long line is consumed and discarded. Returns (bytes consumed, overflowed).
fn read_line_bounded(
    r: &mut (dyn BufRead + Send),
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<(usize, bool)> {
    let mut consumed = 0;
    let mut overflow = false;
    loop {
        let available = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            break;
        }
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        let content = if done {
            &available[..take - 1]
        } else {
            &available[..take]
        };
        if !overflow {
            if buf.len() + content.len() > max {
                overflow = true;
                buf.clear();
            } else {
                buf.extend_from_slice(content);
            }
        }
        r.consume(take);
        consumed += take;
        if done {
            break;
        }
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok((consumed, overflow))
}
