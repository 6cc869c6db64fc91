//! The reference policy of issue 21, accepted as written, and the predicates' attacks.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use rampart_tools::{CallContext, Policy, PolicyError, Risk, ToolAction, ToolCall, plain_path};
use serde_json::json;

const REFERENCE: &str = r#"
version = 1
default = "block"                 # tools the policy does not name

[[tools]]
name = "read_file"
risk = "low"
action = "allow"
args.path = { path_under = ["/srv/app/docs"] }

[[tools]]
name = "delete_file"
risk = "high"
action = "confirm"

[[tools]]
name = "send_email"
risk = "high"
action = "allow"
args.to = { email_domain_in = ["example.com"] }
args.body = { max_length = 5000 }

[[tools]]
name = "http_get"
risk = "medium"
action = "allow"
args.url = { url_host_in = ["api.example.com"] }

[[tools]]
name = "transfer_funds"
risk = "critical"
action = "block"

[[flows]]                          # after untrusted content that looked like an injection,
after = { injection_score_at_least = 0.5 }   # risky tools need a human
tools_at_or_above = "high"
action = "confirm"
"#;

fn policy() -> Policy {
    Policy::from_toml(REFERENCE).unwrap()
}

fn check(tool: &str, args: serde_json::Value) -> rampart_tools::ToolDecision {
    policy().check(&ToolCall::new(tool, args), &CallContext::default())
}

#[test]
fn the_reference_policy_is_accepted_as_written() {
    let p = policy();
    let d = p.check(
        &ToolCall::new("read_file", json!({"path": "/srv/app/docs/guide.md"})),
        &CallContext::default(),
    );
    assert_eq!((d.action, d.risk), (ToolAction::Allow, Some(Risk::Low)));
    assert_eq!(
        check("delete_file", json!({"path": "/x"})).action,
        ToolAction::Confirm
    );
    assert_eq!(
        check("transfer_funds", json!({"amount": 5})).action,
        ToolAction::Block
    );
    let unknown = check("format_disk", json!({}));
    assert_eq!((unknown.action, unknown.risk), (ToolAction::Block, None));
    assert_eq!(unknown.rules, ["TOOL_UNKNOWN"]);
}

#[test]
fn path_traversal_is_refused() {
    for path in [
        "/srv/app/docs/../../../etc/passwd",
        "/srv/app/docs/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/srv/app/docs/%252e%252e/%252e%252e/etc/passwd",
        "/srv/app/docs/\u{FF0E}\u{FF0E}/\u{FF0E}\u{FF0E}/secrets",
        "/srv/app/docs/..\u{2215}..\u{2215}secrets",
        "/srv/app/docs/..\\..\\secrets",
        "/srv/app/docsevil/x",
        "/srv/app/docs/\u{2024}\u{2024}/\u{2024}\u{2024}/x",
        "docs/guide.md",
        "/srv/app/docs/a\0b",
        "/../srv/app/docs/x",
        // Resolved lexically these stay inside; after a symbolic link `..` does not.
        "/srv/app/docs/a/../b/./c.md",
    ] {
        let d = check("read_file", json!({ "path": path }));
        assert_eq!(d.action, ToolAction::Block, "{path:?}");
        assert_eq!(d.failed_argument.as_deref(), Some("path"));
        assert_eq!(d.failed_check.as_deref(), Some("path_under"));
    }
    // Empty and `.` components are read alike by everyone: fine.
    let d = check("read_file", json!({"path": "/srv/app/docs//b/./c.md"}));
    assert_eq!(d.action, ToolAction::Allow);
    assert_eq!(
        plain_path("/srv/app/docs//b/./c.md").unwrap(),
        ["srv", "app", "docs", "b", "c.md"]
    );
    assert_eq!(plain_path("/srv/app/docs/a/../b"), None);
}

