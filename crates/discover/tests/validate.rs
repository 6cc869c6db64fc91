//! The validator: the spec's own example passes; each kind of malformed record fails, naming
//! the line and the field.

#![allow(clippy::unwrap_used)]

use rampart_discover::{PatternCandidate, validate_jsonl};
use serde_json::{Value, json};

/// The example of `shared/specs/pattern_candidates_v1.md`, as printed there (pretty).
const SPEC_EXAMPLE: &str = r#"{
  "schema_version": "pattern_candidates.v1",
  "pattern_id": "SYS_001",
  "category": "system_marker",
  "pattern": {"value": "<<sys>>", "normalized_value": "<<sys>>", "pattern_kind": "literal",
              "regex": null, "case_sensitive": false, "token_boundary": false,
              "signal_strength": "strong", "severity_hint": "high_risk"},
  "evidence": {
    "datasets": [{"dataset_name": "slabs_test", "split": "test",
                  "eval_log_path": "reports/evals/eval_20261201_101500_slabs_test.jsonl",
                  "sample_count_total": 2101, "match_count_total": 12,
                  "outcome_buckets": {"true_positive": 3, "false_negative": 9,
                                      "false_positive": 0, "true_negative": 0},
                  "example_prompt_ids": ["slabs-test-88", "slabs-test-104"]}],
    "benign_regression": {"dataset_name": "Clean_Benign_Corpus_v1",
                          "eval_log_path": "reports/evals/eval_20261201_101500_Clean_Benign_Corpus_v1.jsonl",
                          "sample_count_total": 240, "match_count_total": 0, "example_prompt_ids": []}},
  "run": {"eval_run_id": "eval_20261201_101500", "timestamp_utc": "2026-12-01T10:15:00Z",
          "git_commit": "abcdef1", "script": "rampart discover",
          "model": {"name": "rampart-linear", "version": "1"},
          "guardrail": {"entrypoint": "rampart_core::Pipeline::scan", "policy_version": "default-1"}},
  "metrics": {"fn_coverage_rate": 0.074, "tp_support_rate": 0.002, "fp_risk_score": 0.0,
              "rarity_score": 0.88, "priority_score": 0.81},
  "decision": {"recommendation": "include", "requires_review": false,
               "reason": "Only in missed attacks; no match in the clean benign corpus."},
  "implementation": {"target_function": "check_system_markers", "suggested_action": "escalate",
                     "suggested_risk": "high_risk", "notes": "Strong signal: 2 points."},
  "created_at": "2026-12-01T10:16:02Z"
}"#;

fn example() -> Value {
    serde_json::from_str(SPEC_EXAMPLE).unwrap()
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap()
}

fn file(lines: &[Value]) -> String {
    lines.iter().map(|v| compact(v) + "\n").collect()
}

/// A JSON pointer-like path ("a/b/0/c") into a value.
fn at<'v>(v: &'v mut Value, path: &str) -> &'v mut Value {
    path.split('/').fold(v, |v, k| match k.parse::<usize>() {
        Ok(i) if v.is_array() => &mut v[i],
        _ => &mut v[k],
    })
}

fn set(mut v: Value, path: &str, new: Value) -> Value {
    *at(&mut v, path) = new;
    v
}

fn remove(mut v: Value, path: &str) -> Value {
    let (parent, key) = path.rsplit_once('/').unwrap_or(("", path));
    let obj = if parent.is_empty() {
        &mut v
    } else {
        at(&mut v, parent)
    };
    obj.as_object_mut().unwrap().remove(key).unwrap();
    v
}

/// The (line, field) pairs of every error.
fn errors(src: &str) -> Vec<(usize, String)> {
    validate_jsonl(src)
        .errors
        .into_iter()
        .map(|e| (e.line, e.field))
        .collect()
}

