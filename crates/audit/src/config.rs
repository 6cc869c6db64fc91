//! [`AuditConfig`]: where the log lives and how its writer behaves under load.

use crate::AuditError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Largest accepted `queue_capacity` (records).
pub const MAX_QUEUE_CAPACITY: usize = 1 << 20;
/// Largest accepted `max_batch` (records per transaction).
pub const MAX_BATCH: usize = 1 << 16;

/// What [`AuditWriter::append`](crate::AuditWriter::append) does when the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFull {
    /// Wait (asynchronously) up to `wait_ms` for room in the queue, then fail with
    /// [`AuditError::Full`]. TOML: `on_full = "backpressure"` with `backpressure_wait_ms`.
    Backpressure {
        /// How long to wait for room, in milliseconds.
        wait_ms: u64,
    },
    /// Fail with [`AuditError::Full`] at once. TOML: `on_full = "fail_closed"`.
    FailClosed,
}

impl Default for OnFull {
    fn default() -> Self {
        OnFull::Backpressure {
            wait_ms: DEFAULT_BACKPRESSURE_WAIT_MS,
        }
    }
}

/// Default `backpressure_wait_ms`.
pub const DEFAULT_BACKPRESSURE_WAIT_MS: u64 = 250;

/// SQLite's `synchronous` setting for the writer (the log always runs in WAL mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// `synchronous = NORMAL`: a committed record survives a crash of the process (kill -9),
    /// not necessarily a power loss or OS crash (the WAL is synced at checkpoints only).
    #[default]
    Normal,
    /// `synchronous = FULL`: the WAL is synced on every commit, so a committed record also
    /// survives a power loss. Slower: one fsync per group commit.
    Full,
}

impl Synchronous {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }
}

/// The audit log's configuration: the service's `[audit]` section.
///
/// ```toml
/// [audit]
/// path = "/var/lib/rampart/audit.db"   # created (with its directory) if absent
/// queue_capacity = 4096                # records waiting for the writer
/// max_batch = 512                      # records per transaction (group commit)
/// on_full = "backpressure"             # or "fail_closed"
/// backpressure_wait_ms = 250           # only with on_full = "backpressure"
/// retention_days = 30                  # absent: keep everything
/// prune_interval_s = 3600              # how often the writer applies the retention
/// synchronous = "normal"               # or "full" (fsync per commit)
/// busy_timeout_ms = 5000               # wait for a lock held by another process
/// chain_key_env = "RAMPART_HASH_KEY"   # key of the governance hash chain
/// tool_argument_values = false         # store tool-call argument values (default: hashes only)
/// ```
///
/// Every key is optional; unknown keys are an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawAuditConfig", into = "RawAuditConfig")]
pub struct AuditConfig {
    /// The SQLite database file. Default `rampart-audit.db`.
    pub path: PathBuf,
    /// Capacity of the queue between the request path and the writer thread. Default 4096.
    pub queue_capacity: usize,
    /// Most records the writer commits in one transaction. Default 512.
    pub max_batch: usize,
    /// What `append` does when the queue is full. Default: back-pressure for 250 ms.
    pub on_full: OnFull,
    /// Delete records older than this many days (at open, then every `prune_interval_s`).
    /// Default: keep everything.
    pub retention_days: Option<u32>,
    /// Seconds between retention passes of the writer. Default 3600.
    pub prune_interval_s: u64,
    /// Durability of a commit. Default [`Synchronous::Normal`].
    pub synchronous: Synchronous,
    /// How long the writer waits for a lock held by another connection before failing the
    /// batch, in milliseconds. Default 5000.
    pub busy_timeout_ms: u64,
    /// The environment variable holding the key material of the governance hash chain.
    /// Default `RAMPART_HASH_KEY` (the service's input-hash key; the chain derives its own
    /// key from it). Unset or empty: the public key (see [`ChainKey`](crate::ChainKey)).
    pub chain_key_env: String,
    /// Store the argument values of tool calls in the governance audit (default false:
    /// only per-argument keyed hashes).
    pub tool_argument_values: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            path: PathBuf::from("rampart-audit.db"),
            queue_capacity: 4096,
            max_batch: 512,
            on_full: OnFull::default(),
            retention_days: None,
            prune_interval_s: 3600,
            synchronous: Synchronous::Normal,
            busy_timeout_ms: 5000,
            chain_key_env: crate::DEFAULT_CHAIN_KEY_ENV.into(),
            tool_argument_values: false,
        }
    }
}

