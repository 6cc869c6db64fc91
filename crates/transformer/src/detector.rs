//! The pipeline layer: [`TransformerDetector`] and its factory (`kind = "transformer"`).

use crate::error::TransformerError;
use crate::model::{Classifier, ClassifierOptions, WeightsFormat};
use rampart_core::{
    BuildError, Category, Detection, Detector, DetectorError, DetectorFactory, Finding, RiskClass,
    ScanInput, Span, Strength, Trust, ViewKind,
};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;

/// Rule ID of the finding a transformer layer reports.
pub const FINDING_ID: &str = "TRANSFORMER";

/// Which text of a segment the model reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum InputView {
    /// The original text (default; what the models were trained on).
    #[default]
    Raw,
    /// The `folded` view (NFKC, invisibles removed, confusables folded, lower case): spans
    /// are mapped back to the original text. Lower-casing changes what cased models see.
    Folded,
}

/// `kind` of a transformer classifier layer (and its default layer name).
pub const TRANSFORMER_KIND: &str = "transformer";

/// Options of a `kind = "transformer"` layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformerLayerOptions {
    /// Layer name, default `"transformer"`.
    #[serde(default = "default_name")]
    pub name: String,
    /// Model directory (`config.json`, `tokenizer.json`, and `model.safetensors` or
    /// `model.onnx` / `onnx/model.onnx`).
    pub model_dir: PathBuf,
    /// Which weights run: `auto` (default: safetensors if present, else ONNX),
    /// `safetensors` or `onnx`.
    #[serde(default)]
    pub format: WeightsFormat,
    /// ONNX Runtime shared library for ONNX models (default: `$ORT_DYLIB_PATH`).
    #[serde(default)]
    pub onnxruntime: Option<PathBuf>,
    /// Score at or over which the layer asserts high risk. Default 0.5.
    #[serde(default = "default_threshold")]
    pub threshold: f32,
    /// Labels that mean an attack (default: decided from the label names).
    #[serde(default)]
    pub positive_labels: Option<Vec<String>>,
    /// Window size in tokens.
    #[serde(default)]
    pub max_tokens: Option<usize>,
    /// Overlap between windows in tokens.
    #[serde(default)]
    pub stride: Option<usize>,
    /// Threads for the forward passes (default: all cores).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Windows per forward pass.
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// Text the model reads.
    #[serde(default)]
    pub view: InputView,
}

fn default_name() -> String {
    TRANSFORMER_KIND.into()
}

fn default_threshold() -> f32 {
    0.5
}

/// A transformer classifier as a pipeline layer. It scores every untrusted segment (all of
/// its windows); the layer's score is the highest, and a segment at or over the threshold
/// gives a finding whose span is the window that scored highest, and high risk.
#[derive(Debug)]
pub struct TransformerDetector {
    name: String,
    threshold: f32,
    view: InputView,
    model: Classifier,
}

impl TransformerDetector {
    /// Builds the layer.
    pub fn new(options: &TransformerLayerOptions) -> Result<Self, TransformerError> {
        if !(options.threshold > 0.0 && options.threshold <= 1.0) {
            return Err(TransformerError::Options(format!(
                "threshold {} must be in (0, 1]",
                options.threshold
            )));
        }
        if options.name.trim().is_empty() {
            return Err(TransformerError::Options("name must not be empty".into()));
        }
        let model = Classifier::load(
            &options.model_dir,
            &ClassifierOptions {
                max_tokens: options.max_tokens,
                stride: options.stride,
                threads: options.threads,
                positive_labels: options.positive_labels.clone(),
                batch_size: options.batch_size,
                format: options.format,
                onnxruntime: options.onnxruntime.clone(),
            },
        )?;
        Ok(TransformerDetector {
            name: options.name.clone(),
            threshold: options.threshold,
            view: options.view,
            model,
        })
    }

    /// The model.
    pub fn classifier(&self) -> &Classifier {
        &self.model
    }

    /// Texts to score: (request, segment index, text).
    fn texts<'a>(&self, inputs: &'a [ScanInput<'a>]) -> Vec<(usize, usize, &'a str)> {
        let mut out = Vec::new();
        for (r, input) in inputs.iter().enumerate() {
            for (s, seg) in input.segments.iter().enumerate() {
                if seg.trust != Trust::Untrusted {
                    continue;
                }
                let text = match self.view {
                    InputView::Raw => seg.text,
                    InputView::Folded => seg
                        .normalized
                        .view(ViewKind::Folded)
                        .map_or(seg.text, |v| v.text.as_str()),
                };
                if !text.trim().is_empty() {
                    out.push((r, s, text));
                }
            }
        }
        out
    }

