//! The judge as the combiner's input: a score-mode judge layer (`score_only`) asked through
//! the scripted fake model server, read by the combine layer as `judge.asked` and
//! `judge.logodds`; not asked, failed and structured verdicts read as not asked; a model
//! names the judge it was fitted with.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use rampart_combine::model::{Fitted, MODEL_FORMAT, MODEL_VERSION};
use rampart_combine::{
    CombineReport, CombinerModel, EMBEDDED_MODEL, Extractor, FEATURES_VERSION, Learner,
    OperatingPoint, OperatingPoints,
};
use rampart_core::{Action, Decision, LayerStatus, Pipeline, PipelineConfig, Registry};
use rampart_llm::fake::{FakeResponse, FakeServer};

/// The combine tests' registry with the judge layer added.
fn registry() -> Registry {
    let mut r = super::registry();
    r.register(Box::new(rampart_judge::JudgeFactory::default()));
    r
}

/// rules → linear (scoring only) → judge (score mode, scoring only, asked when the linear
/// score is in `band`) → combine with `combine_extra`.
fn config(url: &str, band: [f32; 2], combine_extra: &str) -> String {
    format!(
        r#"version = 1
[[layers]]
kind = "rules"
default_pack = true
[[layers]]
kind = "linear"
score_only = true
[[layers]]
kind = "judge"
score_only = true
mode = "score"
explain = "never"
llm = {{ protocol = "openai", base_url = "{url}", model = "fake", timeout_ms = 1500, max_retries = 0 }}
[layers.triggers]
ambiguous = [{{ layer = "linear", band = [{lo}, {hi}] }}]
needs_judgement = false
[[layers]]
kind = "combine"
inputs = ["linear"]
judge = "judge"
{combine_extra}
"#,
        lo = band[0],
        hi = band[1],
    )
}

fn pipeline(src: &str) -> Pipeline {
    let cfg = PipelineConfig::parse(src, "test.toml").unwrap();
    Pipeline::from_config_with(cfg, &registry()).unwrap()
}

fn recording(url: &str, band: [f32; 2]) -> Pipeline {
    pipeline(&config(url, band, "mode = \"record\""))
}

/// The judge's two features of the first segment, by name.
fn judge_features(d: &Decision) -> (f32, f32) {
    let r = d.reports.get::<CombineReport>().unwrap().unwrap();
    let ex = Extractor::with_judge(vec!["linear".into()], Some("judge".into()));
    let v = r.segments[0].features.clone().unwrap();
    assert_eq!(v.len(), ex.names().len());
    let at = |n: &str| v[ex.names().iter().position(|x| x == n).unwrap()];
    (at("judge.asked"), at("judge.logodds"))
}

const TEXT: &str = "Could you summarize the attached meeting notes for me?";

#[test]
fn an_asked_judge_gives_its_log_odds_and_decides_nothing_itself() {
    // P(yes) 0.9, P(no) 0.1: P(attack) 0.9 with the default calibration, malicious.
    let server = FakeServer::start(vec![FakeResponse::openai_logprobs(&[
        ("yes", 0.9f64.ln()),
        ("no", 0.1f64.ln()),
    ])])
    .unwrap();
    let d = recording(&server.base_url(), [0.0, 1.0])
        .scan_text(TEXT)
        .unwrap()
        .decision;
    assert_eq!(server.request_count(), 1);
    let (asked, logodds) = judge_features(&d);
    assert_eq!(asked, 1.0);
    let want = (0.9f32 / 0.1).ln() / 4.0;
    assert!((logodds - want).abs() < 1e-3, "{logodds} against {want}");
    // Scoring only: its malicious verdict is no floor, and the combine layer only records.
    let judge = d.layers.iter().find(|l| l.layer == "judge").unwrap();
    assert!(judge.score.is_some_and(|s| (s - 0.9).abs() < 1e-3));
    assert_eq!(judge.action, Action::Allow);
    assert_eq!(d.action, Action::Allow, "{:?}", d.reasons);
}

#[test]
fn a_judge_not_asked_reads_zero_and_not_as_a_benign_score() {
    let server = FakeServer::start(vec![]).unwrap();
    // The band holds no score of an ordinary request: no trigger fires.
    let d = recording(&server.base_url(), [0.999, 1.0])
        .scan_text(TEXT)
        .unwrap()
        .decision;
    assert_eq!(server.request_count(), 0);
    assert_eq!(judge_features(&d), (0.0, 0.0));
}

#[test]
fn a_failed_judge_reads_as_not_asked_and_its_fail_mode_decides() {
    let server =
        FakeServer::start(vec![FakeResponse::raw(500, "text/plain", "upstream down")]).unwrap();
    let d = recording(&server.base_url(), [0.0, 1.0])
        .scan_text(TEXT)
        .unwrap()
        .decision;
    assert_eq!(server.request_count(), 1);
    let judge = d.layers.iter().find(|l| l.layer == "judge").unwrap();
    assert!(
        matches!(judge.status, LayerStatus::Error { .. }),
        "{:?}",
        judge.status
    );
    assert_eq!(judge_features(&d), (0.0, 0.0));
    // The closed fail mode (the default) blocks, marked degraded.
    assert_eq!(d.action, Action::Block);
    assert!(d.degraded);
}

