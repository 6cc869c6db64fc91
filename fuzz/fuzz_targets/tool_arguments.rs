#![no_main]
//! Fuzz the tool-argument parser, the canonical form approval tokens hash, and path
//! reading: never a panic; the canonical form is a fixed point; a plain path has no `.`,
//! `..` or empty component and no back slash (no escape is read as plain).
use libfuzzer_sys::fuzz_target;
use rampart_tools::{CallContext, Policy, canonical_arguments, plain_path, parse_arguments};

const POLICY: &str = r#"
version = 1
[[tools]]
name = "read_file"
risk = "low"
action = "allow"
args.path = { path_under = ["/srv/app/docs"] }
[[tools]]
name = "send_email"
risk = "high"
action = "allow"
args.to = { email_domain_in = ["example.com"] }
args.body = { max_length = 5000, not_contains = ["password"] }
[[tools]]
name = "http_get"
risk = "medium"
action = "allow"
args.url = { url_host_in = ["api.example.com"] }
"#;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else { return };
    if let Ok(v) = parse_arguments(raw) {
        let c = canonical_arguments(&v);
        let again = parse_arguments(&c).expect("the canonical form parses");
        assert_eq!(canonical_arguments(&again), c, "canonical form is not a fixed point");
    }
    if let Some(parts) = plain_path(raw) {
        assert!(
            parts.iter().all(|p| !p.is_empty() && *p != "." && *p != ".." && !p.contains('\\')),
            "{parts:?}"
        );
    }
    let Ok(policy) = Policy::from_toml(POLICY) else { return };
    let ctx = CallContext::default();
    for tool in ["read_file", "send_email", "http_get"] {
        let _ = policy.check_raw(tool, raw, &ctx);
    }
});
