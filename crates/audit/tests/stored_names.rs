//! The audit record's fixed-set fields are enums, stored and exported under the strings the
//! log held when they were strings: every value's name, the SQLite columns, the JSON of the
//! judge's and relational layer's parts, and one JSONL line, byte for byte.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use rampart_audit::{
    AuditConfig, AuditFilter, AuditFinding, AuditJudge, AuditLog, AuditReader, AuditRecord,
    AuditRelational, ExportFormat, StoredRecord,
};
use rampart_core::{Action, RiskClass, Strength};
use rampart_judge::{CacheStatus, IntentLabel, JudgeTriggerKind};
use rampart_llm::OutcomeKind;
use rampart_relational::{
    Backend, ExchangeType, RelationalLabel, RelationalStatusKind, ViolationKind,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fmt::Debug;

const T0: i64 = 1_795_496_400_000; // 2026-11-24T05:00:00Z

// The strings each value was logged as before the fields were enums (spelled out here, not
// taken from the enums, so that a renamed variant fails).
const ACTIONS: [(Action, &str); 3] = [
    (Action::Allow, "ALLOW"),
    (Action::Sanitize, "SANITIZE"),
    (Action::Block, "BLOCK"),
];
const RISKS: [(RiskClass, &str); 3] = [
    (RiskClass::LowRisk, "low_risk"),
    (RiskClass::MediumRisk, "medium_risk"),
    (RiskClass::HighRisk, "high_risk"),
];
const STRENGTHS: [(Strength, &str); 2] = [(Strength::Weak, "weak"), (Strength::Strong, "strong")];
const OUTCOMES: [(OutcomeKind, &str); 8] = [
    (OutcomeKind::Ok, "ok"),
    (OutcomeKind::Refused, "refused"),
    (OutcomeKind::Unparseable, "unparseable"),
    (OutcomeKind::Empty, "empty"),
    (OutcomeKind::Truncated, "truncated"),
    (OutcomeKind::Timeout, "timeout"),
    (OutcomeKind::HttpError, "http_error"),
    (OutcomeKind::BudgetExhausted, "budget_exhausted"),
];
const INTENT_LABELS: [(IntentLabel, &str); 3] = [
    (IntentLabel::Benign, "benign"),
    (IntentLabel::Suspicious, "suspicious"),
    (IntentLabel::Malicious, "malicious"),
];
const CACHE: [(CacheStatus, &str); 4] = [
    (CacheStatus::Off, "off"),
    (CacheStatus::Hit, "hit"),
    (CacheStatus::Miss, "miss"),
    (CacheStatus::ReplayMiss, "replay_miss"),
];
const TRIGGERS: [(JudgeTriggerKind, &str); 6] = [
    (JudgeTriggerKind::AmbiguousScore, "ambiguous_score"),
    (JudgeTriggerKind::Deferred, "deferred"),
    (JudgeTriggerKind::LayerConflict, "layer_conflict"),
    (JudgeTriggerKind::NeedsJudgement, "needs_judgement"),
    (JudgeTriggerKind::Conversation, "conversation"),
    (JudgeTriggerKind::Direct, "direct"),
];
const BACKENDS: [(Backend, &str); 3] = [
    (Backend::Local, "local"),
    (Backend::Llm, "llm"),
    (Backend::Circle, "circle"),
];
const STATUSES: [(RelationalStatusKind, &str); 3] = [
    (RelationalStatusKind::Ok, "ok"),
    (RelationalStatusKind::Failed, "failed"),
    (RelationalStatusKind::Skipped, "skipped"),
];
const RELATIONAL_LABELS: [(RelationalLabel, &str); 4] = [
    (RelationalLabel::Reciprocal, "reciprocal"),
    (RelationalLabel::Borderline, "borderline"),
    (RelationalLabel::Manipulative, "manipulative"),
    (RelationalLabel::Extractive, "extractive"),
];
const EXCHANGES: [(ExchangeType, &str); 4] = [
    (ExchangeType::Extractive, "extractive"),
    (ExchangeType::Reciprocal, "reciprocal"),
    (ExchangeType::Generative, "generative"),
    (ExchangeType::Neutral, "neutral"),
];
const VIOLATIONS: [(ViolationKind, &str); 4] = [
    (ViolationKind::RoleConfusion, "role_confusion"),
    (ViolationKind::InstructionOverride, "instruction_override"),
    (ViolationKind::SystemExtraction, "system_extraction"),
    (ViolationKind::ContextSaturation, "context_saturation"),
];

/// Each value serializes to its old string and reads back from it; `name` agrees; the
/// table covers `all`.
fn check<T>(table: &[(T, &str)], all: &[T], name: fn(T) -> &'static str)
where
    T: Copy + PartialEq + Debug + Serialize + DeserializeOwned,
{
    assert_eq!(table.len(), all.len(), "{all:?}");
    for v in all {
        assert!(table.iter().any(|(t, _)| t == v), "{v:?} has no old string");
    }
    for &(v, s) in table {
        assert_eq!(
            serde_json::to_value(v).unwrap(),
            serde_json::json!(s),
            "{v:?}"
        );
        assert_eq!(
            serde_json::from_value::<T>(serde_json::json!(s)).unwrap(),
            v
        );
        assert_eq!(name(v), s, "{v:?}");
    }
}

#[test]
fn every_value_keeps_its_old_string() {
    check(&ACTIONS, &Action::ALL, Action::name);
    check(&RISKS, &RiskClass::ALL, RiskClass::name);
    check(&STRENGTHS, &Strength::ALL, Strength::name);
    check(&OUTCOMES, &OutcomeKind::ALL, OutcomeKind::name);
    check(&INTENT_LABELS, &IntentLabel::ALL, IntentLabel::name);
    check(&CACHE, &CacheStatus::ALL, CacheStatus::name);
    check(&TRIGGERS, &JudgeTriggerKind::ALL, JudgeTriggerKind::name);
    check(&BACKENDS, &Backend::ALL, Backend::name);
    check(
        &STATUSES,
        &RelationalStatusKind::ALL,
        RelationalStatusKind::name,
    );
    check(
        &RELATIONAL_LABELS,
        &RelationalLabel::ALL,
        RelationalLabel::name,
    );
    check(&EXCHANGES, &ExchangeType::ALL, ExchangeType::name);
    check(&VIOLATIONS, &ViolationKind::ALL, ViolationKind::name);
}

/// `table[i % len]`.
fn pick<T: Copy>(table: &[(T, &'static str)], i: usize) -> (T, &'static str) {
    table[i % table.len()]
}

/// Record `i`: every fixed-set field takes value `i` (modulo) of its table, so that eight
/// records use every value of every enum.
fn record(i: usize) -> AuditRecord {
    let (outcome, _) = pick(&OUTCOMES, i);
    let (label, _) = pick(&INTENT_LABELS, i);
    let judge = AuditJudge {
        layer: "judge".into(),
        called: true,
        triggers: vec![pick(&TRIGGERS, i).0, pick(&TRIGGERS, i + 1).0],
        outcome: Some(outcome),
        intent_label: Some(label),
        confidence: Some(0.5),
        explanation: Some("why".into()),
        cache: pick(&CACHE, i).0,
        model: "m".into(),
        prompt_id: "p".into(),
        prompt_hash: "h".into(),
        input_tokens: 1,
        output_tokens: 2,
        cost_usd: None,
        latency_ms: 3,
        explain_outcome: None,
        explain_latency_ms: None,
    };
    let relational = AuditRelational {
        layer: "relational".into(),
        backend: pick(&BACKENDS, i).0,
        status: pick(&STATUSES, i).0,
        reason: None,
        label: Some(pick(&RELATIONAL_LABELS, i).0),
        balance: Some(-0.25),
        exchange: Some(pick(&EXCHANGES, i).0),
        violations: vec![pick(&VIOLATIONS, i).0],
        calls: 1,
        input_tokens: 2,
        output_tokens: 3,
        cost_usd: 0.5,
        elapsed_us: 4,
    };
    AuditRecord {
        time_ms: T0 + i as i64,
        request_id: format!("req-{i}"),
        key_id: None,
        endpoint: "scan".into(),
        input_hash: "ab".into(),
        hash_key_id: "hk".into(),
        action: pick(&ACTIONS, i).0,
        risk: pick(&RISKS, i).0,
        policy_version: "1".into(),
        findings: vec![AuditFinding {
            rule_id: "CTRL_001".into(),
            category: "control_phrase".into(),
            strength: pick(&STRENGTHS, i).0,
            layer: "rules".into(),
        }],
        layer_timings_us: BTreeMap::from([("rules".into(), 5)]),
        elapsed_us: 6,
        degraded: false,
        judge: Some(judge),
        relational: Some(relational),
    }
}

/// Written and read back, every record is equal to what was written, and the database holds
/// the old strings: in the action, risk, judge label and outcome columns, the findings'
/// strength column, and the judge's and relational layer's JSON.
#[test]
fn records_round_trip_and_the_database_holds_the_old_strings() {
    let n = OUTCOMES.len();
    let recs: Vec<AuditRecord> = (0..n).map(record).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::open(AuditConfig::at(&path)).unwrap();
    let w = log.writer();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for r in &recs {
        rt.block_on(w.append(r.clone())).unwrap();
    }
    log.shutdown().unwrap();

    let reader = AuditReader::open(&path).unwrap();
    let back: Vec<AuditRecord> = reader
        .query(&AuditFilter::default())
        .unwrap()
        .into_iter()
        .map(|s| s.record)
        .collect();
    assert_eq!(back, recs);

    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT d.action, d.risk, d.judge_intent_label, d.judge_outcome, d.judge_json, \
             d.relational_json, f.strength FROM decisions d JOIN findings f \
             ON f.decision_id = d.id ORDER BY d.id",
        )
        .unwrap();
    let rows: Vec<[String; 7]> = stmt
        .query_map([], |r| {
            Ok([
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ])
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), n);
    for (i, [action, risk, label, outcome, judge, relational, strength]) in
        rows.into_iter().enumerate()
    {
        assert_eq!(action, pick(&ACTIONS, i).1);
        assert_eq!(risk, pick(&RISKS, i).1);
        assert_eq!(label, pick(&INTENT_LABELS, i).1);
        assert_eq!(outcome, pick(&OUTCOMES, i).1);
        assert_eq!(strength, pick(&STRENGTHS, i).1);
        let j: serde_json::Value = serde_json::from_str(&judge).unwrap();
        assert_eq!(j["outcome"], pick(&OUTCOMES, i).1);
        assert_eq!(j["intent_label"], pick(&INTENT_LABELS, i).1);
        assert_eq!(j["cache"], pick(&CACHE, i).1);
        assert_eq!(
            j["triggers"],
            serde_json::json!([pick(&TRIGGERS, i).1, pick(&TRIGGERS, i + 1).1])
        );
        let r: serde_json::Value = serde_json::from_str(&relational).unwrap();
        assert_eq!(r["backend"], pick(&BACKENDS, i).1);
        assert_eq!(r["status"], pick(&STATUSES, i).1);
        assert_eq!(r["label"], pick(&RELATIONAL_LABELS, i).1);
        assert_eq!(r["exchange"], pick(&EXCHANGES, i).1);
        assert_eq!(r["violations"], serde_json::json!([pick(&VIOLATIONS, i).1]));
    }

    // The filters bind the old strings too.
    for (label, s) in INTENT_LABELS {
        let got = reader
            .count(&AuditFilter {
                intent_label: Some(label),
                ..AuditFilter::default()
            })
            .unwrap();
        let want = (0..n).filter(|&i| pick(&INTENT_LABELS, i).1 == s).count();
        assert_eq!(got, want as u64, "{s}");
    }
    for (i, (outcome, _)) in OUTCOMES.into_iter().enumerate() {
        let filter = AuditFilter {
            judge_outcome: Some(outcome),
            action: Some(pick(&ACTIONS, i).0),
            ..AuditFilter::default()
        };
        assert_eq!(ids(&reader, &filter), [format!("req-{i}")], "{outcome}");
    }
}

fn ids(reader: &AuditReader, f: &AuditFilter) -> Vec<String> {
    reader
        .query(f)
        .unwrap()
        .into_iter()
        .map(|s| s.record.request_id)
        .collect()
}

/// One record's JSONL export line, as the log wrote it when these fields were strings.
const GOLDEN_JSONL: &str = concat!(
    r#"{"id":1,"time_ms":1795496400000,"request_id":"req-1","key_id":"team-a","endpoint":"scan","#,
    r#""input_hash":"ab","hash_key_id":"hk","action":"SANITIZE","risk":"medium_risk","#,
    r#""policy_version":"1","findings":[{"rule_id":"CTRL_001","category":"control_phrase","#,
    r#""strength":"weak","layer":"rules"}],"layer_timings_us":{"rules":5},"elapsed_us":6,"#,
    r#""degraded":true,"judge":{"layer":"judge","called":true,"triggers":["ambiguous_score","#,
    r#""needs_judgement"],"outcome":"http_error","confidence":0.5,"cache":"replay_miss","#,
    r#""model":"m","input_tokens":1,"output_tokens":2,"latency_ms":3},"relational":{"#,
    r#""layer":"relational","backend":"circle","status":"failed","reason":"timeout","#,
    r#""exchange":"generative","violations":["context_saturation","instruction_override","#,
    r#""role_confusion"],"calls":1,"input_tokens":2,"output_tokens":3,"cost_usd":0.5,"#,
    r#""elapsed_us":4}}"#,
);

#[test]
fn the_jsonl_export_line_is_unchanged() {
    let mut rec = record(0);
    rec.time_ms = T0;
    rec.request_id = "req-1".into();
    rec.key_id = Some("team-a".into());
    rec.action = Action::Sanitize;
    rec.risk = RiskClass::MediumRisk;
    rec.findings[0].strength = Strength::Weak;
    rec.degraded = true;
    let j = rec.judge.as_mut().unwrap();
    j.triggers = vec![
        JudgeTriggerKind::AmbiguousScore,
        JudgeTriggerKind::NeedsJudgement,
    ];
    j.outcome = Some(OutcomeKind::HttpError);
    j.intent_label = None;
    j.explanation = None;
    j.cache = CacheStatus::ReplayMiss;
    j.prompt_id.clear();
    j.prompt_hash.clear();
    let r = rec.relational.as_mut().unwrap();
    r.backend = Backend::Circle;
    r.status = RelationalStatusKind::Failed;
    r.reason = Some("timeout".into());
    r.label = None;
    r.balance = None;
    r.exchange = Some(ExchangeType::Generative);
    r.violations = vec![
        ViolationKind::ContextSaturation,
        ViolationKind::InstructionOverride,
        ViolationKind::RoleConfusion,
    ];

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::open(AuditConfig::at(&path)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(log.writer().append(rec.clone())).unwrap();
    log.shutdown().unwrap();
    let mut out = Vec::new();
    AuditReader::open(&path)
        .unwrap()
        .export(&AuditFilter::default(), ExportFormat::Jsonl, &mut out)
        .unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), format!("{GOLDEN_JSONL}\n"));
    let parsed: StoredRecord = serde_json::from_str(GOLDEN_JSONL).unwrap();
    assert_eq!(parsed.record, rec);
}

/// `from_report` sorts the violation kinds by name, as when they were strings (not in the
/// enum's declaration order), and keeps each once.
#[test]
fn relational_violations_are_sorted_by_name() {
    use rampart_relational::{
        PromptLayer, RelationalCost, RelationalReport, RelationalStatus, TrustViolation,
    };
    let v = |kind| TrustViolation {
        kind,
        layer: PromptLayer::User,
        evidence: Vec::new(),
    };
    let report = RelationalReport {
        layer: "relational".into(),
        backend: Backend::Local,
        status: RelationalStatus::Skipped {
            reason: "no user layer".into(),
        },
        layers: Vec::new(),
        violations: vec![
            v(ViolationKind::RoleConfusion),
            v(ViolationKind::InstructionOverride),
            v(ViolationKind::SystemExtraction),
            v(ViolationKind::ContextSaturation),
            v(ViolationKind::RoleConfusion),
        ],
        balance: None,
        exchange: None,
        label: None,
        why: None,
        evaluators: Vec::new(),
        consensus: None,
        cost: RelationalCost::default(),
        elapsed_us: 0,
    };
    let a = AuditRelational::from_report(&report);
    assert_eq!(a.status, RelationalStatusKind::Skipped);
    assert_eq!(a.reason.as_deref(), Some("no user layer"));
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(
        json["violations"],
        serde_json::json!([
            "context_saturation",
            "instruction_override",
            "role_confusion",
            "system_extraction"
        ])
    );
    assert_eq!(json["status"], "skipped");
}

/// A stored action or risk that is none of the enum's names is a damaged record, named as
/// such, not a panic or a silent default.
#[test]
fn an_unknown_stored_action_is_a_damaged_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::open(AuditConfig::at(&path)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(log.writer().append(record(0))).unwrap();
    log.shutdown().unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE decisions SET action = 'DENY'", [])
        .unwrap();
    drop(conn);
    let e = AuditReader::open(&path)
        .unwrap()
        .query(&AuditFilter::default())
        .unwrap_err();
    assert!(
        matches!(e, rampart_audit::AuditError::Corrupt { id: 1, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("unknown action \"DENY\""), "{e}");
}
