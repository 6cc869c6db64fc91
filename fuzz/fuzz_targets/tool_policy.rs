#![no_main]
//! Fuzz the tool-policy parser, linter and compiler: arbitrary TOML never panics; a policy
//! that compiles can check calls built from the same bytes; the lint never panics either,
//! and a policy the lint passes without errors compiles (the lint's promise).
use libfuzzer_sys::fuzz_target;
use rampart_tools::{CallContext, Policy, lint};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let report = lint(src);
    let compiled = Policy::from_toml(src);
    if !report.has_errors() {
        assert!(compiled.is_ok(), "lint passed a policy that does not load: {src:?}");
    }
    if let Ok(policy) = compiled {
        let ctx = CallContext::default();
        for line in src.lines().take(8) {
            let _ = policy.check_raw(line.trim(), line, &ctx);
        }
    }
});
