//! What the two stores (SQLite: `sqlite.rs`, PostgreSQL: `pg.rs`) share: the [`Store`]
//! trait the writer thread drives, the queued [`Item`]s, a decision's stored columns
//! ([`EncodedDecision`], [`DecisionRow`]) and the governance chain's cursor
//! ([`ChainCursor`]). The SQL of filters is shared too (`?` placeholders, numbered for
//! PostgreSQL by [`numbered`]).

use crate::governance::{ChainKey, GovernanceRecord, Row};
use crate::{AuditError, AuditExplanation, AuditFinding, AuditJudge, AuditRecord, StoredRecord};
use rampart_core::{Action, RiskClass};
use std::path::Path;
use tokio::sync::oneshot;

/// One thing to append.
// A `Job` is moved once into the batch; boxing the record would cost an allocation each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Item {
    Decision(AuditRecord),
    Governance(GovernanceRecord),
    /// Updates a decision's judge part; its id is the decision's, or 0 when no row matched.
    Explanation(AuditExplanation),
}

/// A decision row's `judge_json` with the deferred explanation `e` applied (read, modify,
/// write: both stores). `None` when the row has no judge part (nothing to update).
pub(crate) fn explained_judge_json(
    judge_json: Option<&str>,
    e: &AuditExplanation,
) -> Result<Option<String>, AuditError> {
    let Some(json) = judge_json else {
        return Ok(None);
    };
    let bad = |e: serde_json::Error| AuditError::Write {
        message: format!("explanation of decision: {e}"),
    };
    let mut judge: AuditJudge = serde_json::from_str(json).map_err(bad)?;
    judge.apply_explanation(e);
    serde_json::to_string(&judge).map(Some).map_err(bad)
}

/// An item and the channel its row id (or error) is sent back on once committed.
#[derive(Debug)]
pub(crate) struct Job {
    pub item: Item,
    pub ack: oneshot::Sender<Result<i64, AuditError>>,
}

/// What the writer needs to chain governance rows.
pub(crate) struct Chain {
    pub key: ChainKey,
    pub keep_values: bool,
}

/// A database the writer thread appends to. Each backend opens (creating or migrating its
/// schema, checking the chain's key) before the writer starts.
pub(crate) trait Store: Send {
    /// Writes every item of `batch` in **one** transaction (group commit) and returns their
    /// ids in order (a decision's row id, a governance row's `seq`), only once committed.
    /// Governance rows are chained with [`ChainCursor`], whose head is read inside the
    /// transaction after the backend's lock against other writers.
    fn write_batch(&mut self, batch: &[Job], chain: &Chain) -> Result<Vec<i64>, AuditError>;

    /// Deletes up to `chunk` decisions older than `cutoff_ms` (and their findings) in one
    /// transaction; returns how many. Never touches the governance rows.
    fn prune_chunk(&mut self, cutoff_ms: i64, chunk: usize) -> Result<usize, AuditError>;

    /// Called once when the writer stops, after the last batch.
    fn close(&mut self) {}
}

/// Rows per pruning transaction (`prune` and the retention at open).
pub(crate) const PRUNE_CHUNK: usize = 5000;

/// Deletes every decision older than `cutoff_ms`, a chunk per transaction.
pub(crate) fn prune_all(store: &mut dyn Store, cutoff_ms: i64) -> Result<u64, AuditError> {
    let mut total = 0u64;
    loop {
        let n = store.prune_chunk(cutoff_ms, PRUNE_CHUNK)?;
        total += n as u64;
        if n < PRUNE_CHUNK {
            return Ok(total);
        }
    }
}

pub(crate) fn clamp_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A decision's stored columns (the `decisions` table, both backends).
pub(crate) struct EncodedDecision<'a> {
    pub rec: &'a AuditRecord,
    pub action: &'static str,
    pub risk: &'static str,
    pub findings_json: String,
    pub timings_json: String,
    pub elapsed_us: i64,
    pub judge_json: Option<String>,
    pub judge_label: Option<&'static str>,
    pub judge_outcome: Option<&'static str>,
    pub relational_json: Option<String>,
}

impl<'a> EncodedDecision<'a> {
    pub(crate) fn new(rec: &'a AuditRecord) -> Result<Self, serde_json::Error> {
        // The filter columns hold the names (as the JSON does).
        let (judge_label, judge_outcome) = rec.judge.as_ref().map_or((None, None), |j| {
            (
                j.intent_label.map(|l| l.name()),
                j.outcome.map(|o| o.name()),
            )
        });
        Ok(EncodedDecision {
            rec,
            action: rec.action.name(),
            risk: rec.risk.name(),
            findings_json: serde_json::to_string(&rec.findings)?,
            timings_json: serde_json::to_string(&rec.layer_timings_us)?,
            elapsed_us: clamp_i64(rec.elapsed_us),
            judge_json: rec.judge.as_ref().map(serde_json::to_string).transpose()?,
            judge_label,
            judge_outcome,
            relational_json: rec
                .relational
                .as_ref()
                .map(serde_json::to_string)
                .transpose()?,
        })
    }

