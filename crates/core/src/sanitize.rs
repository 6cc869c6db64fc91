//! SANITIZE: what is removed from a request's untrusted segments, and how.
//!
//! In a user segment only the spans of counted strong findings are replaced (a user's own
//! request should not lose whole sentences). In a data channel ([`crate::Role::is_data_channel`]:
//! tool output, retrieved documents) an attacker wrote the text around the phrase a rule
//! matched too, so each span is widened to the injected *unit* that contains it
//! ([`injected_unit`]): the smallest enclosing block (an HTML comment, a `/* */` comment, a
//! `<x>…</x>` tag block, a run of code-comment lines, a JSON string's contents) of at most
//! [`MAX_BLOCK_BYTES`], else the sentence(s) the span overlaps (UAX #29 sentence bounds,
//! never across a line end), reaching at most [`MAX_SENTENCE_REACH`] bytes beyond the span
//! on either side. Everything outside the units is kept byte for byte.
//!
//! Bounds: a unit never reaches more than [`MAX_BLOCK_BYTES`] beyond its finding's span,
//! so one finding cannot make SANITIZE delete a whole large document: a block bigger than
//! the bound is not used (the sentence is), and a "sentence" longer than the bound (text
//! without terminators or line ends) is cut at [`MAX_SENTENCE_REACH`] bytes from the span.
//! A span that is itself large (a classifier finding over a whole segment) is removed as
//! it is. A document with many findings loses what each of them covers.

use crate::config::PolicyConfig;
use crate::decision::{Action, Finding, LayerResult, LayerStatus, SanitizedSegment, Span};
use crate::detector::SegmentInput;
use crate::input::{ScanRequest, Trust};
use std::ops::Range;
use unicode_segmentation::UnicodeSegmentation;

/// Largest block (comment, tag block, comment-line run, JSON string) removed as one unit;
/// a larger one falls back to the sentence.
pub const MAX_BLOCK_BYTES: usize = 4096;

/// How far a sentence unit may reach beyond its finding's span on either side.
pub const MAX_SENTENCE_REACH: usize = 1024;

/// Most candidate opening tags looked at per span (nearest first), which bounds the work
/// one span costs in markup-dense text.
const MAX_TAG_CANDIDATES: usize = 16;

/// HTML container elements never removed as a unit: they hold the page, not an injection,
/// and a span inside one is better served by its sentence.
const CONTAINER_TAGS: [&str; 17] = [
    "html", "head", "body", "main", "article", "section", "div", "table", "tbody", "thead", "ul",
    "ol", "dl", "form", "nav", "header", "footer",
];

/// Line prefixes that start a code comment (after indentation), or, after a space, end a
/// line of code with one.
const LINE_COMMENTS: [&str; 4] = ["//", "#", "--", ";"];

/// The reason a decision gives when `data_injection = "sanitize"` turned its BLOCK into
/// SANITIZE.
pub(crate) const DATA_INJECTION_REASON: &str = "the high-risk evidence lies only in tool or \
    retrieved data: its injected units are removed (policy data_injection = \"sanitize\")";

