//! `rampart judge "text"`: ask a configuration's intent layer directly, bypassing its trigger
//! contract, and show what it said, why, and what it cost.

use crate::{EXIT_ALLOW, EXIT_BLOCK, EXIT_SANITIZE};
use anyhow::{Context, Result, bail};
use clap::Args;
use rampart_core::{PipelineConfig, ScanRequest};
use rampart_judge::JudgeLayer;
use rampart_judge::{IntentLabel, JudgeReport};
use rampart_llm::OutcomeKind;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

/// Exit status when the judge gave no verdict (down, slow, refused, unparseable…): the
/// outcome is named on stderr and in the output.
pub const EXIT_JUDGE_FAILED: u8 = 5;

/// The configuration `rampart judge` reads when `--config` is not given.
pub const DEFAULT_JUDGE_CONFIG: &str = "configs/judge.toml";

/// The shipped judge configuration, for when `configs/judge.toml` is not in the working
/// directory (an installed binary).
pub const EMBEDDED_JUDGE_CONFIG: &str = include_str!("../../../configs/judge.toml");

#[derive(Debug, Args)]
#[command(
    after_help = "Exit status of `judge`: 0 benign, 10 suspicious, 20 malicious (as `scan`'s \
                  ALLOW, SANITIZE, BLOCK), 5 the judge gave no verdict (the outcome is named), \
                  1 error, 2 usage error."
)]
pub struct JudgeArgs {
    /// Text to judge (all arguments joined by spaces); `-` or nothing reads stdin.
    pub text: Vec<String>,
    /// Pipeline configuration whose `judge` layer is asked. Default: configs/judge.toml,
    /// else the embedded copy of it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the judge's report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The configuration: `--config`, else configs/judge.toml when it exists, else the embedded
/// copy.
fn load_config(path: Option<&Path>) -> Result<PipelineConfig> {
    match path {
        Some(p) => Ok(rampart::load_config(p)?),
        None if Path::new(DEFAULT_JUDGE_CONFIG).is_file() => {
            Ok(PipelineConfig::from_path(Path::new(DEFAULT_JUDGE_CONFIG))?)
        }
        None => Ok(PipelineConfig::parse(
            EMBEDDED_JUDGE_CONFIG,
            "<embedded>/configs/judge.toml",
        )?),
    }
}

/// The exit status for a report, as `scan` maps the action the label stands for.
pub fn exit_code(r: &JudgeReport) -> u8 {
    match r.verdict.as_ref().map(|v| v.intent_label) {
        Some(IntentLabel::Benign) => EXIT_ALLOW,
        Some(IntentLabel::Suspicious) => EXIT_SANITIZE,
        Some(IntentLabel::Malicious) => EXIT_BLOCK,
        None => EXIT_JUDGE_FAILED,
    }
}

fn read_text(args: &JudgeArgs, limit: usize) -> Result<String> {
    if !args.text.is_empty() && args.text != ["-"] {
        let text = args.text.join(" ");
        if text.len() > limit {
            bail!("input is larger than the limit of {limit} bytes (limits.max_bytes)");
        }
        return Ok(text);
    }
    if io::stdin().is_terminal() {
        eprintln!("rampart: reading the text to judge from stdin (end with Ctrl-D)");
    }
    let mut buf = Vec::new();
    io::stdin()
        .lock()
        .take(limit as u64 + 1)
        .read_to_end(&mut buf)
        .context("reading stdin")?;
    if buf.len() > limit {
        bail!("input is larger than the limit of {limit} bytes (limits.max_bytes)");
    }
    String::from_utf8(buf).context("input is not valid UTF-8")
}

pub fn run(args: &JudgeArgs) -> Result<u8> {
    let config = load_config(args.config.as_deref())?;
    let limit = config.limits.max_bytes;
    let layer = JudgeLayer::from_pipeline_config(&config).context("building the judge layer")?;
    for w in layer.warnings() {
        eprintln!("rampart: warning: {w}");
    }
    let text = read_text(args, limit)?;
    let report = layer.judge_direct(&ScanRequest::text(text));
    let mut out = crate::out::stdout();
    write_report(&mut out, &report, args.json)?;
    out.flush()?;
    let code = exit_code(&report);
    if code == EXIT_JUDGE_FAILED {
        let outcome = report.outcome.map_or("none", |o| o.name());
        match &report.outcome_detail {
            Some(d) => eprintln!("rampart: the judge gave no verdict: outcome {outcome}: {d}"),
            None => eprintln!("rampart: the judge gave no verdict: outcome {outcome}"),
        }
        if let Some(hint) = no_server_hint(&report) {
            eprintln!("rampart: {hint}");
        }
    }
    Ok(code)
}

/// What to do when no judge server answered at all (connection refused, unknown host): the
/// outcome alone ("Connection refused") did not say that a server has to be started.
fn no_server_hint(report: &JudgeReport) -> Option<&'static str> {
    let detail = report.outcome_detail.as_deref()?.to_lowercase();
    let unreachable = [
        "refused",
        "connect",
        "resolve",
        "dns",
        "no route",
        "unreachable",
    ];
    (report.outcome == Some(OutcomeKind::HttpError)
        && unreachable.iter().any(|w| detail.contains(w)))
    .then_some(
        "no judge server answered at the configured url: start the local one with \
         `bash scripts/judge/judge_server.sh setup` and then `... start` (it prints the url \
         to set as RAMPART_JUDGE_URL), or point `url` at a provider (docs/judge.md, \
         \"Quick start\" and \"Pointing it at a provider\")",
    )
}

/// Writes the report: JSON (one line), or the human block `scan` prints for a judged
/// decision.
pub fn write_report(out: &mut impl Write, r: &JudgeReport, json: bool) -> Result<()> {
    if json {
        let mut line = serde_json::to_vec(r)?;
        line.push(b'\n');
        out.write_all(&line)?;
    } else {
        crate::human::write_judge(out, r)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_judge::{CacheStatus, JudgeVerdict};
    use rampart_llm::OutcomeKind;

    fn report(label: Option<IntentLabel>) -> JudgeReport {
        let mut r = JudgeReport::not_called("judge", "");
        r.not_called = None;
        r.called = true;
        r.cache = CacheStatus::Off;
        match label {
            Some(l) => {
                r.outcome = Some(OutcomeKind::Ok);
                r.intent_label = Some(l);
                r.verdict = Some(JudgeVerdict {
                    intent_label: l,
                    confidence: 0.9,
                    explanation: "x".into(),
                    evidence: vec![],
                });
            }
            None => r.outcome = Some(OutcomeKind::Timeout),
        }
        r
    }

    #[test]
    fn exit_codes_follow_scan() {
        assert_eq!(exit_code(&report(Some(IntentLabel::Benign))), EXIT_ALLOW);
        assert_eq!(
            exit_code(&report(Some(IntentLabel::Suspicious))),
            EXIT_SANITIZE
        );
        assert_eq!(exit_code(&report(Some(IntentLabel::Malicious))), EXIT_BLOCK);
        assert_eq!(exit_code(&report(None)), EXIT_JUDGE_FAILED);
    }
}
