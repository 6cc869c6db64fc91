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

/// One raw HTTP/1.1 request to a running `rampart serve`: (status, body).
fn http(addr: &str, method: &str, path: &str, key: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    // Chunked answers: the JSON object is between the first `{` and the last `}`.
    let body = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) if a <= b => body[a..=b].to_string(),
        _ => body,
    };
    (status, body)
}

/// Issue 35 (4), end to end: the agent's key gets CONFIRM and a pending approval; `rampart
/// approvals` lists it for the approver's key and approves it; the token then redeems once.
/// The agent's own key cannot approve.
#[test]
fn approvals_list_and_approve_a_pending_call_on_a_running_service() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sha = |k: &str| rampart_server::config::hash_api_key(k);
    std::fs::write(
        dir.path().join("server.toml"),
        format!(
            "version = 1\n[pipeline]\npath = {:?}\n[tools]\npolicy = {:?}\n\
             [[auth.keys]]\nid = \"agent\"\nsha256 = \"{}\"\n\
             [[auth.keys]]\nid = \"human\"\nsha256 = \"{}\"\napprover = true\n",
            root.join("configs/rules.toml").display().to_string(),
            root.join("policies/coding_agent.toml")
                .display()
                .to_string(),
            sha("agent-key"),
            sha("human-key"),
        ),
    )
    .unwrap();
    let (mut child, addr) = crate::common::serve(
        &dir.path().join("server.toml"),
        std::process::Stdio::null(),
        "off",
    );
    let call = r#"{"tool":"delete_file","arguments":{"path":"/workspace/old.txt"},"conversation_id":"c1"}"#;
    let (st, body) = http(&addr, "POST", "/v1/tools/check", "agent-key", call);
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["action"], "CONFIRM", "{v}");
    let id = v["approval"]["id"].as_str().unwrap().to_string();
    let token = v["approval"]["token"].as_str().unwrap().to_string();
    let server = format!("http://{addr}");
    let approvals = |args: &[&str], key: &str| {
        Command::new(env!("CARGO_BIN_EXE_rampart"))
            .arg("approvals")
            .args(args)
            .args(["--server", &server])
            .env("RAMPART_APPROVER_KEY", key)
            .output()
            .unwrap()
    };
    let o = approvals(&["list"], "human-key");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let listed = text(&o);
    assert!(
        listed.contains(&id) && listed.contains("pending tool=delete_file requested_by=agent"),
        "{listed}"
    );
    assert!(
        listed.contains("/workspace/old.txt"),
        "approvers see the arguments: {listed}"
    );
    let o = approvals(&["approve", &id], "agent-key");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("HTTP 403"), "{}", text(&o));
    let resubmit = call.replacen('{', &format!("{{\"approval_token\":{token:?},"), 1);
    let (_, body) = http(&addr, "POST", "/v1/tools/check", "agent-key", &resubmit);
    assert!(body.contains("\"CONFIRM\""), "not approved yet: {body}");
    let o = approvals(&["approve", &id], "human-key");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("approved by human"), "{}", text(&o));
    let (_, body) = http(&addr, "POST", "/v1/tools/check", "agent-key", &resubmit);
    assert!(body.contains("\"ALLOW\""), "{body}");
    let o = approvals(&["list"], "human-key");
    assert!(text(&o).contains("no approvals pending"), "{}", text(&o));
    child.kill().unwrap();
    let _ = child.wait();
}
