//! The first layer of every pipeline, `normalize`: the signals the normalizer's transforms
//! raise (hidden tag characters, bidirectional controls, homoglyphs, zero-width characters,
//! decode bombs, encoded payloads).

use crate::config::NORMALIZE_LAYER;
use crate::decision::{Finding, Span};
use crate::detector::SegmentInput;
use crate::input::Trust;
use crate::scoring::points;
use crate::vocab::{Category, RiskClass, Strength};
use rampart_normalize::{TransformKind, ViewKind};
use std::collections::BTreeSet;

/// Built-in signal: Unicode tag characters hid ASCII text.
pub const TAG_CHARS_ID: &str = "ENC_902";
/// Built-in signal: bidirectional control characters.
pub const BIDI_ID: &str = "ENC_903";
/// Built-in signal: homoglyphs from another script mixed into words.
pub const CONFUSABLE_ID: &str = "ENC_904";
/// Built-in signal: zero-width characters.
pub const ZERO_WIDTH_ID: &str = "ENC_905";
/// Built-in signal: decoding stopped at a bound (nesting, expansion): a decode bomb.
pub const LIMIT_ID: &str = "ENC_906";
/// Built-in signal: an encoded (base64/hex) payload decoded to text.
pub const ENCODED_PAYLOAD_ID: &str = "ENC_907";

/// Findings raised by the normalizer's transforms for one segment (layer `normalize`).
pub fn transform_findings(seg: &SegmentInput<'_>, out: &mut Vec<Finding>) {
    let counted = seg.trust == Trust::Untrusted;
    let mut seen: BTreeSet<&'static str> = BTreeSet::new();
    for t in &seg.normalized.transforms {
        let (id, strength, severity, why) = match t.kind {
            TransformKind::TagChars => (
                TAG_CHARS_ID,
                Strength::Strong,
                RiskClass::MediumRisk,
                "Unicode tag characters hide ASCII text from human readers",
            ),
            // Fail closed: content the normalizer could not fully decode was not fully
            // analysed, and legitimate text does not nest encodings this deep.
            TransformKind::LimitReached => (
                LIMIT_ID,
                Strength::Strong,
                RiskClass::HighRisk,
                "decoding stopped at a bound (nesting, expansion or view count): not fully analysed",
            ),
            TransformKind::Bidi => (
                BIDI_ID,
                Strength::Weak,
                RiskClass::LowRisk,
                "bidirectional control characters can make text display differently than it reads",
            ),
            TransformKind::Confusable => (
                CONFUSABLE_ID,
                Strength::Weak,
                RiskClass::LowRisk,
                "letters from another script that look like Latin ones were mixed into words",
            ),
            TransformKind::ZeroWidth => (
                ZERO_WIDTH_ID,
                Strength::Weak,
                RiskClass::LowRisk,
                "zero-width characters can split keywords invisibly",
            ),
            TransformKind::Base64 | TransformKind::Hex => (
                ENCODED_PAYLOAD_ID,
                Strength::Weak,
                RiskClass::LowRisk,
                "an encoded payload decoded to readable text",
            ),
            _ => continue,
        };
        if !seen.insert(id) {
            continue;
        }
        out.push(Finding {
            layer: NORMALIZE_LAYER.into(),
            rule_id: id.into(),
            category: Category::EncodingObfuscation,
            strength,
            points: points(strength, severity),
            severity,
            segment: seg.index,
            role: seg.role,
            counted,
            span: Span::from(t.span.clone()),
            view: ViewKind::Raw,
            via: vec![t.kind],
            rationale: why.into(),
        });
    }
}
