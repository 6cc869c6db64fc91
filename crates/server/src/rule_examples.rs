//! Every rule's own `must_match` / `must_not_match` examples, run when a pipeline is built
//! for serving (start-up, reload, `rampart config check --server`): a pack whose examples
//! fail is refused, as `rampart rules test` would fail it, so a typo that silently turns a
//! BLOCK into an ALLOW never goes live.

use rampart_core::{BuildError, Detector, Pipeline};
use rampart_normalize::Normalizer;
use rampart_rules::RulesConfig;
use rampart_rules::{ExampleFailure, run_examples};
use rampart_rules::{RULES_KIND, RulesDetector, RulesLayerOptions};

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

/// Runs the examples of every rule of every `rules` layer of `pipeline` (each pack set once)
/// through the pipeline's normalizer, the way `rampart rules test` does, on the matchers the
/// pipeline compiled (a layer whose detector is not a [`RulesDetector`] has its packs
/// compiled here).
pub fn check_rule_examples(pipeline: &Pipeline) -> Result<(), RuleExamplesError> {
    let config = pipeline.config();
    let normalizer = Normalizer::new(config.normalize.to_config());
    let mut failures: Vec<ExampleFailure> = Vec::new();
    let mut total = 0;
    let mut seen: Vec<RulesLayerOptions> = Vec::new();
    for (opts, detector) in config
        .rules_layers()?
        .into_iter()
        .zip(rules_detectors(pipeline))
    {
        if seen.contains(&opts) {
            continue;
        }
        let compiled;
        let detector = match detector.and_then(|d| d.as_any()?.downcast_ref::<RulesDetector>()) {
            Some(d) => d,
            None => {
                compiled = RulesDetector::from_options(&opts)?;
                &compiled
            }
        };
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

/// The detector of each `rules` layer of `pipeline`, one entry per layer in layer order (the
/// pipeline builds one detector per configured layer, in order; `None` for every layer if
/// it ever did not, so the packs are compiled here instead).
fn rules_detectors(pipeline: &Pipeline) -> Vec<Option<&dyn Detector>> {
    let layers = &pipeline.config().layers;
    let detectors: Vec<&dyn Detector> = pipeline.detectors().map(|d| &**d).collect();
    let aligned = layers.len() == detectors.len();
    layers
        .iter()
        .enumerate()
        .filter(|(_, layer)| layer.kind == RULES_KIND)
        .map(|(i, _)| {
            if aligned {
                detectors.get(i).copied()
            } else {
                None
            }
        })
        .collect()
}
