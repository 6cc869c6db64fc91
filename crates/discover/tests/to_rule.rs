//! Candidate → rule-pack entry, round-tripped through the rule-pack parser and matcher.

#![allow(clippy::unwrap_used)]

use crate::common::*;
use rampart_core::{Category, Strength};
use rampart_discover::{
    DiscoverError, PatternCandidate, PatternKind, Recommendation, ToRuleOptions, find_candidate,
    to_jsonl, to_rule,
};
use rampart_normalize::Normalizer;
use rampart_rules::{MatcherBuilder, RuleMatch, RulePack, run_examples};

fn top() -> PatternCandidate {
    mine_fixture().candidates.remove(0)
}

fn matches(pack: &RulePack, text: &str) -> bool {
    let m = MatcherBuilder::new()
        .add_pack(pack.clone())
        .build()
        .unwrap();
    !m.scan(&Normalizer::default().normalize(text))
        .hits
        .is_empty()
}

#[test]
fn a_mined_candidate_round_trips_through_the_rule_pack_parser() {
    let c = top();
    assert_eq!(c.pattern.value, PHRASE);
    let draft = to_rule(&c, None, &ToRuleOptions::default()).unwrap();
    assert!(draft.notes.is_empty(), "{:?}", draft.notes);
    let pack = RulePack::parse(&draft.pack_toml, "new.toml").unwrap();
    assert_eq!(pack.name, "rampart-discovered");
    let [rule] = pack.rules.as_slice() else {
        panic!("one rule expected")
    };
    assert_eq!(rule.id, draft.rule_id);
    assert_eq!(rule.category, Category::Other);
    // The default pack's OTH_ ids are taken; the new id is the lowest free one.
    let default = RulePack::default_pack().unwrap();
    assert!(default.rules.iter().all(|r| r.id != rule.id));
    assert!(rule.id.starts_with("OTH_"));
    assert_eq!(
        rule.matcher,
        RuleMatch::Literal {
            patterns: vec![PHRASE.to_string()]
        }
    );
    assert!(rule.token_boundary && !rule.case_sensitive);
    assert_eq!(rule.strength, Strength::Strong);
    assert!(!rule.must_match.is_empty() && !rule.must_not_match.is_empty());
    assert!(
        rule.must_match
            .iter()
            .any(|m| m.contains(&PHRASE.to_uppercase()))
    );
    assert!(rule.rationale.contains("eval_20261201_101500"));
    assert!(rule.tags.contains(&"discovered".to_string()));
    // `rampart rules test`: every example behaves.
    let m = MatcherBuilder::new()
        .add_pack(pack.clone())
        .build()
        .unwrap();
    let report = run_examples(&m, &Normalizer::default());
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert!(report.total >= 2);
    // And it catches the prompts it was mined from.
    for (_, text, _) in attack_rows().iter().take(6) {
        assert!(matches(&pack, text), "{text}");
    }
    // Loads next to the default pack (no id clash).
    MatcherBuilder::new()
        .add_pack(default)
        .add_pack(pack)
        .build()
        .unwrap();
}

#[test]
fn a_candidate_is_found_by_id_in_a_written_file() {
    let out = mine_fixture();
    let file = to_jsonl(&out.candidates).unwrap();
    let c = find_candidate(&file, "OTH_001").unwrap();
    assert_eq!(c, out.candidates[0]);
    assert!(matches!(
        find_candidate(&file, "OTH_999"),
        Err(DiscoverError::NoSuchCandidate(_))
    ));
}

#[test]
fn excluded_candidates_are_refused_unless_forced() {
    let out = mine_fixture();
    let kindly = out
        .candidates
        .iter()
        .find(|c| c.pattern.value == "kindly")
        .unwrap();
    assert_eq!(kindly.decision.recommendation, Recommendation::Exclude);
    let err = to_rule(kindly, None, &ToRuleOptions::default()).unwrap_err();
    assert!(matches!(err, DiscoverError::Excluded { .. }), "{err}");
    let forced = ToRuleOptions {
        force: true,
        ..ToRuleOptions::default()
    };
    let draft = to_rule(kindly, None, &forced).unwrap();
    assert!(!draft.notes.is_empty(), "an exclude candidate is noted");
    let pack = RulePack::parse(&draft.pack_toml, "forced.toml").unwrap();
    assert!(matches(&pack, "Could you KINDLY help?"));
    assert!(!matches(&pack, "unkindly"));
}

