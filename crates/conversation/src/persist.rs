//! Optional SQLite persistence of the store and the ledger: keys, numbers, fingerprints and
//! hashes, never text.
//!
//! The caller owns the cadence: [`ConversationDb::load`] once at startup,
//! [`ConversationDb::flush`] periodically and on shutdown. A crash loses at most the changes
//! since the last flush.

use crate::chain::ChainKey;
use crate::ledger::{AssistantLedger, LedgerChanges, LedgerRow};
use crate::store::{
    ConversationStore, Evidence, HintRow, LineageRow, NodeRow, RestoreStats, StoreChanges,
    StoreRestoreStats, TurnVerdict,
};
use rampart_core::Action;
use rusqlite::{Connection, OpenFlags, Row, TransactionBehavior, params};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// The schema version this build reads and writes (`PRAGMA user_version`).
pub const PERSIST_SCHEMA_VERSION: u32 = 1;

/// `PRAGMA application_id` of a Rampart conversation database (`RMCV`).
const APPLICATION_ID: i32 = 0x524D_4356;

const SCHEMA: &str = "
CREATE TABLE nodes (
    key BLOB PRIMARY KEY NOT NULL,
    parent BLOB,
    turn INTEGER NOT NULL,
    observed_risk REAL,
    observed_action INTEGER,
    observed_refusal INTEGER,
    created INTEGER NOT NULL,
    last_seen INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE lineages (
    anchor BLOB PRIMARY KEY NOT NULL,
    blocks INTEGER NOT NULL,
    sanitizes INTEGER NOT NULL,
    refusals INTEGER NOT NULL,
    rephrasings_after_block INTEGER NOT NULL,
    peak_risk REAL NOT NULL,
    blocked BLOB NOT NULL,
    hints BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE hints (
    hint BLOB PRIMARY KEY NOT NULL,
    anchor BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE ledger (
    hash BLOB PRIMARY KEY NOT NULL,
    last_seen INTEGER NOT NULL
) WITHOUT ROWID;
";

/// What [`ConversationDb`] was doing when an error occurred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistOp {
    /// Opening the file, checking or creating the schema.
    Open,
    /// Writing changes.
    Flush,
    /// Reading rows back.
    Load,
    /// Checkpointing the write-ahead log.
    Checkpoint,
}

impl fmt::Display for PersistOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PersistOp::Open => "open",
            PersistOp::Flush => "flush",
            PersistOp::Load => "load",
            PersistOp::Checkpoint => "checkpoint",
        })
    }
}

/// Everything that can go wrong persisting conversation state.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PersistError {
    /// The database's directory could not be created.
    #[error("conversation database {}: cannot create its directory", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an SQLite database (or its header is damaged).
    #[error(
        "conversation database {}: not an SQLite database, or a damaged one ({operation})",
        path.display()
    )]
    NotADatabase {
        /// The database file.
        path: PathBuf,
        /// What was being done.
        operation: PersistOp,
    },
    /// SQLite reports the database as corrupt.
    #[error("conversation database {}: the database is corrupt ({operation})", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What was being done.
        operation: PersistOp,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The file is an SQLite database but not a Rampart conversation database, or one with a
    /// schema version this build does not know.
    #[error("conversation database {}: {message}", path.display())]
    Schema {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A stored row cannot be decoded.
    #[error("conversation database {}: invalid row in table {table}: {message}", path.display())]
    InvalidRow {
        /// The database file.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A checkpoint could not complete because another connection holds the database.
    #[error("conversation database {}: checkpoint incomplete (another connection holds it)", path.display())]
    CheckpointBusy {
        /// The database file.
        path: PathBuf,
    },
    /// Any other SQLite error (I/O, disk full, lock timeout…).
    #[error("conversation database {}: SQLite error ({operation})", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What was being done.
        operation: PersistOp,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
}

fn sq(path: &Path, operation: PersistOp) -> impl FnOnce(rusqlite::Error) -> PersistError {
    let path = path.to_path_buf();
    move |source| match source.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => PersistError::NotADatabase { path, operation },
        Some(rusqlite::ErrorCode::DatabaseCorrupt) => PersistError::Corrupt {
            path,
            operation,
            source,
        },
        _ => PersistError::Sqlite {
            path,
            operation,
            source,
        },
    }
}

