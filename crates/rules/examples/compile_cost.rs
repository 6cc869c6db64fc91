//! Start-up cost per regex rule of the default pack (dev tool): compile time, anchor-plan
//! time and parse times, slowest rules first.
//!     cargo run --release -p rampart-rules --example compile_cost
use rampart_rules::{RuleMatch, RulePack};
use regex_automata::meta::Regex;
use std::time::Instant;
fn main() {
    let pack = RulePack::default_pack().expect("pack");
    let mut rows = Vec::new();
    let mut tot = (0u128, 0u128, 0u128);
    for r in &pack.rules {
        if let RuleMatch::Regex { pattern } = &r.matcher {
            let syntax =
                regex_automata::util::syntax::Config::new().case_insensitive(!r.case_sensitive);
            let t = Instant::now();
            for _ in 0..5 {
                let _ = Regex::builder()
                    .syntax(syntax)
                    .configure(Regex::config().auto_prefilter(false))
                    .build(pattern);
            }
            let c = t.elapsed().as_micros() / 5;
            let t = Instant::now();
            for _ in 0..5 {
                let _ = rampart_rules::anchors::regex_anchor_plan(pattern, r.case_sensitive);
            }
            let a = t.elapsed().as_micros() / 5;
            let t = Instant::now();
            for _ in 0..5 {
                let _ = regex_syntax::ParserBuilder::new()
                    .case_insensitive(!r.case_sensitive)
                    .build()
                    .parse(pattern);
            }
            let pc = t.elapsed().as_micros() / 5;
            let t = Instant::now();
            for _ in 0..5 {
                let _ = regex_syntax::ParserBuilder::new()
                    .case_insensitive(false)
                    .build()
                    .parse(pattern);
            }
            let pn = t.elapsed().as_micros() / 5;
            let t = Instant::now();
            for _ in 0..5 {
                let hir = regex_syntax::ParserBuilder::new()
                    .case_insensitive(!r.case_sensitive)
                    .build()
                    .parse(pattern)
                    .expect("pattern parses");
                let _ = Regex::builder()
                    .configure(Regex::config().auto_prefilter(false))
                    .build_from_hir(&hir);
            }
            let fh = t.elapsed().as_micros() / 5;
            tot.0 += pc;
            tot.1 += pn;
            tot.2 += fh;
            rows.push((c, a, r.id.clone(), pattern.clone()));
        }
    }
    rows.sort();
    let (tc, ta) = rows.iter().fold((0, 0), |s, r| (s.0 + r.0, s.1 + r.1));
    println!(
        "{} regexes: compile {} us, anchor plan {} us",
        rows.len(),
        tc,
        ta
    );
    println!(
        "parse ci {} us, parse plain {} us, parse+build_from_hir {} us",
        tot.0, tot.1, tot.2
    );
    for (c, a, id, p) in rows.iter().rev().take(15) {
        println!("{c:>7} {a:>7} {id} {}", &p[..p.len().min(110)]);
    }
}
