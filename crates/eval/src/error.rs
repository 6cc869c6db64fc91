//! Errors of the evaluation library.

use std::path::PathBuf;

/// Why an evaluation, a report or a gate check could not be completed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A JSON document (a baseline summary) could not be read or written.
    #[error("{path}: invalid JSON: {message}")]
    Json {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The gate file is malformed (syntax, unknown key, missing bound…).
    #[error("{path}: {message}")]
    Gate {
        /// The gate file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Two configurations share a name.
    #[error("two configurations are named {0:?}; give them distinct names (NAME=FILE)")]
    DuplicateConfig(String),
    /// Nothing to evaluate.
    #[error("nothing to evaluate: {0}")]
    Empty(&'static str),
    /// The worker thread pool could not be built.
    #[error("cannot start {threads} worker threads: {message}")]
    ThreadPool {
        /// Threads asked for.
        threads: usize,
        /// The error.
        message: String,
    },
    /// The conversation options are invalid.
    #[error("conversation options: {0}")]
    ConversationOptions(#[from] rampart_conversation::OptionsError),
    /// The conversation options file could not be read, or is malformed (it names the
    /// file).
    #[error(transparent)]
    ConversationConfig(#[from] rampart_conversation::LoadOptionsError),
    /// A plot could not be drawn.
    #[error("drawing a plot: {0}")]
    Plot(String),
}

impl EvalError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EvalError::Io {
            path: path.into(),
            source,
        }
    }
}
