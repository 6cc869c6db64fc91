//! The pipeline layer: [`LinearDetector`] and its factory ([`LinearFactory`], kind `linear`).

use crate::features::feature_count;
use crate::model::{LinearModel, ModelError};
use crate::score::max_margin;
use rampart_core::{
    BuildError, Category, Detection, Detector, DetectorError, DetectorFactory, Finding, RiskClass,
    ScanInput, Span, Strength, Trust,
};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// The model shipped in `models/linear-v2/model.bin`, embedded in the binary.
pub const EMBEDDED_MODEL: &[u8] = include_bytes!("../../../models/linear-v2/model.bin");

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
    /// Model file; the embedded `linear-v2` when absent.
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
}

/// Why a detector could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinearBuildError {
    /// The model is invalid.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// An option is out of range.
    #[error("{0}")]
    Option(String),
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
        LinearDetector::new(model, opts.threshold, opts.ambiguous, opts.ambiguous_risk)
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
            return Err(LinearBuildError::Option(format!(
                "threshold must be in (0, 1], got {threshold}"
            )));
        }
        let [lo, hi] = band;
        if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) || lo >= hi {
            return Err(LinearBuildError::Option(format!(
                "ambiguous must be [low, high] with 0 <= low < high <= 1, got [{lo}, {hi}]"
            )));
        }
        Ok(LinearDetector {
            model,
            threshold,
            band,
            ambiguous_risk,
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
        // (probability, segment position, view index)
        let mut best: Option<(f32, usize, usize)> = None;
        let mut scored = 0usize;
        for (pos, seg) in input.segments.iter().enumerate() {
            if seg.trust == Trust::Trusted {
                continue;
            }
            // The pipeline sets the deadline just before calling the layer and times the
            // whole call, so the clock is read only between segments (on one-segment
            // prompts the read was ~3% of the layer's time).
            if scored > 0 && std::time::Instant::now() > input.deadline {
                return Err(DetectorError::Timeout);
            }
            scored += 1;
            if let Some(v) = max_margin(&self.model, &seg.normalized) {
                let p = self.model.header().calibration.apply(v.margin);
                if best.is_none_or(|b| p > b.0) {
                    best = Some((p, pos, v.view));
                }
            }
        }
        let Some((p, pos, view)) = best else {
            return Ok(Detection::default());
        };
        let seg = &input.segments[pos];
        let v = &seg.normalized.views[view];
        let [lo, hi] = self.band;
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
            span: Span {
                start: 0,
                end: seg.text.len(),
            },
            view: v.kind,
            via: v.decode_chain.clone(),
            rationale: why,
        };
        let mut det = Detection {
            findings: Vec::new(),
            score: Some(p),
            risk: None,
        };
        if p >= self.threshold {
            det.findings.push(finding(
                HIT_ID,
                Strength::Strong,
                3,
                RiskClass::HighRisk,
                true,
                format!(
                    "linear classifier: calibrated probability {p:.3} >= threshold {:.3} \
                     (view {})",
                    self.threshold,
                    v.kind.name()
                ),
            ));
            det.risk = Some(RiskClass::HighRisk);
        } else if p >= lo
            && p < hi
            && feature_count(&self.model.header().features, &v.text) >= MIN_AMBIGUOUS_FEATURES
        {
            det.findings.push(finding(
                AMBIGUOUS_ID,
                Strength::Weak,
                0,
                RiskClass::MediumRisk,
                false,
                format!(
                    "linear classifier: calibrated probability {p:.3} in the ambiguous band \
                     [{lo}, {hi}) (view {}), below the threshold {:.3}",
                    v.kind.name(),
                    self.threshold
                ),
            ));
            if self.ambiguous_risk == AmbiguousRisk::Medium {
                det.risk = Some(RiskClass::MediumRisk);
            }
        }
        Ok(det)
    }
}

/// Builds [`LinearDetector`]s from `[[layers]] kind = "linear"`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinearFactory;

impl DetectorFactory for LinearFactory {
    fn kind(&self) -> &str {
        LINEAR_KIND
    }

    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        let opts: LinearOptions = rampart_core::layer_options(LINEAR_KIND, options)?;
        let det = LinearDetector::from_options(&opts).map_err(|e| match e {
            LinearBuildError::Option(message) => BuildError::Options {
                kind: LINEAR_KIND.into(),
                message,
            },
            other => BuildError::Layer {
                kind: LINEAR_KIND.into(),
                message: other.to_string(),
            },
        })?;
        Ok(Arc::new(det))
    }
}
