//! `score_only` layers and the `fuse` layer: scores of earlier layers combined into one
//! decision, never silently.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use rampart_core::{
    Action, BuildError, Category, Detection, Detector, DetectorError, DetectorFactory, FUSE_ID,
    Finding, FuseDetector, FuseOptions, LayerStatus, Pipeline, PipelineConfig, RiskClass,
    ScanInput, Span, Strength, ViewKind,
};
use std::sync::Arc;

/// Reads its score from `[NAME:0.x]` in the first segment; at 0.5 or more it reports a strong,
/// high-risk finding and asserts high risk, like the built-in classifiers do.
#[derive(Debug)]
struct Tagged(&'static str);

impl Detector for Tagged {
    fn name(&self) -> &str {
        self.0
    }
    fn detect(&self, input: &ScanInput<'_>) -> Result<Detection, DetectorError> {
        let seg = &input.segments[0];
        let tag = format!("[{}:", self.0);
        let score = seg.text.find(&tag).and_then(|i| {
            seg.text[i + tag.len()..]
                .split(']')
                .next()?
                .parse::<f32>()
                .ok()
        });
        let mut det = Detection {
            findings: vec![],
            score,
            risk: None,
            spans: vec![],
            ..Detection::default()
        };
        if score.is_some_and(|s| s >= 0.5) {
            det.risk = Some(RiskClass::HighRisk);
            det.findings.push(Finding {
                layer: self.0.into(),
                rule_id: format!("{}_HIT", self.0.to_uppercase()),
                category: Category::Other,
                strength: Strength::Strong,
                points: 3,
                severity: RiskClass::HighRisk,
                segment: seg.index,
                role: seg.role,
                counted: true,
                span: Span { start: 0, end: 3 },
                view: ViewKind::Raw,
                via: vec![],
                rationale: "test".into(),
            });
        }
        Ok(det)
    }
}

struct F(&'static str);

impl DetectorFactory for F {
    fn kind(&self) -> &str {
        self.0
    }
    fn build(&self, _options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        Ok(Arc::new(Tagged(self.0)))
    }
}

fn build(layers: &str) -> Result<Pipeline, BuildError> {
    let mut reg = rampart_rules::registry();
    reg.register(Box::new(F("a")));
    reg.register(Box::new(F("b")));
    let config = PipelineConfig::parse(&format!("version = 1\n{layers}"), "test.toml").unwrap();
    Pipeline::from_config_with(config, &reg)
}

const FUSED: &str = r#"
[[layers]]
kind = "a"
score_only = true
[[layers]]
kind = "b"
score_only = true
run_if = { score_of = "a", between = [0.1, 1.0] }
[[layers]]
kind = "fuse"
inputs = { a = 0.5, b = 0.5 }
threshold = 0.55
ambiguous = [0.3, 0.55]
"#;

fn layer<'a>(out: &'a rampart_core::ScanOutcome, name: &str) -> &'a rampart_core::LayerResult {
    out.decision
        .layers
        .iter()
        .find(|l| l.layer == name)
        .unwrap()
}

#[test]
fn a_score_only_layer_reports_its_finding_but_does_not_decide() {
    let p = build(FUSED).unwrap();
    // a is sure (0.9) but only scores; b is sure it is benign: the fused score is 0.5.
    let out = p.scan_text("text [a:0.9] [b:0.1]").unwrap();
    let a = layer(&out, "a");
    assert_eq!(a.action, Action::Allow);
    assert_eq!(a.score, Some(0.9));
    let f = out
        .decision
        .findings
        .iter()
        .find(|f| f.rule_id == "A_HIT")
        .unwrap();
    assert!(
        !f.counted,
        "a score-only layer's findings are reported, not counted"
    );
    let fused = layer(&out, "fuse");
    assert!(
        (fused.score.unwrap() - 0.5).abs() < 1e-5,
        "{:?}",
        fused.score
    );
    assert_eq!(out.decision.action, Action::Allow);
}

