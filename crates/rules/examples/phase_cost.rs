//! Where a rules-only scan spends its time, phase by phase, on one thread (dev tool):
//! start-up (pack parse + compile), normalization alone, the matcher alone on the
//! normalized views, and the whole deterministic pipeline (`rules_pipeline().scan_text`).
//!     cargo run --release -p rampart-rules --example phase_cost -- bench-data/corpus.jsonl
//! The corpus is the one `scripts/bench/bench_vs_ripgrep.sh` writes: one `{"text": …}` per
//! line (read with a plain string search, good enough for timing).
use rampart_normalize::Normalizer;
use rampart_rules::{MatcherBuilder, RulePack, rules_pipeline};
use std::time::Instant;

fn best_of_3(mut f: impl FnMut() -> usize) -> (f64, usize) {
    let mut best = f64::INFINITY;
    let mut out = 0;
    for _ in 0..3 {
        let t = Instant::now();
        out = f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, out)
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: phase_cost corpus.jsonl");
    let data = std::fs::read_to_string(path).expect("read the corpus");
    let texts: Vec<String> = data
        .lines()
        .filter_map(|l| {
            let i = l.find("\"text\": \"")? + 9;
            Some(l[i..l.len().saturating_sub(2)].replace("\\n", "\n"))
        })
        .collect();
    let mb = texts.iter().map(String::len).sum::<usize>() as f64 / 1e6;
    println!("{} prompts, {mb:.1} MB", texts.len());
    let row = |name: &str, s: f64, extra: String| {
        println!("{name:<28} {s:7.3} s {:8.1} MB/s  {extra}", mb / s);
    };

    let t = Instant::now();
    let pack = RulePack::default_pack().expect("pack");
    println!(
        "{:<28} {:7.3} s",
        "start-up: parse the pack",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let _m = MatcherBuilder::new().add_pack(pack).build().expect("build");
    println!(
        "{:<28} {:7.3} s",
        "start-up: compile",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let pipeline = rules_pipeline().expect("pipeline");
    println!(
        "{:<28} {:7.3} s",
        "start-up (rules_pipeline)",
        t.elapsed().as_secs_f64()
    );

    // `--pipeline` times only the whole pipeline (for a profiler).
    let only_pipeline = std::env::args().any(|a| a == "--pipeline");
    let n = Normalizer::default();
    if !only_pipeline {
        let (s, views) = best_of_3(|| texts.iter().map(|t| n.normalize(t).views.len()).sum());
        row("normalize", s, format!("{views} views"));

        let normalized: Vec<_> = texts.iter().map(|t| n.normalize(t)).collect();
        let m = MatcherBuilder::new()
            .add_pack(RulePack::default_pack().expect("pack"))
            .build()
            .expect("build");
        let (s, hits) = best_of_3(|| normalized.iter().map(|nz| m.scan(nz).hits.len()).sum());
        row("matcher (pre-normalized)", s, format!("{hits} hits"));
    }

    let (s, blocks) = best_of_3(|| {
        texts
            .iter()
            .filter_map(|t| pipeline.scan_text(t).ok())
            .filter(|o| o.decision.action == rampart_core::Action::Block)
            .count()
    });
    row("pipeline.scan_text", s, format!("{blocks} BLOCK"));
}