/// Exactly these errors (line, field), each message containing `needle`.
#[track_caller]
fn assert_only(src: &str, expected: &[(usize, &str)], needle: &str) {
    let report = validate_jsonl(src);
    let got: Vec<(usize, &str)> = report
        .errors
        .iter()
        .map(|e| (e.line, e.field.as_str()))
        .collect();
    assert_eq!(got, expected, "{:#?}", report.errors);
    for e in &report.errors {
        assert!(
            e.message.contains(needle),
            "{e} does not mention {needle:?}"
        );
        assert!(e.to_string().starts_with(&format!("line {}", e.line)));
    }
}

#[test]
fn the_spec_example_validates_and_reads_as_a_record() {
    let src = file(&[example()]);
    let report = validate_jsonl(&src);
    assert!(report.is_valid(), "{:#?}", report.errors);
    assert_eq!(report.records, 1);
    let rec: PatternCandidate = serde_json::from_str(src.trim()).unwrap();
    assert_eq!(rec.pattern_id, "SYS_001");
    // And writes back to the same object.
    assert_eq!(serde_json::to_value(&rec).unwrap(), example());
}

#[test]
fn an_empty_file_is_valid() {
    assert!(validate_jsonl("").is_valid());
}

#[test]
fn unknown_fields_are_rejected() {
    let v = set(example(), "extra", json!(1));
    assert_only(&file(&[v]), &[(1, "extra")], "unknown field");
    let v = set(example(), "pattern/flags", json!("i"));
    assert_only(&file(&[v]), &[(1, "pattern.flags")], "unknown field");
    let v = set(
        example(),
        "evidence/datasets/0/outcome_buckets/maybe",
        json!(0),
    );
    let v = set(v, "pattern_id", json!("SYS_002"));
    assert_only(
        &file(&[example(), v]),
        &[(2, "evidence.datasets[0].outcome_buckets.maybe")],
        "unknown field",
    );
}

#[test]
fn missing_fields_are_rejected() {
    for (path, field) in [
        ("created_at", "created_at"),
        ("metrics/fp_risk_score", "metrics.fp_risk_score"),
        ("decision/reason", "decision.reason"),
        ("pattern/regex", "pattern.regex"),
        (
            "run/guardrail/policy_version",
            "run.guardrail.policy_version",
        ),
        (
            "evidence/datasets/0/outcome_buckets",
            "evidence.datasets[0].outcome_buckets",
        ),
        ("evidence/benign_regression", "evidence.benign_regression"),
    ] {
        let v = remove(example(), path);
        assert_only(&file(&[v]), &[(1, field)], "missing field");
    }
}

#[test]
fn a_record_without_evidence_or_reason_is_rejected() {
    let v = set(example(), "evidence/datasets", json!([]));
    assert_only(&file(&[v]), &[(1, "evidence.datasets")], "no evidence");
    let v = set(example(), "decision/reason", json!("  "));
    assert_only(&file(&[v]), &[(1, "decision.reason")], "empty");
    let v = set(example(), "decision/reason", json!("two\nlines"));
    assert_only(&file(&[v]), &[(1, "decision.reason")], "one line");
}

#[test]
fn wrong_enum_values_are_rejected() {
    for (path, value, field) in [
        ("category", "sys_marker", "category"),
        ("pattern/pattern_kind", "glob", "pattern.pattern_kind"),
        (
            "pattern/signal_strength",
            "medium",
            "pattern.signal_strength",
        ),
        ("pattern/severity_hint", "critical", "pattern.severity_hint"),
        (
            "evidence/datasets/0/split",
            "validation",
            "evidence.datasets[0].split",
        ),
        (
            "decision/recommendation",
            "maybe",
            "decision.recommendation",
        ),
        (
            "implementation/suggested_action",
            "block",
            "implementation.suggested_action",
        ),
        (
            "implementation/suggested_risk",
            "low",
            "implementation.suggested_risk",
        ),
    ] {
        let v = set(example(), path, json!(value));
        assert_only(&file(&[v]), &[(1, field)], "is not one of");
    }
    // A target function that exists but belongs to another category.
    let v = set(
        example(),
        "implementation/target_function",
        json!("check_other"),
    );
    assert_only(
        &file(&[v]),
        &[(1, "implementation.target_function")],
        "does not belong",
    );
    let v = set(
        example(),
        "implementation/target_function",
        json!("check_everything"),
    );
    assert_only(
        &file(&[v]),
        &[(1, "implementation.target_function")],
        "is not one of",
    );
}

