//! [`AuditReader`]: filtered queries and exports; [`prune`].

use crate::store::{DecisionRow, Store};
use crate::{AuditError, AuditSource, StoredRecord, format_time_ms, schema};
use rampart_core::Action;
use rampart_judge::IntentLabel;
use rampart_llm::OutcomeKind;
use rusqlite::types::Value;
use rusqlite::{Connection, Row};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which records to read. Every field is optional; set fields are combined with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Records at or after this time (Unix epoch ms).
    pub since_ms: Option<i64>,
    /// Records strictly before this time (Unix epoch ms).
    pub until_ms: Option<i64>,
    /// Records of this action.
    pub action: Option<Action>,
    /// Records with at least one finding of this rule ID (exact).
    pub rule_id: Option<String>,
    /// Records of this API key ID (exact).
    pub key_id: Option<String>,
    /// Records of this request ID (exact).
    pub request_id: Option<String>,
    /// Records of this endpoint (exact), e.g. `scan`.
    pub endpoint: Option<String>,
    /// Records whose judge gave this intent label.
    pub intent_label: Option<IntentLabel>,
    /// Records whose judge call ended this way.
    pub judge_outcome: Option<OutcomeKind>,
    /// At most this many records.
    pub limit: Option<usize>,
    /// Newest first (default: oldest first). With `limit`, picks the newest records.
    pub newest_first: bool,
}

/// An export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// RFC 4180 CSV with a header row; findings and timings as JSON cells. A cell that
    /// starts with `=`, `+`, `-`, `@`, tab or CR (client-chosen request IDs can) gets a
    /// leading `'`, so a spreadsheet shows it as text instead of running it as a formula.
    Csv,
    /// One JSON object per line ([`StoredRecord`]).
    Jsonl,
}

impl std::str::FromStr for ExportFormat {
    type Err = AuditError;

    fn from_str(s: &str) -> Result<Self, AuditError> {
        match s.to_ascii_lowercase().as_str() {
            "csv" => Ok(ExportFormat::Csv),
            "jsonl" | "ndjson" => Ok(ExportFormat::Jsonl),
            _ => Err(AuditError::Filter(format!(
                "unknown export format {s:?}: expected csv or jsonl"
            ))),
        }
    }
}

/// The CSV export's columns. The judge's columns are empty for a decision without a judge
/// layer (or without a verdict, for the label and explanation); the explanation is the
/// redacted one the audit record holds. The relational columns are empty for a decision
/// without a relational layer (or without a label: the evaluation failed or was skipped).
pub const CSV_COLUMNS: [&str; 21] = [
    "id",
    "time",
    "time_ms",
    "request_id",
    "key_id",
    "endpoint",
    "action",
    "risk",
    "policy_version",
    "input_hash",
    "hash_key_id",
    "rule_ids",
    "findings",
    "layer_timings_us",
    "elapsed_us",
    "degraded",
    "judge_intent_label",
    "judge_outcome",
    "judge_explanation",
    "relational_label",
    "relational_balance",
];

const COLUMNS: &str = crate::store::DECISION_COLUMNS;

impl AuditFilter {
    /// Checks the filter: `since_ms` not after `until_ms`.
    pub fn validate(&self) -> Result<(), AuditError> {
        if let (Some(s), Some(u)) = (self.since_ms, self.until_ms)
            && s > u
        {
            return Err(AuditError::Filter(format!(
                "invalid filter: since ({}) is after until ({})",
                format_time_ms(s),
                format_time_ms(u)
            )));
        }
        Ok(())
    }

