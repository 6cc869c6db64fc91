//! The PostgreSQL store (`[audit] backend = "postgres"`): the same tables as SQLite
//! (`decisions`, `findings`, the append-only hash-chained `governance`) in the connection's
//! schema (its `search_path`; a database or schema of its own is best), a version table
//! `rampart_audit_schema` with versioned migrations, and one writer connection per replica.
//!
//! * **Group commit**: a batch is one transaction: the decision ids come from the sequence
//!   in one statement, the decisions and their findings go in with one `INSERT … SELECT
//!   FROM unnest(…)` each, so a batch costs a handful of round trips whatever its size.
//!   `append` resolves after `COMMIT` returned (PostgreSQL's default `synchronous_commit =
//!   on`: the commit is flushed to its WAL).
//! * **One chain across replicas**: a transaction that appends governance rows first takes
//!   the transaction-scoped advisory lock [`CHAIN_LOCK`], then reads the chain's head, so
//!   two replicas' appends serialize and form one chain (`seq` is also the primary key: a
//!   race would fail the batch, never fork the chain). Decisions take no lock.
//! * **Append-only**: a trigger refuses `UPDATE`, `DELETE` (per row) and `TRUNCATE` on
//!   `governance`; `verify` reports whether the row triggers are present and enabled.
//! * **Migrations**: [`POSTGRES_SCHEMA_VERSION`]; applied by the writer at open, under the
//!   advisory lock [`MIGRATE_LOCK`] (two replicas starting at once migrate once), in one
//!   transaction; a newer version is refused. Readers require the current version.
//! * **Timeouts**: `connect_timeout_ms` bounds connecting and authenticating (an
//!   unreachable or silent server is an error within it), `statement_timeout_ms` every
//!   statement (the server's `statement_timeout`, which includes waiting for the chain's
//!   lock). A connection that breaks fails the batch in flight ([`AuditError::Write`]);
//!   the next batch reconnects.
//! * **TLS**: not built in (`NoTls`): reach PostgreSQL over loopback, a Unix socket or a
//!   private network (a sidecar such as pgbouncer or stunnel can add TLS).

use crate::config::PostgresConfig;
use crate::governance::{self, ChainKey, Row, VerifyReport};
use crate::store::{
    Chain, ChainCursor, DecisionRow, EncodedDecision, Item, Job, Store, explained_judge_json,
    numbered,
};
use crate::{AuditError, now_ms};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::ToSql;
use postgres::{Client, NoTls, Statement, Transaction};
use rusqlite::types::Value;
use std::path::PathBuf;
use std::time::Duration;

/// The schema version this build writes to PostgreSQL (`rampart_audit_schema.version`).
pub const POSTGRES_SCHEMA_VERSION: u32 = 1;

/// `pg_advisory_xact_lock` key held by a transaction appending governance rows (`RAMP`, 1).
pub const CHAIN_LOCK: i64 = 0x5241_4D50_0000_0001;
/// `pg_advisory_xact_lock` key held while migrating (`RAMP`, 2).
pub const MIGRATE_LOCK: i64 = 0x5241_4D50_0000_0002;