#[test]
fn wrong_types_are_rejected() {
    let v = set(example(), "pattern/case_sensitive", json!("no"));
    assert_only(&file(&[v]), &[(1, "pattern.case_sensitive")], "boolean");
    let v = set(
        example(),
        "evidence/datasets/0/sample_count_total",
        json!(-3),
    );
    assert_only(
        &file(&[v]),
        &[(1, "evidence.datasets[0].sample_count_total")],
        "non-negative integer",
    );
    let v = set(
        example(),
        "evidence/datasets/0/example_prompt_ids",
        json!([7]),
    );
    assert_only(
        &file(&[v]),
        &[(1, "evidence.datasets[0].example_prompt_ids[0]")],
        "string",
    );
}

#[test]
fn bad_id_prefixes_and_shapes_are_rejected() {
    let v = set(example(), "pattern_id", json!("CTRL_001"));
    assert_only(&file(&[v]), &[(1, "pattern_id")], "does not match category");
    for bad in [
        "SYS_1", "SYS-001", "SYS_0001", "XYZ_001", "SYS_000", "sys_001",
    ] {
        let v = set(example(), "pattern_id", json!(bad));
        assert_only(&file(&[v]), &[(1, "pattern_id")], "PREFIX_NNN");
    }
}

#[test]
fn bad_numbering_is_rejected() {
    // SYS_001, then SYS_003: the second must be SYS_002.
    let a = example();
    let b = set(example(), "pattern_id", json!("SYS_003"));
    assert_only(
        &file(&[a.clone(), b]),
        &[(2, "pattern_id")],
        "expected \"SYS_002\"",
    );
    // A duplicate id.
    assert_only(
        &file(&[a.clone(), a.clone()]),
        &[(2, "pattern_id")],
        "out of sequence",
    );
    // Numbering is per category: CTRL_001 after SYS_001 is fine, CTRL_002 first is not.
    let ctrl = |id: &str| {
        let v = set(example(), "category", json!("control_phrase"));
        let v = set(
            v,
            "implementation/target_function",
            json!("check_control_phrases"),
        );
        set(v, "pattern_id", json!(id))
    };
    assert!(validate_jsonl(&file(&[a.clone(), ctrl("CTRL_001")])).is_valid());
    assert_only(
        &file(&[a, ctrl("CTRL_002")]),
        &[(2, "pattern_id")],
        "expected \"CTRL_001\"",
    );
}

#[test]
fn malformed_eval_log_paths_are_rejected() {
    for bad in [
        "reports/eval_20261201_101500_slabs_test.jsonl",
        "reports/evals/eval_20261201_101500_slabs_test.json",
        "reports/evals/eval_2026121_101500_slabs_test.jsonl",
        "reports/evals/eval_20261301_101500_slabs_test.jsonl",
        "reports/evals/eval_20261201_101500.jsonl",
        "/abs/reports/evals/eval_20261201_101500_slabs_test.jsonl",
    ] {
        let v = set(example(), "evidence/datasets/0/eval_log_path", json!(bad));
        let src = file(&[v]);
        let errs = errors(&src);
        assert!(
            !errs.is_empty()
                && errs
                    .iter()
                    .all(|(l, f)| *l == 1 && f == "evidence.datasets[0].eval_log_path"),
            "{bad}: {errs:?}"
        );
    }
    // Well formed, but naming another dataset or another run.
    let v = set(
        example(),
        "evidence/datasets/0/eval_log_path",
        json!("reports/evals/eval_20261201_101500_other.jsonl"),
    );
    assert_only(
        &file(&[v]),
        &[(1, "evidence.datasets[0].eval_log_path")],
        "dataset_name",
    );
    let v = set(
        example(),
        "evidence/benign_regression/eval_log_path",
        json!("reports/evals/eval_20261202_101500_Clean_Benign_Corpus_v1.jsonl"),
    );
    assert_only(
        &file(&[v]),
        &[(1, "evidence.benign_regression.eval_log_path")],
        "eval_run_id",
    );
    let v = set(
        example(),
        "evidence/benign_regression/dataset_name",
        json!("My_Benign"),
    );
    let errs = errors(&file(&[v]));
    assert!(errs.contains(&(1, "evidence.benign_regression.dataset_name".into())));
}

