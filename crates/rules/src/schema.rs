//! The rule-pack file format (`schema_version = 1`, TOML) and its validation.

use crate::error::{PackError, PackErrors};
use crate::types::{RuleKind, RuleScope};
use rampart_core::Location;
use rampart_core::{Category, Owasp, RiskClass, Strength};
use rampart_normalize::fold_pattern;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use toml::Spanned;

/// The only schema version this crate reads.
pub const SCHEMA_VERSION: u32 = 1;

/// Default `window` of a keyword set, in bytes of the view.
pub const DEFAULT_KEYWORD_WINDOW: usize = 120;

/// The default pack's source, compiled into every binary.
pub const DEFAULT_PACK_SRC: &str = include_str!("../../../rules/default.toml");

/// Origin string used for the embedded default pack in error messages.
pub const DEFAULT_PACK_ORIGIN: &str = "<embedded>/rules/default.toml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    schema_version: Spanned<u32>,
    pack: RawPackMeta,
    #[serde(default)]
    rules: Vec<Spanned<RawRule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPackMeta {
    name: String,
    version: String,
    #[serde(default)]
    description: String,
    /// Category prefixes (`"BND"`, …) whose every rule needs judgement.
    #[serde(default)]
    needs_judgement: Vec<String>,
    /// OWASP ids for the pack's rules that name none of their own.
    #[serde(default)]
    owasp: Vec<Owasp>,
    /// A rule without OWASP ids (its own or the pack's) is an error, not a lint warning.
    #[serde(default)]
    require_owasp: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: Spanned<String>,
    kind: RuleKind,
    patterns: Option<Vec<String>>,
    pattern: Option<String>,
    keywords: Option<Vec<String>>,
    min_distinct: Option<usize>,
    window: Option<usize>,
    #[serde(default)]
    case_sensitive: bool,
    #[serde(default = "default_true")]
    token_boundary: bool,
    strength: Strength,
    severity: RiskClass,
    #[serde(default)]
    scope: RuleScope,
    rationale: String,
    #[serde(default)]
    languages: Vec<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    must_match: Vec<String>,
    #[serde(default)]
    must_not_match: Vec<String>,
    #[serde(default)]
    needs_judgement: bool,
    owasp: Option<Vec<Owasp>>,
}

fn default_true() -> bool {
    true
}

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleMatch {
    /// Alternative literals (as written; folded at compile time when case-insensitive).
    Literal {
        /// The alternatives.
        patterns: Vec<String>,
    },
    /// One regular expression.
    Regex {
        /// The expression.
        pattern: String,
    },
    /// Co-occurring keywords.
    KeywordSet {
        /// The keywords.
        keywords: Vec<String>,
        /// How many different keywords must occur.
        min_distinct: usize,
        /// Within how many bytes of each other.
        window: usize,
    },
}

impl RuleMatch {
    /// The kind of this matcher.
    pub fn kind(&self) -> RuleKind {
        match self {
            RuleMatch::Literal { .. } => RuleKind::Literal,
            RuleMatch::Regex { .. } => RuleKind::Regex,
            RuleMatch::KeywordSet { .. } => RuleKind::KeywordSet,
        }
    }

    /// The literal strings this matcher searches for, as written: a literal rule's
    /// patterns, a keyword set's keywords; none for a regex.
    pub fn literals(&self) -> &[String] {
        match self {
            RuleMatch::Literal { patterns } => patterns,
            RuleMatch::KeywordSet { keywords, .. } => keywords,
            RuleMatch::Regex { .. } => &[],
        }
    }
}

