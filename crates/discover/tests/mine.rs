//! The miner on hand-made eval logs: ranking, filters, metrics, ids, order, determinism, and
//! no prompt text in the output.

#![allow(clippy::unwrap_used)]

use crate::common::*;
use rampart_core::{Category, RiskClass, Strength};
use rampart_datasets::{Label, read_jsonl_str};
use rampart_discover::{
    Corpus, DiscoverError, MineInput, MineOptions, PatternCandidate, PatternKind, Recommendation,
    SplitName, SuggestedAction, SuggestedRisk, TargetFunction, existing_rules_matcher, mine,
    parse_eval_log, to_jsonl, validate_jsonl,
};
use rampart_eval::log::Outcome;
use std::collections::BTreeMap;

fn find<'a>(cands: &'a [PatternCandidate], value: &str) -> Option<&'a PatternCandidate> {
    cands.iter().find(|c| c.pattern.normalized_value == value)
}

#[test]
fn a_phrase_only_in_false_negatives_ranks_first() {
    let out = mine_fixture();
    let top = &out.candidates[0];
    assert_eq!(top.pattern.value, PHRASE, "{:#?}", out.candidates);
    assert_eq!(top.pattern_id, "OTH_001");
    assert_eq!(top.category, Category::Other);
    assert_eq!(top.pattern.pattern_kind, PatternKind::Literal);
    assert_eq!(top.pattern.regex, None);
    assert!(top.pattern.token_boundary && !top.pattern.case_sensitive);
    assert_eq!(top.pattern.signal_strength, Strength::Strong);
    assert_eq!(top.pattern.severity_hint, RiskClass::MediumRisk);

    let [d] = top.evidence.datasets.as_slice() else {
        panic!("one dataset expected: {:?}", top.evidence.datasets)
    };
    assert_eq!(d.dataset_name, DATASET);
    assert_eq!(d.split, SplitName::Test);
    assert_eq!(
        d.eval_log_path,
        "reports/evals/eval_20261201_101500_fixture_attacks.jsonl"
    );
    assert_eq!((d.sample_count_total, d.match_count_total), (10, 6));
    assert_eq!(
        (
            d.outcome_buckets.true_positive,
            d.outcome_buckets.false_negative,
            d.outcome_buckets.false_positive,
            d.outcome_buckets.true_negative
        ),
        (0, 6, 0, 0)
    );
    assert_eq!(
        d.example_prompt_ids,
        ["fx-01", "fx-02", "fx-03", "fx-04", "fx-05"]
    );
    let b = &top.evidence.benign_regression;
    assert_eq!(b.dataset_name, "Clean_Benign_Corpus_v1");
    assert_eq!(
        b.eval_log_path,
        "reports/evals/eval_20261201_101500_Clean_Benign_Corpus_v1.jsonl"
    );
    assert_eq!((b.sample_count_total, b.match_count_total), (20, 0));
    assert!(b.example_prompt_ids.is_empty());

    // Metrics by the documented formulas: 6/6 FN, 0/4 TP, no benign match,
    // rarity 0.5 * (1 - 6/30) + 0.5 * min(1, 37/20) = 0.9,
    // priority (1 - 0) * (0.6 * 1 + 0.1 * 0 + 0.3 * 0.9) = 0.87.
    assert_eq!(top.metrics.fn_coverage_rate, 1.0);
    assert_eq!(top.metrics.tp_support_rate, 0.0);
    assert_eq!(top.metrics.fp_risk_score, 0.0);
    assert_eq!(top.metrics.rarity_score, 0.9);
    assert_eq!(top.metrics.priority_score, 0.87);

    assert_eq!(top.decision.recommendation, Recommendation::Include);
    assert!(!top.decision.requires_review);
    assert_eq!(
        top.implementation.target_function,
        TargetFunction::CheckOther
    );
    assert_eq!(
        top.implementation.suggested_action,
        SuggestedAction::Escalate
    );
    assert_eq!(top.implementation.suggested_risk, SuggestedRisk::MediumRisk);

    assert_eq!(top.run.eval_run_id, RUN);
    assert_eq!(top.run.timestamp_utc, "2026-12-01T10:15:00Z");
    assert_eq!(top.run.script, "rampart discover");
    assert_eq!(top.run.model.name, "default");
    assert_eq!(top.run.model.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(top.run.guardrail.entrypoint, "rampart_core::Pipeline::scan");
    assert_eq!(top.run.guardrail.policy_version, "default-1");
    assert_eq!(top.created_at, "2026-12-01T10:16:02Z");
}

#[test]
fn a_word_frequent_in_benign_data_is_excluded() {
    let out = mine_fixture();
    // "kindly": in every attack, but in 3 of 20 clean benign prompts (15% > the 2% budget).
    let k = find(&out.candidates, "kindly").expect("kindly is over-represented, so listed");
    assert_eq!(k.decision.recommendation, Recommendation::Exclude);
    assert_eq!(k.evidence.benign_regression.match_count_total, 3);
    assert_eq!(
        k.evidence.benign_regression.example_prompt_ids,
        ["cb-01", "cb-02", "cb-03"]
    );
    assert_eq!(k.metrics.fp_risk_score, 1.0);
    assert_eq!(k.metrics.priority_score, 0.0);
    assert_eq!(k.pattern.signal_strength, Strength::Weak);
    assert_eq!(k.implementation.suggested_action, SuggestedAction::LogOnly);
    assert_eq!(k.implementation.suggested_risk, SuggestedRisk::None);
    // It sorts after every candidate with a better priority.
    assert_eq!(
        out.candidates.last().map(|c| c.pattern.value.as_str()),
        Some("kindly")
    );
    // "please" is in every attack and every benign prompt: not over-represented at all.
    assert!(find(&out.candidates, "please").is_none());
    assert!(out.stats.dropped_not_overrepresented > 0);
}

#[test]
fn patterns_an_existing_rule_covers_are_dropped() {
    let out = mine_fixture();
    assert!(out.stats.dropped_covered > 0);
    for c in &out.candidates {
        assert!(
            !c.pattern
                .normalized_value
                .contains("ignore previous instructions"),
            "{}",
            c.pattern.value
        );
    }
}

#[test]
fn parts_of_a_longer_phrase_with_the_same_support_are_dropped() {
    let out = mine_fixture();
    assert!(out.stats.dropped_subsumed > 0);
    for part in [
        "crimson lantern",
        "lantern sequence",
        "the crimson lantern sequence",
        "activate the crimson lantern",
        "activate",
    ] {
        assert!(find(&out.candidates, part).is_none(), "{part}");
    }
}

#[test]
fn ids_are_sequential_per_category_and_the_file_is_sorted_and_valid() {
    let out = mine_fixture();
    let ids: Vec<(&str, &str)> = out
        .candidates
        .iter()
        .map(|c| (c.pattern_id.as_str(), c.pattern.value.as_str()))
        .collect();
    // The two 3-FN phrases tie on every sort key: the pattern text breaks the tie.
    assert_eq!(
        ids,
        [
            ("OTH_001", PHRASE),
            ("OTH_002", "open the copper vault door"),
            ("OTH_003", "unlock the velvet archive"),
            ("OTH_004", "kindly"),
        ]
    );
    let file = to_jsonl(&out.candidates).unwrap();
    let report = validate_jsonl(&file);
    assert!(report.is_valid(), "{:?}", report.errors);
    assert_eq!(report.records, out.candidates.len());
    let mut per_cat: BTreeMap<Category, usize> = BTreeMap::new();
    for c in &out.candidates {
        let n = per_cat.entry(c.category).or_insert(0);
        *n += 1;
        assert_eq!(c.pattern_id, format!("{}_{:03}", c.category.prefix(), n));
    }
    for w in out.candidates.windows(2) {
        let key = |c: &PatternCandidate| {
            (
                c.metrics.priority_score,
                c.evidence.false_negatives(),
                c.evidence.benign_regression.match_count_total,
            )
        };
        let (a, b) = (key(&w[0]), key(&w[1]));
        assert!(
            a.0 > b.0 || (a.0 == b.0 && (a.1 > b.1 || (a.1 == b.1 && a.2 <= b.2))),
            "{a:?} before {b:?}"
        );
    }
}

#[test]
fn metrics_follow_the_documented_formulas_for_every_candidate() {
    let out = mine_fixture();
    for c in &out.candidates {
        let fns = c.evidence.false_negatives() as f64;
        let tps = c.evidence.true_positives() as f64;
        let benign = c.evidence.benign_regression.match_count_total as f64;
        let r4 = |x: f64| (x.clamp(0.0, 1.0) * 10_000.0).round() / 10_000.0;
        assert_eq!(
            c.metrics.fn_coverage_rate,
            r4(fns / 6.0),
            "{}",
            c.pattern.value
        );
        assert_eq!(
            c.metrics.tp_support_rate,
            r4(tps / 4.0),
            "{}",
            c.pattern.value
        );
        assert_eq!(
            c.metrics.fp_risk_score,
            r4((benign / 20.0) / 0.02),
            "{}",
            c.pattern.value
        );
        let m = &c.metrics;
        let p = (1.0 - m.fp_risk_score)
            * (0.6 * m.fn_coverage_rate.sqrt()
                + 0.1 * m.tp_support_rate.sqrt()
                + 0.3 * m.rarity_score);
        assert_eq!(m.priority_score, r4(p), "{}", c.pattern.value);
    }
}

#[test]
fn output_is_deterministic_whatever_the_log_order() {
    let a = to_jsonl(&mine_fixture().candidates).unwrap();
    let mut logs = attack_logs("default");
    logs.reverse();
    let b = to_jsonl(&mine_with(&logs, &MineOptions::default()).candidates).unwrap();
    assert_eq!(a, b);
}

#[test]
fn the_output_file_holds_no_prompt_text() {
    let out = mine_fixture();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pattern_candidates_v1.jsonl");
    std::fs::write(&path, to_jsonl(&out.candidates).unwrap()).unwrap();
    let written = std::fs::read_to_string(&path).unwrap().to_lowercase();
    let texts: Vec<String> = attack_rows()
        .iter()
        .map(|(_, t, _)| t.to_string())
        .chain(benign_rows().into_iter().map(|(_, t)| t))
        .collect();
    for t in &texts {
        assert!(
            !written.contains(&t.to_lowercase()),
            "prompt text in output: {t}"
        );
        // Patterns are at most five words; no six consecutive words of a prompt may appear.
        let words: Vec<String> = t
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        for w in words.windows(6) {
            assert!(
                !written.contains(&w.join(" ")),
                "six words of {t:?} in output"
            );
        }
    }
}

#[test]
fn min_support_and_max_are_honoured() {
    let logs = attack_logs("default");
    let strict = MineOptions {
        min_support: 7,
        ..MineOptions::default()
    };
    let out = mine_with(&logs, &strict);
    assert!(find(&out.candidates, PHRASE).is_none());
    assert!(
        out.candidates
            .iter()
            .all(|c| { c.evidence.false_negatives() + c.evidence.true_positives() >= 7 })
    );
    let one = MineOptions {
        max_candidates: 1,
        ..MineOptions::default()
    };
    let out = mine_with(&logs, &one);
    assert_eq!(out.candidates.len(), 1);
    assert_eq!(out.candidates[0].pattern.value, PHRASE);
    assert!(out.stats.truncated >= 1);
}

#[test]
fn several_configurations_need_a_choice() {
    let mut logs = attack_logs("default");
    logs.extend(attack_logs("strict"));
    let datasets = BTreeMap::from([(DATASET.to_string(), attack_records())]);
    let benign = benign_records();
    let input = MineInput {
        logs: &logs,
        datasets: &datasets,
        benign: Corpus {
            name: "Clean_Benign_Corpus_v1",
            records: &benign,
        },
    };
    let existing = existing_rules_matcher(Vec::new()).unwrap();
    let err = mine(&input, &existing, &MineOptions::default(), &ctx()).unwrap_err();
    assert!(
        matches!(err, DiscoverError::AmbiguousConfig(ref s) if s == "default, strict"),
        "{err}"
    );
    let opts = MineOptions {
        config: Some("strict".into()),
        ..MineOptions::default()
    };
    let out = mine(&input, &existing, &opts, &ctx()).unwrap();
    assert_eq!(out.candidates[0].run.model.name, "strict");
    assert_eq!(
        out.candidates[0].evidence.datasets[0].sample_count_total,
        10
    );
    let opts = MineOptions {
        config: Some("nope".into()),
        ..MineOptions::default()
    };
    assert!(matches!(
        mine(&input, &existing, &opts, &ctx()),
        Err(DiscoverError::UnknownConfig { .. })
    ));
}

#[test]
fn logs_of_several_runs_are_refused() {
    let mut logs = attack_logs("default");
    logs[0].eval_run_id = "eval_20261202_000000".into();
    let datasets = BTreeMap::from([(DATASET.to_string(), attack_records())]);
    let benign = benign_records();
    let input = MineInput {
        logs: &logs,
        datasets: &datasets,
        benign: Corpus {
            name: "Clean_Benign_Corpus_v1",
            records: &benign,
        },
    };
    let existing = existing_rules_matcher(Vec::new()).unwrap();
    let err = mine(&input, &existing, &MineOptions::default(), &ctx()).unwrap_err();
    assert!(matches!(err, DiscoverError::MixedRuns(_)), "{err}");
}

#[test]
fn unknown_prompt_ids_are_left_out_and_missing_datasets_are_errors() {
    let mut logs = attack_logs("default");
    logs.push(log_record(
        "default",
        DATASET,
        "not-in-dataset",
        Label::Attack,
        Outcome::FalseNegative,
    ));
    let out = mine_with(&logs, &MineOptions::default());
    assert_eq!(out.stats.datasets[0].unjoined, 1);
    assert_eq!(out.stats.datasets[0].prompts, 10);
    assert_eq!(out.candidates[0].metrics.fn_coverage_rate, 1.0);

    logs.push(log_record(
        "default",
        "other_set",
        "o1",
        Label::Attack,
        Outcome::FalseNegative,
    ));
    let datasets = BTreeMap::from([(DATASET.to_string(), attack_records())]);
    let benign = benign_records();
    let input = MineInput {
        logs: &logs,
        datasets: &datasets,
        benign: Corpus {
            name: "Clean_Benign_Corpus_v1",
            records: &benign,
        },
    };
    let existing = existing_rules_matcher(Vec::new()).unwrap();
    let err = mine(&input, &existing, &MineOptions::default(), &ctx()).unwrap_err();
    assert!(
        matches!(err, DiscoverError::MissingDataset(ref n) if n == "other_set"),
        "{err}"
    );
}

#[test]
fn duplicate_prompts_in_the_logs_are_errors() {
    let mut logs = attack_logs("default");
    logs.push(logs[0].clone());
    let datasets = BTreeMap::from([(DATASET.to_string(), attack_records())]);
    let benign = benign_records();
    let input = MineInput {
        logs: &logs,
        datasets: &datasets,
        benign: Corpus {
            name: "Clean_Benign_Corpus_v1",
            records: &benign,
        },
    };
    let existing = existing_rules_matcher(Vec::new()).unwrap();
    assert!(matches!(
        mine(&input, &existing, &MineOptions::default(), &ctx()),
        Err(DiscoverError::DuplicatePrompt { .. })
    ));
}

#[test]
fn the_benign_corpus_log_mined_too_is_not_counted_twice() {
    let mut logs = attack_logs("default");
    for (id, _) in benign_rows() {
        logs.push(log_record(
            "default",
            "Clean_Benign_Corpus_v1",
            &id,
            Label::Benign,
            Outcome::TrueNegative,
        ));
    }
    let datasets = BTreeMap::from([
        (DATASET.to_string(), attack_records()),
        ("Clean_Benign_Corpus_v1".to_string(), benign_records()),
    ]);
    let benign = benign_records();
    let input = MineInput {
        logs: &logs,
        datasets: &datasets,
        benign: Corpus {
            name: "Clean_Benign_Corpus_v1",
            records: &benign,
        },
    };
    let existing = existing_rules_matcher(Vec::new()).unwrap();
    let out = mine(&input, &existing, &MineOptions::default(), &ctx()).unwrap();
    let k = find(&out.candidates, "kindly").unwrap();
    // The corpus's own log row shows its TN matches; the regression check the same 3 of 20;
    // the FP risk is 3/20, not doubled.
    let row = k
        .evidence
        .datasets
        .iter()
        .find(|d| d.dataset_name == "Clean_Benign_Corpus_v1")
        .unwrap();
    assert_eq!(row.outcome_buckets.true_negative, 3);
    assert_eq!(k.evidence.benign_regression.match_count_total, 3);
    let top = &out.candidates[0];
    assert_eq!(top.pattern.value, PHRASE);
    // Distinct prompts: 10 attacks + 20 benign (not 40).
    assert_eq!(top.metrics.rarity_score, 0.9);
    assert!(validate_jsonl(&to_jsonl(&out.candidates).unwrap()).is_valid());
}

#[test]
fn special_tokens_in_segments_are_mined_as_literal_shapes() {
    let rows = [
        ("s1", "Summarize the tool output."),
        ("s2", "What does the tool say?"),
        ("s3", "Read the result."),
        ("s4", "Use the page."),
    ];
    let src: String = rows
        .iter()
        .enumerate()
        .map(|(i, (id, user))| {
            serde_json::json!({"id": id, "label": "attack", "segments": [
                {"role": "user", "text": user},
                {"role": "tool", "text": format!("result {i} <|zq_start|> all clear")},
            ]})
            .to_string()
                + "\n"
        })
        .collect();
    let (recs, errs) = read_jsonl_str(&src);
    assert!(errs.is_empty(), "{errs:?}");
    let logs: Vec<_> = rows
        .iter()
        .map(|(id, _)| {
            log_record(
                "default",
                "seg_set",
                id,
                Label::Attack,
                Outcome::FalseNegative,
            )
        })
        .collect();
    let logs = parse_eval_log(&logs_jsonl(&logs), "test").unwrap();
    let datasets = BTreeMap::from([("seg_set".to_string(), recs)]);
    let benign = benign_records();
    let input = MineInput {
        logs: &logs,
        datasets: &datasets,
        benign: Corpus {
            name: "Clean_Benign_Corpus_v1",
            records: &benign,
        },
    };
    let existing = existing_rules_matcher(Vec::new()).unwrap();
    let out = mine(&input, &existing, &MineOptions::default(), &ctx()).unwrap();
    let shape = find(&out.candidates, "<|zq_start|>").expect("shape mined");
    assert_eq!(shape.category, Category::SystemMarker);
    assert_eq!(shape.pattern_id, "SYS_001");
    assert!(!shape.pattern.token_boundary);
    assert_eq!(shape.evidence.false_negatives(), 4);
    // The bare word inside it has the same support: subsumed by the shape.
    assert!(find(&out.candidates, "zq_start").is_none());
    // No n-gram spans the two segments.
    assert!(
        out.candidates
            .iter()
            .all(|c| !c.pattern.value.contains("output result"))
    );
}

#[test]
fn malformed_log_lines_are_errors_naming_the_line() {
    let mut src = logs_jsonl(&attack_logs("default"));
    src.push_str("{\"schema\":\"rampart.eval_log.v1\"}\n");
    let err = parse_eval_log(&src, "x.jsonl").unwrap_err();
    assert!(
        matches!(err, DiscoverError::LogLine { line: 11, .. }),
        "{err}"
    );
    let other = logs_jsonl(&attack_logs("default")).replace("rampart.eval_log.v1", "other.v9");
    let err = parse_eval_log(&other, "x.jsonl").unwrap_err();
    assert!(err.to_string().contains("x.jsonl:1"), "{err}");
}
