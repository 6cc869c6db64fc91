//! Errors of the library.

use std::path::PathBuf;

/// Why mining, reading a candidate or turning it into a rule failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line of an eval log is not an eval log record.
    #[error("{origin}:{line}: not a rampart.eval_log.v1 record: {message}")]
    LogLine {
        /// The file (or a description of the source).
        origin: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Nothing to mine.
    #[error("no eval log records to mine")]
    NoLogRecords,
    /// The logs hold several configurations and none was chosen.
    #[error("the logs hold several configurations ({0}); choose one")]
    AmbiguousConfig(String),
    /// The chosen configuration is not in the logs.
    #[error("configuration `{config}` is not in the logs (found: {found})")]
    UnknownConfig {
        /// The configuration asked for.
        config: String,
        /// Those present.
        found: String,
    },
    /// The logs come from more than one evaluation run.
    #[error("the logs come from several evaluation runs ({0}); mine one run at a time")]
    MixedRuns(String),
    /// The run id is not `eval_{YYYYMMDD_HHMMSS}`.
    #[error("bad eval_run_id: {0}")]
    BadRunId(rampart_core::timefmt::TimeError),
    /// The logs name a dataset whose records were not given.
    #[error("no records given for dataset `{0}` (eval logs carry no text: load the dataset)")]
    MissingDataset(String),
    /// The same prompt appears twice for one dataset and configuration.
    #[error("dataset `{dataset}`: prompt id `{id}` appears twice in the logs")]
    DuplicatePrompt {
        /// The dataset.
        dataset: String,
        /// The prompt id.
        id: String,
    },
    /// Building a rule matcher failed.
    #[error("compiling rules: {0}")]
    Rules(String),
    /// Serializing a record failed.
    #[error("serializing: {0}")]
    Json(#[from] serde_json::Error),
    /// No candidate has this id.
    #[error("no candidate with pattern_id `{0}` in the file")]
    NoSuchCandidate(String),
    /// A line of a candidates file could not be read as a `pattern_candidates.v1` record.
    #[error("line {line}: not a pattern_candidates.v1 record: {message}")]
    BadCandidate {
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The candidate is recommended `exclude`.
    #[error("candidate {id} is recommended `exclude` ({reason})")]
    Excluded {
        /// The candidate.
        id: String,
        /// Its decision reason.
        reason: String,
    },
    /// The rule pack (existing or generated) does not parse, compile or pass its examples.
    #[error("rule pack: {0}")]
    Pack(String),
    /// No example could be derived from the pattern.
    #[error("cannot derive a {which} example for {id}: {message}")]
    NoExample {
        /// The candidate.
        id: String,
        /// `must_match` or `must_not_match`.
        which: &'static str,
        /// What was tried.
        message: String,
    },
}

/// Several errors (compile errors, failed examples) as one message, joined by `; `.
pub(crate) fn joined<E: std::fmt::Display>(errs: &[E]) -> String {
    errs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
