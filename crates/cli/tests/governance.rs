//! `rampart audit verify` and `rampart breakglass` end to end (exit codes, messages).

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use rampart_audit::{
    AuditConfig, AuditLog, BreakGlassEndEvent, ChainKey, GovernanceEvent, GovernanceRecord,
};
use std::process::{Command, Output};

fn rampart(args: &[&str], key: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rampart"));
    c.args(args).env_remove("RAMPART_ADMIN_KEY");
    match key {
        Some(k) => c.env("RAMPART_HASH_KEY", k),
        None => c.env_remove("RAMPART_HASH_KEY"),
    };
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn chain(path: &std::path::Path, material: &str, n: i64) {
    let log =
        AuditLog::open_with_chain_key(AuditConfig::at(path), ChainKey::from_material(material))
            .unwrap();
    let w = log.writer();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for i in 0..n {
        rt.block_on(w.append_governance(GovernanceRecord::new(
            1_795_496_400_000 + i,
            GovernanceEvent::BreakglassExpired(BreakGlassEndEvent {
                breakglass_id: format!("bg_{i}"),
                by: None,
            }),
        )))
        .unwrap();
    }
    log.shutdown().unwrap();
}

#[test]
fn audit_verify_exits_1_naming_the_first_deleted_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    chain(&path, "the key", 5);
    let db = path.to_str().unwrap();
    let o = rampart(&["audit", "verify", "--db", db], Some("the key"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("ok: 5 governance rows verified"),
        "{}",
        text(&o)
    );

    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch("DROP TRIGGER governance_no_delete; DELETE FROM governance WHERE seq = 2;")
        .unwrap();
    drop(c);
    let o = rampart(&["audit", "verify", "--db", db], Some("the key"));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("BROKEN: governance row 3: row 2 before it is missing (deleted)"),
        "{}",
        text(&o)
    );
    // Without the key: every row is foreign.
    let o = rampart(&["audit", "verify", "--db", db], None);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("row 1: chained with key id"),
        "{}",
        text(&o)
    );
}

#[test]
fn breakglass_without_a_server_fails_clearly() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("http://127.0.0.1:{port}");
    let mut c = Command::new(env!("CARGO_BIN_EXE_rampart"));
    let o = c
        .args(["breakglass", "list", "--server", &server])
        .env("RAMPART_ADMIN_KEY", "admin-key")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("cannot reach the service at"),
        "{}",
        text(&o)
    );
    let o = rampart(
        &[
            "breakglass",
            "grant",
            "--tool",
            "x",
            "--ttl",
            "1h",
            "--reason",
            "r",
            "--incident",
            "i",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("$RAMPART_ADMIN_KEY is not set"),
        "{}",
        text(&o)
    );
}