/// `MIGRATIONS[n]` takes the schema from version `n` to `n + 1` (the SQLite schema's
/// version 4, in PostgreSQL types).
const MIGRATIONS: [&str; POSTGRES_SCHEMA_VERSION as usize] = [
    // 0 -> 1
    "CREATE SEQUENCE decisions_id_seq;
    CREATE TABLE decisions (
        id BIGINT PRIMARY KEY DEFAULT nextval('decisions_id_seq'),
        time_ms BIGINT NOT NULL,
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
        elapsed_us BIGINT NOT NULL,
        degraded BOOLEAN NOT NULL,
        judge_json TEXT,
        judge_intent_label TEXT,
        judge_outcome TEXT,
        relational_json TEXT
    );
    ALTER SEQUENCE decisions_id_seq OWNED BY decisions.id;
    CREATE INDEX decisions_time ON decisions (time_ms);
    CREATE INDEX decisions_action_time ON decisions (action, time_ms);
    CREATE INDEX decisions_key_time ON decisions (key_id, time_ms);
    CREATE INDEX decisions_request ON decisions (request_id);
    CREATE INDEX decisions_judge_label_time ON decisions (judge_intent_label, time_ms);
    CREATE INDEX decisions_judge_outcome_time ON decisions (judge_outcome, time_ms);
    CREATE TABLE findings (
        decision_id BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        rule_id TEXT NOT NULL,
        category TEXT NOT NULL,
        strength TEXT NOT NULL,
        layer TEXT NOT NULL,
        PRIMARY KEY (decision_id, seq)
    );
    CREATE INDEX findings_rule ON findings (rule_id, decision_id);
    CREATE TABLE governance (
        seq BIGINT PRIMARY KEY,
        time_ms BIGINT NOT NULL,
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
    CREATE FUNCTION rampart_governance_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'the governance audit is append-only'; END $$;
    CREATE TRIGGER governance_no_update BEFORE UPDATE ON governance
        FOR EACH ROW EXECUTE FUNCTION rampart_governance_append_only();
    CREATE TRIGGER governance_no_delete BEFORE DELETE ON governance
        FOR EACH ROW EXECUTE FUNCTION rampart_governance_append_only();
    CREATE TRIGGER governance_no_truncate BEFORE TRUNCATE ON governance
        FOR EACH STATEMENT EXECUTE FUNCTION rampart_governance_append_only();",
];

const INSERT_DECISIONS: &str = "INSERT INTO decisions (id, time_ms, request_id, key_id, \
    endpoint, input_hash, hash_key_id, action, risk, policy_version, findings_json, \
    layer_timings_json, elapsed_us, degraded, judge_json, judge_intent_label, judge_outcome, \
    relational_json) SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], \
    $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], \
    $11::text[], $12::text[], $13::bigint[], $14::boolean[], $15::text[], $16::text[], \
    $17::text[], $18::text[])";

const INSERT_FINDINGS: &str = "INSERT INTO findings (decision_id, seq, rule_id, category, \
    strength, layer) SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], \
    $4::text[], $5::text[], $6::text[])";

const INSERT_GOVERNANCE: &str = "INSERT INTO governance (seq, time_ms, kind, request_id, \
    key_id, endpoint, conversation, tool, action, approval_id, breakglass_id, body_json, \
    hash_key_id, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
    $13, $14, $15)";

const HEAD: &str = "SELECT seq, hash, hash_key_id FROM governance ORDER BY seq DESC LIMIT 1";

fn schema_err(location: &str, message: impl Into<String>) -> AuditError {
    AuditError::Schema {
        path: PathBuf::from(location),
        message: message.into(),
    }
}

/// Connects (within `connect_timeout_ms`, whatever the server does) and sets the
/// statement timeout.
pub(crate) fn connect(cfg: &PostgresConfig) -> Result<Client, AuditError> {
    cfg.validate()?;
    let location = cfg.location();
    let pg = AuditError::pg(&location);
    let url = cfg.resolve_url()?;
    let mut pc: postgres::Config = url.parse().map_err(&pg)?;
    let timeout = Duration::from_millis(cfg.connect_timeout_ms);
    pc.connect_timeout(timeout);
    pc.keepalives(true);
    pc.keepalives_idle(Duration::from_secs(30));
    // A server that vanishes mid-statement (no RST) fails the statement instead of hanging.
    pc.tcp_user_timeout(Duration::from_millis(
        cfg.connect_timeout_ms + cfg.statement_timeout_ms,
    ));
    if pc.get_application_name().is_none() {
        pc.application_name("rampart-audit");
    }
    // `connect_timeout` covers the TCP connect only; a server that accepts and then says
    // nothing would hold the start-up handshake forever: the handshake runs on its own
    // thread, abandoned after the timeout.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("rampart-audit-pg-connect".into())
        .spawn(move || {
            let _ = tx.send(pc.connect(NoTls));
        })
        .map_err(|e| AuditError::Thread(format!("could not start the connecting thread: {e}")))?;
    let mut client = match rx.recv_timeout(timeout) {
        Ok(r) => r.map_err(&pg)?,
        Err(_) => {
            return Err(AuditError::ConnectTimeout {
                location: location.clone(),
                timeout_ms: cfg.connect_timeout_ms,
            });
        }
    };
    // An integer, formatted: nothing from outside goes into the SQL text.
    client
        .batch_execute(&format!(
            "SET statement_timeout = {}",
            cfg.statement_timeout_ms
        ))
        .map_err(&pg)?;
    Ok(client)
}