    fn run(&self, inputs: &[ScanInput<'_>]) -> Vec<Result<Detection, DetectorError>> {
        let texts = self.texts(inputs);
        let deadline = inputs.iter().map(|i| i.deadline).min();
        let strs: Vec<&str> = texts.iter().map(|t| t.2).collect();
        let scores = match self.model.score_batch(&strs, deadline) {
            Ok(s) => s,
            Err(e) => {
                let err = match e {
                    TransformerError::Deadline => DetectorError::Timeout,
                    other => DetectorError::Failed(other.to_string()),
                };
                return inputs.iter().map(|_| Err(err.clone())).collect();
            }
        };
        let mut out: Vec<Result<Detection, DetectorError>> =
            inputs.iter().map(|_| Ok(Detection::default())).collect();
        for ((r, s, _), score) in texts.iter().zip(scores) {
            let (Some(slot), Some(input)) = (out.get_mut(*r), inputs.get(*r)) else {
                continue;
            };
            let Some(seg) = input.segments.get(*s) else {
                continue;
            };
            // An input that already failed stays failed.
            let Ok(det) = slot else {
                continue;
            };
            // A score that is not a number (weights with NaN/inf in a model the user brought)
            // would compare false against the threshold and allow; the input fails instead,
            // and the policy's fail mode decides.
            if !score.score.is_finite() {
                *slot = Err(DetectorError::Failed(format!(
                    "model {} gave a score that is not a number ({}) on segment {}, window {} of {}",
                    self.name,
                    score.score,
                    seg.index,
                    score.window + 1,
                    score.windows
                )));
                continue;
            }
            det.score = Some(det.score.map_or(score.score, |m: f32| m.max(score.score)));
            if score.score < self.threshold {
                continue;
            }
            let span = match self.view {
                InputView::Raw => score.span.clone(),
                InputView::Folded => seg
                    .normalized
                    .view(ViewKind::Folded)
                    .map_or(score.span.clone(), |v| v.to_original(score.span.clone())),
            };
            det.risk = Some(RiskClass::HighRisk);
            det.findings.push(Finding {
                layer: self.name.clone(),
                rule_id: FINDING_ID.into(),
                category: Category::Other,
                strength: Strength::Strong,
                points: 3,
                severity: RiskClass::HighRisk,
                segment: seg.index,
                role: seg.role,
                counted: true,
                span: Span::from(span),
                view: match self.view {
                    InputView::Raw => ViewKind::Raw,
                    InputView::Folded => ViewKind::Folded,
                },
                via: Vec::new(),
                rationale: format!(
                    "classifier score {:.3} (labels {}) ≥ threshold {} in window {} of {}",
                    score.score,
                    self.model.positive_labels().join("+"),
                    self.threshold,
                    score.window + 1,
                    score.windows
                ),
            });
        }
        out
    }
}

impl Detector for TransformerDetector {
    fn name(&self) -> &str {
        &self.name
    }

    fn detect(&self, input: &ScanInput<'_>) -> Result<Detection, DetectorError> {
        self.run(std::slice::from_ref(input))
            .pop()
            .unwrap_or_else(|| Ok(Detection::default()))
    }

    fn detect_batch(&self, inputs: &[ScanInput<'_>]) -> Vec<Result<Detection, DetectorError>> {
        self.run(inputs)
    }
}

/// Builds `kind = "transformer"` layers.
#[derive(Debug, Clone, Copy, Default)]
pub struct TransformerFactory;

impl DetectorFactory for TransformerFactory {
    fn kind(&self) -> &str {
        TRANSFORMER_KIND
    }

    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        let opts: TransformerLayerOptions = rampart_core::layer_options(TRANSFORMER_KIND, options)?;
        let det = TransformerDetector::new(&opts).map_err(|e| match e {
            TransformerError::Options(m) => BuildError::Options {
                kind: TRANSFORMER_KIND.into(),
                message: m,
            },
            other => BuildError::Layer {
                kind: TRANSFORMER_KIND.into(),
                message: format!("model {}: {other}", opts.model_dir.display()),
            },
        })?;
        Ok(Arc::new(det))
    }
}