fn schema_err(path: &Path, message: impl Into<String>) -> PersistError {
    PersistError::Schema {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// What a [`ConversationDb::flush`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushStats {
    /// The store's tables were rewritten from a full snapshot.
    pub store_full: bool,
    /// The ledger table was rewritten from a full snapshot.
    pub ledger_full: bool,
    /// Node rows inserted or replaced.
    pub nodes_written: usize,
    /// Node rows deleted (with their lineages).
    pub nodes_deleted: usize,
    /// Hint rows inserted or replaced.
    pub hints_written: usize,
    /// Hint rows deleted.
    pub hints_deleted: usize,
    /// Ledger rows inserted or replaced.
    pub ledger_written: usize,
    /// Ledger rows deleted.
    pub ledger_deleted: usize,
}

/// What a [`ConversationDb::load`] restored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// The store's rows (when a store was given).
    pub store: Option<StoreRestoreStats>,
    /// The ledger's rows (when a ledger was given).
    pub ledger: Option<RestoreStats>,
}

/// An SQLite file holding a [`ConversationStore`] and an [`AssistantLedger`] between
/// restarts. One connection, WAL mode; not shared between processes.
#[derive(Debug)]
pub struct ConversationDb {
    conn: Connection,
    path: PathBuf,
}

/// `(application_id, user_version, number of tables)`.
fn identify(conn: &Connection, path: &Path) -> Result<(i32, i64, i64), PersistError> {
    let op = PersistOp::Open;
    let app: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(sq(path, op))?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sq(path, op))?;
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .map_err(sq(path, op))?;
    Ok((app, version, tables))
}

