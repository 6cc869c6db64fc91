//! The pipeline layer: [`TransformerDetector`] and its factory (`kind = "transformer"`).

use crate::error::TransformerError;
use crate::model::{Classifier, ClassifierOptions, WeightsFormat, Window};
use rampart_core::{
    BuildError, Category, Detection, Detector, DetectorError, DetectorFactory, Earlier, Finding,
    RiskClass, RoleThresholds, ScanInput, SegmentInput, Span, SpanScore, Strength, Trust, ViewKind,
    top_spans,
};
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

/// Rule ID of the finding a transformer layer reports.
pub const FINDING_ID: &str = "TRANSFORMER";
/// Rule ID of the (uncounted) finding that says a long segment was read in part: only the
/// windows around the focus layer's best spans (`max_windows`).
pub const PARTIAL_ID: &str = "TRANSFORMER_PARTIAL";

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
    /// An earlier classifier layer (e.g. `linear`) whose best-scoring spans of each segment
    /// this layer also reads on their own (localized detection: an injected sentence is
    /// scored as it would be alone, not split across token windows), and which picks the
    /// windows of a long text when it has more than `max_windows`.
    #[serde(default)]
    pub focus: Option<String>,
    /// How many of the focus layer's best spans per segment are read (default 4).
    #[serde(default = "default_focus_top")]
    pub focus_top: usize,
    /// Most token windows read per segment (default: all). A longer segment is read only
    /// around the focus layer's best spans (a finding `TRANSFORMER_PARTIAL` says so); without
    /// a focus layer it fails, and the policy's fail mode decides.
    #[serde(default)]
    pub max_windows: Option<usize>,
    /// Per-role thresholds (`thresholds = { tool = 0.8 }`); roles not named use `threshold`.
    #[serde(default)]
    pub thresholds: RoleThresholds,
}

