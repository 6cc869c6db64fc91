#![no_main]
//! Fuzz the rule-pack parser and compiler: arbitrary TOML never panics; a pack that parses
//! either compiles or reports errors, and a compiled matcher can scan.
use libfuzzer_sys::fuzz_target;
use rampart_normalize::Normalizer;
use rampart_rules::{MatcherBuilder, RulePack};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(pack) = RulePack::parse(src, "fuzz.toml") else { return };
    if let Ok(m) = MatcherBuilder::new().add_pack(pack).build() {
        let _ = m.scan(&Normalizer::default().normalize(src));
    }
});