impl AuditConfig {
    /// A default configuration writing to `path`.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        AuditConfig {
            path: path.into(),
            ..AuditConfig::default()
        }
    }

    /// Checks the values (also done by [`AuditLog::open`](crate::AuditLog::open) and when
    /// deserializing).
    pub fn validate(&self) -> Result<(), AuditError> {
        if self.path.as_os_str().is_empty() {
            return Err(AuditError::Config("path must not be empty".into()));
        }
        if !(1..=MAX_QUEUE_CAPACITY).contains(&self.queue_capacity) {
            return Err(AuditError::Config(format!(
                "queue_capacity must be between 1 and {MAX_QUEUE_CAPACITY}, got {}",
                self.queue_capacity
            )));
        }
        if !(1..=MAX_BATCH).contains(&self.max_batch) {
            return Err(AuditError::Config(format!(
                "max_batch must be between 1 and {MAX_BATCH}, got {}",
                self.max_batch
            )));
        }
        if self.retention_days == Some(0) {
            return Err(AuditError::Config(
                "retention_days must be at least 1 (omit it to keep everything)".into(),
            ));
        }
        if self.retention_days.is_some_and(|d| d > 36_500) {
            return Err(AuditError::Config(
                "retention_days must be at most 36500".into(),
            ));
        }
        if self.chain_key_env.trim().is_empty() {
            return Err(AuditError::Config(
                "chain_key_env must name an environment variable".into(),
            ));
        }
        if self.prune_interval_s == 0 {
            return Err(AuditError::Config(
                "prune_interval_s must be at least 1".into(),
            ));
        }
        if let OnFull::Backpressure { wait_ms } = self.on_full
            && wait_ms > 600_000
        {
            return Err(AuditError::Config(
                "backpressure_wait_ms must be at most 600000".into(),
            ));
        }
        Ok(())
    }

    /// The retention as milliseconds, if set.
    pub(crate) fn retention_ms(&self) -> Option<i64> {
        self.retention_days.map(|d| i64::from(d) * 86_400_000)
    }
}

/// `on_full` as written in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OnFullKind {
    Backpressure,
    FailClosed,
}

/// The flat TOML shape of [`AuditConfig`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawAuditConfig {
    path: PathBuf,
    queue_capacity: usize,
    max_batch: usize,
    on_full: OnFullKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    backpressure_wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retention_days: Option<u32>,
    prune_interval_s: u64,
    synchronous: Synchronous,
    busy_timeout_ms: u64,
    chain_key_env: String,
    tool_argument_values: bool,
}

impl Default for RawAuditConfig {
    fn default() -> Self {
        // `backpressure_wait_ms` is only written when given, so `fail_closed` alone is valid.
        let mut raw = RawAuditConfig::from(AuditConfig::default());
        raw.backpressure_wait_ms = None;
        raw
    }
}

impl From<AuditConfig> for RawAuditConfig {
    fn from(c: AuditConfig) -> Self {
        let (on_full, backpressure_wait_ms) = match c.on_full {
            OnFull::Backpressure { wait_ms } => (OnFullKind::Backpressure, Some(wait_ms)),
            OnFull::FailClosed => (OnFullKind::FailClosed, None),
        };
        RawAuditConfig {
            path: c.path,
            queue_capacity: c.queue_capacity,
            max_batch: c.max_batch,
            on_full,
            backpressure_wait_ms,
            retention_days: c.retention_days,
            prune_interval_s: c.prune_interval_s,
            synchronous: c.synchronous,
            busy_timeout_ms: c.busy_timeout_ms,
            chain_key_env: c.chain_key_env,
            tool_argument_values: c.tool_argument_values,
        }
    }
}

impl TryFrom<RawAuditConfig> for AuditConfig {
    type Error = AuditError;

    fn try_from(r: RawAuditConfig) -> Result<Self, AuditError> {
        let on_full = match (r.on_full, r.backpressure_wait_ms) {
            (OnFullKind::Backpressure, w) => OnFull::Backpressure {
                wait_ms: w.unwrap_or(DEFAULT_BACKPRESSURE_WAIT_MS),
            },
            (OnFullKind::FailClosed, None) => OnFull::FailClosed,
            (OnFullKind::FailClosed, Some(_)) => {
                return Err(AuditError::Config(
                    "backpressure_wait_ms only applies with on_full = \"backpressure\"".into(),
                ));
            }
        };
        let c = AuditConfig {
            path: r.path,
            queue_capacity: r.queue_capacity,
            max_batch: r.max_batch,
            on_full,
            retention_days: r.retention_days,
            prune_interval_s: r.prune_interval_s,
            synchronous: r.synchronous,
            busy_timeout_ms: r.busy_timeout_ms,
            chain_key_env: r.chain_key_env,
            tool_argument_values: r.tool_argument_values,
        };
        c.validate()?;
        Ok(c)
    }
}
