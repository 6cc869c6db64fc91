//! The `fuse` layer: one calibrated score from the scores of earlier layers.
//!
//! Each input layer's score `s` (a calibrated probability) enters as its log-odds; the fused
//! probability is `sigmoid(bias + Σ weight · logit(s))`. With weights 0.5/0.5 that is the
//! geometric mean of the two odds: two layers that are each unsure but agree can decide
//! together, and one confident layer can be outvoted by a confident other. The threshold is
//! picked like every other threshold in Rampart: for a target false-positive rate on benign
//! validation data (`scripts/train/pick_fusion.py`).
//!
//! The fusion is per segment: each untrusted segment is fused from the input layers' scores
//! for that segment (their best localized span there, [`Earlier::segment_score`]; an input
//! layer that does not localize counts with its request-level score) and compared with the
//! threshold of its role (`thresholds`, else `threshold`); the layer's score is the highest
//! fused score. A diluted attack therefore fuses from the scores of the span that holds it.
//! When an input layer gave no score (skipped by its `run_if`, or it found nothing to score)
//! the fuse layer reports no score and decides nothing; a failed input layer is handled by the
//! policy's fail mode, as always, and so is an input score that is not a finite number (the
//! fuse layer fails rather than let a NaN compare false and allow).

use crate::decision::{Finding, Span};
use crate::detector::{
    Detection, Detector, DetectorError, Earlier, RoleThresholds, RoleThresholdsError, ScanInput,
    SpanScore, top_spans,
};
use crate::input::Trust;
use crate::vocab::{Category, RiskClass, Strength};
use rampart_normalize::ViewKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Rule ID of a fused score at or above the threshold.
pub const FUSE_ID: &str = "FUSE_001";
/// Rule ID of a fused score inside the ambiguous band (reported, not counted).
pub const FUSE_AMBIGUOUS_ID: &str = "FUSE_AMBIGUOUS";

/// Options of a `fuse` layer.
///
/// ```toml
/// [[layers]]
/// kind = "fuse"
/// inputs = { linear = 0.5, minilm = 0.5 }   # weight on each earlier layer's log-odds
/// threshold = 0.512                         # fused probability that blocks
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FuseOptions {
    /// Layer name (default `fuse`).
    #[serde(default = "default_name")]
    pub name: String,
    /// Earlier layers by name, each with the weight of its score's log-odds.
    pub inputs: BTreeMap<String, f32>,
    /// Added to the weighted sum of log-odds (default 0).
    #[serde(default)]
    pub bias: f32,
    /// Fused probability at or above which the layer reports a high-risk finding.
    pub threshold: f32,
    /// Fused probabilities in `[low, high)` below the threshold are marked ambiguous
    /// (reported, not counted), for a later layer to look at. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ambiguous: Option<[f32; 2]>,
    /// Per-role thresholds (`thresholds = { tool = 0.8, retrieved = 0.8 }`); roles not
    /// named use `threshold`. Each untrusted segment is fused from the input layers' scores
    /// for that segment and compared with its role's threshold.
    #[serde(default, skip_serializing_if = "thresholds_empty")]
    pub thresholds: RoleThresholds,
}

fn thresholds_empty(t: &RoleThresholds) -> bool {
    t.0.is_empty()
}

fn default_name() -> String {
    crate::config::FUSE_KIND.into()
}

/// Why [`FuseOptions`] are invalid: which option, and its value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FuseOptionsError {
    /// `name` is empty.
    #[error("name must not be empty")]
    EmptyName,
    /// `inputs` is empty.
    #[error("inputs must name at least one earlier layer")]
    NoInputs,
    /// An input's weight is infinite or NaN.
    #[error("input {input:?} has a weight that is not finite: {weight}")]
    Weight {
        /// The input layer.
        input: String,
        /// Its weight.
        weight: f32,
    },
    /// `bias` is infinite or NaN.
    #[error("bias must be finite, got {bias}")]
    Bias {
        /// The bias.
        bias: f32,
    },
    /// `threshold` is outside (0, 1].
    #[error("threshold must be in (0, 1], got {threshold}")]
    Threshold {
        /// The threshold.
        threshold: f32,
    },
    /// A per-role threshold (`thresholds`) is outside (0, 1].
    #[error(transparent)]
    Thresholds(#[from] RoleThresholdsError),
    /// `ambiguous` is not `[low, high]` with `0 <= low < high <= 1`.
    #[error("ambiguous must be [low, high] with 0 <= low < high <= 1, got [{low}, {high}]")]
    Ambiguous {
        /// Its low end.
        low: f32,
        /// Its high end.
        high: f32,
    },
}

/// The `fuse` layer (see the module docs). Built once; reads earlier layers through
/// [`Detector::detect_after`].
#[derive(Debug, Clone)]
pub struct FuseDetector {
    opts: FuseOptions,
}

/// Scores are clamped to `[EPS, 1 - EPS]` before taking log-odds, so a saturated 0 or 1
/// stays finite (about ±13.8).
const EPS: f32 = 1e-6;

