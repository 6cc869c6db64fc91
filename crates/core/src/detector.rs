//! The one trait every layer implements.

use crate::decision::{Finding, LayerResult};
use crate::input::{Role, Trust};
use rampart_normalize::Normalized;
use rampart_rules::RiskClass;
use std::fmt::Debug;
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
}

/// Everything a detector gets for one request.
#[derive(Debug)]
pub struct ScanInput<'a> {
    /// The segments.
    pub segments: Vec<SegmentInput<'a>>,
    /// When the layer's time budget runs out. Cooperative detectors check it and stop early
    /// with [`DetectorError::Timeout`]; the pipeline also checks it after the layer returns.
    pub deadline: Instant,
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
}

impl Earlier<'_> {
    /// The score of the earlier layer named `name`, when it ran, finished and gave one.
    pub fn score_of(&self, name: &str) -> Option<f32> {
        self.layers
            .iter()
            .find(|l| l.layer == name && l.status == crate::decision::LayerStatus::Ok)
            .and_then(|l| l.score)
    }
}
