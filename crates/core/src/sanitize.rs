//! SANITIZE: what is removed from a request's untrusted segments, and how.

use crate::decision::{Finding, SanitizedSegment, Span};
use crate::detector::SegmentInput;
use crate::input::{ScanRequest, Trust};

/// Replaces the spans of counted strong findings in untrusted segments by the marker.
/// Only those spans change; the rest of the text is kept byte for byte.
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
            .map(|f| (f.span, f.rule_id.as_str()))
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