fn logit(p: f32) -> f32 {
    let p = p.clamp(EPS, 1.0 - EPS);
    (p / (1.0 - p)).ln()
}

impl FuseDetector {
    /// Validates the options and builds the layer.
    pub fn new(opts: FuseOptions) -> Result<FuseDetector, FuseOptionsError> {
        if opts.name.trim().is_empty() {
            return Err(FuseOptionsError::EmptyName);
        }
        if opts.inputs.is_empty() {
            return Err(FuseOptionsError::NoInputs);
        }
        if let Some((input, &weight)) = opts.inputs.iter().find(|(_, w)| !w.is_finite()) {
            return Err(FuseOptionsError::Weight {
                input: input.clone(),
                weight,
            });
        }
        if !opts.bias.is_finite() {
            return Err(FuseOptionsError::Bias { bias: opts.bias });
        }
        if !(opts.threshold > 0.0 && opts.threshold <= 1.0) {
            return Err(FuseOptionsError::Threshold {
                threshold: opts.threshold,
            });
        }
        opts.thresholds.validate()?;
        if let Some([low, high]) = opts.ambiguous
            && !(0.0 <= low && low < high && high <= 1.0)
        {
            return Err(FuseOptionsError::Ambiguous { low, high });
        }
        Ok(FuseDetector { opts })
    }

    /// The options in force.
    pub fn options(&self) -> &FuseOptions {
        &self.opts
    }

    /// The fused probability for the given input scores (in `inputs` order), or `None` when
    /// one is missing.
    pub fn fuse(&self, score_of: impl Fn(&str) -> Option<f32>) -> Option<f32> {
        let scores: Vec<f32> = self
            .opts
            .inputs
            .keys()
            .map(|name| score_of(name))
            .collect::<Option<_>>()?;
        Some(self.fuse_scores(&scores))
    }

    /// The fused probability of scores given in `inputs` order.
    fn fuse_scores(&self, scores: &[f32]) -> f32 {
        let z = self.opts.bias
            + self
                .opts
                .inputs
                .values()
                .zip(scores)
                .map(|(w, &s)| w * logit(s))
                .sum::<f32>();
        1.0 / (1.0 + (-z).exp())
    }
}

/// The fusion of one segment's input scores.
struct SegmentFusion {
    index: usize,
    scores: Vec<f32>,
    p: f32,
    threshold: f32,
}

impl FuseDetector {
    /// Each input's score for one segment, in `inputs` order: its best span there
    /// ([`Earlier::segment_score`]). An input layer that gives a score but no localized
    /// scores at all (a detector that does not localize) counts with its request-level score
    /// for every segment. `None` when an input did not score this segment.
    fn segment_scores(&self, earlier: &Earlier<'_>, segment: usize) -> Option<Vec<f32>> {
        self.opts
            .inputs
            .keys()
            .map(|name| {
                if earlier.spans_of(name).is_empty() {
                    earlier.score_of(name)
                } else {
                    earlier.segment_score(name, segment)
                }
            })
            .collect()
    }

    /// Where a fused decision points in segment `index`: the strongest finding of an input
    /// layer there (first on ties), else the input layers' best localized span there, else
    /// the whole segment.
    fn anchor(&self, input: &ScanInput<'_>, earlier: &Earlier<'_>, index: usize) -> Option<Anchor> {
        let seg = input.segments.iter().find(|s| s.index == index)?;
        // (`max_by_key` keeps the last of equal maxima, hence the reversed order.)
        if let Some(f) = earlier
            .findings
            .iter()
            .filter(|f| f.segment == index && self.opts.inputs.contains_key(&f.layer))
            .rev()
            .max_by_key(|f| f.points)
        {
            return Some((f.role, f.span, f.view, f.via.clone()));
        }
        let best = self
            .opts
            .inputs
            .keys()
            .filter_map(|name| earlier.spans_of(name).iter().find(|s| s.segment == index))
            .max_by(|a, b| a.score.total_cmp(&b.score));
        let span = best.map_or(
            Span {
                start: 0,
                end: seg.text.len(),
            },
            |s| s.span,
        );
        Some((seg.role, span, ViewKind::Raw, Vec::new()))
    }

    /// Whether every input layer gave a request-level score (else there is nothing to
    /// fuse). A score that is not a number (a broken model) must not fuse into a silent
    /// ALLOW: the layer fails, and the policy's fail mode decides.
    fn inputs_scored(&self, earlier: &Earlier<'_>) -> Result<bool, DetectorError> {
        let mut all = true;
        for name in self.opts.inputs.keys() {
            match earlier.score_of(name) {
                Some(s) if !s.is_finite() => return Err(not_finite(name, s)),
                Some(_) => {}
                None => all = false,
            }
        }
        Ok(all)
    }

