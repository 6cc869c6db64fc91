//! The pipeline layer: [`LinearDetector`] and its factory ([`LinearFactory`], kind `linear`).

use crate::features::feature_count;
use crate::model::{LinearModel, ModelError};
use crate::score::max_margin;
use rampart_core::{
    BuildError, Category, Detection, Detector, DetectorError, DetectorFactory, Finding, RiskClass,
    Role, RoleThresholds, RoleThresholdsError, ScanInput, Span, SpanScore, Strength, Trust,
    ViewKind, top_spans,
};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// The model shipped in `models/linear-v3/model.bin`, embedded in the binary.
pub const EMBEDDED_MODEL: &[u8] = include_bytes!("../../../models/linear-v3/model.bin");

/// `kind` of the linear classifier layer, which is also its layer name in decisions.
pub const LINEAR_KIND: &str = "linear";

/// Finding ID of a prompt at or over the threshold.
pub const HIT_ID: &str = "LIN_001";
/// Finding ID (never counted) of a prompt in the ambiguous band below the threshold.
pub const AMBIGUOUS_ID: &str = "LIN_AMBIGUOUS";

/// Fewest distinct features a text needs for a score in the ambiguous band to be reported
/// as ambiguous (about three short words: a word of k letters adds about k + 2 features).
///
/// The feature vector is L2-normalised, so each of n features weighs about 1/√n: on a text
/// of a word or two, one or two word weights carry the whole norm and move the probability
/// by tens of points on their own ("x", one feature: 0.22 with no feature at all → 0.44;
/// "some text", 11 features: 0.45). Such a score says nothing about the text, and there is
/// nothing in it for a second opinion to weigh; the score is still reported, and a score at
/// or over the threshold still blocks.
pub const MIN_AMBIGUOUS_FEATURES: usize = 16;

/// The embedded model, parsed once. Errors if the embedded bytes are not a valid model.
pub fn embedded_model() -> Result<Arc<LinearModel>, ModelError> {
    static MODEL: OnceLock<Result<Arc<LinearModel>, ModelError>> = OnceLock::new();
    MODEL
        .get_or_init(|| LinearModel::from_bytes(EMBEDDED_MODEL).map(Arc::new))
        .clone()
}

/// What risk a score in the ambiguous band asserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AmbiguousRisk {
    /// Mark it (finding `LIN_AMBIGUOUS`, not counted) and assert nothing: ALLOW unless
    /// another layer objects. The default.
    #[default]
    Low,
    /// Also assert medium risk (SANITIZE by default policy; since the linear layer has no
    /// span to remove, that becomes BLOCK).
    Medium,
}

/// Options of a `[[layers]] kind = "linear"` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearOptions {
    /// Model file; the embedded `linear-v3` when absent.
    #[serde(default)]
    pub model: Option<PathBuf>,
    /// Decision threshold on the calibrated probability; the model's own when absent.
    #[serde(default)]
    pub threshold: Option<f32>,
    /// The ambiguous band `[low, high)`. Default `[0.4, 0.7]`.
    #[serde(default = "default_band")]
    pub ambiguous: [f32; 2],
    /// Risk asserted inside the band. Default `low`.
    #[serde(default)]
    pub ambiguous_risk: AmbiguousRisk,
    /// Per-role thresholds (`thresholds = { tool = 0.8, retrieved = 0.8 }`); roles not named
    /// use `threshold`.
    #[serde(default)]
    pub thresholds: RoleThresholds,
    /// Probability a window (a run of one to three sentences, see
    /// `rampart_core::LocalizeConfig`) needs to count as much as a whole text at `threshold`.
    /// Default: `threshold`. A model trained on whole prompts is less sure of a lone
    /// sentence than of a prompt, and a long text has many windows: set it higher to keep
    /// the false-positive rate of long benign texts (picked on validation data, see
    /// docs/data-channels.md). A window under it is scaled down to stay under `threshold`;
    /// at or over it, it counts as it is (also against per-role thresholds).
    #[serde(default)]
    pub window_threshold: Option<f32>,
    /// Per-role window thresholds (`window_thresholds = { user = 0.995 }`); roles not named
    /// use `window_threshold`. A user prompt is one short message, a tool result or a
    /// retrieved page is a long document that may quote an injection: the same window
    /// threshold cannot fit both.
    #[serde(default)]
    pub window_thresholds: RoleThresholds,
}

