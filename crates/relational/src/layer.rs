//! The `relational` layer kind: groups the request's segments into prompt layers, runs the
//! configured backend, computes the balance, exchange type and label, and BLOCKs the labels
//! the configuration names (escalate only, like every layer).

use crate::circle::{Circle, CircleError, CircleOptions, CircleRun};
use crate::evaluator::{Assessment, Evaluator, EvaluatorError, LayerText, RelateInput};
use crate::llm::{LlmEvaluator, LlmEvaluatorError, LlmEvaluatorOptions};
use crate::local::{LocalError, LocalEvaluator, LocalOptions};
use crate::model::{self, ModelParams, ParamsError};
use crate::{
    Backend, EvaluatorRun, PromptLayer, RELATIONAL_KIND, RelationalCost, RelationalLabel,
    RelationalReport, RelationalStatus,
};
use rampart_core::{
    BuildError, Category, Detection, Detector, DetectorError, DetectorFactory, Earlier, Finding,
    LayerReport, RiskClass, Role, ScanInput, Span, Strength, ViewKind, layer_options,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;

/// Rule ID of an extractive label's finding.
pub const EXTRACTIVE_ID: &str = "REL_001";
/// Rule ID of a manipulative label's finding.
pub const MANIPULATIVE_ID: &str = "REL_002";
/// Rule ID of a borderline label's finding.
pub const BORDERLINE_ID: &str = "REL_003";

/// What segments of roles outside the three prompt layers (tool results, retrieved
/// documents, model output) count as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OtherRoles {
    /// Part of the user layer: untrusted input, like the user's own text (default).
    #[default]
    User,
    /// Left out of the relational judgement (other layers still scan them).
    Ignore,
}

/// Options of a relational layer.
///
/// ```toml
/// [[layers]]
/// kind = "relational"
/// backend = "local"                       # local | llm | circle
/// block = ["extractive", "manipulative"]  # labels that BLOCK
/// [layers.local]
/// scores = [{ layer = "linear", knots = [[0.0, 0.0], [0.5, 0.3], [1.0, 1.0]] }]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelationalOptions {
    /// Layer name in decisions. Default `relational`.
    #[serde(default = "default_name")]
    pub name: String,
    /// The evaluator backend. Default `local`.
    #[serde(default = "default_backend")]
    pub backend: Backend,
    /// Labels that BLOCK. Default extractive and manipulative. Other labels ALLOW (with an
    /// informational finding for borderline).
    #[serde(default = "default_block")]
    pub block: Vec<RelationalLabel>,
    /// Roles outside the three prompt layers. Default: part of the user layer.
    #[serde(default)]
    pub other_roles: OtherRoles,
    /// The model's parameters.
    #[serde(default)]
    pub model: ModelParams,
    /// The local backend's options (also used by local members of a circle).
    #[serde(default)]
    pub local: LocalOptions,
    /// The llm backend's options.
    #[serde(default)]
    pub llm: Option<LlmEvaluatorOptions>,
    /// The circle's options.
    #[serde(default)]
    pub circle: Option<CircleOptions>,
}

fn default_name() -> String {
    RELATIONAL_KIND.into()
}
fn default_backend() -> Backend {
    Backend::Local
}
fn default_block() -> Vec<RelationalLabel> {
    vec![RelationalLabel::Extractive, RelationalLabel::Manipulative]
}

/// The configured backend, built.
#[derive(Debug)]
enum Engine {
    Single(Arc<dyn Evaluator>),
    Circle(Circle),
}

/// The relational layer. Built once, shared across threads.
#[derive(Debug)]
pub struct RelationalLayer {
    opts: RelationalOptions,
    engine: Engine,
    reads: Vec<String>,
}

