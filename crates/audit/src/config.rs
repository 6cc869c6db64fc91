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

/// Where the audit log is stored: `[audit] backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditBackend {
    /// An embedded SQLite file (`path`), WAL mode: one per replica. The default.
    #[default]
    Sqlite,
    /// A PostgreSQL database (`[audit.postgres]`): one for every replica, one governance
    /// chain across them.
    Postgres,
}

/// Default `[audit.postgres] url_env`.
pub const DEFAULT_POSTGRES_URL_ENV: &str = "RAMPART_AUDIT_POSTGRES_URL";

/// How to reach PostgreSQL: the `[audit.postgres]` section.
///
/// ```toml
/// [audit.postgres]
/// url_env = "RAMPART_AUDIT_POSTGRES_URL"  # postgres://user:password@host:5432/db
/// connect_timeout_ms = 5000
/// statement_timeout_ms = 10000
/// ```
///
/// The URL (or key-value connection string) is read from the environment variable, never
/// from the file, so that no password sits in a configuration file.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PostgresConfig {
    /// The environment variable holding the connection URL. Default
    /// `RAMPART_AUDIT_POSTGRES_URL`.
    pub url_env: String,
    /// The URL itself, for programs that build the configuration (tests, benchmarks); never
    /// read from or written to a file. When set, `url_env` is not read.
    #[serde(skip)]
    pub url: Option<String>,
    /// Time to connect and authenticate, milliseconds. Default 5000.
    pub connect_timeout_ms: u64,
    /// Longest a statement may run (PostgreSQL's `statement_timeout`, which also bounds the
    /// wait for the governance chain's lock), milliseconds. Default 10000.
    pub statement_timeout_ms: u64,
}

impl std::fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password.
        f.debug_struct("PostgresConfig")
            .field("url_env", &self.url_env)
            .field("url", &self.url.as_ref().map(|_| "<set>"))
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("statement_timeout_ms", &self.statement_timeout_ms)
            .finish()
    }
}

impl Default for PostgresConfig {
    fn default() -> Self {
        PostgresConfig {
            url_env: DEFAULT_POSTGRES_URL_ENV.into(),
            url: None,
            connect_timeout_ms: 5000,
            statement_timeout_ms: 10_000,
        }
    }
}

impl PostgresConfig {
    /// A configuration reading the URL from the environment variable `var`.
    pub fn from_env_var(var: impl Into<String>) -> Self {
        PostgresConfig {
            url_env: var.into(),
            ..PostgresConfig::default()
        }
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<(), AuditError> {
        if self.url.is_none() && self.url_env.trim().is_empty() {
            return Err(AuditError::Config(
                "[audit.postgres] url_env must name an environment variable".into(),
            ));
        }
        if !(1..=600_000).contains(&self.connect_timeout_ms) {
            return Err(AuditError::Config(
                "[audit.postgres] connect_timeout_ms must be between 1 and 600000".into(),
            ));
        }
        if !(1..=3_600_000).contains(&self.statement_timeout_ms) {
            return Err(AuditError::Config(
                "[audit.postgres] statement_timeout_ms must be between 1 and 3600000".into(),
            ));
        }
        Ok(())
    }

    /// How errors name this database: `postgres ($VAR)`, never the URL (it may hold a
    /// password).
    pub fn location(&self) -> String {
        if self.url.is_some() {
            "postgres (URL given)".into()
        } else {
            format!("postgres (${})", self.url_env)
        }
    }

    /// The connection URL: `url`, else the variable `url_env`.
    pub(crate) fn resolve_url(&self) -> Result<String, AuditError> {
        if let Some(u) = &self.url {
            return Ok(u.clone());
        }
        match std::env::var(&self.url_env) {
            Ok(u) if !u.trim().is_empty() => Ok(u),
            _ => Err(AuditError::Config(format!(
                "the audit log's PostgreSQL URL comes from the environment variable {}, \
                 which is not set",
                self.url_env
            ))),
        }
    }
}

/// The audit log's configuration: the service's `[audit]` section.
///
/// ```toml
/// [audit]
/// backend = "sqlite"                   # or "postgres" (then [audit.postgres]; path unused)
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
/// [audit.postgres]                     # with backend = "postgres" (see PostgresConfig)
/// url_env = "RAMPART_AUDIT_POSTGRES_URL"
/// ```
///
/// Every key is optional; unknown keys are an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawAuditConfig", into = "RawAuditConfig")]
pub struct AuditConfig {
    /// Where records are stored. Default [`AuditBackend::Sqlite`].
    pub backend: AuditBackend,
    /// The SQLite database file (backend `sqlite`). Default `rampart-audit.db`.
    pub path: PathBuf,
    /// The PostgreSQL database (backend `postgres`; absent: the defaults of
    /// [`PostgresConfig`]).
    pub postgres: Option<PostgresConfig>,
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
            backend: AuditBackend::Sqlite,
            path: PathBuf::from("rampart-audit.db"),
            postgres: None,
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
        match (self.backend, &self.postgres) {
            (AuditBackend::Sqlite, Some(_)) => {
                return Err(AuditError::Config(
                    "[audit.postgres] only applies with backend = \"postgres\"".into(),
                ));
            }
            (AuditBackend::Postgres, Some(p)) => p.validate()?,
            _ => {}
        }
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

    /// A default configuration writing to PostgreSQL.
    pub fn postgres(pg: PostgresConfig) -> Self {
        AuditConfig {
            backend: AuditBackend::Postgres,
            postgres: Some(pg),
            ..AuditConfig::default()
        }
    }

    /// Where the log is, to read it ([`AuditReader::open_source`](crate::AuditReader::open_source),
    /// [`verify_source`](crate::verify_source), [`prune_source`](crate::prune_source)).
    pub fn source(&self) -> AuditSource {
        match self.backend {
            AuditBackend::Sqlite => AuditSource::Sqlite(self.path.clone()),
            AuditBackend::Postgres => {
                AuditSource::Postgres(self.postgres.clone().unwrap_or_default())
            }
        }
    }

    /// How messages name the log: the SQLite path, or `postgres ($VAR)`.
    pub fn location(&self) -> String {
        self.source().location()
    }

    /// The retention as milliseconds, if set.
    pub(crate) fn retention_ms(&self) -> Option<i64> {
        self.retention_days.map(|d| i64::from(d) * 86_400_000)
    }
}

/// An audit log to read, verify or prune: a SQLite file or a PostgreSQL database.
#[derive(Debug, Clone, PartialEq)]
pub enum AuditSource {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(PostgresConfig),
}

impl AuditSource {
    /// How messages name it: the path, or `postgres ($VAR)`.
    pub fn location(&self) -> String {
        match self {
            AuditSource::Sqlite(p) => p.display().to_string(),
            AuditSource::Postgres(p) => p.location(),
        }
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
    backend: AuditBackend,
    path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    postgres: Option<PostgresConfig>,
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
            backend: c.backend,
            path: c.path,
            postgres: c.postgres,
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
            backend: r.backend,
            path: r.path,
            postgres: r.postgres,
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
