//! `rampart serve` and `rampart config check --server` refusing what they cannot serve, with
//! errors that say what is wrong and what to do.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output, Stdio};

fn rampart() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rampart"));
    c.env_remove("RAMPART_CONFIG")
        .env_remove("RAMPART_LISTEN")
        .env_remove("RAMPART_AUDIT_PATH")
        .env("RUST_LOG", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Regression: a port in use printed "Address already in use" twice and named neither the
/// address nor `--listen`.
#[test]
fn port_in_use_names_the_address_and_listen_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let o = rampart()
        .args(["serve", "--listen", &addr])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    let expected = format!(
        "cannot listen on {addr}: address already in use (use --listen to pick another address)"
    );
    assert!(err.contains(&expected), "{err}");
    assert_eq!(
        err.to_lowercase().matches("address already in use").count(),
        1,
        "{err}"
    );
}

/// A pack whose rule's `must_match` example does not match (a typo in the pattern).
const TYPO_PACK: &str = r#"schema_version = 1
[pack]
name = "typo"
version = "1"
[[rules]]
id = "CTRL_950"
kind = "literal"
patterns = ["zebra protocl seven"]
strength = "strong"
severity = "high_risk"
rationale = "a typo in the pattern"
must_match = ["use the zebra protocol seven"]
must_not_match = ["a zebra at the zoo"]
"#;

/// Regression: `config check --server` (and `serve`) accepted a pack that fails its own
/// examples, which `rules test` rejects.
#[test]
fn a_pack_failing_its_examples_is_refused_by_config_check_and_serve() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("typo.toml"), TYPO_PACK).unwrap();
    let cfg = dir.path().join("server.toml");
    std::fs::write(&cfg, "version = 1\n[pipeline]\npacks = [\"typo.toml\"]\n").unwrap();
    let o = rampart()
        .args(["config", "check", "--server"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("CTRL_950"), "{err}");
    assert!(err.contains("use the zebra protocol seven"), "{err}");
    assert!(err.contains("must_match"), "{err}");

    let o = rampart()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("CTRL_950"), "{err}");
    assert!(err.contains("use the zebra protocol seven"), "{err}");

    // `rules test` fails the same pack.
    let o = rampart()
        .args(["rules", "test"])
        .arg(dir.path().join("typo.toml"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}
