//! The evaluator contract: every backend (local signals, an LLM, a member of the circle)
//! turns a layered prompt into per-layer triples and trust violations.

use crate::{Backend, LayerAssessment, PromptLayer, RelationalCost, TrustViolation};
use rampart_core::Earlier;
use std::fmt::Debug;
use std::time::Instant;

/// One layer of the prompt as an evaluator sees it.
#[derive(Debug, Clone)]
pub struct LayerText<'a> {
    /// The layer.
    pub layer: PromptLayer,
    /// The request's segments that make it up, in order.
    pub segments: Vec<usize>,
    /// Their texts, in the same order.
    pub texts: Vec<&'a str>,
}

impl LayerText<'_> {
    /// Total bytes of the layer.
    pub fn bytes(&self) -> usize {
        self.texts.iter().map(|t| t.len()).sum()
    }
}

/// What an evaluator is given.
#[derive(Debug, Clone, Copy)]
pub struct RelateInput<'a> {
    /// The prompt's layers that are present, highest authority first. There is always a
    /// user layer.
    pub layers: &'a [LayerText<'a>],
    /// What the pipeline's earlier layers found (scores, findings), when the evaluator runs
    /// inside a pipeline. The local backend needs it.
    pub earlier: Option<&'a Earlier<'a>>,
    /// When the answer is due.
    pub deadline: Instant,
}

impl RelateInput<'_> {
    /// The layer `layer`, when present.
    pub fn layer(&self, layer: PromptLayer) -> Option<&LayerText<'_>> {
        self.layers.iter().find(|l| l.layer == layer)
    }
}

/// An evaluator's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assessment {
    /// One per layer of the input, in the input's order.
    pub layers: Vec<LayerAssessment>,
    /// Trust violations it found.
    pub violations: Vec<TrustViolation>,
    /// Patterns it observes (circle round 2 onwards), short names such as
    /// `"role_confusion"` or `"asks for the system prompt"`.
    pub patterns: Vec<String>,
    /// The model, for an LLM evaluator.
    pub model: Option<String>,
    /// How its call ended when an outcome the configuration maps to a value (rather than to
    /// a failure) was applied, e.g. `"refused→violation"`; `None` when every call was ok.
    pub outcome: Option<String>,
    /// Its calls' tokens and cost.
    pub cost: RelationalCost,
}

/// What one member of the circle said in round 1, as its peers see it in round 2.
#[derive(Debug, Clone, Copy)]
pub struct PeerView<'a> {
    /// The member's name.
    pub name: &'a str,
    /// Its assessment.
    pub assessment: &'a Assessment,
}

/// What a member of the circle observes in round 2.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    /// Pattern names, short (`"instruction_override"`, `"asks_for_system_prompt"`).
    pub patterns: Vec<String>,
    /// Tokens and cost of this round's calls only.
    pub cost: RelationalCost,
}

/// Why an evaluator gave no assessment.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EvaluatorError {
    /// A model call ended without a usable answer and the configuration makes that a
    /// failure: `outcome` is `refused`, `unparseable`, `empty`, `truncated`,
    /// `invalid_triple`, `timeout`, `http_error` or `budget_exhausted`.
    #[error("{outcome}: {detail}")]
    Outcome {
        /// The outcome's name.
        outcome: String,
        /// What happened (never input text).
        detail: String,
        /// Tokens and cost spent before it failed.
        cost: Box<RelationalCost>,
    },
    /// The local backend ran without the pipeline's earlier layers.
    #[error("the local evaluator needs the pipeline's earlier layers (scores and findings)")]
    NoSignals,
    /// Anything else (never input text).
    #[error("{0}")]
    Failed(String),
}

impl EvaluatorError {
    /// The outcome name the report records.
    pub fn outcome(&self) -> &str {
        match self {
            EvaluatorError::Outcome { outcome, .. } => outcome,
            EvaluatorError::NoSignals => "no_signals",
            EvaluatorError::Failed(_) => "failed",
        }
    }

    /// Tokens and cost spent before the failure.
    pub fn cost(&self) -> RelationalCost {
        match self {
            EvaluatorError::Outcome { cost, .. } => (**cost).clone(),
            _ => RelationalCost::default(),
        }
    }
}

/// An evaluator backend. Built once, shared across threads.
///
/// Two methods are required. The circle's later rounds have defaults that keep the round-1
/// assessment and report the patterns it implies ([`implied_patterns`]); an LLM evaluator
/// overrides them to show the model its peers' answers.
pub trait Evaluator: Send + Sync + Debug {
    /// Name in reports (the configuration's, or the backend's).
    fn name(&self) -> &str;

    /// The backend kind (`local` or `llm`; the circle is not a member of itself).
    fn backend(&self) -> Backend;

    /// The model asked, for an LLM evaluator (recorded even when a call fails).
    fn model(&self) -> Option<&str> {
        None
    }

    /// Round 1: an independent assessment of every layer of `input`.
    fn assess(&self, input: &RelateInput<'_>) -> Result<Assessment, EvaluatorError>;

    /// Round 2: having seen its peers' round-1 assessments, the patterns it observes (and
    /// the cost of this round's calls). The default reports the patterns its own assessment
    /// implies, at no cost.
    fn observe(
        &self,
        input: &RelateInput<'_>,
        own: &Assessment,
        peers: &[PeerView<'_>],
    ) -> Result<Observation, EvaluatorError> {
        let _ = (input, peers);
        Ok(Observation {
            patterns: implied_patterns(own),
            cost: RelationalCost::default(),
        })
    }

    /// Round 3: its final assessment given the patterns the circle agreed on. The returned
    /// assessment's `cost` is this round's calls only. The default keeps its round-1
    /// assessment, at no cost.
    fn conclude(
        &self,
        input: &RelateInput<'_>,
        own: &Assessment,
        consensus: &[String],
    ) -> Result<Assessment, EvaluatorError> {
        let _ = (input, consensus);
        Ok(Assessment {
            cost: RelationalCost::default(),
            ..own.clone()
        })
    }
}

/// The patterns an assessment implies: each violation's kind, and `high_falsehood:LAYER`
/// for every layer whose falsehood is at least 0.5. Sorted, without duplicates.
pub fn implied_patterns(a: &Assessment) -> Vec<String> {
    let mut p: Vec<String> = a
        .violations
        .iter()
        .map(|v| v.kind.name().to_string())
        .chain(
            a.layers
                .iter()
                .filter(|l| l.value.falsehood >= 0.5)
                .map(|l| format!("high_falsehood:{}", l.layer)),
        )
        .chain(a.patterns.iter().cloned())
        .collect();
    p.sort();
    p.dedup();
    p
}
