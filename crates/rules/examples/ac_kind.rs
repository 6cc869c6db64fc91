//! Build time and overlapping-search time of the default pack's literal automaton as a DFA
//! and as a contiguous NFA (dev tool): `ac_kind corpus.jsonl`.
#[path = "support/corpus.rs"]
mod corpus;
use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use rampart_normalize::Normalizer;
use rampart_rules::{MatcherBuilder, RulePack};
use std::time::Instant;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: ac_kind corpus.jsonl");
    let n = Normalizer::default();
    let folded: Vec<String> = corpus::texts(&path)
        .iter()
        .map(|t| n.normalize(t).views[1].text.clone())
        .collect();
    let m = MatcherBuilder::new()
        .add_pack(RulePack::default_pack().expect("pack"))
        .build()
        .expect("build");
    let pats: Vec<&str> = m.literal_patterns().collect();
    println!("{} patterns", pats.len());
    for kind in [AhoCorasickKind::DFA, AhoCorasickKind::ContiguousNFA] {
        let t = Instant::now();
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .kind(Some(kind))
            .build(&pats)
            .expect("ac");
        let b = t.elapsed();
        let t = Instant::now();
        let hits: usize = folded
            .iter()
            .map(|f| ac.find_overlapping_iter(f).count())
            .sum();
        println!(
            "{kind:?}: build {b:?}, search {:?}, {hits} hits",
            t.elapsed()
        );
    }
}