/// Why a relational layer could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelationalError {
    /// The model's parameters are out of range.
    #[error(transparent)]
    Model(#[from] ParamsError),
    /// The local backend's options are invalid.
    #[error("local: {0}")]
    Local(LocalError),
    /// `backend = "llm"` without its table.
    #[error("backend = \"llm\" needs an [llm] table")]
    NoLlmTable,
    /// The llm backend could not be built.
    #[error(transparent)]
    Llm(#[from] LlmEvaluatorError),
    /// `backend = "circle"` without its table.
    #[error("backend = \"circle\" needs a [circle] table")]
    NoCircleTable,
    /// The circle could not be built.
    #[error(transparent)]
    Circle(#[from] CircleError),
}

impl RelationalLayer {
    /// Builds the layer and its backend.
    pub fn new(opts: RelationalOptions) -> Result<Self, RelationalError> {
        opts.model.validate()?;
        let local =
            || LocalEvaluator::new("local", opts.local.clone()).map_err(RelationalError::Local);
        let (engine, reads) = match opts.backend {
            Backend::Local => {
                let l = local()?;
                let reads = l.options().reads();
                (Engine::Single(Arc::new(l)), reads)
            }
            Backend::Llm => {
                let o = opts.llm.clone().ok_or(RelationalError::NoLlmTable)?;
                let e = LlmEvaluator::new("llm", o)?;
                (Engine::Single(Arc::new(e)), Vec::new())
            }
            Backend::Circle => {
                let o = opts.circle.clone().ok_or(RelationalError::NoCircleTable)?;
                let c = Circle::new(o, &opts.local)?;
                let reads = c.reads();
                (Engine::Circle(c), reads)
            }
        };
        Ok(Self {
            opts,
            engine,
            reads,
        })
    }

    /// The options.
    pub fn options(&self) -> &RelationalOptions {
        &self.opts
    }

    /// Groups the request's segments into prompt layers, highest authority first.
    fn layers<'a>(&self, input: &'a ScanInput<'a>) -> Vec<LayerText<'a>> {
        let mut out: Vec<LayerText<'a>> = Vec::new();
        for seg in &input.segments {
            let layer = match (PromptLayer::of_role(seg.role), self.opts.other_roles) {
                (Some(l), _) => l,
                (None, OtherRoles::User) => PromptLayer::User,
                (None, OtherRoles::Ignore) => continue,
            };
            match out.iter_mut().find(|l| l.layer == layer) {
                Some(l) => {
                    l.segments.push(seg.index);
                    l.texts.push(seg.text);
                }
                None => out.push(LayerText {
                    layer,
                    segments: vec![seg.index],
                    texts: vec![seg.text],
                }),
            }
        }
        out.sort_by_key(|l| l.layer);
        out
    }

    /// Evaluates one request: the report, never an error (a failure is a report status).
    pub fn evaluate(&self, input: &RelateInput<'_>) -> RelationalReport {
        let t0 = Instant::now();
        let (result, runs, consensus) = match &self.engine {
            Engine::Single(e) => {
                let r = e.assess(input);
                let run = single_run(e.as_ref(), &r, t0);
                (r.map_err(|e| e.to_string()), vec![run], None)
            }
            Engine::Circle(c) => {
                let CircleRun {
                    result,
                    runs,
                    consensus,
                } = c.run(input);
                (result.map_err(|e| e.to_string()), runs, consensus)
            }
        };
        let mut cost = RelationalCost::default();
        for r in &runs {
            cost.merge(&r.cost);
        }
        let mut report = RelationalReport {
            layer: self.opts.name.clone(),
            backend: self.opts.backend,
            status: RelationalStatus::Ok,
            layers: Vec::new(),
            violations: Vec::new(),
            balance: None,
            exchange: None,
            label: None,
            why: None,
            evaluators: runs,
            consensus,
            cost,
            elapsed_us: 0,
        };
        match result {
            Ok(a) => {
                let mut violations = a.violations;
                violations.extend(model::structural_violations(&a.layers, &self.opts.model));
                let violations = model::normalize_violations(violations);
                let j = model::judge(&a.layers, &violations, &self.opts.model);
                report.why = Some(model::explain(&a.layers, &violations, &self.opts.model, &j));
                report.layers = a.layers;
                report.violations = violations;
                report.balance = Some(j.balance);
                report.exchange = Some(j.exchange);
                report.label = Some(j.label);
            }
            Err(reason) => report.status = RelationalStatus::Failed { reason },
        }
        report.elapsed_us = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
        report
    }

    fn finding(
        &self,
        label: RelationalLabel,
        input: &ScanInput<'_>,
        user: &LayerText<'_>,
    ) -> Finding {
        let seg = user.segments[0];
        let blocks = self.opts.block.contains(&label);
        let (id, why) = match label {
            RelationalLabel::Extractive => (
                EXTRACTIVE_ID,
                "relational: extractive exchange (a lower layer works against the system layer)",
            ),
            RelationalLabel::Manipulative => (
                MANIPULATIVE_ID,
                "relational: manipulative exchange (the input works against the instructions)",
            ),
            _ => (
                BORDERLINE_ID,
                "relational: borderline exchange (neither clearly reciprocal nor manipulative)",
            ),
        };
        Finding {
            layer: self.opts.name.clone(),
            rule_id: id.into(),
            category: if label == RelationalLabel::Extractive {
                Category::SystemMarker
            } else {
                Category::Other
            },
            strength: if blocks {
                Strength::Strong
            } else {
                Strength::Weak
            },
            points: if blocks { 3 } else { 0 },
            severity: if blocks {
                RiskClass::HighRisk
            } else {
                RiskClass::LowRisk
            },
            segment: seg,
            role: input
                .segments
                .iter()
                .find(|s| s.index == seg)
                .map_or(Role::User, |s| s.role),
            counted: blocks,
            span: Span {
                start: 0,
                end: user.texts[0].len(),
            },
            view: ViewKind::Raw,
            via: Vec::new(),
            rationale: why.into(),
        }
    }
}

fn single_run(
    e: &dyn Evaluator,
    r: &Result<Assessment, EvaluatorError>,
    t0: Instant,
) -> EvaluatorRun {
    let elapsed_ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
    match r {
        Ok(a) => EvaluatorRun {
            name: e.name().into(),
            backend: e.backend(),
            model: a.model.clone(),
            outcome: a.outcome.clone().unwrap_or_else(|| "ok".into()),
            layers: a.layers.clone(),
            active: true,
            failed_round: None,
            patterns: a.patterns.clone(),
            cost: a.cost.clone(),
            elapsed_ms,
        },
        Err(err) => EvaluatorRun {
            name: e.name().into(),
            backend: e.backend(),
            model: e.model().map(String::from),
            outcome: err.outcome().into(),
            layers: Vec::new(),
            active: false,
            failed_round: Some(1),
            patterns: Vec::new(),
            cost: err.cost(),
            elapsed_ms,
        },
    }
}

impl Detector for RelationalLayer {
    fn name(&self) -> &str {
        &self.opts.name
    }

    fn detect(&self, input: &ScanInput<'_>) -> Result<Detection, DetectorError> {
        let layers = [];
        let findings = [];
        let spans = [];
        let needs = std::collections::BTreeSet::new();
        let earlier = Earlier {
            layers: &layers,
            findings: &findings,
            spans: &spans,
            needs_judgement: &needs,
        };
        self.detect_after(input, &earlier)
    }

    fn detect_after(
        &self,
        input: &ScanInput<'_>,
        earlier: &Earlier<'_>,
    ) -> Result<Detection, DetectorError> {
        let layers = self.layers(input);
        let Some(user) = layers.iter().find(|l| l.layer == PromptLayer::User) else {
            let report = RelationalReport {
                layer: self.opts.name.clone(),
                backend: self.opts.backend,
                status: RelationalStatus::Skipped {
                    reason: "no user layer: nothing to judge the exchange by".into(),
                },
                layers: Vec::new(),
                violations: Vec::new(),
                balance: None,
                exchange: None,
                label: None,
                why: None,
                evaluators: Vec::new(),
                consensus: None,
                cost: RelationalCost::default(),
                elapsed_us: 0,
            };
            return Ok(Detection {
                report: Some(LayerReport::new(report)),
                ..Detection::default()
            });
        };
        let relate = RelateInput {
            layers: &layers,
            earlier: Some(earlier),
            deadline: input.deadline,
        };
        let report = self.evaluate(&relate);
        let mut det = Detection::default();
        if let Some(label) = report.label
            && label != RelationalLabel::Reciprocal
        {
            det.findings.push(self.finding(label, input, user));
            if self.opts.block.contains(&label) {
                det.risk = Some(RiskClass::HighRisk);
            }
        }
        // A failed evaluation fails the layer (its fail mode decides); the report is kept.
        det.failure = match &report.status {
            RelationalStatus::Failed { reason } => {
                Some(format!("relational evaluation failed: {reason}"))
            }
            RelationalStatus::Ok | RelationalStatus::Skipped { .. } => None,
        };
        det.report = Some(LayerReport::new(report));
        Ok(det)
    }

    fn reads_layers(&self) -> Vec<String> {
        self.reads.clone()
    }
}

/// Builds `[[layers]] kind = "relational"`.
#[derive(Debug, Default)]
pub struct RelationalFactory;

impl DetectorFactory for RelationalFactory {
    fn kind(&self) -> &str {
        RELATIONAL_KIND
    }

    /// Trust violations between prompt layers (a user layer overriding or taking the role of the system layer) and the polite openings of prompt extraction.
    fn owasp(&self) -> &'static [rampart_core::Owasp] {
        &[rampart_core::Owasp::Llm01, rampart_core::Owasp::Llm07]
    }

    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        let opts: RelationalOptions = layer_options(RELATIONAL_KIND, options)?;
        let layer = RelationalLayer::new(opts).map_err(|e| BuildError::Options {
            kind: RELATIONAL_KIND.into(),
            message: e.to_string(),
        })?;
        Ok(Arc::new(layer))
    }
}
