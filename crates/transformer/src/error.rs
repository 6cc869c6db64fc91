//! Errors.

use std::path::PathBuf;

/// Why a model could not be loaded or run. Messages never contain input text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransformerError {
    /// A file of the model directory is missing or unreadable.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// `config.json` is malformed or describes something this crate does not run.
    #[error("model config {path}: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The architecture is not supported.
    #[error("unsupported model: {0}")]
    Unsupported(String),
    /// A weight is missing or has the wrong shape.
    #[error("weights: {0}")]
    Weights(String),
    /// The tokenizer could not be loaded or failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The label mapping is ambiguous or names unknown labels.
    #[error("labels: {0}")]
    Labels(String),
    /// Invalid options (window size, stride, threads …).
    #[error("options: {0}")]
    Options(String),
    /// A per-role threshold (`thresholds`) is out of range.
    #[error("options: {0}")]
    Thresholds(rampart_core::RoleThresholdsError),
    /// The tensor backend failed during a forward pass.
    #[error("backend: {0}")]
    Backend(String),
    /// The deadline passed before every window was scored.
    #[error("deadline passed before every window was scored")]
    Deadline,
    /// Downloading from the hub failed.
    #[error("download: {0}")]
    Download(String),
}

impl From<candle_core::Error> for TransformerError {
    fn from(e: candle_core::Error) -> Self {
        TransformerError::Backend(e.to_string())
    }
}

/// Result alias.
pub type Result<T, E = TransformerError> = std::result::Result<T, E>;