#[test]
fn two_unsure_layers_that_agree_block_together() {
    let p = build(FUSED).unwrap();
    let out = p.scan_text("text [a:0.45] [b:0.7]").unwrap();
    assert_eq!(layer(&out, "a").action, Action::Allow);
    assert_eq!(layer(&out, "b").action, Action::Allow);
    assert_eq!(out.decision.action, Action::Block);
    let f = out
        .decision
        .findings
        .iter()
        .find(|f| f.rule_id == FUSE_ID)
        .unwrap();
    assert!(f.counted && f.points == 3);
    assert!(f.rationale.contains("logit(a 0.450)"), "{}", f.rationale);
    assert!(
        f.rationale.contains(">= threshold 0.550"),
        "{}",
        f.rationale
    );
    // Anchored on the strongest input finding (b's, the only one).
    assert_eq!(f.span, Span { start: 0, end: 3 });
}

#[test]
fn a_score_in_the_band_is_marked_ambiguous_and_not_counted() {
    let p = build(FUSED).unwrap();
    let out = p.scan_text("text [a:0.3] [b:0.5]").unwrap();
    assert_eq!(out.decision.action, Action::Allow);
    let f = out
        .decision
        .findings
        .iter()
        .find(|f| f.rule_id == rampart_core::FUSE_AMBIGUOUS_ID)
        .unwrap();
    assert!(!f.counted && f.points == 0);
}

#[test]
fn a_skipped_input_means_no_fused_score_and_the_skip_is_reported() {
    let p = build(FUSED).unwrap();
    let out = p.scan_text("text [a:0.05] [b:0.99]").unwrap();
    assert!(matches!(
        layer(&out, "b").status,
        LayerStatus::Skipped { .. }
    ));
    let fused = layer(&out, "fuse");
    assert_eq!(fused.status, LayerStatus::Ok);
    assert_eq!(fused.score, None);
    assert_eq!(out.decision.action, Action::Allow);
    assert!(out.decision.reasons.iter().any(|r| r.contains("b skipped")));
}

#[test]
fn without_score_only_each_layer_still_decides_alone() {
    let p = build(
        "[[layers]]\nkind = \"a\"\n[[layers]]\nkind = \"b\"\n[[layers]]\nkind = \"fuse\"\ninputs = { a = 0.5, b = 0.5 }\nthreshold = 0.99\n",
    )
    .unwrap();
    let out = p.scan_text("text [a:0.9] [b:0.1]").unwrap();
    assert_eq!(layer(&out, "a").action, Action::Block);
    assert_eq!(layer(&out, "fuse").action, Action::Allow);
    assert_eq!(
        out.decision.action,
        Action::Block,
        "the ratchet keeps a's verdict"
    );
}

#[test]
fn bad_fuse_layers_are_build_errors() {
    for (layers, want) in [
        (
            "[[layers]]\nkind = \"fuse\"\ninputs = { a = 0.5 }\nthreshold = 0.5\n[[layers]]\nkind = \"a\"\n",
            "not an earlier layer",
        ),
        (
            "[[layers]]\nkind = \"a\"\n[[layers]]\nkind = \"fuse\"\ninputs = { nope = 1.0 }\nthreshold = 0.5\n",
            "not an earlier layer",
        ),
        (
            "[[layers]]\nkind = \"a\"\n[[layers]]\nkind = \"fuse\"\ninputs = {}\nthreshold = 0.5\n",
            "at least one",
        ),
        (
            "[[layers]]\nkind = \"a\"\n[[layers]]\nkind = \"fuse\"\ninputs = { a = 1.0 }\nthreshold = 1.5\n",
            "threshold",
        ),
        (
            "[[layers]]\nkind = \"a\"\n[[layers]]\nkind = \"fuse\"\ninputs = { a = 1.0 }\nthreshold = 0.5\nambiguous = [0.6, 0.2]\n",
            "ambiguous",
        ),
        (
            "[[layers]]\nkind = \"a\"\n[[layers]]\nkind = \"fuse\"\ninputs = { a = 1.0 }\nthreshold = 0.5\nweights = 3\n",
            "unknown field",
        ),
        (
            "[[layers]]\nkind = \"a\"\n[[layers]]\nkind = \"fuse\"\ninputs = { a = 1.0 }\n",
            "threshold",
        ),
    ] {
        let err = build(layers).unwrap_err().to_string();
        assert!(err.contains(want), "{want:?} not in {err:?}");
    }
}

