//! Human-readable explanation of a decision (for a terminal; `--json` is for machines).

use rampart_core::{ScanOutcome, ScanRequest};
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
        .map(|l| format!("{} {} {} {}us", l.layer, l.risk, l.action, l.elapsed_us))
        .collect();
    writeln!(out, "  layers: {}", layers.join("; "))?;
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
