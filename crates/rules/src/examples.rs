//! Running each rule's own `must_match` / `must_not_match` examples.

use crate::matcher::Matcher;
use rampart_core::Location;
use rampart_normalize::Normalizer;
use std::fmt;

/// An example that did not behave as its rule says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleFailure {
    /// Where the rule is defined.
    pub location: Location,
    /// The rule.
    pub rule_id: String,
    /// `true` for a `must_match` example that did not match; `false` for a
    /// `must_not_match` example that did.
    pub expected_match: bool,
    /// The example text.
    pub example: String,
}

impl fmt::Display for ExampleFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.expected_match {
            "must_match example did not match"
        } else {
            "must_not_match example matched"
        };
        write!(
            f,
            "{}: rule {}: {what}: {:?}",
            self.location, self.rule_id, self.example
        )
    }
}

/// Outcome of running all examples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExampleReport {
    /// Examples run.
    pub total: usize,
    /// Examples that failed.
    pub failures: Vec<ExampleFailure>,
}

/// Runs every example of every rule in `matcher` through `normalizer` and the matcher itself.
pub fn run_examples(matcher: &Matcher, normalizer: &Normalizer) -> ExampleReport {
    let mut report = ExampleReport::default();
    for (idx, cr) in matcher.rules().iter().enumerate() {
        let rule = &cr.rule;
        let cases = rule
            .must_match
            .iter()
            .map(|e| (e, true))
            .chain(rule.must_not_match.iter().map(|e| (e, false)));
        for (example, expected_match) in cases {
            report.total += 1;
            let hits = matcher.scan(&normalizer.normalize(example));
            let matched = hits.hits.iter().any(|h| h.rule == idx);
            if matched != expected_match {
                report.failures.push(ExampleFailure {
                    location: rule.location.clone(),
                    rule_id: rule.id.clone(),
                    expected_match,
                    example: example.clone(),
                });
            }
        }
    }
    report
}