/// Whether a BLOCK rests only on counted findings in data channels, all of which SANITIZE
/// removes: every blocking layer ran, and its counted findings are all strong (points ≥ 2)
/// and in untrusted data-channel segments; and the counted findings elsewhere are not
/// BLOCK on their own. Anything else (a failed or timed-out layer, a layer verdict without
/// a localized finding, weak evidence in data, BLOCK outside data) keeps the BLOCK.
pub(crate) fn blocked_only_by_data(
    policy: &PolicyConfig,
    layers: &[LayerResult],
    findings: &[Finding],
    segments: &[SegmentInput<'_>],
) -> bool {
    let in_data = |f: &Finding| {
        segments
            .get(f.segment)
            .is_some_and(|s| s.role.is_data_channel() && s.trust == Trust::Untrusted)
    };
    let counted = || findings.iter().filter(|f| f.counted && f.points > 0);
    if counted().any(|f| in_data(f) && f.points < 2) {
        return false;
    }
    for l in layers.iter().filter(|l| l.action == Action::Block) {
        let mut own = counted().filter(|f| f.layer == l.layer).peekable();
        if l.status != LayerStatus::Ok || own.peek().is_none() || !own.all(&in_data) {
            return false;
        }
    }
    let elsewhere = crate::scoring::category_scores(counted().filter(|f| !in_data(f)));
    let risk = crate::scoring::classify(&elsewhere, &policy.scoring);
    policy.action_for(risk) < Action::Block
}

/// Replaces the spans of counted strong findings (of any layer) in untrusted segments by
/// the marker; in data channels each span is first widened to its injected unit
/// ([`injected_unit`]). The rest of the text is kept byte for byte.
pub(crate) fn sanitize(
    req: &ScanRequest,
    segments: &[SegmentInput<'_>],
    findings: &[Finding],
    marker: &str,
) -> Vec<SanitizedSegment> {
    let mut out = Vec::new();
    for (seg, input) in req.segments.iter().zip(segments) {
        if input.trust == Trust::Trusted {
            continue;
        }
        let spans: Vec<(Span, &str)> = findings
            .iter()
            .filter(|f| f.segment == input.index && f.counted && f.points >= 2)
            .map(|f| {
                let span = if seg.role.is_data_channel() {
                    Span::from(injected_unit(&seg.text, f.span))
                } else {
                    f.span
                };
                (span, f.rule_id.as_str())
            })
            .collect();
        if spans.is_empty() {
            continue;
        }
        let (result, removed) = redact(&seg.text, spans, marker);
        out.push(SanitizedSegment {
            segment: input.index,
            role: seg.role,
            text: result,
            removed,
        });
    }
    out
}

/// Replaces each span of `text` by `marker` (with `{rule}` replaced by the rule ID paired
/// with the span). Overlapping spans are merged first, the earliest rule naming the merged
/// span; spans off char boundaries are left alone. Returns the text and how many spans were
/// replaced; the rest of the text is kept byte for byte.
pub fn redact(text: &str, mut spans: Vec<(Span, &str)>, marker: &str) -> (String, usize) {
    spans.sort();
    let mut merged: Vec<(Span, &str)> = Vec::new();
    for (span, id) in spans {
        match merged.last_mut() {
            Some((last, _)) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push((span, id)),
        }
    }
    let mut result = String::with_capacity(text.len());
    let mut pos = 0;
    let mut removed = 0;
    for (span, id) in &merged {
        let (start, end) = (span.start.min(text.len()), span.end.min(text.len()));
        if start < pos || !text.is_char_boundary(start) || !text.is_char_boundary(end) {
            continue;
        }
        result.push_str(&text[pos..start]);
        result.push_str(&marker.replace("{rule}", id));
        pos = end;
        removed += 1;
    }
    result.push_str(&text[pos..]);
    (result, removed)
}

/// The injected unit of a data-channel text that contains `span`: the smallest enclosing
/// block of at most [`MAX_BLOCK_BYTES`] (HTML comment, `/* */` comment, `<x>…</x>` tag
/// block, run of code-comment lines, JSON string contents), else the sentence(s) `span`
/// overlaps, never across a line end and reaching at most [`MAX_SENTENCE_REACH`] beyond
/// `span`. Any span is accepted: it is clamped to the text and rounded out to char
/// boundaries first. The result contains that span, lies on char boundaries and reaches at
/// most [`MAX_BLOCK_BYTES`] beyond it on either side.
pub fn injected_unit(text: &str, span: Span) -> Range<usize> {
    let end = ceil_char(text, span.end.min(text.len()));
    let start = floor_char(text, span.start.min(end));
    let span = start..end;
    let blocks = [
        delimited(text, &span, "<!--", "-->"),
        delimited(text, &span, "/*", "*/"),
        tag_block(text, &span),
        comment_lines(text, &span),
        json_string(text, &span),
    ];
    blocks
        .into_iter()
        .flatten()
        .filter(|b| b.len() <= MAX_BLOCK_BYTES && b.start <= span.start && b.end >= span.end)
        .min_by_key(|b| b.len())
        .unwrap_or_else(|| sentences(text, &span))
}

fn floor_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The bytes a block around `span` may come from: [`MAX_BLOCK_BYTES`] either side.
fn block_window(text: &str, span: &Range<usize>) -> Range<usize> {
    floor_char(text, span.start.saturating_sub(MAX_BLOCK_BYTES))
        ..ceil_char(text, (span.end + MAX_BLOCK_BYTES).min(text.len()))
}

/// The block `open … close` (both included) around `span`: the last `open` at or before
/// the span's start whose first `close` ends at or after the span's end.
fn delimited(text: &str, span: &Range<usize>, open: &str, close: &str) -> Option<Range<usize>> {
    let w = block_window(text, span);
    let search_end = ceil_char(text, (span.start + open.len()).min(w.end));
    let o = w.start + text[w.start..search_end].rfind(open)?;
    if o > span.start {
        return None;
    }
    let body = o + open.len();
    let c = body + text.get(body..w.end)?.find(close)?;
    let end = c + close.len();
    (end >= span.end).then_some(o..end)
}

/// The innermost `<name …>…</name>` block around `span` (names compared ASCII
/// case-insensitively), container elements ([`CONTAINER_TAGS`]) excepted.
fn tag_block(text: &str, span: &Range<usize>) -> Option<Range<usize>> {
    let w = block_window(text, span);
    let bytes = text.as_bytes();
    let mut tried = 0;
    let mut i = (span.start + 1).min(text.len());
    while i > w.start && tried < MAX_TAG_CANDIDATES {
        i -= 1;
        if bytes[i] != b'<' {
            continue;
        }
        let Some((name, open_end)) = opening_tag(text, i) else {
            continue;
        };
        tried += 1;
        if CONTAINER_TAGS.iter().any(|c| c.eq_ignore_ascii_case(name)) {
            continue;
        }
        let close = format!("</{name}>");
        if let Some(c) = find_ascii_ci(&bytes[open_end..w.end], close.as_bytes()) {
            let end = open_end + c + close.len();
            if end >= span.end {
                return Some(i..end);
            }
        }
    }
    None
}

/// The name of the opening tag at `at` (`<name>` or `<name attributes>`, not `</…`, `<!…`
/// or self-closing) and the byte after its `>`.
fn opening_tag(text: &str, at: usize) -> Option<(&str, usize)> {
    let rest = text.get(at + 1..)?;
    let name_len = rest
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':' | b'.')))
        .unwrap_or(rest.len());
    let name = &rest[..name_len];
    if !name.bytes().next()?.is_ascii_alphabetic() {
        return None;
    }
    let after = &rest[name_len..];
    let gt = match after.bytes().next()? {
        b'>' => 0,
        b' ' | b'\t' | b'\n' | b'\r' => after.get(..MAX_BLOCK_BYTES.min(after.len()))?.find('>')?,
        _ => return None,
    };
    if after[..gt].ends_with('/') {
        return None;
    }
    Some((name, at + 1 + name_len + gt + 1))
}

