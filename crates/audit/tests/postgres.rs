//! The PostgreSQL backend against a real server: each ignored test starts its own cluster
//! ([`PgCluster`]: initdb in a temporary directory, a free loopback port) and stops it.
//! `.ci/run` installs Debian's `postgresql` and runs them:
//! `cargo test -p rampart-audit --test tests postgres:: -- --ignored`.
//! The same semantics as the SQLite tests: the same records read back the same (and export
//! byte for byte as from SQLite), the governance chain verifies and names an edited or
//! deleted row, the triggers refuse edits, migrations, two writers make one chain,
//! retention, and an unreachable server errors within the timeout.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use crate::pg_cluster::PgCluster;
use rampart_audit::{
    AuditConfig, AuditError, AuditFilter, AuditJudge, AuditLog, AuditReader, AuditRecord,
    AuditRelational, AuditSource, ExportFormat, GovernanceFilter, GovernanceRecord,
    POSTGRES_SCHEMA_VERSION, PostgresConfig, StoredRecord, prune_source, verify_source,
};
use rampart_core::Action;
use std::time::{Duration, Instant};

fn pg(url: &str) -> PostgresConfig {
    PostgresConfig {
        url: Some(url.to_string()),
        connect_timeout_ms: 5000,
        ..PostgresConfig::default()
    }
}

fn cfg(url: &str) -> AuditConfig {
    AuditConfig::postgres(pg(url))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Records with every kind of field: none, some and repeated findings, no key, a judge, a
/// relational report.
fn records() -> Vec<AuditRecord> {
    let mut recs: Vec<AuditRecord> = (0..12).map(crate::log::rec).collect();
    recs[4].judge = Some(
        serde_json::from_value::<AuditJudge>(serde_json::json!({
            "layer": "judge", "called": true, "triggers": ["deferred"], "outcome": "ok",
            "intent_label": "malicious", "confidence": 0.875,
            "explanation": "asks to reveal [span 0]", "cache": "miss", "model": "m",
            "prompt_id": "p1", "prompt_hash": "ab", "input_tokens": 10, "output_tokens": 3,
            "cost_usd": 0.25, "latency_ms": 42
        }))
        .unwrap(),
    );
    recs[5].relational = Some(
        serde_json::from_value::<AuditRelational>(serde_json::json!({
            "layer": "relational", "backend": "local", "status": "ok", "label": "extractive",
            "balance": -0.5, "exchange": "extractive", "calls": 1, "input_tokens": 2,
            "output_tokens": 3, "cost_usd": 0.0, "elapsed_us": 7
        }))
        .unwrap(),
    );
    recs
}

/// Appends `recs` then `gov` through a fresh log of `cfg`, shuts it down; the ids.
fn write(cfg: AuditConfig, recs: Vec<AuditRecord>, gov: Vec<GovernanceRecord>) -> Vec<i64> {
    let log = AuditLog::open_with_chain_key(cfg, crate::governance::key()).unwrap();
    let w = log.writer();
    let ids = rt().block_on(async move {
        let mut ids = Vec::new();
        for r in recs {
            ids.push(w.append(r).await.unwrap());
        }
        for g in gov {
            ids.push(w.append_governance(g).await.unwrap());
        }
        ids
    });
    log.shutdown().unwrap();
    ids
}

fn request_ids(rs: &[StoredRecord]) -> Vec<String> {
    rs.iter().map(|r| r.record.request_id.clone()).collect()
}

#[test]
#[ignore = "needs PostgreSQL: run by .ci/run"]
fn append_query_export_round_trip_reads_as_sqlite_does() {
    let pgc = PgCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("audit.db");
    let gov = crate::governance::records();
    write(AuditConfig::at(&sqlite), records(), gov.clone());
    write(cfg(&pgc.url), records(), gov);
    let s = AuditReader::open(&sqlite).unwrap();
    let p = AuditReader::open_source(&AuditSource::Postgres(pg(&pgc.url))).unwrap();

    let all = p.query(&AuditFilter::default()).unwrap();
    assert_eq!(all.len(), 12);
    assert_eq!(
        all.iter().map(|r| r.record.clone()).collect::<Vec<_>>(),
        records(),
        "every field reads back as written"
    );
    let filters = [
        AuditFilter::default(),
        AuditFilter {
            rule_id: Some("CTRL_001".into()),
            ..AuditFilter::default()
        },
        AuditFilter {
            action: Some(Action::Block),
            key_id: Some("key-2".into()),
            ..AuditFilter::default()
        },
        AuditFilter {
            since_ms: Some(all[3].record.time_ms),
            until_ms: Some(all[9].record.time_ms),
            endpoint: Some("scan".into()),
            limit: Some(2),
            newest_first: true,
            ..AuditFilter::default()
        },
        AuditFilter {
            intent_label: Some(rampart_judge::IntentLabel::Malicious),
            judge_outcome: Some(rampart_llm::OutcomeKind::Ok),
            ..AuditFilter::default()
        },
        AuditFilter {
            request_id: Some("req-7".into()),
            ..AuditFilter::default()
        },
    ];
    for f in &filters {
        let (a, b) = (s.query(f).unwrap(), p.query(f).unwrap());
        assert_eq!(request_ids(&a), request_ids(&b), "{f:?}");
        assert_eq!(s.count(f).unwrap(), p.count(f).unwrap(), "{f:?}");
    }
    assert_eq!(request_ids(&p.query(&filters[4]).unwrap()), ["req-4"]);
    // Both backends number from 1: the exports are byte for byte the same.
    for format in [ExportFormat::Csv, ExportFormat::Jsonl] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        s.export(&AuditFilter::default(), format, &mut a).unwrap();
        p.export(&AuditFilter::default(), format, &mut b).unwrap();
        assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
    }
    let gf = GovernanceFilter::default();
    assert_eq!(
        s.query_governance(&gf).unwrap(),
        p.query_governance(&gf).unwrap(),
        "the same rows with the same chain hashes"
    );
    let tools = GovernanceFilter {
        tool: Some("delete_file".into()),
        newest_first: true,
        ..GovernanceFilter::default()
    };
    assert_eq!(
        s.query_governance(&tools).unwrap(),
        p.query_governance(&tools).unwrap()
    );
    let report = verify_source(
        &AuditSource::Postgres(pg(&pgc.url)),
        &crate::governance::key(),
    )
    .unwrap();
    assert!(report.ok && report.triggers_present, "{report:?}");
    assert_eq!(report.rows, 7);
}

