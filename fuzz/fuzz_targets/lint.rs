#![no_main]
//! Fuzz the linter: any UTF-8 text linted as a Python module never panics, and every
//! finding points inside the text.
use libfuzzer_sys::fuzz_target;
use rampart_lint::{LintConfig, Linter};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(linter) = Linter::new(LintConfig::default()) else {
        return;
    };
    let lines = src.lines().count().max(1);
    for f in linter.lint_source("fuzz.py", src) {
        assert!(f.line >= 1 && f.line <= lines + 1, "line {} of {lines}", f.line);
    }
});
