//! [`Classifier`]: a model directory loaded once, token windows, batched scoring.

use crate::bert::Bert;
use crate::config::{Architecture, ModelConfig};
use crate::deberta::Deberta;
use crate::error::{Result, TransformerError};
use crate::labels::positive_indices;
use crate::nn::Weights;
use crate::onnx::OnnxNet;
use candle_core::Tensor;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokenizers::{PostProcessor, Tokenizer, TruncationDirection};

/// Default window size in tokens (special tokens included), capped by the model.
pub const DEFAULT_MAX_TOKENS: usize = 512;
/// Default overlap between consecutive windows, in tokens.
pub const DEFAULT_STRIDE: usize = 64;
/// Default number of windows per forward pass.
pub const DEFAULT_BATCH_SIZE: usize = 8;

/// How to load a [`Classifier`].
#[derive(Debug, Clone, Default)]
pub struct ClassifierOptions {
    /// Window size in tokens, special tokens included. Default: the smaller of
    /// [`DEFAULT_MAX_TOKENS`] and the model's `max_position_embeddings` (for models with
    /// absolute positions); must not exceed the latter.
    pub max_tokens: Option<usize>,
    /// Tokens shared by consecutive windows. Default [`DEFAULT_STRIDE`] (a quarter of the
    /// window if that is smaller).
    pub stride: Option<usize>,
    /// Worker threads for the forward passes. Default: all cores. candle's element-wise
    /// kernels use a process-wide pool sized by `CANDLE_NUM_THREADS` (see `DESIGN.md`).
    pub threads: Option<usize>,
    /// Label names whose probabilities make the score; default: decided from the names
    /// (see [`crate::labels::positive_indices`]).
    pub positive_labels: Option<Vec<String>>,
    /// Windows per forward pass. Default [`DEFAULT_BATCH_SIZE`].
    pub batch_size: Option<usize>,
    /// Which weights file to run. Default [`WeightsFormat::Auto`].
    pub format: WeightsFormat,
    /// The ONNX Runtime shared library for ONNX models; default `$ORT_DYLIB_PATH`.
    pub onnxruntime: Option<PathBuf>,
}

/// Which weights of a model directory run, and on which backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightsFormat {
    /// `model.safetensors` if present (Rampart's own forward passes), else `model.onnx` or
    /// `onnx/model.onnx` (ONNX Runtime).
    #[default]
    Auto,
    /// `model.safetensors`, Rampart's own forward passes (pure Rust, candle-core tensors).
    Safetensors,
    /// `model.onnx` or `onnx/model.onnx` through ONNX Runtime (needs its shared library).
    Onnx,
}

/// Padded token ids of several windows.
#[derive(Debug, Clone)]
pub(crate) struct Batch {
    /// `[batch * len]`, row-major.
    pub ids: Vec<u32>,
    /// `[batch * len]`, 1 for tokens, 0 for padding.
    pub mask: Vec<u32>,
    pub batch: usize,
    pub len: usize,
}

#[derive(Debug)]
enum Net {
    /// Rampart's own forward passes, run inside the classifier's rayon pool (only this
    /// backend has one: ONNX Runtime brings its own threads).
    Native {
        model: Native,
        pool: rayon::ThreadPool,
    },
    Onnx(OnnxNet),
}

#[derive(Debug)]
enum Native {
    Bert(Bert),
    Deberta(Deberta),
}

/// One window of a text: its token ids (special tokens included) and the bytes of the text
/// it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Token ids fed to the model.
    pub ids: Vec<u32>,
    /// The byte range of the text its (non-special) tokens come from.
    pub span: Range<usize>,
}

/// The verdict on one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// Probability mass of the positive labels in the highest-scoring window (0..=1).
    pub score: f32,
    /// Byte range of the text covered by that window.
    pub span: Range<usize>,
    /// Index of that window.
    pub window: usize,
    /// Number of windows the text was split into.
    pub windows: usize,
    /// Raw logits of that window, in label order.
    pub logits: Vec<f32>,
}

