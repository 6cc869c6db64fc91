//! The pipeline: limits → normalization → layers in order → scoring → policy (ratchet).

use crate::config::{
    DataInjection, FUSE_KIND, FailMode, HashSection, LayerConfig, NORMALIZE_LAYER, PipelineConfig,
    RULES_KIND, RulesLayerOptions, RunIf,
};
use crate::decision::{
    Action, AppliedTransform, Decision, Finding, LayerResult, LayerStatus, ScanOutcome, Span,
};
use crate::detector::{
    Detection, Detector, DetectorError, Earlier, ScanInput, SegmentInput, SpanScore,
};
use crate::fuse::{FuseDetector, FuseOptions};
use crate::input::{InputError, ScanRequest, Trust};
use crate::owasp::{Capability, Owasp, OwaspEntry, Protection};
use crate::rules_layer::{RulesDetector, transform_findings};
use crate::sanitize::{DATA_INJECTION_REASON, blocked_only_by_data, sanitize};
use crate::scoring::{category_scores, classify, sort_findings};
use rampart_normalize::Normalizer;
use rampart_rules::RiskClass;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Builds a detector from a layer's options. Crates that add detectors (classifiers, an LLM
/// judge) register a factory so pipelines can be assembled from configuration.
pub trait DetectorFactory: Send + Sync {
    /// The `kind` this factory builds.
    fn kind(&self) -> &str;
    /// Builds the detector, validating the options strictly.
    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError>;
    /// The risks of the OWASP Top 10 for LLM Applications (2025) that layers of this kind
    /// address (`rampart owasp` reports them). Empty by default: a kind that says nothing
    /// claims no coverage.
    fn owasp(&self) -> &'static [Owasp] {
        &[]
    }
}

/// Known detector factories, by kind.
pub struct Registry {
    factories: BTreeMap<String, Box<dyn DetectorFactory>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("kinds", &self.factories.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for Registry {
    /// A registry with the built-in `rules` and `fuse` factories.
    fn default() -> Self {
        let mut r = Registry {
            factories: BTreeMap::new(),
        };
        r.register(Box::new(RulesFactory));
        r.register(Box::new(FuseFactory));
        r
    }
}

impl Registry {
    /// Adds (or replaces) a factory.
    pub fn register(&mut self, factory: Box<dyn DetectorFactory>) {
        self.factories.insert(factory.kind().to_string(), factory);
    }

    /// The registered kinds.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }

    /// Every registered layer kind and every [`Capability`], with the OWASP risks each
    /// addresses: layers first (by kind), then capabilities (in [`Capability::ALL`] order).
    pub fn owasp(&self) -> Vec<OwaspEntry<'_>> {
        let layers = self.factories.iter().map(|(kind, f)| OwaspEntry {
            protection: Protection::Layer(kind),
            owasp: sorted(f.owasp()),
        });
        let caps = Capability::ALL.into_iter().map(|c| OwaspEntry {
            protection: Protection::Capability(c),
            owasp: sorted(c.owasp()),
        });
        layers.chain(caps).collect()
    }

    fn build(&self, layer: &LayerConfig) -> Result<Arc<dyn Detector>, BuildError> {
        let factory = self
            .factories
            .get(&layer.kind)
            .ok_or_else(|| BuildError::UnknownLayer {
                kind: layer.kind.clone(),
                known: self.factories.keys().cloned().collect(),
            })?;
        factory.build(&layer.options)
    }
}

fn sorted(ids: &[Owasp]) -> Vec<Owasp> {
    let mut v = ids.to_vec();
    v.sort();
    v.dedup();
    v
}

struct RulesFactory;

impl DetectorFactory for RulesFactory {
    fn kind(&self) -> &str {
        RULES_KIND
    }

    /// The union of the default pack's rule ids (a test in `rampart owasp` keeps them equal):
    /// the layer addresses what its rules do.
    fn owasp(&self) -> &'static [Owasp] {
        &[
            Owasp::Llm01,
            Owasp::Llm02,
            Owasp::Llm05,
            Owasp::Llm06,
            Owasp::Llm07,
        ]
    }

    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        let opts: RulesLayerOptions = layer_options(RULES_KIND, options)?;
        let det = RulesDetector::from_options(&opts).map_err(|e| BuildError::Layer {
            kind: RULES_KIND.into(),
            message: e.to_string(),
        })?;
        Ok(Arc::new(det))
    }
}

