//! Model weights from a base checkpoint and a fine-tuning overlay.
//!
//! A fine-tuned model is shipped as what training changed (`overlay.safetensors`); the rest
//! comes from a published base checkpoint. [`merge`] puts the two together into one
//! `model.safetensors` a model directory can hold: the base tensors renamed for the target
//! architecture (e.g. `bert.` in front of a bare `BertModel`'s names), overridden and
//! extended by the overlay.
//!
//! ```
//! use rampart_transformer::overlay::merge;
//! use safetensors::{Dtype, SafeTensors, tensor::TensorView};
//! use std::collections::BTreeMap;
//!
//! let file = |tensors: &[(&str, f32)]| {
//!     let bytes: Vec<Vec<u8>> = tensors.iter().map(|(_, v)| v.to_le_bytes().to_vec()).collect();
//!     let views: BTreeMap<String, TensorView<'_>> = tensors
//!         .iter()
//!         .zip(&bytes)
//!         .map(|((n, _), b)| ((*n).to_owned(), TensorView::new(Dtype::F32, vec![1], b).unwrap()))
//!         .collect();
//!     safetensors::serialize(&views, None).unwrap()
//! };
//! let base = file(&[("pooler.weight", 1.0), ("embeddings.weight", 2.0)]);
//! let overlay = file(&[("bert.pooler.weight", 3.0), ("classifier.bias", 4.0)]);
//! let (merged, stats) = merge(&base, &overlay, "bert.", &[]).unwrap();
//! assert_eq!((stats.base_tensors, stats.replaced, stats.added), (2, 1, 1));
//! let st = SafeTensors::deserialize(&merged).unwrap();
//! assert_eq!(st.tensor("bert.pooler.weight").unwrap().data(), 3.0f32.to_le_bytes());
//! assert_eq!(st.tensor("bert.embeddings.weight").unwrap().data(), 2.0f32.to_le_bytes());
//! ```

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensorError, SafeTensors};
use std::collections::{BTreeMap, HashMap};

/// What [`merge`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeStats {
    /// Base tensors kept (renamed), dropped ones not counted.
    pub base_tensors: usize,
    /// Overlay tensors that replaced a base tensor.
    pub replaced: usize,
    /// Overlay tensors not in the base (e.g. the classifier head).
    pub added: usize,
}

/// Why a base and an overlay could not be merged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// The base file is not a safetensors file.
    #[error("reading the base safetensors")]
    ReadBase(#[source] SafeTensorError),
    /// The overlay file is not a safetensors file.
    #[error("reading the overlay safetensors")]
    ReadOverlay(#[source] SafeTensorError),
    /// An overlay tensor replaces a base tensor of another dtype or shape.
    #[error(
        "overlay tensor {name} is {dtype:?} {shape:?}, the base has {base_dtype:?} {base_shape:?}"
    )]
    Mismatch {
        /// The tensor's (merged) name.
        name: String,
        /// The overlay's dtype.
        dtype: Dtype,
        /// The overlay's shape.
        shape: Vec<usize>,
        /// The base's dtype.
        base_dtype: Dtype,
        /// The base's shape.
        base_shape: Vec<usize>,
    },
    /// An overlay tensor under the base prefix replaces no base tensor: a renamed or
    /// misspelled layer that loaders would ignore, keeping the base weights.
    #[error("overlay tensor {0} matches no base tensor")]
    Unmatched(String),
    /// The overlay holds no tensors.
    #[error("the overlay holds no tensors")]
    EmptyOverlay,
    /// The merged tensors could not be serialized.
    #[error("writing safetensors")]
    Write(#[source] SafeTensorError),
}