#[test]
fn malformed_timestamps_and_run_ids_are_rejected() {
    for (path, value, field) in [
        (
            "run/timestamp_utc",
            "2026-12-01 10:15:00",
            "run.timestamp_utc",
        ),
        (
            "run/timestamp_utc",
            "2026-12-01T10:15:00",
            "run.timestamp_utc",
        ),
        ("created_at", "2026-12-01T10:16:02+02:00", "created_at"),
        ("created_at", "2026-02-30T10:16:02Z", "created_at"),
        ("created_at", "", "created_at"),
    ] {
        let v = set(example(), path, json!(value));
        assert_only(&file(&[v]), &[(1, field)], "");
    }
    // A malformed run id also makes the log paths (which must name it) disagree.
    let v = set(example(), "run/eval_run_id", json!("eval_2026-12-01"));
    let errs = errors(&file(&[v]));
    assert!(errs.contains(&(1, "run.eval_run_id".into())), "{errs:?}");
    let v = set(example(), "run/git_commit", json!("main"));
    assert_only(&file(&[v]), &[(1, "run.git_commit")], "SHA");
    let v = set(example(), "run/git_commit", json!("unknown"));
    assert!(validate_jsonl(&file(&[v])).is_valid());
}

#[test]
fn metrics_out_of_range_are_rejected() {
    for (path, value, field) in [
        (
            "metrics/priority_score",
            json!(1.2),
            "metrics.priority_score",
        ),
        (
            "metrics/fn_coverage_rate",
            json!(-0.1),
            "metrics.fn_coverage_rate",
        ),
        (
            "metrics/fp_risk_score",
            json!("low"),
            "metrics.fp_risk_score",
        ),
        ("metrics/rarity_score", json!(null), "metrics.rarity_score"),
    ] {
        let v = set(example(), path, value);
        assert_only(&file(&[v]), &[(1, field)], "");
    }
    let v = set(example(), "metrics/tp_support_rate", json!(1));
    assert!(validate_jsonl(&file(&[v])).is_valid(), "1 is in range");
}

#[test]
fn counts_that_do_not_add_up_are_rejected() {
    let v = set(
        example(),
        "evidence/datasets/0/match_count_total",
        json!(13),
    );
    assert_only(
        &file(&[v]),
        &[(1, "evidence.datasets[0].outcome_buckets")],
        "sum to 12",
    );
    let v = set(
        example(),
        "evidence/datasets/0/sample_count_total",
        json!(5),
    );
    assert_only(
        &file(&[v]),
        &[(1, "evidence.datasets[0].match_count_total")],
        "exceed",
    );
    let v = set(
        example(),
        "evidence/benign_regression/example_prompt_ids",
        json!(["cb-1"]),
    );
    assert_only(
        &file(&[v]),
        &[(1, "evidence.benign_regression.example_prompt_ids")],
        "for 0 matches",
    );
    let v = set(
        example(),
        "evidence/datasets/0/example_prompt_ids",
        json!(["a", "a"]),
    );
    assert_only(
        &file(&[v]),
        &[(1, "evidence.datasets[0].example_prompt_ids[1]")],
        "duplicate",
    );
    let long = "x".repeat(300);
    let v = set(
        example(),
        "evidence/datasets/0/example_prompt_ids",
        json!([long]),
    );
    assert_only(
        &file(&[v]),
        &[(1, "evidence.datasets[0].example_prompt_ids[0]")],
        "never text",
    );
}

