//! Scanning one request, as named steps: limits → [`Pipeline::normalize`] → each layer in
//! order ([`Pipeline::run_layer`]) → the deferred bands settled → the ratchet
//! ([`Pipeline::verdict`]) → the data-channel and SANITIZE adjustments
//! ([`Pipeline::adjust`]) → the loggable [`Decision`] ([`Pipeline::decision`]).

use crate::config::{DataInjection, FailMode, NORMALIZE_LAYER, RunIf};
use crate::decision::{
    Action, AppliedTransform, Decision, Finding, LayerResult, LayerStatus, SanitizedSegment,
    ScanOutcome, Span,
};
use crate::detector::{Detection, DetectorError, Earlier, ScanInput, SegmentInput, SpanScore};
use crate::input::{InputError, ScanRequest, Trust};
use crate::normalize_layer::transform_findings;
use crate::pipeline::{Layer, Pipeline};
use crate::report::{LayerReport, Reports};
use crate::sanitize::{DATA_INJECTION_REASON, blocked_only_by_data, sanitize};
use crate::scoring::{category_scores, classify, sort_findings};
use crate::vocab::{Category, RiskClass};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What a scan has gathered so far.
struct Scan<'r> {
    input: ScanInput<'r>,
    /// The decision's layer results, `normalize` first.
    layers: Vec<LayerResult>,
    /// Localized scores of each layer, parallel to `layers` (`normalize` has none).
    spans: Vec<Vec<SpanScore>>,
    findings: Vec<Finding>,
    transforms: Vec<AppliedTransform>,
    /// Layers whose score fell in their `defer` band, held until every layer has run.
    deferred: Vec<Deferred>,
    /// The layers' reports, in layer order.
    reports: Vec<LayerReport>,
    /// The verdict of the layer that resolves deferred bands, when it gave one.
    resolution: Option<Resolution>,
}

/// The verdict a layer that resolves deferred bands gave on them.
struct Resolution {
    /// The layer's name.
    layer: String,
    /// Its verdict, as a line for the decision's reasons.
    summary: String,
    /// Its report, in [`Scan::reports`].
    report: Option<usize>,
    /// The decision's action without it ([`Pipeline::action_without`]).
    without: Option<Action>,
}

/// The verdict before the adjustments: the combined score, the ratchet, and the reasons.
struct Verdict {
    categories: BTreeMap<Category, u8>,
    combined_risk: RiskClass,
    risk: RiskClass,
    action: Action,
    reasons: Vec<String>,
    degraded: bool,
}

impl Pipeline {
    /// Scans a request. Refuses (never truncates) requests over the limits. Every other
    /// outcome is an explicit ALLOW, SANITIZE or BLOCK; a layer that fails or times out is
    /// BLOCK unless the policy's fail mode is `open`.
    pub fn scan(&self, req: &ScanRequest) -> Result<ScanOutcome, InputError> {
        req.check(&self.config.limits)?;
        let started = Instant::now();
        let mut scan = self.normalize(req);
        for (i, layer) in self.layers.iter().enumerate() {
            self.run_layer(i, layer, &mut scan);
        }
        let deferral_reasons = self.settle_deferrals(&mut scan);
        let mut verdict = self.verdict(&mut scan);
        verdict.reasons.extend(deferral_reasons);
        let sanitized = self.adjust(req, &scan, &mut verdict);
        let decision = self.decision(req, scan, verdict, started);
        Ok(ScanOutcome {
            decision,
            sanitized,
        })
    }

    fn budget(&self) -> Duration {
        Duration::from_millis(self.config.policy.layer_timeout_ms)
    }