fn default_band() -> [f32; 2] {
    [0.4, 0.7]
}

impl Default for LinearOptions {
    fn default() -> Self {
        Self {
            model: None,
            threshold: None,
            ambiguous: default_band(),
            ambiguous_risk: AmbiguousRisk::Low,
            thresholds: RoleThresholds::default(),
            window_threshold: None,
            window_thresholds: RoleThresholds::default(),
        }
    }
}

/// The linear classifier as a pipeline layer (name `linear`).
///
/// It scores every normalized view of every untrusted segment and reports the highest
/// calibrated probability as the layer's score. Trusted segments (system, developer by
/// default) are skipped: they hold the operator's own instructions, which look like
/// injections by design. At or over the threshold it asserts high risk (BLOCK) with a
/// counted finding `LIN_001`; inside the ambiguous band (and under the threshold) it adds
/// an uncounted `LIN_AMBIGUOUS` finding for a later layer to look at, unless the text has
/// fewer than [`MIN_AMBIGUOUS_FEATURES`] features (too little evidence to be ambiguous).
#[derive(Debug, Clone)]
pub struct LinearDetector {
    model: Arc<LinearModel>,
    threshold: f32,
    band: [f32; 2],
    ambiguous_risk: AmbiguousRisk,
    thresholds: RoleThresholds,
    window_threshold: Option<f32>,
    window_thresholds: RoleThresholds,
}

/// Why a detector could not be built: the model, or an option out of range (naming the
/// option and its value).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LinearBuildError {
    /// The model is invalid.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// `threshold` (or the model's) is outside (0, 1].
    #[error("threshold must be in (0, 1], got {threshold}")]
    Threshold {
        /// The threshold.
        threshold: f32,
    },
    /// `ambiguous` is not `[low, high]` with `0 <= low < high <= 1`.
    #[error("ambiguous must be [low, high] with 0 <= low < high <= 1, got [{low}, {high}]")]
    Ambiguous {
        /// Its low end.
        low: f32,
        /// Its high end.
        high: f32,
    },
    /// `window_threshold` is outside (0, 1).
    #[error("window_threshold must be in (0, 1), got {window_threshold}")]
    WindowThreshold {
        /// The window threshold.
        window_threshold: f32,
    },
    /// A per-role threshold (`thresholds`) is out of range.
    #[error(transparent)]
    Thresholds(RoleThresholdsError),
    /// A per-role window threshold (`window_thresholds`) is out of range.
    #[error("window_{0}")]
    WindowThresholds(RoleThresholdsError),
}

impl LinearDetector {
    /// A detector over the embedded model with default options.
    pub fn embedded() -> Result<LinearDetector, LinearBuildError> {
        LinearDetector::from_options(&LinearOptions::default())
    }

    /// Builds a detector from options.
    pub fn from_options(opts: &LinearOptions) -> Result<LinearDetector, LinearBuildError> {
        let model = match &opts.model {
            Some(p) => Arc::new(LinearModel::load(p)?),
            None => embedded_model()?,
        };
        LinearDetector::new(model, opts.threshold, opts.ambiguous, opts.ambiguous_risk)?
            .with_thresholds(opts.thresholds.clone())?
            .with_window_threshold(opts.window_threshold)?
            .with_window_thresholds(opts.window_thresholds.clone())
    }

    /// Sets per-role window thresholds (see [`LinearOptions::window_thresholds`]).
    pub fn with_window_thresholds(
        mut self,
        window_thresholds: RoleThresholds,
    ) -> Result<LinearDetector, LinearBuildError> {
        window_thresholds
            .validate()
            .map_err(LinearBuildError::WindowThresholds)?;
        self.window_thresholds = window_thresholds;
        Ok(self)
    }

    /// Sets the window threshold (see [`LinearOptions::window_threshold`]).
    pub fn with_window_threshold(
        mut self,
        window_threshold: Option<f32>,
    ) -> Result<LinearDetector, LinearBuildError> {
        if let Some(w) = window_threshold
            && !(w > 0.0 && w < 1.0)
        {
            return Err(LinearBuildError::WindowThreshold {
                window_threshold: w,
            });
        }
        self.window_threshold = window_threshold;
        Ok(self)
    }