/// The schema's version: `None` when there is no version table.
fn version(tx: &mut Transaction<'_>, location: &str) -> Result<Option<u32>, AuditError> {
    let pg = AuditError::pg(location);
    let exists: bool = tx
        .query_one(
            "SELECT to_regclass('rampart_audit_schema') IS NOT NULL",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .map_err(&pg)?;
    if !exists {
        return Ok(None);
    }
    let v: Option<i32> = tx
        .query_one("SELECT max(version) FROM rampart_audit_schema", &[])
        .and_then(|r| r.try_get(0))
        .map_err(&pg)?;
    let v = v.unwrap_or(0);
    u32::try_from(v)
        .map(Some)
        .map_err(|_| schema_err(location, format!("invalid schema version {v}")))
}

fn newer(location: &str, version: u32) -> AuditError {
    schema_err(
        location,
        format!(
            "schema version {version} is newer than this build supports \
             ({POSTGRES_SCHEMA_VERSION}); use a newer rampart"
        ),
    )
}

/// Creates or upgrades the schema to [`POSTGRES_SCHEMA_VERSION`] in one transaction, under
/// [`MIGRATE_LOCK`].
fn migrate(client: &mut Client, location: &str) -> Result<(), AuditError> {
    let pg = AuditError::pg(location);
    let mut tx = client.transaction().map_err(&pg)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])
        .map_err(&pg)?;
    let current = match version(&mut tx, location)? {
        Some(v) => v,
        None => {
            let theirs: i64 = tx
                .query_one(
                    "SELECT count(*) FROM unnest(ARRAY['decisions', 'findings', 'governance']) t \
                     WHERE to_regclass(t) IS NOT NULL",
                    &[],
                )
                .and_then(|r| r.try_get(0))
                .map_err(&pg)?;
            if theirs > 0 {
                return Err(schema_err(
                    location,
                    "not a Rampart audit database (it has a decisions, findings or governance \
                     table but no rampart_audit_schema); refusing to write to it",
                ));
            }
            tx.batch_execute(
                "CREATE TABLE rampart_audit_schema (
                    version INTEGER PRIMARY KEY,
                    applied_ms BIGINT NOT NULL
                )",
            )
            .map_err(&pg)?;
            0
        }
    };
    if current > POSTGRES_SCHEMA_VERSION {
        return Err(newer(location, current));
    }
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.batch_execute(sql).map_err(&pg)?;
        let to = i32::try_from(from + 1).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO rampart_audit_schema (version, applied_ms) VALUES ($1, $2)",
            &[&to, &now_ms()],
        )
        .map_err(&pg)?;
    }
    tx.commit().map_err(&pg)
}

/// Checks that the database has exactly this build's schema (readers and `prune` do not
/// migrate).
fn check_current(client: &mut Client, location: &str) -> Result<(), AuditError> {
    let pg = AuditError::pg(location);
    let mut tx = client.transaction().map_err(&pg)?;
    let v = version(&mut tx, location)?;
    tx.commit().map_err(&pg)?;
    match v {
        None | Some(0) => Err(schema_err(
            location,
            "no Rampart audit schema in this database (rampart serve creates it)",
        )),
        Some(v) if v > POSTGRES_SCHEMA_VERSION => Err(newer(location, v)),
        Some(v) if v < POSTGRES_SCHEMA_VERSION => Err(schema_err(
            location,
            format!(
                "schema version {v} is older than this build's ({POSTGRES_SCHEMA_VERSION}); \
                 start the service once on it to upgrade it"
            ),
        )),
        Some(_) => Ok(()),
    }
}

fn head(client: &mut Client, location: &str) -> Result<Option<(i64, String, String)>, AuditError> {
    let pg = AuditError::pg(location);
    match client.query_opt(HEAD, &[]).map_err(&pg)? {
        None => Ok(None),
        Some(r) => Ok(Some((
            r.try_get(0).map_err(&pg)?,
            r.try_get(1).map_err(&pg)?,
            r.try_get(2).map_err(&pg)?,
        ))),
    }
}

