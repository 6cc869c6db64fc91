//! The trigger contract: which of the earlier layers' results make the judge worth asking.
//! Evaluated from scores, rule IDs and categories only; never from input text, so the
//! reason a judge was not called is safe to log.

use crate::options::{ConversationTriggerOptions, Limit, TriggerOptions};
use rampart_core::conversation::ConversationContext;
use rampart_core::{Action, Earlier, JudgeTrigger, LayerStatus, RiskClass, ScanInput, Trust};
use std::collections::BTreeSet;
use std::fmt::Debug;

/// A conversation-level trigger (e.g. risk rising across turns), given to a judge layer with
/// [`crate::JudgeLayer::with_conversation_trigger`]. None by default.
pub trait ConversationTrigger: Send + Sync + Debug {
    /// Why the judge should be asked for this request, or `None`. The reason is recorded in
    /// the decision: never put input text in it.
    fn fires(&self, input: &ScanInput<'_>, earlier: &Earlier<'_>) -> Option<String>;
}

/// The built-in conversation trigger (`[layers.triggers.conversation]`), also usable as a
/// hook. Fires only for conversation requests ([`ScanInput::conversation`] set); its reason
/// names the conditions that held, with numbers only.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationRisk {
    opts: ConversationTriggerOptions,
}

impl ConversationRisk {
    /// The trigger with these settings.
    pub fn new(opts: ConversationTriggerOptions) -> Self {
        ConversationRisk { opts }
    }
}

impl ConversationTrigger for ConversationRisk {
    fn fires(&self, input: &ScanInput<'_>, earlier: &Earlier<'_>) -> Option<String> {
        conversation_reason(&self.opts, input.conversation?, earlier)
    }
}

/// The current call's per-turn risk so far, from the earlier layers, computed as the
/// conversation state scores a finished turn (`rampart_conversation::turn_risk`): the
/// highest score of a layer that finished, floored by the layers' actions (BLOCK 0.9,
/// SANITIZE 0.6), risk classes (high 0.85, medium 0.5) and rule signal strength (0.2 a
/// level). The judge's own verdict is not in it yet.
pub fn current_risk(earlier: &Earlier<'_>) -> f32 {
    let mut risk = 0.0f32;
    for l in earlier.layers {
        if l.status == LayerStatus::Ok
            && let Some(s) = l.score.filter(|s| s.is_finite())
        {
            risk = risk.max(s);
        }
        risk = risk.max(match l.action {
            Action::Block => 0.9,
            Action::Sanitize => 0.6,
            Action::Allow => 0.0,
        });
        risk = risk.max(match l.risk {
            RiskClass::HighRisk => 0.85,
            RiskClass::MediumRisk => 0.5,
            RiskClass::LowRisk => 0.0,
        });
        let strength = l.categories.values().copied().max().unwrap_or(0);
        risk = risk.max(f32::from(strength) * 0.2);
    }
    risk.clamp(0.0, 1.0)
}

/// Which of the conditions hold, as one reason (numbers only), or `None`.
fn conversation_reason(
    opts: &ConversationTriggerOptions,
    ctx: &ConversationContext,
    earlier: &Earlier<'_>,
) -> Option<String> {
    let mut fired: Vec<String> = Vec::new();
    if let Limit::At(at) = opts.rise_at {
        let current = current_risk(earlier);
        let rise = ctx.rise(current, opts.window);
        if rise >= at {
            let calls = (ctx.turn_risks.len() + 1).min(opts.window);
            fired.push(format!(
                "per-turn risk rose {rise:.2} over the last {calls} calls, to {current:.2} \
                 (rise_at {at})"
            ));
        }
    }
    if let Limit::At(at) = opts.risk_at
        && ctx.risk >= at
    {
        fired.push(format!(
            "conversation risk {:.2} before this turn (risk_at {at})",
            ctx.risk
        ));
    }
    if let Limit::At(at) = opts.escalation_at
        && ctx.escalation >= at
    {
        fired.push(format!(
            "escalation {:.2} before this turn (escalation_at {at})",
            ctx.escalation
        ));
    }
    if opts.on_rephrasing && ctx.rephrasing {
        fired.push(format!(
            "a near-identical rephrasing of a blocked turn ({} in the lineage)",
            ctx.evidence.rephrasings_after_block
        ));
    }
    if let Limit::At(n) = opts.on_blocks
        && ctx.evidence.blocks >= n
    {
        fired.push(format!(
            "{} blocked turns in the lineage (on_blocks {n})",
            ctx.evidence.blocks
        ));
    }
    if let Limit::At(n) = opts.on_refusals
        && ctx.evidence.refusals >= n
    {
        fired.push(format!(
            "{} refused turns in the lineage (on_refusals {n})",
            ctx.evidence.refusals
        ));
    }
    (!fired.is_empty()).then(|| fired.join("; "))
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

    match (opts.conversation.resolved(), input.conversation) {
        (Some(c), Some(ctx)) => match conversation_reason(&c, ctx, earlier) {
            Some(reason) => triggers.push(JudgeTrigger::Conversation { reason }),
            None => quiet.push("conversation: no condition held".into()),
        },
        (Some(_), None) => {}
        (None, Some(_)) => quiet.push("conversation trigger off".into()),
        (None, None) => {}
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