    /// The `findings` table's rows: `(seq, finding)`.
    pub(crate) fn findings(&self) -> impl Iterator<Item = (i64, &'a AuditFinding)> {
        self.rec
            .findings
            .iter()
            .enumerate()
            .map(|(i, f)| (i as i64, f))
    }
}

/// The columns a reader selects (both backends, this order).
pub(crate) const DECISION_COLUMNS: &str = "d.id, d.time_ms, d.request_id, d.key_id, \
    d.endpoint, d.input_hash, d.hash_key_id, d.action, d.risk, d.policy_version, \
    d.findings_json, d.layer_timings_json, d.elapsed_us, d.degraded, d.judge_json, \
    d.relational_json";

/// A decision row as read ([`DECISION_COLUMNS`]), before decoding.
pub(crate) struct DecisionRow {
    pub id: i64,
    pub time_ms: i64,
    pub request_id: String,
    pub key_id: Option<String>,
    pub endpoint: String,
    pub input_hash: String,
    pub hash_key_id: String,
    pub action: String,
    pub risk: String,
    pub policy_version: String,
    pub findings_json: String,
    pub timings_json: String,
    pub elapsed_us: i64,
    pub degraded: bool,
    pub judge_json: Option<String>,
    pub relational_json: Option<String>,
}

impl DecisionRow {
    /// The record, or [`AuditError::Corrupt`] naming the row.
    pub(crate) fn decode(self, path: &Path) -> Result<StoredRecord, AuditError> {
        let id = self.id;
        let damaged = |message: String| AuditError::Corrupt {
            path: path.to_path_buf(),
            id,
            message,
        };
        let action = stored(&Action::ALL, Action::name, &self.action)
            .ok_or_else(|| damaged(format!("unknown action {:?}", self.action)))?;
        let risk = stored(&RiskClass::ALL, RiskClass::name, &self.risk)
            .ok_or_else(|| damaged(format!("unknown risk {:?}", self.risk)))?;
        let corrupt = |e: serde_json::Error| damaged(e.to_string());
        let record = AuditRecord {
            time_ms: self.time_ms,
            request_id: self.request_id,
            key_id: self.key_id,
            endpoint: self.endpoint,
            input_hash: self.input_hash,
            hash_key_id: self.hash_key_id,
            action,
            risk,
            policy_version: self.policy_version,
            findings: serde_json::from_str::<Vec<AuditFinding>>(&self.findings_json)
                .map_err(corrupt)?,
            layer_timings_us: serde_json::from_str(&self.timings_json).map_err(corrupt)?,
            elapsed_us: u64::try_from(self.elapsed_us).unwrap_or(0),
            degraded: self.degraded,
            judge: self
                .judge_json
                .as_deref()
                .map(serde_json::from_str)
                .transpose()
                .map_err(corrupt)?,
            relational: self
                .relational_json
                .as_deref()
                .map(serde_json::from_str)
                .transpose()
                .map_err(corrupt)?,
        };
        Ok(StoredRecord { id, record })
    }
}

/// The value of `all` stored under `name`.
fn stored<T: Copy>(all: &[T], name_of: fn(T) -> &'static str, name: &str) -> Option<T> {
    all.iter().copied().find(|v| name_of(*v) == name)
}

/// Hands out the next governance rows of one transaction: the head (last `seq` and hash) is
/// read once, on the first governance row, by the backend's `read_head` (inside the
/// transaction, after its lock), then followed in memory.
pub(crate) struct ChainCursor {
    head: Option<(i64, String)>,
}

impl ChainCursor {
    pub(crate) fn new() -> Self {
        ChainCursor { head: None }
    }

    /// The row appending `rec` and its hash.
    pub(crate) fn next_row(
        &mut self,
        rec: &GovernanceRecord,
        chain: &Chain,
        read_head: impl FnOnce() -> Result<Option<(i64, String)>, AuditError>,
    ) -> Result<(Row, String), AuditError> {
        let (seq, prev) = match self.head.take() {
            Some(h) => h,
            None => read_head()?.unwrap_or_else(|| (0, crate::GENESIS_HASH.to_string())),
        };
        let row =
            Row::from_record(seq + 1, rec, chain.keep_values, &chain.key, &prev).map_err(|e| {
                AuditError::Write {
                    message: format!("governance row: {e}"),
                }
            })?;
        let hash = row.hash(&chain.key);
        self.head = Some((row.seq, hash.clone()));
        Ok((row, hash))
    }
}

/// The SQL with its `?` placeholders numbered `$1`, `$2`, … (PostgreSQL). The shared filter
/// SQL holds no `?` but placeholders (values are never interpolated).
pub(crate) fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_in_order() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE b = ? AND c IN (?, ?) LIMIT ?"),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3) LIMIT $4"
        );
        assert_eq!(numbered("SELECT 1"), "SELECT 1");
    }
}