fn default_focus_top() -> usize {
    4
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
    thresholds: RoleThresholds,
    view: InputView,
    focus: Option<String>,
    focus_top: usize,
    max_windows: Option<usize>,
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
        options
            .thresholds
            .validate()
            .map_err(TransformerError::Thresholds)?;
        if options.max_windows == Some(0) {
            return Err(TransformerError::Options(
                "max_windows must be at least 1".into(),
            ));
        }
        if options.focus.as_deref() == Some(options.name.as_str()) {
            return Err(TransformerError::Options(
                "focus must name an earlier layer, not this one".into(),
            ));
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
            thresholds: options.thresholds.clone(),
            view: options.view,
            focus: options.focus.clone(),
            focus_top: options.focus_top,
            max_windows: options.max_windows,
            model,
        })
    }

    /// The model.
    pub fn classifier(&self) -> &Classifier {
        &self.model
    }

    /// The text of `seg` the model reads (its view), or `None` for an empty one.
    fn text_of<'a>(&self, seg: &'a SegmentInput<'a>) -> Option<&'a str> {
        let text = match self.view {
            InputView::Raw => seg.text,
            InputView::Folded => seg
                .normalized
                .view(ViewKind::Folded)
                .map_or(seg.text, |v| v.text.as_str()),
        };
        (!text.trim().is_empty()).then_some(text)
    }

    /// Maps a byte range of the text the model read back to the segment's original text.
    fn to_original(&self, seg: &SegmentInput<'_>, span: Range<usize>) -> Range<usize> {
        match self.view {
            InputView::Raw => span,
            InputView::Folded => seg
                .normalized
                .view(ViewKind::Folded)
                .map_or(span.clone(), |v| v.to_original(span)),
        }
    }

    /// The windows to score for one segment (see [`TransformerLayerOptions::focus`]): every
    /// token window of the text when there are at most `max_windows`, else only those that
    /// overlap the focus layer's best spans; plus one window set per focus span, cut from
    /// the span alone so that an injected sentence is read as it would be on its own.
    fn plan(
        &self,
        seg: &SegmentInput<'_>,
        text: &str,
        focus: &[SpanScore],
    ) -> Result<SegmentPlan, DetectorError> {
        let failed = |e: TransformerError| DetectorError::Failed(e.to_string());
        let all = self.model.windows(text).map_err(failed)?;
        let total = all.len();
        // Focus spans are in original offsets; the folded view's offsets differ, so focus
        // applies to the raw view only.
        let spans: Vec<Range<usize>> = if self.view == InputView::Raw {
            focus
                .iter()
                .filter(|s| s.segment == seg.index)
                .filter(|s| !(s.span.start == 0 && s.span.end >= text.len()))
                .filter(|s| s.span.end <= text.len() && s.span.start < s.span.end)
                .take(self.focus_top)
                .map(|s| s.span.start..s.span.end)
                .collect()
        } else {
            Vec::new()
        };
        let mut windows: Vec<Window> = match self.max_windows {
            Some(max) if total > max => {
                if spans.is_empty() {
                    return Err(DetectorError::Failed(format!(
                        "segment {} needs {total} windows, over max_windows {max}, and no focus \
                         layer ranked its spans (set `focus` to an earlier classifier layer)",
                        seg.index
                    )));
                }
                all.into_iter()
                    .filter(|w| {
                        spans
                            .iter()
                            .any(|s| w.span.start < s.end && s.start < w.span.end)
                    })
                    .take(max)
                    .collect()
            }
            _ => all,
        };
        let from_windows = windows.len();
        for s in &spans {
            let Some(sub) = text.get(s.clone()) else {
                continue;
            };
            for mut w in self.model.windows(sub).map_err(failed)? {
                w.span = w.span.start + s.start..w.span.end + s.start;
                windows.push(w);
            }
        }
        Ok(SegmentPlan {
            windows,
            total,
            from_windows,
        })
    }

    fn run(&self, input: &ScanInput<'_>, focus: &[SpanScore]) -> Result<Detection, DetectorError> {
        let mut plans = Vec::new();
        for seg in &input.segments {
            if seg.trust != Trust::Untrusted {
                continue;
            }
            let Some(text) = self.text_of(seg) else {
                continue;
            };
            plans.push((seg, self.plan(seg, text, focus)?));
        }
        let refs: Vec<&Window> = plans.iter().flat_map(|(_, p)| p.windows.iter()).collect();
        let logits = self
            .model
            .window_logits_until(&refs, Some(input.deadline))
            .map_err(|e| match e {
                TransformerError::Deadline => DetectorError::Timeout,
                other => DetectorError::Failed(other.to_string()),
            })?;
        let mut logits = logits.into_iter();
        let mut det = Detection::default();
        let mut spans = Vec::new();
        for (seg, plan) in &plans {
            let Some((score, k)) = self.score_windows(seg, plan, &mut logits, &mut spans)? else {
                continue;
            };
            self.judge_segment(seg, plan, score, k, &mut det);
        }
        det.spans = top_spans(spans);
        Ok(det)
    }

    /// Scores the windows of a segment's plan from their `logits` (in plan order), adding
    /// each window's span score to `spans`; returns the best score and its window, or fails
    /// on a score that is not a number.
    fn score_windows(
        &self,
        seg: &SegmentInput<'_>,
        plan: &SegmentPlan,
        logits: &mut impl Iterator<Item = Vec<f32>>,
        spans: &mut Vec<SpanScore>,
    ) -> Result<Option<(f32, usize)>, DetectorError> {
        let mut best: Option<(f32, usize)> = None;
        for (k, w) in plan.windows.iter().enumerate() {
            let s = logits
                .next()
                .map_or(f32::NAN, |l| self.model.score_logits(&l));
            // A score that is not a number (weights with NaN/inf in a model the user
            // brought) would compare false against the threshold and allow; the layer
            // fails instead, and the policy's fail mode decides.
            if !s.is_finite() {
                return Err(DetectorError::Failed(format!(
                    "model {} gave a score that is not a number ({s}) on segment {}, \
                     window {} of {}",
                    self.name,
                    seg.index,
                    k + 1,
                    plan.windows.len()
                )));
            }
            spans.push(SpanScore {
                segment: seg.index,
                span: Span::from(self.to_original(seg, w.span.clone())),
                score: s,
            });
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, k));
            }
        }
        Ok(best)
    }

    /// Puts a segment's best `score` (of window `k`) on the detection: the layer's score,
    /// the partial-read finding of a long segment, and the finding of a score at or over
    /// the threshold.
    fn judge_segment(
        &self,
        seg: &SegmentInput<'_>,
        plan: &SegmentPlan,
        score: f32,
        k: usize,
        det: &mut Detection,
    ) {
        det.score = Some(det.score.map_or(score, |m: f32| m.max(score)));
        let covered = if plan.from_windows < plan.total {
            format!(
                "; long text: {} of its {} windows scored, those around the {} best spans \
                 of layer {}",
                plan.from_windows,
                plan.total,
                plan.windows.len() - plan.from_windows,
                self.focus.as_deref().unwrap_or("?")
            )
        } else {
            String::new()
        };
        if !covered.is_empty() {
            det.findings.push(self.finding(
                seg,
                PARTIAL_ID,
                0..seg.text.len(),
                false,
                format!("classifier read part of segment {}{covered}", seg.index),
            ));
        }
        let threshold = self.thresholds.get(seg.role, self.threshold);
        if score < threshold {
            return;
        }
        let Some(w) = plan.windows.get(k) else {
            return;
        };
        let what = if k >= plan.from_windows {
            format!(
                "span {}..{} ranked by layer {}",
                w.span.start,
                w.span.end,
                self.focus.as_deref().unwrap_or("?")
            )
        } else {
            format!("window {} of {}", k + 1, plan.total)
        };
        det.risk = Some(RiskClass::HighRisk);
        det.findings.push(self.finding(
            seg,
            FINDING_ID,
            self.to_original(seg, w.span.clone()),
            true,
            format!(
                "classifier score {score:.3} (labels {}) ≥ threshold {threshold} ({} segment) \
                 in {what}{covered}",
                self.model.positive_labels().join("+"),
                seg.role,
            ),
        ));
    }

    fn finding(
        &self,
        seg: &SegmentInput<'_>,
        id: &str,
        span: Range<usize>,
        hit: bool,
        rationale: String,
    ) -> Finding {
        Finding {
            layer: self.name.clone(),
            rule_id: id.into(),
            category: Category::Other,
            strength: if hit {
                Strength::Strong
            } else {
                Strength::Weak
            },
            points: if hit { 3 } else { 0 },
            severity: if hit {
                RiskClass::HighRisk
            } else {
                RiskClass::LowRisk
            },
            segment: seg.index,
            role: seg.role,
            counted: hit,
            span: Span::from(span),
            view: match self.view {
                InputView::Raw => ViewKind::Raw,
                InputView::Folded => ViewKind::Folded,
            },
            via: Vec::new(),
            rationale,
        }
    }
}