/// One validated rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Stable ID, `PREFIX_NNN`.
    pub id: String,
    /// Category, from the ID prefix.
    pub category: Category,
    /// What it matches.
    pub matcher: RuleMatch,
    /// Whether matching is case-sensitive (then it runs on cased views only).
    pub case_sensitive: bool,
    /// Whether a match must not touch a letter, digit or `_` on either side.
    pub token_boundary: bool,
    /// Weak or strong.
    pub strength: Strength,
    /// Severity hint.
    pub severity: RiskClass,
    /// Which segments the rule applies to (enforced by the pipeline's rule layer; the
    /// matcher and the example runner match every text).
    pub scope: RuleScope,
    /// Why this pattern indicates an attack.
    pub rationale: String,
    /// Languages (ISO 639-1), or empty for any.
    pub languages: Vec<String>,
    /// Free-form labels.
    pub tags: Vec<String>,
    /// Examples that must produce a hit of this rule.
    pub must_match: Vec<String>,
    /// Examples that must not produce a hit of this rule.
    pub must_not_match: Vec<String>,
    /// A hit is a case for the judge: an intent layer's trigger contract asks it whenever
    /// this rule fires (`needs_judgement = true` on the rule, or its category listed in the
    /// pack's `needs_judgement`).
    pub needs_judgement: bool,
    /// The OWASP Top 10 for LLM Applications (2025) risks the rule addresses: its own
    /// `owasp`, else the pack's, sorted and deduplicated. Empty when neither names any.
    pub owasp: Vec<Owasp>,
    /// Where the rule is defined.
    pub location: Location,
}

impl Rule {
    /// `literal` in the form the rule's automaton searches for: folded the way the
    /// normalizer folds text ([`fold_pattern`]), or as written when the rule is
    /// case-sensitive (it then runs on the cased views).
    pub fn matched_form(&self, literal: &str) -> String {
        if self.case_sensitive {
            literal.to_string()
        } else {
            fold_pattern(literal)
        }
    }

    /// Each of the rule's literals ([`RuleMatch::literals`]), as written, with its
    /// [`matched_form`](Rule::matched_form), in order.
    pub fn matched_literals(&self) -> impl Iterator<Item = (&str, String)> {
        self.matcher
            .literals()
            .iter()
            .map(|l| (l.as_str(), self.matched_form(l)))
    }
}

/// A parsed and validated rule pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulePack {
    /// Pack name.
    pub name: String,
    /// Pack version.
    pub version: String,
    /// Pack description.
    pub description: String,
    /// Where it came from (a path, or the embedded marker).
    pub origin: String,
    /// The pack's default OWASP ids (`[pack] owasp`), for rules that name none.
    pub owasp: Vec<Owasp>,
    /// The rules, in file order.
    pub rules: Vec<Rule>,
}

impl RulePack {
    /// The default pack compiled into the binary.
    pub fn default_pack() -> Result<RulePack, PackErrors> {
        RulePack::parse(DEFAULT_PACK_SRC, DEFAULT_PACK_ORIGIN)
    }

