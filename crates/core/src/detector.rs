//! The one trait every layer implements.

use crate::decision::{Action, Finding, LayerResult, Span};
use crate::input::{Role, Trust};
use crate::localize::LocalizeConfig;
use crate::report::LayerReport;
use crate::vocab::RiskClass;
use rampart_normalize::Normalized;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::Range;
use std::sync::OnceLock;
use std::time::Instant;

/// One segment as a detector sees it: its original text, role, effective trust, and the
/// normalized views (computed once by the pipeline and shared by every layer).
#[derive(Debug)]
pub struct SegmentInput<'a> {
    /// Index in the request.
    pub index: usize,
    /// Role.
    pub role: Role,
    /// Trust after applying the policy.
    pub trust: Trust,
    /// The original text.
    pub text: &'a str,
    /// Views and transforms.
    pub normalized: Normalized,
    /// Windows of `text` that classifier layers score besides the whole text, cut on first
    /// use by [`SegmentInput::windows`] and then shared by every layer. Cutting sentences is
    /// a fifth of a rules-only scan, so a pipeline whose layers never ask pays nothing.
    /// Leave it empty (`Default::default()`); setting it fixes the windows layers see.
    pub windows: OnceLock<Vec<Range<usize>>>,
}

impl SegmentInput<'_> {
    /// The windows of the original text that classifier layers score besides the whole
    /// text ([`LocalizeConfig::windows`]), cut once per scan. Empty for a text that is a
    /// single window, and for trusted segments.
    pub fn windows(&self, localize: &LocalizeConfig) -> &[Range<usize>] {
        self.windows.get_or_init(|| match self.trust {
            Trust::Untrusted => localize.windows(self.text),
            Trust::Trusted => Vec::new(),
        })
    }
}

/// Everything a detector gets for one request.
#[derive(Debug)]
pub struct ScanInput<'a> {
    /// The segments.
    pub segments: Vec<SegmentInput<'a>>,
    /// When the layer's time budget runs out. Cooperative detectors check it and stop early
    /// with [`DetectorError::Timeout`]; the pipeline also checks it after the layer returns.
    pub deadline: Instant,
    /// How windows are cut, for layers that window a view other than the original text.
    pub localize: LocalizeConfig,
    /// What the conversation state knew before this turn, for conversation requests.
    pub conversation: Option<&'a crate::conversation::ConversationContext>,
}

/// A layer's score for one span of one segment (localized detection). The span is in the
/// segment's original text; the whole segment is the span `0..len`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpanScore {
    /// Index of the segment in the request.
    pub segment: usize,
    /// Byte range in the segment's original text.
    pub span: Span,
    /// The layer's score for the span.
    pub score: f32,
}

/// How many span scores a layer keeps per segment for later layers ([`Earlier::spans_of`]).
pub const TOP_SPANS_PER_SEGMENT: usize = 8;

/// Keeps, per segment, the `TOP_SPANS_PER_SEGMENT` highest span scores, and orders the result
/// highest first (ties: segment, then span, so the order is stable).
pub fn top_spans(mut spans: Vec<SpanScore>) -> Vec<SpanScore> {
    spans.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.segment.cmp(&b.segment))
            .then(a.span.start.cmp(&b.span.start))
            .then(a.span.end.cmp(&b.span.end))
    });
    let mut per: BTreeMap<usize, usize> = BTreeMap::new();
    spans.retain(|s| {
        let n = per.entry(s.segment).or_insert(0);
        *n += 1;
        *n <= TOP_SPANS_PER_SEGMENT
    });
    spans
}

/// Per-role decision thresholds of a classifier layer (`thresholds = { tool = 0.8 }`): data
/// channels (tool results, retrieved documents) are calibrated on their own, since ordinary
/// documents read differently from prompts. Roles not named use the layer's threshold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RoleThresholds(pub BTreeMap<Role, f32>);

impl RoleThresholds {
    /// The threshold for `role`, else `default`.
    pub fn get(&self, role: Role, default: f32) -> f32 {
        self.0.get(&role).copied().unwrap_or(default)
    }

    /// Checks every threshold is in (0, 1].
    pub fn validate(&self) -> Result<(), RoleThresholdsError> {
        match self.0.iter().find(|(_, t)| !(**t > 0.0 && **t <= 1.0)) {
            Some((&role, &value)) => Err(RoleThresholdsError::OutOfRange { role, value }),
            None => Ok(()),
        }
    }
}

/// Why [`RoleThresholds`] are invalid.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RoleThresholdsError {
    /// A role's threshold is outside (0, 1] (or not a number).
    #[error("thresholds.{role} must be in (0, 1], got {value}")]
    OutOfRange {
        /// The role.
        role: Role,
        /// Its threshold.
        value: f32,
    },
}

