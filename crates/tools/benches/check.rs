//! Cost of one `Policy::check` against the policy's size.
//!
//! `cargo bench -p rampart-tools --bench check -- --warm-up-time 1 --measurement-time 3`.
//! Policies of 10, 100 and 1,000 tools with realistic predicates (a path root, URL hosts,
//! email domains with a length limit, an enumeration, a regex, a numeric range, rotating),
//! a context condition on every critical tool, a rate limit on every fifth tool, three flow
//! rules and a policy-wide MFA condition; the conversation so far has ten earlier calls.
//!
//! - `allowed/N`: a path inside its root (every check runs, nothing fires);
//! - `blocked_argument/N`: a percent-encoded traversal (`path_under` fails);
//! - `blocked_flow/N`: an email to another domain after `read_file` (a flow with
//!   `unless_args` blocks it);
//! - `unknown/N`: a tool the policy does not name (the default).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rampart_tools::{CallContext, CallerInfo, Policy, ToolAction, ToolCall};
use serde_json::json;
use std::fmt::Write as _;
use std::hint::black_box;

fn policy_src(n: usize) -> String {
    let mut s = String::from("version = 1\ndefault = \"block\"\n");
    for i in 0..n {
        let (risk, action) = match i % 10 {
            0..=4 => ("low", "allow"),
            5..=7 => ("medium", "allow"),
            8 => ("high", "confirm"),
            _ => ("critical", "confirm"),
        };
        let _ = write!(
            s,
            "\n[[tools]]\nname = \"tool_{i}\"\nrisk = \"{risk}\"\naction = \"{action}\"\n"
        );
        let _ = match i % 6 {
            0 => writeln!(
                s,
                "args.path = {{ path_under = [\"/srv/app{i}/docs\", \"/srv/shared\"] }}"
            ),
            1 => writeln!(
                s,
                "args.url = {{ url_host_in = [\"api{i}.example.com\", \"cdn.example.com\"] }}"
            ),
            2 => writeln!(
                s,
                "args.to = {{ email_domain_in = [\"example.com\", \"example.org\"] }}\nargs.body = {{ max_length = 5000, not_contains = [\"BEGIN PRIVATE KEY\"] }}"
            ),
            3 => writeln!(
                s,
                "args.mode = {{ one_of = [\"read\", \"list\", \"stat\"] }}"
            ),
            4 => writeln!(s, "args.id = {{ regex = \"[a-z]{{2}}-[0-9]{{4,8}}\" }}"),
            _ => writeln!(s, "args.amount = {{ range = [0, 10000] }}"),
        };
        if i % 5 == 0 {
            s.push_str("max_calls_per_conversation = 20\n");
        }
        if i % 10 == 9 {
            s.push_str(
                "\n[tools.requires]\nrole_in = [\"operator\", \"admin\"]\n[tools.requires.time]\ndays = [\"mon\", \"tue\", \"wed\", \"thu\", \"fri\"]\nhours = [\"08:00\", \"18:00\"]\n",
            );
        }
    }
    s.push_str(
        r#"
[[flows]]
after = { injection_score_at_least = 0.5 }
tools_at_or_above = "medium"
action = "confirm"

[[flows]]
after = { tool_called_any = ["tool_1", "tool_7"] }
tools = ["tool_9"]
action = "block"

[[flows]]
id = "NO_EXTERNAL_MAIL_AFTER_READ"
after = { tool_called = "tool_0" }
tools = ["tool_2"]
unless_args = { to = { email_domain_in = ["example.com"] } }
action = "block"

[[conditions]]
tools_at_or_above = "high"
requires = { attributes = { mfa = true } }
"#,
    );
    s
}

fn context() -> CallContext {
    CallContext {
        max_injection_score: Some(0.1),
        tools_called: (0..10).map(|i| format!("tool_{}", i * 3)).collect(),
        caller: CallerInfo {
            role: Some("operator".into()),
            attributes: [("mfa".to_string(), json!(true))].into_iter().collect(),
        },
        // 2026-11-26, a Thursday, 12:00 UTC.
        now_ms: Some(1_795_694_400_000),
        conversation: None,
    }
}

fn bench(c: &mut Criterion) {
    let ctx = context();
    let mut g = c.benchmark_group("check");
    for n in [10usize, 100, 1000] {
        let policy = match Policy::from_toml(&policy_src(n)) {
            Ok(p) => p,
            Err(e) => panic!("bench policy: {e}"),
        };
        // A low-risk path tool (index a multiple of 30) near the middle of the policy.
        let mid = (n / 2) / 30 * 30;
        let allowed = ToolCall::new(
            format!("tool_{mid}"),
            json!({"path": format!("/srv/app{mid}/docs/guides/install.md")}),
        );
        let blocked_arg = ToolCall::new(
            format!("tool_{mid}"),
            json!({"path": format!("/srv/app{mid}/docs/%2e%2e/%2e%2e/%2e%2e/etc/passwd")}),
        );
        let blocked_flow = ToolCall::new(
            "tool_2",
            json!({"to": "someone@other.example", "body": "Quarterly figures attached."}),
        );
        let unknown = ToolCall::new("format_disk", json!({"device": "/dev/sda"}));
        for (name, call, want) in [
            ("allowed", &allowed, ToolAction::Allow),
            ("blocked_argument", &blocked_arg, ToolAction::Block),
            ("blocked_flow", &blocked_flow, ToolAction::Block),
            ("unknown", &unknown, ToolAction::Block),
        ] {
            let got = policy.check(call, &ctx).action;
            assert_eq!(got, want, "{name}/{n}");
            g.bench_with_input(BenchmarkId::new(name, n), call, |b, call| {
                b.iter(|| black_box(policy.check(black_box(call), black_box(&ctx))));
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
