//! The fixtures' `reference.json` (written by `scripts/data/make_transformer_fixtures.py`), shared
//! by the native (`reference.rs`) and ONNX Runtime (`onnx.rs`) backend tests.
#![allow(dead_code, clippy::unwrap_used)]

use rampart_transformer::{Classifier, ClassifierOptions, WeightsFormat};
use serde::Deserialize;
use std::path::PathBuf;

/// Largest difference allowed between a Rust logit and the PyTorch reference.
pub const TOL: f32 = 1e-4;

#[derive(Deserialize)]
pub struct Reference {
    pub max_tokens: usize,
    pub stride: usize,
    pub labels: Vec<String>,
    pub cases: Vec<Case>,
}

#[derive(Deserialize)]
pub struct Case {
    pub text: String,
    pub windows: Vec<RefWindow>,
}

#[derive(Deserialize)]
pub struct RefWindow {
    pub ids: Vec<u32>,
    pub span: [usize; 2],
    pub logits: Vec<f32>,
}

/// The fixture directory `testdata/NAME`.
pub fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

/// The fixture's reference.
pub fn reference(name: &str) -> Reference {
    let src = std::fs::read_to_string(dir(name).join("reference.json")).unwrap();
    serde_json::from_str(&src).unwrap()
}

/// The fixture `name` with its reference's window settings.
pub fn load(name: &str, format: WeightsFormat, batch_size: usize, threads: usize) -> Classifier {
    let r = reference(name);
    Classifier::load(
        dir(name),
        &ClassifierOptions {
            max_tokens: Some(r.max_tokens),
            stride: Some(r.stride),
            threads: Some(threads),
            batch_size: Some(batch_size),
            format,
            ..Default::default()
        },
    )
    .unwrap()
}
