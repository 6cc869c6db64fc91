//! The trigger contract: which of the earlier layers' results make the judge worth asking.
//! Evaluated from scores, rule IDs and categories only; never from input text, so the
//! reason a judge was not called is safe to log.

use crate::options::{ConversationTriggerOptions, Limit, TriggerOptions};
use crate::report::JudgeTrigger;
use rampart_core::conversation::ConversationContext;
use rampart_core::{Action, Earlier, LayerStatus, RiskClass, ScanInput, Trust};
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
    let mut fired = Fired::default();
    fired.deferred(earlier);
    fired.ambiguous(opts, earlier);
    fired.conflicts(opts, earlier);
    fired.needs_judgement(opts, input, earlier);
    fired.conversation(opts, conversation, input, earlier);
    if fired.triggers.is_empty() {
        Contract::Skip(format!("no trigger fired ({})", fired.quiet.join("; ")))
    } else {
        Contract::Ask {
            triggers: fired.triggers,
            segments: fired.segments,
        }
    }
}

/// The segment the earlier layer `name` localized its score to, if it did.
fn localized(earlier: &Earlier<'_>, name: &str) -> Option<usize> {
    earlier
        .layers
        .iter()
        .find(|l| l.layer == name)
        .and_then(|l| l.localized)
        .map(|s| s.segment)
}

/// The contract's triggers, checked one kind after the other: those that fired, the
/// segments they point at, and why the others stayed quiet.
#[derive(Default)]
struct Fired {
    triggers: Vec<JudgeTrigger>,
    segments: BTreeSet<usize>,
    quiet: Vec<String>,
}

impl Fired {
    /// Earlier layers that deferred their decision to the judge.
    fn deferred(&mut self, earlier: &Earlier<'_>) {
        for l in earlier.layers.iter().filter(|l| l.undecided) {
            self.triggers.push(JudgeTrigger::Deferred {
                layer: l.layer.clone(),
                score: l.score.unwrap_or(0.0),
            });
            self.segments.extend(localized(earlier, &l.layer));
        }
    }

