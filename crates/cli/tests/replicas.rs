//! Two `rampart serve` replicas on one real `redis-server` (`[state] backend = "redis"`):
//! approvals, break-glass grants, rate limits and failed-login limits hold across them; and,
//! with `[audit] backend = "postgres"` on one real PostgreSQL, their audit (decisions and
//! governance rows) verifies as one chain.
//! Ignored by default (they need `redis-server` and PostgreSQL); `.ci/run` installs both
//! and runs them: `cargo test -p rampart-cli --test tests replicas:: -- --ignored`.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const AGENT_KEY: &str = "agent-secret-key";
const ADMIN_KEY: &str = "admin-secret-key";
const APPROVAL_KEY: &str = "5a1e0b7c3d9f2e4a6b8c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a";

const POLICY: &str = r#"
version = 1
default = "block"
[[tools]]
name = "delete_file"
risk = "high"
action = "confirm"
[[tools]]
name = "transfer_funds"
risk = "critical"
action = "block"
"#;

/// A `redis-server` on a free loopback port, stopped on drop.
pub(crate) use crate::redis_server::RedisServer as Redis;

/// One `rampart serve` replica, killed on drop.
pub(crate) struct Replica {
    pub(crate) child: Child,
    pub(crate) base: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn sha256_hex(key: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["serve", "hash-key"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(key.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// The configuration every replica reads: the rules-only pipeline, the policy, two keys
/// (the agent's limited to `rate` requests a second with a burst of `burst`), at most
/// three failed logins per address a minute, and the state in Redis.
fn write_config(dir: &Path, rate: f64, burst: u32) -> std::path::PathBuf {
    std::fs::write(dir.join("policy.toml"), POLICY).unwrap();
    let rules = format!("{}/../../configs/rules.toml", env!("CARGO_MANIFEST_DIR"));
    let src = format!(
        "version = 1\n[pipeline]\npath = {rules:?}\n\
         [auth]\nmax_failures = 3\nfailure_window_ms = 60000\n\
         [[auth.keys]]\nid = \"agent\"\nsha256 = \"{}\"\nrate_per_s = {rate}\nburst = {burst}\n\
         [[auth.keys]]\nid = \"ops\"\nsha256 = \"{}\"\nadmin = true\nrate_per_s = 1000.0\nburst = 1000\n\
         [tools]\npolicy = \"policy.toml\"\napproval_key_env = \"RAMPART_TEST_APPROVAL_KEY\"\n\
         [state]\nbackend = \"redis\"\n[state.redis]\nurl_env = \"RAMPART_TEST_REDIS_URL\"\n",
        sha256_hex(AGENT_KEY),
        sha256_hex(ADMIN_KEY),
    );
    let p = dir.join("serve.toml");
    std::fs::write(&p, src).unwrap();
    p
}

fn replica(config: &Path, redis: &Redis) -> Replica {
    replica_with(config, redis, &[])
}

/// A replica with extra environment variables.
fn replica_with(config: &Path, redis: &Redis, env: &[(&str, &str)]) -> Replica {
    let mut all = vec![
        ("RAMPART_TEST_REDIS_URL", redis.url.as_str()),
        ("RAMPART_TEST_APPROVAL_KEY", APPROVAL_KEY),
    ];
    all.extend_from_slice(env);
    let (child, addr) = spawn_serve(config, &all);
    Replica {
        child,
        base: format!("http://{addr}"),
    }
}

/// `rampart serve --config CONFIG` on a free loopback port with `env` set; the child and
/// its address.
pub(crate) fn spawn_serve(config: &Path, env: &[(&str, &str)]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .env_remove("RAMPART_CONFIG")
        .env_remove("RAMPART_LISTEN")
        .env_remove("RAMPART_AUDIT_PATH")
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rampart serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, addr)
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

/// `method path` with `key`; the status and the JSON body.
pub(crate) fn call(
    r: &Replica,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let url = format!("{}{path}", r.base);
    let auth = format!("Bearer {key}");
    let a = agent();
    let resp = match (method, body) {
        ("POST", b) => a
            .post(&url)
            .header("authorization", &auth)
            .header("content-type", "application/json")
            .send(b.map(Value::to_string).unwrap_or_default().as_bytes()),
        ("DELETE", _) => a.delete(&url).header("authorization", &auth).call(),
        _ => a.get(&url).header("authorization", &auth).call(),
    }
    .unwrap();
    let status = resp.status().as_u16();
    let text = resp.into_body().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn check(r: &Replica, call_body: &Value) -> Value {
    let (st, v) = call(r, "POST", "/v1/tools/check", AGENT_KEY, Some(call_body));
    assert_eq!(st, 200, "{v}");
    v
}

fn delete_call(token: Option<&str>) -> Value {
    let mut c = json!({"id": "c1", "tool": "delete_file", "arguments": {"path": "/srv/a.md"},
                       "conversation_id": "conv-1"});
    if let Some(t) = token {
        c["approval_token"] = json!(t);
    }
    c
}

fn setup(rate: f64, burst: u32) -> (Redis, tempfile::TempDir, Replica, Replica) {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), rate, burst);
    let a = replica(&cfg, &redis);
    let b = replica(&cfg, &redis);
    (redis, dir, a, b)
}

#[test]
#[ignore = "needs redis-server: run by .ci/run"]
fn a_token_approved_and_redeemed_on_one_replica_is_refused_on_the_other() {
    let (_redis, _dir, a, b) = setup(1000.0, 1000);
    // Issued on A, listed and approved on B (the approver talks to any replica).
    let v = check(&a, &delete_call(None));
    assert_eq!(v["action"], "CONFIRM", "{v}");
    let token = v["approval"]["token"].as_str().unwrap().to_string();
    let id = v["approval"]["id"].as_str().unwrap().to_string();
    let (st, list) = call(&b, "GET", "/admin/approvals", ADMIN_KEY, None);
    assert_eq!(st, 200, "{list}");
    assert!(
        list["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == json!(id)),
        "{list}"
    );
    // Nobody approves their own call, on either replica.
    let (st, _) = call(
        &b,
        "POST",
        &format!("/admin/approvals/{id}/approve"),
        AGENT_KEY,
        Some(&json!({})),
    );
    assert_eq!(st, 403);
    let (st, v) = call(
        &b,
        "POST",
        &format!("/admin/approvals/{id}/approve"),
        ADMIN_KEY,
        Some(&json!({})),
    );
    assert_eq!(st, 200, "{v}");
    // Redeemed on A ...
    let v = check(&a, &delete_call(Some(&token)));
    assert_eq!(v["action"], "ALLOW", "{v}");
    // ... refused on B, and on A again.
    for r in [&b, &a] {
        let v = check(r, &delete_call(Some(&token)));
        assert_ne!(v["action"], "ALLOW", "{v}");
        assert!(
            v["approval_error"]
                .as_str()
                .is_some_and(|m| m.contains("already used")),
            "{v}"
        );
    }
}

#[test]
#[ignore = "needs redis-server: run by .ci/run"]
fn a_break_glass_grant_made_on_one_replica_applies_on_both_and_expires_on_both() {
    let (_redis, _dir, a, b) = setup(1000.0, 1000);
    let pay = json!({"id": "p1", "tool": "transfer_funds", "arguments": {"amount": 5},
                     "conversation_id": "conv-1"});
    assert_eq!(check(&b, &pay)["action"], "BLOCK");
    let grant = json!({"tools": ["transfer_funds"], "conversation": "conv-1", "ttl_seconds": 2,
                       "reason": "payroll run stuck", "incident": "INC-1"});
    let (st, g) = call(&a, "POST", "/admin/breakglass", ADMIN_KEY, Some(&grant));
    assert_eq!(st, 201, "{g}");
    let expires = g["expires_ms"].as_u64().unwrap();
    for r in [&a, &b] {
        let v = check(r, &pay);
        assert_eq!(v["action"], "ALLOW", "{v}");
        assert_eq!(v["breakglass_id"], g["id"], "{v}");
    }
    let (_, list) = call(&b, "GET", "/admin/breakglass", ADMIN_KEY, None);
    assert_eq!(list["grants"].as_array().unwrap().len(), 1, "{list}");
    while u64::try_from(rampart_audit::now_ms()).unwrap() <= expires + 50 {
        std::thread::sleep(Duration::from_millis(50));
    }
    for r in [&a, &b] {
        assert_eq!(
            check(r, &pay)["action"],
            "BLOCK",
            "expired on every replica"
        );
    }
    // Revoked on B: gone on A.
    let (_, g2) = call(
        &b,
        "POST",
        "/admin/breakglass",
        ADMIN_KEY,
        Some(&json!({
        "tools": ["transfer_funds"], "ttl_seconds": 60, "reason": "r", "incident": "INC-2"})),
    );
    assert_eq!(check(&a, &pay)["action"], "ALLOW");
    let id = g2["id"].as_str().unwrap();
    let (st, _) = call(
        &b,
        "DELETE",
        &format!("/admin/breakglass/{id}"),
        ADMIN_KEY,
        None,
    );
    assert_eq!(st, 200);
    assert_eq!(check(&a, &pay)["action"], "BLOCK");
}

#[test]
#[ignore = "needs redis-server: run by .ci/run"]
fn rate_limits_and_failed_logins_count_across_both_replicas() {
    // A burst of 4 and a slow refill: four requests in all pass, whichever replica.
    let (_redis, _dir, a, b) = setup(0.01, 4);
    let body = json!({"text": "hello"});
    let statuses: Vec<u16> = [&a, &b, &a, &b, &a, &b]
        .iter()
        .map(|r| call(r, "POST", "/v1/scan", AGENT_KEY, Some(&body)).0)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429]);
    // Three failed logins a minute per address, counted on both.
    for r in [&a, &b, &a] {
        assert_eq!(call(r, "POST", "/v1/scan", "wrong-key", Some(&body)).0, 401);
    }
    let (st, v) = call(&b, "POST", "/v1/scan", "wrong-key", Some(&body));
    assert_eq!(st, 429, "{v}");
    // Even the right key from that address waits now.
    assert_eq!(call(&a, "POST", "/v1/scan", ADMIN_KEY, Some(&body)).0, 429);
}

#[test]
#[ignore = "needs redis-server: run by .ci/run"]
fn without_redis_decisions_that_need_it_are_refused_and_readiness_says_so() {
    let (redis, _dir, a, _b) = setup(1000.0, 1000);
    let (st, v) = call(&a, "GET", "/readyz", ADMIN_KEY, None);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["state"], "redis: ok", "{v}");
    drop(redis);
    let (st, v) = call(&a, "GET", "/readyz", ADMIN_KEY, None);
    assert_eq!(st, 503, "{v}");
    assert!(v["state"].as_str().unwrap().contains("unavailable"), "{v}");
    // Rate limits cannot be counted: refused (503), not let through.
    let (st, v) = call(
        &a,
        "POST",
        "/v1/scan",
        AGENT_KEY,
        Some(&json!({"text": "hello"})),
    );
    assert_eq!(st, 503, "{v}");
}

/// The environment variable of the PostgreSQL URL in the replicas' `[audit.postgres]`.
const AUDIT_PG_ENV: &str = "RAMPART_TEST_AUDIT_PG_URL";
/// The chain key material both replicas (and `rampart audit verify`) read.
const HASH_KEY: &str = "replicas-test-hash-key-material";

/// `rampart audit ARGS` against the PostgreSQL of `url`: exit code and stdout.
fn audit_cmd(url: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rampart"))
        .arg("audit")
        .args(args)
        .args(["--postgres-url-env", AUDIT_PG_ENV])
        .env(AUDIT_PG_ENV, url)
        .env("RAMPART_HASH_KEY", HASH_KEY)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
#[ignore = "needs redis-server and PostgreSQL: run by .ci/run"]
fn both_replicas_audit_to_one_postgres_and_the_chain_verifies_as_one() {
    let redis = Redis::start();
    let pg = crate::pg_cluster::PgCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), 1000.0, 1000);
    let mut src = std::fs::read_to_string(&cfg).unwrap();
    src.push_str(&format!(
        "[audit]\nbackend = \"postgres\"\n[audit.postgres]\nurl_env = \"{AUDIT_PG_ENV}\"\n"
    ));
    std::fs::write(&cfg, src).unwrap();
    let env = [
        (AUDIT_PG_ENV, pg.url.as_str()),
        ("RAMPART_HASH_KEY", HASH_KEY),
    ];
    let a = replica_with(&cfg, &redis, &env);
    let b = replica_with(&cfg, &redis, &env);
    // An approval issued on A, approved on B, redeemed on A; a break-glass grant made on B
    // and used on A: governance rows from both replicas.
    let v = check(&a, &delete_call(None));
    assert_eq!(v["action"], "CONFIRM", "{v}");
    let token = v["approval"]["token"].as_str().unwrap().to_string();
    let id = v["approval"]["id"].as_str().unwrap().to_string();
    let (st, v) = call(
        &b,
        "POST",
        &format!("/admin/approvals/{id}/approve"),
        ADMIN_KEY,
        Some(&json!({})),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(check(&a, &delete_call(Some(&token)))["action"], "ALLOW");
    let grant = json!({"tools": ["transfer_funds"], "ttl_seconds": 60, "reason": "r",
                       "incident": "INC-9"});
    let (st, g) = call(&b, "POST", "/admin/breakglass", ADMIN_KEY, Some(&grant));
    assert_eq!(st, 201, "{g}");
    let pay = json!({"id": "p1", "tool": "transfer_funds", "arguments": {"amount": 5}});
    assert_eq!(check(&a, &pay)["action"], "ALLOW");
    // Then both replicas at once: tool decisions (governance rows, chained across the two
    // processes) and scans (decisions) from four threads.
    let per_thread = 15;
    std::thread::scope(|s| {
        for (t, r) in [&a, &b, &a, &b].into_iter().enumerate() {
            s.spawn(move || {
                for i in 0..per_thread {
                    let c = json!({"id": format!("c{t}-{i}"), "tool": "transfer_funds",
                                   "arguments": {"amount": i}});
                    assert_eq!(check(r, &c)["action"], "ALLOW");
                    let (st, v) = call(
                        r,
                        "POST",
                        "/v1/scan",
                        AGENT_KEY,
                        Some(&json!({"text": format!("hello {t} {i}")})),
                    );
                    assert_eq!(st, 200, "{v}");
                }
            });
        }
    });
    drop(a);
    drop(b);
    // One chain, verified by the CLI with the replicas' key.
    let (code, out) = audit_cmd(&pg.url, &["verify", "--json"]);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["triggers_present"], true, "{report}");
    let rows = report["rows"].as_u64().unwrap();
    // At least: the CONFIRM, the approval issued, approved and redeemed, the grant, and a
    // row per concurrent check.
    assert!(rows >= 5 + 4 * per_thread, "{report}");
    let (code, out) = audit_cmd(&pg.url, &["verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("ok: {rows} governance rows verified")),
        "{out}"
    );
    // The decisions of both replicas are in the one database.
    let (code, out) = audit_cmd(
        &pg.url,
        &["query", "--json", "--limit", "0", "--endpoint", "/v1/scan"],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out.lines().count() as u64,
        4 * per_thread,
        "{out}\nall: {}",
        audit_cmd(&pg.url, &["query", "--limit", "5"]).1
    );
    let (code, out) = audit_cmd(
        &pg.url,
        &["query", "--tools", "--kind", "approval_redeemed"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("delete_file"), "{out}");
}
