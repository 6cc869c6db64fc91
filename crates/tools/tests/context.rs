//! Context conditions (caller role and attributes, time windows), rate limits and the flow
//! extensions (`tool_called_any`, `unless_args`).

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use rampart_tools::{CallContext, CallerInfo, Policy, ToolAction, ToolCall};
use serde_json::json;

// 2026-11-26, a Thursday, 12:00 UTC.
const THU_NOON_UTC: u64 = 1_795_694_400_000;
const HOUR: u64 = 3_600_000;

const POLICY: &str = r#"
version = 1

[[tools]]
name = "transfer_funds"
risk = "critical"
action = "confirm"
args.amount = { range = [0, 10000] }

[tools.requires]                   # treasurers with MFA, in business hours
role_in = ["treasurer"]
attributes = { mfa = true }

[tools.requires.time]              # business hours, Paris winter time
days = ["mon", "tue", "wed", "thu", "fri"]
hours = ["09:00", "18:00"]
utc_offset = "+01:00"

[[tools]]
name = "read_ledger"
risk = "medium"
action = "allow"
requires = { attributes = { department = ["finance", "audit"] } }
otherwise = "confirm"
max_calls_per_conversation = 2
over_limit = "confirm"

[[tools]]
name = "search"
risk = "low"
action = "allow"
max_calls_per_conversation = 3

[[tools]]
name = "fetch_url"
risk = "medium"
action = "allow"

[[tools]]
name = "read_file"
risk = "low"
action = "allow"

[[tools]]
name = "send_email"
risk = "high"
action = "allow"

[[tools]]
name = "grant_access"
risk = "critical"
action = "confirm"

[[conditions]]                     # elevated privileges require MFA
id = "MFA_FOR_CRITICAL"
tools_at_or_above = "critical"
requires = { attributes = { mfa = true } }

[[flows]]                          # no transfer after untrusted content came in
id = "NO_TRANSFER_AFTER_UNTRUSTED"
after = { tool_called_any = ["fetch_url", "read_email"] }
tools = ["transfer_funds"]
action = "block"

[[flows]]                          # no mail to other domains after a file was read
id = "NO_EXFIL_AFTER_READ"
after = { tool_called = "read_file" }
tools = ["send_email"]
unless_args = { to = { email_domain_in = ["example.com"] } }
action = "block"
"#;

fn policy() -> Policy {
    Policy::from_toml(POLICY).unwrap()
}

fn ctx(role: Option<&str>, attrs: serde_json::Value, now_ms: Option<u64>) -> CallContext {
    CallContext {
        caller: CallerInfo {
            role: role.map(str::to_string),
            attributes: serde_json::from_value(attrs).unwrap(),
        },
        now_ms,
        ..CallContext::default()
    }
}

fn transfer() -> ToolCall {
    ToolCall::new("transfer_funds", json!({"amount": 500}))
}

#[test]
fn role_attributes_and_business_hours_all_hold() {
    let p = policy();
    let ok = ctx(Some("treasurer"), json!({"mfa": true}), Some(THU_NOON_UTC));
    let d = p.check(&transfer(), &ok);
    assert_eq!(d.action, ToolAction::Confirm, "{d:?}");
    assert_eq!(d.rules, ["TOOL_ACTION"]);
}

#[test]
fn a_failed_context_condition_blocks_with_tool_context() {
    let p = policy();
    for (why, c) in [
        (
            "wrong role",
            ctx(Some("intern"), json!({"mfa": true}), Some(THU_NOON_UTC)),
        ),
        (
            "no role",
            ctx(None, json!({"mfa": true}), Some(THU_NOON_UTC)),
        ),
        (
            "no mfa",
            ctx(Some("treasurer"), json!({"mfa": false}), Some(THU_NOON_UTC)),
        ),
        (
            "mfa as a string",
            ctx(
                Some("treasurer"),
                json!({"mfa": "true"}),
                Some(THU_NOON_UTC),
            ),
        ),
        (
            // 12:00 UTC + 7 h = 20:00 in Paris: closed.
            "after hours",
            ctx(
                Some("treasurer"),
                json!({"mfa": true}),
                Some(THU_NOON_UTC + 7 * HOUR),
            ),
        ),
        (
            "saturday",
            ctx(
                Some("treasurer"),
                json!({"mfa": true}),
                Some(THU_NOON_UTC + 48 * HOUR),
            ),
        ),
        // A time window with no time given fails closed.
        (
            "no time",
            ctx(Some("treasurer"), json!({"mfa": true}), None),
        ),
    ] {
        let d = p.check(&transfer(), &c);
        assert_eq!(d.action, ToolAction::Block, "{why}: {d:?}");
        assert_eq!(
            d.rules.last().map(String::as_str),
            Some("TOOL_CONTEXT"),
            "{why}"
        );
        assert_eq!(d.failed_argument, None, "{why}");
    }
    // The reason never carries the caller's values.
    let d = p.check(
        &transfer(),
        &ctx(
            Some("secret-role-name"),
            json!({"mfa": true}),
            Some(THU_NOON_UTC),
        ),
    );
    assert!(d.reasons.iter().all(|r| !r.contains("secret-role-name")));
}