/// Reads a `[[layers]]` entry's options (everything but `kind`, `run_if` and `score_only`)
/// into the layer's options type `T`; a type or unknown-key error becomes
/// [`BuildError::Options`] for `kind`. Shared by every factory.
pub fn layer_options<T: serde::de::DeserializeOwned>(
    kind: &str,
    options: &toml::Table,
) -> Result<T, BuildError> {
    toml::Value::Table(options.clone())
        .try_into()
        .map_err(|e: toml::de::Error| BuildError::Options {
            kind: kind.into(),
            message: e.message().trim().to_string(),
        })
}

struct FuseFactory;

impl DetectorFactory for FuseFactory {
    fn kind(&self) -> &str {
        FUSE_KIND
    }

    /// Fuses the prompt-injection scores of earlier layers.
    fn owasp(&self) -> &'static [Owasp] {
        &[Owasp::Llm01]
    }

    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        let opts: FuseOptions = layer_options(FUSE_KIND, options)?;
        let det = FuseDetector::new(opts).map_err(|message| BuildError::Options {
            kind: FUSE_KIND.into(),
            message,
        })?;
        Ok(Arc::new(det))
    }
}

/// Why a pipeline could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No factory for a layer kind.
    #[error("unknown layer kind {kind:?} (known: {})", known.join(", "))]
    UnknownLayer {
        /// The kind asked for.
        kind: String,
        /// The kinds registered.
        known: Vec<String>,
    },
    /// A layer's options are invalid.
    #[error("layer {kind:?}: invalid options: {message}")]
    Options {
        /// The layer kind.
        kind: String,
        /// What is wrong.
        message: String,
    },
    /// A layer failed to build (e.g. a rule pack failed to compile).
    #[error("layer {kind:?} failed to build:\n{message}")]
    Layer {
        /// The layer kind.
        kind: String,
        /// What is wrong.
        message: String,
    },
    /// Two layers share a name.
    #[error("two layers are named {0:?}")]
    DuplicateLayer(String),
    /// A `run_if` condition is malformed or names no earlier layer.
    #[error("layer {layer:?}: invalid run_if: {message}")]
    RunIf {
        /// The layer whose condition is wrong.
        layer: String,
        /// What is wrong.
        message: String,
    },
    /// A `defer` band is malformed, has no judge after it, or there are two judges.
    #[error("layer {layer:?}: invalid defer: {message}")]
    Defer {
        /// The layer.
        layer: String,
        /// What is wrong.
        message: String,
    },
    /// A layer reads the result of a layer that does not come before it.
    #[error("layer {layer:?} reads layer {input:?}, which is not an earlier layer")]
    NotEarlier {
        /// The reading layer.
        layer: String,
        /// The layer it names.
        input: String,
    },
}

/// The assembled, immutable pipeline. `Send + Sync`; share it in an `Arc` and scan from any
/// thread. Nothing is compiled on the request path.
#[derive(Debug)]
pub struct Pipeline {
    config: PipelineConfig,
    normalizer: Normalizer,
    detectors: Vec<Arc<dyn Detector>>,
    /// Per detector, when it runs (from the configuration's layers).
    run_if: Vec<Option<RunIf>>,
    /// Per detector, whether it only scores (`score_only` in the configuration).
    score_only: Vec<bool>,
    /// Per detector, its band deferred to the judge (`defer` in the configuration).
    defer: Vec<Option<[f32; 2]>>,
    /// Per detector, its fail mode when it overrides the policy's.
    fail_modes: Vec<Option<FailMode>>,
    /// Rule IDs marked "needs judgement" by any detector.
    needs_judgement: std::collections::BTreeSet<String>,
    hash_key: [u8; 32],
    hash_key_id: String,
}

impl Pipeline {
    /// Builds the pipeline a configuration describes, with the built-in factories.
    pub fn from_config(config: PipelineConfig) -> Result<Pipeline, BuildError> {
        Pipeline::from_config_with(config, &Registry::default())
    }

    /// Builds the pipeline a configuration describes, with the given factories.
    pub fn from_config_with(
        config: PipelineConfig,
        registry: &Registry,
    ) -> Result<Pipeline, BuildError> {
        let detectors = config
            .layers
            .iter()
            .map(|l| registry.build(l))
            .collect::<Result<Vec<_>, _>>()?;
        let per_layer = PerLayer {
            run_if: config.layers.iter().map(|l| l.run_if.clone()).collect(),
            score_only: config.layers.iter().map(|l| l.score_only).collect(),
            defer: config.layers.iter().map(|l| l.defer).collect(),
            fail_modes: config.layers.iter().map(|l| l.fail_mode).collect(),
        };
        Pipeline::assemble(config, detectors, per_layer)
    }