    /// Sets per-role thresholds (roles not named keep the layer's threshold).
    pub fn with_thresholds(
        mut self,
        thresholds: RoleThresholds,
    ) -> Result<LinearDetector, LinearBuildError> {
        thresholds
            .validate()
            .map_err(LinearBuildError::Thresholds)?;
        self.thresholds = thresholds;
        Ok(self)
    }

    /// Builds a detector over a model; `threshold` overrides the model's.
    pub fn new(
        model: Arc<LinearModel>,
        threshold: Option<f32>,
        band: [f32; 2],
        ambiguous_risk: AmbiguousRisk,
    ) -> Result<LinearDetector, LinearBuildError> {
        let threshold = threshold.unwrap_or(model.header().threshold);
        if !(threshold > 0.0 && threshold <= 1.0) {
            return Err(LinearBuildError::Threshold { threshold });
        }
        let [low, high] = band;
        if !(0.0..=1.0).contains(&low) || !(0.0..=1.0).contains(&high) || low >= high {
            return Err(LinearBuildError::Ambiguous { low, high });
        }
        Ok(LinearDetector {
            model,
            threshold,
            band,
            ambiguous_risk,
            thresholds: RoleThresholds::default(),
            window_threshold: None,
            window_thresholds: RoleThresholds::default(),
        })
    }

    /// The threshold in force.
    pub fn threshold(&self) -> f32 {
        self.threshold
    }

    /// The model.
    pub fn model(&self) -> &LinearModel {
        &self.model
    }
}

impl Detector for LinearDetector {
    fn name(&self) -> &str {
        LINEAR_KIND
    }

    fn detect(&self, input: &ScanInput<'_>) -> Result<Detection, DetectorError> {
        let mut segs: Vec<SegmentBest> = Vec::new();
        let mut spans = Vec::new();
        for seg in input.segments.iter() {
            if seg.trust == Trust::Trusted {
                continue;
            }
            // The pipeline sets the deadline just before calling the layer and times the
            // whole call, so the clock is read only between segments (on one-segment
            // prompts the read was ~3% of the layer's time) and every few hundred windows.
            if !segs.is_empty() && std::time::Instant::now() > input.deadline {
                return Err(DetectorError::Timeout);
            }
            if let Some(best) = self.score_segment(input, seg, &mut spans)? {
                segs.push(best);
            }
        }
        let Some(top) = segs
            .iter()
            .max_by(|a, b| a.p.total_cmp(&b.p).then(b.pos.cmp(&a.pos)))
        else {
            return Ok(Detection::default());
        };
        let mut det = Detection {
            score: Some(top.p),
            spans: top_spans(spans),
            ..Detection::default()
        };
        for b in &segs {
            self.segment_finding(input, b, std::ptr::eq(b, top), &mut det);
        }
        Ok(det)
    }
}

impl LinearDetector {
    /// The finding of a segment's best score, if any: a hit at or over the threshold (of
    /// the segment's role), or, for the top segment (`top`) only, an uncounted finding in
    /// the ambiguous band.
    fn segment_finding(
        &self,
        input: &ScanInput<'_>,
        b: &SegmentBest,
        top: bool,
        det: &mut Detection,
    ) {
        let [lo, hi] = self.band;
        let seg = &input.segments[b.pos];
        let v = &seg.normalized.views[b.view];
        let threshold = self.thresholds.get(seg.role, self.threshold);
        let finding = |id: &str, strength, points, severity, counted, why: String| Finding {
            layer: LINEAR_KIND.into(),
            rule_id: id.into(),
            category: Category::Other,
            strength,
            points,
            severity,
            segment: seg.index,
            role: seg.role,
            counted,
            span: b.span,
            view: v.kind,
            via: v.decode_chain.clone(),
            rationale: why,
        };
        let p = b.p;
        let place = b.place(seg.text.len());
        if p >= threshold {
            det.findings.push(finding(
                HIT_ID,
                Strength::Strong,
                3,
                RiskClass::HighRisk,
                true,
                format!(
                    "linear classifier: calibrated probability {p:.3} >= threshold \
                     {threshold:.3} ({} segment; {place}; view {})",
                    seg.role,
                    v.kind.name()
                ),
            ));
            det.risk = Some(RiskClass::HighRisk);
        } else if top
            && p >= lo
            && p < hi
            && feature_count(&self.model.header().features, &b.text) >= MIN_AMBIGUOUS_FEATURES
        {
            det.findings.push(finding(
                AMBIGUOUS_ID,
                Strength::Weak,
                0,
                RiskClass::MediumRisk,
                false,
                format!(
                    "linear classifier: calibrated probability {p:.3} in the ambiguous band \
                     [{lo}, {hi}) ({place}; view {}), below the threshold {threshold:.3}",
                    v.kind.name(),
                ),
            ));
            if self.ambiguous_risk == AmbiguousRisk::Medium {
                det.risk = Some(RiskClass::MediumRisk);
            }
        }
    }
}

