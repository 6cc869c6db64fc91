//! Per-category signal strength 0–3, and how category strengths combine into a risk class.
//!
//! | signals                                   | risk         |
//! |-------------------------------------------|--------------|
//! | any category at 3                         | high_risk    |
//! | two or more categories at 2               | high_risk    |
//! | one category at 2 plus any weak 1         | medium_risk  |
//! | one category at 2 alone                   | `single_strong` (default medium_risk) |
//! | only weak (1) signals, however many       | low_risk     |
//! | nothing                                   | low_risk     |
//!
//! A category's strength is the highest points of its counted findings (weak 1, strong 2,
//! strong with a high-risk severity 3); two different strong rules in one category make 3.

use crate::decision::Finding;
use crate::vocab::{Category, RiskClass, Strength};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Tunables of the combination table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScoringConfig {
    /// Risk of a single category at 2 with nothing else. Default `medium_risk`.
    pub single_strong: RiskClass,
}

impl Default for ScoringConfig {
    fn default() -> Self {
        Self {
            single_strong: RiskClass::MediumRisk,
        }
    }
}

/// Points of one rule hit: weak 1, strong 2, strong + high_risk severity 3.
pub fn points(strength: Strength, severity: RiskClass) -> u8 {
    match (strength, severity) {
        (Strength::Weak, _) => 1,
        (Strength::Strong, RiskClass::HighRisk) => 3,
        (Strength::Strong, _) => 2,
    }
}

/// Puts findings in a decision's stable order: by segment, rule id, span, then layer.
pub fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        (a.segment, &a.rule_id, a.span.start, a.span.end, &a.layer).cmp(&(
            b.segment,
            &b.rule_id,
            b.span.start,
            b.span.end,
            &b.layer,
        ))
    });
}

/// Per-category strength from the counted findings.
pub fn category_scores<'a>(
    findings: impl IntoIterator<Item = &'a Finding>,
) -> BTreeMap<Category, u8> {
    let mut best: BTreeMap<Category, u8> = BTreeMap::new();
    let mut strong_rules: BTreeMap<Category, BTreeSet<&str>> = BTreeMap::new();
    for f in findings.into_iter().filter(|f| f.counted && f.points > 0) {
        let e = best.entry(f.category).or_insert(0);
        *e = (*e).max(f.points.min(3));
        if f.points >= 2 {
            strong_rules
                .entry(f.category)
                .or_default()
                .insert(f.rule_id.as_str());
        }
    }
    for (cat, rules) in strong_rules {
        if rules.len() >= 2 {
            best.insert(cat, 3);
        }
    }
    best
}

/// Combines category strengths into a risk class (see the module table).
pub fn classify(scores: &BTreeMap<Category, u8>, config: &ScoringConfig) -> RiskClass {
    let threes = scores.values().filter(|&&s| s >= 3).count();
    let twos = scores.values().filter(|&&s| s == 2).count();
    let ones = scores.values().filter(|&&s| s == 1).count();
    if threes > 0 || twos >= 2 {
        RiskClass::HighRisk
    } else if twos == 1 && ones > 0 {
        RiskClass::MediumRisk
    } else if twos == 1 {
        config.single_strong
    } else {
        RiskClass::LowRisk
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Category::*;

    fn s(pairs: &[(Category, u8)]) -> BTreeMap<Category, u8> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn scoring_table() {
        let c = ScoringConfig::default();
        let cases: &[(&[(Category, u8)], RiskClass)] = &[
            (&[], RiskClass::LowRisk),
            (&[(ControlPhrase, 3)], RiskClass::HighRisk),
            (
                &[(ControlPhrase, 2), (SystemMarker, 2)],
                RiskClass::HighRisk,
            ),
            (
                &[(ControlPhrase, 2), (BoundaryTesting, 1)],
                RiskClass::MediumRisk,
            ),
            (&[(ControlPhrase, 2)], RiskClass::MediumRisk),
            (&[(BoundaryTesting, 1)], RiskClass::LowRisk),
            (
                &[
                    (BoundaryTesting, 1),
                    (RoleConfusion, 1),
                    (Other, 1),
                    (SystemMarker, 1),
                ],
                RiskClass::LowRisk,
            ),
            (
                &[(BoundaryTesting, 1), (ControlPhrase, 3)],
                RiskClass::HighRisk,
            ),
        ];
        for (scores, want) in cases {
            assert_eq!(classify(&s(scores), &c), *want, "{scores:?}");
        }
    }

    #[test]
    fn single_strong_is_configurable() {
        let c = ScoringConfig {
            single_strong: RiskClass::LowRisk,
        };
        assert_eq!(classify(&s(&[(ControlPhrase, 2)]), &c), RiskClass::LowRisk);
        assert_eq!(
            classify(&s(&[(ControlPhrase, 2), (Other, 1)]), &c),
            RiskClass::MediumRisk
        );
    }

    #[test]
    fn points_per_strength_and_severity() {
        assert_eq!(points(Strength::Weak, RiskClass::HighRisk), 1);
        assert_eq!(points(Strength::Strong, RiskClass::MediumRisk), 2);
        assert_eq!(points(Strength::Strong, RiskClass::LowRisk), 2);
        assert_eq!(points(Strength::Strong, RiskClass::HighRisk), 3);
    }
}
