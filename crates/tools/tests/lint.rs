//! `lint`: errors with the key meant, and warnings with stable codes.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use rampart_tools::{LintCode, Policy, Severity, lint};

fn tool(extra: &str) -> String {
    format!("version = 1\n[[tools]]\nname = \"t\"\nrisk = \"high\"\naction = \"allow\"\n{extra}\n")
}

fn codes(src: &str) -> Vec<&'static str> {
    lint(src).findings.iter().map(|f| f.code.code()).collect()
}

#[test]
fn a_typoed_key_is_named_with_the_key_meant() {
    let src = tool("args.path = { pth_under = [\"/srv\"] }");
    let r = lint(&src);
    assert_eq!(r.findings.len(), 1, "{r:?}");
    let f = &r.findings[0];
    assert_eq!(
        (f.code, f.severity),
        (LintCode::UnknownKey, Severity::Error)
    );
    assert!(f.message.contains("`pth_under`"), "{}", f.message);
    assert!(
        f.message.contains("did you mean `path_under`?"),
        "{}",
        f.message
    );
    assert_eq!(f.location.map(|l| l.line), Some(6));
    // The same suggestion when the policy is loaded.
    let e = Policy::from_toml(&src).unwrap_err().to_string();
    assert!(e.contains("did you mean `path_under`?"), "{e}");
    // Top-level keys and values too.
    let r = lint("version = 1\ndefualt = \"block\"\n");
    assert!(
        r.findings[0].message.contains("did you mean `default`?"),
        "{r:?}"
    );
    let r = lint("version = 1\ndefault = \"blok\"\n");
    assert_eq!(r.findings[0].code, LintCode::UnknownValue);
    assert!(
        r.findings[0].message.contains("did you mean `block`?"),
        "{r:?}"
    );
    // Nothing close: the keys expected are listed instead.
    let r = lint(&tool("colour = \"red\""));
    assert!(r.findings[0].message.contains("expected one of"), "{r:?}");
}

#[test]
fn errors_version_duplicates_and_bad_predicates() {
    assert_eq!(codes("version = 2"), ["E004"]);
    let dup = format!(
        "{}[[tools]]\nname = \"t\"\nrisk = \"low\"\naction = \"block\"\n",
        tool("")
    );
    assert_eq!(codes(&dup), ["E005"]);
    assert_eq!(codes(&tool("args.n = { range = [5, 1] }")), ["E007"]);
    assert_eq!(codes(&tool("args.n = { one_of = [] }")), ["E007"]);
    assert_eq!(
        codes(&tool("args.p = { path_under = [\"srv/app\"] }")),
        ["E007"]
    );
    assert_eq!(codes(&tool("args.r = { regex = \"(\" }")), ["E007"]);
    // Several errors at once.
    let both = tool("args.a = { range = [5, 1] }\nargs.b = { url_host_in = [] }");
    assert_eq!(codes(&both), ["E007", "E007"]);
    let flow = format!(
        "{}[[flows]]\nafter = {{}}\ntools = [\"t\"]\naction = \"block\"\n",
        tool("")
    );
    assert_eq!(codes(&flow), ["E008"]);
    assert_eq!(
        codes(&tool("requires = { time = { hours = [\"9\", \"17\"] } }")),
        ["E009"]
    );
}

