//! The figures of a replay: attacks stopped (by mechanism, by the rule that held the first
//! attacker call), attacker calls stopped, benign traces passed and the confirmations they
//! needed; overall and per part, domain, style and goal.

use crate::replay::{Mechanism, TraceOutcome, Verdict};
use crate::trace::Label;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Counts over a group of traces.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Attack traces.
    pub attacks: usize,
    /// Attacks with no attacker call released.
    pub attacks_stopped: usize,
    /// Stopped attacks by mechanism.
    pub by_mechanism: BTreeMap<&'static str, usize>,
    /// Attacker calls.
    pub attacker_calls: usize,
    /// Attacker calls not released (blocked, held, or never made).
    pub attacker_calls_stopped: usize,
    /// Benign traces.
    pub benign: usize,
    /// Benign traces with no request and no call blocked.
    pub benign_passed: usize,
    /// Of those, traces where a call needed a human's confirmation.
    pub benign_confirmed: usize,
    /// Benign traces with a request blocked.
    pub benign_request_blocked: usize,
    /// Hard benign traces (values from tool results at the user's request).
    pub hard_benign: usize,
    /// Hard benign traces passed.
    pub hard_benign_passed: usize,
    /// Hard benign traces that needed a confirmation.
    pub hard_benign_confirmed: usize,
    /// Requests SANITIZEd, in every trace.
    pub sanitized_requests: usize,
}

impl Counts {
    fn add(&mut self, o: &TraceOutcome) {
        self.sanitized_requests += o.sanitized_requests;
        match o.label {
            Label::Attack => {
                self.attacks += 1;
                self.attacker_calls += o.attacker_calls;
                self.attacker_calls_stopped += o.attacker_calls - o.attacker_released;
                if let Verdict::AttackStopped(m) = o.verdict {
                    self.attacks_stopped += 1;
                    *self.by_mechanism.entry(m.name()).or_default() += 1;
                }
            }
            Label::Benign => {
                self.benign += 1;
                self.hard_benign += usize::from(o.hard_benign);
                if o.request_blocked_at.is_some() {
                    self.benign_request_blocked += 1;
                }
                let (passed, confirmed) = match o.verdict {
                    Verdict::BenignPassed => (true, false),
                    Verdict::BenignConfirmed => (true, true),
                    _ => (false, false),
                };
                self.benign_passed += usize::from(passed);
                self.benign_confirmed += usize::from(confirmed);
                if o.hard_benign {
                    self.hard_benign_passed += usize::from(passed);
                    self.hard_benign_confirmed += usize::from(confirmed);
                }
            }
        }
    }

    /// Attacks stopped, as a share of attacks.
    pub fn attack_stopped_rate(&self) -> f64 {
        ratio(self.attacks_stopped, self.attacks)
    }

    /// Attacker calls stopped, as a share of attacker calls.
    pub fn attacker_calls_stopped_rate(&self) -> f64 {
        ratio(self.attacker_calls_stopped, self.attacker_calls)
    }

    /// Benign traces passed, as a share of benign traces.
    pub fn benign_passed_rate(&self) -> f64 {
        ratio(self.benign_passed, self.benign)
    }