/// The writer's statements, prepared once per connection.
struct Prepared {
    next_ids: Statement,
    decisions: Statement,
    findings: Statement,
    governance: Statement,
    lock: Statement,
    head: Statement,
}

impl Prepared {
    fn new(client: &mut Client) -> Result<Self, postgres::Error> {
        Ok(Prepared {
            next_ids: client.prepare(
                "SELECT nextval('decisions_id_seq') FROM generate_series(1, $1::integer)",
            )?,
            decisions: client.prepare(INSERT_DECISIONS)?,
            findings: client.prepare(INSERT_FINDINGS)?,
            governance: client.prepare(INSERT_GOVERNANCE)?,
            lock: client.prepare("SELECT pg_advisory_xact_lock($1)")?,
            head: client.prepare(HEAD)?,
        })
    }
}

/// The writer's connection.
pub(crate) struct PgStore {
    cfg: PostgresConfig,
    location: String,
    conn: Option<(Client, Prepared)>,
}

impl PgStore {
    /// Connects, creates or migrates the schema, checks the chain's key.
    pub(crate) fn open(cfg: &PostgresConfig, key: &ChainKey) -> Result<Self, AuditError> {
        let location = cfg.location();
        let mut client = connect(cfg)?;
        migrate(&mut client, &location)?;
        governance::check_head(
            head(&mut client, &location)?,
            &PathBuf::from(&location),
            key,
        )?;
        let prepared = Prepared::new(&mut client).map_err(AuditError::pg(&location))?;
        Ok(PgStore {
            cfg: cfg.clone(),
            location,
            conn: Some((client, prepared)),
        })
    }

    /// An existing database with this build's schema (for `prune`).
    pub(crate) fn open_existing(cfg: &PostgresConfig) -> Result<Self, AuditError> {
        let location = cfg.location();
        let mut client = connect(cfg)?;
        check_current(&mut client, &location)?;
        let prepared = Prepared::new(&mut client).map_err(AuditError::pg(&location))?;
        Ok(PgStore {
            cfg: cfg.clone(),
            location,
            conn: Some((client, prepared)),
        })
    }

    /// The connection, reconnecting when the last one broke.
    fn conn(&mut self) -> Result<&mut (Client, Prepared), AuditError> {
        if self.conn.as_ref().is_some_and(|(c, _)| c.is_closed()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let mut client = connect(&self.cfg)?;
            let prepared = Prepared::new(&mut client).map_err(AuditError::pg(&self.location))?;
            self.conn = Some((client, prepared));
        }
        self.conn.as_mut().ok_or_else(|| AuditError::Closed)
    }
}

/// The columns of a batch's decisions and findings, one array per column (`unnest`).
#[derive(Default)]
struct Columns<'a> {
    id: Vec<i64>,
    time_ms: Vec<i64>,
    request_id: Vec<&'a str>,
    key_id: Vec<Option<&'a str>>,
    endpoint: Vec<&'a str>,
    input_hash: Vec<&'a str>,
    hash_key_id: Vec<&'a str>,
    action: Vec<&'static str>,
    risk: Vec<&'static str>,
    policy_version: Vec<&'a str>,
    findings_json: Vec<String>,
    timings_json: Vec<String>,
    elapsed_us: Vec<i64>,
    degraded: Vec<bool>,
    judge_json: Vec<Option<String>>,
    judge_label: Vec<Option<&'static str>>,
    judge_outcome: Vec<Option<&'static str>>,
    relational_json: Vec<Option<String>>,
    f_decision: Vec<i64>,
    f_seq: Vec<i64>,
    f_rule: Vec<&'a str>,
    f_category: Vec<&'a str>,
    f_strength: Vec<&'static str>,
    f_layer: Vec<&'a str>,
}