#[test]
fn appending_to_an_existing_pack_keeps_it_valid_and_picks_a_free_id() {
    let c = top();
    let first = to_rule(&c, None, &ToRuleOptions::default()).unwrap();
    // Append the second candidate to the pack holding the first.
    let second_c = mine_fixture().candidates.remove(1);
    let second = to_rule(
        &second_c,
        Some((&first.pack_toml, "pack.toml")),
        &ToRuleOptions::default(),
    )
    .unwrap();
    assert_ne!(second.rule_id, first.rule_id);
    assert!(second.pack_toml.starts_with(&first.pack_toml));
    let pack = RulePack::parse(&second.pack_toml, "pack.toml").unwrap();
    assert_eq!(pack.rules.len(), 2);
    let m = MatcherBuilder::new().add_pack(pack).build().unwrap();
    assert!(run_examples(&m, &Normalizer::default()).failures.is_empty());
}

#[test]
fn an_explicit_rule_id_must_fit_the_category_and_be_free() {
    let c = top();
    let opts = |id: &str| ToRuleOptions {
        force: false,
        rule_id: Some(id.to_string()),
    };
    let d = to_rule(&c, None, &opts("OTH_500")).unwrap();
    assert_eq!(d.rule_id, "OTH_500");
    assert!(d.pack_toml.contains("id = \"OTH_500\""));
    assert!(matches!(
        to_rule(&c, None, &opts("SYS_500")),
        Err(DiscoverError::Pack(_))
    ));
    assert!(matches!(
        to_rule(&c, None, &opts("OTH_001")),
        Err(DiscoverError::Pack(_))
    ));
}

#[test]
fn special_tokens_and_regexes_become_rules_too() {
    // The spec's example candidate, a special token without word boundaries.
    let mut c = top();
    c.pattern_id = "SYS_001".into();
    c.category = Category::SystemMarker;
    c.pattern.value = "<<sys>>".into();
    c.pattern.normalized_value = "<<sys>>".into();
    c.pattern.token_boundary = false;
    let d = to_rule(&c, None, &ToRuleOptions::default()).unwrap();
    let pack = RulePack::parse(&d.pack_toml, "sys.toml").unwrap();
    assert!(pack.rules[0].id.starts_with("SYS_"));
    assert!(matches(&pack, "x<<SYS>>y"));
    assert!(!matches(&pack, "The sys field in the docs."));

    c.pattern.pattern_kind = PatternKind::Regex;
    c.pattern.value = "crimson lantern (sequence|protocol)".into();
    c.pattern.normalized_value = c.pattern.value.clone();
    c.pattern.regex = Some(r"crimson\s+lantern\s+(sequence|protocol)".into());
    c.pattern.token_boundary = true;
    let d = to_rule(&c, None, &ToRuleOptions::default()).unwrap();
    let pack = RulePack::parse(&d.pack_toml, "re.toml").unwrap();
    assert!(matches!(pack.rules[0].matcher, RuleMatch::Regex { .. }));
    assert!(matches(&pack, "the crimson lantern protocol"));

    // A regex that the value cannot illustrate: no must_match example, a clear error.
    c.pattern.regex = Some(r"zz[0-9]{4}qq".into());
    let err = to_rule(&c, None, &ToRuleOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            DiscoverError::NoExample {
                which: "must_match",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_broken_target_pack_is_reported() {
    let err = to_rule(
        &top(),
        Some(("not = [toml", "bad.toml")),
        &ToRuleOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, DiscoverError::Pack(_)), "{err}");
}
