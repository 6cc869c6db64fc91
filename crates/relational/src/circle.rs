//! The circle backend (PromptGuard's Fire Circle): several evaluators in three rounds, the
//! most alarmed view kept.
//!
//! 1. **Assess**: every member assesses every layer on its own.
//! 2. **Observe**: every member still active sees the others' round-1 assessments (numbers
//!    and violation names; an LLM member is never shown its peers' reasoning) and reports the
//!    patterns it observes.
//! 3. **Conclude**: the consensus patterns are those reported by at least half the active
//!    members (sorted); every active member gives its final assessment given them.
//!
//! The consensus of the active members' final assessments, per layer:
//!
//! - **F** is the MAXIMUM falsehood: the circle is a detection system, not a democracy; one
//!   member that sees an attack is not outvoted by two that missed it.
//! - **I** is the maximum indeterminacy, capped at `1 − F`; **T** is the rest
//!   ([`Neutrosophic::from_evidence`]). Truth is therefore never more than the least
//!   alarmed, least unsure member would grant, and the triple still sums to 1.
//! - **Violations**: the union of the members' (merged per kind and layer).
//! - **Dissent**: the falsehood range (highest minus lowest F among the active members, per
//!   layer, the largest over the layers) is recorded; it is dissent when it reaches the
//!   `dissent` threshold (default 0.3).
//!
//! A member that fails in round 1 is dropped (not shown to its peers). A member that fails in
//! round 2 or 3 keeps its history (its round-1 layers stay in its run) but loses its vote.
//! With fewer than two active members at any point the circle fails (no label): the
//! pipeline layer's fail mode decides. Members run one after the other, in configuration
//! order, so a run is deterministic; a member whose turn comes after the deadline fails with
//! `timeout`.

use crate::evaluator::{Assessment, Evaluator, EvaluatorError, PeerView, RelateInput};
use crate::llm::{LlmEvaluator, LlmEvaluatorError, LlmEvaluatorOptions};
use crate::local::{LocalError, LocalEvaluator, LocalOptions};
use crate::model::normalize_violations;
use crate::{
    Backend, CircleConsensus, EvaluatorRun, LayerAssessment, Neutrosophic, RelationalCost,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Fewest members a circle may have.
pub const MIN_MEMBERS: usize = 2;
/// Most members a circle may have.
pub const MAX_MEMBERS: usize = 10;
/// Fewest active members a circle needs to reach a consensus.
pub const MIN_ACTIVE: usize = 2;

/// Rounding slack when the falsehood range is compared with the dissent threshold (a range
/// of 0.6 − 0.3 is 0.29999999999999993 in floating point).
const DISSENT_EPSILON: f64 = 1e-9;

/// One member of the circle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberOptions {
    /// Its name in reports (unique in the circle).
    pub name: String,
    /// `local` (the relational layer's `[local]` options) or `llm`.
    pub backend: Backend,
    /// The llm backend's options (an llm member only).
    #[serde(default)]
    pub llm: Option<LlmEvaluatorOptions>,
}

/// Options of the circle (`[layers.circle]`).
///
/// ```toml
/// [layers.circle]
/// dissent = 0.3
/// [[layers.circle.members]]
/// name = "local"
/// backend = "local"
/// [[layers.circle.members]]
/// name = "small"
/// backend = "llm"
/// llm = { llm = { protocol = "openai", base_url = "http://127.0.0.1:8080/v1", model = "smollm2-135m" } }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CircleOptions {
    /// The members, 2 to 10.
    pub members: Vec<MemberOptions>,
    /// The falsehood range from which the members dissent. Default 0.3.
    #[serde(default = "default_dissent")]
    pub dissent: f64,
}

fn default_dissent() -> f64 {
    0.3
}

/// Why a circle cannot be built; the message names the member.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CircleError {
    /// Too few or too many members: how many there are.
    #[error("a circle needs {MIN_MEMBERS} to {MAX_MEMBERS} members, got {0}")]
    Members(usize),
    /// `dissent` outside (0, 1].
    #[error("dissent must be in (0, 1], got {0}")]
    Dissent(f64),
    /// A member without a name: its index.
    #[error("members[{0}]: name must not be empty")]
    EmptyName(usize),
    /// Two members share a name.
    #[error("member names must be unique: {0:?} repeats")]
    DuplicateName(String),
    /// A local member with an llm table.
    #[error("member {0:?}: a local member takes no llm table")]
    LocalWithLlm(String),
    /// An llm member without its table.
    #[error("member {0:?}: backend = \"llm\" needs an llm table")]
    LlmWithoutTable(String),
    /// A member whose backend is the circle.
    #[error("member {0:?}: a member's backend is local or llm, not circle")]
    NestedCircle(String),
    /// An llm member could not be built.
    #[error("member {member:?}: {error}")]
    Llm {
        /// The member.
        member: String,
        /// Why.
        error: LlmEvaluatorError,
    },
    /// A local member could not be built.
    #[error("member {member:?}: local: {error}")]
    Local {
        /// The member.
        member: String,
        /// Why.
        error: LocalError,
    },
}