/// Writes the store's changed nodes with their lineages, and deletes its removed ones.
fn write_nodes(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    c: &StoreChanges,
    stats: &mut FlushStats,
) -> Result<(), PersistError> {
    let e = || sq(path, PersistOp::Flush);
    let mut put_node = tx
        .prepare_cached(
            "INSERT OR REPLACE INTO nodes (key, parent, turn, observed_risk, \
             observed_action, observed_refusal, created, last_seen) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(e())?;
    let mut put_lineage = tx
        .prepare_cached(
            "INSERT OR REPLACE INTO lineages (anchor, blocks, sanitizes, refusals, \
             rephrasings_after_block, peak_risk, blocked, hints) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(e())?;
    let mut del_node = tx
        .prepare_cached("DELETE FROM nodes WHERE key = ?1")
        .map_err(e())?;
    let mut del_lineage = tx
        .prepare_cached("DELETE FROM lineages WHERE anchor = ?1")
        .map_err(e())?;
    for n in &c.nodes {
        let o = n.observed.as_ref();
        put_node
            .execute(params![
                &n.key.0[..],
                n.parent.as_ref().map(|p| &p.0[..]),
                n.turn,
                o.map(|t| f64::from(t.risk)),
                o.map(|t| action_code(t.action)),
                o.map(|t| t.refusal),
                time_to_sql(n.created),
                time_to_sql(n.last_seen),
            ])
            .map_err(e())?;
        match &n.lineage {
            Some(l) => {
                put_lineage
                    .execute(params![
                        &n.key.0[..],
                        l.evidence.blocks,
                        l.evidence.sanitizes,
                        l.evidence.refusals,
                        l.evidence.rephrasings_after_block,
                        f64::from(l.peak_risk),
                        fingerprints_to_blob(&l.blocked),
                        l.hints.concat(),
                    ])
                    .map_err(e())?;
            }
            None => {
                if !c.full {
                    del_lineage.execute([&n.key.0[..]]).map_err(e())?;
                }
            }
        }
        stats.nodes_written += 1;
    }
    for k in &c.removed_nodes {
        del_node.execute([&k.0[..]]).map_err(e())?;
        del_lineage.execute([&k.0[..]]).map_err(e())?;
        stats.nodes_deleted += 1;
    }
    Ok(())
}

/// Writes the store's changed hints and deletes its removed ones.
fn write_hints(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    c: &StoreChanges,
    stats: &mut FlushStats,
) -> Result<(), PersistError> {
    let e = || sq(path, PersistOp::Flush);
    let mut put_hint = tx
        .prepare_cached("INSERT OR REPLACE INTO hints (hint, anchor) VALUES (?1, ?2)")
        .map_err(e())?;
    let mut del_hint = tx
        .prepare_cached("DELETE FROM hints WHERE hint = ?1")
        .map_err(e())?;
    for h in &c.hints {
        put_hint
            .execute(params![&h.hint[..], &h.anchor.0[..]])
            .map_err(e())?;
        stats.hints_written += 1;
    }
    for h in &c.removed_hints {
        del_hint.execute([&h[..]]).map_err(e())?;
        stats.hints_deleted += 1;
    }
    Ok(())
}

/// Writes the ledger's changes (a full snapshot replaces the table).
fn write_ledger(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    c: &LedgerChanges,
    stats: &mut FlushStats,
) -> Result<(), PersistError> {
    let e = || sq(path, PersistOp::Flush);
    if c.full {
        tx.execute_batch("DELETE FROM ledger;").map_err(e())?;
        stats.ledger_full = true;
    }
    let mut put = tx
        .prepare_cached("INSERT OR REPLACE INTO ledger (hash, last_seen) VALUES (?1, ?2)")
        .map_err(e())?;
    let mut del = tx
        .prepare_cached("DELETE FROM ledger WHERE hash = ?1")
        .map_err(e())?;
    for r in &c.entries {
        put.execute(params![&r.hash[..], time_to_sql(r.last_seen)])
            .map_err(e())?;
        stats.ledger_written += 1;
    }
    for h in &c.removed {
        del.execute([&h[..]]).map_err(e())?;
        stats.ledger_deleted += 1;
    }
    Ok(())
}

impl ConversationDb {
    /// Opens the database at `path`, creating the file (and its directory) and the tables
    /// if absent. Refuses a file that is not SQLite, an SQLite database of something else,
    /// and a schema version other than [`PERSIST_SCHEMA_VERSION`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PersistError> {
        let path = path.as_ref();
        let op = PersistOp::Open;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| PersistError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        rampart_core::private_file::create_private(path).map_err(|source| PersistError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sq(path, op))?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(sq(path, op))?;

        // Identify before writing anything, so a foreign file is left as it was.
        let (app, version, tables) = identify(&conn, path)?;
        let empty = app == 0 && version == 0 && tables == 0;
        if !empty && app != APPLICATION_ID {
            return Err(schema_err(
                path,
                "not a Rampart conversation database (an SQLite database of something else); \
                 refusing to use it",
            ));
        }
        if !empty && version != i64::from(PERSIST_SCHEMA_VERSION) {
            return Err(schema_err(
                path,
                format!(
                    "unknown schema version {version} (this build reads version \
                     {PERSIST_SCHEMA_VERSION}); use the rampart that wrote it, or remove the file"
                ),
            ));
        }

        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(sq(path, op))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(schema_err(
                path,
                format!("could not switch to WAL mode (journal_mode is {mode})"),
            ));
        }
        // In WAL mode NORMAL keeps the file consistent; a power cut may lose the last flush.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sq(path, op))?;

        if empty {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sq(path, op))?;
            tx.execute_batch(SCHEMA).map_err(sq(path, op))?;
            tx.pragma_update(None, "application_id", APPLICATION_ID)
                .map_err(sq(path, op))?;
            tx.pragma_update(None, "user_version", i64::from(PERSIST_SCHEMA_VERSION))
                .map_err(sq(path, op))?;
            tx.commit().map_err(sq(path, op))?;
        }
        Ok(Self {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Drains the changes of `store` and `ledger` and writes them in one transaction
    /// (upserts and deletes; a full snapshot replaces the tables it covers). On failure
    /// nothing is written and the next flush of each is a full snapshot, so nothing drained
    /// is lost for good.
    pub fn flush(
        &mut self,
        store: Option<&ConversationStore>,
        ledger: Option<&AssistantLedger>,
    ) -> Result<FlushStats, PersistError> {
        let store_changes = store.map(ConversationStore::drain_changes);
        let ledger_changes = ledger.map(AssistantLedger::drain_changes);
        let result = self.write(store_changes.as_ref(), ledger_changes.as_ref());
        if result.is_err() {
            if let Some(s) = store {
                s.require_full_resync();
            }
            if let Some(l) = ledger {
                l.require_full_resync();
            }
        }
        result
    }

    fn write(
        &mut self,
        store: Option<&StoreChanges>,
        ledger: Option<&LedgerChanges>,
    ) -> Result<FlushStats, PersistError> {
        let mut stats = FlushStats::default();
        if store.is_none_or(StoreChanges::is_empty) && ledger.is_none_or(LedgerChanges::is_empty) {
            return Ok(stats);
        }
        let path = self.path.clone();
        let e = || sq(&path, PersistOp::Flush);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e())?;
        if let Some(c) = store {
            if c.full {
                tx.execute_batch("DELETE FROM nodes; DELETE FROM lineages; DELETE FROM hints;")
                    .map_err(e())?;
                stats.store_full = true;
            }
            write_nodes(&tx, &path, c, &mut stats)?;
            write_hints(&tx, &path, c, &mut stats)?;
        }
        if let Some(c) = ledger {
            write_ledger(&tx, &path, c, &mut stats)?;
        }
        tx.commit().map_err(e())?;
        Ok(stats)
    }

    /// Restores the persisted rows into `store` and `ledger` (at startup, before serving,
    /// with the key material they were written with). Expired rows are not loaded, and are
    /// deleted by the next flush; see [`ConversationStore::restore`] and
    /// [`AssistantLedger::restore`].
    pub fn load(
        &self,
        store: Option<&ConversationStore>,
        ledger: Option<&AssistantLedger>,
    ) -> Result<LoadStats, PersistError> {
        let mut stats = LoadStats::default();
        let path = &self.path;
        let e = || sq(path, PersistOp::Load);
        // One read transaction, so the rows are one consistent state.
        let tx = self.conn.unchecked_transaction().map_err(e())?;
        if let Some(s) = store {
            let nodes = read_nodes(&tx, path)?;
            let hints = read_hints(&tx, path)?;
            stats.store = Some(s.restore(nodes, hints));
        }
        if let Some(l) = ledger {
            let rows = read_ledger(&tx, path)?;
            stats.ledger = Some(l.restore(rows));
        }
        tx.finish().map_err(e())?;
        Ok(stats)
    }

    /// Moves the write-ahead log into the database file and truncates it (on shutdown,
    /// after the last flush).
    pub fn checkpoint(&self) -> Result<(), PersistError> {
        let busy: i64 = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .map_err(sq(&self.path, PersistOp::Checkpoint))?;
        if busy != 0 {
            return Err(PersistError::CheckpointBusy {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    /// Rows per table `(nodes, lineages, hints, ledger)`, for monitoring and tests.
    pub fn row_counts(&self) -> Result<(u64, u64, u64, u64), PersistError> {
        let e = || sq(&self.path, PersistOp::Load);
        let count = |table: &str| -> Result<u64, PersistError> {
            let n: i64 = self
                .conn
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .map_err(e())?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok((
            count("nodes")?,
            count("lineages")?,
            count("hints")?,
            count("ledger")?,
        ))
    }

    /// Every node, hint and ledger row as stored, sorted by key (tests compare them with the
    /// store and the ledger).
    #[cfg(test)]
    fn stored_rows(&self) -> Result<StoredRows, PersistError> {
        let mut nodes = read_nodes(&self.conn, &self.path)?;
        nodes.sort_by_key(|r| r.key);
        let mut hints = read_hints(&self.conn, &self.path)?;
        hints.sort_by_key(|r| r.hint);
        let mut ledger = read_ledger(&self.conn, &self.path)?;
        ledger.sort_by_key(|r| r.hash);
        Ok((nodes, hints, ledger))
    }
}

#[cfg(test)]
type StoredRows = (Vec<NodeRow>, Vec<HintRow>, Vec<LedgerRow>);

/// Stable codes, not the enum's discriminants, so reordering `Action` cannot change them.
fn action_code(a: Action) -> i64 {
    match a {
        Action::Allow => 0,
        Action::Sanitize => 1,
        Action::Block => 2,
    }
}

fn action_from_code(c: i64) -> Option<Action> {
    match c {
        0 => Some(Action::Allow),
        1 => Some(Action::Sanitize),
        2 => Some(Action::Block),
        _ => None,
    }
}

/// Seconds as SQLite's signed integer (saturating: a clock beyond year 292 billion is not
/// a concern).
fn time_to_sql(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

fn fingerprints_to_blob(fps: &[u64]) -> Vec<u8> {
    fps.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// A raw column that failed to decode: which and why.
struct Bad(String);

fn invalid(path: &Path, table: &'static str) -> impl FnOnce(Bad) -> PersistError {
    let path = path.to_path_buf();
    move |Bad(message)| PersistError::InvalidRow {
        path,
        table,
        message,
    }
}

fn key32(v: Vec<u8>, column: &str) -> Result<[u8; 32], Bad> {
    let len = v.len();
    <[u8; 32]>::try_from(v).map_err(|_| Bad(format!("{column} is {len} bytes, not 32")))
}

fn time_from_sql(t: i64, column: &str) -> Result<u64, Bad> {
    u64::try_from(t).map_err(|_| Bad(format!("{column} is negative ({t})")))
}

fn u32_from_sql(v: i64, column: &str) -> Result<u32, Bad> {
    u32::try_from(v).map_err(|_| Bad(format!("{column} is out of range ({v})")))
}

fn blob_chunks<const N: usize>(v: &[u8], column: &str) -> Result<Vec<[u8; N]>, Bad> {
    let chunks = v.chunks_exact(N);
    if !chunks.remainder().is_empty() {
        return Err(Bad(format!(
            "{column} is {} bytes, not a multiple of {N}",
            v.len()
        )));
    }
    Ok(chunks
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            a
        })
        .collect())
}

/// A node row's raw columns, decoded outside the SQLite callback so errors keep context.
struct RawNode {
    key: Vec<u8>,
    parent: Option<Vec<u8>>,
    turn: i64,
    observed: (Option<f64>, Option<i64>, Option<bool>),
    created: i64,
    last_seen: i64,
    lineage: Option<RawLineage>,
}

struct RawLineage {
    counts: [i64; 4],
    peak_risk: f64,
    blocked: Vec<u8>,
    hints: Vec<u8>,
}

fn raw_node(r: &Row<'_>) -> rusqlite::Result<RawNode> {
    let lineage = match r.get::<_, Option<i64>>(8)? {
        Some(blocks) => Some(RawLineage {
            counts: [blocks, r.get(9)?, r.get(10)?, r.get(11)?],
            peak_risk: r.get(12)?,
            blocked: r.get(13)?,
            hints: r.get(14)?,
        }),
        None => None,
    };
    Ok(RawNode {
        key: r.get(0)?,
        parent: r.get(1)?,
        turn: r.get(2)?,
        observed: (r.get(3)?, r.get(4)?, r.get(5)?),
        created: r.get(6)?,
        last_seen: r.get(7)?,
        lineage,
    })
}

fn decode_node(raw: RawNode) -> Result<NodeRow, Bad> {
    let observed = match raw.observed {
        (None, None, None) => None,
        (Some(risk), Some(action), Some(refusal)) => Some(TurnVerdict {
            risk: risk as f32,
            action: action_from_code(action)
                .ok_or_else(|| Bad(format!("observed_action {action} is unknown")))?,
            refusal,
        }),
        _ => {
            return Err(Bad(
                "observed_risk, observed_action and observed_refusal must be all set or all \
                 NULL"
                    .into(),
            ));
        }
    };
    let lineage = match raw.lineage {
        Some(l) => Some(LineageRow {
            evidence: Evidence {
                blocks: u32_from_sql(l.counts[0], "blocks")?,
                sanitizes: u32_from_sql(l.counts[1], "sanitizes")?,
                refusals: u32_from_sql(l.counts[2], "refusals")?,
                rephrasings_after_block: u32_from_sql(l.counts[3], "rephrasings_after_block")?,
            },
            peak_risk: l.peak_risk as f32,
            blocked: blob_chunks::<8>(&l.blocked, "blocked")?
                .into_iter()
                .map(u64::from_le_bytes)
                .collect(),
            hints: blob_chunks::<32>(&l.hints, "hints")?,
            // Not stored in SQLite (see DESIGN.md).
            words: Vec::new(),
        }),
        None => None,
    };
    Ok(NodeRow {
        key: ChainKey(key32(raw.key, "key")?),
        parent: raw
            .parent
            .map(|p| key32(p, "parent").map(ChainKey))
            .transpose()?,
        turn: u32_from_sql(raw.turn, "turn")?,
        observed,
        created: time_from_sql(raw.created, "created")?,
        last_seen: time_from_sql(raw.last_seen, "last_seen")?,
        lineage,
    })
}

fn read_nodes(conn: &Connection, path: &Path) -> Result<Vec<NodeRow>, PersistError> {
    let e = || sq(path, PersistOp::Load);
    let mut stmt = conn
        .prepare(
            "SELECT n.key, n.parent, n.turn, n.observed_risk, n.observed_action, \
             n.observed_refusal, n.created, n.last_seen, l.blocks, l.sanitizes, l.refusals, \
             l.rephrasings_after_block, l.peak_risk, l.blocked, l.hints \
             FROM nodes n LEFT JOIN lineages l ON l.anchor = n.key",
        )
        .map_err(e())?;
    let raws = stmt.query_map([], raw_node).map_err(e())?;
    let mut out = Vec::new();
    for raw in raws {
        out.push(decode_node(raw.map_err(e())?).map_err(invalid(path, "nodes"))?);
    }
    Ok(out)
}

fn read_hints(conn: &Connection, path: &Path) -> Result<Vec<HintRow>, PersistError> {
    let e = || sq(path, PersistOp::Load);
    let mut stmt = conn
        .prepare("SELECT hint, anchor FROM hints")
        .map_err(e())?;
    let raws = stmt
        .query_map([], |r| {
            Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?))
        })
        .map_err(e())?;
    let mut out = Vec::new();
    for raw in raws {
        let (hint, anchor) = raw.map_err(e())?;
        let decoded = key32(hint, "hint").and_then(|hint| {
            Ok(HintRow {
                hint,
                anchor: ChainKey(key32(anchor, "anchor")?),
            })
        });
        out.push(decoded.map_err(invalid(path, "hints"))?);
    }
    Ok(out)
}

fn read_ledger(conn: &Connection, path: &Path) -> Result<Vec<LedgerRow>, PersistError> {
    let e = || sq(path, PersistOp::Load);
    let mut stmt = conn
        .prepare("SELECT hash, last_seen FROM ledger")
        .map_err(e())?;
    let raws = stmt
        .query_map([], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?)))
        .map_err(e())?;
    let mut out = Vec::new();
    for raw in raws {
        let (hash, last_seen) = raw.map_err(e())?;
        let decoded = key32(hash, "hash").and_then(|hash| {
            Ok(LedgerRow {
                hash,
                last_seen: time_from_sql(last_seen, "last_seen")?,
            })
        });
        out.push(decoded.map_err(invalid(path, "ledger"))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Clock, LedgerOptions, ManualClock, StoreOptions};
    use proptest::prelude::*;
    use rampart_core::Role;
    use std::sync::Arc;

    const TTL: u64 = 50;

    #[derive(Debug, Clone)]
    enum Op {
        Observe {
            path: Vec<u8>,
            hint: Option<u8>,
            risk: u8,
            action: u8,
        },
        Record {
            path: Vec<u8>,
            answer: u8,
        },
        Check {
            path: Vec<u8>,
            answer: u8,
        },
        Advance(u8),
        Flush,
    }

    fn op() -> impl Strategy<Value = Op> {
        let path = || proptest::collection::vec(0u8..3, 1..6);
        prop_oneof![
            4 => (path(), proptest::option::of(0u8..6), 0u8..=10, 0u8..3).prop_map(
                |(path, hint, risk, action)| Op::Observe { path, hint, risk, action }
            ),
            2 => (path(), 0u8..3).prop_map(|(path, answer)| Op::Record { path, answer }),
            1 => (path(), 0u8..3).prop_map(|(path, answer)| Op::Check { path, answer }),
            1 => (0u8..30).prop_map(Op::Advance),
            1 => Just(Op::Flush),
        ]
    }

    /// A conversation from a path of word indexes: user and assistant turns alternate, so
    /// paths share prefixes, fork and rewind often.
    fn texts(path: &[u8]) -> Vec<(Role, String)> {
        path.iter()
            .enumerate()
            .map(|(i, w)| {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                (role, format!("message {w} at {i}"))
            })
            .collect()
    }

    fn borrowed(t: &[(Role, String)]) -> Vec<(Role, &str)> {
        t.iter().map(|(r, s)| (*r, s.as_str())).collect()
    }

    fn setup(
        clock: &Arc<ManualClock>,
    ) -> (
        ConversationStore,
        AssistantLedger,
        tempfile::TempDir,
        ConversationDb,
    ) {
        let store = ConversationStore::with_clock(
            StoreOptions {
                max_entries: 8,
                ttl_seconds: TTL,
                ..StoreOptions::default()
            },
            b"k",
            clock.clone(),
        )
        .expect("options");
        let ledger = AssistantLedger::with_clock(
            LedgerOptions {
                max_entries: 5,
                ttl_seconds: TTL,
                ..LedgerOptions::default()
            },
            b"k",
            clock.clone(),
        )
        .expect("options");
        let dir = tempfile::tempdir().expect("tempdir");
        let db = ConversationDb::open(dir.path().join("c.db")).expect("open");
        (store, ledger, dir, db)
    }

    fn run(
        ops: &[Op],
        clock: &Arc<ManualClock>,
        s: &ConversationStore,
        l: &AssistantLedger,
        db: &mut ConversationDb,
    ) {
        for op in ops {
            match op {
                Op::Observe {
                    path,
                    hint,
                    risk,
                    action,
                } => {
                    let t = texts(path);
                    let action = [Action::Allow, Action::Sanitize, Action::Block][*action as usize];
                    let hint = hint.map(|h| format!("id {h}"));
                    let verdict = TurnVerdict {
                        risk: f32::from(*risk) / 10.0,
                        action,
                        refusal: *risk == 7,
                    };
                    s.observe(&borrowed(&t), hint.as_deref(), verdict)
                        .expect("observe");
                }
                Op::Record { path, answer } => {
                    l.record(&borrowed(&texts(path)), &format!("answer {answer}"));
                }
                Op::Check { path, answer } => {
                    let mut t = texts(path);
                    t.push((Role::Assistant, format!("answer {answer}")));
                    t.push((Role::User, "next".to_string()));
                    l.check(&borrowed(&t));
                }
                Op::Advance(secs) => clock.advance(u64::from(*secs)),
                Op::Flush => {
                    db.flush(Some(s), Some(l)).expect("flush");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Incremental flushes leave exactly the held rows in the database, and a reload
        /// gives back the live ones.
        #[test]
        fn incremental_flushes_mirror_the_store(
            ops in proptest::collection::vec(op(), 1..60),
            after in proptest::collection::vec(op(), 0..40),
        ) {
            let clock = Arc::new(ManualClock::new(1_000));
            let (s, l, _dir, mut db) = setup(&clock);
            run(&ops, &clock, &s, &l, &mut db);
            db.flush(Some(&s), Some(&l)).expect("flush");
            let (nodes, hints) = s.snapshot();
            let (db_nodes, db_hints, db_ledger) = db.stored_rows().expect("rows");
            prop_assert_eq!(&db_nodes, &nodes);
            prop_assert_eq!(&db_hints, &hints);
            prop_assert_eq!(&db_ledger, &l.snapshot());

            // Reload into fresh ones: the rows not yet expired come back.
            let (s2, l2, _dir2, _db2) = setup(&clock);
            db.load(Some(&s2), Some(&l2)).expect("load");
            let now = clock.now();
            let live: Vec<NodeRow> = nodes
                .into_iter()
                .filter(|n| now.saturating_sub(n.last_seen) < TTL)
                .collect();
            let live_hints: Vec<HintRow> = hints
                .into_iter()
                .filter(|h| live.iter().any(|n| n.key == h.anchor))
                .collect();
            let (nodes2, hints2) = s2.snapshot();
            prop_assert_eq!(nodes2, live);
            prop_assert_eq!(hints2, live_hints);
            let live_ledger: Vec<LedgerRow> = l
                .snapshot()
                .into_iter()
                .filter(|r| now.saturating_sub(r.last_seen) < TTL)
                .collect();
            prop_assert_eq!(l2.snapshot(), live_ledger);
            // Loaded rows are not written back until they change; expired ones are deleted,
            // and so are loaded ones evicted or expired later.
            db.flush(Some(&s2), Some(&l2)).expect("flush");
            let (db_nodes, db_hints, db_ledger) = db.stored_rows().expect("rows");
            prop_assert_eq!(db_nodes, s2.snapshot().0);
            prop_assert_eq!(db_hints, s2.snapshot().1);
            prop_assert_eq!(db_ledger, l2.snapshot());
            run(&after, &clock, &s2, &l2, &mut db);
            db.flush(Some(&s2), Some(&l2)).expect("flush");
            let (db_nodes, db_hints, db_ledger) = db.stored_rows().expect("rows");
            prop_assert_eq!(db_nodes, s2.snapshot().0);
            prop_assert_eq!(db_hints, s2.snapshot().1);
            prop_assert_eq!(db_ledger, l2.snapshot());
        }
    }

    #[test]
    fn a_failed_flush_makes_the_next_one_full() {
        let clock = Arc::new(ManualClock::new(1_000));
        let (s, l, _dir, mut db) = setup(&clock);
        let ops = [
            Op::Observe {
                path: vec![0, 1, 2],
                hint: Some(1),
                risk: 9,
                action: 2,
            },
            Op::Record {
                path: vec![0],
                answer: 1,
            },
            Op::Flush,
            Op::Observe {
                path: vec![0, 1, 2, 1, 0],
                hint: Some(2),
                risk: 3,
                action: 0,
            },
            Op::Record {
                path: vec![0, 1, 2],
                answer: 0,
            },
        ];
        run(&ops, &clock, &s, &l, &mut db);
        db.conn
            .pragma_update(None, "query_only", true)
            .expect("pragma");
        let err = db.flush(Some(&s), Some(&l)).expect_err("read-only");
        assert!(
            matches!(
                err,
                PersistError::Sqlite {
                    operation: PersistOp::Flush,
                    ..
                }
            ),
            "{err:?}"
        );
        db.conn
            .pragma_update(None, "query_only", false)
            .expect("pragma");
        // The failed flush drained the changes; they are not lost.
        let f = db.flush(Some(&s), Some(&l)).expect("flush");
        assert!(f.store_full && f.ledger_full);
        let (db_nodes, db_hints, db_ledger) = db.stored_rows().expect("rows");
        assert_eq!((db_nodes, db_hints), s.snapshot());
        assert_eq!(db_ledger, l.snapshot());
    }

    #[test]
    fn tracking_is_bounded_by_the_store() {
        let clock = Arc::new(ManualClock::new(1_000));
        let (s, _l, _dir, mut db) = setup(&clock);
        db.flush(Some(&s), None).expect("flush");
        // Many conversations through an 8-node store between two flushes: only the nodes
        // held and the rows the database had are tracked.
        for i in 0..1_000 {
            let t = format!("conversation {i}");
            s.observe(
                &[(Role::User, t.as_str())],
                Some(&t),
                TurnVerdict {
                    risk: 0.1,
                    action: Action::Allow,
                    refusal: false,
                },
            )
            .expect("observe");
        }
        let c = s.drain_changes();
        assert!(!c.full);
        assert_eq!(c.nodes.len(), 8);
        assert!(
            c.removed_nodes.is_empty(),
            "none of them was ever persisted"
        );
        assert!(c.removed_hints.is_empty());
    }
}
