//! The ONNX Runtime backend: for model directories that ship `model.onnx` (or
//! `onnx/model.onnx`, the layout of Optimum exports on the hub) instead of, or beside,
//! `model.safetensors`.
//!
//! ONNX Runtime is a C++ library; Rampart does not link it. The `ort` crate loads it at run
//! time (`load-dynamic`) from the path the user gives (the layer's `onnxruntime` option, else
//! the `ORT_DYLIB_PATH` environment variable, else [`set_default_library`]'s path: the CLI
//! sets the copy `rampart models onnxruntime` installed from the `onnxruntime` PyPI wheel).
//! Without one, an ONNX model is a clear load error, never a silent fallback. The library is
//! loaded once per process; asking for a different one later is an error too.

use crate::error::{Result, TransformerError};
use crate::model::Batch;
use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The environment variable naming the ONNX Runtime shared library.
pub const ORT_DYLIB_ENV: &str = "ORT_DYLIB_PATH";

/// The library to use when neither the layer nor `$ORT_DYLIB_PATH` names one (the CLI sets it
/// to the copy `rampart models onnxruntime` installed, when there is one).
static DEFAULT_LIBRARY: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Sets the library used when neither the layer's `onnxruntime` option nor
/// `$ORT_DYLIB_PATH` names one.
pub fn set_default_library(path: PathBuf) {
    if let Ok(mut d) = DEFAULT_LIBRARY.lock() {
        *d = Some(path);
    }
}

/// The ONNX Runtime library this process loaded, and its environment. Only a success is
/// kept: a wrong path can be corrected without restarting the process.
static RUNTIME: Mutex<Option<(PathBuf, Environment)>> = Mutex::new(None);

fn backend(e: impl std::fmt::Display) -> TransformerError {
    TransformerError::Backend(e.to_string())
}

/// Loads the ONNX Runtime library once per process (`lib`, else `$ORT_DYLIB_PATH`, else the
/// default set by [`set_default_library`]).
fn runtime(lib: Option<&Path>) -> Result<Environment> {
    let wanted: Option<PathBuf> = lib
        .map(Path::to_path_buf)
        .or_else(|| {
            std::env::var_os(ORT_DYLIB_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .or_else(|| DEFAULT_LIBRARY.lock().ok().and_then(|d| d.clone()));
    let mut loaded = RUNTIME
        .lock()
        .map_err(|_| backend("ONNX Runtime loader lock poisoned"))?;
    if let Some((path, env)) = &*loaded {
        // The same file named two ways (relative and absolute, a symlink) is the same library.
        let same = |a: &Path, b: &Path| {
            a == b
                || matches!(
                    (std::fs::canonicalize(a), std::fs::canonicalize(b)),
                    (Ok(x), Ok(y)) if x == y
                )
        };
        if let Some(w) = &wanted
            && !same(w, path)
        {
            return Err(TransformerError::Options(format!(
                "ONNX Runtime is already loaded from {} in this process; cannot also load {}",
                path.display(),
                w.display()
            )));
        }
        return Ok(env.clone());
    }
    let Some(path) = wanted else {
        return Err(TransformerError::Options(format!(
            "this model is ONNX and needs the ONNX Runtime library: set `onnxruntime = \
             \"/path/to/libonnxruntime.so\"` on the layer or {ORT_DYLIB_ENV} (`rampart models \
             onnxruntime` fetches it from PyPI)"
        )));
    };
    if !path.is_file() {
        return Err(TransformerError::Options(format!(
            "ONNX Runtime library {} does not exist",
            path.display()
        )));
    }
    let env = ort::init_from(&path)
        .map_err(|e| {
            TransformerError::Options(format!(
                "cannot load ONNX Runtime from {}: {e}",
                path.display()
            ))
        })?
        .with_name("rampart")
        .build()
        .map_err(|e| backend(format!("ONNX Runtime environment: {e}")))?;
    *loaded = Some((path, env.clone()));
    Ok(env)
}

/// Where a model directory keeps its ONNX graph, if anywhere.
pub fn find_model(dir: &Path) -> Option<PathBuf> {
    ["model.onnx", "onnx/model.onnx"]
        .iter()
        .map(|p| dir.join(p))
        .find(|p| p.is_file())
}

/// What one graph input receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Ids,
    Mask,
    /// All zeros (one segment), as BERT exports with `token_type_ids` expect.
    TokenTypes,
}

/// A sequence-classification graph in an ONNX Runtime session.
pub(crate) struct OnnxNet {
    // `Session::run` takes `&mut self`; the lock serializes passes, each of which uses the
    // session's own intra-op threads.
    session: Mutex<Session>,
    /// The graph's inputs by name, in its order.
    inputs: Vec<(String, Input)>,
    labels: usize,
    path: PathBuf,
}

impl std::fmt::Debug for OnnxNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxNet")
            .field("path", &self.path)
            .field("inputs", &self.inputs)
            .field("labels", &self.labels)
            .finish_non_exhaustive()
    }
}