    /// Normalization: once per segment, shared by every layer; the `normalize` layer's
    /// findings (windows are cut on first use, see `SegmentInput::windows`).
    fn normalize<'r>(&self, req: &'r ScanRequest) -> Scan<'r> {
        let policy = &self.config.policy;
        let t0 = Instant::now();
        let segments: Vec<SegmentInput<'r>> = req
            .segments
            .iter()
            .enumerate()
            .map(|(index, s)| SegmentInput {
                index,
                role: s.role,
                trust: s.trust.unwrap_or_else(|| policy.trust_of(s.role)),
                text: &s.text,
                normalized: self.normalizer.normalize(&s.text),
                windows: Default::default(),
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
        let normalize = self.layer_result(
            NORMALIZE_LAYER,
            LayerStatus::Ok,
            &findings,
            None,
            None,
            t0.elapsed(),
        );
        Scan {
            input: ScanInput {
                segments,
                deadline: Instant::now() + self.budget(),
                localize: self.config.localize,
                conversation: req.context.as_deref(),
            },
            layers: vec![normalize],
            spans: vec![Vec::new()],
            findings,
            transforms,
            deferred: Vec::new(),
            reports: Vec::new(),
            resolution: None,
        }
    }

    /// Runs layer `i` (or records why it is skipped) and records what it decided.
    fn run_layer(&self, i: usize, layer: &Layer, scan: &mut Scan<'_>) {
        let earlier = Earlier {
            layers: &scan.layers,
            findings: &scan.findings,
            spans: &scan.spans,
            needs_judgement: &self.needs_judgement,
        };
        if let Some(reason) = layer.run_if.as_ref().and_then(|c| skip_reason(c, &earlier)) {
            scan.push_skipped(layer.name(), reason);
            return;
        }
        let budget = self.budget();
        scan.input.deadline = Instant::now() + budget;
        let t = Instant::now();
        let result = layer.detector.detect_after(&scan.input, &earlier);
        let elapsed = t.elapsed();
        let result = match result {
            // Past its budget: a timeout, whatever it found (its report too).
            Ok(_) if elapsed > budget => Err(DetectorError::Timeout),
            Ok(mut d) => {
                let report = d.report.take().map(|r| {
                    scan.reports.push(r);
                    scan.reports.len() - 1
                });
                // A layer that ran but could not decide is a failed layer; its report is kept.
                match d.failure.take() {
                    Some(message) => Err(DetectorError::Failed(message)),
                    None => Ok((d, report)),
                }
            }
            Err(e) => Err(e),
        };
        match result {
            Ok((d, report)) => self.record_detection(layer, d, report, elapsed, scan),
            Err(e) => self.record_failure(i, layer, e, elapsed, scan),
        }
    }

    /// Records a layer that finished: its result (score-only, floor and defer band applied),
    /// its spans and findings, and its verdict on deferred bands.
    fn record_detection(
        &self,
        layer: &Layer,
        d: Detection,
        report: Option<usize>,
        elapsed: Duration,
        scan: &mut Scan<'_>,
    ) {
        let Detection {
            findings: mut f,
            score,
            mut risk,
            spans,
            floor,
            resolution,
            ..
        } = d;
        if layer.score_only {
            // Reported, not counted; the layer's own verdict stays ALLOW.
            for x in &mut f {
                x.counted = false;
            }
            risk = None;
        }
        let mut result = self.layer_result(layer.name(), LayerStatus::Ok, &f, score, risk, elapsed);
        result.localized = spans.first().copied();
        result.score_only = layer.score_only;
        // A score-only layer's verdict floor and its resolution of deferred bands are not
        // applied either: a judge that only scores feeds later layers (a combine layer) and
        // decides nothing itself; its failures still follow the fail mode.
        if let Some((r, a)) = floor.filter(|_| !layer.score_only) {
            result.risk = result.risk.max(r);
            result.action = result.action.max(a);
        }
        if layer.detector.resolves_deferred()
            && !layer.score_only
            && let Some(summary) = resolution
        {
            scan.resolution = Some(Resolution {
                layer: layer.name().to_string(),
                summary,
                report,
                without: None,
            });
        }
        if let (Some([lo, hi]), Some(s)) = (layer.defer, score)
            && (lo..=hi).contains(&s)
            && !layer.score_only
        {
            let at = scan.layers.len();
            let offset = scan.findings.len();
            scan.deferred
                .push(Deferred::hold(at, &mut result, &mut f, offset, s));
        }
        scan.layers.push(result);
        scan.spans.push(spans);
        scan.findings.extend(f);
    }

    /// Records a layer that failed or timed out: its fail mode decides its verdict.
    fn record_failure(
        &self,
        i: usize,
        layer: &Layer,
        e: DetectorError,
        elapsed: Duration,
        scan: &mut Scan<'_>,
    ) {
        let status = match e {
            DetectorError::Timeout => LayerStatus::Timeout {
                budget_ms: self.config.policy.layer_timeout_ms,
            },
            DetectorError::Failed(message) => LayerStatus::Error { message },
        };
        let (risk, action) = match self.fail_mode_of(i) {
            FailMode::Closed => (RiskClass::HighRisk, Action::Block),
            FailMode::Open => (RiskClass::LowRisk, Action::Allow),
        };
        scan.layers.push(LayerResult {
            layer: layer.name().to_string(),
            status,
            risk,
            action,
            score: None,
            localized: None,
            categories: BTreeMap::new(),
            findings: 0,
            undecided: false,
            score_only: false,
            elapsed_us: micros(elapsed),
        });
        scan.spans.push(Vec::new());
    }

    /// Settles the deferred bands once every layer has run, and records on the resolving
    /// layer's report what the decision would have been without it. The reasons to add.
    fn settle_deferrals(&self, scan: &mut Scan<'_>) -> Vec<String> {
        let without = scan.resolution.as_ref().map(|res| {
            self.action_without(&res.layer, &scan.layers, &scan.findings, &scan.deferred)
        });
        if let Some(res) = scan.resolution.as_mut() {
            res.without = without;
        }
        let deferred = std::mem::take(&mut scan.deferred);
        let verdict = scan.resolution.as_ref().map(|r| r.summary.as_str());
        resolve_deferrals(deferred, &mut scan.layers, &mut scan.findings, verdict)
    }

    /// The ratchet: the final verdict is the maximum over the combined score and every
    /// layer's own verdict, so no layer can lower what an earlier one decided; and a reason
    /// for each layer that failed, timed out or was skipped.
    fn verdict(&self, scan: &mut Scan<'_>) -> Verdict {
        let policy = &self.config.policy;
        sort_findings(&mut scan.findings);
        let categories = category_scores(&scan.findings);
        let combined_risk = classify(&categories, &policy.scoring);
        let mut risk = combined_risk;
        let mut action = policy.action_for(combined_risk);
        for l in &scan.layers {
            risk = risk.max(l.risk);
            action = action.max(l.action);
        }
        scan.record_effect(action);
        let (reasons, degraded) = self.layer_reasons(&scan.layers);
        Verdict {
            categories,
            combined_risk,
            risk,
            action,
            reasons,
            degraded,
        }
    }

    /// A reason for each layer that did not finish normally; whether any failed.
    fn layer_reasons(&self, layers: &[LayerResult]) -> (Vec<String>, bool) {
        let mut reasons = Vec::new();
        let mut degraded = false;
        for (i, l) in layers.iter().enumerate() {
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
        (reasons, degraded)
    }

    /// The data-channel policy (a BLOCK whose only evidence is in data may become SANITIZE)
    /// and sanitization (nothing to neutralize escalates to BLOCK). The sanitized segments.
    fn adjust(
        &self,
        req: &ScanRequest,
        scan: &Scan<'_>,
        v: &mut Verdict,
    ) -> Option<Vec<SanitizedSegment>> {
        let policy = &self.config.policy;
        if v.action == Action::Block
            && policy.data_injection == DataInjection::Sanitize
            && blocked_only_by_data(policy, &scan.layers, &scan.findings, &scan.input.segments)
        {
            v.action = Action::Sanitize;
            v.reasons.push(DATA_INJECTION_REASON.into());
        }
        if v.action != Action::Sanitize {
            return None;
        }
        let s = sanitize(
            req,
            &scan.input.segments,
            &scan.findings,
            &policy.sanitize_marker,
        );
        if s.iter().map(|s| s.removed).sum::<usize>() == 0 {
            // Nothing could be neutralized: do not pass the input on as if it were clean.
            v.action = Action::Block;
            v.reasons
                .push("SANITIZE found no span to neutralize; escalated to BLOCK".into());
            return None;
        }
        Some(s)
    }

    /// The loggable decision: the reasons explained, the layers' reports stored by key.
    fn decision(
        &self,
        req: &ScanRequest,
        scan: Scan<'_>,
        v: Verdict,
        started: Instant,
    ) -> Decision {
        let Verdict {
            categories,
            combined_risk,
            risk,
            action,
            mut reasons,
            degraded,
        } = v;
        let uncounted_why = |f: &Finding| {
            if scan
                .input
                .segments
                .get(f.segment)
                .is_some_and(|s| s.trust == Trust::Trusted)
            {
                Uncounted::Trusted
            } else if self
                .layers
                .iter()
                .any(|l| l.score_only && l.name() == f.layer)
            {
                Uncounted::ScoreOnly
            } else {
                Uncounted::Informational
            }
        };
        reasons.splice(
            0..0,
            explain(&categories, combined_risk, &scan.findings, uncounted_why)
                .into_iter()
                .map(|r| decided_by_layers(r, &categories, action, &scan.layers)),
        );
        let mut reports = Reports::default();
        for r in &scan.reports {
            if let Err(e) = reports.insert_layer(r) {
                reasons.push(format!("{e}: not recorded"));
            }
        }
        Decision {
            id: req.id.clone(),
            action,
            risk,
            categories,
            layers: scan.layers,
            findings: scan.findings,
            transforms: scan.transforms,
            reasons,
            degraded,
            input_hash: self.input_hash(req),
            hash_key_id: self.hash_key_id().to_string(),
            input_bytes: req.total_bytes(),
            segments: req.segments.len(),
            policy_version: self.config.policy.version.clone(),
            elapsed_us: micros(started.elapsed()),
            reports,
        }
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
            score_only: false,
            elapsed_us: micros(elapsed),
        }
    }

    /// The verdict without the layer named `judge` (the one that resolved the deferred
    /// bands): its findings and its own verdict left out, deferred layers with their own verdicts and findings (the ratchet over the
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
}