    /// This pipeline with one more layer at the end, built from `layer`; the existing
    /// layers are shared with this pipeline, not built again (a model is loaded once). The
    /// whole is checked as [`Pipeline::from_config_with`] checks a configuration.
    ///
    /// ```
    /// use rampart_core::{LayerConfig, Pipeline, Registry};
    ///
    /// let base = Pipeline::default_pipeline().unwrap();
    /// let fuse: LayerConfig =
    ///     toml::from_str("kind = \"fuse\"\ninputs = { rules = 1.0 }\nthreshold = 0.5").unwrap();
    /// let more = base.with_layer(fuse, &Registry::default()).unwrap();
    /// assert_eq!(more.layer_names(), ["normalize", "rules", "fuse"]);
    /// assert_eq!(base.layer_names(), ["normalize", "rules"]);
    /// // Names stay unique.
    /// let rules: LayerConfig = toml::from_str("kind = \"rules\"").unwrap();
    /// assert!(base.with_layer(rules, &Registry::default()).is_err());
    /// ```
    pub fn with_layer(
        &self,
        layer: LayerConfig,
        registry: &Registry,
    ) -> Result<Pipeline, BuildError> {
        let mut detectors = self.detectors.clone();
        detectors.push(registry.build(&layer)?);
        let mut per_layer = PerLayer {
            run_if: self.run_if.clone(),
            score_only: self.score_only.clone(),
            defer: self.defer.clone(),
            fail_modes: self.fail_modes.clone(),
        };
        per_layer.run_if.push(layer.run_if.clone());
        per_layer.score_only.push(layer.score_only);
        per_layer.defer.push(layer.defer);
        per_layer.fail_modes.push(layer.fail_mode);
        let mut config = self.config.clone();
        config.layers.push(layer);
        Pipeline::assemble(config, detectors, per_layer)
    }

    /// Builds a pipeline from already-built detectors (the config's `layers`, and so their
    /// `run_if` and `score_only` settings, are ignored: every detector runs and decides).
    pub fn with_detectors(
        config: PipelineConfig,
        detectors: Vec<Arc<dyn Detector>>,
    ) -> Result<Pipeline, BuildError> {
        let n = detectors.len();
        let per_layer = PerLayer {
            run_if: vec![None; n],
            score_only: vec![false; n],
            defer: vec![None; n],
            fail_modes: vec![None; n],
        };
        Pipeline::assemble(config, detectors, per_layer)
    }