impl<'a> Columns<'a> {
    fn push(&mut self, id: i64, d: EncodedDecision<'a>) {
        let rec = d.rec;
        for (seq, f) in d.findings() {
            self.f_decision.push(id);
            self.f_seq.push(seq);
            self.f_rule.push(&f.rule_id);
            self.f_category.push(&f.category);
            self.f_strength.push(f.strength.name());
            self.f_layer.push(&f.layer);
        }
        self.id.push(id);
        self.time_ms.push(rec.time_ms);
        self.request_id.push(&rec.request_id);
        self.key_id.push(rec.key_id.as_deref());
        self.endpoint.push(&rec.endpoint);
        self.input_hash.push(&rec.input_hash);
        self.hash_key_id.push(&rec.hash_key_id);
        self.action.push(d.action);
        self.risk.push(d.risk);
        self.policy_version.push(&rec.policy_version);
        self.findings_json.push(d.findings_json);
        self.timings_json.push(d.timings_json);
        self.elapsed_us.push(d.elapsed_us);
        self.degraded.push(rec.degraded);
        self.judge_json.push(d.judge_json);
        self.judge_label.push(d.judge_label);
        self.judge_outcome.push(d.judge_outcome);
        self.relational_json.push(d.relational_json);
    }
}

impl Store for PgStore {
    fn write_batch(&mut self, batch: &[Job], chain: &Chain) -> Result<Vec<i64>, AuditError> {
        let location = self.location.clone();
        let pg = AuditError::pg(&location);
        let (client, st) = self.conn()?;
        let result = (|| -> Result<Vec<i64>, AuditError> {
            let mut tx = client.transaction().map_err(&pg)?;
            let n = batch
                .iter()
                .filter(|j| matches!(j.item, Item::Decision(_)))
                .count();
            let mut new_ids = Vec::with_capacity(n);
            if n > 0 {
                let n = i32::try_from(n).unwrap_or(i32::MAX);
                for r in tx.query(&st.next_ids, &[&n]).map_err(&pg)? {
                    new_ids.push(r.try_get::<_, i64>(0).map_err(&pg)?);
                }
            }
            let mut new_ids = new_ids.into_iter();
            let mut cols = Columns::default();
            let mut cursor = ChainCursor::new();
            let mut ids = Vec::with_capacity(batch.len());
            for job in batch {
                match &job.item {
                    Item::Decision(rec) => {
                        let id = new_ids.next().ok_or_else(|| AuditError::Write {
                            message: "the id sequence returned too few ids".into(),
                        })?;
                        let d = EncodedDecision::new(rec).map_err(|e| AuditError::Write {
                            message: format!("decision: {e}"),
                        })?;
                        cols.push(id, d);
                        ids.push(id);
                    }
                    Item::Governance(g) => {
                        let (row, hash) = cursor.next_row(g, chain, || {
                            // Serializes appends across replicas until this commits.
                            tx.execute(&st.lock, &[&CHAIN_LOCK]).map_err(&pg)?;
                            match tx.query_opt(&st.head, &[]).map_err(&pg)? {
                                None => Ok(None),
                                Some(r) => Ok(Some((
                                    r.try_get(0).map_err(&pg)?,
                                    r.try_get(1).map_err(&pg)?,
                                ))),
                            }
                        })?;
                        tx.execute(
                            &st.governance,
                            &[
                                &row.seq,
                                &row.time_ms,
                                &row.kind,
                                &row.cols[0],
                                &row.cols[1],
                                &row.cols[2],
                                &row.cols[3],
                                &row.cols[4],
                                &row.cols[5],
                                &row.cols[6],
                                &row.cols[7],
                                &row.body_json,
                                &row.hash_key_id,
                                &row.prev_hash,
                                &hash,
                            ],
                        )
                        .map_err(&pg)?;
                        ids.push(row.seq);
                    }
                    Item::Explanation(e) => {
                        let found = tx
                            .query_opt(
                                "SELECT judge_json FROM decisions WHERE id = $1 AND request_id = $2",
                                &[&e.decision_id, &e.request_id],
                            )
                            .map_err(&pg)?;
                        let json = match found {
                            Some(r) => r.try_get::<_, Option<String>>(0).map_err(&pg)?,
                            None => None,
                        };
                        match explained_judge_json(json.as_deref(), e)? {
                            Some(json) => {
                                tx.execute(
                                    "UPDATE decisions SET judge_json = $1 WHERE id = $2",
                                    &[&json, &e.decision_id],
                                )
                                .map_err(&pg)?;
                                ids.push(e.decision_id);
                            }
                            None => ids.push(0),
                        }
                    }
                }
            }
            if !cols.id.is_empty() {
                let c = &cols;
                let params: [&(dyn ToSql + Sync); 18] = [
                    &c.id,
                    &c.time_ms,
                    &c.request_id,
                    &c.key_id,
                    &c.endpoint,
                    &c.input_hash,
                    &c.hash_key_id,
                    &c.action,
                    &c.risk,
                    &c.policy_version,
                    &c.findings_json,
                    &c.timings_json,
                    &c.elapsed_us,
                    &c.degraded,
                    &c.judge_json,
                    &c.judge_label,
                    &c.judge_outcome,
                    &c.relational_json,
                ];
                tx.execute(&st.decisions, &params).map_err(&pg)?;
                if !c.f_decision.is_empty() {
                    tx.execute(
                        &st.findings,
                        &[
                            &c.f_decision,
                            &c.f_seq,
                            &c.f_rule,
                            &c.f_category,
                            &c.f_strength,
                            &c.f_layer,
                        ],
                    )
                    .map_err(&pg)?;
                }
            }
            tx.commit().map_err(&pg)?;
            Ok(ids)
        })();
        if result.is_err() && client.is_closed() {
            self.conn = None;
        }
        result
    }

