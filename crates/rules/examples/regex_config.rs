//! Start-up cost of the default pack's regexes under meta-regex configurations, or with
//! `--states` the NFA size of the largest (dev tool):
//!     cargo run --release -p rampart-rules --example regex_config [cs [ascii]] [--states]
use rampart_rules::{RuleMatch, RulePack};
use regex_automata::meta::Regex;
use regex_automata::nfa::thompson::WhichCaptures;
use std::time::Instant;
fn main() {
    let pack = RulePack::default_pack().expect("pack");
    let ci = std::env::args().nth(1).as_deref() != Some("cs");
    let unicode = std::env::args().nth(2).as_deref() != Some("ascii");
    let hirs: Vec<_> = pack
        .rules
        .iter()
        .filter_map(|r| match &r.matcher {
            RuleMatch::Regex { pattern } => regex_syntax::ParserBuilder::new()
                .case_insensitive(ci && !r.case_sensitive)
                .unicode(unicode)
                .utf8(unicode)
                .build()
                .parse(pattern)
                .ok(),
            _ => None,
        })
        .collect();
    if std::env::args().any(|a| a == "--states") {
        let mut rows: Vec<(usize, u128, String)> = pack
            .rules
            .iter()
            .filter_map(|r| match &r.matcher {
                RuleMatch::Regex { pattern } => {
                    let h = regex_syntax::ParserBuilder::new()
                        .case_insensitive(!r.case_sensitive)
                        .build()
                        .parse(pattern)
                        .ok()?;
                    let t = Instant::now();
                    let nfa = regex_automata::nfa::thompson::Compiler::new()
                        .build_from_hir(&h)
                        .ok()?;
                    let us = t.elapsed().as_micros();
                    Some((
                        nfa.states().len(),
                        us,
                        format!("{} {}", r.id, pattern.chars().take(90).collect::<String>()),
                    ))
                }
                _ => None,
            })
            .collect();
        rows.sort();
        let total: usize = rows.iter().map(|r| r.0).sum();
        println!("total NFA states {total}");
        for (n, us, id) in rows.iter().rev().take(25) {
            println!("{n:>7} {us:>6}us {id}");
        }
        return;
    }
    let base = || {
        Regex::config()
            .auto_prefilter(false)
            .nfa_size_limit(Some(1 << 20))
            .hybrid_cache_capacity(2 << 20)
    };
    let configs = [
        ("current", base()),
        ("implicit", base().which_captures(WhichCaptures::Implicit)),
        (
            "implicit, no onepass/backtrack",
            base()
                .which_captures(WhichCaptures::Implicit)
                .onepass(false)
                .backtrack(false),
        ),
        (
            "implicit, no onepass/backtrack/dfa",
            base()
                .which_captures(WhichCaptures::Implicit)
                .onepass(false)
                .backtrack(false)
                .dfa(false),
        ),
        (
            "none, no onepass/backtrack/dfa",
            base()
                .which_captures(WhichCaptures::None)
                .onepass(false)
                .backtrack(false)
                .dfa(false),
        ),
    ];
    for (name, cfg) in configs {
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = Instant::now();
            for h in &hirs {
                let _ = Regex::builder()
                    .configure(cfg.clone())
                    .build_from_hir(h)
                    .expect("build");
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{name:<40} {:.1} ms for {} regexes", best * 1e3, hirs.len());
    }
}