impl OnnxNet {
    /// Opens `path` with `threads` intra-op threads (0: ONNX Runtime's default, all cores).
    pub fn load(path: &Path, lib: Option<&Path>, threads: usize, labels: usize) -> Result<Self> {
        let env = runtime(lib)?;
        let mut builder = Session::builder(&env)
            .map_err(backend)?
            .with_optimization_level(GraphOptimizationLevel::Level3)
            .map_err(backend)?;
        if threads > 0 {
            builder = builder.with_intra_threads(threads).map_err(backend)?;
        }
        let session = builder
            .commit_from_file(path)
            .map_err(|e| TransformerError::Io {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        let mut inputs = Vec::new();
        for outlet in session.inputs() {
            let kind = match outlet.name() {
                "input_ids" => Input::Ids,
                "attention_mask" => Input::Mask,
                "token_type_ids" => Input::TokenTypes,
                other => {
                    return Err(TransformerError::Unsupported(format!(
                        "{}: graph input {other:?} (expected input_ids, attention_mask and \
                         optionally token_type_ids)",
                        path.display()
                    )));
                }
            };
            inputs.push((outlet.name().to_string(), kind));
        }
        if !inputs.iter().any(|(_, k)| *k == Input::Ids) {
            return Err(TransformerError::Unsupported(format!(
                "{}: the graph has no input_ids input",
                path.display()
            )));
        }
        if session.outputs().is_empty() {
            return Err(TransformerError::Unsupported(format!(
                "{}: the graph has no outputs",
                path.display()
            )));
        }
        Ok(OnnxNet {
            session: Mutex::new(session),
            inputs,
            labels,
            path: path.to_path_buf(),
        })
    }

    /// Logits `[batch][labels]` of a padded batch (the graph's first output).
    pub fn forward(&self, batch: &Batch) -> Result<Vec<Vec<f32>>> {
        let shape = [batch.batch as i64, batch.len as i64];
        let widen = |v: &[u32]| -> Vec<i64> { v.iter().map(|&x| i64::from(x)).collect() };
        let mut feed: Vec<(String, ort::value::DynValue)> = Vec::with_capacity(self.inputs.len());
        for (name, kind) in &self.inputs {
            let data = match kind {
                Input::Ids => widen(&batch.ids),
                Input::Mask => widen(&batch.mask),
                Input::TokenTypes => vec![0i64; batch.ids.len()],
            };
            let t = Tensor::from_array((shape, data)).map_err(backend)?;
            feed.push((name.clone(), t.into_dyn()));
        }
        let mut session = self
            .session
            .lock()
            .map_err(|_| backend("ONNX session lock poisoned"))?;
        let outputs = session.run(feed).map_err(backend)?;
        let (out_shape, data) = outputs[0].try_extract_tensor::<f32>().map_err(backend)?;
        let dims: Vec<i64> = out_shape.iter().copied().collect();
        if dims != [batch.batch as i64, self.labels as i64] {
            return Err(TransformerError::Backend(format!(
                "{}: output shape {dims:?}, expected [{}, {}] (batch, labels in config.json)",
                self.path.display(),
                batch.batch,
                self.labels
            )));
        }
        Ok(data.chunks(self.labels).map(<[f32]>::to_vec).collect())
    }
}