    fn prune_chunk(&mut self, cutoff_ms: i64, chunk: usize) -> Result<usize, AuditError> {
        let location = self.location.clone();
        let pg = AuditError::pg(&location);
        let (client, _) = self.conn()?;
        let mut tx = client.transaction().map_err(&pg)?;
        let limit = i64::try_from(chunk).unwrap_or(i64::MAX);
        let ids: Vec<i64> = tx
            .query(
                "SELECT id FROM decisions WHERE time_ms < $1 ORDER BY time_ms LIMIT $2",
                &[&cutoff_ms, &limit],
            )
            .map_err(&pg)?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()
            .map_err(&pg)?;
        if !ids.is_empty() {
            tx.execute("DELETE FROM findings WHERE decision_id = ANY($1)", &[&ids])
                .map_err(&pg)?;
            tx.execute("DELETE FROM decisions WHERE id = ANY($1)", &[&ids])
                .map_err(&pg)?;
        }
        tx.commit().map_err(&pg)?;
        Ok(ids.len())
    }
}

/// A reader's connection.
pub(crate) struct PgConn {
    client: Client,
    location: String,
}

impl std::fmt::Debug for PgConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConn")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// The bound values of the shared filter SQL, as PostgreSQL parameters.
fn params(values: &[Value]) -> Result<Vec<Box<dyn ToSql + Sync>>, AuditError> {
    values
        .iter()
        .map(|v| -> Result<Box<dyn ToSql + Sync>, AuditError> {
            match v {
                Value::Integer(i) => Ok(Box::new(*i)),
                Value::Text(s) => Ok(Box::new(s.clone())),
                other => Err(AuditError::Filter(format!(
                    "unsupported filter value {other:?}"
                ))),
            }
        })
        .collect()
}

impl PgConn {
    /// Connects and checks the schema's version.
    pub(crate) fn open_reader(cfg: &PostgresConfig) -> Result<Self, AuditError> {
        let location = cfg.location();
        let mut client = connect(cfg)?;
        check_current(&mut client, &location)?;
        Ok(PgConn { client, location })
    }

    fn rows(
        &mut self,
        sql: &str,
        values: &[Value],
        mut each: impl FnMut(&postgres::Row) -> Result<(), AuditError>,
    ) -> Result<(), AuditError> {
        let pg = AuditError::pg(&self.location);
        let boxed = params(values)?;
        let sql = numbered(sql);
        let mut it = self
            .client
            .query_raw(&sql, boxed.iter().map(|b| b.as_ref()))
            .map_err(&pg)?;
        while let Some(r) = it.next().map_err(&pg)? {
            each(&r)?;
        }
        Ok(())
    }

