//! `rampart tools lint|check`: tool-call policies (rampart-tools).

use crate::EXIT_BATCH_ERRORS;
use crate::scan::read_chunk;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use rampart_tools::{CallContext, CallerInfo, Policy, ToolDecision, lint};
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

/// The largest policy file read (a policy is hand-written; anything this big is a mistake).
const MAX_POLICY_BYTES: u64 = 8 << 20;

/// The longest `--jsonl` line: arguments at their limit, escaped inside a string (up to 6
/// bytes per byte), plus the rest of the line.
const MAX_CALL_LINE: usize = rampart_tools::MAX_ARGUMENT_BYTES * 6 + 64 * 1024;

/// Lines read at a time.
const CHUNK_LINES: usize = 1024;

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Check tool-call policy files: errors and warnings, with stable codes.
    ///
    /// Errors: unknown keys (with the key meant), version, duplicates, predicates and
    /// conditions that do not compile. Warnings: unsatisfiable or suspicious rules. Exit 0
    /// clean or warnings only (printed), 1 errors (or warnings with --deny-warnings).
    Lint(LintArgs),
    /// Decide tool calls (JSONL) under a policy: ALLOW, CONFIRM or BLOCK, one JSON line each.
    ///
    /// Each answer has line, id, action, risk, rules, failed_argument, failed_check and
    /// reasons. A line that cannot be read gives an error line with its number and the run
    /// goes on; the exit status is then 3.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// Policy files (TOML).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Exit 1 when there are warnings too.
    #[arg(long)]
    pub deny_warnings: bool,
    /// One JSON object per file: {"file", "errors", "warnings", "findings": [{code,
    /// severity, location, place, message}]}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The policy file (TOML).
    #[arg(long, value_name = "FILE")]
    pub policy: PathBuf,
    /// The calls, one JSON object a line: {"id", "tool", "arguments" (an object, or a
    /// string holding one as OpenAI sends it), optional "context" {max_injection_score,
    /// tools_called}, "caller" {role, attributes}, "time" (RFC 3339; default now),
    /// "messages" (the conversation so far, OpenAI or Anthropic messages: argument values
    /// are attributed against it, its tool results scanned)}. `-` reads standard input.
    #[arg(long, value_name = "CALLS")]
    pub jsonl: PathBuf,
    /// The pipeline configuration that scans the tool results of lines with "messages"
    /// (default: the embedded configuration).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub fn run(cmd: &ToolsCommand) -> Result<u8> {
    match cmd {
        ToolsCommand::Lint(a) => run_lint(a),
        ToolsCommand::Check(a) => run_check(a),
    }
}

fn read_policy(path: &Path) -> Result<String> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("{}", path.display()))?
        .len();
    if len > MAX_POLICY_BYTES {
        bail!(
            "{}: {len} bytes, more than the {MAX_POLICY_BYTES} a policy may have",
            path.display()
        );
    }
    std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))
}

#[derive(Serialize)]
struct FileReport<'a> {
    file: String,
    errors: usize,
    warnings: usize,
    findings: &'a [rampart_tools::Finding],
}

fn run_lint(args: &LintArgs) -> Result<u8> {
    let mut failed = false;
    for path in &args.files {
        let report = match read_policy(path) {
            Ok(src) => lint(&src),
            Err(e) => {
                // An unreadable file is an error of the run, reported like a finding.
                failed = true;
                if args.json {
                    let line = serde_json::json!({
                        "file": path.display().to_string(),
                        "error": format!("{e:#}"),
                    });
                    outln!("{line}")?;
                } else {
                    outln!("{}: error: {e:#}", path.display())?;
                }
                continue;
            }
        };
        let errors = report.errors().count();
        let warnings = report.warnings().count();
        failed |= errors > 0 || (args.deny_warnings && warnings > 0);
        if args.json {
            let rec = FileReport {
                file: path.display().to_string(),
                errors,
                warnings,
                findings: &report.findings,
            };
            outln!("{}", serde_json::to_string(&rec)?)?;
        } else {
            for f in &report.findings {
                outln!("{}: {f}", path.display())?;
            }
            outln!(
                "{}: {errors} error(s), {warnings} warning(s)",
                path.display()
            )?;
        }
    }
    Ok(u8::from(failed))
}

/// One input line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallLine {
    #[serde(default)]
    id: serde_json::Value,
    tool: String,
    /// Read strictly: a key given twice is an error, not the last one kept.
    #[serde(
        default,
        deserialize_with = "rampart_tools::strict::deserialize_option"
    )]
    arguments: Option<serde_json::Value>,
    #[serde(default)]
    context: LineContext,
    #[serde(default)]
    caller: CallerInfo,
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    messages: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LineContext {
    #[serde(default)]
    max_injection_score: Option<f32>,
    #[serde(default)]
    tools_called: Vec<String>,
}

/// One output line: every field present (null where it does not apply), so consumers need
/// no defaults.
#[derive(Debug, Serialize)]
struct Answer<'a> {
    line: usize,
    id: &'a serde_json::Value,
    action: &'static str,
    risk: Option<&'static str>,
    rules: &'a [String],
    failed_argument: Option<&'a str>,
    failed_check: Option<&'a str>,
    reasons: &'a [String],
    provenance: &'a [rampart_tools::ProvenanceCheck],
}