    /// The fusion of each untrusted segment the inputs scored, in segment order.
    fn fuse_segments(
        &self,
        input: &ScanInput<'_>,
        earlier: &Earlier<'_>,
    ) -> Result<Vec<SegmentFusion>, DetectorError> {
        let mut segments = Vec::new();
        for seg in input.segments.iter().filter(|s| s.trust != Trust::Trusted) {
            let Some(scores) = self.segment_scores(earlier, seg.index) else {
                continue;
            };
            if let Some((name, s)) = self
                .opts
                .inputs
                .keys()
                .zip(&scores)
                .find(|(_, s)| !s.is_finite())
            {
                return Err(not_finite(name, *s));
            }
            let p = self.fuse_scores(&scores);
            let threshold = self.opts.thresholds.get(seg.role, self.opts.threshold);
            segments.push(SegmentFusion {
                index: seg.index,
                scores,
                p,
                threshold,
            });
        }
        Ok(segments)
    }

    /// The finding of one segment's fusion at `anchor`: counted and high risk at or over
    /// its threshold; below it, an uncounted one in the ambiguous band of the best segment
    /// (`best`); else none.
    fn finding(&self, sf: &SegmentFusion, best: bool, anchor: Anchor) -> Option<Finding> {
        let (role, span, view, via) = anchor;
        let hit = sf.p >= sf.threshold;
        let ambiguous = !hit
            && best
            && self
                .opts
                .ambiguous
                .is_some_and(|[lo, hi]| sf.p >= lo && sf.p < hi);
        if !hit && !ambiguous {
            return None;
        }
        let formula = self.formula(sf);
        let (id, strength, points, severity, why) = if hit {
            (
                FUSE_ID,
                Strength::Strong,
                3,
                RiskClass::HighRisk,
                format!(
                    "{formula} >= threshold {:.3} ({role} segment)",
                    sf.threshold
                ),
            )
        } else {
            (
                FUSE_AMBIGUOUS_ID,
                Strength::Weak,
                0,
                RiskClass::MediumRisk,
                format!("{formula} in the ambiguous band (below the threshold)"),
            )
        };
        Some(Finding {
            layer: self.opts.name.clone(),
            rule_id: id.into(),
            category: Category::Other,
            strength,
            points,
            severity,
            segment: sf.index,
            role,
            counted: hit,
            span,
            view,
            via,
            rationale: why,
        })
    }

    /// `fused score sigmoid(w·logit(layer s) + … + bias) = p`, for the rationale.
    fn formula(&self, sf: &SegmentFusion) -> String {
        let parts: Vec<String> = self
            .opts
            .inputs
            .iter()
            .zip(&sf.scores)
            .map(|((name, w), s)| format!("{w}·logit({name} {s:.3})"))
            .collect();
        let bias = if self.opts.bias == 0.0 {
            String::new()
        } else {
            format!(" + {}", self.opts.bias)
        };
        format!(
            "fused score sigmoid({}{bias}) = {:.3}",
            parts.join(" + "),
            sf.p
        )
    }
}

/// Where a fused finding points: the role of its segment, the span, the view it was seen in
/// and the decodings undone to see it.
type Anchor = (
    crate::input::Role,
    Span,
    ViewKind,
    Vec<rampart_normalize::TransformKind>,
);

fn not_finite(name: &str, s: f32) -> DetectorError {
    DetectorError::Failed(format!(
        "input layer {name:?} gave a score that is not a number: {s}"
    ))
}

impl Detector for FuseDetector {
    fn name(&self) -> &str {
        &self.opts.name
    }

    /// Alone, without the scores of earlier layers, there is nothing to fuse: an error (so a
    /// pipeline fails closed) rather than a silent ALLOW.
    fn detect(&self, _input: &ScanInput<'_>) -> Result<Detection, DetectorError> {
        Err(DetectorError::Failed(
            "the fuse layer needs earlier layers' scores (run it in a pipeline)".into(),
        ))
    }

    fn detect_after(
        &self,
        input: &ScanInput<'_>,
        earlier: &Earlier<'_>,
    ) -> Result<Detection, DetectorError> {
        if !self.inputs_scored(earlier)? {
            return Ok(Detection::default());
        }
        let segments = self.fuse_segments(input, earlier)?;
        let mut det = Detection::default();
        let Some(best) = segments
            .iter()
            .max_by(|a, b| a.p.total_cmp(&b.p).then(b.index.cmp(&a.index)))
        else {
            return Ok(det);
        };
        det.score = Some(best.p);
        let mut spans = Vec::new();
        for sf in &segments {
            let Some(anchor) = self.anchor(input, earlier, sf.index) else {
                continue;
            };
            spans.push(SpanScore {
                segment: sf.index,
                span: anchor.1,
                score: sf.p,
            });
            if let Some(f) = self.finding(sf, sf.index == best.index, anchor) {
                if f.counted {
                    det.risk = Some(RiskClass::HighRisk);
                }
                det.findings.push(f);
            }
        }
        det.spans = top_spans(spans);
        Ok(det)
    }

    fn reads_layers(&self) -> Vec<String> {
        self.opts.inputs.keys().cloned().collect()
    }
}