/// The best-scoring text of one segment: the whole of one of its views, or a window.
#[derive(Debug)]
struct SegmentBest {
    /// Position in `ScanInput::segments`.
    pos: usize,
    /// Index into the segment's views.
    view: usize,
    /// Calibrated probability.
    p: f32,
    /// Where, in the segment's original text.
    span: Span,
    /// Whether it is a window (else the whole view).
    window: bool,
    /// The scored text (for the ambiguous band's feature count).
    text: String,
}

impl SegmentBest {
    /// "whole segment", or "window a..b" of the original text.
    fn place(&self, len: usize) -> String {
        if self.window && !(self.span.start == 0 && self.span.end == len) {
            format!(
                "window {}..{} of {len} bytes",
                self.span.start, self.span.end
            )
        } else {
            "whole segment".into()
        }
    }
}

/// A window's probability on the layer's scale: at or over `window_threshold` it counts as
/// it is (against the layer's threshold, or a role's); under it, it is scaled by
/// `threshold / window_threshold`, so that it stays under the layer threshold while keeping
/// its order for fusion and `run_if` gates. The identity when `window_threshold` is not
/// above `threshold`.
fn rescale(p: f32, threshold: f32, window_threshold: f32) -> f32 {
    if window_threshold <= threshold || p >= window_threshold {
        p
    } else {
        p * threshold / window_threshold
    }
}

/// Windows scored between two reads of the clock.
const WINDOWS_PER_CLOCK_READ: usize = 256;

impl LinearDetector {
    /// A window's probability on the layer's scale ([`rescale`]), with the window threshold
    /// of the segment's role.
    fn window_score(&self, p: f32, role: Role) -> f32 {
        let default = self.window_threshold.unwrap_or(self.threshold);
        rescale(p, self.threshold, self.window_thresholds.get(role, default))
    }

    /// Scores one untrusted segment: every distinct view whole, and every window of each
    /// (localized detection, [`rampart_core::LocalizeConfig`]); the highest calibrated
    /// probability wins. Pushes the segment's span scores (in original-text offsets) to
    /// `spans`.
    fn score_segment(
        &self,
        input: &ScanInput<'_>,
        seg: &rampart_core::SegmentInput<'_>,
        spans: &mut Vec<SpanScore>,
    ) -> Result<Option<SegmentBest>, DetectorError> {
        let Some(mut best) = self.whole_best(input, seg, spans) else {
            return Ok(None);
        };
        let views = &seg.normalized.views;
        let mut scored = 0usize;
        for (i, view) in views.iter().enumerate() {
            // Same text up to ASCII case, same features (as in `max_margin`).
            if views[..i]
                .iter()
                .any(|p| p.text.eq_ignore_ascii_case(&view.text))
            {
                continue;
            }
            self.score_windows(input, seg, i, &mut scored, &mut best, spans)?;
        }
        Ok(Some(best))
    }