#[derive(Debug, Serialize)]
struct ErrorLine<'a> {
    line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a serde_json::Value>,
    error: &'a str,
}

fn run_check(args: &CheckArgs) -> Result<u8> {
    let src = read_policy(&args.policy)?;
    let policy = Policy::from_toml(&src).with_context(|| format!("{}", args.policy.display()))?;
    let mut reader: Box<dyn BufRead + Send> = if args.jsonl.as_os_str() == "-" {
        Box::new(io::BufReader::new(io::stdin()))
    } else {
        let f = std::fs::File::open(&args.jsonl)
            .with_context(|| format!("{}", args.jsonl.display()))?;
        Box::new(io::BufReader::new(f))
    };
    let now = rampart_audit::now_ms();
    // Built at the first line with messages: a policy-only run does not pay for it.
    let cell: std::cell::OnceCell<rampart::Pipeline> = std::cell::OnceCell::new();
    let pipeline = || -> Result<&rampart::Pipeline, String> {
        if let Some(p) = cell.get() {
            return Ok(p);
        }
        let p = rampart::Builder::from_optional_file(args.config.as_deref())
            .build()
            .map_err(|e| format!("the pipeline for messages: {e}"))?;
        Ok(cell.get_or_init(|| p))
    };
    let mut out = io::BufWriter::new(crate::out::stdout());
    let mut line_no = 0usize;
    let mut errors = 0usize;
    loop {
        let (chunk, _, eof) = read_chunk(&mut *reader, &mut line_no, MAX_CALL_LINE, CHUNK_LINES)
            .with_context(|| format!("{}", args.jsonl.display()))?;
        for (n, raw) in chunk {
            let result = raw.map_err(|e| (None, e)).and_then(|bytes| {
                if bytes.iter().all(u8::is_ascii_whitespace) {
                    return Ok(None);
                }
                decide(&policy, &bytes, now, &pipeline).map(Some)
            });
            match result {
                Ok(None) => {}
                Ok(Some((id, d))) => {
                    let a = Answer {
                        line: n,
                        id: &id,
                        action: d.action.name(),
                        risk: d.risk.map(|r| r.name()),
                        rules: &d.rules,
                        failed_argument: d.failed_argument.as_deref(),
                        failed_check: d.failed_check.as_deref(),
                        reasons: &d.reasons,
                        provenance: &d.provenance,
                    };
                    serde_json::to_writer(&mut out, &a)?;
                    out.write_all(b"\n")?;
                }
                Err((id, msg)) => {
                    errors += 1;
                    let e = ErrorLine {
                        line: n,
                        id: id.as_ref(),
                        error: &msg,
                    };
                    serde_json::to_writer(&mut out, &e)?;
                    out.write_all(b"\n")?;
                }
            }
        }
        if eof {
            break;
        }
    }
    out.flush()?;
    Ok(if errors > 0 { EXIT_BATCH_ERRORS } else { 0 })
}

type LineError = (Option<serde_json::Value>, String);

/// Decides one line; `Err` is the error line's id (when the line has one) and message (no
/// argument values).
fn decide<'p>(
    policy: &Policy,
    bytes: &[u8],
    now_ms: i64,
    pipeline: &dyn Fn() -> Result<&'p rampart::Pipeline, String>,
) -> Result<(serde_json::Value, ToolDecision), LineError> {
    let text = std::str::from_utf8(bytes).map_err(|_| (None, "not UTF-8".to_string()))?;
    let line: CallLine = serde_json::from_str(text).map_err(|e| {
        // The id, when the line is JSON with one, so the error can be matched to its call.
        let id = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| v.get("id").cloned());
        (id, format!("not a call: {e}"))
    })?;
    let fail = |msg: String| (Some(line.id.clone()), msg);
    if line.tool.trim().is_empty() {
        return Err(fail("`tool` is empty".into()));
    }
    let time_ms = match &line.time {
        Some(t) => rampart_audit::parse_time(t, now_ms).map_err(|e| fail(format!("time: {e}")))?,
        None => now_ms,
    };
    let mut ctx = CallContext {
        max_injection_score: line.context.max_injection_score,
        tools_called: line.context.tools_called,
        caller: line.caller,
        now_ms: Some(u64::try_from(time_ms).map_err(|_| fail("time: before 1970".into()))?),
        conversation: None,
    };
    if let Some(m) = &line.messages {
        let p = pipeline().map_err(fail)?;
        rampart::read_conversation(p, m, &mut ctx).map_err(|e| fail(e.to_string()))?;
    }
    let d = match line.arguments {
        // OpenAI's form: a string holding the JSON object.
        Some(serde_json::Value::String(raw)) => policy.check_raw(&line.tool, &raw, &ctx),
        Some(v) => policy.check(&rampart_tools::ToolCall::new(&line.tool, v), &ctx),
        None => policy.check(
            &rampart_tools::ToolCall::new(&line.tool, serde_json::json!({})),
            &ctx,
        ),
    };
    Ok((line.id, d))
}
