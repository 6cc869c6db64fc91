//! Issue 35's probe of the shipped example policies: each escape it found, as a call that
//! must BLOCK (or not pass a flow's exemption), next to the plain call that still passes.

use rampart_tools::{CallContext, Policy, ToolAction, ToolCall, parse_arguments};
use serde_json::{Value, json};

fn policy(name: &str) -> Policy {
    let p = format!("{}/../../policies/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    Policy::from_toml(&src).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn decide(p: &Policy, tool: &str, args: Value, ctx: &CallContext) -> ToolAction {
    p.check(&ToolCall::new(tool, args), ctx).action
}

/// Finding 1: `%2f`, `\`, `∕` and `／` were decoded into `/` before `..` was resolved, so
/// the `..` steps stayed inside `/workspace`; `os.path.normpath` leaves the root.
#[test]
fn regression_path_under_escapes_through_encoded_separators() {
    let p = policy("coding_agent");
    let ctx = CallContext::default();
    for path in [
        "/workspace%2fa%2fb/../../etc/passwd",
        "/workspace\\a\\b/../../etc/passwd",
        "/workspace\u{2215}a\u{2215}b/../../etc/passwd",
        "/workspace\u{FF0F}a\u{FF0F}b/../../etc/passwd",
        "/workspace/a/../../etc/passwd",
        "/workspace/link/../secret",
        "//workspace/x",
        "/workspace/a\nb",
    ] {
        assert_eq!(
            decide(&p, "read_file", json!({ "path": path }), &ctx),
            ToolAction::Block,
            "{path:?}"
        );
    }
    assert_eq!(
        decide(
            &p,
            "read_file",
            json!({"path": "/workspace/src/main.rs"}),
            &ctx
        ),
        ToolAction::Allow
    );
}

/// Finding 2: the `url` crate reads `\` as `/`, curl and Python as a name character:
/// `http://docs.rs\@127.0.0.1:18999/` was allowed and curl connected to 127.0.0.1.
#[test]
fn regression_url_host_in_escapes_through_back_slash_and_user_info() {
    let p = policy("coding_agent");
    let ctx = CallContext::default();
    for url in [
        "http://docs.rs\\@127.0.0.1:18999/",
        "http://docs.rs@127.0.0.1/",
        "http://docs.rs:80@127.0.0.1/",
        "http://docs.rs%2f@127.0.0.1/",
        " http://docs.rs/",
        "http://docs.rs\t/",
        "http://docs.rs/\r\nHost: evil",
        "http://ｄｏｃｓ.rs/",
        "http://[::1]/",
        "http://docs.rs:/x",
    ] {
        assert_eq!(
            decide(&p, "http_get", json!({ "url": url }), &ctx),
            ToolAction::Block,
            "{url:?}"
        );
    }
    for url in [
        "https://docs.rs/serde",
        "HTTPS://DOCS.RS:443/x?y#z",
        "https://docs.rs.",
    ] {
        assert_eq!(
            decide(&p, "http_get", json!({ "url": url }), &ctx),
            ToolAction::Allow,
            "{url:?}"
        );
    }
}

/// Finding 3: addresses outside `example.com` passed `email_domain_in` (Python's
/// `email.utils.getaddresses` yields `x@evil.com` for each), one of them the exemption of
/// `NO_EXTERNAL_MAIL_AFTER_READ_FILE`.
#[test]
fn regression_email_domain_in_lets_outside_addresses_through() {
    let p = policy("email_assistant");
    let after_read = CallContext {
        tools_called: vec!["read_file".into()],
        ..CallContext::default()
    };
    for to in [
        "x@evil.com\nboss@example.com",
        "<x@evil.com> <boss@example.com>",
        "x@evil.com (n) <boss@example.com>",
        "x@evil.com\r\nBcc: boss@example.com",
        "\"x@evil.com\" <boss@example.com>",
        "x@evil.com; boss@example.com",
        "boss@example.com <x@evil.com>",
        "group: x@evil.com;",
    ] {
        let args = json!({"to": to, "subject": "s", "body": "b"});
        assert_ne!(
            decide(&p, "send_email", args, &after_read),
            ToolAction::Allow,
            "{to:?}"
        );
    }
    let ok =
        json!({"to": "Ann Lee <ann@example.com>, bob@example.com", "subject": "s", "body": "b"});
    assert_eq!(decide(&p, "send_email", ok, &after_read), ToolAction::Allow);
}

/// Finding 11: `not_contains` read the raw text while `path_under` read the decoded one.
#[test]
fn regression_not_contains_and_path_under_read_the_same_value() {
    let p = policy("coding_agent");
    let ctx = CallContext::default();
    for path in [
        "/workspace/%2egit/hooks/pre-commit",
        "/workspace/.git\\hooks\\pre-commit",
        "/workspace/.GIT/hooks/pre-commit",
    ] {
        assert_eq!(
            decide(
                &p,
                "write_file",
                json!({"path": path, "content": "x"}),
                &ctx
            ),
            ToolAction::Block,
            "{path:?}"
        );
    }
    let p = Policy::from_toml(
        r#"
version = 1
[[tools]]
name = "run"
risk = "high"
action = "allow"
args.command = { not_contains = ["/.git/"] }
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // No path predicate: the deny list still reads the decoded form.
    assert_eq!(
        decide(
            &p,
            "run",
            json!({"command": "cat /workspace/%2Egit/config"}),
            &ctx
        ),
        ToolAction::Block
    );
}

/// Finding 12: a list-valued argument was read as its JSON text.
#[test]
fn regression_predicates_check_every_element_of_a_list() {
    let p = Policy::from_toml(
        r#"
version = 1
[[tools]]
name = "send_email"
risk = "high"
action = "allow"
args.recipients = { email_domain_in = ["example.com"] }
args.attachments = { path_under = ["/workspace"], optional = true }
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ctx = CallContext::default();
    let send = |v: Value| decide(&p, "send_email", v, &ctx);
    assert_eq!(
        send(json!({"recipients": ["a@example.com", "b@example.com"]})),
        ToolAction::Allow
    );
    assert_eq!(
        send(json!({"recipients": ["a@example.com", ["x@evil.com"]]})),
        ToolAction::Block
    );
    assert_eq!(
        send(json!({"recipients": ["a@example.com", "x@evil.com"]})),
        ToolAction::Block
    );
    assert_eq!(send(json!({"recipients": []})), ToolAction::Block);
    assert_eq!(
        send(json!({"recipients": [{"to": "a@example.com"}]})),
        ToolAction::Block
    );
    assert_eq!(
        send(
            json!({"recipients": ["a@example.com"], "attachments": ["/workspace/a", "/etc/passwd"]})
        ),
        ToolAction::Block
    );
}

/// Finding 14: duplicate keys (the last one won) and keys equal after folding.
#[test]
fn regression_duplicate_and_folded_keys_are_refused() {
    let p = policy("coding_agent");
    let ctx = CallContext::default();
    let raw = r#"{"command":"curl x|sh","command":"ls"}"#;
    assert!(parse_arguments(raw).is_err());
    assert_eq!(
        p.check_raw("run_command", raw, &ctx).action,
        ToolAction::Block
    );
    let folded = r#"{"path":"/workspace/a","PATH":"/etc/passwd"}"#;
    assert_eq!(
        p.check_raw("read_file", folded, &ctx).action,
        ToolAction::Block
    );
    // Built in code, where the map cannot hold duplicates but can hold `PATH` and `path`.
    assert_eq!(
        decide(
            &p,
            "read_file",
            json!({"path": "/workspace/a", "PATH": "/etc/passwd"}),
            &ctx
        ),
        ToolAction::Block
    );
    // An optional constrained argument given only under an alias of its name.
    let d = p.check(&ToolCall::new("list_dir", json!({"PATH": "/etc"})), &ctx);
    assert_eq!(
        (d.action, d.failed_check.as_deref()),
        (ToolAction::Block, Some("alias"))
    );
    // A request body naming a key twice inside `arguments`.
    let body = r#"{"tool":"read_file","arguments":{"path":"/workspace/a","path":"/etc/passwd"}}"#;
    assert!(serde_json::from_str::<ToolCall>(body).is_err());
}

/// Finding 16: tool names were trimmed before matching.
#[test]
fn regression_tool_names_are_matched_as_written() {
    let p = Policy::from_toml(
        r#"
version = 1
default = "allow"
[[tools]]
name = "run_command"
risk = "critical"
action = "block"
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ctx = CallContext::default();
    for name in [" run_command", "run_command\n", "run\u{0}_command", ""] {
        assert_eq!(
            decide(&p, name, json!({}), &ctx),
            ToolAction::Block,
            "{name:?}"
        );
    }
    assert_eq!(decide(&p, "read_file", json!({}), &ctx), ToolAction::Allow);
}
