//! The deterministic rule layer, and the signals the normalizer's transforms raise.

use crate::config::{NORMALIZE_LAYER, RULES_KIND, RulesLayerOptions};
use crate::decision::{Finding, Span};
use crate::detector::{Detection, Detector, DetectorError, ScanInput, SegmentInput};
use crate::input::Trust;
use crate::scoring::points;
use rampart_normalize::{TransformKind, ViewKind};
use rampart_rules::{
    Category, CompileError, Matcher, MatcherBuilder, PackErrors, RiskClass, RuleScope, Strength,
};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Built-in signal: a rule matched only after decoding or de-obfuscation.
pub const HIDDEN_MATCH_ID: &str = "ENC_901";
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

/// A rule-pack problem found while building the layer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RulesLayerError {
    /// A pack failed to parse or validate.
    #[error("{0}")]
    Pack(#[from] PackErrors),
    /// The packs failed to compile.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Compile(Vec<CompileError>),
}

/// The rule layer: an immutable compiled matcher shared in an `Arc`.
#[derive(Debug, Clone)]
pub struct RulesDetector {
    matcher: Arc<Matcher>,
}

impl RulesDetector {
    /// Wraps an already compiled matcher.
    pub fn new(matcher: Arc<Matcher>) -> Self {
        Self { matcher }
    }

    /// Loads and compiles the packs named by the options.
    pub fn from_options(options: &RulesLayerOptions) -> Result<Self, RulesLayerError> {
        let mut builder = MatcherBuilder::new();
        for source in options.sources() {
            builder = builder.add_pack(source.load()?);
        }
        let matcher = builder.build().map_err(RulesLayerError::Compile)?;
        Ok(Self::new(Arc::new(matcher)))
    }

    /// The compiled matcher.
    pub fn matcher(&self) -> &Arc<Matcher> {
        &self.matcher
    }

    fn segment_findings(&self, seg: &SegmentInput<'_>, out: &mut Vec<Finding>) {
        let mut hits = self.matcher.scan(&seg.normalized);
        // `data` rules speak to text that addresses the assistant from inside a tool result
        // or document; the same words from the user are an ordinary request.
        hits.hits.retain(|h| {
            self.matcher.rules()[h.rule].rule.scope == RuleScope::Any || seg.role.is_data_channel()
        });
        let counted = seg.trust == Trust::Untrusted;
        // Rules seen in a plain view (raw or folded) of this segment.
        let plain: BTreeSet<usize> = hits
            .hits
            .iter()
            .filter(|h| !seg.normalized.views[h.view].is_deobfuscated())
            .map(|h| h.rule)
            .collect();
        let mut hidden_reported: BTreeSet<usize> = BTreeSet::new();
        for hit in &hits.hits {
            let rule = &self.matcher.rules()[hit.rule].rule;
            let view = &seg.normalized.views[hit.view];
            let mut via = view.decode_chain.clone();
            match view.kind {
                ViewKind::Collapsed => via.push(TransformKind::SpacingCollapse),
                ViewKind::Leet => via.push(TransformKind::Leet),
                ViewKind::Rot13 => via.push(TransformKind::Rot13),
                ViewKind::Reversed => via.push(TransformKind::Reversed),
                _ => {}
            }
            let span = Span::from(hit.span.clone());
            if !via.is_empty() && !plain.contains(&hit.rule) && hidden_reported.insert(hit.rule) {
                out.push(Finding {
                    layer: RULES_KIND.into(),
                    rule_id: HIDDEN_MATCH_ID.into(),
                    category: Category::EncodingObfuscation,
                    strength: Strength::Strong,
                    points: 2,
                    severity: RiskClass::MediumRisk,
                    segment: seg.index,
                    role: seg.role,
                    counted,
                    span,
                    view: view.kind,
                    via: via.clone(),
                    rationale: format!(
                        "rule {} matched only after undoing {}",
                        rule.id,
                        via.iter().map(|t| t.name()).collect::<Vec<_>>().join(" > ")
                    ),
                });
            }
            out.push(Finding {
                layer: RULES_KIND.into(),
                rule_id: rule.id.clone(),
                category: rule.category,
                strength: rule.strength,
                points: points(rule.strength, rule.severity),
                severity: rule.severity,
                segment: seg.index,
                role: seg.role,
                counted,
                span,
                view: view.kind,
                via,
                rationale: rule.rationale.clone(),
            });
        }
    }
}

impl Detector for RulesDetector {
    fn name(&self) -> &str {
        RULES_KIND
    }

    fn judgement_rules(&self) -> Vec<String> {
        self.matcher
            .rules()
            .iter()
            .filter(|r| r.rule.needs_judgement)
            .map(|r| r.rule.id.clone())
            .collect()
    }

    fn detect(&self, input: &ScanInput<'_>) -> Result<Detection, DetectorError> {
        let mut findings = Vec::new();
        for seg in &input.segments {
            self.segment_findings(seg, &mut findings);
            if std::time::Instant::now() > input.deadline {
                return Err(DetectorError::Timeout);
            }
        }
        Ok(Detection {
            findings,
            ..Detection::default()
        })
    }
}

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
