//! Splits the rules-only pipeline's cost into phases over a JSONL corpus, on one thread:
//! start-up (pack parse, matcher compile, the whole pipeline), normalization alone, the
//! matcher alone on pre-normalized views, the pipeline, and the pipeline with its JSON
//! decision; each scan phase best of 3. `--pipeline` times only the pipeline (for a
//! profiler).
//!     cargo run --release -p rampart-core --example phase_cost -- corpus.jsonl [--pipeline]
use rampart_normalize::Normalizer;
use rampart_rules::{MatcherBuilder, RulePack, rules_pipeline};
use std::time::Instant;

/// The shortest of three runs of `f`, in seconds, and what the last run returned.
fn best_of_3<T>(mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..3 {
        let t = Instant::now();
        out = Some(f());
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, out.expect("three runs"))
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: phase_cost FILE.jsonl [--pipeline]");
    let only_pipeline = std::env::args().any(|a| a == "--pipeline");
    let data = std::fs::read_to_string(path).expect("read");
    let texts: Vec<String> = data
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_string))
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let mb = bytes as f64 / 1e6;
    println!("{} prompts, {mb:.1} MB", texts.len());

    let t = Instant::now();
    let pack = RulePack::default_pack().expect("pack");
    println!("start-up, pack parse: {:.3}s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let m = MatcherBuilder::new().add_pack(pack).build().expect("build");
    println!(
        "start-up, matcher compile: {:.3}s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let p = rules_pipeline().expect("pipeline");
    println!(
        "start-up, rules_pipeline: {:.3}s",
        t.elapsed().as_secs_f64()
    );

    if !only_pipeline {
        let n = Normalizer::default();
        let (tn, (views, view_bytes)) = best_of_3(|| {
            let (mut views, mut view_bytes) = (0usize, 0usize);
            for s in &texts {
                let out = n.normalize(s);
                views += out.views.len();
                view_bytes += out.views.iter().map(|v| v.text.len()).sum::<usize>();
            }
            (views, view_bytes)
        });
        println!(
            "normalize: {tn:.2}s {:.1} MB/s ({views} views, {:.1} MB of view text)",
            mb / tn,
            view_bytes as f64 / 1e6
        );
        let normalized: Vec<_> = texts.iter().map(|s| n.normalize(s)).collect();
        let (tm, hits) = best_of_3(|| {
            normalized
                .iter()
                .map(|nz| m.scan(nz).hits.len())
                .sum::<usize>()
        });
        println!("matcher.scan: {tm:.2}s {:.1} MB/s ({hits} hits)", mb / tm);
    }

    let (tp, blocks) = best_of_3(|| {
        texts
            .iter()
            .map(|s| p.scan_text(s).expect("scan"))
            .filter(|o| o.decision.action == rampart_core::Action::Block)
            .count()
    });
    println!("pipeline: {tp:.2}s {:.1} MB/s ({blocks} BLOCK)", mb / tp);
    if only_pipeline {
        return;
    }
    let (tp, json) = best_of_3(|| {
        texts
            .iter()
            .map(|s| {
                let o = p.scan_text(s).expect("scan");
                serde_json::to_string(&o.decision).map_or(0, |j| j.len())
            })
            .sum::<usize>()
    });
    println!(
        "pipeline+json: {tp:.2}s {:.1} MB/s ({:.1} MB json)",
        mb / tp,
        json as f64 / 1e6
    );
}