fn find_ascii_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// The line (without its line end) containing byte `i`, if its start and end lie within
/// [`MAX_BLOCK_BYTES`] of `i`.
fn line_at(text: &str, i: usize) -> Option<Range<usize>> {
    let lo = floor_char(text, i.saturating_sub(MAX_BLOCK_BYTES));
    let hi = ceil_char(text, (i + MAX_BLOCK_BYTES).min(text.len()));
    let start = match text[lo..i].rfind('\n') {
        Some(n) => lo + n + 1,
        None if lo == 0 => 0,
        None => return None,
    };
    let end = match text[i..hi].find('\n') {
        Some(n) => i + n,
        None if hi == text.len() => hi,
        None => return None,
    };
    Some(start..end)
}

/// Where the line comment of `line` starts, and its marker: a marker first on the line
/// (after indentation), or after a space (`code  // note`).
fn comment_start(text: &str, line: &Range<usize>) -> Option<(usize, &'static str)> {
    let l = &text[line.clone()];
    let indent = l.len() - l.trim_start().len();
    if let Some(m) = LINE_COMMENTS.iter().find(|m| l[indent..].starts_with(**m)) {
        return Some((line.start + indent, m));
    }
    ["//", "#"]
        .iter()
        .filter_map(|m| l.find(&format!(" {m}")).map(|p| (line.start + p + 1, *m)))
        .min_by_key(|(p, _)| *p)
}