#[test]
fn sort_order_is_enforced() {
    let rec = |id: &str, priority: f64, fns: u64, benign: u64| {
        let v = set(example(), "pattern_id", json!(id));
        let v = set(v, "metrics/priority_score", json!(priority));
        let v = set(
            v,
            "evidence/datasets/0/outcome_buckets/false_negative",
            json!(fns),
        );
        let v = set(
            v,
            "evidence/datasets/0/outcome_buckets/true_positive",
            json!(0),
        );
        let v = set(
            v,
            "evidence/datasets/0/match_count_total",
            json!(fns + benign),
        );
        let v = set(
            v,
            "evidence/datasets/0/outcome_buckets/false_positive",
            json!(benign),
        );
        let v = set(v, "evidence/datasets/0/example_prompt_ids", json!([]));
        set(
            v,
            "evidence/benign_regression/match_count_total",
            json!(benign),
        )
    };
    let ok = file(&[
        rec("SYS_001", 0.9, 1, 0),
        rec("SYS_002", 0.8, 9, 0),
        rec("SYS_003", 0.8, 5, 0),
        rec("SYS_004", 0.8, 5, 2),
        rec("SYS_005", 0.8, 5, 2),
    ]);
    assert!(validate_jsonl(&ok).is_valid(), "{:?}", errors(&ok));
    assert_only(
        &file(&[rec("SYS_001", 0.5, 1, 0), rec("SYS_002", 0.6, 1, 0)]),
        &[(2, "metrics.priority_score")],
        "out of order",
    );
    assert_only(
        &file(&[rec("SYS_001", 0.5, 1, 0), rec("SYS_002", 0.5, 2, 0)]),
        &[(2, "evidence.datasets[].outcome_buckets.false_negative")],
        "out of order",
    );
    assert_only(
        &file(&[rec("SYS_001", 0.5, 2, 3), rec("SYS_002", 0.5, 2, 1)]),
        &[(2, "evidence.benign_regression.match_count_total")],
        "out of order",
    );
}

#[test]
fn rules_of_use_and_consistency_are_enforced() {
    let bnd = set(example(), "category", json!("boundary_testing"));
    let bnd = set(bnd, "pattern_id", json!("BND_001"));
    let bnd = set(
        bnd,
        "implementation/target_function",
        json!("check_boundary_testing"),
    );
    assert_only(
        &file(std::slice::from_ref(&bnd)),
        &[(1, "pattern.signal_strength")],
        "weak",
    );
    assert!(
        validate_jsonl(&file(&[set(bnd, "pattern/signal_strength", json!("weak"))])).is_valid()
    );
    let v = set(example(), "decision/recommendation", json!("review"));
    assert_only(&file(&[v]), &[(1, "decision.requires_review")], "review");
    let v = set(example(), "pattern/normalized_value", json!("<<SYS>>"));
    assert_only(
        &file(&[v]),
        &[(1, "pattern.normalized_value")],
        "lower-cased",
    );
    let v = set(example(), "pattern/pattern_kind", json!("regex"));
    assert_only(&file(&[v]), &[(1, "pattern.regex")], "null");
    let v = set(example(), "pattern/regex", json!("(unclosed"));
    assert_only(&file(&[v]), &[(1, "pattern.regex")], "compile");
    let v = set(example(), "schema_version", json!("pattern_candidates.v2"));
    assert_only(&file(&[v]), &[(1, "schema_version")], "expected");
}

#[test]
fn lines_that_are_not_records_are_named() {
    let src = format!(
        "{}not json\n\n{}",
        file(&[example()]),
        compact(&json!([1, 2]))
    );
    let report = validate_jsonl(&src);
    let got: Vec<(usize, &str)> = report
        .errors
        .iter()
        .map(|e| (e.line, e.field.as_str()))
        .collect();
    assert_eq!(got, [(2, ""), (3, ""), (4, "")], "{:#?}", report.errors);
    assert!(report.errors[0].message.contains("not JSON"));
    assert!(report.errors[1].message.contains("empty line"));
    assert!(report.errors[2].message.contains("must be an object"));
}