    pub(crate) fn for_each_decision(
        &mut self,
        sql: &str,
        values: &[Value],
        mut each: impl FnMut(DecisionRow) -> Result<(), AuditError>,
    ) -> Result<(), AuditError> {
        let location = self.location.clone();
        let pg = AuditError::pg(&location);
        self.rows(sql, values, |r| {
            let row = (|| -> Result<DecisionRow, postgres::Error> {
                Ok(DecisionRow {
                    id: r.try_get(0)?,
                    time_ms: r.try_get(1)?,
                    request_id: r.try_get(2)?,
                    key_id: r.try_get(3)?,
                    endpoint: r.try_get(4)?,
                    input_hash: r.try_get(5)?,
                    hash_key_id: r.try_get(6)?,
                    action: r.try_get(7)?,
                    risk: r.try_get(8)?,
                    policy_version: r.try_get(9)?,
                    findings_json: r.try_get(10)?,
                    timings_json: r.try_get(11)?,
                    elapsed_us: r.try_get(12)?,
                    degraded: r.try_get(13)?,
                    judge_json: r.try_get(14)?,
                    relational_json: r.try_get(15)?,
                })
            })()
            .map_err(&pg)?;
            each(row)
        })
    }

    pub(crate) fn for_each_governance(
        &mut self,
        sql: &str,
        values: &[Value],
        mut each: impl FnMut(i64, i64, &str, String) -> Result<(), AuditError>,
    ) -> Result<(), AuditError> {
        let location = self.location.clone();
        let pg = AuditError::pg(&location);
        self.rows(sql, values, |r| {
            let seq: i64 = r.try_get(0).map_err(&pg)?;
            let time_ms: i64 = r.try_get(1).map_err(&pg)?;
            let body: &str = r.try_get(2).map_err(&pg)?;
            let hash: String = r.try_get(3).map_err(&pg)?;
            each(seq, time_ms, body, hash)
        })
    }

    pub(crate) fn count(&mut self, sql: &str, values: &[Value]) -> Result<i64, AuditError> {
        let mut n = 0i64;
        let location = self.location.clone();
        let pg = AuditError::pg(&location);
        self.rows(sql, values, |r| {
            n = r.try_get(0).map_err(&pg)?;
            Ok(())
        })?;
        Ok(n)
    }

    /// [`governance::verify`] of this database.
    pub(crate) fn verify(&mut self, key: &ChainKey) -> Result<VerifyReport, AuditError> {
        let location = self.location.clone();
        let pg = AuditError::pg(&location);
        // Present and enabled: a disabled trigger refuses nothing.
        let triggers: i64 = self
            .client
            .query_one(
                "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'governance'::regclass \
                 AND tgname IN ('governance_no_update', 'governance_no_delete') \
                 AND tgenabled <> 'D'",
                &[],
            )
            .and_then(|r| r.try_get(0))
            .map_err(&pg)?;
        let sql = format!("{} ORDER BY seq ASC", governance::SELECT_ROW);
        let mut it = self
            .client
            .query_raw(&sql, std::iter::empty::<&(dyn ToSql + Sync)>())
            .map_err(&pg)?;
        let rows = std::iter::from_fn(|| match it.next() {
            Ok(Some(r)) => Some(pg_governance_row(&r).map_err(&pg)),
            Ok(None) => None,
            Err(e) => Some(Err(pg(e))),
        });
        governance::verify_rows(rows, key, triggers == 2)
    }
}

fn pg_governance_row(r: &postgres::Row) -> Result<(Row, String), postgres::Error> {
    Ok((
        Row {
            seq: r.try_get(0)?,
            time_ms: r.try_get(1)?,
            kind: r.try_get(2)?,
            cols: [
                r.try_get(3)?,
                r.try_get(4)?,
                r.try_get(5)?,
                r.try_get(6)?,
                r.try_get(7)?,
                r.try_get(8)?,
                r.try_get(9)?,
                r.try_get(10)?,
            ],
            body_json: r.try_get(11)?,
            hash_key_id: r.try_get(12)?,
            prev_hash: r.try_get(13)?,
        },
        r.try_get(14)?,
    ))
}
