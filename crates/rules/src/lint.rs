//! Warnings about rules that are valid but likely to misbehave.

use crate::schema::{RuleMatch, RulePack};
use crate::types::RuleScope;
use rampart_core::Location;
use rampart_core::{RiskClass, Strength};
use std::collections::BTreeMap;
use std::fmt;

/// Literals shorter than this (after folding) without a token boundary are flagged.
pub const MIN_LITERAL_LEN: usize = 4;

/// One lint warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LintWarning {
    /// Where the rule is defined.
    pub location: Location,
    /// The rule.
    pub rule_id: String,
    /// What looks wrong.
    pub message: String,
}

impl fmt::Display for LintWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: warning: rule {}: {}",
            self.location, self.rule_id, self.message
        )
    }
}

fn has_cjk(s: &str) -> bool {
    s.chars().any(|c| {
        matches!(c as u32,
            0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
    })
}

/// Lints every rule of the given packs. Warnings are sorted by rule ID.
pub fn lint(packs: &[RulePack]) -> Vec<LintWarning> {
    let mut out = Vec::new();
    // folded literal -> first rule using it
    let mut literal_owner: BTreeMap<String, String> = BTreeMap::new();
    // regex pattern -> first rule using it, with its scope
    let mut regex_owner: BTreeMap<String, (String, RuleScope)> = BTreeMap::new();
    for pack in packs {
        for rule in &pack.rules {
            let mut warn = |message: String| {
                out.push(LintWarning {
                    location: rule.location.clone(),
                    rule_id: rule.id.clone(),
                    message,
                })
            };
            if rule.strength == Strength::Weak && rule.severity == RiskClass::HighRisk {
                warn("weak rule with severity high_risk: weak signals never escalate alone".into());
            }
            if rule.owasp.is_empty() {
                warn("no OWASP id: add `owasp = [\"LLM01\", …]` (OWASP Top 10 for LLM Applications 2025) or a `[pack] owasp` default".into());
            }
            if rule.rationale.trim().len() < 20 {
                warn("rationale is very short; say why the pattern indicates an attack".into());
            }
            if rule.must_match.len() < 2 || rule.must_not_match.len() < 2 {
                warn("fewer than two must_match or must_not_match examples".into());
            }
            if let RuleMatch::Regex { pattern } = &rule.matcher {
                if pattern.contains("\\b") {
                    warn("regex uses \\b; set token_boundary = true instead (Unicode-aware, keeps the DFA fast)".into());
                }
                if pattern.contains(".*") || pattern.contains(".+") {
                    warn(
                        "unbounded .* / .+ in regex; prefer a bounded repetition like .{0,80}?"
                            .into(),
                    );
                }
                if crate::anchors::regex_anchors(pattern, rule.case_sensitive).is_none() {
                    warn("regex has no required literal of 3+ bytes: it runs on every view instead of only where its anchor occurs".into());
                }
                if rule.token_boundary && has_cjk(pattern) {
                    warn("CJK pattern with token_boundary = true will rarely match (CJK has no spaces)".into());
                }
                match regex_owner.get(pattern) {
                    // A data rule that repeats an any-scope rule adds nothing, and two rules
                    // with the same regex double-count one signal.
                    Some((owner, scope)) if owner != &rule.id => warn(format!(
                        "regex is also used by rule {owner} (scope {scope}, this rule scope {})",
                        rule.scope
                    )),
                    Some(_) => {}
                    None => {
                        regex_owner.insert(pattern.clone(), (rule.id.clone(), rule.scope));
                    }
                }
            }
            for (lit, folded) in rule.matched_literals() {
                if !rule.case_sensitive
                    && folded != lit.trim()
                    && folded != lit.trim().to_lowercase()
                {
                    warn(format!(
                        "pattern {lit:?} folds to {folded:?}; write it folded"
                    ));
                }
                if folded.chars().count() < MIN_LITERAL_LEN && !rule.token_boundary {
                    warn(format!(
                        "literal {lit:?} is very short and has no token boundary"
                    ));
                }
                if rule.token_boundary && has_cjk(lit) {
                    warn(format!(
                        "CJK literal {lit:?} with token_boundary = true will rarely match"
                    ));
                }
                if let Some(owner) = literal_owner.get(&folded) {
                    if owner != &rule.id {
                        warn(format!("literal {lit:?} is also used by rule {owner}"));
                    }
                } else {
                    literal_owner.insert(folded, rule.id.clone());
                }
            }
        }
    }
    out.sort_by(|a, b| a.rule_id.cmp(&b.rule_id));
    out
}
