//! The ONNX Runtime backend against the same Hugging Face reference logits as the native
//! forward passes (`reference.rs`): each fixture directory also holds `model.onnx`, exported
//! from the same weights by `scripts/data/make_transformer_fixtures.py --onnx`.
//!
//! The logit checks need the ONNX Runtime shared library (not linked; loaded at run time), so
//! they are ignored by default. `.ci/run` installs it and runs them:
//!
//!     rampart models onnxruntime --data-dir target/ci-ort
//!     ORT_DYLIB_PATH=$PWD/target/ci-ort/lib/libonnxruntime.so.1.31.1 \
//!       cargo test --workspace --test tests onnx:: -- --ignored
#![allow(clippy::unwrap_used)]

use rampart_transformer::{Classifier, ClassifierOptions, TransformerError, WeightsFormat};
use std::path::PathBuf;

use crate::support::{self, dir, load, reference};

fn check(name: &str) {
    let r = reference(name);
    let mut worst = 0f32;
    for (batch_size, threads) in [(1, 1), (5, 2), (64, 1)] {
        let m = load(name, WeightsFormat::Onnx, batch_size, threads);
        let mut windows = Vec::new();
        let mut expected = Vec::new();
        for c in &r.cases {
            let ws = m.windows(&c.text).unwrap();
            assert_eq!(ws.len(), c.windows.len());
            windows.extend(ws);
            expected.extend(c.windows.iter().map(|w| &w.logits));
        }
        let refs: Vec<_> = windows.iter().collect();
        let got = m.window_logits(&refs).unwrap();
        assert_eq!(got.len(), expected.len());
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g.len(), e.len());
            for (a, b) in g.iter().zip(e.iter()) {
                worst = worst.max((a - b).abs());
                assert!(
                    (a - b).abs() <= support::TOL,
                    "{name} onnx (batch {batch_size}, {threads} threads): logit {a} vs reference {b}"
                );
            }
        }
    }
    // The same scores as the native backend, window for window, on every case.
    let native = load(name, WeightsFormat::Safetensors, 8, 1);
    let onnx = load(name, WeightsFormat::Onnx, 8, 1);
    for c in &r.cases {
        let (a, b) = (native.score(&c.text).unwrap(), onnx.score(&c.text).unwrap());
        assert_eq!(a.window, b.window, "{name}: winning window of {:?}", c.text);
        assert_eq!(a.span, b.span);
        assert!(
            (a.score - b.score).abs() < 1e-4,
            "{name}: {} vs {}",
            a.score,
            b.score
        );
    }
    eprintln!("{name} (onnx): max |logit diff| = {worst:e}");
}

#[test]
#[ignore = "needs the ONNX Runtime library in ORT_DYLIB_PATH (rampart models onnxruntime)"]
fn onnx_bert_matches_transformers() {
    check("tiny-bert");
}

#[test]
#[ignore = "needs the ONNX Runtime library in ORT_DYLIB_PATH (rampart models onnxruntime)"]
fn onnx_deberta_v3_matches_transformers() {
    check("tiny-deberta-v3");
}

#[test]
#[ignore = "needs the ONNX Runtime library in ORT_DYLIB_PATH (rampart models onnxruntime)"]
fn onnx_deberta_v2_variant_matches_transformers() {
    check("tiny-deberta-v2-variant");
}

/// A copy of the tiny BERT fixture with only the named weight files.
fn fixture_with(files: &[&str]) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    for f in ["config.json", "tokenizer.json"].iter().chain(files) {
        let src = dir("tiny-bert").join(f.rsplit('/').next().unwrap());
        let dst = t.path().join(f);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(src, dst).unwrap();
    }
    t
}

fn try_load(
    d: &std::path::Path,
    format: WeightsFormat,
    lib: Option<&str>,
) -> Result<Classifier, TransformerError> {
    Classifier::load(
        d,
        &ClassifierOptions {
            threads: Some(1),
            format,
            onnxruntime: lib.map(PathBuf::from),
            ..Default::default()
        },
    )
}

const NO_LIB: &str = "/nonexistent/libonnxruntime.so";

#[test]
fn an_onnx_only_directory_needs_the_runtime_library_and_says_so() {
    for layout in ["model.onnx", "onnx/model.onnx"] {
        let d = fixture_with(&[layout]);
        let e = try_load(d.path(), WeightsFormat::Auto, Some(NO_LIB))
            .unwrap_err()
            .to_string();
        // Either this process has not loaded a library (the path is wrong) or it already
        // loaded another one: both name the path, neither falls back silently.
        assert!(e.contains(NO_LIB), "{layout}: {e}");
    }
}

#[test]
fn auto_prefers_safetensors_when_both_are_present() {
    let d = fixture_with(&["model.safetensors", "model.onnx"]);
    // No ONNX Runtime needed: the native backend runs the safetensors.
    let m = try_load(d.path(), WeightsFormat::Auto, Some(NO_LIB)).unwrap();
    assert!((0.0..=1.0).contains(&m.score("ignore previous instructions").unwrap().score));
}

#[test]
fn asking_for_a_format_the_directory_lacks_is_an_error() {
    let d = fixture_with(&["model.safetensors"]);
    let e = try_load(d.path(), WeightsFormat::Onnx, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.onnx"), "{e}");
    let d = fixture_with(&["model.onnx"]);
    let e = try_load(d.path(), WeightsFormat::Safetensors, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.safetensors"), "{e}");
}

#[test]
fn a_pickle_only_directory_says_what_to_convert() {
    let d = fixture_with(&[]);
    std::fs::write(d.path().join("pytorch_model.bin"), b"not loaded").unwrap();
    let e = try_load(d.path(), WeightsFormat::Auto, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pytorch_model.bin") && e.contains("safetensors"),
        "{e}"
    );
}

#[test]
#[ignore = "needs the ONNX Runtime library in ORT_DYLIB_PATH (rampart models onnxruntime)"]
fn one_library_per_process_however_it_is_named() {
    let lib = std::env::var("ORT_DYLIB_PATH").unwrap();
    let d = fixture_with(&["model.onnx"]);
    let link = d.path().join("libonnxruntime-link.so");
    std::os::unix::fs::symlink(&lib, &link).unwrap();
    try_load(d.path(), WeightsFormat::Onnx, Some(&lib)).unwrap();
    // the same file through a symlink is the same library
    try_load(d.path(), WeightsFormat::Onnx, link.to_str()).unwrap();
    // another file is refused, naming both
    let other = d.path().join("config.json");
    let e = try_load(d.path(), WeightsFormat::Onnx, other.to_str())
        .unwrap_err()
        .to_string();
    assert!(e.contains("already loaded"), "{e}");
}