    /// Checks layer names, the layers each layer reads, `run_if` conditions and `defer`
    /// bands (one per detector) and builds.
    fn assemble(
        config: PipelineConfig,
        detectors: Vec<Arc<dyn Detector>>,
        per_layer: PerLayer,
    ) -> Result<Pipeline, BuildError> {
        let PerLayer {
            run_if,
            score_only,
            defer,
            fail_modes,
        } = per_layer;
        let mut names = std::collections::BTreeSet::new();
        names.insert(NORMALIZE_LAYER.to_string());
        for d in &detectors {
            if !names.insert(d.name().to_string()) {
                return Err(BuildError::DuplicateLayer(d.name().to_string()));
            }
        }
        for (i, d) in detectors.iter().enumerate() {
            for input in d.reads_layers() {
                if !detectors[..i].iter().any(|e| e.name() == input) {
                    return Err(BuildError::NotEarlier {
                        layer: d.name().to_string(),
                        input,
                    });
                }
            }
        }
        for (i, cond) in run_if.iter().enumerate() {
            let Some(c) = cond else { continue };
            let layer = detectors[i].name().to_string();
            let err = |message: String| BuildError::RunIf {
                layer: layer.clone(),
                message,
            };
            match (&c.score_of, c.between) {
                (Some(name), Some([lo, hi])) => {
                    if !detectors[..i].iter().any(|d| d.name() == name) {
                        return Err(err(format!("score_of {name:?} is not an earlier layer")));
                    }
                    if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) || lo > hi {
                        return Err(err(format!(
                            "between [{lo}, {hi}] must satisfy 0 <= low <= high <= 1"
                        )));
                    }
                }
                (None, None) if c.not_blocked => {}
                (None, None) => return Err(err("an empty condition".into())),
                _ => return Err(err("score_of and between go together".into())),
            }
        }
        check_deferrals(&detectors, &defer)?;
        let needs_judgement = detectors.iter().flat_map(|d| d.judgement_rules()).collect();
        let hash_key = resolve_hash_key(&config.hash);
        let hash_key_id = blake3::hash(&hash_key).to_hex()[..8].to_string();
        Ok(Pipeline {
            normalizer: Normalizer::new(config.normalize.to_config()),
            config,
            detectors,
            run_if,
            score_only,
            defer,
            fail_modes,
            needs_judgement,
            hash_key,
            hash_key_id,
        })
    }

    /// The default pipeline: the embedded configuration and the embedded rule pack.
    pub fn default_pipeline() -> Result<Pipeline, BuildError> {
        Pipeline::from_config(PipelineConfig::default())
    }

    /// The configuration in force.
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// The detectors, in order.
    pub fn detectors(&self) -> &[Arc<dyn Detector>] {
        &self.detectors
    }

    /// The names of the layers every decision reports, in order: [`NORMALIZE_LAYER`], then
    /// each detector's.
    pub fn layer_names(&self) -> Vec<&str> {
        std::iter::once(NORMALIZE_LAYER)
            .chain(self.detectors.iter().map(|d| d.name()))
            .collect()
    }

    /// The ID of the key input hashes are made with (every decision's `hash_key_id`).
    pub fn hash_key_id(&self) -> &str {
        &self.hash_key_id
    }

    /// Keyed BLAKE3 hash of a request's segments (roles and texts), hex.
    pub fn input_hash(&self, req: &ScanRequest) -> String {
        let mut h = blake3::Hasher::new_keyed(&self.hash_key);
        for s in &req.segments {
            h.update(s.role.name().as_bytes());
            h.update(&[0]);
            h.update(&(s.text.len() as u64).to_le_bytes());
            h.update(s.text.as_bytes());
        }
        h.finalize().to_hex().to_string()
    }

    /// Scans plain text as one user segment.
    pub fn scan_text(&self, text: &str) -> Result<ScanOutcome, InputError> {
        self.scan(&ScanRequest::text(text))
    }

    /// Scans a request. Refuses (never truncates) requests over the limits. Every other
    /// outcome is an explicit ALLOW, SANITIZE or BLOCK; a layer that fails or times out is
    /// BLOCK unless the policy's fail mode is `open`.
    pub fn scan(&self, req: &ScanRequest) -> Result<ScanOutcome, InputError> {
        req.check(&self.config.limits)?;
        let started = Instant::now();
        let policy = &self.config.policy;
        let budget = Duration::from_millis(policy.layer_timeout_ms);

        // Normalization: once per segment, shared by every layer.
        let t0 = Instant::now();
        let segments: Vec<SegmentInput<'_>> = req
            .segments
            .iter()
            .enumerate()
            .map(|(index, s)| SegmentInput {
                index,
                role: s.role,
                trust: s.trust.unwrap_or_else(|| policy.trust_of(s.role)),
                text: &s.text,
                normalized: self.normalizer.normalize(&s.text),
                windows: Vec::new(),
            })
            .collect();
        let mut findings: Vec<Finding> = Vec::new();
        let mut transforms = Vec::new();
        for seg in &segments {
            transform_findings(seg, &mut findings);
            transforms.extend(seg.normalized.transforms.iter().map(|t| AppliedTransform {
                segment: seg.index,
                kind: t.kind,
                count: t.count,
                span: Span::from(t.span.clone()),
                depth: t.depth,
            }));
        }
        let mut layers = vec![self.layer_result(
            NORMALIZE_LAYER,
            LayerStatus::Ok,
            &findings,
            None,
            None,
            t0.elapsed(),
        )];

        let mut segments = segments;
        self.window_segments(&mut segments);
        let mut input = ScanInput {
            segments,
            deadline: Instant::now() + budget,
            localize: self.config.localize,
            conversation: req.context.as_deref(),
        };
        // Localized scores of each layer, parallel to `layers` (normalize has none).
        let mut layer_spans: Vec<Vec<SpanScore>> = vec![Vec::new()];
        let mut deferred: Vec<Deferred> = Vec::new();
        let mut judge: Option<crate::intent::JudgeReport> = None;
        let mut relational: Option<crate::relational::RelationalReport> = None;
        for (i, det) in self.detectors.iter().enumerate() {
            let earlier = Earlier {
                layers: &layers,
                findings: &findings,
                spans: &layer_spans,
                needs_judgement: &self.needs_judgement,
            };
            if let Some(reason) = self
                .run_if
                .get(i)
                .and_then(Option::as_ref)
                .and_then(|c| skip_reason(c, &earlier))
            {
                layers.push(LayerResult {
                    layer: det.name().to_string(),
                    status: LayerStatus::Skipped { reason },
                    risk: RiskClass::LowRisk,
                    action: Action::Allow,
                    score: None,
                    localized: None,
                    categories: BTreeMap::new(),
                    findings: 0,
                    undecided: false,
                    elapsed_us: 0,
                });
                layer_spans.push(Vec::new());
                continue;
            }
            input.deadline = Instant::now() + budget;
            let t = Instant::now();
            let result = det.detect_after(&input, &earlier);
            let elapsed = t.elapsed();
            let result = match result {
                Ok(_) if elapsed > budget => Err(DetectorError::Timeout),
                Ok(mut d) => {
                    // A judge whose call failed is a failed layer; its report is kept.
                    let report = d.judge.take();
                    let failed = report.as_ref().is_some_and(|r| r.failed());
                    let message = report.as_ref().filter(|_| failed).map(|r| judge_failure(r));
                    if let Some(r) = report {
                        judge = Some(*r);
                    }
                    // So is a relational layer whose evaluation failed.
                    let rel = d.relational.take();
                    let message = message.or_else(|| {
                        rel.as_ref().and_then(|r| match &r.status {
                            crate::relational::RelationalStatus::Failed { reason } => {
                                Some(format!("relational evaluation failed: {reason}"))
                            }
                            crate::relational::RelationalStatus::Ok
                            | crate::relational::RelationalStatus::Skipped { .. } => None,
                        })
                    });
                    if let Some(r) = rel {
                        relational = Some(*r);
                    }
                    match message {
                        Some(m) => Err(DetectorError::Failed(m)),
                        None => Ok(d),
                    }
                }
                other => other,
            };
            match result {
                Ok(Detection {
                    findings: mut f,
                    score,
                    mut risk,
                    spans,
                    judge: _,
                    relational: _,
                }) => {
                    if self.score_only.get(i).copied().unwrap_or(false) {
                        // Reported, not counted; the layer's own verdict stays ALLOW.
                        for x in &mut f {
                            x.counted = false;
                        }
                        risk = None;
                    }
                    let mut result =
                        self.layer_result(det.name(), LayerStatus::Ok, &f, score, risk, elapsed);
                    result.localized = spans.first().copied();
                    if det.resolves_deferred() {
                        judge_floor(&mut result, judge.as_ref());
                    }
                    let band = self.defer.get(i).copied().flatten();
                    if let (Some([lo, hi]), Some(s)) = (band, score)
                        && (lo..=hi).contains(&s)
                        && !self.score_only.get(i).copied().unwrap_or(false)
                    {
                        deferred.push(Deferred::hold(
                            layers.len(),
                            &mut result,
                            &mut f,
                            findings.len(),
                            s,
                        ));
                    }
                    layers.push(result);
                    layer_spans.push(spans);
                    findings.extend(f);
                }
                Err(e) => {
                    let status = match e {
                        DetectorError::Timeout => LayerStatus::Timeout {
                            budget_ms: policy.layer_timeout_ms,
                        },
                        DetectorError::Failed(message) => LayerStatus::Error { message },
                    };
                    let mode = self.fail_mode_of(i);
                    let (risk, action) = match mode {
                        FailMode::Closed => (RiskClass::HighRisk, Action::Block),
                        FailMode::Open => (RiskClass::LowRisk, Action::Allow),
                    };
                    layers.push(LayerResult {
                        layer: det.name().to_string(),
                        status,
                        risk,
                        action,
                        score: None,
                        localized: None,
                        categories: BTreeMap::new(),
                        findings: 0,
                        undecided: false,
                        elapsed_us: micros(elapsed),
                    });
                    layer_spans.push(Vec::new());
                }
            }
        }
        if let Some(j) = judge.as_mut().filter(|j| j.verdict.is_some()) {
            j.action_without_judge =
                Some(self.action_without(&j.layer, &layers, &findings, &deferred));
        }
        let deferral_reasons = resolve_deferrals(deferred, &mut layers, &mut findings, &judge);

        sort_findings(&mut findings);
        let categories = category_scores(&findings);
        let combined_risk = classify(&categories, &policy.scoring);

        // The ratchet: the final verdict is the maximum over the combined score and every
        // layer's own verdict, so no layer can lower what an earlier one decided.
        let mut risk = combined_risk;
        let mut action = policy.action_for(combined_risk);
        for l in &layers {
            action = action.max(l.action);
        }
        if let Some(j) = judge.as_mut().filter(|j| j.verdict.is_some()) {
            j.action_with_judge = Some(action);
        }
        let mut reasons = Vec::new();
        let mut degraded = false;
        for (i, l) in layers.iter().enumerate() {
            risk = risk.max(l.risk);
            action = action.max(l.action);
            // `layers[0]` is normalize, which never fails.
            let mode = self.fail_mode_of(i.saturating_sub(1));
            match &l.status {
                LayerStatus::Ok => {}
                LayerStatus::Error { message } => {
                    degraded = true;
                    reasons.push(format!(
                        "layer {} failed ({message}); fail mode {mode:?} gives {}",
                        l.layer, l.action
                    ));
                }
                LayerStatus::Timeout { budget_ms } => {
                    degraded = true;
                    reasons.push(format!(
                        "layer {} ran past its {budget_ms} ms budget; fail mode {mode:?} gives {}",
                        l.layer, l.action
                    ));
                }
                LayerStatus::Skipped { reason } => {
                    reasons.push(format!("layer {} skipped: {reason}", l.layer));
                }
            }
        }
        reasons.extend(deferral_reasons);

        if action == Action::Block
            && policy.data_injection == DataInjection::Sanitize
            && blocked_only_by_data(policy, &layers, &findings, &input.segments)
        {
            action = Action::Sanitize;
            reasons.push(DATA_INJECTION_REASON.into());
        }
        let mut sanitized = None;
        if action == Action::Sanitize {
            let s = sanitize(req, &input.segments, &findings, &policy.sanitize_marker);
            if s.iter().map(|s| s.removed).sum::<usize>() == 0 {
                // Nothing could be neutralized: do not pass the input on as if it were clean.
                action = Action::Block;
                reasons.push("SANITIZE found no span to neutralize; escalated to BLOCK".into());
            } else {
                sanitized = Some(s);
            }
        }
        let uncounted_why = |f: &Finding| {
            if input
                .segments
                .get(f.segment)
                .is_some_and(|s| s.trust == Trust::Trusted)
            {
                Uncounted::Trusted
            } else if self
                .detectors
                .iter()
                .zip(&self.score_only)
                .any(|(d, &only)| only && d.name() == f.layer)
            {
                Uncounted::ScoreOnly
            } else {
                Uncounted::Informational
            }
        };
        reasons.splice(
            0..0,
            explain(&categories, combined_risk, &findings, uncounted_why),
        );

        let decision = Decision {
            id: req.id.clone(),
            action,
            risk,
            categories,
            layers,
            findings,
            transforms,
            reasons,
            degraded,
            input_hash: self.input_hash(req),
            hash_key_id: self.hash_key_id.clone(),
            input_bytes: req.total_bytes(),
            segments: req.segments.len(),
            policy_version: policy.version.clone(),
            elapsed_us: micros(started.elapsed()),
            judge,
            relational,
            conversation: None,
        };
        Ok(ScanOutcome {
            decision,
            sanitized,
        })
    }

    fn layer_result(
        &self,
        name: &str,
        status: LayerStatus,
        findings: &[Finding],
        score: Option<f32>,
        asserted: Option<RiskClass>,
        elapsed: Duration,
    ) -> LayerResult {
        let categories = category_scores(findings);
        let mut risk = classify(&categories, &self.config.policy.scoring);
        if let Some(a) = asserted {
            risk = risk.max(a);
        }
        LayerResult {
            layer: name.to_string(),
            status,
            risk,
            action: self.config.policy.action_for(risk),
            score,
            localized: None,
            categories,
            findings: findings.len(),
            undecided: false,
            elapsed_us: micros(elapsed),
        }
    }

    /// The verdict without the judge layer named `judge`: its findings and its own verdict
    /// left out, deferred layers with their own verdicts and findings (the ratchet over the
    /// combined score and every other layer, as `scan` computes it).
    fn action_without(
        &self,
        judge: &str,
        layers: &[LayerResult],
        findings: &[Finding],
        deferred: &[Deferred],
    ) -> Action {
        let mut f: Vec<Finding> = findings.to_vec();
        for d in deferred {
            for &k in &d.counted {
                if let Some(x) = f.get_mut(k) {
                    x.counted = true;
                }
            }
        }
        f.retain(|x| x.layer != judge);
        let policy = &self.config.policy;
        let mut action = policy.action_for(classify(&category_scores(&f), &policy.scoring));
        for (i, l) in layers.iter().enumerate().filter(|(_, l)| l.layer != judge) {
            let own = deferred
                .iter()
                .find(|d| d.layer == i)
                .map_or(l.action, |d| d.action);
            action = action.max(own);
        }
        action
    }

    /// The fail mode of detector `i`: its own, else the policy's.
    fn fail_mode_of(&self, i: usize) -> FailMode {
        self.fail_modes
            .get(i)
            .copied()
            .flatten()
            .unwrap_or(self.config.policy.fail_mode)
    }

    /// Cuts each untrusted segment into the windows classifier layers score
    /// ([`LocalizeConfig::windows`](crate::LocalizeConfig::windows)), once per scan.
    fn window_segments(&self, segments: &mut [SegmentInput<'_>]) {
        for seg in segments.iter_mut().filter(|s| s.trust == Trust::Untrusted) {
            seg.windows = self.config.localize.windows(seg.text);
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn explain(
    categories: &BTreeMap<rampart_rules::Category, u8>,
    risk: RiskClass,
    findings: &[Finding],
    uncounted_why: impl Fn(&Finding) -> Uncounted,
) -> Vec<String> {
    if categories.is_empty() {
        return vec![no_signal(findings, uncounted_why)];
    }
    let cats: Vec<String> = categories.iter().map(|(c, s)| format!("{c}={s}")).collect();
    let mut ids: Vec<&str> = findings
        .iter()
        .filter(|f| f.counted && f.points > 0)
        .map(|f| f.rule_id.as_str())
        .collect();
    ids.dedup();
    vec![format!(
        "{risk}: {} from {}",
        cats.join(", "),
        ids.join(", ")
    )]
}

/// Why a finding does not count towards the risk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Uncounted {
    /// It is in a trusted segment.
    Trusted,
    /// Its layer is configured `score_only`.
    ScoreOnly,
    /// Its layer reports it for information only, e.g. a score in an ambiguous band below
    /// the layer's threshold.
    Informational,
}

/// The reason of a decision without counted signal: how many findings were reported
/// anyway, and why each kind does not count.
fn no_signal(findings: &[Finding], why: impl Fn(&Finding) -> Uncounted) -> String {
    let mut trusted = 0usize;
    let mut score_only: Vec<&str> = Vec::new();
    let mut informational: Vec<&str> = Vec::new();
    let (mut n_score_only, mut n_informational) = (0usize, 0usize);
    for f in findings.iter().filter(|f| !f.counted) {
        let (n, ids) = match why(f) {
            Uncounted::Trusted => {
                trusted += 1;
                continue;
            }
            Uncounted::ScoreOnly => (&mut n_score_only, &mut score_only),
            Uncounted::Informational => (&mut n_informational, &mut informational),
        };
        *n += 1;
        if !ids.contains(&f.rule_id.as_str()) {
            ids.push(&f.rule_id);
        }
    }
    if trusted + n_score_only + n_informational == 0 {
        return "no signal found".to_string();
    }
    let mut parts = Vec::new();
    if trusted > 0 {
        let only = if n_score_only + n_informational == 0 {
            " only"
        } else {
            ""
        };
        parts.push(format!("{trusted} finding(s) in trusted segments{only}"));
    }
    if n_informational > 0 {
        parts.push(format!(
            "{n_informational} informational finding(s) below the decision thresholds ({})",
            informational.join(", ")
        ));
    }
    if n_score_only > 0 {
        parts.push(format!(
            "{n_score_only} finding(s) from score-only layers ({})",
            score_only.join(", ")
        ));
    }
    format!("no counted signal ({})", parts.join("; "))
}

/// The 32-byte hash key: from the configured environment variable or literal, else a
/// random per-process key (hashes then correlate only within one process).
fn resolve_hash_key(section: &HashSection) -> [u8; 32] {
    let material = section
        .key_env
        .as_deref()
        .and_then(|name| std::env::var(name).ok())
        .filter(|k| !k.is_empty())
        .or_else(|| section.key.clone());
    match material {
        Some(k) => blake3::derive_key("rampart input hash v1", k.as_bytes()),
        None => {
            use std::hash::{BuildHasher, Hasher};
            let mut seed = Vec::new();
            for _ in 0..4 {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u128(
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_nanos())
                        .unwrap_or(0),
                );
                h.write_u32(std::process::id());
                seed.extend_from_slice(&h.finish().to_le_bytes());
            }
            blake3::derive_key("rampart input hash v1 (ephemeral)", &seed)
        }
    }
}

/// Why a layer with condition `c` does not run, given the earlier layers' results; `None`
/// when it runs.
fn skip_reason(c: &RunIf, earlier: &Earlier<'_>) -> Option<String> {
    if c.not_blocked && earlier.layers.iter().any(|l| l.action == Action::Block) {
        return Some("an earlier layer decided BLOCK".into());
    }
    if let (Some(name), Some([lo, hi])) = (&c.score_of, c.between) {
        let score = earlier.score_of(name)?;
        if score < lo || score > hi {
            return Some(format!("{name} score {score:.3} outside [{lo}, {hi}]"));
        }
    }
    None
}

/// Per-detector settings from the configuration's `[[layers]]`, parallel to the detectors.
struct PerLayer {
    run_if: Vec<Option<RunIf>>,
    score_only: Vec<bool>,
    defer: Vec<Option<[f32; 2]>>,
    fail_modes: Vec<Option<FailMode>>,
}

/// Checks every `defer` band: well-formed, and followed by the pipeline's only judge.
fn check_deferrals(
    detectors: &[Arc<dyn Detector>],
    defer: &[Option<[f32; 2]>],
) -> Result<(), BuildError> {
    let judges: Vec<usize> = (0..detectors.len())
        .filter(|&i| detectors[i].resolves_deferred())
        .collect();
    if let [_, second, ..] = judges[..] {
        return Err(BuildError::Defer {
            layer: detectors[second].name().to_string(),
            message: "a pipeline has at most one judge layer".into(),
        });
    }
    for (i, band) in defer.iter().enumerate() {
        let Some([lo, hi]) = *band else { continue };
        let err = |message: String| BuildError::Defer {
            layer: detectors[i].name().to_string(),
            message,
        };
        if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) || lo > hi {
            return Err(err(format!(
                "[{lo}, {hi}] must satisfy 0 <= low <= high <= 1"
            )));
        }
        if !judges.iter().any(|&j| j > i) {
            return Err(err(format!(
                "no `{}` layer after it to decide its band",
                crate::intent::JUDGE_KIND
            )));
        }
    }
    Ok(())
}

