//! The linear layer against the rules layer on the same, already-normalized inputs
//! (normalization is shared by every layer and is not counted for either).
//!
//! cargo bench -p rampart-classify --bench linear

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rampart_classify::LinearDetector;
use rampart_core::{Detector, LocalizeConfig, Pipeline, Role, ScanInput, SegmentInput, Trust};
use rampart_normalize::Normalizer;
use std::hint::black_box;
use std::time::{Duration, Instant};

// The same input as `rampart-core`'s pipeline bench.
#[path = "../../core/benches/support/prose.rs"]
mod prose;
use prose::prompt;

fn input<'a>(normalizer: &Normalizer, text: &'a str) -> ScanInput<'a> {
    ScanInput {
        segments: vec![SegmentInput {
            index: 0,
            role: Role::User,
            trust: Trust::Untrusted,
            text,
            normalized: normalizer.normalize(text),
            windows: LocalizeConfig::default().windows(text),
        }],
        deadline: Instant::now() + Duration::from_secs(3600),
        localize: LocalizeConfig::default(),
    }
}

fn bench(c: &mut Criterion) {
    let pipeline = Pipeline::default_pipeline().expect("default pipeline");
    let rules = pipeline.detectors()[0].clone();
    let linear = LinearDetector::embedded().expect("embedded model");
    let normalizer = Normalizer::default();

    let mut g = c.benchmark_group("layer");
    for (name, len) in [
        ("short_100B", 100),
        ("typical_2KB", 2048),
        ("long_64KB", 65536),
    ] {
        let text = prompt(len);
        let inp = input(&normalizer, &text);
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::new("rules", name), &inp, |b, i| {
            b.iter(|| black_box(rules.detect(black_box(i))))
        });
        g.bench_with_input(BenchmarkId::new("linear", name), &inp, |b, i| {
            b.iter(|| black_box(linear.detect(black_box(i))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