#[test]
fn a_missing_constrained_argument_fails() {
    let d = check("read_file", json!({}));
    assert_eq!(d.action, ToolAction::Block);
    assert_eq!(d.failed_check.as_deref(), Some("missing"));
    let d = check("read_file", json!("not an object"));
    assert_eq!(d.action, ToolAction::Block);
}

#[test]
fn email_and_url_predicates() {
    let ok = check(
        "send_email",
        json!({"to": "Ann <ann@example.com>, bob@example.com", "body": "hi"}),
    );
    assert_eq!(ok.action, ToolAction::Allow);
    assert_eq!(
        check("send_email", json!({"to": "ann@EXAMPLE.com", "body": "hi"})).action,
        ToolAction::Allow
    );
    for to in [
        "eve@evil.example",
        "ann@example.com, eve@example.com.evil.example",
        // A trailing dot is not a plain address (and not one SMTP accepts).
        "ann@EXAMPLE.com.",
        "nobody",
    ] {
        let d = check("send_email", json!({"to": to, "body": "hi"}));
        assert_eq!(d.action, ToolAction::Block, "{to}");
    }
    let long = "x".repeat(5001);
    assert_eq!(
        check("send_email", json!({"to": "a@example.com", "body": long}))
            .failed_check
            .as_deref(),
        Some("max_length")
    );
    assert_eq!(
        check("http_get", json!({"url": "https://api.example.com/v1/x"})).action,
        ToolAction::Allow
    );
    for url in [
        "https://api.example.com@evil.example/",
        "https://api.example.com.evil.example/",
        "ftp://api.example.com/",
        "https://evil.example/?u=https://api.example.com",
        "not a url",
    ] {
        assert_eq!(
            check("http_get", json!({"url": url})).action,
            ToolAction::Block,
            "{url}"
        );
    }
}

#[test]
fn flows_escalate_after_an_injection() {
    let p = policy();
    let ctx = CallContext {
        max_injection_score: Some(0.8),
        tools_called: vec!["read_file".into()],
        ..CallContext::default()
    };
    let d = p.check(
        &ToolCall::new("send_email", json!({"to": "a@example.com", "body": "hi"})),
        &ctx,
    );
    assert_eq!(d.action, ToolAction::Confirm);
    assert!(d.rules.contains(&"FLOW_0".to_string()));
    // Low-risk tools are not concerned; a flow never lowers a BLOCK.
    let d = p.check(
        &ToolCall::new("read_file", json!({"path": "/srv/app/docs/a"})),
        &ctx,
    );
    assert_eq!(d.action, ToolAction::Allow);
    let d = p.check(&ToolCall::new("transfer_funds", json!({})), &ctx);
    assert_eq!(d.action, ToolAction::Block);
}

#[test]
fn bad_policies_are_refused_with_a_clear_error() {
    let e = Policy::from_toml("version = 2").unwrap_err();
    assert!(matches!(e, PolicyError::Version { found: 2 }));
    let e = Policy::from_toml("version = 1\nunknown_key = 1").unwrap_err();
    assert!(e.to_string().contains("unknown_key"), "{e}");
    let dup = "version = 1\n[[tools]]\nname = \"a\"\nrisk = \"low\"\naction = \"allow\"\n[[tools]]\nname = \"a\"\nrisk = \"low\"\naction = \"allow\"\n";
    assert!(matches!(
        Policy::from_toml(dup).unwrap_err(),
        PolicyError::Duplicate(_)
    ));
    let bad_re = "version = 1\n[[tools]]\nname = \"a\"\nrisk = \"low\"\naction = \"allow\"\nargs.x = { regex = \"(\" }\n";
    assert!(
        Policy::from_toml(bad_re)
            .unwrap_err()
            .to_string()
            .contains("argument `x`")
    );
    let bad_root = "version = 1\n[[tools]]\nname = \"a\"\nrisk = \"low\"\naction = \"allow\"\nargs.p = { path_under = [\"relative/dir\"] }\n";
    assert!(Policy::from_toml(bad_root).is_err());
    let bad_risk = "version = 1\n[[tools]]\nname = \"a\"\nrisk = \"extreme\"\naction = \"allow\"\n";
    assert!(Policy::from_toml(bad_risk).is_err());
}

