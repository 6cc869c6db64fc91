//! Turning an accepted candidate into a rule-pack entry (`rules/SCHEMA.md`): a `[[rules]]`
//! table with examples derived from the pattern, parsed, compiled and example-tested with
//! `rampart_rules` before anything is returned.

use crate::error::{DiscoverError, joined};
use crate::record::{PatternCandidate, PatternKind, Recommendation};
use rampart_core::{Category, RiskClass, Strength};
use rampart_normalize::Normalizer;
use rampart_rules::{MatcherBuilder, RulePack, run_examples};
use serde::Serialize;
use std::collections::BTreeSet;

/// Name of a pack created by [`to_rule`] when no pack is given.
pub const DISCOVERED_PACK_NAME: &str = "rampart-discovered";

/// A benign sentence used as the last-resort `must_not_match` example.
const PLAIN_SENTENCE: &str = "What is a good recipe for lentil soup with carrots?";

/// Options of [`to_rule`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToRuleOptions {
    /// Turn an `exclude` candidate into a rule anyway.
    pub force: bool,
    /// The rule id to use (default: the lowest free id of the category's prefix, not used by
    /// the default pack nor by the target pack).
    pub rule_id: Option<String>,
}

/// A rule made from a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleDraft {
    /// The new rule's id.
    pub rule_id: String,
    /// The `[[rules]]` table alone.
    pub rule_toml: String,
    /// The whole pack: the existing pack with the table appended, or a new pack.
    pub pack_toml: String,
    /// Things the caller should tell the user (e.g. the candidate needs review).
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize)]
struct RuleOut {
    id: String,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    patterns: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pattern: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keywords: Option<Vec<String>>,
    case_sensitive: bool,
    token_boundary: bool,
    strength: Strength,
    severity: RiskClass,
    rationale: String,
    tags: Vec<String>,
    must_match: Vec<String>,
    must_not_match: Vec<String>,
}

#[derive(Debug, Serialize)]
struct RulesOnly<'a> {
    rules: [&'a RuleOut; 1],
}

#[derive(Debug, Serialize)]
struct PackMeta {
    name: String,
    version: String,
    description: String,
}

#[derive(Debug, Serialize)]
struct PackOut<'a> {
    schema_version: u32,
    pack: PackMeta,
    rules: [&'a RuleOut; 1],
}

/// Finds the candidate with `pattern_id` in a candidates file's text.
pub fn find_candidate(src: &str, pattern_id: &str) -> Result<PatternCandidate, DiscoverError> {
    for (i, line) in src.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| DiscoverError::BadCandidate {
                line: i + 1,
                message: e.to_string(),
            })?;
        if v.get("pattern_id").and_then(serde_json::Value::as_str) == Some(pattern_id) {
            return serde_json::from_value(v).map_err(|e| DiscoverError::BadCandidate {
                line: i + 1,
                message: e.to_string(),
            });
        }
    }
    Err(DiscoverError::NoSuchCandidate(pattern_id.to_string()))
}

fn pack_err(e: impl std::fmt::Display) -> DiscoverError {
    DiscoverError::Pack(e.to_string())
}

fn compile_errs(errs: Vec<rampart_rules::CompileError>) -> DiscoverError {
    DiscoverError::Pack(joined(&errs))
}

/// Which example candidates a one-rule pack matches: (must_match hits, must_not_match misses).
fn sort_examples(
    rule: &RuleOut,
    yes: &[String],
    no: &[String],
) -> Result<(Vec<String>, Vec<String>), DiscoverError> {
    let probe = RuleOut {
        id: rule.id.clone(),
        kind: rule.kind,
        patterns: rule.patterns.clone(),
        pattern: rule.pattern.clone(),
        keywords: rule.keywords.clone(),
        case_sensitive: rule.case_sensitive,
        token_boundary: rule.token_boundary,
        strength: rule.strength,
        severity: rule.severity,
        rationale: rule.rationale.clone(),
        tags: Vec::new(),
        must_match: vec!["probe".into()],
        must_not_match: vec!["probe".into()],
    };
    let src = new_pack_toml(&probe)?;
    let pack = RulePack::parse(&src, "<to-rule probe>").map_err(pack_err)?;
    let matcher = MatcherBuilder::new()
        .add_pack(pack)
        .build()
        .map_err(compile_errs)?;
    let normalizer = Normalizer::default();
    let hits = |t: &str| !matcher.scan(&normalizer.normalize(t)).hits.is_empty();
    let mut must_match: Vec<String> = Vec::new();
    for y in yes {
        if hits(y) && !must_match.contains(y) {
            must_match.push(y.clone());
        }
    }
    let mut must_not: Vec<String> = Vec::new();
    for n in no {
        if !hits(n) && !must_not.contains(n) {
            must_not.push(n.clone());
        }
    }
    Ok((must_match, must_not))
}