/// Each invalid option is its own error variant, naming the value, with the message the
/// layer's build error shows.
#[test]
fn invalid_fuse_options_name_the_option_and_its_value() {
    use rampart_core::{FuseOptionsError, Role, RoleThresholds, RoleThresholdsError};
    let ok = || FuseOptions {
        name: "fuse".into(),
        inputs: [("a".to_string(), 1.0)].into(),
        bias: 0.0,
        threshold: 0.5,
        ambiguous: None,
        thresholds: RoleThresholds::default(),
    };
    let err = |o: FuseOptions| FuseDetector::new(o).unwrap_err();
    let cases = [
        (
            FuseOptions {
                name: " ".into(),
                ..ok()
            },
            FuseOptionsError::EmptyName,
            "name must not be empty",
        ),
        (
            FuseOptions {
                inputs: Default::default(),
                ..ok()
            },
            FuseOptionsError::NoInputs,
            "inputs must name at least one earlier layer",
        ),
        (
            FuseOptions {
                inputs: [("a".to_string(), f32::INFINITY)].into(),
                ..ok()
            },
            FuseOptionsError::Weight {
                input: "a".into(),
                weight: f32::INFINITY,
            },
            "input \"a\" has a weight that is not finite: inf",
        ),
        (
            FuseOptions {
                bias: f32::NEG_INFINITY,
                ..ok()
            },
            FuseOptionsError::Bias {
                bias: f32::NEG_INFINITY,
            },
            "bias must be finite, got -inf",
        ),
        (
            FuseOptions {
                threshold: 1.5,
                ..ok()
            },
            FuseOptionsError::Threshold { threshold: 1.5 },
            "threshold must be in (0, 1], got 1.5",
        ),
        (
            FuseOptions {
                thresholds: RoleThresholds([(Role::Tool, 0.0)].into()),
                ..ok()
            },
            FuseOptionsError::Thresholds(RoleThresholdsError::OutOfRange {
                role: Role::Tool,
                value: 0.0,
            }),
            "thresholds.tool must be in (0, 1], got 0",
        ),
        (
            FuseOptions {
                ambiguous: Some([0.6, 0.2]),
                ..ok()
            },
            FuseOptionsError::Ambiguous {
                low: 0.6,
                high: 0.2,
            },
            "ambiguous must be [low, high] with 0 <= low < high <= 1, got [0.6, 0.2]",
        ),
    ];
    for (opts, want, message) in cases {
        let e = err(opts);
        assert_eq!(e, want);
        assert_eq!(e.to_string(), message);
    }
    assert!(FuseDetector::new(ok()).is_ok());
}

/// A fuse layer over `inputs` (name, weight), threshold 0.5, no bias or band.
fn detector(inputs: &[(&str, f32)]) -> FuseDetector {
    FuseDetector::new(FuseOptions {
        name: "fuse".into(),
        inputs: inputs.iter().map(|&(n, w)| (n.to_string(), w)).collect(),
        bias: 0.0,
        threshold: 0.5,
        ambiguous: None,
        thresholds: Default::default(),
    })
    .unwrap()
}

#[test]
fn fused_probability_is_the_sigmoid_of_weighted_log_odds() {
    let det = detector(&[("a", 0.5), ("b", 0.5)]);
    let scores = |a: f32, b: f32| move |n: &str| Some(if n == "a" { a } else { b });
    // Odds 9 and 1/9: geometric mean 1.
    assert!((det.fuse(scores(0.9, 0.1)).unwrap() - 0.5).abs() < 1e-6);
    // Equal scores fuse to themselves.
    assert!((det.fuse(scores(0.7, 0.7)).unwrap() - 0.7).abs() < 1e-5);
    // Saturated scores stay finite.
    let p = det.fuse(scores(1.0, 1.0)).unwrap();
    assert!(p.is_finite() && p > 0.999);
    assert_eq!(det.fuse(|n: &str| (n == "a").then_some(0.5)), None);
}

#[test]
fn the_fuse_layer_alone_fails_instead_of_allowing() {
    let det = detector(&[("a", 1.0)]);
    let input = ScanInput {
        segments: vec![],
        deadline: std::time::Instant::now(),
        localize: Default::default(),
        conversation: None,
    };
    assert!(det.detect(&input).is_err());
}

#[test]
fn a_score_that_is_not_a_number_fails_closed_instead_of_allowing() {
    let p = build(FUSED).unwrap();
    let out = p.scan_text("text [a:0.5] [b:NaN]").unwrap();
    assert!(matches!(
        layer(&out, "fuse").status,
        LayerStatus::Error { .. }
    ));
    assert_eq!(out.decision.action, Action::Block);
    assert!(out.decision.degraded);
}
