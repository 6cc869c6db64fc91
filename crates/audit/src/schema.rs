//! The on-disk schema, its version and migrations, and connection setup.

use crate::{AuditError, SCHEMA_VERSION};
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::time::Duration;

/// `PRAGMA application_id` of a Rampart audit log (`RAMP`).
pub(crate) const APPLICATION_ID: i32 = 0x5241_4D50;

/// `MIGRATIONS[n]` takes the schema from version `n` to `n + 1`.
const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    // 0 -> 1
    "CREATE TABLE decisions (
        id INTEGER PRIMARY KEY,
        time_ms INTEGER NOT NULL,
        request_id TEXT NOT NULL,
        key_id TEXT,
        endpoint TEXT NOT NULL,
        input_hash TEXT NOT NULL,
        hash_key_id TEXT NOT NULL,
        action TEXT NOT NULL,
        risk TEXT NOT NULL,
        policy_version TEXT NOT NULL,
        findings_json TEXT NOT NULL,
        layer_timings_json TEXT NOT NULL,
        elapsed_us INTEGER NOT NULL,
        degraded INTEGER NOT NULL
    );
    CREATE INDEX decisions_time ON decisions (time_ms);
    CREATE INDEX decisions_action_time ON decisions (action, time_ms);
    CREATE INDEX decisions_key_time ON decisions (key_id, time_ms);
    CREATE INDEX decisions_request ON decisions (request_id);
    CREATE TABLE findings (
        decision_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        rule_id TEXT NOT NULL,
        category TEXT NOT NULL,
        strength TEXT NOT NULL,
        layer TEXT NOT NULL,
        PRIMARY KEY (decision_id, seq)
    ) WITHOUT ROWID;
    CREATE INDEX findings_rule ON findings (rule_id, decision_id);",
    // 1 -> 2: the intent layer's report (NULL for decisions without a judge layer, and for
    // every record written before), with its label and outcome as columns to filter on.
    "ALTER TABLE decisions ADD COLUMN judge_json TEXT;
    ALTER TABLE decisions ADD COLUMN judge_intent_label TEXT;
    ALTER TABLE decisions ADD COLUMN judge_outcome TEXT;
    CREATE INDEX decisions_judge_label_time ON decisions (judge_intent_label, time_ms);
    CREATE INDEX decisions_judge_outcome_time ON decisions (judge_outcome, time_ms);",
    // 2 -> 3: the relational layer's report (NULL for decisions without a relational layer,
    // and for every record written before).
    "ALTER TABLE decisions ADD COLUMN relational_json TEXT;",
    // 3 -> 4: the governance audit (tool decisions, approvals, break-glass): append-only,
    // hash-chained (see governance.rs). Retention never deletes from it.
    "CREATE TABLE governance (
        seq INTEGER PRIMARY KEY,
        time_ms INTEGER NOT NULL,
        kind TEXT NOT NULL,
        request_id TEXT,
        key_id TEXT,
        endpoint TEXT,
        conversation TEXT,
        tool TEXT,
        action TEXT,
        approval_id TEXT,
        breakglass_id TEXT,
        body_json TEXT NOT NULL,
        hash_key_id TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    );
    CREATE INDEX governance_time ON governance (time_ms);
    CREATE INDEX governance_tool_time ON governance (tool, time_ms);
    CREATE INDEX governance_conversation ON governance (conversation, seq);
    CREATE INDEX governance_request ON governance (request_id);
    CREATE INDEX governance_breakglass ON governance (breakglass_id);
    CREATE TRIGGER governance_no_update BEFORE UPDATE ON governance
        BEGIN SELECT RAISE(ABORT, 'the governance audit is append-only'); END;
    CREATE TRIGGER governance_no_delete BEFORE DELETE ON governance
        BEGIN SELECT RAISE(ABORT, 'the governance audit is append-only'); END;",
];

fn sq(path: &Path) -> impl FnOnce(rusqlite::Error) -> AuditError {
    AuditError::sqlite(path)
}

fn schema_err(path: &Path, message: impl Into<String>) -> AuditError {
    AuditError::Schema {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Reads `(application_id, user_version, number of tables)`.
fn identify(conn: &Connection, path: &Path) -> Result<(i32, u32, i64), AuditError> {
    let app: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(sq(path))?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sq(path))?;
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .map_err(sq(path))?;
    let version = u32::try_from(version)
        .map_err(|_| schema_err(path, format!("invalid schema version {version}")))?;
    Ok((app, version, tables))
}

/// Checks that an existing log has exactly this build's schema (readers and `prune` do not
/// migrate).
pub(crate) fn check_current(conn: &Connection, path: &Path) -> Result<(), AuditError> {
    let (app, version, tables) = identify(conn, path)?;
    if app != APPLICATION_ID && !(app == 0 && version == 0 && tables == 0) {
        return Err(schema_err(path, "not a Rampart audit log"));
    }
    if version == 0 {
        return Err(schema_err(
            path,
            "empty database: not a Rampart audit log (the service creates it)",
        ));
    }
    if version > SCHEMA_VERSION {
        return Err(newer(path, version));
    }
    if version < SCHEMA_VERSION {
        return Err(schema_err(
            path,
            format!(
                "schema version {version} is older than this build's ({SCHEMA_VERSION}); \
                 start the service once on it to upgrade it"
            ),
        ));
    }
    Ok(())
}

fn newer(path: &Path, version: u32) -> AuditError {
    schema_err(
        path,
        format!(
            "schema version {version} is newer than this build supports ({SCHEMA_VERSION}); \
             use a newer rampart"
        ),
    )
}

/// Creates or upgrades the schema to [`SCHEMA_VERSION`], each step in its own transaction.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), AuditError> {
    let (app, version, tables) = identify(conn, path)?;
    let ours = app == APPLICATION_ID || (app == 0 && version == 0 && tables == 0);
    if !ours {
        return Err(schema_err(
            path,
            "not a Rampart audit log (it has other tables); refusing to write to it",
        ));
    }
    if version > SCHEMA_VERSION {
        return Err(newer(path, version));
    }
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction().map_err(sq(path))?;
        tx.execute_batch(sql).map_err(sq(path))?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)
            .map_err(sq(path))?;
        tx.pragma_update(None, "user_version", from as i64 + 1)
            .map_err(sq(path))?;
        tx.commit().map_err(sq(path))?;
    }
    Ok(())
}