fn new_pack_toml(rule: &RuleOut) -> Result<String, DiscoverError> {
    let pack = PackOut {
        schema_version: rampart_rules::SCHEMA_VERSION,
        pack: PackMeta {
            name: DISCOVERED_PACK_NAME.into(),
            version: "0.1.0".into(),
            description:
                "Rules made from pattern_candidates.v1 records by `rampart discover to-rule`."
                    .into(),
        },
        rules: [rule],
    };
    toml::to_string(&pack).map_err(pack_err)
}

/// Example texts that should match: the value itself, and the value inside a sentence (in
/// upper case when matching ignores case).
fn match_examples(c: &PatternCandidate) -> Vec<String> {
    let v = &c.pattern.value;
    let n = &c.pattern.normalized_value;
    let shown = if c.pattern.case_sensitive {
        v.clone()
    } else {
        v.to_uppercase()
    };
    match c.pattern.pattern_kind {
        PatternKind::KeywordSet => vec![keywords(c).join(" and "), keywords(c).join(", ")],
        PatternKind::Literal => vec![
            format!("Before we start: {shown} and then continue."),
            v.clone(),
            format!("Please read this. {v} Thanks."),
            n.clone(),
        ],
        PatternKind::Regex => {
            // The readable form, then the regex itself, with the first alternative of each
            // group and `\s` as a space; whatever still holds regex syntax will not match and
            // is dropped by the check.
            let mut out = Vec::new();
            for src in [Some(v.as_str()), c.pattern.regex.as_deref()]
                .into_iter()
                .flatten()
            {
                let plain = first_alternatives(src);
                out.push(format!("Before we start: {plain} and then continue."));
                out.push(plain);
            }
            out
        }
    }
}