/// A layer whose score fell in its `defer` band: what it would have decided, held until the
/// judge has spoken.
struct Deferred {
    /// Index in the decision's layers.
    layer: usize,
    risk: RiskClass,
    action: Action,
    /// Indices (in the findings list) of the findings it had counted.
    counted: Vec<usize>,
    score: f32,
}

impl Deferred {
    /// Marks `result` undecided (ALLOW, low risk) and its findings uncounted, and keeps
    /// what it decided. `layer` is the index `result` will have in the decision's layers,
    /// `offset` where its findings will start in the findings list.
    fn hold(
        layer: usize,
        result: &mut LayerResult,
        f: &mut [Finding],
        offset: usize,
        score: f32,
    ) -> Deferred {
        let counted = f
            .iter_mut()
            .enumerate()
            .filter(|(_, x)| x.counted)
            .map(|(k, x)| {
                x.counted = false;
                offset + k
            })
            .collect();
        let held = Deferred {
            layer,
            risk: result.risk,
            action: result.action,
            counted,
            score,
        };
        result.risk = RiskClass::LowRisk;
        result.action = Action::Allow;
        result.categories.clear();
        result.undecided = true;
        held
    }
}

/// Settles the undecided layers once every layer has run: with a judge verdict they stay
/// undecided (the judge's own verdict stands in for theirs, and can clear them); without
/// one, each gets its own verdict and findings back, so a judge that failed, was skipped or
/// was not asked never turns an undecided band into ALLOW.
fn resolve_deferrals(
    deferred: Vec<Deferred>,
    layers: &mut [LayerResult],
    findings: &mut [Finding],
    judge: &Option<crate::intent::JudgeReport>,
) -> Vec<String> {
    let verdict = judge.as_ref().and_then(|j| j.verdict.as_ref());
    deferred
        .into_iter()
        .filter_map(|d| {
            let layer = layers.get_mut(d.layer)?;
            match verdict {
                Some(v) => Some(format!(
                    "layer {} deferred its band (score {:.3}); the judge decided: {} ({:.2})",
                    layer.layer, d.score, v.intent_label, v.confidence
                )),
                None => {
                    layer.risk = d.risk;
                    layer.action = d.action;
                    let mut restored = Vec::new();
                    for &k in &d.counted {
                        if let Some(x) = findings.get_mut(k) {
                            x.counted = true;
                            restored.push(x.clone());
                        }
                    }
                    layer.categories = category_scores(&restored);
                    Some(format!(
                        "layer {} deferred its band (score {:.3}) but the judge gave no \
                         verdict; its own verdict applies: {}",
                        layer.layer, d.score, d.action
                    ))
                }
            }
        })
        .collect()
}

/// The judge's precedence on its own layer result: suspicious is at least SANITIZE,
/// malicious is BLOCK, whatever the policy maps their risk to. It never lowers anything:
/// the ratchet over all layers still takes the maximum.
fn judge_floor(result: &mut LayerResult, report: Option<&crate::intent::JudgeReport>) {
    use crate::intent::IntentLabel;
    let Some(v) = report.and_then(|r| r.verdict.as_ref()) else {
        return;
    };
    let (risk, action) = match v.intent_label {
        IntentLabel::Benign => return,
        IntentLabel::Suspicious => (RiskClass::MediumRisk, Action::Sanitize),
        IntentLabel::Malicious => (RiskClass::HighRisk, Action::Block),
    };
    result.risk = result.risk.max(risk);
    result.action = result.action.max(action);
}

/// The layer status message of a judge whose call failed (never input or model text).
fn judge_failure(r: &crate::intent::JudgeReport) -> String {
    let outcome = r.outcome.map_or("none", |o| o.name());
    match &r.outcome_detail {
        Some(d) => format!("judge outcome {outcome}: {d}"),
        None => format!("judge outcome {outcome}"),
    }
}