    /// The `WHERE` clause (placeholders only) and its bound values. Values are never
    /// interpolated into the SQL text.
    pub(crate) fn where_clause(&self) -> Result<(String, Vec<Value>), AuditError> {
        self.validate()?;
        let mut clauses: Vec<&str> = Vec::new();
        let mut values: Vec<Value> = Vec::new();
        if let Some(s) = self.since_ms {
            clauses.push("d.time_ms >= ?");
            values.push(Value::Integer(s));
        }
        if let Some(u) = self.until_ms {
            clauses.push("d.time_ms < ?");
            values.push(Value::Integer(u));
        }
        // Enum values are bound as the names they are stored under.
        if let Some(a) = self.action {
            clauses.push("d.action = ?");
            values.push(Value::Text(a.name().into()));
        }
        if let Some(k) = &self.key_id {
            clauses.push("d.key_id = ?");
            values.push(Value::Text(k.clone()));
        }
        if let Some(r) = &self.request_id {
            clauses.push("d.request_id = ?");
            values.push(Value::Text(r.clone()));
        }
        if let Some(e) = &self.endpoint {
            clauses.push("d.endpoint = ?");
            values.push(Value::Text(e.clone()));
        }
        if let Some(l) = self.intent_label {
            clauses.push("d.judge_intent_label = ?");
            values.push(Value::Text(l.name().into()));
        }
        if let Some(o) = self.judge_outcome {
            clauses.push("d.judge_outcome = ?");
            values.push(Value::Text(o.name().into()));
        }
        if let Some(r) = &self.rule_id {
            clauses.push(
                "EXISTS (SELECT 1 FROM findings f WHERE f.rule_id = ? AND f.decision_id = d.id)",
            );
            values.push(Value::Text(r.clone()));
        }
        let sql = if clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", clauses.join(" AND "))
        };
        Ok((sql, values))
    }

    /// The full `SELECT` and its bound values.
    pub(crate) fn select_sql(&self) -> Result<(String, Vec<Value>), AuditError> {
        let (where_sql, mut values) = self.where_clause()?;
        let order = if self.newest_first { "DESC" } else { "ASC" };
        let mut sql = format!(
            "SELECT {COLUMNS} FROM decisions d{where_sql} ORDER BY d.time_ms {order}, d.id {order}"
        );
        if let Some(limit) = self.limit {
            sql.push_str(" LIMIT ?");
            values.push(Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
        }
        Ok((sql, values))
    }
}

/// A read-only connection to an audit log (SQLite or PostgreSQL); usable while the service
/// writes to it.
#[derive(Debug)]
pub struct AuditReader {
    conn: Conn,
    /// The SQLite file, or `postgres ($VAR)`.
    path: PathBuf,
}

#[derive(Debug)]
enum Conn {
    Sqlite(Connection),
    Postgres(Box<std::sync::Mutex<crate::pg::PgConn>>),
}