/// `a (b|c) d` → `a b d`; `\s+`/`\s*`/`\s` → a space; `(?i)`, `(?:`, `^`, `$` dropped.
fn first_alternatives(re: &str) -> String {
    let re = re
        .replace("(?i)", "")
        .replace("(?:", "(")
        .replace("\\s+", " ")
        .replace("\\s*", " ")
        .replace("\\s", " ")
        .replace(['^', '$'], "");
    let mut out = String::new();
    let mut depth_skip = false;
    let mut in_group = false;
    for ch in re.chars() {
        match ch {
            '(' => {
                in_group = true;
                depth_skip = false;
            }
            ')' if in_group => {
                in_group = false;
                depth_skip = false;
            }
            '|' if in_group => depth_skip = true,
            _ if depth_skip => {}
            _ => out.push(ch),
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Near misses that should not match: the words glued with `_`, the value glued inside a
/// longer word (token boundaries), the value without its punctuation (special tokens), a
/// plain sentence.
fn no_match_examples(c: &PatternCandidate) -> Vec<String> {
    let v = &c.pattern.normalized_value;
    let words: Vec<&str> = v
        .split(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = Vec::new();
    if words.len() > 1 {
        out.push(format!("The {} variable is set.", words.join("_")));
    }
    if c.pattern.token_boundary {
        out.push(format!("See the pre{}post entry.", v.replace(' ', "")));
    }
    if !words.is_empty() && words.join(" ") != *v {
        out.push(format!("The {} field in the docs.", words.join(" ")));
    }
    if c.pattern.pattern_kind == PatternKind::KeywordSet
        && let Some(first) = keywords(c).first()
    {
        out.push(format!("Only {first} here."));
    }
    out.push(PLAIN_SENTENCE.to_string());
    out
}

fn keywords(c: &PatternCandidate) -> Vec<String> {
    c.pattern
        .normalized_value
        .split(',')
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect()
}

fn rationale(c: &PatternCandidate) -> String {
    let names: Vec<&str> = c
        .evidence
        .datasets
        .iter()
        .map(|d| d.dataset_name.as_str())
        .collect();
    let b = &c.evidence.benign_regression;
    format!(
        "Discovered by rampart discover (candidate {} of {}, config {}, policy {}): in {} missed and {} caught attacks ({}); {} of {} {} prompts; recommended {}.",
        c.pattern_id,
        c.run.eval_run_id,
        c.run.model.name,
        c.run.guardrail.policy_version,
        c.evidence.false_negatives(),
        c.evidence.true_positives(),
        names.join(", "),
        b.match_count_total,
        b.sample_count_total,
        b.dataset_name,
        c.decision.recommendation.name()
    )
}

/// Turns a candidate into a rule-pack entry. `existing` is the text of the pack to append to
/// (and its origin for messages), or `None` for a new pack. The rule, and the whole resulting
/// pack, are parsed, compiled (together with the default pack, so ids cannot clash) and
/// example-tested before anything is returned.
pub fn to_rule(
    c: &PatternCandidate,
    existing: Option<(&str, &str)>,
    opts: &ToRuleOptions,
) -> Result<RuleDraft, DiscoverError> {
    if c.decision.recommendation == Recommendation::Exclude && !opts.force {
        return Err(DiscoverError::Excluded {
            id: c.pattern_id.clone(),
            reason: c.decision.reason.clone(),
        });
    }
    let mut notes = Vec::new();
    if c.decision.recommendation != Recommendation::Include || c.decision.requires_review {
        notes.push(format!(
            "candidate {} is recommended `{}`{}: {}",
            c.pattern_id,
            c.decision.recommendation.name(),
            if c.decision.requires_review {
                " and requires review"
            } else {
                ""
            },
            c.decision.reason
        ));
    }
    let default = RulePack::default_pack().map_err(pack_err)?;
    let target = match existing {
        Some((src, origin)) => Some(RulePack::parse(src, origin).map_err(pack_err)?),
        None => None,
    };
    let taken: BTreeSet<&str> = default
        .rules
        .iter()
        .chain(target.iter().flat_map(|p| p.rules.iter()))
        .map(|r| r.id.as_str())
        .collect();
    let rule_id = match &opts.rule_id {
        Some(id) => {
            if Category::from_rule_id(id) != Some(c.category) {
                return Err(DiscoverError::Pack(format!(
                    "rule id {id:?} must be {}_NNN for category {}",
                    c.category.prefix(),
                    c.category
                )));
            }
            if taken.contains(id.as_str()) {
                return Err(DiscoverError::Pack(format!(
                    "rule id {id:?} is already used by the default pack or the target pack"
                )));
            }
            id.clone()
        }
        None => (1..=999)
            .filter(|n| !(c.category == Category::EncodingObfuscation && *n >= 900))
            .map(|n| format!("{}_{n:03}", c.category.prefix()))
            .find(|id| !taken.contains(id.as_str()))
            .ok_or_else(|| {
                DiscoverError::Pack(format!("no free {}_NNN rule id", c.category.prefix()))
            })?,
    };
    let (kind, patterns, pattern, kws) = match c.pattern.pattern_kind {
        PatternKind::Literal => (
            "literal",
            Some(vec![if c.pattern.case_sensitive {
                c.pattern.value.clone()
            } else {
                c.pattern.normalized_value.clone()
            }]),
            None,
            None,
        ),
        PatternKind::Regex => {
            let re = c.pattern.regex.clone().ok_or_else(|| {
                DiscoverError::Pack(format!(
                    "{}: pattern_kind regex without a regex",
                    c.pattern_id
                ))
            })?;
            ("regex", None, Some(re), None)
        }
        PatternKind::KeywordSet => ("keyword_set", None, None, Some(keywords(c))),
    };
    let mut rule = RuleOut {
        id: rule_id.clone(),
        kind,
        patterns,
        pattern,
        keywords: kws,
        case_sensitive: c.pattern.case_sensitive,
        token_boundary: c.pattern.token_boundary,
        strength: c.pattern.signal_strength,
        severity: c.pattern.severity_hint,
        rationale: rationale(c),
        tags: vec!["discovered".into()],
        must_match: Vec::new(),
        must_not_match: Vec::new(),
    };
    let (yes, no) = sort_examples(&rule, &match_examples(c), &no_match_examples(c))?;
    if yes.is_empty() {
        return Err(DiscoverError::NoExample {
            id: c.pattern_id.clone(),
            which: "must_match",
            message: format!(
                "none of the texts made from the pattern value {:?} matches the rule",
                c.pattern.value
            ),
        });
    }
    if no.is_empty() {
        return Err(DiscoverError::NoExample {
            id: c.pattern_id.clone(),
            which: "must_not_match",
            message: "every near miss tried matches the rule (it matches almost anything)".into(),
        });
    }
    rule.must_match = yes.into_iter().take(2).collect();
    rule.must_not_match = no.into_iter().take(2).collect();

    let rule_toml = toml::to_string(&RulesOnly { rules: [&rule] }).map_err(pack_err)?;
    let (pack_toml, origin) = match existing {
        Some((src, origin)) => {
            let sep = if src.ends_with('\n') { "\n" } else { "\n\n" };
            (format!("{src}{sep}{rule_toml}"), origin.to_string())
        }
        None => (new_pack_toml(&rule)?, "<new pack>".to_string()),
    };
    // The result must pass `rampart rules check` and `rampart rules test`, alone and next to
    // the default pack.
    let pack = RulePack::parse(&pack_toml, &origin).map_err(pack_err)?;
    MatcherBuilder::new()
        .add_pack(default)
        .add_pack(pack.clone())
        .build()
        .map_err(compile_errs)?;
    let matcher = MatcherBuilder::new()
        .add_pack(pack)
        .build()
        .map_err(compile_errs)?;
    let report = run_examples(&matcher, &Normalizer::default());
    if !report.failures.is_empty() {
        return Err(DiscoverError::Pack(joined(&report.failures)));
    }
    Ok(RuleDraft {
        rule_id,
        rule_toml,
        pack_toml,
        notes,
    })
}