#[test]
fn policy_wide_conditions_apply_by_risk() {
    let p = policy();
    let grant = ToolCall::new("grant_access", json!({}));
    let d = p.check(&grant, &ctx(None, json!({}), None));
    assert_eq!(d.action, ToolAction::Block);
    assert_eq!(d.rules, ["TOOL_ACTION", "MFA_FOR_CRITICAL"]);
    let d = p.check(&grant, &ctx(None, json!({"mfa": true}), None));
    assert_eq!(d.action, ToolAction::Confirm);
    // A medium tool is not concerned.
    let d = p.check(
        &ToolCall::new("fetch_url", json!({})),
        &ctx(None, json!({}), None),
    );
    assert_eq!(d.action, ToolAction::Allow);
}

#[test]
fn otherwise_confirm_escalates_without_blocking() {
    let p = policy();
    let ledger = ToolCall::new("read_ledger", json!({}));
    let d = p.check(&ledger, &ctx(None, json!({"department": "audit"}), None));
    assert_eq!(d.action, ToolAction::Allow);
    let d = p.check(&ledger, &ctx(None, json!({"department": "sales"}), None));
    assert_eq!(d.action, ToolAction::Confirm);
    assert_eq!(d.rules, ["TOOL_ACTION", "TOOL_CONTEXT"]);
}

#[test]
fn rate_limits_count_earlier_calls_in_the_conversation() {
    let p = policy();
    let search = ToolCall::new("search", json!({}));
    let mut c = CallContext::default();
    for n in 0..3 {
        let d = p.check(&search, &c);
        assert_eq!(d.action, ToolAction::Allow, "call {}", n + 1);
        c.tools_called.push("search".into());
        c.tools_called.push("fetch_url".into()); // other tools do not count
    }
    let d = p.check(&search, &c);
    assert_eq!(d.action, ToolAction::Block);
    assert_eq!(d.rules, ["TOOL_ACTION", "TOOL_RATE"]);
    // `over_limit = "confirm"`.
    let ledger = ToolCall::new("read_ledger", json!({}));
    let mut c = ctx(None, json!({"department": "finance"}), None);
    c.tools_called = vec!["read_ledger".into(), "read_ledger".into()];
    let d = p.check(&ledger, &c);
    assert_eq!(
        (d.action, d.rules.last().unwrap().as_str()),
        (ToolAction::Confirm, "TOOL_RATE")
    );
}

#[test]
fn no_transfer_after_an_untrusted_tool_result() {
    let p = policy();
    let mut c = ctx(Some("treasurer"), json!({"mfa": true}), Some(THU_NOON_UTC));
    c.tools_called = vec!["search".into()];
    assert_eq!(p.check(&transfer(), &c).action, ToolAction::Confirm);
    c.tools_called.push("fetch_url".into());
    let d = p.check(&transfer(), &c);
    assert_eq!(d.action, ToolAction::Block);
    assert!(d.rules.contains(&"NO_TRANSFER_AFTER_UNTRUSTED".to_string()));
}

#[test]
fn no_send_email_to_an_external_domain_after_read_file() {
    let p = policy();
    let mut c = CallContext::default();
    let external = ToolCall::new("send_email", json!({"to": "eve@evil.example", "body": "x"}));
    let internal = ToolCall::new("send_email", json!({"to": "ann@example.com", "body": "x"}));
    let missing = ToolCall::new("send_email", json!({"body": "x"}));
    assert_eq!(p.check(&external, &c).action, ToolAction::Allow);
    c.tools_called.push("read_file".into());
    let d = p.check(&external, &c);
    assert_eq!(d.action, ToolAction::Block);
    assert_eq!(d.rules, ["TOOL_ACTION", "NO_EXFIL_AFTER_READ"]);
    assert_eq!(p.check(&internal, &c).action, ToolAction::Allow);
    // Without the argument the exemption cannot be shown: the flow applies.
    assert_eq!(p.check(&missing, &c).action, ToolAction::Block);
}

#[test]
fn bad_conditions_are_refused() {
    for (src, needle) in [
        ("requires = {}", "no condition"),
        ("requires = { role_in = [] }", "role_in"),
        (
            "requires = { time = { hours = [\"9:00\", \"17:00\"] } }",
            "9:00",
        ),
        (
            "requires = { time = { days = [\"mon\"], utc_offset = \"CET\" } }",
            "CET",
        ),
        (
            "requires = { time = { utc_offset = \"+01:00\" } }",
            "neither",
        ),
        ("requires = { time = { days = [\"someday\"] } }", "someday"),
        (
            "otherwise = \"allow\"\nrequires = { role_in = [\"a\"] }",
            "allow",
        ),
    ] {
        let p = format!(
            "version = 1\n[[tools]]\nname = \"t\"\nrisk = \"low\"\naction = \"allow\"\n{src}\n"
        );
        let e = Policy::from_toml(&p).unwrap_err().to_string();
        assert!(e.contains(needle), "{src}: {e}");
    }
    let e = Policy::from_toml("version = 1\n[[conditions]]\nrequires = { role_in = [\"a\"] }\n")
        .unwrap_err();
    assert!(e.to_string().contains("names no tools"), "{e}");
}

#[test]
fn a_bad_unless_args_predicate_names_the_flow_and_argument() {
    let src = "version = 1\n[[tools]]\nname = \"t\"\nrisk = \"high\"\naction = \"allow\"\n[[flows]]\nafter = { tool_called = \"t\" }\ntools = [\"t\"]\nunless_args = { to = { email_domain_in = [] } }\naction = \"block\"\n";
    let e = Policy::from_toml(src).unwrap_err().to_string();
    assert_eq!(
        e,
        "policy: flows[0]: unless_args `to`: `email_domain_in` must not be empty"
    );
}
