//! The linear layer against the rules layer on the same, already-normalized inputs
//! (normalization is shared by every layer and is not counted for either).
//!
//! cargo bench -p rampart-classify --bench linear
//!
//! `linear` is the layer as configured by default (localized: the whole text and its
//! windows, see `rampart_core::LocalizeConfig`); `linear_whole` scores the whole text only.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rampart_classify::LinearDetector;
use rampart_core::{Detector, LocalizeConfig, Role, ScanInput, SegmentInput, Trust};
use rampart_normalize::Normalizer;
use std::hint::black_box;
use std::time::{Duration, Instant};

// The same input as `rampart-core`'s pipeline bench.
#[path = "../../core/benches/support/prose.rs"]
mod prose;
use prose::prompt;

fn input<'a>(normalizer: &Normalizer, text: &'a str, localize: LocalizeConfig) -> ScanInput<'a> {
    ScanInput {
        segments: vec![SegmentInput {
            index: 0,
            role: Role::User,
            trust: Trust::Untrusted,
            text,
            normalized: normalizer.normalize(text),
            windows: Default::default(),
        }],
        deadline: Instant::now() + Duration::from_secs(3600),
        localize,
        conversation: None,
    }
}

fn bench(c: &mut Criterion) {
    let pipeline = rampart_rules::rules_pipeline().expect("default pipeline");
    let rules = pipeline
        .detectors()
        .next()
        .expect("the rules layer")
        .clone();
    let linear = LinearDetector::embedded().expect("embedded model");
    let normalizer = Normalizer::default();

    let mut g = c.benchmark_group("layer");
    for (name, len) in [
        ("short_100B", 100),
        ("typical_2KB", 2048),
        ("long_64KB", 65536),
        ("document_1MiB", 1 << 20),
    ] {
        if len >= 1 << 20 {
            g.sample_size(10);
        }
        let text = prompt(len);
        let inp = input(&normalizer, &text, LocalizeConfig::default());
        let whole = input(
            &normalizer,
            &text,
            LocalizeConfig {
                enabled: false,
                ..LocalizeConfig::default()
            },
        );
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::new("rules", name), &inp, |b, i| {
            b.iter(|| black_box(rules.detect(black_box(i))))
        });
        // Localized (the default): the whole text and every window of up to 3 sentences.
        g.bench_with_input(BenchmarkId::new("linear", name), &inp, |b, i| {
            b.iter(|| black_box(linear.detect(black_box(i))))
        });
        // The whole text only (`[localize] enabled = false`), for the cost of localizing.
        g.bench_with_input(BenchmarkId::new("linear_whole", name), &whole, |b, i| {
            b.iter(|| black_box(linear.detect(black_box(i))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