#[test]
fn a_structured_verdict_without_a_probability_reads_as_not_asked() {
    let server = FakeServer::start(vec![
        // No log-probabilities: the layer falls back to the structured mode.
        FakeResponse::openai(Some("no"), "length", Some((10, 1))),
        FakeResponse::openai_text(
            r#"{"intent_label": "benign", "confidence": 0.9, "explanation": "ok", "evidence": []}"#,
        ),
    ])
    .unwrap();
    let d = recording(&server.base_url(), [0.0, 1.0])
        .scan_text(TEXT)
        .unwrap()
        .decision;
    assert_eq!(server.request_count(), 2);
    assert_eq!(judge_features(&d), (0.0, 0.0));
}

/// A logistic model that reads only `judge.logodds` (weight 4: the judge's own log-odds) and
/// `judge.asked` (−2 when asked), flagging at 0.5 and blocking at 0.8.
fn judge_model() -> CombinerModel {
    let ex = Extractor::with_judge(vec!["linear".into()], Some("judge".into()));
    let n = ex.names().len();
    let mut weights = vec![0.0; n];
    weights[n - 2] = -2.0;
    weights[n - 1] = 4.0;
    CombinerModel {
        format: MODEL_FORMAT.into(),
        version: MODEL_VERSION,
        features_version: FEATURES_VERSION,
        inputs: vec!["linear".into()],
        judge: Some("judge".into()),
        features: ex.names().to_vec(),
        learner: Learner::Logistic {
            weights,
            means: vec![0.0; n],
            bias: 0.0,
        },
        operating_points: OperatingPoints::new(OperatingPoint {
            flag: 0.5,
            block: 0.8,
        }),
        fitted: Fitted {
            command: "test".into(),
            datasets: Vec::new(),
            learner: "logistic".into(),
            iterations: 0,
            targets: Vec::new(),
        },
    }
}

#[test]
fn a_model_fitted_with_the_judge_decides_from_its_score() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.json");
    std::fs::write(&path, serde_json::to_string(&judge_model()).unwrap()).unwrap();
    let extra = format!("model = {:?}", path.display().to_string());
    // logit ln 99 - 2 ≈ 2.6: p ≈ 0.93, over the block point.
    let server = FakeServer::start_repeating(FakeResponse::openai_logprobs(&[
        ("yes", 0.99f64.ln()),
        ("no", 0.01f64.ln()),
    ]))
    .unwrap();
    let p = pipeline(&config(&server.base_url(), [0.0, 1.0], &extra));
    let d = p.scan_text(TEXT).unwrap().decision;
    assert_eq!(d.action, Action::Block, "{:?}", d.reasons);
    let r = d.reports.get::<CombineReport>().unwrap().unwrap();
    assert!(
        r.segments[0]
            .top
            .iter()
            .any(|c| c.feature == "judge.logodds")
    );
    // Not asked: the model's log-odds are 0, p = 0.5, flagged only (the features say
    // "not asked", which this toy model reads as an even chance).
    let quiet = FakeServer::start(vec![]).unwrap();
    let p = pipeline(&config(&quiet.base_url(), [0.999, 1.0], &extra));
    let d = p.scan_text(TEXT).unwrap().decision;
    assert_eq!(d.action, Action::Sanitize, "{:?}", d.reasons);
    assert_eq!(quiet.request_count(), 0);
}

#[test]
fn models_and_configurations_must_agree_on_the_judge() {
    let server = FakeServer::start(vec![]).unwrap();
    // The embedded combiner-v1 was fitted without the judge: refused for a config with one.
    let cfg = PipelineConfig::parse(&config(&server.base_url(), [0.0, 1.0], ""), "t.toml").unwrap();
    let err = Pipeline::from_config_with(cfg, &registry()).unwrap_err();
    assert!(err.to_string().contains("judge.asked"), "{err}");
    // And a judge model is refused without the judge input.
    let ex = Extractor::new(vec!["linear".into()]);
    let src = serde_json::to_string(&judge_model()).unwrap();
    assert!(CombinerModel::parse(&src, ex.names()).is_err());
    // combiner-v1 still loads for the list without the judge, with no `judge` member.
    let m = CombinerModel::parse(EMBEDDED_MODEL, ex.names()).unwrap();
    assert_eq!(m.judge, None);
    assert!(!serde_json::to_string(&m).unwrap().contains("\"judge\""));
    // The judge must run before the combine layer, and must not be one of its inputs.
    let late = format!(
        r#"version = 1
[[layers]]
kind = "linear"
score_only = true
[[layers]]
kind = "combine"
inputs = ["linear"]
judge = "judge"
mode = "record"
[[layers]]
kind = "judge"
score_only = true
mode = "score"
llm = {{ protocol = "openai", base_url = "{}", model = "fake" }}
"#,
        server.base_url()
    );
    let cfg = PipelineConfig::parse(&late, "late.toml").unwrap();
    assert!(Pipeline::from_config_with(cfg, &registry()).is_err());
    let twice = "version = 1\n[[layers]]\nkind = \"linear\"\n[[layers]]\nkind = \"combine\"\n\
                 inputs = [\"linear\"]\njudge = \"linear\"\nmode = \"record\"\n";
    let cfg = PipelineConfig::parse(twice, "twice.toml").unwrap();
    let err = Pipeline::from_config_with(cfg, &registry()).unwrap_err();
    assert!(err.to_string().contains("not one of the inputs"), "{err}");
}
