//! Human-readable explanation of a decision (for a terminal; `--json` is for machines).

use rampart_conversation::{ConversationReport, StateMode};
use rampart_core::{ScanOutcome, ScanRequest};
use rampart_judge::{JudgeReport, JudgeTrigger};
use rampart_relational::{RelationalReport, RelationalStatus};
use std::io::{self, Write};

/// Longest excerpt of matched text shown per finding.
const EXCERPT_CHARS: usize = 60;

fn excerpt(text: &str, start: usize, end: usize) -> String {
    let s = text.get(start..end).unwrap_or("");
    let mut e: String = s.chars().take(EXCERPT_CHARS).collect();
    if s.chars().count() > EXCERPT_CHARS {
        e.push('…');
    }
    e.escape_debug().to_string()
}

/// Writes the explanation. Matched text is shown only with `show_matches` (it is prompt
/// text; by default the output, like the decision, holds rule IDs and spans only).
pub fn write(
    out: &mut impl Write,
    outcome: &ScanOutcome,
    req: &ScanRequest,
    show_matches: bool,
) -> io::Result<()> {
    let d = &outcome.decision;
    let id =
        d.id.as_deref()
            .map(|i| format!("  id={i}"))
            .unwrap_or_default();
    writeln!(out, "{:<8} {}{}", d.action.name(), d.risk, id)?;
    for r in &d.reasons {
        writeln!(out, "  reason: {r}")?;
    }
    if !d.categories.is_empty() {
        let cats: Vec<String> = d
            .categories
            .iter()
            .map(|(c, s)| format!("{c}={s}"))
            .collect();
        writeln!(out, "  categories: {}", cats.join(", "))?;
    }
    for f in &d.findings {
        let seg_text = req
            .segments
            .get(f.segment)
            .map(|s| s.text.as_str())
            .unwrap_or("");
        let via = if f.via.is_empty() {
            String::new()
        } else {
            format!(
                " via {}",
                f.via.iter().map(|t| t.name()).collect::<Vec<_>>().join(">")
            )
        };
        let shown = if show_matches {
            format!("  \"{}\"", excerpt(seg_text, f.span.start, f.span.end))
        } else {
            String::new()
        };
        writeln!(
            out,
            "  {:<8} {:<20} {:?}/{} pts{}  seg {} ({}) bytes {}..{}  view {}{}{}",
            f.rule_id,
            f.category.name(),
            f.strength,
            f.points,
            if f.counted { "" } else { " (not counted)" },
            f.segment,
            f.role,
            f.span.start,
            f.span.end,
            f.view.name(),
            via,
            shown,
        )?;
        writeln!(out, "           {}", f.rationale)?;
    }
    if !d.transforms.is_empty() {
        let t: Vec<String> = d
            .transforms
            .iter()
            .map(|t| format!("{}x{}@seg{}", t.kind.name(), t.count, t.segment))
            .collect();
        writeln!(out, "  transforms: {}", t.join(", "))?;
    }
    let layers: Vec<String> = d
        .layers
        .iter()
        .map(|l| {
            let undecided = if l.undecided { " (undecided)" } else { "" };
            format!(
                "{} {} {}{undecided} {}us",
                l.layer, l.risk, l.action, l.elapsed_us
            )
        })
        .collect();
    writeln!(out, "  layers: {}", layers.join("; "))?;
    if let Some(j) = d.reports.find::<rampart_judge::JudgeReport>() {
        write_judge(out, &j)?;
    }
    if let Some(r) = d.reports.find::<rampart_relational::RelationalReport>() {
        write_relational(out, &r)?;
    }
    if let Some(c) = d.reports.find::<ConversationReport>() {
        write_conversation(out, &c)?;
    }
    if let Some(s) = outcome.sanitized.as_ref().filter(|_| show_matches) {
        for seg in s {
            writeln!(
                out,
                "  sanitized seg {} ({}), {} span(s) removed:\n{}",
                seg.segment, seg.role, seg.removed, seg.text
            )?;
        }
    }
    writeln!(
        out,
        "  input_hash: {} (key {})  {} us",
        d.input_hash, d.hash_key_id, d.elapsed_us
    )?;
    Ok(())
}

