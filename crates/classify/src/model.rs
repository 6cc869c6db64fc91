//! The model: weights, bias, calibration, threshold, and its file format.
//!
//! File layout (all integers little-endian), schema version [`SCHEMA_VERSION`]:
//!
//! ```text
//! 0   8  magic  b"RAMPLIN\0"
//! 8   4  schema version (u32)
//! 12  4  header length H (u32)
//! 16  H  header: UTF-8 JSON (ModelHeader, unknown fields rejected)
//! ..  4N weights: N = 2^bits f32
//! ..  32 BLAKE3 of every byte before it
//! ```

use crate::features::{FeatureConfig, dot};
use serde::{Deserialize, Serialize};

/// The file magic.
pub const MAGIC: &[u8; 8] = b"RAMPLIN\0";
/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = 1;
/// Largest header accepted.
const MAX_HEADER: usize = 1 << 20;

/// Platt scaling: `p = sigmoid(a * margin + b)`, with `a > 0` so it is monotone.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Slope (must be > 0).
    pub a: f32,
    /// Intercept.
    pub b: f32,
}

impl Calibration {
    /// The identity-like calibration `sigmoid(margin)`.
    pub const IDENTITY: Calibration = Calibration { a: 1.0, b: 0.0 };

    /// The calibrated probability of a raw margin.
    pub fn apply(&self, margin: f32) -> f32 {
        sigmoid(self.a * margin + self.b)
    }
}

/// The logistic function.
pub fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// What the model was trained on and how (recorded, not used for scoring).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// Training datasets (names as given to `rampart train`).
    pub train: Vec<String>,
    /// Validation datasets (calibration and threshold).
    pub valid: Vec<String>,
    /// Random seed.
    pub seed: u64,
    /// Epochs.
    pub epochs: u32,
    /// L2 strength.
    pub l2: f32,
    /// AdaGrad base learning rate.
    pub learning_rate: f32,
    /// Training examples (attack, benign).
    pub train_counts: [usize; 2],
    /// Validation examples (attack, benign).
    pub valid_counts: [usize; 2],
}

/// The JSON header of a model file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelHeader {
    /// Model name, e.g. `linear-v3`.
    pub name: String,
    /// Feature extraction.
    pub features: FeatureConfig,
    /// Bias of the linear margin.
    pub bias: f32,
    /// Calibration of the margin into a probability.
    pub calibration: Calibration,
    /// Decision threshold on the calibrated probability (attack at or above).
    pub threshold: f32,
    /// The false-positive rate the threshold was chosen for.
    pub target_fpr: f32,
    /// The false-positive rate the threshold gave on the benign validation data.
    pub validation_fpr: f32,
    /// How it was trained.
    pub provenance: Provenance,
}

/// Why a model file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Shorter than its fixed parts.
    #[error("model file is truncated ({0} bytes)")]
    Truncated(usize),
    /// Not a Rampart linear model.
    #[error("not a Rampart linear model (bad magic)")]
    BadMagic,
    /// Written by another schema version.
    #[error("unsupported model schema version {found} (this build reads {SCHEMA_VERSION})")]
    Version {
        /// The version in the file.
        found: u32,
    },
    /// The checksum does not match the contents.
    #[error("model checksum mismatch: the file is corrupt")]
    Checksum,
    /// The header is not valid.
    #[error("invalid model header: {0}")]
    Header(String),
    /// The header's feature configuration is out of range.
    #[error("invalid model header: {0}")]
    Features(crate::features::FeatureConfigError),
    /// The weights section has the wrong size or non-finite values.
    #[error("invalid model weights: {0}")]
    Weights(String),
    /// A model file was rejected (the path, and why).
    #[error("{path}: {source}")]
    InFile {
        /// The path.
        path: String,
        /// Why.
        source: Box<ModelError>,
    },
    /// The file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        message: String,
    },
}

/// A trained linear model, ready to score text.
#[derive(Clone, PartialEq)]
pub struct LinearModel {
    header: ModelHeader,
    weights: Vec<f32>,
}

impl std::fmt::Debug for LinearModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinearModel")
            .field("header", &self.header)
            .field("weights", &self.weights.len())
            .finish()
    }
}

impl LinearModel {
    /// Assembles a model, validating it.
    pub fn new(header: ModelHeader, weights: Vec<f32>) -> Result<LinearModel, ModelError> {
        validate_header(&header)?;
        if weights.len() != header.features.buckets() {
            return Err(ModelError::Weights(format!(
                "expected {} weights for bits = {}, found {}",
                header.features.buckets(),
                header.features.bits,
                weights.len()
            )));
        }
        if let Some(i) = weights.iter().position(|w| !w.is_finite()) {
            return Err(ModelError::Weights(format!("weight {i} is not finite")));
        }
        Ok(LinearModel { header, weights })
    }