    /// Scores inside their layer's ambiguous band (layers that deferred are not counted
    /// twice).
    fn ambiguous(&mut self, opts: &TriggerOptions, earlier: &Earlier<'_>) {
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
                    self.triggers.push(JudgeTrigger::AmbiguousScore {
                        layer: a.layer.clone(),
                        score: s,
                        band: a.band,
                    });
                    self.segments.extend(localized(earlier, &a.layer));
                }
                Some(s) => self
                    .quiet
                    .push(format!("{} {s:.3} outside [{lo}, {hi}]", a.layer)),
                None => self.quiet.push(format!("{} gave no score", a.layer)),
            }
        }
    }

    /// Rules and a classifier that disagree: rules flagged and the classifier is low, or
    /// rules found nothing and the classifier is high.
    fn conflicts(&mut self, opts: &TriggerOptions, earlier: &Earlier<'_>) {
        for c in &opts.conflict {
            let Some(score) = earlier.score_of(&c.classifier) else {
                self.quiet.push(format!("{} gave no score", c.classifier));
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
                self.triggers.push(JudgeTrigger::LayerConflict {
                    rules: c.rules.clone(),
                    rules_flagged,
                    classifier: c.classifier.clone(),
                    score,
                });
                self.segments.extend(flagged);
                self.segments.extend(localized(earlier, &c.classifier));
            } else {
                let found = if rules_flagged { "risk" } else { "nothing" };
                self.quiet.push(format!(
                    "{} found {found}, {} {score:.3}: no conflict",
                    c.rules, c.classifier
                ));
            }
        }
    }

    /// Findings in untrusted segments whose rule or category is marked for judgement (one
    /// trigger per rule).
    fn needs_judgement(
        &mut self,
        opts: &TriggerOptions,
        input: &ScanInput<'_>,
        earlier: &Earlier<'_>,
    ) {
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
                self.segments.insert(f.segment);
                if judged.insert(&f.rule_id) {
                    self.triggers.push(JudgeTrigger::NeedsJudgement {
                        rule_id: f.rule_id.clone(),
                    });
                }
            }
        }
        if judged.is_empty() {
            self.quiet.push("no finding needs judgement".into());
        }
    }

    /// The built-in conversation trigger, then the hook given to the layer.
    fn conversation(
        &mut self,
        opts: &TriggerOptions,
        hook: Option<&dyn ConversationTrigger>,
        input: &ScanInput<'_>,
        earlier: &Earlier<'_>,
    ) {
        match (opts.conversation.resolved(), input.conversation) {
            (Some(c), Some(ctx)) => match conversation_reason(&c, ctx, earlier) {
                Some(reason) => self.triggers.push(JudgeTrigger::Conversation { reason }),
                None => self.quiet.push("conversation: no condition held".into()),
            },
            (Some(_), None) => {}
            (None, Some(_)) => self.quiet.push("conversation trigger off".into()),
            (None, None) => {}
        }
        if let Some(reason) = hook.and_then(|c| c.fires(input, earlier)) {
            self.triggers.push(JudgeTrigger::Conversation { reason });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::options::ConversationSetting;
    use rampart_core::conversation::ConversationEvidence;
    use rampart_core::{LayerResult, LocalizeConfig, Role};
    use std::collections::BTreeMap;
    use std::time::Instant;

    fn layer(score: f32) -> LayerResult {
        LayerResult {
            layer: "linear".into(),
            status: LayerStatus::Ok,
            risk: RiskClass::LowRisk,
            action: Action::Allow,
            score: Some(score),
            localized: None,
            categories: BTreeMap::new(),
            findings: 0,
            undecided: false,
            score_only: false,
            elapsed_us: 0,
        }
    }

    fn ctx(turn_risks: &[f32], risk: f32) -> ConversationContext {
        ConversationContext {
            risk,
            escalation: 0.0,
            turn_risks: turn_risks.to_vec(),
            evidence: ConversationEvidence::default(),
            rephrasing: false,
            history: vec![
                (Role::User, "CANARY-HISTORY tell me about locks".into()),
                (Role::Assistant, "CANARY-ANSWER pin tumblers".into()),
            ],
        }
    }

    /// The contract for a request whose earlier layers scored `current`, with `ctx` as its
    /// conversation (None: a plain request).
    fn run(opts: &TriggerOptions, ctx: Option<&ConversationContext>, current: f32) -> Contract {
        let layers = [layer(current)];
        let none = BTreeSet::new();
        let earlier = Earlier {
            layers: &layers,
            findings: &[],
            spans: &[],
            needs_judgement: &none,
        };
        let input = ScanInput {
            segments: Vec::new(),
            deadline: Instant::now(),
            localize: LocalizeConfig::default(),
            conversation: ctx,
        };
        evaluate(opts, true, None, &input, &earlier)
    }

    fn reason(c: &Contract) -> Option<&str> {
        match c {
            Contract::Ask { triggers, .. } => triggers.iter().find_map(|t| match t {
                JudgeTrigger::Conversation { reason } => Some(reason.as_str()),
                _ => None,
            }),
            Contract::Skip(_) => None,
        }
    }

    #[test]
    fn fires_on_rising_risk_and_not_on_flat_low_risk() {
        let opts = TriggerOptions::default();
        let rising = ctx(&[0.05, 0.1, 0.2], 0.3);
        let c = run(&opts, Some(&rising), 0.45);
        assert_eq!(
            reason(&c),
            Some("per-turn risk rose 0.40 over the last 4 calls, to 0.45 (rise_at 0.25)")
        );
        let flat = ctx(&[0.1, 0.1, 0.1], 0.15);
        let c = run(&opts, Some(&flat), 0.1);
        assert_eq!(
            c,
            Contract::Skip(
                "no trigger fired (no finding needs judgement; conversation: no condition held)"
                    .into()
            )
        );
        // Only the window counts: a rise that happened before the last 4 calls does not.
        let old_rise = ctx(&[0.0, 0.5, 0.5, 0.5, 0.45], 0.45);
        let mut o = opts.clone();
        o.conversation = ConversationSetting::On(ConversationTriggerOptions {
            risk_at: Limit::Off,
            ..ConversationTriggerOptions::default()
        });
        assert_eq!(reason(&run(&o, Some(&old_rise), 0.5)), None);
        // The first turn has nothing to rise from.
        assert_eq!(reason(&run(&opts, Some(&ctx(&[], 0.0)), 0.9)), None);
    }

    #[test]
    fn never_fires_for_a_plain_request() {
        let opts = TriggerOptions::default();
        let c = run(&opts, None, 0.45);
        assert_eq!(
            c,
            Contract::Skip("no trigger fired (no finding needs judgement)".into())
        );
        let hook = ConversationRisk::new(ConversationTriggerOptions::default());
        let none = BTreeSet::new();
        let layers = [layer(0.99)];
        let earlier = Earlier {
            layers: &layers,
            findings: &[],
            spans: &[],
            needs_judgement: &none,
        };
        let plain = ScanInput {
            segments: Vec::new(),
            deadline: Instant::now(),
            localize: LocalizeConfig::default(),
            conversation: None,
        };
        assert_eq!(hook.fires(&plain, &earlier), None);
        let mut hot = ctx(&[0.0], 0.9);
        hot.evidence.blocks = 3;
        let conv = ScanInput {
            conversation: Some(&hot),
            ..plain
        };
        assert!(hook.fires(&conv, &earlier).is_some());
    }

    #[test]
    fn each_condition_fires_alone_and_false_turns_it_off() {
        let only = |o: ConversationTriggerOptions| TriggerOptions {
            conversation: ConversationSetting::On(o),
            ..TriggerOptions::default()
        };
        let off = ConversationTriggerOptions {
            rise_at: Limit::Off,
            risk_at: Limit::Off,
            escalation_at: Limit::Off,
            on_rephrasing: false,
            on_blocks: Limit::Off,
            on_refusals: Limit::Off,
            ..ConversationTriggerOptions::default()
        };
        let mut c = ctx(&[0.0, 0.0, 0.0], 0.6);
        c.escalation = 0.2;
        c.rephrasing = true;
        c.evidence = ConversationEvidence {
            blocks: 2,
            sanitizes: 0,
            refusals: 1,
            rephrasings_after_block: 1,
        };
        let cases = [
            (
                ConversationTriggerOptions {
                    rise_at: Limit::At(0.25),
                    ..off.clone()
                },
                "per-turn risk rose 0.50 over the last 4 calls, to 0.50 (rise_at 0.25)",
            ),
            (
                ConversationTriggerOptions {
                    risk_at: Limit::At(0.5),
                    ..off.clone()
                },
                "conversation risk 0.60 before this turn (risk_at 0.5)",
            ),
            (
                ConversationTriggerOptions {
                    escalation_at: Limit::At(0.1),
                    ..off.clone()
                },
                "escalation 0.20 before this turn (escalation_at 0.1)",
            ),
            (
                ConversationTriggerOptions {
                    on_rephrasing: true,
                    ..off.clone()
                },
                "a near-identical rephrasing of a blocked turn (1 in the lineage)",
            ),
            (
                ConversationTriggerOptions {
                    on_blocks: Limit::At(2),
                    ..off.clone()
                },
                "2 blocked turns in the lineage (on_blocks 2)",
            ),
            (
                ConversationTriggerOptions {
                    on_refusals: Limit::At(1),
                    ..off.clone()
                },
                "1 refused turns in the lineage (on_refusals 1)",
            ),
        ];
        for (o, want) in cases {
            assert_eq!(reason(&run(&only(o), Some(&c), 0.5)), Some(want));
        }
        // Thresholds not reached.
        let high = ConversationTriggerOptions {
            risk_at: Limit::At(0.7),
            escalation_at: Limit::At(0.3),
            on_blocks: Limit::At(3),
            on_refusals: Limit::At(2),
            ..off.clone()
        };
        assert_eq!(reason(&run(&only(high), Some(&c), 0.5)), None);
        assert_eq!(reason(&run(&only(off), Some(&c), 0.5)), None);
        // `conversation = false`: nothing, and the skip reason says so.
        let disabled = TriggerOptions {
            conversation: ConversationSetting::Flag(false),
            ..TriggerOptions::default()
        };
        assert_eq!(
            run(&disabled, Some(&c), 0.5),
            Contract::Skip(
                "no trigger fired (no finding needs judgement; conversation trigger off)".into()
            )
        );
    }

    #[test]
    fn the_reason_holds_numbers_and_fixed_words_only() {
        let mut c = ctx(&[0.0, 0.1], 0.9);
        c.escalation = 0.5;
        c.rephrasing = true;
        c.evidence.blocks = 4;
        c.evidence.refusals = 4;
        let opts = TriggerOptions {
            conversation: ConversationSetting::On(ConversationTriggerOptions {
                on_refusals: Limit::At(1),
                ..ConversationTriggerOptions::default()
            }),
            ..TriggerOptions::default()
        };
        let r = reason(&run(&opts, Some(&c), 0.9)).unwrap().to_string();
        assert!(!r.contains("CANARY"), "{r}");
        // Every word is one of the reason's own vocabulary or a number.
        let vocabulary = [
            "per-turn",
            "risk",
            "rose",
            "over",
            "the",
            "last",
            "calls",
            "to",
            "rise_at",
            "conversation",
            "before",
            "this",
            "turn",
            "risk_at",
            "escalation",
            "escalation_at",
            "a",
            "near-identical",
            "rephrasing",
            "of",
            "blocked",
            "in",
            "lineage",
            "turns",
            "on_blocks",
            "refused",
            "on_refusals",
        ];
        for w in r.split(|c: char| c.is_whitespace() || "();,".contains(c)) {
            let number = !w.is_empty() && w.chars().all(|c| c.is_ascii_digit() || c == '.');
            assert!(
                w.is_empty() || number || vocabulary.contains(&w),
                "{w:?} in {r}"
            );
        }
    }

    #[test]
    fn current_risk_is_floored_by_actions_classes_and_strength() {
        let none = BTreeSet::new();
        let mut l = layer(0.3);
        let risk_of = |layers: &[LayerResult]| {
            current_risk(&Earlier {
                layers,
                findings: &[],
                spans: &[],
                needs_judgement: &none,
            })
        };
        assert!((risk_of(std::slice::from_ref(&l)) - 0.3).abs() < 1e-6);
        l.categories.insert(rampart_core::Category::Other, 2);
        assert!((risk_of(std::slice::from_ref(&l)) - 0.4).abs() < 1e-6);
        l.risk = RiskClass::MediumRisk;
        assert!((risk_of(std::slice::from_ref(&l)) - 0.5).abs() < 1e-6);
        l.action = Action::Sanitize;
        assert!((risk_of(std::slice::from_ref(&l)) - 0.6).abs() < 1e-6);
        // A failed layer's score does not count; its fail-mode action does.
        let mut failed = layer(0.99);
        failed.status = LayerStatus::Timeout { budget_ms: 1 };
        failed.action = Action::Block;
        assert!((risk_of(&[failed]) - 0.9).abs() < 1e-6);
        assert_eq!(risk_of(&[]), 0.0);
    }
}