impl AuditReader {
    /// Opens an existing SQLite log read-only. A missing file is [`AuditError::NotFound`];
    /// a file that is not a Rampart audit log, or has another schema version, is
    /// [`AuditError::Schema`].
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        Ok(AuditReader {
            conn: Conn::Sqlite(schema::open_reader(path)?),
            path: path.to_path_buf(),
        })
    }

    /// Opens the log of `source`: a SQLite file ([`AuditReader::open`]) or a PostgreSQL
    /// database, which must hold a Rampart audit schema of this build's version (an
    /// unreachable server is an error after `connect_timeout_ms`).
    pub fn open_source(source: &AuditSource) -> Result<Self, AuditError> {
        match source {
            AuditSource::Sqlite(p) => Self::open(p),
            AuditSource::Postgres(pg) => Ok(AuditReader {
                conn: Conn::Postgres(Box::new(std::sync::Mutex::new(
                    crate::pg::PgConn::open_reader(pg)?,
                ))),
                path: PathBuf::from(pg.location()),
            }),
        }
    }

    fn with_pg<T>(
        &self,
        m: &std::sync::Mutex<crate::pg::PgConn>,
        f: impl FnOnce(&mut crate::pg::PgConn) -> Result<T, AuditError>,
    ) -> Result<T, AuditError> {
        let mut guard = match m.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&mut guard)
    }

    /// The records matching `f`, oldest first (or newest first with `f.newest_first`).
    pub fn query(&self, f: &AuditFilter) -> Result<Vec<StoredRecord>, AuditError> {
        let mut out = Vec::new();
        self.for_each(f, |r| {
            out.push(r);
            Ok(())
        })?;
        Ok(out)
    }

    /// The governance rows (tool decisions, approvals, break-glass) matching `f`, in chain
    /// order (or newest first with `f.newest_first`).
    pub fn query_governance(
        &self,
        f: &crate::GovernanceFilter,
    ) -> Result<Vec<crate::StoredGovernance>, AuditError> {
        let (sql, values) = f.select_sql()?;
        let mut out = Vec::new();
        match &self.conn {
            Conn::Sqlite(conn) => {
                let sq = |source| AuditError::Sqlite {
                    path: self.path.clone(),
                    source,
                };
                let mut stmt = conn.prepare(&sql).map_err(sq)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(values)).map_err(sq)?;
                while let Some(r) = rows.next().map_err(sq)? {
                    let (seq, time_ms, body, hash): (i64, i64, String, String) = (
                        r.get(0).map_err(sq)?,
                        r.get(1).map_err(sq)?,
                        r.get(2).map_err(sq)?,
                        r.get(3).map_err(sq)?,
                    );
                    out.push(crate::governance::decode(
                        &self.path, seq, time_ms, &body, hash,
                    )?);
                }
            }
            Conn::Postgres(m) => self.with_pg(m, |pg| {
                pg.for_each_governance(&sql, &values, |seq, time_ms, body, hash| {
                    out.push(crate::governance::decode(
                        &self.path, seq, time_ms, body, hash,
                    )?);
                    Ok(())
                })
            })?,
        }
        Ok(out)
    }

    /// How many records [`AuditReader::query`] would return.
    pub fn count(&self, f: &AuditFilter) -> Result<u64, AuditError> {
        let (where_sql, values) = f.where_clause()?;
        let sql = format!("SELECT count(*) FROM decisions d{where_sql}");
        let n: i64 = match &self.conn {
            Conn::Sqlite(conn) => conn
                .query_row(&sql, rusqlite::params_from_iter(values), |r| r.get(0))
                .map_err(AuditError::sqlite(&self.path))?,
            Conn::Postgres(m) => self.with_pg(m, |pg| pg.count(&sql, &values))?,
        };
        let n = u64::try_from(n).unwrap_or(0);
        Ok(match f.limit {
            Some(l) => n.min(l as u64),
            None => n,
        })
    }

    /// Writes the records matching `f` to `out` (streamed, not collected), returns how many.
    pub fn export(
        &self,
        f: &AuditFilter,
        format: ExportFormat,
        out: &mut dyn Write,
    ) -> Result<u64, AuditError> {
        let io = |source| AuditError::Io {
            path: PathBuf::from("<export output>"),
            source,
        };
        let mut n = 0u64;
        if format == ExportFormat::Csv {
            writeln!(out, "{}", CSV_COLUMNS.join(",")).map_err(io)?;
        }
        let mut line = String::new();
        self.for_each(f, |r| {
            line.clear();
            match format {
                ExportFormat::Csv => csv_row(&r, &mut line),
                ExportFormat::Jsonl => {
                    line.push_str(&serde_json::to_string(&r).map_err(|e| AuditError::Corrupt {
                        path: self.path.clone(),
                        id: r.id,
                        message: e.to_string(),
                    })?)
                }
            }
            line.push('\n');
            out.write_all(line.as_bytes()).map_err(io)?;
            n += 1;
            Ok(())
        })?;
        out.flush().map_err(io)?;
        Ok(n)
    }

    fn for_each(
        &self,
        f: &AuditFilter,
        mut each: impl FnMut(StoredRecord) -> Result<(), AuditError>,
    ) -> Result<(), AuditError> {
        let (sql, values) = f.select_sql()?;
        let conn = match &self.conn {
            Conn::Sqlite(conn) => conn,
            Conn::Postgres(m) => {
                return self.with_pg(m, |pg| {
                    pg.for_each_decision(&sql, &values, |row| each(row.decode(&self.path)?))
                });
            }
        };
        let sq = AuditError::sqlite(&self.path);
        let mut stmt = match conn.prepare(&sql) {
            Ok(s) => s,
            Err(e) => return Err(sq(e)),
        };
        let mut rows = match stmt.query(rusqlite::params_from_iter(values)) {
            Ok(r) => r,
            Err(e) => return Err(sq(e)),
        };
        loop {
            let row = match rows.next() {
                Ok(Some(row)) => row,
                Ok(None) => return Ok(()),
                Err(e) => return Err(sq(e)),
            };
            let row = match sqlite_row(row) {
                Ok(r) => r,
                Err(e) => return Err(sq(e)),
            };
            each(row.decode(&self.path)?)?;
        }
    }
}

/// A decision row of SQLite ([`COLUMNS`]).
fn sqlite_row(row: &Row<'_>) -> rusqlite::Result<DecisionRow> {
    Ok(DecisionRow {
        id: row.get(0)?,
        time_ms: row.get(1)?,
        request_id: row.get(2)?,
        key_id: row.get(3)?,
        endpoint: row.get(4)?,
        input_hash: row.get(5)?,
        hash_key_id: row.get(6)?,
        action: row.get(7)?,
        risk: row.get(8)?,
        policy_version: row.get(9)?,
        findings_json: row.get(10)?,
        timings_json: row.get(11)?,
        elapsed_us: row.get(12)?,
        degraded: row.get(13)?,
        judge_json: row.get(14)?,
        relational_json: row.get(15)?,
    })
}

/// Appends one CSV cell, quoted when it holds a comma, quote, CR or LF (RFC 4180), and
/// prefixed with `'` when a spreadsheet would read it as a formula (CSV injection).
fn csv_cell(out: &mut String, s: &str) {
    let guarded;
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        guarded = format!("'{s}");
        guarded.as_str()
    } else {
        s
    };
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

