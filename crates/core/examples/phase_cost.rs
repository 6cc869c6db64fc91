//! Splits pipeline cost into phases over a JSONL corpus (one thread):
//! `cargo run --release -p rampart-core --example phase_cost -- corpus.jsonl`.
use rampart_normalize::Normalizer;
use std::time::Instant;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: phase_cost FILE.jsonl");
    let data = std::fs::read_to_string(path).expect("read");
    let texts: Vec<String> = data
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_string))
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let mb = bytes as f64 / 1e6;
    let n = Normalizer::default();
    let t = Instant::now();
    let mut views = 0usize;
    let mut view_bytes = 0usize;
    for s in &texts {
        let out = n.normalize(s);
        views += out.views.len();
        view_bytes += out.views.iter().map(|v| v.text.len()).sum::<usize>();
    }
    let tn = t.elapsed().as_secs_f64();
    println!(
        "normalize: {tn:.2}s {:.1} MB/s ({views} views, {:.1} MB of view text)",
        mb / tn,
        view_bytes as f64 / 1e6
    );
    let normalized: Vec<_> = texts.iter().map(|s| n.normalize(s)).collect();
    let m = rampart_rules::MatcherBuilder::new()
        .add_pack(rampart_rules::RulePack::default_pack().expect("pack"))
        .build()
        .expect("build");
    let t = Instant::now();
    let mut hits = 0usize;
    for nz in &normalized {
        hits += m.scan(nz).hits.len();
    }
    let tm = t.elapsed().as_secs_f64();
    println!("matcher.scan: {tm:.2}s {:.1} MB/s ({hits} hits)", mb / tm);
    let p = rampart_rules::rules_pipeline().expect("pipeline");
    let t = Instant::now();
    for s in &texts {
        let _ = p.scan_text(s).expect("scan");
    }
    let tp = t.elapsed().as_secs_f64();
    println!("pipeline: {tp:.2}s {:.1} MB/s", mb / tp);
    let t = Instant::now();
    let mut json = 0usize;
    for s in &texts {
        let o = p.scan_text(s).expect("scan");
        json += serde_json::to_string(&o.decision)
            .map(|j| j.len())
            .unwrap_or(0);
    }
    let tp = t.elapsed().as_secs_f64();
    println!(
        "pipeline+json: {tp:.2}s {:.1} MB/s ({:.1} MB json)",
        mb / tp,
        json as f64 / 1e6
    );
}