    /// The segment's score as a whole: the highest margin over its views (pushed to
    /// `spans`); `None` when it has no view.
    fn whole_best(
        &self,
        input: &ScanInput<'_>,
        seg: &rampart_core::SegmentInput<'_>,
        spans: &mut Vec<SpanScore>,
    ) -> Option<SegmentBest> {
        let whole = max_margin(&self.model, &seg.normalized)?;
        let cal = self.model.header().calibration;
        let pos = input
            .segments
            .iter()
            .position(|s| s.index == seg.index)
            .unwrap_or(0);
        let whole_span = Span {
            start: 0,
            end: seg.text.len(),
        };
        let v = &seg.normalized.views[whole.view];
        let best = SegmentBest {
            pos,
            view: whole.view,
            p: cal.apply(whole.margin),
            span: whole_span,
            window: false,
            text: v.text.clone(),
        };
        spans.push(SpanScore {
            segment: seg.index,
            span: whole_span,
            score: best.p,
        });
        Some(best)
    }

    /// Scores every window of view `i` of the segment, pushing each to `spans` and keeping
    /// the highest in `best`; `scored` counts the windows of the segment, for the clock.
    fn score_windows(
        &self,
        input: &ScanInput<'_>,
        seg: &rampart_core::SegmentInput<'_>,
        i: usize,
        scored: &mut usize,
        best: &mut SegmentBest,
        spans: &mut Vec<SpanScore>,
    ) -> Result<(), DetectorError> {
        let cal = self.model.header().calibration;
        let view = &seg.normalized.views[i];
        let computed;
        let windows = if view.kind == ViewKind::Raw && view.text == seg.text {
            seg.windows(&input.localize)
        } else {
            computed = input.localize.windows(&view.text);
            &computed[..]
        };
        for w in windows {
            *scored += 1;
            if scored.is_multiple_of(WINDOWS_PER_CLOCK_READ)
                && std::time::Instant::now() > input.deadline
            {
                return Err(DetectorError::Timeout);
            }
            let Some(text) = view.text.get(w.clone()) else {
                continue;
            };
            let p = self.window_score(cal.apply(self.model.margin(text)), seg.role);
            let span = Span::from(view.to_original(w.clone()));
            spans.push(SpanScore {
                segment: seg.index,
                span,
                score: p,
            });
            if p > best.p {
                *best = SegmentBest {
                    pos: best.pos,
                    view: i,
                    p,
                    span,
                    window: true,
                    text: text.to_string(),
                };
            }
        }
        Ok(())
    }
}

/// Builds [`LinearDetector`]s from `[[layers]] kind = "linear"`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinearFactory;

impl DetectorFactory for LinearFactory {
    fn kind(&self) -> &str {
        LINEAR_KIND
    }

    /// Trained on injection and jailbreak prompts (direct and in data channels): prompt injection.
    fn owasp(&self) -> &'static [rampart_core::Owasp] {
        &[rampart_core::Owasp::Llm01]
    }

    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        let opts: LinearOptions = rampart_core::layer_options(LINEAR_KIND, options)?;
        let det = LinearDetector::from_options(&opts).map_err(|e| match e {
            LinearBuildError::Model(_) => BuildError::Layer {
                kind: LINEAR_KIND.into(),
                message: e.to_string(),
            },
            option => BuildError::Options {
                kind: LINEAR_KIND.into(),
                message: option.to_string(),
            },
        })?;
        Ok(Arc::new(det))
    }
}

#[cfg(test)]
mod tests {
    use super::rescale;

    #[test]
    fn window_scores_under_the_window_threshold_stay_under_the_layer_threshold() {
        // At or over the window threshold a window counts as it is.
        assert_eq!(rescale(0.9993, 0.566, 0.999), 0.9993);
        assert_eq!(rescale(1.0, 0.566, 0.999), 1.0);
        assert!(rescale(0.0, 0.566, 0.999).abs() < 1e-6);
        // Monotone; under the window threshold, under the layer threshold.
        let mut last = -1.0;
        for i in 0..=10_000 {
            let p = i as f32 / 10_000.0;
            let r = rescale(p, 0.566, 0.999);
            assert!(r >= last, "not monotone at {p}");
            assert_eq!(r >= 0.566, p >= 0.999, "at {p}");
            last = r;
        }
        // Equal thresholds: the identity.
        assert_eq!(rescale(0.7, 0.6, 0.6), 0.7);
    }
}
