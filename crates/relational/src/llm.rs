//! The llm backend: one model asked per layer through `rampart-llm`.

use crate::evaluator::{Assessment, Evaluator, EvaluatorError, RelateInput};
use rampart_core::Backend;
use serde::{Deserialize, Serialize};

/// Options of the llm backend (`[layers.llm]`, or a circle member's `llm`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmEvaluatorOptions {
    /// The model endpoint: a `rampart_llm::LlmConfig` table.
    pub llm: toml::Table,
}

/// An evaluator backed by an LLM.
#[derive(Debug)]
pub struct LlmEvaluator {
    name: String,
}

impl LlmEvaluator {
    /// Builds the evaluator.
    pub fn new(name: impl Into<String>, opts: LlmEvaluatorOptions) -> Result<Self, String> {
        let _ = opts;
        let _ = name.into();
        Err("the llm backend is not available in this build".into())
    }
}

impl Evaluator for LlmEvaluator {
    fn name(&self) -> &str {
        &self.name
    }
    fn backend(&self) -> Backend {
        Backend::Llm
    }
    fn assess(&self, _input: &RelateInput<'_>) -> Result<Assessment, EvaluatorError> {
        Err(EvaluatorError::Failed("not available".into()))
    }
}