/// What a detector found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Detection {
    /// Evidence. The pipeline scores counted findings per category.
    pub findings: Vec<Finding>,
    /// A probability-like score in 0..=1, for layers that produce one.
    pub score: Option<f32>,
    /// A risk the detector asserts directly (e.g. a classifier over its threshold). The
    /// layer's risk is the higher of this and the risk scored from its findings.
    pub risk: Option<RiskClass>,
    /// Localized scores, highest first ([`top_spans`]): per scored segment, its best
    /// spans (the whole segment among them). The first is the span that decided `score`.
    pub spans: Vec<SpanScore>,
    /// The layer's own report (an intent layer's, a relational layer's), carried in the
    /// decision under its key ([`crate::Reports`]).
    pub report: Option<LayerReport>,
    /// The layer ran but could not decide (its model call failed, its evaluation failed):
    /// the layer fails as on an error, so its fail mode decides, and its report is kept.
    /// Never input or model text.
    pub failure: Option<String>,
    /// A floor under the layer's own verdict, whatever the policy maps its risk to (an
    /// intent layer's "malicious" is BLOCK). It never lowers anything: the ratchet over all
    /// layers still takes the maximum.
    pub floor: Option<(RiskClass, Action)>,
    /// For a layer that resolves deferred bands ([`Detector::resolves_deferred`]): its
    /// verdict on them, as a line for the decision's reasons, when it gave one. The held
    /// verdicts are then dropped (the layer can clear a band as well as catch it); when it
    /// gave none, each held verdict and finding comes back.
    pub resolution: Option<String>,
}

/// Why a detector could not decide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DetectorError {
    /// It ran out of time.
    #[error("detector ran past its deadline")]
    Timeout,
    /// It failed (model missing, backend error …). Never contains input text.
    #[error("detector failed: {0}")]
    Failed(String),
}

/// A detection layer: rules now; trained classifiers, transformer models and an LLM judge
/// later. Implementations are built once and shared across threads (`Send + Sync`).
///
/// Two methods are required; the rest (reading earlier layers, batching) have defaults. A
/// layer backed by a remote or async service implements `detect` by blocking on it within
/// `input.deadline`; a server runs pipelines on a blocking thread pool.
pub trait Detector: Send + Sync + Debug {
    /// Stable layer name used in decisions, metrics and configuration (e.g. `"rules"`).
    fn name(&self) -> &str;

    /// Examines one request.
    fn detect(&self, input: &ScanInput<'_>) -> Result<Detection, DetectorError>;

    /// Does now what the layer would otherwise do on the request that first needs it
    /// (compiling what it compiles on first use). A server calls it before it reports
    /// ready, so that no request pays for it. Default: nothing to do.
    fn warm_up(&self) -> Result<(), DetectorError> {
        Ok(())
    }

    /// Examines one request, seeing what the layers before it decided. The pipeline calls
    /// this; the default ignores `earlier` and calls [`Detector::detect`]. Layers that
    /// combine earlier results (score fusion, a judge asked only where layers disagree)
    /// override it.
    fn detect_after(
        &self,
        input: &ScanInput<'_>,
        earlier: &Earlier<'_>,
    ) -> Result<Detection, DetectorError> {
        let _ = earlier;
        self.detect(input)
    }

    /// Names of earlier layers this layer reads through [`Detector::detect_after`]; the
    /// pipeline refuses to build when one of them is not an earlier layer.
    fn reads_layers(&self) -> Vec<String> {
        Vec::new()
    }

    /// IDs of rules marked "needs judgement" (in the pack, or by category) that this layer
    /// can report: a judge layer's trigger contract fires on their findings.
    fn judgement_rules(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether this layer resolves the bands other layers defer (`defer = [lo, hi]`): an
    /// intent layer. A pipeline has at most one, and a deferring layer must come before it.
    fn resolves_deferred(&self) -> bool {
        false
    }

    /// This layer as [`Any`](std::any::Any), for a caller that needs its concrete type (a
    /// server runs a rules layer's own examples on the matcher the pipeline compiled rather
    /// than compiling the packs again). `None` by default.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// Examines several requests; models override this to batch their forward passes.
    fn detect_batch(&self, inputs: &[ScanInput<'_>]) -> Vec<Result<Detection, DetectorError>> {
        inputs.iter().map(|i| self.detect(i)).collect()
    }
}

/// What the layers before a layer decided, for [`Detector::detect_after`].
#[derive(Debug, Clone, Copy)]
pub struct Earlier<'a> {
    /// Their results, in pipeline order (the first is `normalize`).
    pub layers: &'a [LayerResult],
    /// Their findings, in the order they were produced.
    pub findings: &'a [Finding],
    /// Their localized scores ([`Detection::spans`]), parallel to `layers`.
    pub spans: &'a [Vec<SpanScore>],
    /// IDs of rules marked "needs judgement" by any layer of the pipeline
    /// ([`Detector::judgement_rules`]).
    pub needs_judgement: &'a std::collections::BTreeSet<String>,
}

impl Earlier<'_> {
    /// The score of the earlier layer named `name`, when it ran, finished and gave one.
    pub fn score_of(&self, name: &str) -> Option<f32> {
        self.layers
            .iter()
            .find(|l| l.layer == name && l.status == crate::decision::LayerStatus::Ok)
            .and_then(|l| l.score)
    }

    /// The localized scores of the earlier layer named `name`, highest first (empty when it
    /// did not run or gave none).
    pub fn spans_of(&self, name: &str) -> &[SpanScore] {
        self.layers
            .iter()
            .position(|l| l.layer == name && l.status == crate::decision::LayerStatus::Ok)
            .and_then(|i| self.spans.get(i))
            .map_or(&[], Vec::as_slice)
    }

    /// The score of the earlier layer named `name` for one segment: its best span there.
    pub fn segment_score(&self, name: &str, segment: usize) -> Option<f32> {
        self.spans_of(name)
            .iter()
            .find(|s| s.segment == segment)
            .map(|s| s.score)
    }
}
