//! kill -9 while appending: every acknowledged record is in the log afterwards.
//!
//! The test binary re-runs itself as the child (`crash_child`, enabled by an environment
//! variable): it appends records from several tasks and prints `ACK <request id>` once each
//! `append` has resolved. The parent SIGKILLs it mid-load and checks the database.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use rampart_audit::{AuditConfig, AuditFilter, AuditLog, AuditReader, AuditRecord};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DB_ENV: &str = "RAMPART_AUDIT_CRASH_CHILD_DB";
const ACKS_BEFORE_KILL: usize = 400;

fn record(request_id: String) -> AuditRecord {
    AuditRecord {
        time_ms: rampart_audit::now_ms(),
        request_id,
        key_id: Some("crash".into()),
        endpoint: "scan".into(),
        input_hash: "00".repeat(32),
        hash_key_id: "hk".into(),
        action: rampart_core::Action::Block,
        risk: rampart_core::RiskClass::HighRisk,
        policy_version: "1".into(),
        findings: vec![rampart_audit::AuditFinding {
            rule_id: "CTRL_001".into(),
            category: "control_phrase".into(),
            strength: rampart_core::Strength::Strong,
            layer: "rules".into(),
        }],
        layer_timings_us: BTreeMap::from([("rules".into(), 5)]),
        elapsed_us: 6,
        degraded: false,
        judge: None,
        relational: None,
    }
}

/// The child: appends until killed (or 60 s, so that it never outlives a failed parent).
/// Run only by [`kill_9_loses_no_acknowledged_record`], with the log's path in [`DB_ENV`].
#[test]
#[ignore = "the child process of kill_9_loses_no_acknowledged_record, which runs it"]
fn crash_child() {
    let db = std::env::var_os(DB_ENV).expect("run by kill_9_loses_no_acknowledged_record");
    let log = AuditLog::open(AuditConfig::at(db)).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut tasks = Vec::new();
        for t in 0..8 {
            let w = log.writer();
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let id = format!("t{t}-{n}");
                    w.append(record(id.clone())).await.unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ACK {id}").unwrap();
                    out.flush().unwrap();
                    n += 1;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

#[test]
fn kill_9_loses_no_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            // Test names are relative to the test binary's root: `crash::crash_child`.
            &module_test_name("crash_child"),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DB_ENV, &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut acked: Vec<String> = Vec::new();
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut killed = false;
    loop {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break; // EOF: the child is gone.
        }
        // Only complete lines: a partial one was cut by the kill mid-write.
        if let Some(id) = line.strip_prefix("ACK ").and_then(|l| l.strip_suffix('\n')) {
            acked.push(id.to_string());
        }
        if !killed && (acked.len() >= ACKS_BEFORE_KILL || Instant::now() > deadline) {
            child.kill().unwrap(); // SIGKILL
            killed = true;
        }
    }
    let status = child.wait().unwrap();
    assert!(killed, "the child exited on its own: {status:?}");
    assert!(
        acked.len() >= ACKS_BEFORE_KILL,
        "only {} acks before the deadline",
        acked.len()
    );

    // A reader recovers the WAL left by the killed writer.
    let reader = AuditReader::open(&db).unwrap();
    let stored: HashSet<String> = reader
        .query(&AuditFilter::default())
        .unwrap()
        .into_iter()
        .map(|r| r.record.request_id)
        .collect();
    let missing: Vec<&String> = acked.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged records lost: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert!(stored.len() >= acked.len());
    // Every stored record is complete (its findings row is there too).
    let f = AuditFilter {
        rule_id: Some("CTRL_001".into()),
        ..AuditFilter::default()
    };
    assert_eq!(reader.count(&f).unwrap() as usize, stored.len());

    // And the writer reopens it and goes on.
    let log = AuditLog::open(AuditConfig::at(&db)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(log.writer().append(record("after".into())))
        .unwrap();
    log.shutdown().unwrap();
    assert_eq!(
        reader.count(&AuditFilter::default()).unwrap() as usize,
        stored.len() + 1
    );
    eprintln!(
        "acknowledged {}, stored {} at the kill",
        acked.len(),
        stored.len()
    );
}

/// The name libtest gives test `f` of this module (`module::f`), for `--exact`.
fn module_test_name(f: &str) -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    format!("{module}::{f}")
}
