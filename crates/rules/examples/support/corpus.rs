//! The corpus the development examples read: one JSON object per line with a `text` field
//! (what `scripts/bench/bench_vs_ripgrep.sh` writes to `bench-data/corpus.jsonl`).

/// The `text` of every line of the JSONL file at `path` that has one.
pub fn texts(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("read the corpus")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_string))
        .collect()
}