impl CircleOptions {
    /// Checks the member count, names, backends and the threshold.
    pub fn validate(&self) -> Result<(), CircleError> {
        let n = self.members.len();
        if !(MIN_MEMBERS..=MAX_MEMBERS).contains(&n) {
            return Err(CircleError::Members(n));
        }
        if !(self.dissent.is_finite() && self.dissent > 0.0 && self.dissent <= 1.0) {
            return Err(CircleError::Dissent(self.dissent));
        }
        for (i, m) in self.members.iter().enumerate() {
            if m.name.is_empty() {
                return Err(CircleError::EmptyName(i));
            }
            if self.members[..i].iter().any(|o| o.name == m.name) {
                return Err(CircleError::DuplicateName(m.name.clone()));
            }
            match (m.backend, &m.llm) {
                (Backend::Local, None) | (Backend::Llm, Some(_)) => {}
                (Backend::Local, Some(_)) => return Err(CircleError::LocalWithLlm(m.name.clone())),
                (Backend::Llm, None) => return Err(CircleError::LlmWithoutTable(m.name.clone())),
                (Backend::Circle, _) => return Err(CircleError::NestedCircle(m.name.clone())),
            }
        }
        Ok(())
    }
}

/// The circle, built.
#[derive(Debug)]
pub struct Circle {
    members: Vec<Box<dyn Evaluator>>,
    dissent: f64,
    reads: Vec<String>,
}

/// What one run of the circle gives.
#[derive(Debug)]
pub struct CircleRun {
    /// The consensus assessment, or why the circle failed.
    pub result: Result<Assessment, TooFewMembers>,
    /// Per member.
    pub runs: Vec<EvaluatorRun>,
    /// The consensus, when the circle reached one.
    pub consensus: Option<CircleConsensus>,
}

/// A member's state through the rounds.
#[derive(Debug)]
struct State<'a> {
    ev: &'a dyn Evaluator,
    /// Its round-1 assessment.
    first: Option<Assessment>,
    /// Its final assessment.
    last: Option<Assessment>,
    patterns: Vec<String>,
    cost: RelationalCost,
    elapsed: Duration,
    /// The round it failed in and the outcome.
    failed: Option<(u8, String)>,
}

impl<'a> State<'a> {
    /// A member before round 1.
    fn new(ev: &'a dyn Evaluator) -> Self {
        State {
            ev,
            first: None,
            last: None,
            patterns: Vec::new(),
            cost: RelationalCost::default(),
            elapsed: Duration::ZERO,
            failed: None,
        }
    }

    fn active(&self) -> bool {
        self.failed.is_none()
    }

    fn fail(&mut self, round: u8, e: &EvaluatorError) {
        self.cost.merge(&e.cost());
        self.failed = Some((round, e.outcome().to_string()));
    }

