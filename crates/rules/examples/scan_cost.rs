//! Matcher-only throughput over pre-normalized prompts (development measurement).
#[path = "support/corpus.rs"]
mod corpus;
use rampart_normalize::Normalizer;
use rampart_rules::{MatcherBuilder, RulePack};
use std::time::Instant;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: scan_cost corpus.jsonl");
    let texts = corpus::texts(&path);
    let mb = texts.iter().map(String::len).sum::<usize>() as f64 / 1e6;
    let n = Normalizer::default();
    let normalized: Vec<_> = texts.iter().map(|t| n.normalize(t)).collect();
    let m = MatcherBuilder::new()
        .add_pack(RulePack::default_pack().expect("pack"))
        .build()
        .expect("build");
    for _ in 0..3 {
        let t = Instant::now();
        let mut hits = 0;
        for nz in &normalized {
            hits += m.scan(nz).hits.len();
        }
        let s = t.elapsed().as_secs_f64();
        println!("scan: {s:.2}s {:.1} MB/s {hits} hits", mb / s);
    }
}