#[test]
#[ignore = "needs PostgreSQL: run by .ci/run"]
fn the_chain_refuses_edits_and_verify_names_an_edited_or_deleted_row() {
    let pgc = PgCluster::start();
    write(cfg(&pgc.url), vec![], crate::governance::records());
    let src = AuditSource::Postgres(pg(&pgc.url));
    let key = crate::governance::key();
    assert!(verify_source(&src, &key).unwrap().ok);
    // The triggers refuse UPDATE, DELETE and TRUNCATE, even to the superuser.
    for sql in [
        "UPDATE governance SET tool = 'x' WHERE seq = 3",
        "DELETE FROM governance WHERE seq = 7",
        "TRUNCATE governance",
    ] {
        let e = pgc.psql_err("postgres", sql).unwrap_err();
        assert!(e.contains("append-only"), "{sql}: {e}");
    }
    // Someone who can alter the table disables the trigger and edits a row.
    pgc.psql(
        "postgres",
        "ALTER TABLE governance DISABLE TRIGGER governance_no_update",
    );
    let r = verify_source(&src, &key).unwrap();
    assert!(
        r.ok && !r.triggers_present,
        "a disabled trigger is reported: {r:?}"
    );
    pgc.psql(
        "postgres",
        "UPDATE governance SET tool = 'read_file' WHERE seq = 3; \
         ALTER TABLE governance ENABLE TRIGGER governance_no_update",
    );
    let r = verify_source(&src, &key).unwrap();
    assert!(!r.ok && r.triggers_present, "{r:?}");
    let (seq, why) = r.first_bad.unwrap();
    assert_eq!(seq, 3);
    assert!(why.contains("edited"), "{why}");
    // A deleted row: the next one names the gap.
    pgc.psql(
        "postgres",
        "ALTER TABLE governance DISABLE TRIGGER governance_no_delete; \
         DELETE FROM governance WHERE seq = 2; \
         ALTER TABLE governance ENABLE TRIGGER governance_no_delete",
    );
    let r = verify_source(&src, &key).unwrap();
    assert_eq!(r.first_bad.as_ref().map(|b| b.0), Some(3), "{r:?}");
    assert!(
        r.first_bad
            .unwrap()
            .1
            .contains("row 2 before it is missing")
    );
    // Another key: refused at open, as with SQLite.
    let e = AuditLog::open_with_chain_key(cfg(&pgc.url), rampart_audit::ChainKey::public())
        .unwrap_err();
    assert!(matches!(e, AuditError::ChainKey { .. }), "{e}");
}