/// A sequence-classification transformer loaded from a Hugging Face model directory
/// (`config.json`, `tokenizer.json`, `model.safetensors`). Immutable, `Send + Sync`.
pub struct Classifier {
    net: Net,
    arch: Architecture,
    tokenizer: Tokenizer,
    labels: Vec<String>,
    positive: Vec<usize>,
    max_tokens: usize,
    stride: usize,
    specials: usize,
    batch_size: usize,
    pad_id: u32,
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("net", &self.net)
            .field("labels", &self.labels)
            .field("positive", &self.positive)
            .field("max_tokens", &self.max_tokens)
            .field("stride", &self.stride)
            .finish_non_exhaustive()
    }
}

fn io(path: &Path, e: impl std::fmt::Display) -> TransformerError {
    TransformerError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

impl Classifier {
    /// Loads a model directory.
    pub fn load(dir: impl AsRef<Path>, options: &ClassifierOptions) -> Result<Self> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(io(dir, "not a directory"));
        }
        let cfg = ModelConfig::load(&dir.join("config.json"))?;
        let arch = cfg.architecture()?;
        let labels = cfg.labels()?;
        let positive = positive_indices(&labels, options.positive_labels.as_deref())?;
        let safetensors = dir.join("model.safetensors");
        let onnx_file = match options.format {
            WeightsFormat::Safetensors => None,
            WeightsFormat::Auto if safetensors.is_file() => None,
            WeightsFormat::Auto => crate::onnx::find_model(dir),
            WeightsFormat::Onnx => Some(crate::onnx::find_model(dir).ok_or_else(|| {
                io(
                    &dir.join("model.onnx"),
                    "no such file (nor onnx/model.onnx)",
                )
            })?),
        };
        let net = if let Some(path) = onnx_file {
            Net::Onnx(OnnxNet::load(
                &path,
                options.onnxruntime.as_deref(),
                options.threads.unwrap_or(0),
                labels.len(),
            )?)
        } else {
            if !safetensors.is_file() && dir.join("pytorch_model.bin").is_file() {
                return Err(io(
                    &safetensors,
                    "no such file; the directory has pytorch_model.bin (a pickle, which \
                     Rampart does not load): convert it to model.safetensors, or export \
                     model.onnx",
                ));
            }
            let weights = Weights::load(&safetensors)?;
            let model = match arch {
                Architecture::Bert => Native::Bert(Bert::load(&cfg, &weights, labels.len())?),
                Architecture::DebertaV2 => {
                    Native::Deberta(Deberta::load(&cfg, &weights, labels.len())?)
                }
            };
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(options.threads.unwrap_or(0))
                .thread_name(|i| format!("rampart-transformer-{i}"))
                .build()
                .map_err(|e| TransformerError::Options(format!("thread pool: {e}")))?;
            Net::Native { model, pool }
        };
        let limit = match &net {
            Net::Native {
                model: Native::Bert(b),
                ..
            } => Some(b.max_positions()),
            Net::Native {
                model: Native::Deberta(d),
                ..
            } => d.max_positions(),
            // The graph does not say; the config does, as for the native backend.
            Net::Onnx(_) => match arch {
                Architecture::Bert => Some(cfg.max_position_embeddings),
                Architecture::DebertaV2 => cfg
                    .position_biased_input
                    .unwrap_or(true)
                    .then_some(cfg.max_position_embeddings),
            },
        };
        let max_tokens = options
            .max_tokens
            .unwrap_or_else(|| limit.map_or(DEFAULT_MAX_TOKENS, |l| l.min(DEFAULT_MAX_TOKENS)));
        if let Some(l) = limit
            && max_tokens > l
        {
            return Err(TransformerError::Options(format!(
                "max_tokens {max_tokens} exceeds the model's max_position_embeddings {l}"
            )));
        }
        let tok_path = dir.join("tokenizer.json");
        if !tok_path.is_file() {
            return Err(io(&tok_path, "no such file"));
        }
        let mut tokenizer = Tokenizer::from_file(&tok_path)
            .map_err(|e| TransformerError::Tokenizer(e.to_string()))?;
        let specials = tokenizer
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(false));
        if max_tokens < specials + 2 {
            return Err(TransformerError::Options(format!(
                "max_tokens {max_tokens} leaves no room for text ({specials} special tokens)"
            )));
        }
        let room = max_tokens - specials;
        let stride = options.stride.unwrap_or(DEFAULT_STRIDE.min(room / 4));
        if stride >= room {
            return Err(TransformerError::Options(format!(
                "stride {stride} must be smaller than the {room} text tokens of a window"
            )));
        }
        // Windows are cut here (see `windows`), not by the tokenizer's own truncation.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| TransformerError::Tokenizer(e.to_string()))?;
        let batch_size = options.batch_size.unwrap_or(DEFAULT_BATCH_SIZE);
        if batch_size == 0 {
            return Err(TransformerError::Options(
                "batch_size must be at least 1".into(),
            ));
        }
        Ok(Classifier {
            net,
            arch,
            tokenizer,
            labels,
            positive,
            max_tokens,
            stride,
            specials,
            batch_size,
            pad_id: cfg.pad_token_id.unwrap_or(0),
        })
    }

    /// The architecture.
    pub fn architecture(&self) -> Architecture {
        self.arch
    }

    /// Label names in logit order.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The labels whose probabilities make the score.
    pub fn positive_labels(&self) -> Vec<&str> {
        self.positive
            .iter()
            .filter_map(|&i| self.labels.get(i).map(String::as_str))
            .collect()
    }

    /// Window size in tokens (special tokens included).
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Overlap between windows in tokens.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Splits a text into overlapping token windows. Every token of the text is in at least
    /// one window; nothing is dropped.
    pub fn windows(&self, text: &str) -> Result<Vec<Window>> {
        // Tokens of the whole text, then Hugging Face's own truncation-with-stride on them
        // (the windows `tokenizers` makes with `return_overflowing_tokens`), then the special
        // tokens of each window.
        let mut enc = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| TransformerError::Tokenizer(e.to_string()))?;
        let room = self.max_tokens - self.specials;
        enc.truncate(room, self.stride, TruncationDirection::Right);
        let rest = enc.take_overflowing();
        let mut pieces = Vec::with_capacity(1 + rest.len());
        for piece in std::iter::once(enc).chain(rest) {
            pieces.push(
                self.tokenizer
                    .post_process(piece, None, true)
                    .map_err(|e| TransformerError::Tokenizer(e.to_string()))?,
            );
        }
        let mut out = Vec::with_capacity(pieces.len());
        for e in &pieces {
            let mut span: Option<Range<usize>> = None;
            for (o, &special) in e.get_offsets().iter().zip(e.get_special_tokens_mask()) {
                if special != 0 || o.1 <= o.0 {
                    continue;
                }
                span = Some(match span {
                    None => o.0..o.1,
                    Some(s) => s.start.min(o.0)..s.end.max(o.1),
                });
            }
            out.push(Window {
                ids: e.get_ids().to_vec(),
                span: span.unwrap_or(0..0),
            });
        }
        Ok(out)
    }

    /// Logits of each window (one forward pass per `batch_size` windows, similar lengths
    /// together), in the order given.
    pub fn window_logits(&self, windows: &[&Window]) -> Result<Vec<Vec<f32>>> {
        self.window_logits_until(windows, None)
    }

    /// Logits of each window, in order, in batches; stops with
    /// [`TransformerError::Deadline`] once `deadline` has passed.
    pub fn window_logits_until(
        &self,
        windows: &[&Window],
        deadline: Option<Instant>,
    ) -> Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..windows.len()).collect();
        order.sort_by_key(|&i| windows.get(i).map_or(0, |w| w.ids.len()));
        let mut out = vec![Vec::new(); windows.len()];
        for chunk in order.chunks(self.batch_size) {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(TransformerError::Deadline);
            }
            let rows: Vec<&Window> = chunk
                .iter()
                .filter_map(|&i| windows.get(i).copied())
                .collect();
            let len = rows.iter().map(|w| w.ids.len()).max().unwrap_or(0).max(1);
            let mut batch = Batch {
                ids: vec![self.pad_id; rows.len() * len],
                mask: vec![0; rows.len() * len],
                batch: rows.len(),
                len,
            };
            for (r, w) in rows.iter().enumerate() {
                for (c, &id) in w.ids.iter().enumerate() {
                    batch.ids[r * len + c] = id;
                    batch.mask[r * len + c] = 1;
                }
            }
            let logits = self.forward(&batch)?;
            for (&i, l) in chunk.iter().zip(logits) {
                if let Some(slot) = out.get_mut(i) {
                    *slot = l;
                }
            }
        }
        Ok(out)
    }

    fn forward(&self, batch: &Batch) -> Result<Vec<Vec<f32>>> {
        let (model, pool) = match &self.net {
            // ONNX Runtime runs on its own intra-op threads.
            Net::Onnx(m) => return m.forward(batch),
            Net::Native { model, pool } => (model, pool),
        };
        let run = || -> Result<Vec<Vec<f32>>> {
            let t: Tensor = match model {
                Native::Bert(m) => m.forward(batch)?,
                Native::Deberta(m) => m.forward(batch)?,
            };
            Ok(t.to_vec2::<f32>()?)
        };
        if rayon::current_thread_index().is_some() && pool.current_thread_index().is_none() {
            // Called from a worker of another rayon pool (`rampart eval`'s, say). There,
            // `install` keeps the worker busy with that pool's queued jobs while it waits;
            // those jobs call this classifier again, which waits again, and the nesting grew
            // until the worker's stack overflowed. A plain thread blocks on `install`
            // without taking other jobs; its start (tens of µs) is small next to a forward
            // pass (milliseconds).
            std::thread::scope(|s| match s.spawn(|| pool.install(run)).join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            })
        } else {
            pool.install(run)
        }
    }

    /// The score of one window's logits: the softmax probability mass of the positive
    /// labels (a sigmoid for single-logit models). NaN when a logit is not finite (broken
    /// weights), so callers can fail instead of reading it as "benign".
    pub fn score_logits(&self, logits: &[f32]) -> f32 {
        if logits.iter().any(|l| !l.is_finite()) {
            return f32::NAN;
        }
        if logits.len() == 1 {
            return 1.0 / (1.0 + (-logits[0]).exp());
        }
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let exps: Vec<f32> = logits.iter().map(|&l| (l - max).exp()).collect();
        let total: f32 = exps.iter().sum();
        let pos: f32 = self.positive.iter().filter_map(|&i| exps.get(i)).sum();
        if total > 0.0 { pos / total } else { 0.0 }
    }

    /// Scores one text: every window, the maximum wins (NaN, if any window's logits are not
    /// finite).
    pub fn score(&self, text: &str) -> Result<Score> {
        self.score_batch(&[text], None)?
            .pop()
            .ok_or_else(|| TransformerError::Backend("no result".into()))
    }

    /// Scores several texts; all their windows go through batched forward passes. Stops
    /// with [`TransformerError::Deadline`] between batches once `deadline` has passed.
    pub fn score_batch(&self, texts: &[&str], deadline: Option<Instant>) -> Result<Vec<Score>> {
        let mut all = Vec::new();
        let mut owner = Vec::new();
        for (t, text) in texts.iter().enumerate() {
            for w in self.windows(text)? {
                all.push(w);
                owner.push(t);
            }
        }
        let refs: Vec<&Window> = all.iter().collect();
        let logits = self.window_logits_until(&refs, deadline)?;
        let mut out: Vec<Option<Score>> = vec![None; texts.len()];
        let mut counts = vec![0usize; texts.len()];
        for &t in &owner {
            if let Some(c) = counts.get_mut(t) {
                *c += 1;
            }
        }
        let mut seen = vec![0usize; texts.len()];
        for ((w, l), &t) in all.iter().zip(logits).zip(&owner) {
            let s = self.score_logits(&l);
            let (Some(k), Some(n), Some(slot)) = (seen.get_mut(t), counts.get(t), out.get_mut(t))
            else {
                continue;
            };
            // A NaN window wins and stays (nothing compares greater), so a broken window is
            // never hidden behind a finite one.
            let better = slot.as_ref().is_none_or(|b| s > b.score || s.is_nan());
            if better {
                *slot = Some(Score {
                    score: s,
                    span: w.span.clone(),
                    window: *k,
                    windows: *n,
                    logits: l,
                });
            }
            *k += 1;
        }
        Ok(out
            .into_iter()
            .map(|s| {
                s.unwrap_or(Score {
                    score: 0.0,
                    span: 0..0,
                    window: 0,
                    windows: 0,
                    logits: Vec::new(),
                })
            })
            .collect())
    }
}
