//! Every rule's own `must_match` / `must_not_match` examples, run when a pipeline is built
//! for serving (start-up, reload, `rampart config check --server`): a pack whose examples
//! fail is refused, as `rampart rules test` would fail it, so a typo that silently turns a
//! BLOCK into an ALLOW never goes live.

use rampart_core::{BuildError, PipelineConfig};
use rampart_normalize::Normalizer;
use rampart_rules::RulesConfig;
use rampart_rules::{ExampleFailure, run_examples};
use rampart_rules::{RulesDetector, RulesLayerOptions};

/// A pipeline whose rule packs fail their own examples (or cannot be loaded to run them).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuleExamplesError {
    /// Examples that did not behave as their rule says.
    #[error(
        "{} of {total} rule example(s) fail (`rampart rules test` shows the same):\n{}",
        failures.len(),
        failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    )]
    Failed {
        /// Each failing example, with its rule and where the rule is defined.
        failures: Vec<ExampleFailure>,
        /// Examples run.
        total: usize,
    },
    /// A `rules` layer's options are invalid.
    #[error(transparent)]
    Options(#[from] BuildError),
    /// A `rules` layer's packs could not be loaded or compiled.
    #[error(transparent)]
    Packs(#[from] rampart_rules::RulesLayerError),
}

/// Runs the examples of every rule of every `rules` layer of `config` (each pack once)
/// through the pipeline's normalizer, the way `rampart rules test` does.
pub fn check_rule_examples(config: &PipelineConfig) -> Result<(), RuleExamplesError> {
    let normalizer = Normalizer::new(config.normalize.to_config());
    let mut failures: Vec<ExampleFailure> = Vec::new();
    let mut total = 0;
    let mut seen: Vec<RulesLayerOptions> = Vec::new();
    for opts in config.rules_layers()? {
        if seen.contains(&opts) {
            continue;
        }
        let detector = RulesDetector::from_options(&opts)?;
        let report = run_examples(detector.matcher(), &normalizer);
        total += report.total;
        for f in report.failures {
            if !failures.contains(&f) {
                failures.push(f);
            }
        }
        seen.push(opts);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(RuleExamplesError::Failed { failures, total })
    }
}