fn csv_row(r: &StoredRecord, out: &mut String) {
    let rec = &r.record;
    let json = |v: Result<String, serde_json::Error>| v.unwrap_or_default();
    let judge = rec.judge.as_ref();
    let relational = rec.relational.as_ref();
    let cells: [String; 21] = [
        r.id.to_string(),
        format_time_ms(rec.time_ms),
        rec.time_ms.to_string(),
        rec.request_id.clone(),
        rec.key_id.clone().unwrap_or_default(),
        rec.endpoint.clone(),
        rec.action.name().to_string(),
        rec.risk.name().to_string(),
        rec.policy_version.clone(),
        rec.input_hash.clone(),
        rec.hash_key_id.clone(),
        rec.rule_ids().join(";"),
        json(serde_json::to_string(&rec.findings)),
        json(serde_json::to_string(&rec.layer_timings_us)),
        rec.elapsed_us.to_string(),
        rec.degraded.to_string(),
        judge
            .and_then(|j| j.intent_label)
            .map_or_else(String::new, |l| l.name().to_string()),
        judge
            .and_then(|j| j.outcome)
            .map_or_else(String::new, |o| o.name().to_string()),
        judge
            .and_then(|j| j.explanation.clone())
            .unwrap_or_default(),
        relational
            .and_then(|r| r.label)
            .map_or_else(String::new, |l| l.name().to_string()),
        relational
            .and_then(|r| r.balance)
            .map(|b| format!("{b:.4}"))
            .unwrap_or_default(),
    ];
    for (i, c) in cells.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if i == BALANCE_CELL {
            // A number this function formatted (`-0.5000`), not text from the record: the
            // formula guard would turn a negative balance into the text `'-0.5000`.
            out.push_str(c);
        } else {
            csv_cell(out, c);
        }
    }
}

/// The index of `relational_balance` in [`CSV_COLUMNS`].
const BALANCE_CELL: usize = 20;

/// Deletes every record with `time_ms < older_than_ms` (a Unix epoch ms cutoff, not an age)
/// and its findings, a chunk per transaction, and returns how many. The governance rows are
/// never pruned (their table is append-only and hash-chained). Safe while the service
/// writes (it waits for the write lock). The writer also applies `retention_days` itself.
pub fn prune(path: &Path, older_than_ms: i64) -> Result<u64, AuditError> {
    prune_source(&AuditSource::Sqlite(path.to_path_buf()), older_than_ms)
}