impl Scan<'_> {
    fn push_skipped(&mut self, layer: &str, reason: String) {
        self.layers.push(LayerResult {
            layer: layer.to_string(),
            status: LayerStatus::Skipped { reason },
            risk: RiskClass::LowRisk,
            action: Action::Allow,
            score: None,
            localized: None,
            categories: BTreeMap::new(),
            findings: 0,
            undecided: false,
            score_only: false,
            elapsed_us: 0,
        });
        self.spans.push(Vec::new());
    }

    /// Tells the resolving layer's report what the decision is with it (`with`) and was
    /// without it ([`Pipeline::settle_deferrals`]).
    fn record_effect(&mut self, with: Action) {
        let Some(res) = &self.resolution else { return };
        let (Some(without), Some(i)) = (res.without, res.report) else {
            return;
        };
        if let Some(r) = self.reports.get_mut(i) {
            r.record_effect(without, with);
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn explain(
    categories: &BTreeMap<Category, u8>,
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

/// A decision above ALLOW without any scored category was decided by layers, not by the
/// category scores (a conversation rule, a layer's fail mode, a classifier's own threshold):
/// the first reason names them instead of saying that nothing was found.
fn decided_by_layers(
    reason: String,
    categories: &BTreeMap<Category, u8>,
    action: Action,
    layers: &[LayerResult],
) -> String {
    if !categories.is_empty() || action == Action::Allow {
        return reason;
    }
    let deciding: Vec<&str> = layers
        .iter()
        .filter(|l| l.action == action)
        .map(|l| l.layer.as_str())
        .collect();
    if deciding.is_empty() {
        return reason;
    }
    let detail = if reason == NO_SIGNAL {
        "no rule category scored".to_string()
    } else {
        reason
    };
    format!("{action} from layer {}; {detail}", deciding.join(", "))
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

/// The reason of a decision without any finding.
const NO_SIGNAL: &str = "no signal found";

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
        return NO_SIGNAL.to_string();
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

/// Settles the undecided layers once every layer has run: with a verdict of the resolving
/// layer (`verdict`, its line for the reasons) they stay undecided (that verdict stands in
/// for theirs, and can clear them); without one, each gets its own verdict and findings back,
/// so a judge that failed, was skipped or was not asked never turns an undecided band into
/// ALLOW.
fn resolve_deferrals(
    deferred: Vec<Deferred>,
    layers: &mut [LayerResult],
    findings: &mut [Finding],
    verdict: Option<&str>,
) -> Vec<String> {
    deferred
        .into_iter()
        .filter_map(|d| {
            let layer = layers.get_mut(d.layer)?;
            match verdict {
                Some(v) => Some(format!(
                    "layer {} deferred its band (score {:.3}); {v}",
                    layer.layer, d.score
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
