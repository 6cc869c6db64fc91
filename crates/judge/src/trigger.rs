//! The trigger contract: which of the earlier layers' results make the judge worth asking.
//! Evaluated from scores, rule IDs and categories only; never from input text, so the
//! reason a judge was not called is safe to log.

use crate::options::TriggerOptions;
use rampart_core::{Action, Earlier, JudgeTrigger, ScanInput, Trust};
use std::collections::BTreeSet;
use std::fmt::Debug;

/// A conversation-level trigger (e.g. risk rising across turns), given to a judge layer with
/// [`crate::JudgeLayer::with_conversation_trigger`]. None by default.
pub trait ConversationTrigger: Send + Sync + Debug {
    /// Why the judge should be asked for this request, or `None`. The reason is recorded in
    /// the decision: never put input text in it.
    fn fires(&self, input: &ScanInput<'_>, earlier: &Earlier<'_>) -> Option<String>;
}

/// What the contract concluded for one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Contract {
    /// Ask the judge, for these reasons (all that fired), about these segments (the ones the
    /// triggers point at; empty: every untrusted segment).
    Ask {
        /// The triggers.
        triggers: Vec<JudgeTrigger>,
        /// Segments the triggers point at.
        segments: BTreeSet<usize>,
    },
    /// Do not ask, and why.
    Skip(String),
}

/// Evaluates the contract.
pub fn evaluate(
    opts: &TriggerOptions,
    skip_when_blocked: bool,
    conversation: Option<&dyn ConversationTrigger>,
    input: &ScanInput<'_>,
    earlier: &Earlier<'_>,
) -> Contract {
    let undecided = earlier.layers.iter().any(|l| l.undecided);
    if skip_when_blocked && !undecided && earlier.layers.iter().any(|l| l.action == Action::Block) {
        return Contract::Skip("an earlier layer decided BLOCK".into());
    }
    let mut triggers = Vec::new();
    let mut segments = BTreeSet::new();
    let mut quiet: Vec<String> = Vec::new();
    let localized = |name: &str| {
        earlier
            .layers
            .iter()
            .find(|l| l.layer == name)
            .and_then(|l| l.localized)
            .map(|s| s.segment)
    };

    for l in earlier.layers.iter().filter(|l| l.undecided) {
        triggers.push(JudgeTrigger::Deferred {
            layer: l.layer.clone(),
            score: l.score.unwrap_or(0.0),
        });
        segments.extend(localized(&l.layer));
    }

    for a in &opts.ambiguous {
        let deferred = earlier
            .layers
            .iter()
            .any(|l| l.undecided && l.layer == a.layer);
        if deferred {
            continue;
        }
        let [lo, hi] = a.band;
        match earlier.score_of(&a.layer) {
            Some(s) if (lo..=hi).contains(&s) => {
                triggers.push(JudgeTrigger::AmbiguousScore {
                    layer: a.layer.clone(),
                    score: s,
                    band: a.band,
                });
                segments.extend(localized(&a.layer));
            }
            Some(s) => quiet.push(format!("{} {s:.3} outside [{lo}, {hi}]", a.layer)),
            None => quiet.push(format!("{} gave no score", a.layer)),
        }
    }

    for c in &opts.conflict {
        let Some(score) = earlier.score_of(&c.classifier) else {
            quiet.push(format!("{} gave no score", c.classifier));
            continue;
        };
        let flagged: Vec<usize> = earlier
            .findings
            .iter()
            .filter(|f| f.layer == c.rules && f.counted && f.points > 0)
            .map(|f| f.segment)
            .collect();
        let rules_flagged = !flagged.is_empty();
        let fires = (rules_flagged && score <= c.low) || (!rules_flagged && score >= c.high);
        if fires {
            triggers.push(JudgeTrigger::LayerConflict {
                rules: c.rules.clone(),
                rules_flagged,
                classifier: c.classifier.clone(),
                score,
            });
            segments.extend(flagged);
            segments.extend(localized(&c.classifier));
        } else {
            let found = if rules_flagged { "risk" } else { "nothing" };
            quiet.push(format!(
                "{} found {found}, {} {score:.3}: no conflict",
                c.rules, c.classifier
            ));
        }
    }

    let mut judged: BTreeSet<&str> = BTreeSet::new();
    let untrusted = |seg: usize| {
        input
            .segments
            .get(seg)
            .is_some_and(|s| s.trust == Trust::Untrusted)
    };
    for f in earlier.findings {
        let marked = (opts.needs_judgement && earlier.needs_judgement.contains(&f.rule_id))
            || opts.rules.contains(&f.rule_id)
            || opts.categories.contains(&f.category);
        if marked && untrusted(f.segment) {
            segments.insert(f.segment);
            if judged.insert(&f.rule_id) {
                triggers.push(JudgeTrigger::NeedsJudgement {
                    rule_id: f.rule_id.clone(),
                });
            }
        }
    }
    if judged.is_empty() {
        quiet.push("no finding needs judgement".into());
    }

    if let Some(reason) = conversation.and_then(|c| c.fires(input, earlier)) {
        triggers.push(JudgeTrigger::Conversation { reason });
    }

    if triggers.is_empty() {
        Contract::Skip(format!("no trigger fired ({})", quiet.join("; ")))
    } else {
        Contract::Ask { triggers, segments }
    }
}