/// What the layer scores of one segment.
struct SegmentPlan {
    /// Token windows of the text (first `from_windows`), then windows of the focus spans.
    windows: Vec<Window>,
    /// Token windows of the whole text.
    total: usize,
    /// How many of `windows` are token windows of the whole text.
    from_windows: usize,
}

impl Detector for TransformerDetector {
    fn name(&self) -> &str {
        &self.name
    }

    fn detect(&self, input: &ScanInput<'_>) -> Result<Detection, DetectorError> {
        self.run(input, &[])
    }

    fn detect_after(
        &self,
        input: &ScanInput<'_>,
        earlier: &Earlier<'_>,
    ) -> Result<Detection, DetectorError> {
        let focus = self
            .focus
            .as_deref()
            .map_or(&[][..], |f| earlier.spans_of(f));
        self.run(input, focus)
    }

    fn reads_layers(&self) -> Vec<String> {
        self.focus.iter().cloned().collect()
    }
}

/// Builds `kind = "transformer"` layers.
#[derive(Debug, Clone, Copy, Default)]
pub struct TransformerFactory;

impl DetectorFactory for TransformerFactory {
    fn kind(&self) -> &str {
        TRANSFORMER_KIND
    }

    /// A prompt-injection classifier (direct, indirect, jailbreaks, many languages).
    fn owasp(&self) -> &'static [rampart_core::Owasp] {
        &[rampart_core::Owasp::Llm01]
    }

    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        let opts: TransformerLayerOptions = rampart_core::layer_options(TRANSFORMER_KIND, options)?;
        let det = TransformerDetector::new(&opts).map_err(|e| match e {
            TransformerError::Options(m) => BuildError::Options {
                kind: TRANSFORMER_KIND.into(),
                message: m,
            },
            TransformerError::Thresholds(e) => BuildError::Options {
                kind: TRANSFORMER_KIND.into(),
                message: e.to_string(),
            },
            other => {
                let mut message = format!("model {}: {other}", opts.model_dir.display());
                // A built-in model that was never set up: say which command sets it up.
                if let Some(hint) = crate::builtin::setup_hint(&opts.model_dir) {
                    message = format!("{message}\n{hint}");
                }
                BuildError::Layer {
                    kind: TRANSFORMER_KIND.into(),
                    message,
                }
            }
        })?;
        Ok(Arc::new(det))
    }
}