#[test]
fn check_fails_closed_on_arguments_too_deep_or_too_large() {
    use rampart_tools::{MAX_ARGUMENT_BYTES, MAX_ARGUMENT_DEPTH};
    let mut deep = json!("x");
    for _ in 0..1000 {
        deep = json!([deep]);
    }
    let huge = "x".repeat(MAX_ARGUMENT_BYTES + 1);
    for (tool, args) in [
        ("delete_file", json!({ "path": deep.clone() })),
        ("delete_file", json!({ "path": huge.clone() })),
        // Unknown tools too, even under `default = "allow"`.
        ("format_disk", json!({ "path": deep })),
    ] {
        let p = Policy::from_toml(&REFERENCE.replace("default = \"block\"", "default = \"allow\""))
            .unwrap();
        let d = p.check(&ToolCall::new(tool, args), &CallContext::default());
        assert_eq!(d.action, ToolAction::Block, "{tool}");
        assert!(
            d.rules.contains(&"TOOL_ARGS_SHAPE".to_string()),
            "{:?}",
            d.rules
        );
        assert!(d.reasons.iter().all(|r| !r.contains("xxx")));
    }
    let mut ok = json!("x");
    for _ in 0..MAX_ARGUMENT_DEPTH - 1 {
        ok = json!([ok]);
    }
    assert_eq!(
        check("delete_file", json!({ "path": ok })).action,
        ToolAction::Confirm
    );
}

#[test]
fn parse_arguments_reads_openai_argument_strings() {
    use rampart_tools::{ArgumentsError, parse_arguments};
    assert_eq!(parse_arguments("").unwrap(), json!({}));
    assert_eq!(
        parse_arguments(r#"{"path":"/a"}"#).unwrap(),
        json!({"path": "/a"})
    );
    assert!(matches!(
        parse_arguments("{\"path\""),
        Err(ArgumentsError::NotJson(_))
    ));
    assert!(matches!(
        parse_arguments("\"s\""),
        Err(ArgumentsError::NotAnObject)
    ));
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(1000), "]".repeat(1000));
    assert!(matches!(
        parse_arguments(&deep),
        Err(ArgumentsError::TooDeep { .. })
    ));
    let huge = format!("{{\"a\":\"{}\"}}", "x".repeat(10 << 20));
    assert!(matches!(
        parse_arguments(&huge),
        Err(ArgumentsError::TooLarge { .. })
    ));
}

#[test]
fn check_raw_blocks_unparsable_argument_text() {
    let p = policy();
    let ctx = CallContext::default();
    let d = p.check_raw("read_file", r#"{"path": "/srv/app/docs/a.md"}"#, &ctx);
    assert_eq!(d.action, ToolAction::Allow);
    let deep = format!("{{\"path\":{}{}}}", "[".repeat(1000), "]".repeat(1000));
    let huge = format!("{{\"path\":\"{}\"}}", "x".repeat(10 << 20));
    for raw in ["{\"path\": ", "[1, 2]", deep.as_str(), huge.as_str()] {
        let d = p.check_raw("read_file", raw, &ctx);
        assert_eq!(d.action, ToolAction::Block);
        assert_eq!(d.rules, ["TOOL_ACTION", "TOOL_ARGS_SHAPE"]);
        assert_eq!(d.risk, Some(Risk::Low));
        assert!(d.reasons[0].len() < 200, "{:?}", d.reasons);
    }
    let d = p.check_raw("nope", "{", &ctx);
    assert_eq!((d.action, d.risk), (ToolAction::Block, None));
    assert_eq!(d.rules, ["TOOL_UNKNOWN", "TOOL_ARGS_SHAPE"]);
    // Empty text is `{}`: delete_file has no constrained argument.
    assert_eq!(
        p.check_raw("delete_file", "", &ctx).action,
        ToolAction::Confirm
    );
}