#[test]
fn unsatisfiable_and_suspicious_predicates_warn() {
    for (extra, code) in [
        ("args.body = { max_length = 0 }", "W001"),
        (
            "args.mode = { one_of = [\"read\", \"write\"], regex = \"r.*\" }",
            "W002",
        ),
        (
            "args.n = { one_of = [\"5\", \"50\"], range = [0, 10] }",
            "W002",
        ),
        ("args.p = { path_under = [\"/srv//app/./docs\"] }", "W003"),
        ("args.p = { path_under = [\"/\"] }", "W003"),
        (
            "args.u = { url_host_in = [\"https://api.example.com\"] }",
            "W004",
        ),
        (
            "args.u = { url_host_in = [\"api.example.com:443\"] }",
            "W004",
        ),
        ("args.u = { url_host_in = [\"*.example.com\"] }", "W004"),
        ("args.to = { email_domain_in = [\"@example.com\"] }", "W005"),
        ("args.r = { regex = \"[^\\\\s\\\\S]\" }", "W010"),
        ("max_calls_per_conversation = 0", "W011"),
        ("requires = { time = { days = [] } }", "W012"),
        (
            "requires = { time = { hours = [\"09:00\", \"09:00\"] } }",
            "W012",
        ),
        ("otherwise = \"confirm\"", "W013"),
        ("over_limit = \"confirm\"", "W013"),
    ] {
        let r = lint(&tool(extra));
        assert!(!r.has_errors(), "{extra}: {r:?}");
        let got: Vec<_> = r.warnings().map(|f| f.code.code()).collect();
        assert_eq!(got, [code], "{extra}: {r:?}");
    }
    // The same predicates, made satisfiable, are clean.
    for extra in [
        "args.body = { max_length = 0, optional = true }",
        "args.mode = { one_of = [\"read\", \"rewrite\"], regex = \"r.*\" }",
        "args.p = { path_under = [\"/srv/app/docs/\"] }",
        "args.u = { url_host_in = [\"api.example.com\", \"[::1]\"] }",
        "args.to = { email_domain_in = [\"example.com\"] }",
    ] {
        assert_eq!(codes(&tool(extra)), Vec::<&str>::new(), "{extra}");
    }
}

#[test]
fn policy_level_warnings() {
    let base = "version = 1\n[[tools]]\nname = \"read_file\"\nrisk = \"low\"\naction = \"allow\"\n[[tools]]\nname = \"pay\"\nrisk = \"critical\"\naction = \"confirm\"\n";
    assert!(codes(base).is_empty(), "{:?}", lint(base));
    assert_eq!(codes(&format!("default = \"allow\"\n{base}")), ["W008"]);
    let crit = base.replace("action = \"confirm\"", "action = \"allow\"");
    assert_eq!(codes(&crit), ["W009"]);
    // A flow naming a tool the policy does not define.
    let flow = format!(
        "{base}[[flows]]\nafter = {{ tool_called = \"read_fiel\" }}\ntools = [\"pay\"]\naction = \"block\"\n"
    );
    assert_eq!(codes(&flow), ["W006"]);
    // A flow that can never change a decision (`pay` is already confirmed).
    let flow = format!(
        "{base}[[flows]]\nafter = {{ injection_score_at_least = 0.5 }}\ntools_at_or_above = \"high\"\naction = \"confirm\"\n"
    );
    assert_eq!(codes(&flow), ["W007"]);
    let flow = format!(
        "{base}[[flows]]\nafter = {{ injection_score_at_least = 0.5 }}\ntools = [\"read_file\"]\naction = \"allow\"\n"
    );
    assert_eq!(codes(&flow), ["W007"]);
    // A condition whose `otherwise` is what the tool gets anyway, and a tool requirement
    // on a blocked tool.
    let cond = format!(
        "{base}[[conditions]]\ntools = [\"pay\"]\nrequires = {{ role_in = [\"a\"] }}\notherwise = \"confirm\"\n"
    );
    assert_eq!(codes(&cond), ["W007"]);
    let blocked = "version = 1\n[[tools]]\nname = \"t\"\nrisk = \"low\"\naction = \"block\"\nrequires = { role_in = [\"a\"] }\n";
    assert_eq!(codes(blocked), ["W007"]);
}

#[test]
fn the_reference_policy_lints_clean() {
    // The reference policy: its flow (confirm for high and up after an injection)
    // changes send_email's ALLOW, so it is useful; nothing to report.
    let src = include_str!("policy.rs");
    let start = src.find("version = 1\ndefault").unwrap();
    let end = src[start..].find("\"#;").unwrap();
    let r = lint(&src[start..start + end]);
    assert!(r.findings.is_empty(), "{r:?}");
}

#[test]
fn findings_serialize_with_their_codes() {
    let r = lint(&tool("args.body = { max_length = 0 }"));
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["findings"][0]["code"], "W001");
    assert_eq!(v["findings"][0]["severity"], "warning");
    let shown = r.findings[0].to_string();
    assert!(
        shown.starts_with("warning[W001 max-length-zero] tools[0] `t`, argument `body`"),
        "{shown}"
    );
}