    /// Reads and parses a pack file.
    pub fn from_path(path: &Path) -> Result<RulePack, PackErrors> {
        let origin = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|e| {
            PackErrors(vec![PackError::Io {
                origin: origin.clone(),
                message: e.to_string(),
            }])
        })?;
        RulePack::parse(&src, &origin)
    }

    /// Parses and validates a pack. Reports every invalid rule, not just the first.
    pub fn parse(src: &str, origin: &str) -> Result<RulePack, PackErrors> {
        let raw: RawFile = toml::from_str(src).map_err(|e| {
            let loc = Location::from_span(origin, src, e.span().map(|s| s.start).unwrap_or(0));
            PackErrors(vec![PackError::Syntax {
                location: loc,
                message: e.message().trim().to_string(),
            }])
        })?;
        let mut errors = Vec::new();
        if *raw.schema_version.get_ref() != SCHEMA_VERSION {
            errors.push(PackError::SchemaVersion {
                location: Location::from_span(origin, src, raw.schema_version.span().start),
                found: *raw.schema_version.get_ref(),
            });
        }
        if raw.pack.name.is_empty()
            || !raw
                .pack
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            errors.push(PackError::Invalid {
                location: Location::from_span(origin, src, 0),
                rule_id: None,
                message: format!("pack name {:?} must match [a-z0-9_-]+", raw.pack.name),
            });
        }
        let mut judged = Vec::new();
        for prefix in &raw.pack.needs_judgement {
            match Category::from_prefix(prefix) {
                Some(c) => judged.push(c),
                None => errors.push(PackError::Invalid {
                    location: Location::from_span(origin, src, 0),
                    rule_id: None,
                    message: format!(
                        "pack.needs_judgement: unknown category prefix {prefix:?} (known: {})",
                        Category::ALL.map(Category::prefix).join(", ")
                    ),
                }),
            }
        }
        let pack_owasp = sorted_owasp(raw.pack.owasp.clone());
        let mut seen: BTreeMap<String, Location> = BTreeMap::new();
        let mut rules = Vec::with_capacity(raw.rules.len());
        let lines = crate::error::LineIndex::new(src);
        for spanned in raw.rules {
            let location = lines.location(origin, spanned.span().start);
            let raw_rule = spanned.into_inner();
            let id = raw_rule.id.get_ref().clone();
            if let Some(first) = seen.get(&id) {
                errors.push(PackError::DuplicateId {
                    location: location.clone(),
                    rule_id: id.clone(),
                    first: first.clone(),
                });
                continue;
            }
            seen.insert(id.clone(), location.clone());
            match validate_rule(raw_rule, location) {
                Ok(mut rule) => {
                    rule.needs_judgement |= judged.contains(&rule.category);
                    if rule.owasp.is_empty() {
                        rule.owasp = pack_owasp.clone();
                    }
                    if rule.owasp.is_empty() && raw.pack.require_owasp {
                        errors.push(PackError::Invalid {
                            location: rule.location.clone(),
                            rule_id: Some(rule.id.clone()),
                            message: "no OWASP id: the pack sets require_owasp, so every rule \
                                      needs `owasp = [\"LLM01\", …]` (or a `[pack] owasp` default)"
                                .into(),
                        });
                    }
                    rules.push(rule)
                }
                Err(mut errs) => errors.append(&mut errs),
            }
        }
        if !errors.is_empty() {
            return Err(PackErrors(errors));
        }
        Ok(RulePack {
            name: raw.pack.name,
            version: raw.pack.version,
            description: raw.pack.description,
            origin: origin.to_string(),
            owasp: pack_owasp,
            rules,
        })
    }
}

fn sorted_owasp(mut ids: Vec<Owasp>) -> Vec<Owasp> {
    ids.sort();
    ids.dedup();
    ids
}