/// The per-conversation part: risk and its terms, the calls scanned, the lineage evidence,
/// the forged-history check, the conversation findings.
pub fn write_conversation(out: &mut impl Write, c: &ConversationReport) -> io::Result<()> {
    let state = match c.state {
        StateMode::Stateful => "stateful",
        StateMode::Stateless => "stateless",
    };
    writeln!(
        out,
        "  conversation ({state}, {} messages): {} risk {:.2} (peak {:.2}, accumulated {:.2}, \
         escalation {:.2}) over {} calls",
        c.messages, c.action, c.risk, c.peak, c.accumulated, c.escalation, c.turns
    )?;
    let calls: Vec<String> = c
        .scanned
        .iter()
        .map(|t| match t.window_risk {
            Some(w) => format!("#{} {} {:.2} (window {w:.2})", t.message, t.action, t.risk),
            None => format!("#{} {} {:.2}", t.message, t.action, t.risk),
        })
        .collect();
    writeln!(out, "    calls scanned: {}", calls.join(", "))?;
    let e = &c.evidence;
    if e.blocks + e.sanitizes + e.refusals + e.rephrasings_after_block > 0 {
        writeln!(
            out,
            "    evidence: {} blocked, {} sanitized, {} refused, {} rephrasings after a block",
            e.blocks, e.sanitizes, e.refusals, e.rephrasings_after_block
        )?;
    }
    if let Some(h) = &c.history {
        writeln!(
            out,
            "    history: {} verified, {} forged (policy {})",
            h.verified.len(),
            h.forged.len(),
            h.policy
        )?;
    }
    for f in &c.findings {
        writeln!(out, "    {}: {}", f.id, f.rationale)?;
    }
    Ok(())
}

/// The relational layer's report in one line (`rampart relate` shows it in full): status,
/// label, balance, exchange, per-layer T/I/F, violations, model calls.
pub fn write_relational(out: &mut impl Write, r: &RelationalReport) -> io::Result<()> {
    let head = match &r.status {
        RelationalStatus::Ok => {
            let mut h = r.label.map_or("-", |l| l.name()).to_string();
            if let Some(b) = r.balance {
                h.push_str(&format!(" balance {b:+.3}"));
            }
            if let Some(x) = r.exchange {
                h.push_str(&format!(" exchange {x}"));
            }
            h
        }
        RelationalStatus::Failed { reason } => format!("failed: {reason}"),
        RelationalStatus::Skipped { reason } => format!("skipped: {reason}"),
    };
    let layers: Vec<String> = r
        .layers
        .iter()
        .map(|l| {
            format!(
                "{} T{:.2}/I{:.2}/F{:.2}",
                l.layer, l.value.truth, l.value.indeterminacy, l.value.falsehood
            )
        })
        .collect();
    let mut line = format!("  relational ({}, {}): {head}", r.layer, r.backend);
    if !layers.is_empty() {
        line.push_str(&format!("; {}", layers.join(", ")));
    }
    if !r.violations.is_empty() {
        let v: Vec<String> = r
            .violations
            .iter()
            .map(|v| format!("{}@{}", v.kind, v.layer))
            .collect();
        line.push_str(&format!("; violations {}", v.join(", ")));
    }
    if r.cost.calls > 0 {
        line.push_str(&format!(
            "; {} calls, {} tokens, ${:.4}",
            r.cost.calls,
            r.cost.input_tokens + r.cost.output_tokens,
            r.cost.cost_usd
        ));
    }
    writeln!(out, "{line}")
}