#[test]
#[ignore = "needs PostgreSQL: run by .ci/run"]
fn migrations_run_once_and_newer_or_foreign_schemas_are_refused() {
    let pgc = PgCluster::start();
    let src = AuditSource::Postgres(pg(&pgc.url));
    // Nothing there yet: a reader says the service creates it.
    let e = AuditReader::open_source(&src).unwrap_err();
    assert!(e.to_string().contains("no Rampart audit schema"), "{e}");
    write(cfg(&pgc.url), vec![crate::log::rec(1)], vec![]);
    write(cfg(&pgc.url), vec![crate::log::rec(2)], vec![]);
    assert_eq!(
        pgc.psql(
            "postgres",
            "SELECT string_agg(version::text, ',') FROM rampart_audit_schema"
        ),
        POSTGRES_SCHEMA_VERSION.to_string(),
        "applied once"
    );
    assert_eq!(
        AuditReader::open_source(&src)
            .unwrap()
            .count(&AuditFilter::default())
            .unwrap(),
        2
    );
    // Two writers opening an empty database at once migrate it once.
    pgc.psql("postgres", "CREATE DATABASE twice");
    let url = pgc.url_for("twice");
    let opens: Vec<_> = (0..2)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || AuditLog::open(cfg(&url)).map(|l| l.shutdown()))
        })
        .collect();
    for o in opens {
        o.join().unwrap().unwrap().unwrap();
    }
    assert_eq!(
        pgc.psql("twice", "SELECT count(*) FROM rampart_audit_schema"),
        POSTGRES_SCHEMA_VERSION.to_string()
    );
    // A newer schema (a later release wrote it) is refused by the writer and the readers.
    pgc.psql(
        "postgres",
        "INSERT INTO rampart_audit_schema (version, applied_ms) VALUES (99, 0)",
    );
    let e = AuditLog::open(cfg(&pgc.url)).unwrap_err();
    assert!(
        e.to_string()
            .contains("schema version 99 is newer than this build supports"),
        "{e}"
    );
    let e = AuditReader::open_source(&src).unwrap_err();
    assert!(e.to_string().contains("newer"), "{e}");
    // Someone else's tables: refused, not written to.
    pgc.psql("postgres", "CREATE DATABASE other");
    pgc.psql("other", "CREATE TABLE decisions (id integer)");
    let e = AuditLog::open(cfg(&pgc.url_for("other"))).unwrap_err();
    assert!(
        e.to_string().contains("not a Rampart audit database"),
        "{e}"
    );
}