fn validate_rule(raw: RawRule, location: Location) -> Result<Rule, Vec<PackError>> {
    let id = raw.id.get_ref().clone();
    let mut errors = Vec::new();
    let err = |message: String| PackError::Invalid {
        location: location.clone(),
        rule_id: Some(id.clone()),
        message,
    };
    let category = Category::from_rule_id(&id);
    if category.is_none() {
        errors.push(err(format!(
            "rule id {id:?} must be PREFIX_NNN with a prefix among SYS, CTRL, CRED, BND, ROLE, ENC, OTH"
        )));
    }
    if id.starts_with("ENC_9") && id.len() == 7 {
        errors.push(err(format!(
            "rule id {id:?}: ENC_900 to ENC_999 are reserved for built-in normalization signals"
        )));
    }
    let matcher = match raw.kind {
        RuleKind::Literal => {
            if raw.pattern.is_some() || raw.keywords.is_some() {
                errors.push(err("kind = \"literal\" takes `patterns` only".into()));
            }
            match raw.patterns {
                Some(p) if !p.is_empty() => Some(RuleMatch::Literal { patterns: p }),
                _ => {
                    errors.push(err("kind = \"literal\" needs a non-empty `patterns`".into()));
                    None
                }
            }
        }
        RuleKind::Regex => {
            if raw.patterns.is_some() || raw.keywords.is_some() {
                errors.push(err("kind = \"regex\" takes `pattern` only".into()));
            }
            match raw.pattern {
                Some(p) if !p.is_empty() => Some(RuleMatch::Regex { pattern: p }),
                _ => {
                    errors.push(err("kind = \"regex\" needs a non-empty `pattern`".into()));
                    None
                }
            }
        }
        RuleKind::KeywordSet => {
            if raw.pattern.is_some() || raw.patterns.is_some() {
                errors.push(err("kind = \"keyword_set\" takes `keywords` only".into()));
            }
            let min_distinct = raw.min_distinct.unwrap_or(2);
            let window = raw.window.unwrap_or(DEFAULT_KEYWORD_WINDOW);
            match raw.keywords {
                Some(k) if k.len() >= 2 && min_distinct >= 2 && min_distinct <= k.len() => {
                    Some(RuleMatch::KeywordSet {
                        keywords: k,
                        min_distinct,
                        window,
                    })
                }
                _ => {
                    errors.push(err(
                        "kind = \"keyword_set\" needs >= 2 `keywords` and 2 <= min_distinct <= number of keywords"
                            .into(),
                    ));
                    None
                }
            }
        }
    };
    if raw.kind != RuleKind::KeywordSet && (raw.min_distinct.is_some() || raw.window.is_some()) {
        errors.push(err(
            "`min_distinct`/`window` apply to keyword_set rules only".into(),
        ));
    }
    if matcher
        .as_ref()
        .is_some_and(|m| m.literals().iter().any(|p| p.trim().is_empty()))
    {
        errors.push(err("empty literal pattern".into()));
    }
    if raw.rationale.trim().is_empty() {
        errors.push(err("`rationale` must not be empty".into()));
    }
    if raw.must_match.is_empty() || raw.must_not_match.is_empty() {
        errors.push(err(
            "every rule needs at least one `must_match` and one `must_not_match` example".into(),
        ));
    }
    match (category, matcher) {
        (Some(category), Some(matcher)) if errors.is_empty() => Ok(Rule {
            id,
            category,
            matcher,
            case_sensitive: raw.case_sensitive,
            token_boundary: raw.token_boundary,
            strength: raw.strength,
            severity: raw.severity,
            scope: raw.scope,
            rationale: raw.rationale,
            languages: raw.languages,
            tags: raw.tags,
            must_match: raw.must_match,
            must_not_match: raw.must_not_match,
            needs_judgement: raw.needs_judgement,
            owasp: sorted_owasp(raw.owasp.unwrap_or_default()),
            location,
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matched_literals_are_folded_unless_the_rule_is_case_sensitive() {
        let src = r#"
schema_version = 1
[pack]
name = "t"
version = "1"

[[rules]]
id = "CTRL_001"
kind = "literal"
patterns = ["Ignore  ＰＲＥＶＩＯＵＳ"]
strength = "strong"
severity = "high_risk"
rationale = "x"
must_match = ["x"]
must_not_match = ["y"]

[[rules]]
id = "CRED_001"
kind = "keyword_set"
keywords = ["Api_Key", "SECRET"]
case_sensitive = true
strength = "strong"
severity = "high_risk"
rationale = "x"
must_match = ["x"]
must_not_match = ["y"]

[[rules]]
id = "SYS_001"
kind = "regex"
pattern = "Sys(tem)?:"
strength = "strong"
severity = "high_risk"
rationale = "x"
must_match = ["x"]
must_not_match = ["y"]
"#;
        let pack = RulePack::parse(src, "t.toml").expect("the test pack parses");
        let matched: Vec<Vec<(&str, String)>> = pack
            .rules
            .iter()
            .map(|r| r.matched_literals().collect())
            .collect();
        assert_eq!(
            matched,
            vec![
                vec![("Ignore  ＰＲＥＶＩＯＵＳ", "ignore previous".to_string())],
                vec![
                    ("Api_Key", "Api_Key".to_string()),
                    ("SECRET", "SECRET".to_string())
                ],
                vec![],
            ]
        );
    }

    const SCOPED: &str = r#"
schema_version = 1
[pack]
name = "t"
version = "1"

[[rules]]
id = "OTH_001"
kind = "literal"
patterns = ["do not tell the user"]
scope = "SCOPE"
strength = "strong"
severity = "medium_risk"
rationale = "x"
must_match = ["x"]
must_not_match = ["y"]

[[rules]]
id = "OTH_002"
kind = "literal"
patterns = ["keep this secret"]
strength = "weak"
severity = "low_risk"
rationale = "x"
must_match = ["x"]
must_not_match = ["y"]
"#;

    #[test]
    fn scope_defaults_to_any_and_accepts_data() {
        for (written, want) in [("any", RuleScope::Any), ("data", RuleScope::Data)] {
            let pack = RulePack::parse(&SCOPED.replace("SCOPE", written), "t.toml")
                .expect("the test pack parses");
            let scopes: Vec<RuleScope> = pack.rules.iter().map(|r| r.scope).collect();
            assert_eq!(scopes, vec![want, RuleScope::Any]);
        }
    }

    #[test]
    fn unknown_scope_is_an_error_that_names_the_allowed_values() {
        let err = RulePack::parse(&SCOPED.replace("SCOPE", "tool"), "t.toml")
            .expect_err("an unknown scope is refused")
            .to_string();
        assert!(err.contains("t.toml:"), "{err}");
        assert!(
            err.contains("unknown variant `tool`")
                && err.contains("`any`")
                && err.contains("`data`"),
            "{err}"
        );
    }

    const OWASP: &str = r#"
schema_version = 1
[pack]
name = "t"
version = "1"
PACK

[[rules]]
id = "SYS_015"
RULE
kind = "literal"
patterns = ["reveal your system prompt"]
strength = "strong"
severity = "medium_risk"
rationale = "x"
must_match = ["x"]
must_not_match = ["y"]

[[rules]]
id = "CRED_001"
kind = "literal"
patterns = ["sk-test"]
strength = "strong"
severity = "medium_risk"
rationale = "x"
must_match = ["x"]
must_not_match = ["y"]
"#;

    fn owasp_pack(pack: &str, rule: &str) -> Result<RulePack, PackErrors> {
        RulePack::parse(&OWASP.replace("PACK", pack).replace("RULE", rule), "t.toml")
    }

    #[test]
    fn owasp_ids_are_sorted_deduplicated_and_the_pack_default_fills_rules_without_their_own() {
        let pack = owasp_pack(
            r#"owasp = ["LLM02"]"#,
            r#"owasp = ["LLM07", "LLM01", "LLM07"]"#,
        )
        .expect("the test pack parses");
        let ids: Vec<Vec<Owasp>> = pack.rules.iter().map(|r| r.owasp.clone()).collect();
        assert_eq!(
            ids,
            vec![vec![Owasp::Llm01, Owasp::Llm07], vec![Owasp::Llm02]]
        );
        assert_eq!(pack.owasp, vec![Owasp::Llm02]);
    }

    #[test]
    fn an_owasp_id_outside_the_2025_list_is_an_error() {
        for bad in ["LLM11", "LLM00", "llm01", "LLM1"] {
            let err = owasp_pack("", &format!("owasp = [{bad:?}]"))
                .expect_err("an unknown OWASP id is refused")
                .to_string();
            assert!(
                err.contains("t.toml:") && err.contains(&format!("unknown variant `{bad}`")),
                "{err}"
            );
            assert!(err.contains("`LLM01`") && err.contains("`LLM10`"), "{err}");
        }
        let err = owasp_pack(r#"owasp = ["LLM11"]"#, "")
            .expect_err("an unknown pack default is refused")
            .to_string();
        assert!(err.contains("unknown variant `LLM11`"), "{err}");
    }

    #[test]
    fn a_rule_without_owasp_ids_is_an_error_only_when_the_pack_requires_them() {
        let pack = owasp_pack("", r#"owasp = ["LLM07"]"#).expect("missing ids are allowed");
        assert!(pack.rules[1].owasp.is_empty());
        let warnings = crate::lint(&[pack]);
        assert!(
            warnings
                .iter()
                .any(|w| w.rule_id == "CRED_001" && w.message.contains("no OWASP id")),
            "{warnings:?}"
        );
        let err = owasp_pack("require_owasp = true", r#"owasp = ["LLM07"]"#)
            .expect_err("require_owasp refuses a rule without ids")
            .to_string();
        assert!(
            err.contains("CRED_001") && err.contains("no OWASP id"),
            "{err}"
        );
        assert!(!err.contains("SYS_015"), "{err}");
        owasp_pack("require_owasp = true\nowasp = [\"LLM02\"]", "")
            .expect("a pack default satisfies require_owasp");
    }
}