    fn run(&self) -> EvaluatorRun {
        let shown = self.last.as_ref().or(self.first.as_ref());
        let layers = match self.failed {
            Some((1, _)) => Vec::new(),
            Some(_) => self
                .first
                .as_ref()
                .map(|a| a.layers.clone())
                .unwrap_or_default(),
            None => shown.map(|a| a.layers.clone()).unwrap_or_default(),
        };
        let outcome = match &self.failed {
            Some((_, o)) => o.clone(),
            None => shown
                .and_then(|a| a.outcome.clone())
                .unwrap_or_else(|| "ok".into()),
        };
        EvaluatorRun {
            name: self.ev.name().to_string(),
            backend: self.ev.backend(),
            model: self
                .ev
                .model()
                .map(String::from)
                .or_else(|| shown.and_then(|a| a.model.clone())),
            outcome,
            layers,
            active: self.active(),
            failed_round: self.failed.as_ref().map(|(r, _)| *r),
            patterns: self.patterns.clone(),
            cost: self.cost.clone(),
            elapsed_ms: u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// The deadline check before a member's turn.
fn in_time(input: &RelateInput<'_>, round: u8) -> Result<(), EvaluatorError> {
    if Instant::now() >= input.deadline {
        return Err(EvaluatorError::Outcome {
            outcome: "timeout".into(),
            detail: format!("the deadline passed before the member's turn in round {round}"),
            cost: Box::default(),
        });
    }
    Ok(())
}

/// An assessment must cover every layer of the input.
fn covers(input: &RelateInput<'_>, a: Assessment) -> Result<Assessment, EvaluatorError> {
    match input
        .layers
        .iter()
        .find(|l| !a.layers.iter().any(|x| x.layer == l.layer))
    {
        Some(l) => Err(EvaluatorError::Outcome {
            outcome: "failed".into(),
            detail: format!("the assessment misses the {} layer", l.layer),
            cost: Box::new(a.cost),
        }),
        None => Ok(a),
    }
}

impl Circle {
    /// Builds the circle and its members; local members use `local`.
    pub fn new(opts: CircleOptions, local: &LocalOptions) -> Result<Self, CircleError> {
        opts.validate()?;
        let mut members: Vec<Box<dyn Evaluator>> = Vec::with_capacity(opts.members.len());
        let mut reads = Vec::new();
        for m in opts.members {
            let name = m.name.clone();
            let ev: Box<dyn Evaluator> = match (m.backend, m.llm) {
                (Backend::Llm, Some(o)) => Box::new(LlmEvaluator::new(m.name, o).map_err(
                    |error| CircleError::Llm {
                        member: name,
                        error,
                    },
                )?),
                _ => {
                    let l = LocalEvaluator::new(m.name, local.clone()).map_err(|error| {
                        CircleError::Local {
                            member: name,
                            error,
                        }
                    })?;
                    reads.extend(l.options().reads());
                    Box::new(l)
                }
            };
            members.push(ev);
        }
        reads.sort();
        reads.dedup();
        Ok(Self {
            members,
            dissent: opts.dissent,
            reads,
        })
    }

    /// The earlier layers its local members read.
    pub fn reads(&self) -> Vec<String> {
        self.reads.clone()
    }

    /// Runs the three rounds.
    pub fn run(&self, input: &RelateInput<'_>) -> CircleRun {
        let mut st: Vec<State<'_>> = self
            .members
            .iter()
            .map(|m| State::new(m.as_ref()))
            .collect();
        assess_round(&mut st, input);
        if let Some(reason) = too_few(&st, 1) {
            return failed(&st, reason);
        }
        observe_round(&mut st, input);
        if let Some(reason) = too_few(&st, 2) {
            return failed(&st, reason);
        }
        let patterns = consensus_patterns(&st);
        conclude_round(&mut st, input, &patterns);
        if let Some(reason) = too_few(&st, 3) {
            return failed(&st, reason);
        }
        self.consensus(&st, input, patterns)
    }

    /// The circle's result from the active members' final assessments and the consensus
    /// `patterns`.
    fn consensus(
        &self,
        st: &[State<'_>],
        input: &RelateInput<'_>,
        patterns: Vec<String>,
    ) -> CircleRun {
        let finals: Vec<(&str, &Assessment)> = st
            .iter()
            .filter(|s| s.active())
            .filter_map(|s| Some((s.ev.name(), s.last.as_ref()?)))
            .collect();
        let (layers, range) = consensus_layers(input, &finals);
        let violations = normalize_violations(
            finals
                .iter()
                .flat_map(|(_, a)| a.violations.iter().cloned())
                .collect(),
        );
        let mut cost = RelationalCost::default();
        for s in st {
            cost.merge(&s.cost);
        }
        let consensus = CircleConsensus {
            active: finals.len(),
            rounds: 3,
            falsehood_range: range,
            dissent: range + DISSENT_EPSILON >= self.dissent,
            patterns: patterns.clone(),
        };
        CircleRun {
            result: Ok(Assessment {
                layers,
                violations,
                patterns,
                model: None,
                outcome: None,
                cost,
            }),
            runs: st.iter().map(State::run).collect(),
            consensus: Some(consensus),
        }
    }
}

/// Round 1: independent assessments.
fn assess_round(st: &mut [State<'_>], input: &RelateInput<'_>) {
    for s in st {
        let t = Instant::now();
        let r = in_time(input, 1)
            .and_then(|()| s.ev.assess(input))
            .and_then(|a| covers(input, a));
        s.elapsed += t.elapsed();
        match r {
            Ok(a) => {
                s.cost.merge(&a.cost);
                s.first = Some(a);
            }
            Err(e) => s.fail(1, &e),
        }
    }
}

/// Round 2: every active member sees the others' round-1 assessments and reports the
/// patterns it observes.
fn observe_round(st: &mut [State<'_>], input: &RelateInput<'_>) {
    let firsts: Vec<(usize, &str, Assessment)> = st
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.ev.name(), s.first.clone()?)))
        .collect();
    for (i, s) in st.iter_mut().enumerate() {
        let Some(own) = s.first.as_ref() else {
            continue;
        };
        let peers: Vec<PeerView<'_>> = firsts
            .iter()
            .filter(|(j, _, _)| *j != i)
            .map(|(_, name, a)| PeerView {
                name,
                assessment: a,
            })
            .collect();
        let t = Instant::now();
        let r = in_time(input, 2).and_then(|()| s.ev.observe(input, own, &peers));
        s.elapsed += t.elapsed();
        match r {
            Ok(o) => {
                s.cost.merge(&o.cost);
                let mut p = o.patterns;
                p.sort();
                p.dedup();
                s.patterns = p;
            }
            Err(e) => s.fail(2, &e),
        }
    }
}

/// The consensus patterns: reported by at least half the active members.
fn consensus_patterns(st: &[State<'_>]) -> Vec<String> {
    let active = st.iter().filter(|s| s.active()).count();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in st.iter().filter(|s| s.active()) {
        for p in &s.patterns {
            *counts.entry(p.as_str()).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .filter(|&(_, n)| 2 * n >= active)
        .map(|(p, _)| p.to_string())
        .collect()
}

/// Round 3: final assessments of the active members given the consensus patterns.
fn conclude_round(st: &mut [State<'_>], input: &RelateInput<'_>, patterns: &[String]) {
    for s in st.iter_mut().filter(|s| s.active()) {
        let Some(own) = s.first.as_ref() else {
            continue;
        };
        let t = Instant::now();
        let r = in_time(input, 3)
            .and_then(|()| s.ev.conclude(input, own, patterns))
            .and_then(|a| covers(input, a));
        s.elapsed += t.elapsed();
        match r {
            Ok(a) => {
                s.cost.merge(&a.cost);
                s.last = Some(a);
            }
            Err(e) => s.fail(3, &e),
        }
    }
}

/// The circle stopped: fewer than [`MIN_ACTIVE`] members were still active after a round.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "circle: {active} of {members} members active after round {round}, {MIN_ACTIVE} needed \
     ({})",
    .lost.join(", ")
)]
pub struct TooFewMembers {
    /// Members still active.
    pub active: usize,
    /// Members of the circle.
    pub members: usize,
    /// The round after which it stopped.
    pub round: u8,
    /// Each member that lost its vote: `NAME OUTCOME in round N`.
    pub lost: Vec<String>,
}

/// Why the circle cannot go on after `round`, when fewer than [`MIN_ACTIVE`] members are
/// active.
fn too_few(st: &[State<'_>], round: u8) -> Option<TooFewMembers> {
    let active = st.iter().filter(|s| s.active()).count();
    if active >= MIN_ACTIVE {
        return None;
    }
    let lost: Vec<String> = st
        .iter()
        .filter_map(|s| {
            let (r, o) = s.failed.as_ref()?;
            Some(format!("{} {o} in round {r}", s.ev.name()))
        })
        .collect();
    Some(TooFewMembers {
        active,
        members: st.len(),
        round,
        lost,
    })
}

fn failed(st: &[State<'_>], reason: TooFewMembers) -> CircleRun {
    CircleRun {
        result: Err(reason),
        runs: st.iter().map(State::run).collect(),
        consensus: None,
    }
}

/// The consensus layers (max F, max I capped at 1 − F, T the rest) and the largest
/// falsehood range of any layer.
fn consensus_layers(
    input: &RelateInput<'_>,
    finals: &[(&str, &Assessment)],
) -> (Vec<LayerAssessment>, f64) {
    let mut range: f64 = 0.0;
    let mut out = Vec::with_capacity(input.layers.len());
    for l in input.layers {
        let views: Vec<(&str, &LayerAssessment)> = finals
            .iter()
            .filter_map(|(n, a)| Some((*n, a.layers.iter().find(|x| x.layer == l.layer)?)))
            .collect();
        let f_max = views
            .iter()
            .map(|(_, x)| x.value.falsehood)
            .fold(0.0, f64::max);
        let f_min = views
            .iter()
            .map(|(_, x)| x.value.falsehood)
            .fold(1.0, f64::min);
        let i_max = views
            .iter()
            .map(|(_, x)| x.value.indeterminacy)
            .fold(0.0, f64::max);
        if !views.is_empty() {
            range = range.max(f_max - f_min);
        }
        // The first member (in configuration order) with the highest falsehood speaks for
        // the layer.
        let top = views.iter().find(|(_, x)| x.value.falsehood >= f_max);
        let mut evidence: Vec<String> = views
            .iter()
            .flat_map(|(_, x)| x.evidence.iter().cloned())
            .collect();
        if let Some((name, _)) = top {
            evidence.push(format!("falsehood_from:{name}"));
        }
        evidence.sort();
        evidence.dedup();
        out.push(LayerAssessment {
            layer: l.layer,
            segments: l.segments.clone(),
            bytes: l.bytes(),
            value: Neutrosophic::from_evidence(f_max, i_max),
            evidence,
            reasoning: top.and_then(|(name, x)| Some(format!("{name}: {}", x.reasoning.as_ref()?))),
        });
    }
    (out, range)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn llm_member(name: &str) -> MemberOptions {
        let llm: toml::Table = toml::from_str(
            "llm = { protocol = \"openai\", base_url = \"http://127.0.0.1:9/v1\", model = \"m\" }",
        )
        .unwrap();
        MemberOptions {
            name: name.into(),
            backend: Backend::Llm,
            llm: Some(toml::Value::Table(llm).try_into().unwrap()),
        }
    }

    fn local_member(name: &str) -> MemberOptions {
        MemberOptions {
            name: name.into(),
            backend: Backend::Local,
            llm: None,
        }
    }

    fn build(members: Vec<MemberOptions>, dissent: f64) -> Result<Circle, String> {
        Circle::new(CircleOptions { members, dissent }, &LocalOptions::default())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn member_counts_names_and_backends_are_checked() {
        assert!(build(vec![local_member("a"), llm_member("b")], 0.3).is_ok());
        let e = build(vec![local_member("a")], 0.3).unwrap_err();
        assert!(e.contains("2 to 10 members, got 1"), "{e}");
        let many = (0..11).map(|i| local_member(&format!("m{i}"))).collect();
        assert!(build(many, 0.3).unwrap_err().contains("got 11"));
        let ten = (0..10).map(|i| local_member(&format!("m{i}"))).collect();
        assert!(build(ten, 0.3).is_ok());
        let e = build(vec![local_member("a"), llm_member("a")], 0.3).unwrap_err();
        assert!(e.contains("unique: \"a\""), "{e}");
        let e = build(vec![local_member(""), llm_member("a")], 0.3).unwrap_err();
        assert!(e.contains("name must not be empty"), "{e}");
        let mut bad = llm_member("b");
        bad.llm = None;
        let e = build(vec![local_member("a"), bad], 0.3).unwrap_err();
        assert!(
            e.contains("\"b\": backend = \"llm\" needs an llm table"),
            "{e}"
        );
        let mut bad = llm_member("b");
        bad.backend = Backend::Local;
        let e = build(vec![local_member("a"), bad], 0.3).unwrap_err();
        assert!(
            e.contains("\"b\": a local member takes no llm table"),
            "{e}"
        );
        let mut bad = local_member("b");
        bad.backend = Backend::Circle;
        let e = build(vec![local_member("a"), bad], 0.3).unwrap_err();
        assert!(e.contains("not circle"), "{e}");
        for d in [0.0, -0.1, 1.5, f64::NAN] {
            let e = build(vec![local_member("a"), local_member("b")], d).unwrap_err();
            assert!(e.contains("dissent"), "{e}");
        }
    }

    #[test]
    fn reads_are_the_local_members_reads() {
        let c = build(vec![local_member("a"), llm_member("b")], 0.3).unwrap();
        assert_eq!(c.reads(), LocalOptions::default().reads());
        let c = build(vec![llm_member("a"), llm_member("b")], 0.3).unwrap();
        assert!(c.reads().is_empty());
    }

    #[test]
    fn options_parse_strictly() {
        let o: CircleOptions = toml::from_str(
            r#"
            [[members]]
            name = "a"
            backend = "local"
            [[members]]
            name = "b"
            backend = "llm"
            llm = { llm = { protocol = "openai", base_url = "http://x/v1", model = "m" }, max_tokens = 64 }
            "#,
        )
        .unwrap();
        assert_eq!(o.dissent, 0.3);
        assert_eq!(o.members[1].llm.as_ref().unwrap().max_tokens, 64);
        assert!(
            toml::from_str::<CircleOptions>("members = []\nquorum = 2").is_err(),
            "unknown key"
        );
        assert!(
            toml::from_str::<CircleOptions>(
                "[[members]]\nname = \"a\"\nbackend = \"local\"\nweight = 2"
            )
            .is_err()
        );
        assert!(toml::from_str::<CircleOptions>("[[members]]\nname = \"a\"").is_err());
    }
}