/// Whether `line` is a whole comment line with marker `marker`.
fn is_comment_line(text: &str, line: &Range<usize>, marker: &str) -> bool {
    text[line.clone()].trim_start().starts_with(marker)
}

/// The run of code-comment lines around `span`: from the comment marker on the span's
/// first line through the following whole-line comments with the same marker (the
/// preceding ones too when the span's line is a whole comment line), the span's lines
/// included; bounded by [`MAX_BLOCK_BYTES`].
fn comment_lines(text: &str, span: &Range<usize>) -> Option<Range<usize>> {
    let first = line_at(text, span.start)?;
    let (start, marker) = comment_start(text, &first)?;
    if start > span.start {
        return None;
    }
    let mut unit = start..first.end;
    if is_comment_line(text, &first, marker) {
        let mut line_start = first.start;
        while line_start >= 1 {
            let Some(prev) = line_at(text, line_start - 1) else {
                break;
            };
            if !is_comment_line(text, &prev, marker) || unit.end - prev.start > MAX_BLOCK_BYTES {
                break;
            }
            line_start = prev.start;
            unit.start = prev.start + (text[prev.clone()].len() - text[prev].trim_start().len());
        }
    }
    while unit.end < text.len() {
        let Some(next) = line_at(text, unit.end + 1) else {
            break;
        };
        let whole = is_comment_line(text, &next, marker);
        if (!whole && next.start < span.end) || next.end - unit.start > MAX_BLOCK_BYTES {
            return None;
        }
        if !whole {
            break;
        }
        unit.end = next.end;
    }
    (unit.end >= span.end).then_some(unit)
}

/// The contents (between the quotes) of the JSON string literal around `span`, when the
/// text looks like JSON (starts with `{` or `[`).
fn json_string(text: &str, span: &Range<usize>) -> Option<Range<usize>> {
    if !text.trim_start().starts_with(['{', '[']) {
        return None;
    }
    let bytes = text.as_bytes();
    let mut open = None;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        match open {
            None if b == b'"' => {
                if i >= span.start {
                    return None;
                }
                open = Some(i + 1);
            }
            None => {}
            Some(_) if escaped => escaped = false,
            Some(_) if b == b'\\' => escaped = true,
            Some(o) if b == b'"' => {
                if i >= span.end && o <= span.start {
                    return Some(o..i);
                }
                if i >= span.start {
                    return None;
                }
                open = None;
            }
            Some(_) => {}
        }
    }
    None
}

/// The sentence(s) `span` overlaps (UAX #29), within its line(s) and at most
/// [`MAX_SENTENCE_REACH`] beyond it; whitespace at the unit's edges is kept.
fn sentences(text: &str, span: &Range<usize>) -> Range<usize> {
    let lo = floor_char(text, span.start.saturating_sub(MAX_SENTENCE_REACH));
    let hi = ceil_char(text, (span.end + MAX_SENTENCE_REACH).min(text.len()));
    let lo = text[lo..span.start].rfind('\n').map_or(lo, |n| lo + n + 1);
    let hi = text[span.end..hi].find('\n').map_or(hi, |n| span.end + n);
    let mut unit = span.clone();
    for (off, s) in text[lo..hi].split_sentence_bound_indices() {
        let (a, b) = (lo + off, lo + off + s.len());
        let overlaps = a < span.end && b > span.start;
        let holds_empty = span.is_empty() && a <= span.start && span.start < b;
        if overlaps || holds_empty {
            let trimmed = s.trim();
            let lead = s.len() - s.trim_start().len();
            unit.start = unit.start.min(a + lead);
            unit.end = unit.end.max(a + lead + trimmed.len());
        }
    }
    unit
}
