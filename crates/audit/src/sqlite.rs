//! The SQLite store: one file, WAL mode, written by the writer thread's connection (schema,
//! migrations and connection setup are in `schema.rs`).

use crate::governance::{self, ChainKey};
use crate::schema;
use crate::store::{Chain, ChainCursor, EncodedDecision, Item, Job, Store, explained_judge_json};
use crate::{AuditConfig, AuditError};
use rusqlite::{Connection, TransactionBehavior, params};
use std::path::PathBuf;
use std::time::Duration;

pub(crate) struct SqliteStore {
    conn: Connection,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating or migrating) the file of `cfg.path` and checks the chain's key.
    pub(crate) fn open(cfg: &AuditConfig, key: &ChainKey) -> Result<Self, AuditError> {
        let path = cfg.path.clone();
        let conn = schema::open_writer(
            &path,
            cfg.synchronous,
            Duration::from_millis(cfg.busy_timeout_ms),
        )?;
        governance::check_head_key(&conn, &path, key)?;
        Ok(SqliteStore { conn, path })
    }

    /// An existing file opened read-write without creating it (for `prune`).
    pub(crate) fn open_existing(path: PathBuf, busy_timeout: Duration) -> Result<Self, AuditError> {
        let conn = schema::open_existing_rw(&path, busy_timeout)?;
        Ok(SqliteStore { conn, path })
    }
}

impl Store for SqliteStore {
    fn write_batch(&mut self, batch: &[Job], chain: &Chain) -> Result<Vec<i64>, AuditError> {
        write_batch(&mut self.conn, batch, chain).map_err(|e| match e {
            // As before the stores were split: SQLite's own message.
            BatchError::Sqlite(e) => AuditError::Write {
                message: e.to_string(),
            },
            BatchError::Audit(e) => e,
        })
    }

    fn prune_chunk(&mut self, cutoff_ms: i64, chunk: usize) -> Result<usize, AuditError> {
        schema::prune_chunk(&mut self.conn, &self.path, cutoff_ms, chunk)
    }

    fn close(&mut self) {
        let _ = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }
}

enum BatchError {
    Sqlite(rusqlite::Error),
    Audit(AuditError),
}

impl From<rusqlite::Error> for BatchError {
    fn from(e: rusqlite::Error) -> Self {
        BatchError::Sqlite(e)
    }
}

impl From<AuditError> for BatchError {
    fn from(e: AuditError) -> Self {
        BatchError::Audit(e)
    }
}

/// Applies a deferred explanation to its decision's row; the row's id, or 0 when none
/// matched (or it has no judge part).
fn explain(tx: &rusqlite::Transaction<'_>, e: &crate::AuditExplanation) -> Result<i64, BatchError> {
    use rusqlite::OptionalExtension;
    let found: Option<Option<String>> = tx
        .prepare_cached("SELECT judge_json FROM decisions WHERE id = ?1 AND request_id = ?2")?
        .query_row(params![e.decision_id, e.request_id], |r| r.get(0))
        .optional()?;
    let Some(json) = explained_judge_json(found.flatten().as_deref(), e)? else {
        return Ok(0);
    };
    tx.prepare_cached("UPDATE decisions SET judge_json = ?1 WHERE id = ?2")?
        .execute(params![json, e.decision_id])?;
    Ok(e.decision_id)
}

/// Inserts the batch in one transaction; the row IDs in order.
fn write_batch(
    conn: &mut Connection,
    batch: &[Job],
    chain: &Chain,
) -> Result<Vec<i64>, BatchError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut ids = Vec::with_capacity(batch.len());
    // The chain's head, read inside this (write-locked) transaction: another process
    // appending to the same file cannot interleave.
    let mut cursor = ChainCursor::new();
    {
        let mut ins_d = tx.prepare_cached(
            "INSERT INTO decisions (time_ms, request_id, key_id, endpoint, input_hash,
                hash_key_id, action, risk, policy_version, findings_json, layer_timings_json,
                elapsed_us, degraded, judge_json, judge_intent_label, judge_outcome,
                relational_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                ?17)",
        )?;
        let mut ins_f = tx.prepare_cached(
            "INSERT INTO findings (decision_id, seq, rule_id, category, strength, layer)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        let json = |e: serde_json::Error| rusqlite::Error::ToSqlConversionFailure(Box::new(e));
        for Job { item, .. } in batch {
            let rec = match item {
                Item::Decision(rec) => rec,
                Item::Governance(g) => {
                    let (row, hash) = cursor.next_row(g, chain, || {
                        governance::head(&tx)
                            .map(|h| h.map(|(s, h, _)| (s, h)))
                            .map_err(|e| AuditError::Write {
                                message: e.to_string(),
                            })
                    })?;
                    let mut ins_g = tx.prepare_cached(governance::INSERT_SQL)?;
                    ins_g.execute(params![
                        row.seq,
                        row.time_ms,
                        row.kind,
                        row.cols[0],
                        row.cols[1],
                        row.cols[2],
                        row.cols[3],
                        row.cols[4],
                        row.cols[5],
                        row.cols[6],
                        row.cols[7],
                        row.body_json,
                        row.hash_key_id,
                        row.prev_hash,
                        hash,
                    ])?;
                    ids.push(row.seq);
                    continue;
                }
                Item::Explanation(e) => {
                    ids.push(explain(&tx, e)?);
                    continue;
                }
            };
            let d = EncodedDecision::new(rec).map_err(json)?;
            let id = ins_d.insert(params![
                rec.time_ms,
                rec.request_id,
                rec.key_id,
                rec.endpoint,
                rec.input_hash,
                rec.hash_key_id,
                d.action,
                d.risk,
                rec.policy_version,
                d.findings_json,
                d.timings_json,
                d.elapsed_us,
                rec.degraded,
                d.judge_json,
                d.judge_label,
                d.judge_outcome,
                d.relational_json,
            ])?;
            for (seq, f) in d.findings() {
                ins_f.execute(params![
                    id,
                    seq,
                    f.rule_id,
                    f.category,
                    f.strength.name(),
                    f.layer
                ])?;
            }
            ids.push(id);
        }
    }
    tx.commit()?;
    Ok(ids)
}
