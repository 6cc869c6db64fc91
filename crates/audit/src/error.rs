//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong opening, writing, reading or pruning an audit log.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum AuditError {
    /// The queue is full: with `on_full = "fail_closed"` at once, with `"backpressure"` after
    /// `backpressure_wait_ms`. The record was not queued.
    #[error("audit log queue is full (the writer is falling behind)")]
    Full,
    /// The log is shut down (or its writer thread stopped). The record was not written.
    #[error("audit log is closed")]
    Closed,
    /// The transaction holding the record failed (disk full, I/O error, lock timeout…). The
    /// record was not written.
    #[error("audit log write failed: {message}")]
    Write {
        /// SQLite's description of the failure.
        message: String,
    },
    /// An SQLite error (the message is its source, as with every variant that has one).
    #[error("audit log {}: SQLite error", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The error.
        #[source]
        source: rusqlite::Error,
    },
    /// A PostgreSQL error: the server could not be reached within `connect_timeout_ms`,
    /// refused the login, or failed a statement (the message is its source).
    #[error("audit log {location}: PostgreSQL error")]
    Postgres {
        /// The database, as `postgres ($VAR)` (never the URL: it may hold a password).
        location: String,
        /// The error.
        #[source]
        source: postgres::Error,
    },
    /// PostgreSQL did not answer the connection within `connect_timeout_ms`.
    #[error(
        "audit log {location}: PostgreSQL did not accept the connection within {timeout_ms} ms"
    )]
    ConnectTimeout {
        /// The database, as `postgres ($VAR)`.
        location: String,
        /// The timeout.
        timeout_ms: u64,
    },
    /// An I/O error (creating the database's directory, writing an export).
    #[error("{}", path.display())]
    Io {
        /// The file or directory (`-` for an output stream).
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The database file does not exist (readers and `prune` never create one).
    #[error("audit log {} does not exist", path.display())]
    NotFound {
        /// The path.
        path: PathBuf,
    },
    /// The file is not a Rampart audit log, or its schema version is not one this build can
    /// use (for instance a newer one written by a later release).
    #[error("audit log {}: {message}", path.display())]
    Schema {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A stored row could not be decoded (its findings or timings JSON is damaged).
    #[error("audit log {}: record {id} is damaged: {message}", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// The record's row ID.
        id: i64,
        /// What is wrong.
        message: String,
    },
    /// The governance chain's last row was written with another key: appending under this
    /// key would make the chain unverifiable with either.
    #[error(
        "audit log {}: its governance chain (row {seq}) was written with key id {found}, \
         the configured key has id {expected}; restore that key or start a new audit file"
    , path.display())]
    ChainKey {
        /// The database file.
        path: PathBuf,
        /// The last row.
        seq: i64,
        /// Its key id.
        found: String,
        /// The configured key's id.
        expected: String,
    },
    /// An invalid configuration value.
    #[error("invalid audit configuration: {0}")]
    Config(String),
    /// An invalid filter, time or duration.
    #[error("{0}")]
    Filter(String),
    /// The writer thread could not be started or panicked.
    #[error("audit writer thread: {0}")]
    Thread(String),
}

impl AuditError {
    pub(crate) fn pg(location: &str) -> impl Fn(postgres::Error) -> AuditError + '_ {
        move |source| AuditError::Postgres {
            location: location.to_string(),
            source,
        }
    }

    pub(crate) fn sqlite(path: &std::path::Path) -> impl FnOnce(rusqlite::Error) -> AuditError {
        let path = path.to_path_buf();
        move |source| AuditError::Sqlite { path, source }
    }
}
