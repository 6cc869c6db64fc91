//! Times forward passes of a model directory on fixed token ids (used by
//! `scripts/bench/bench_transformer_vs_pytorch.py`, which times PyTorch on the same ids).
//!
//! ```text
//! cargo run --release -p rampart-transformer --example bench_transformer -- \
//!     MODEL_DIR IDS.json THREADS ITERS [FORMAT]
//! ```
//! FORMAT: `auto` (default), `safetensors` (Rampart's forward passes) or `onnx` (ONNX Runtime;
//! needs `ORT_DYLIB_PATH`).
//! `IDS.json` is a batch: a list of lists of token ids (special tokens included). Prints one
//! JSON line: median and minimum milliseconds per batch, load time, and the first logits.

use rampart_transformer::{Classifier, ClassifierOptions, WeightsFormat, Window};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (dir, ids, threads, iters, format) = match args.as_slice() {
        [_, d, i, t, n] => (d, i, t, n, "auto"),
        [_, d, i, t, n, f] => (d, i, t, n, f.as_str()),
        _ => {
            return Err(
                "usage: bench_transformer MODEL_DIR IDS.json THREADS ITERS [FORMAT]".into(),
            );
        }
    };
    let format = match format {
        "auto" => WeightsFormat::Auto,
        "safetensors" => WeightsFormat::Safetensors,
        "onnx" => WeightsFormat::Onnx,
        other => {
            return Err(format!("FORMAT must be auto, safetensors or onnx, not {other}").into());
        }
    };
    let threads: usize = threads.parse()?;
    let iters: usize = iters.parse()?;
    let batch: Vec<Vec<u32>> = serde_json::from_str(&std::fs::read_to_string(ids)?)?;
    let t0 = Instant::now();
    let model = Classifier::load(
        dir,
        &ClassifierOptions {
            threads: Some(threads),
            batch_size: Some(batch.len().max(1)),
            positive_labels: None,
            max_tokens: None,
            stride: None,
            format,
            onnxruntime: None,
        },
    )?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let windows: Vec<Window> = batch
        .into_iter()
        .map(|ids| Window { ids, span: 0..0 })
        .collect();
    let refs: Vec<&Window> = windows.iter().collect();
    let mut logits = model.window_logits(&refs)?; // warm-up
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        logits = model.window_logits(&refs)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    let min = times.first().copied().unwrap_or(f64::NAN);
    println!(
        "{}",
        serde_json::json!({
            "median_ms": median, "min_ms": min, "load_ms": load_ms,
            "logits": logits.first(),
        })
    );
    Ok(())
}
