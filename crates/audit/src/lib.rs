//! Rampart's decision audit log: every decision the service makes, appended to a database,
//! queryable and exportable while the service runs.
//!
//! * **Backends** (`[audit] backend`, [`AuditBackend`]): `sqlite` (the default), an
//!   embedded SQLite file in WAL mode, one per replica; `postgres`, one PostgreSQL database
//!   for every replica ([`PostgresConfig`]: the URL from an environment variable, connect
//!   and statement timeouts), whose governance chain stays one chain across replicas (an
//!   advisory lock serializes appends). Both implement one small store trait (write a batch
//!   in one transaction, prune a chunk) and share the record encoding, the chain's cursor,
//!   the filters' SQL and `verify`; readers take an [`AuditSource`].
//!
//! * **What is stored**: time, request ID, API key ID, endpoint, the keyed hash of the
//!   input, action, risk, policy version, findings (rule ID, category, strength, layer) and
//!   per-layer timings ([`AuditRecord`]); with a judge layer, the judge's triggers, outcome,
//!   label, confidence, redacted explanation, model, prompt version, tokens, cost and latency
//!   ([`AuditJudge`]); with a relational layer, its status, label, ayni balance, exchange
//!   type, violation kinds, model calls, tokens, cost and time ([`AuditRelational`]). Never
//!   prompt text, never matched text. Values of a fixed set (action, risk, strength, the
//!   judge's outcome, label and cache status, the relational backend, status, label,
//!   exchange type and violation kinds) are the enums of `rampart-core`, `rampart-llm`,
//!   `rampart-judge` and `rampart-relational`, stored and exported under their serialized
//!   names (`BLOCK`, `high_risk`, `http_error`…).
//! * **Writing** ([`AuditLog`], [`AuditWriter`]): one writer thread owns the connection and
//!   commits whatever is queued (up to `max_batch` records) in one transaction (group
//!   commit). [`AuditWriter::append`] is async: it never blocks a thread, and resolves with
//!   the row ID only once the record's transaction has committed, so an acknowledged record
//!   survives a kill -9 of the process (and, with `synchronous = "full"`, a power loss).
//! * **Deferred explanations** ([`AuditWriter::record_explanation`], [`AuditExplanation`]):
//!   a judge's score-mode explanation that arrives after its decision was written updates
//!   that decision's row (its judge part: explanation, `explain_outcome`, tokens, cost,
//!   latency), through the same queue and in the same batch transactions. Decisions are
//!   updated only this way; the governance table is never updated.
//! * **Overload**: the queue is bounded (`queue_capacity`); when it is full, `append` waits
//!   up to `backpressure_wait_ms` or fails at once (`on_full = "fail_closed"`), returning
//!   [`AuditError::Full`] so the service can refuse the request rather than lose its record.
//! * **Reading** ([`AuditReader`]): filters by time range, action, rule ID, key ID, request
//!   ID, endpoint, the judge's intent label and outcome ([`AuditFilter`]); CSV or JSONL export ([`ExportFormat`]).
//! * **Retention**: `retention_days` deletes older records at open and every
//!   `prune_interval_s`; [`prune`] does it on demand. Neither touches the governance rows.
//! * **Governance** (schema version 4): tool decisions, approvals and break-glass events
//!   ([`GovernanceRecord`], [`AuditWriter::append_governance`], through the same queue and
//!   group commit) go to one append-only table (SQLite triggers refuse `UPDATE`/`DELETE`),
//!   hash-chained with a keyed BLAKE3 ([`ChainKey`], from `chain_key_env`); [`verify`] names
//!   the first edited, deleted or moved row; [`AuditReader::query_governance`] reads them
//!   ([`GovernanceFilter`]). Argument values are stored only with `tool_argument_values`.
//! * **Schema**: versioned with `PRAGMA user_version` ([`SCHEMA_VERSION`]) in SQLite, with the
//!   table `rampart_audit_schema` ([`POSTGRES_SCHEMA_VERSION`]) in PostgreSQL; an older log
//!   is migrated when the writer opens it, a newer one is refused with a clear error.
//!
//! ```
//! use rampart_audit::{AuditConfig, AuditFilter, AuditLog, AuditReader, AuditRecord, ExportFormat};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("audit.db");
//! let log = AuditLog::open(AuditConfig::at(&path))?;
//! let writer = log.writer();
//!
//! let record = AuditRecord {
//!     time_ms: rampart_audit::now_ms(),
//!     request_id: "req-1".into(),
//!     key_id: Some("team-a".into()),
//!     endpoint: "scan".into(),
//!     input_hash: "9f2c…".into(),
//!     hash_key_id: "k0".into(),
//!     action: rampart_core::Action::Block,
//!     risk: rampart_core::RiskClass::HighRisk,
//!     policy_version: "1".into(),
//!     findings: vec![rampart_audit::AuditFinding {
//!         rule_id: "CTRL_001".into(),
//!         category: "control_phrase".into(),
//!         strength: rampart_core::Strength::Strong,
//!         layer: "rules".into(),
//!     }],
//!     layer_timings_us: [("rules".to_string(), 42)].into(),
//!     elapsed_us: 50,
//!     degraded: false,
//!     judge: None,
//!     relational: None,
//! };
//! // In the service this is awaited on the request's task.
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let id = rt.block_on(writer.append(record.clone()))?;
//!
//! let reader = AuditReader::open(&path)?;
//! let blocked = reader.query(&AuditFilter {
//!     rule_id: Some("CTRL_001".into()),
//!     ..AuditFilter::default()
//! })?;
//! assert_eq!(blocked.len(), 1);
//! assert_eq!(blocked[0].id, id);
//! assert_eq!(blocked[0].record, record);
//!
//! let mut csv = Vec::new();
//! reader.export(&AuditFilter::default(), ExportFormat::Csv, &mut csv)?;
//! assert!(String::from_utf8(csv)?.starts_with("id,time,time_ms,request_id"));
//!
//! let stats = log.shutdown()?;
//! assert_eq!(stats.committed, 1);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod config;
mod error;
mod governance;
mod pg;
mod reader;
mod record;
mod schema;
mod sqlite;
mod store;
mod writer;

pub use config::{
    AuditBackend, AuditConfig, AuditSource, DEFAULT_BACKPRESSURE_WAIT_MS, DEFAULT_POSTGRES_URL_ENV,
    MAX_BATCH, MAX_QUEUE_CAPACITY, OnFull, PostgresConfig, Synchronous,
};
pub use error::AuditError;
pub use governance::{
    ApprovalDecisionEvent, ApprovalEvent, ApprovalRefusedEvent, BreakGlassEndEvent,
    BreakGlassUseEvent, ChainKey, DEFAULT_CHAIN_KEY_ENV, GENESIS_HASH, GovernanceEvent,
    GovernanceFilter, GovernanceHasher, GovernanceKind, GovernanceRecord, PUBLIC_KEY_ID,
    StoredGovernance, ToolCallOrigin, ToolDecisionEvent, ToolEndpoint, VerifyReport, verify,
    verify_source,
};
pub use pg::{CHAIN_LOCK, MIGRATE_LOCK, POSTGRES_SCHEMA_VERSION};
pub use rampart_core::timefmt::{
    format_time_ms, now_unix_ms as now_ms, parse_duration_ms, parse_time,
};
pub use reader::{AuditFilter, AuditReader, CSV_COLUMNS, ExportFormat, prune, prune_source};
pub use record::{
    AuditExplanation, AuditFinding, AuditJudge, AuditRecord, AuditRelational, StoredRecord,
};
pub use writer::{AuditLog, AuditStats, AuditWriter};

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: u32 = 4;