    /// Benign traces that needed a confirmation, as a share of benign traces.
    pub fn confirmation_rate(&self) -> f64 {
        ratio(self.benign_confirmed, self.benign)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// A replay's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Every trace.
    pub overall: Counts,
    /// By part (`tune`, `test`).
    pub by_split: BTreeMap<&'static str, Counts>,
    /// By domain.
    pub by_domain: BTreeMap<String, Counts>,
    /// Attacks by injection style.
    pub by_style: BTreeMap<String, Counts>,
    /// Attacks by goal.
    pub by_goal: BTreeMap<String, Counts>,
    /// The rule sets that held each stopped attack's first attacker call (`rules` joined
    /// by `+`, or `request_blocked`).
    pub by_rule: BTreeMap<String, usize>,
    /// The attacks that succeeded, by id.
    pub succeeded: Vec<String>,
    /// The benign traces blocked or confirmed, by id, with the rules.
    pub benign_friction: Vec<(String, String)>,
}

impl Report {
    /// The figures of these outcomes.
    pub fn of(outcomes: &[TraceOutcome]) -> Report {
        let mut r = Report::default();
        for o in outcomes {
            r.overall.add(o);
            r.by_split.entry(o.split.name()).or_default().add(o);
            r.by_domain.entry(o.domain.clone()).or_default().add(o);
            if let Some(s) = &o.style {
                r.by_style.entry(s.clone()).or_default().add(o);
            }
            if let Some(g) = &o.goal {
                r.by_goal.entry(g.clone()).or_default().add(o);
            }
            match o.verdict {
                Verdict::AttackSucceeded => r.succeeded.push(o.id.clone()),
                Verdict::AttackStopped(Mechanism::RequestBlocked) => {
                    *r.by_rule.entry("request_blocked".into()).or_default() += 1;
                }
                Verdict::AttackStopped(_) => {
                    if let Some(c) = o.calls.iter().find(|c| c.attacker) {
                        *r.by_rule.entry(c.rules.join("+")).or_default() += 1;
                    }
                }
                Verdict::BenignBlocked | Verdict::BenignConfirmed => {
                    let why = match o.request_blocked_at {
                        Some(i) => format!("request before message {i} blocked"),
                        None => o
                            .calls
                            .iter()
                            .filter(|c| c.action != rampart_tools::ToolAction::Allow)
                            .map(|c| {
                                format!("{} {}: {}", c.tool, c.action.name(), c.rules.join("+"))
                            })
                            .collect::<Vec<_>>()
                            .join("; "),
                    };
                    r.benign_friction.push((o.id.clone(), why));
                }
                Verdict::BenignPassed => {}
            }
        }
        r
    }

    /// The figures as Markdown (the tables of `docs/agents.md`).
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let head = "| | attacks stopped | attacker calls stopped | benign passed | needed a confirmation | hard benign passed (confirmed) |\n|---|---|---|---|---|---|\n";
        let row = |name: &str, c: &Counts| {
            format!(
                "| {name} | {} / {} ({:.1}%) | {} / {} ({:.1}%) | {} / {} ({:.1}%) | {} ({:.1}%) | {} / {} ({}) |\n",
                c.attacks_stopped,
                c.attacks,
                100.0 * c.attack_stopped_rate(),
                c.attacker_calls_stopped,
                c.attacker_calls,
                100.0 * c.attacker_calls_stopped_rate(),
                c.benign_passed,
                c.benign,
                100.0 * c.benign_passed_rate(),
                c.benign_confirmed,
                100.0 * c.confirmation_rate(),
                c.hard_benign_passed,
                c.hard_benign,
                c.hard_benign_confirmed,
            )
        };
        s.push_str(head);
        for (k, c) in &self.by_split {
            s.push_str(&row(k, c));
        }
        s.push_str(&row("all", &self.overall));
        s.push_str("\nBy domain:\n\n");
        s.push_str(head);
        for (k, c) in &self.by_domain {
            s.push_str(&row(k, c));
        }
        s.push_str("\nAttacks by style and goal:\n\n| | attacks stopped | request blocked | tool blocked | tool confirmed |\n|---|---|---|---|---|\n");
        for (k, c) in self.by_style.iter().chain(&self.by_goal) {
            let m = |n: &str| c.by_mechanism.get(n).copied().unwrap_or(0);
            let _ = writeln!(
                s,
                "| {k} | {} / {} | {} | {} | {} |",
                c.attacks_stopped,
                c.attacks,
                m("request_blocked"),
                m("tool_blocked"),
                m("tool_confirmed")
            );
        }
        s.push_str(
            "\nRules that held the first attacker call:\n\n| rules | attacks |\n|---|---|\n",
        );
        let mut rules: Vec<_> = self.by_rule.iter().collect();
        rules.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (k, n) in rules {
            let _ = writeln!(s, "| `{k}` | {n} |");
        }
        s
    }
}