    /// The header.
    pub fn header(&self) -> &ModelHeader {
        &self.header
    }

    /// The weights (one per bucket).
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// Replaces calibration and threshold (after training), validating them.
    pub fn set_decision(
        &mut self,
        calibration: Calibration,
        threshold: f32,
        target_fpr: f32,
        validation_fpr: f32,
    ) -> Result<(), ModelError> {
        let mut h = self.header.clone();
        h.calibration = calibration;
        h.threshold = threshold;
        h.target_fpr = target_fpr;
        h.validation_fpr = validation_fpr;
        validate_header(&h)?;
        self.header = h;
        Ok(())
    }

    /// The raw margin `w·x + bias` of one text (lower-cased internally).
    pub fn margin(&self, text: &str) -> f32 {
        dot(&self.header.features, &self.weights, text) + self.header.bias
    }

    /// The calibrated probability that `text` is an attack.
    pub fn probability(&self, text: &str) -> f32 {
        self.header.calibration.apply(self.margin(text))
    }

    /// Serializes to the file format.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain structs of numbers and strings cannot fail.
        let header = serde_json::to_vec(&self.header).unwrap_or_default();
        let mut out = Vec::with_capacity(16 + header.len() + self.weights.len() * 4 + 32);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&SCHEMA_VERSION.to_le_bytes());
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        for w in &self.weights {
            out.extend_from_slice(&w.to_le_bytes());
        }
        let sum = blake3::hash(&out);
        out.extend_from_slice(sum.as_bytes());
        out
    }

    /// Parses and validates the file format: magic, version, checksum, header, weights.
    pub fn from_bytes(bytes: &[u8]) -> Result<LinearModel, ModelError> {
        if bytes.len() < 16 + 32 {
            return Err(ModelError::Truncated(bytes.len()));
        }
        if &bytes[..8] != MAGIC {
            return Err(ModelError::BadMagic);
        }
        let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        if version != SCHEMA_VERSION {
            return Err(ModelError::Version { found: version });
        }
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if blake3::hash(body).as_bytes() != sum {
            return Err(ModelError::Checksum);
        }
        let hlen = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
        if hlen > MAX_HEADER || 16 + hlen > body.len() {
            return Err(ModelError::Header(format!(
                "header length {hlen} does not fit the file"
            )));
        }
        let header: ModelHeader = serde_json::from_slice(&body[16..16 + hlen])
            .map_err(|e| ModelError::Header(e.to_string()))?;
        validate_header(&header)?;
        let raw = &body[16 + hlen..];
        let expected = header.features.buckets() * 4;
        if raw.len() != expected {
            return Err(ModelError::Weights(format!(
                "expected {expected} bytes of weights, found {}",
                raw.len()
            )));
        }
        let weights = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        LinearModel::new(header, weights)
    }

    /// Reads and validates a model file.
    pub fn load(path: &std::path::Path) -> Result<LinearModel, ModelError> {
        let bytes = std::fs::read(path).map_err(|e| ModelError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        LinearModel::from_bytes(&bytes).map_err(|e| ModelError::InFile {
            path: path.display().to_string(),
            source: Box::new(e),
        })
    }

    /// Writes the model file.
    pub fn save(&self, path: &std::path::Path) -> Result<(), ModelError> {
        std::fs::write(path, self.to_bytes()).map_err(|e| ModelError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }
}

fn validate_header(h: &ModelHeader) -> Result<(), ModelError> {
    let bad = |m: String| Err(ModelError::Header(m));
    h.features.validate().map_err(ModelError::Features)?;
    if !h.bias.is_finite() {
        return bad("bias is not finite".into());
    }
    if !(h.calibration.a.is_finite() && h.calibration.a > 0.0 && h.calibration.b.is_finite()) {
        return bad(format!(
            "calibration must be monotone increasing (a > 0, finite), got a = {}, b = {}",
            h.calibration.a, h.calibration.b
        ));
    }
    if !(h.threshold > 0.0 && h.threshold <= 1.0) {
        return bad(format!("threshold must be in (0, 1], got {}", h.threshold));
    }
    if !(0.0..=1.0).contains(&h.target_fpr) || !(0.0..=1.0).contains(&h.validation_fpr) {
        return bad("target_fpr and validation_fpr must be in [0, 1]".into());
    }
    Ok(())
}