/// Opens the writer's connection: creates the file, WAL mode, the requested `synchronous`.
pub(crate) fn open_writer(
    path: &Path,
    synchronous: crate::Synchronous,
    busy_timeout: Duration,
) -> Result<Connection, AuditError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| AuditError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    rampart_core::private_file::create_private(path).map_err(|source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sq(path))?;
    conn.busy_timeout(busy_timeout).map_err(sq(path))?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(sq(path))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(schema_err(
            path,
            format!("could not switch to WAL mode (journal_mode is {mode})"),
        ));
    }
    conn.pragma_update(None, "synchronous", synchronous.pragma())
        .map_err(sq(path))?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// Opens an existing log read-write without creating it (for `prune`).
pub(crate) fn open_existing_rw(
    path: &Path,
    busy_timeout: Duration,
) -> Result<Connection, AuditError> {
    if !path.exists() {
        return Err(AuditError::NotFound {
            path: path.to_path_buf(),
        });
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sq(path))?;
    conn.busy_timeout(busy_timeout).map_err(sq(path))?;
    check_current(&conn, path)?;
    Ok(conn)
}

/// Opens an existing log read-only.
pub(crate) fn open_reader(path: &Path) -> Result<Connection, AuditError> {
    if !path.exists() {
        return Err(AuditError::NotFound {
            path: path.to_path_buf(),
        });
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sq(path))?;
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(sq(path))?;
    check_current(&conn, path)?;
    Ok(conn)
}

/// Deletes up to `chunk` decisions (and their findings) older than `cutoff_ms` in one
/// transaction; returns how many.
pub(crate) fn prune_chunk(
    conn: &mut Connection,
    path: &Path,
    cutoff_ms: i64,
    chunk: usize,
) -> Result<usize, AuditError> {
    let tx = conn.transaction().map_err(sq(path))?;
    let ids: Vec<i64> = {
        let mut stmt = tx
            .prepare_cached("SELECT id FROM decisions WHERE time_ms < ?1 ORDER BY time_ms LIMIT ?2")
            .map_err(sq(path))?;
        let rows = stmt
            .query_map(rusqlite::params![cutoff_ms, chunk as i64], |r| r.get(0))
            .map_err(sq(path))?;
        rows.collect::<Result<_, _>>().map_err(sq(path))?
    };
    {
        let mut del_f = tx
            .prepare_cached("DELETE FROM findings WHERE decision_id = ?1")
            .map_err(sq(path))?;
        let mut del_d = tx
            .prepare_cached("DELETE FROM decisions WHERE id = ?1")
            .map_err(sq(path))?;
        for id in &ids {
            del_f.execute([id]).map_err(sq(path))?;
            del_d.execute([id]).map_err(sq(path))?;
        }
    }
    tx.commit().map_err(sq(path))?;
    Ok(ids.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuditFilter, AuditReader};

    /// A log written by a build before the judge columns is upgraded when the writer opens
    /// it, and its records read back without a judge.
    #[test]
    fn a_version_1_log_is_migrated_and_its_records_have_no_judge() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "application_id", APPLICATION_ID)
                .unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute(
                "INSERT INTO decisions (time_ms, request_id, key_id, endpoint, input_hash,
                    hash_key_id, action, risk, policy_version, findings_json,
                    layer_timings_json, elapsed_us, degraded)
                 VALUES (1, 'old-1', NULL, 'scan', 'h', 'k', 'ALLOW', 'low_risk', 'p', '[]',
                    '{}', 5, 0)",
                [],
            )
            .unwrap();
        }
        let e = AuditReader::open(&path).unwrap_err();
        assert!(e.to_string().contains("older than this build"), "{e}");
        let conn = open_writer(&path, crate::Synchronous::Normal, Duration::from_secs(5)).unwrap();
        let version: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        drop(conn);
        let reader = AuditReader::open(&path).unwrap();
        let all = reader.query(&AuditFilter::default()).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].record.request_id, "old-1");
        assert_eq!(all[0].record.judge, None);
        // A record written by the first schema reads its action and risk into the enums.
        assert_eq!(all[0].record.action, rampart_core::Action::Allow);
        assert_eq!(all[0].record.risk, rampart_core::RiskClass::LowRisk);
        let judged = AuditFilter {
            judge_outcome: Some(rampart_llm::OutcomeKind::Ok),
            ..AuditFilter::default()
        };
        assert_eq!(reader.count(&judged).unwrap(), 0);
    }
}
