//! The circle backend (PromptGuard's Fire Circle): several evaluators in three rounds, the
//! most alarmed view kept.

use crate::evaluator::{Assessment, RelateInput};
use crate::local::LocalOptions;
use rampart_core::{CircleConsensus, EvaluatorRun};
use serde::{Deserialize, Serialize};

/// Options of the circle (`[layers.circle]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CircleOptions {
    /// The members.
    pub members: Vec<toml::Table>,
}

/// The circle, built.
#[derive(Debug)]
pub struct Circle {}

/// What one run of the circle gives.
#[derive(Debug)]
pub struct CircleRun {
    /// The consensus assessment, or why the circle failed.
    pub result: Result<Assessment, String>,
    /// Per member.
    pub runs: Vec<EvaluatorRun>,
    /// The consensus, when the circle reached one.
    pub consensus: Option<CircleConsensus>,
}

impl Circle {
    /// Builds the circle and its members.
    pub fn new(opts: CircleOptions, local: &LocalOptions) -> Result<Self, String> {
        let _ = (opts, local);
        Err("the circle backend is not available in this build".into())
    }

    /// The earlier layers its local members read.
    pub fn reads(&self) -> Vec<String> {
        Vec::new()
    }

    /// Runs the three rounds.
    pub fn run(&self, input: &RelateInput<'_>) -> CircleRun {
        let _ = input;
        CircleRun {
            result: Err("not available".into()),
            runs: Vec::new(),
            consensus: None,
        }
    }
}