/// Merges a base safetensors file and an overlay: every base tensor (except `dropped`) under
/// `prefix` + its name, then every overlay tensor by its own name. An overlay tensor that
/// replaces a base tensor must have the same dtype and shape; one under `prefix` that matches
/// no base tensor is an error (a renamed or misspelled layer would otherwise be ignored by
/// loaders and keep the base weights). Returns the merged file's bytes.
pub fn merge(
    base: &[u8],
    overlay: &[u8],
    prefix: &str,
    dropped: &[String],
) -> Result<(Vec<u8>, MergeStats), MergeError> {
    let base = SafeTensors::deserialize(base).map_err(MergeError::ReadBase)?;
    let over = SafeTensors::deserialize(overlay).map_err(MergeError::ReadOverlay)?;
    let mut out: BTreeMap<String, TensorView<'_>> = BTreeMap::new();
    for (name, view) in base.tensors() {
        if dropped.iter().any(|d| d == &name) {
            continue;
        }
        out.insert(format!("{prefix}{name}"), view);
    }
    let base_tensors = out.len();
    let (mut replaced, mut added) = (0, 0);
    for (name, view) in over.tensors() {
        match out.get(&name) {
            Some(old) => {
                if old.dtype() != view.dtype() || old.shape() != view.shape() {
                    return Err(MergeError::Mismatch {
                        dtype: view.dtype(),
                        shape: view.shape().to_vec(),
                        base_dtype: old.dtype(),
                        base_shape: old.shape().to_vec(),
                        name,
                    });
                }
                replaced += 1;
            }
            None => {
                if !prefix.is_empty() && name.starts_with(prefix) {
                    return Err(MergeError::Unmatched(name));
                }
                added += 1;
            }
        }
        out.insert(name, view);
    }
    if replaced + added == 0 {
        return Err(MergeError::EmptyOverlay);
    }
    let metadata = HashMap::from([("format".to_owned(), "pt".to_owned())]);
    let bytes = safetensors::serialize(&out, Some(metadata)).map_err(MergeError::Write)?;
    Ok((
        bytes,
        MergeStats {
            base_tensors,
            replaced,
            added,
        },
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report

    use super::*;

    /// (name, dtype, shape, bytes) → a safetensors file.
    fn file(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
        let views: BTreeMap<String, TensorView<'_>> = tensors
            .iter()
            .map(|(n, d, s, b)| ((*n).to_owned(), TensorView::new(*d, s.clone(), b).unwrap()))
            .collect();
        safetensors::serialize(&views, None).unwrap()
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn base() -> Vec<u8> {
        file(&[
            ("embeddings.weight", Dtype::F32, vec![2, 2], f32s(&[1.; 4])),
            (
                "encoder.dense.weight",
                Dtype::F32,
                vec![1, 2],
                f32s(&[2.; 2]),
            ),
            ("pooler.weight", Dtype::F32, vec![2], f32s(&[3.; 2])),
            ("embeddings.position_ids", Dtype::I64, vec![2], vec![0; 16]),
        ])
    }

    #[test]
    fn renames_replaces_adds_and_drops() {
        let overlay = file(&[
            ("bert.pooler.weight", Dtype::F32, vec![2], f32s(&[-2.; 2])),
            ("classifier.bias", Dtype::F32, vec![2], f32s(&[0.25, -0.25])),
        ]);
        let dropped = ["embeddings.position_ids".to_owned()];
        let (bytes, stats) = merge(&base(), &overlay, "bert.", &dropped).unwrap();
        assert_eq!(
            stats,
            MergeStats {
                base_tensors: 3,
                replaced: 1,
                added: 1
            }
        );
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let mut names = st.names();
        names.sort();
        assert_eq!(
            names,
            [
                "bert.embeddings.weight",
                "bert.encoder.dense.weight",
                "bert.pooler.weight",
                "classifier.bias"
            ]
        );
        assert_eq!(
            st.tensor("bert.pooler.weight").unwrap().data(),
            f32s(&[-2.; 2])
        );
        assert_eq!(
            st.tensor("bert.embeddings.weight").unwrap().data(),
            f32s(&[1.; 4])
        );
        assert_eq!(
            st.tensor("classifier.bias").unwrap().data(),
            f32s(&[0.25, -0.25])
        );
    }

    #[test]
    fn refuses_a_replacement_of_another_shape_or_dtype() {
        let shape = file(&[(
            "bert.encoder.dense.weight",
            Dtype::F32,
            vec![2, 1],
            f32s(&[0.; 2]),
        )]);
        let e = merge(&base(), &shape, "bert.", &[]).unwrap_err();
        assert!(matches!(e, MergeError::Mismatch { .. }), "{e}");
        assert!(
            e.to_string().contains("[2, 1]") && e.to_string().contains("[1, 2]"),
            "{e}"
        );
        let dtype = file(&[("bert.pooler.weight", Dtype::F64, vec![2], vec![0; 16])]);
        let e = merge(&base(), &dtype, "bert.", &[]).unwrap_err();
        assert!(matches!(e, MergeError::Mismatch { .. }), "{e}");
    }

    #[test]
    fn refuses_an_overlay_tensor_under_the_prefix_that_matches_nothing() {
        let typo = file(&[("bert.pooler.weigth", Dtype::F32, vec![2], f32s(&[0.; 2]))]);
        let e = merge(&base(), &typo, "bert.", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "overlay tensor bert.pooler.weigth matches no base tensor"
        );
        // Without a prefix every unknown name is an addition.
        let (_, stats) = merge(&base(), &typo, "", &[]).unwrap();
        assert_eq!((stats.replaced, stats.added), (0, 1));
    }

    #[test]
    fn refuses_an_empty_overlay_and_files_that_are_not_safetensors() {
        let empty = file(&[]);
        let e = merge(&base(), &empty, "bert.", &[]).unwrap_err();
        assert!(matches!(e, MergeError::EmptyOverlay), "{e}");
        let e = merge(b"not safetensors", &empty, "", &[]).unwrap_err();
        assert!(matches!(e, MergeError::ReadBase(_)), "{e}");
        let e = merge(&base(), b"junk", "", &[]).unwrap_err();
        assert!(matches!(e, MergeError::ReadOverlay(_)), "{e}");
    }
}