/// One trigger, for a terminal: the kind and what fired it (never input text).
pub fn trigger_text(t: &JudgeTrigger) -> String {
    match t {
        JudgeTrigger::AmbiguousScore { layer, score, band } => format!(
            "ambiguous_score ({layer} {score:.3} in [{}, {}])",
            band[0], band[1]
        ),
        JudgeTrigger::Deferred { layer, score } => format!("deferred ({layer} {score:.3})"),
        JudgeTrigger::LayerConflict {
            rules,
            rules_flagged,
            classifier,
            score,
        } => format!(
            "layer_conflict ({rules} {}, {classifier} {score:.3})",
            if *rules_flagged { "flagged" } else { "clean" }
        ),
        JudgeTrigger::NeedsJudgement { rule_id } => format!("needs_judgement ({rule_id})"),
        JudgeTrigger::Conversation { reason } => format!("conversation ({reason})"),
        JudgeTrigger::Direct => "direct".to_string(),
    }
}

/// The intent layer's part of a decision: why it was (or was not) asked, how the call
/// ended, the verdict with its (redacted) explanation, and what it cost.
pub fn write_judge(out: &mut impl Write, j: &JudgeReport) -> io::Result<()> {
    if !j.called {
        return writeln!(
            out,
            "  judge {}: not called ({})",
            j.layer,
            j.not_called.as_deref().unwrap_or("no trigger fired")
        );
    }
    let triggers: Vec<String> = j.triggers.iter().map(trigger_text).collect();
    let outcome = j.outcome.map_or("-", |o| o.name());
    writeln!(
        out,
        "  judge {}: {}  trigger: {}",
        j.layer,
        outcome,
        if triggers.is_empty() {
            "-".to_string()
        } else {
            triggers.join(", ")
        }
    )?;
    if let Some(detail) = &j.outcome_detail {
        writeln!(out, "    detail: {}", detail.escape_debug())?;
    }
    if let Some(why) = &j.mode_fallback {
        writeln!(
            out,
            "    mode: structured (score mode fell back: {})",
            why.escape_debug()
        )?;
    } else if let (Some(p), Some(logit)) = (j.score, j.score_logit) {
        let explained = j.explain_outcome.map_or(String::new(), |o| {
            format!("  explanation call: {}", o.name())
        });
        writeln!(
            out,
            "    mode: score  P(attack): {p:.3}  logit: {logit:.3}{explained}"
        )?;
    }
    if let Some(v) = &j.verdict {
        writeln!(
            out,
            "    label: {}  confidence: {:.2}",
            v.intent_label, v.confidence
        )?;
        writeln!(out, "    explanation: {}", v.explanation.escape_debug())?;
        for e in &v.evidence {
            let at = match (e.segment, e.span) {
                (Some(s), Some(sp)) => format!("  seg {s} bytes {}..{}", sp.start, sp.end),
                (None, Some(sp)) => format!("  bytes {}..{}", sp.start, sp.end),
                _ => String::new(),
            };
            writeln!(out, "    evidence: {}{at}", e.signal.escape_debug())?;
        }
    }
    if let (Some(without), Some(with)) = (j.action_without_judge, j.action_with_judge) {
        writeln!(
            out,
            "    verdict without the judge: {without}, with it: {with}"
        )?;
    }
    let cost = j
        .cost_usd
        .map_or_else(|| "unpriced".to_string(), |c| format!("${c:.6}"));
    writeln!(
        out,
        "    cost: {cost}  tokens: {} in / {} out  latency: {} ms  attempts: {}  cache: {}",
        j.input_tokens,
        j.output_tokens,
        j.latency_ms,
        j.attempts,
        j.cache.name()
    )?;
    if !j.model.is_empty() || !j.prompt_id.is_empty() {
        writeln!(
            out,
            "    model: {}  prompt: {} ({})",
            if j.model.is_empty() { "-" } else { &j.model },
            if j.prompt_id.is_empty() {
                "-"
            } else {
                &j.prompt_id
            },
            if j.prompt_hash.is_empty() {
                "-"
            } else {
                &j.prompt_hash
            }
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_core::{Action, Span};
    use rampart_judge::{CacheStatus, IntentLabel, JudgeEvidence, JudgeVerdict};
    use rampart_llm::OutcomeKind;

    fn called() -> JudgeReport {
        let mut r = JudgeReport::not_called("judge", "");
        r.not_called = None;
        r.called = true;
        r.cache = CacheStatus::Hit;
        r.model = "smollm2-135m".into();
        r.prompt_id = "judge-v1".into();
        r.prompt_hash = "0123456789abcdef".into();
        r.input_tokens = 412;
        r.output_tokens = 57;
        r.latency_ms = 1234;
        r.attempts = 1;
        r
    }

    fn text(j: &JudgeReport) -> String {
        let mut out = Vec::new();
        write_judge(&mut out, j).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn judge_block_shows_trigger_outcome_label_cost_latency_and_explanation() {
        let mut j = called();
        j.triggers = vec![JudgeTrigger::Deferred {
            layer: "linear".into(),
            score: 0.55,
        }];
        j.outcome = Some(OutcomeKind::Ok);
        j.intent_label = Some(IntentLabel::Suspicious);
        j.verdict = Some(JudgeVerdict {
            intent_label: IntentLabel::Suspicious,
            confidence: 0.7,
            explanation: "asks to drop its rules ([input 0:0..31])".into(),
            evidence: vec![JudgeEvidence {
                signal: "instruction override".into(),
                segment: Some(0),
                span: Some(Span { start: 0, end: 31 }),
            }],
        });
        j.cost_usd = Some(0.0001);
        j.action_without_judge = Some(Action::Allow);
        j.action_with_judge = Some(Action::Sanitize);
        let t = text(&j);
        assert!(
            t.contains("judge judge: ok  trigger: deferred (linear 0.550)"),
            "{t}"
        );
        assert!(t.contains("label: suspicious  confidence: 0.70"), "{t}");
        assert!(
            t.contains("explanation: asks to drop its rules ([input 0:0..31])"),
            "{t}"
        );
        assert!(
            t.contains("evidence: instruction override  seg 0 bytes 0..31"),
            "{t}"
        );
        assert!(
            t.contains("without the judge: ALLOW, with it: SANITIZE"),
            "{t}"
        );
        assert!(
            t.contains("cost: $0.000100  tokens: 412 in / 57 out  latency: 1234 ms"),
            "{t}"
        );
        assert!(t.contains("cache: hit"), "{t}");
        assert!(
            t.contains("model: smollm2-135m  prompt: judge-v1 (0123456789abcdef)"),
            "{t}"
        );
    }

    #[test]
    fn judge_block_shows_score_mode_and_a_fallback() {
        let mut j = called();
        j.mode = Some(rampart_judge::JudgeMode::Score);
        j.score = Some(0.912);
        j.score_logit = Some(2.34);
        j.explain_outcome = Some(rampart_judge::ExplainOutcome::Ok);
        let t = text(&j);
        assert!(
            t.contains("mode: score  P(attack): 0.912  logit: 2.340  explanation call: ok"),
            "{t}"
        );
        let mut f = called();
        f.mode = Some(rampart_judge::JudgeMode::Structured);
        f.mode_fallback = Some("the anthropic protocol returns no log-probabilities".into());
        let t = text(&f);
        assert!(
            t.contains("mode: structured (score mode fell back: the anthropic"),
            "{t}"
        );
    }

    #[test]
    fn judge_block_names_a_failed_outcome_and_a_judge_not_called() {
        let mut j = called();
        j.triggers = vec![JudgeTrigger::Direct];
        j.outcome = Some(OutcomeKind::HttpError);
        j.outcome_detail = Some("connection refused".into());
        let t = text(&j);
        assert!(
            t.contains("judge judge: http_error  trigger: direct"),
            "{t}"
        );
        assert!(t.contains("detail: connection refused"), "{t}");
        assert!(!t.contains("label:"), "{t}");
        assert!(t.contains("cost: unpriced"), "{t}");

        let t = text(&JudgeReport::not_called("judge", "no trigger fired"));
        assert_eq!(t, "  judge judge: not called (no trigger fired)\n");
    }
}