/// [`prune`] on a SQLite file or a PostgreSQL database.
pub fn prune_source(source: &AuditSource, older_than_ms: i64) -> Result<u64, AuditError> {
    let mut store: Box<dyn Store> = match source {
        AuditSource::Sqlite(path) => Box::new(crate::sqlite::SqliteStore::open_existing(
            path.clone(),
            Duration::from_secs(30),
        )?),
        AuditSource::Postgres(pg) => Box::new(crate::pg::PgStore::open_existing(pg)?),
    };
    crate::store::prune_all(store.as_mut(), older_than_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_filter_has_no_where() {
        let (sql, values) = AuditFilter::default().select_sql().unwrap();
        assert!(!sql.contains("WHERE"), "{sql}");
        assert!(values.is_empty());
        assert!(sql.ends_with("ORDER BY d.time_ms ASC, d.id ASC"), "{sql}");
    }

    #[test]
    fn table() {
        let f = AuditFilter {
            since_ms: Some(10),
            until_ms: Some(20),
            action: Some(Action::Block),
            rule_id: Some("CTRL_001".into()),
            key_id: Some("k1".into()),
            request_id: Some("r1".into()),
            endpoint: Some("scan".into()),
            intent_label: None,
            judge_outcome: None,
            limit: Some(5),
            newest_first: true,
        };
        let (sql, values) = f.select_sql().unwrap();
        assert_eq!(
            sql,
            format!(
                "SELECT {COLUMNS} FROM decisions d WHERE d.time_ms >= ? AND d.time_ms < ? \
                 AND d.action = ? AND d.key_id = ? AND d.request_id = ? AND d.endpoint = ? \
                 AND EXISTS (SELECT 1 FROM findings f WHERE f.rule_id = ? AND f.decision_id = d.id) \
                 ORDER BY d.time_ms DESC, d.id DESC LIMIT ?"
            )
        );
        assert_eq!(
            values,
            vec![
                Value::Integer(10),
                Value::Integer(20),
                Value::Text("BLOCK".into()),
                Value::Text("k1".into()),
                Value::Text("r1".into()),
                Value::Text("scan".into()),
                Value::Text("CTRL_001".into()),
                Value::Integer(5),
            ]
        );
        let backwards = AuditFilter {
            since_ms: Some(2),
            until_ms: Some(1),
            ..AuditFilter::default()
        };
        assert!(matches!(backwards.select_sql(), Err(AuditError::Filter(_))));
    }

    #[test]
    fn judge_filters_are_columns_with_bound_values() {
        let f = AuditFilter {
            intent_label: Some(IntentLabel::Malicious),
            judge_outcome: Some(OutcomeKind::HttpError),
            ..AuditFilter::default()
        };
        let (sql, values) = f.select_sql().unwrap();
        assert!(
            sql.contains("WHERE d.judge_intent_label = ? AND d.judge_outcome = ?"),
            "{sql}"
        );
        assert_eq!(
            values,
            vec![
                Value::Text("malicious".into()),
                Value::Text("http_error".into())
            ]
        );
    }

    #[test]
    fn csv_cells_are_escaped() {
        let mut s = String::new();
        csv_cell(&mut s, "plain");
        s.push('|');
        csv_cell(&mut s, "a,b");
        s.push('|');
        csv_cell(&mut s, "say \"hi\"");
        s.push('|');
        csv_cell(&mut s, "two\nlines");
        assert_eq!(s, "plain|\"a,b\"|\"say \"\"hi\"\"\"|\"two\nlines\"");
    }

    #[test]
    fn the_balance_column_is_where_the_csv_rows_put_it() {
        assert_eq!(CSV_COLUMNS[BALANCE_CELL], "relational_balance");
    }

    #[test]
    fn csv_cells_that_look_like_formulas_are_text() {
        let mut s = String::new();
        for cell in ["=HYPERLINK(\"x\")", "+1", "-2", "@SUM(A1)", "ok"] {
            csv_cell(&mut s, cell);
            s.push('|');
        }
        assert_eq!(s, "\"'=HYPERLINK(\"\"x\"\")\"|'+1|'-2|'@SUM(A1)|ok|");
    }

    fn text() -> impl Strategy<Value = Option<String>> {
        proptest::option::of(any::<String>())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Values only ever appear as bound parameters: the SQL text is one of a fixed set
        /// of shapes, and there is one `?` per value.
        #[test]
        fn values_are_bound_never_interpolated(
            since in proptest::option::of(any::<i64>()),
            until in proptest::option::of(any::<i64>()),
            key in text(), request in text(), rule in text(), endpoint in text(),
            action in proptest::option::of(proptest::sample::select(&Action::ALL[..])),
            limit in proptest::option::of(any::<usize>()),
            newest_first in any::<bool>(),
            intent_label in proptest::option::of(proptest::sample::select(&IntentLabel::ALL[..])),
            judge_outcome in proptest::option::of(proptest::sample::select(&OutcomeKind::ALL[..])),
        ) {
            let f = AuditFilter {
                since_ms: since, until_ms: until, action, rule_id: rule, key_id: key,
                request_id: request, endpoint,
                intent_label, judge_outcome,
                limit, newest_first,
            };
            match f.select_sql() {
                Ok((sql, values)) => {
                    prop_assert_eq!(sql.matches('?').count(), values.len());
                    prop_assert!(!sql.contains('\''));
                    let allowed = |c: char| c.is_ascii_alphanumeric() || " _.,()?=<>*".contains(c);
                    prop_assert!(sql.chars().all(allowed), "{}", sql);
                    // The SQL text depends only on which fields are set, not on their values.
                    let some = |o: &Option<String>| o.as_ref().map(|_| "x".to_string());
                    let shape = AuditFilter {
                        since_ms: since.map(|_| 0), until_ms: until.map(|_| 0),
                        action: f.action.map(|_| Action::Allow),
                        rule_id: some(&f.rule_id), key_id: some(&f.key_id),
                        request_id: some(&f.request_id), endpoint: some(&f.endpoint),
                        intent_label: f.intent_label.map(|_| IntentLabel::Benign),
                        judge_outcome: f.judge_outcome.map(|_| OutcomeKind::Ok),
                        limit: limit.map(|_| 0), newest_first,
                    };
                    prop_assert_eq!(sql, shape.select_sql().unwrap().0);
                }
                Err(AuditError::Filter(_)) => {
                    prop_assert!(matches!((since, until), (Some(s), Some(u)) if s > u));
                }
                Err(e) => prop_assert!(false, "unexpected error {}", e),
            }
        }
    }
}
