//! Normalization + rules on short (100 B), typical (2 KB) and long (64 KB) prompts, and a
//! size sweep that shows cost growing linearly with input size (constant throughput).
//!
//! cargo bench -p rampart-core --bench pipeline

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rampart_normalize::Normalizer;
use std::hint::black_box;

#[path = "support/prose.rs"]
mod prose;
use prose::prompt;

fn bench(c: &mut Criterion) {
    let pipeline = rampart_rules::rules_pipeline().expect("default pipeline");
    let normalizer = Normalizer::default();

    let mut g = c.benchmark_group("pipeline");
    for (name, len) in [
        ("short_100B", 100),
        ("typical_2KB", 2048),
        ("long_64KB", 65536),
    ] {
        let text = prompt(len);
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::new("normalize", name), &text, |b, t| {
            b.iter(|| black_box(normalizer.normalize(black_box(t))))
        });
        g.bench_with_input(BenchmarkId::new("normalize+rules", name), &text, |b, t| {
            b.iter(|| black_box(pipeline.scan_text(black_box(t))))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("linearity");
    for kb in [1usize, 4, 16, 64, 256] {
        let text = prompt(kb * 1024);
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(
            BenchmarkId::new("normalize+rules", format!("{kb}KB")),
            &text,
            |b, t| b.iter(|| black_box(pipeline.scan_text(black_box(t)))),
        );
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