#[test]
#[ignore = "needs PostgreSQL: run by .ci/run"]
fn two_writers_on_one_database_make_one_chain() {
    let pgc = PgCluster::start();
    // Two logs = two connections, as two replicas have; they append at the same time.
    let logs: Vec<AuditLog> = (0..2)
        .map(|_| AuditLog::open_with_chain_key(cfg(&pgc.url), crate::governance::key()).unwrap())
        .collect();
    let rt = rt();
    let per_writer = 150;
    rt.block_on(async {
        let mut tasks = Vec::new();
        for (w, log) in logs.iter().enumerate() {
            for t in 0..4 {
                let writer = log.writer();
                tasks.push(tokio::spawn(async move {
                    let gov = crate::governance::records();
                    for i in 0..per_writer / 4 {
                        let mut g = gov[i % gov.len()].clone();
                        g.time_ms += (w * 1000 + t * 100 + i) as i64;
                        writer.append_governance(g).await.unwrap();
                        let mut d = crate::log::rec(i as i64);
                        d.request_id = format!("w{w}-t{t}-{i}");
                        writer.append(d).await.unwrap();
                    }
                }));
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let batches: u64 = logs.iter().map(|l| l.stats().batches).sum();
    for l in logs {
        l.shutdown().unwrap();
    }
    let n = 2 * 4 * (per_writer / 4) as u64;
    let r = verify_source(
        &AuditSource::Postgres(pg(&pgc.url)),
        &crate::governance::key(),
    )
    .unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.rows, n);
    assert_eq!(r.head.as_ref().map(|h| h.0), Some(n as i64));
    let reader = AuditReader::open_source(&AuditSource::Postgres(pg(&pgc.url))).unwrap();
    assert_eq!(reader.count(&AuditFilter::default()).unwrap(), n);
    eprintln!("{n} governance rows and {n} decisions from two writers in {batches} transactions");
}

#[test]
#[ignore = "needs PostgreSQL: run by .ci/run"]
fn retention_and_prune_delete_old_decisions_never_governance_rows() {
    let pgc = PgCluster::start();
    let now = rampart_audit::now_ms();
    let mut old = crate::log::rec(1);
    old.time_ms = now - 10 * 86_400_000;
    let mut older = crate::log::rec(2);
    older.time_ms = now - 40 * 86_400_000;
    let mut fresh = crate::log::rec(5);
    fresh.time_ms = now;
    write(
        cfg(&pgc.url),
        vec![older, old, fresh],
        crate::governance::records(),
    );
    let src = AuditSource::Postgres(pg(&pgc.url));
    // On demand.
    assert_eq!(prune_source(&src, now - 20 * 86_400_000).unwrap(), 1);
    // At open, with retention_days.
    let mut c = cfg(&pgc.url);
    c.retention_days = Some(5);
    let log = AuditLog::open_with_chain_key(c, crate::governance::key()).unwrap();
    assert_eq!(log.stats().pruned, 1);
    log.shutdown().unwrap();
    let reader = AuditReader::open_source(&src).unwrap();
    assert_eq!(
        request_ids(&reader.query(&AuditFilter::default()).unwrap()),
        ["req-5"]
    );
    assert_eq!(
        pgc.psql("postgres", "SELECT count(*) FROM findings"),
        "3",
        "the findings of pruned decisions go with them"
    );
    let r = verify_source(&src, &crate::governance::key()).unwrap();
    assert!(r.ok && r.rows == 7, "{r:?}");
}

/// Needs no server: a closed port is refused at once, and a server that accepts the TCP
/// connection but never answers is given up after `connect_timeout_ms`.
#[test]
fn an_unreachable_server_is_an_error_within_the_timeout() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    for port in [closed, silent_port] {
        let mut c = pg(&format!("postgres://rampart@127.0.0.1:{port}/postgres"));
        c.connect_timeout_ms = 700;
        let started = Instant::now();
        let e = AuditLog::open(AuditConfig::postgres(c.clone())).unwrap_err();
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert!(e.to_string().starts_with("audit log postgres"), "{e}");
        if port == silent_port {
            assert!(matches!(e, AuditError::ConnectTimeout { .. }), "{e}");
            assert!(e.to_string().contains("within 700 ms"), "{e}");
        }
        let e = AuditReader::open_source(&AuditSource::Postgres(c)).unwrap_err();
        assert!(e.to_string().contains("postgres"), "{e}");
    }
    // No URL: named, not guessed.
    let c = PostgresConfig::from_env_var("RAMPART_TEST_UNSET_PG_URL_VAR");
    let e = AuditLog::open(AuditConfig::postgres(c)).unwrap_err();
    assert!(
        e.to_string()
            .contains("RAMPART_TEST_UNSET_PG_URL_VAR, which is not set"),
        "{e}"
    );
    drop(silent);
}

#[test]
fn the_postgres_section_parses_and_rejects_unknown_keys_and_passwords_in_the_file() {
    let c: AuditConfig = toml::from_str(
        "backend = \"postgres\"\n[postgres]\nurl_env = \"PG_URL\"\nconnect_timeout_ms = 250\n",
    )
    .unwrap();
    assert_eq!(c.backend, rampart_audit::AuditBackend::Postgres);
    let p = c.postgres.as_ref().unwrap();
    assert_eq!(
        (
            p.url_env.as_str(),
            p.connect_timeout_ms,
            p.statement_timeout_ms
        ),
        ("PG_URL", 250, 10_000)
    );
    assert_eq!(c.location(), "postgres ($PG_URL)");
    // The URL (and its password) is never read from the file.
    let e = toml::from_str::<AuditConfig>(
        "backend = \"postgres\"\n[postgres]\nurl = \"postgres://u:secret@h/db\"\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown field"), "{e}");
    assert!(toml::from_str::<AuditConfig>("backend = \"mysql\"\n").is_err());
    let e = toml::from_str::<AuditConfig>("[postgres]\nurl_env = \"X\"\n").unwrap_err();
    assert!(e.to_string().contains("only applies with backend"), "{e}");
    // The default stays SQLite.
    let d: AuditConfig = toml::from_str("").unwrap();
    assert_eq!(d.backend, rampart_audit::AuditBackend::Sqlite);
    assert!(d.postgres.is_none());
}

#[test]
#[ignore = "needs PostgreSQL: run by .ci/run"]
fn a_deferred_explanation_updates_its_decisions_row() {
    let pgc = PgCluster::start();
    crate::log::check_explanations_update_their_rows(
        cfg(&pgc.url),
        &AuditSource::Postgres(pg(&pgc.url)),
    );
}
