//! Small building blocks over `candle-core`: weights by name, linear layers, layer norms,
//! activations, and head-major multi-head attention helpers.

use crate::error::{Result, TransformerError};
use candle_core::{DType, Device, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// The tensors of a safetensors file, by name, converted to `f32`.
pub(crate) struct Weights {
    map: HashMap<String, Tensor>,
}

impl Weights {
    pub fn load(path: &Path) -> Result<Self> {
        if !path.is_file() {
            return Err(TransformerError::Io {
                path: path.to_path_buf(),
                message: "no such file (a model directory needs config.json, tokenizer.json \
                          and model.safetensors)"
                    .into(),
            });
        }
        let raw = candle_core::safetensors::load(path, &Device::Cpu).map_err(|e| {
            TransformerError::Io {
                path: path.to_path_buf(),
                message: e.to_string(),
            }
        })?;
        let mut map = HashMap::with_capacity(raw.len());
        for (k, t) in raw {
            let t = if t.dtype() == DType::F32 {
                t
            } else {
                t.to_dtype(DType::F32)?
            };
            map.insert(k, t);
        }
        Ok(Weights { map })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// The tensor `name`, checked against `shape`.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let t = self
            .map
            .get(name)
            .ok_or_else(|| TransformerError::Weights(format!("missing tensor {name:?}")))?;
        if t.dims() != shape {
            return Err(TransformerError::Weights(format!(
                "tensor {name:?} has shape {:?}, expected {shape:?}",
                t.dims()
            )));
        }
        Ok(t.clone())
    }

    /// A 2-D tensor `name` with `cols` columns (any number of rows, e.g. a vocabulary).
    pub fn get_cols(&self, name: &str, cols: usize) -> Result<Tensor> {
        let t = self
            .map
            .get(name)
            .ok_or_else(|| TransformerError::Weights(format!("missing tensor {name:?}")))?;
        match t.dims() {
            [_, c] if *c == cols => Ok(t.clone()),
            dims => Err(TransformerError::Weights(format!(
                "tensor {name:?} has shape {dims:?}, expected [_, {cols}]"
            ))),
        }
    }

    /// The first of `names` that exists, checked against `shape`.
    pub fn get_any(&self, names: &[&str], shape: &[usize]) -> Result<Tensor> {
        for n in names {
            if self.contains(n) {
                return self.get(n, shape);
            }
        }
        Err(TransformerError::Weights(format!(
            "missing tensor {:?}",
            names.first().copied().unwrap_or_default()
        )))
    }

    pub fn linear(&self, prefix: &str, inp: usize, out: usize, bias: bool) -> Result<Linear> {
        let w = self.get(&format!("{prefix}.weight"), &[out, inp])?;
        let b = if bias {
            Some(self.get(&format!("{prefix}.bias"), &[out])?)
        } else {
            None
        };
        Linear::new(w, b)
    }

    pub fn layer_norm(&self, prefix: &str, size: usize, eps: f64) -> Result<LayerNorm> {
        let w = self.get_any(
            &[&format!("{prefix}.weight"), &format!("{prefix}.gamma")],
            &[size],
        )?;
        let b = self.get_any(
            &[&format!("{prefix}.bias"), &format!("{prefix}.beta")],
            &[size],
        )?;
        Ok(LayerNorm {
            w,
            b,
            eps: eps as f32,
        })
    }
}

/// `y = x Wᵀ + b` on 2-D inputs `[rows, in]`.
#[derive(Debug, Clone)]
pub(crate) struct Linear {
    /// `[in, out]`, contiguous.
    wt: Tensor,
    b: Option<Tensor>,
}

impl Linear {
    pub fn new(w: Tensor, b: Option<Tensor>) -> Result<Self> {
        Ok(Linear {
            wt: w.t()?.contiguous()?,
            b,
        })
    }

    /// The same layer with its output multiplied by `factor` (folded into the weights).
    pub fn scaled(&self, factor: f64) -> Result<Self> {
        Ok(Linear {
            wt: (&self.wt * factor)?,
            b: match &self.b {
                Some(b) => Some((b * factor)?),
                None => None,
            },
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = x.matmul(&self.wt)?;
        Ok(match &self.b {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        })
    }
}

/// Layer normalisation over the last dimension.
#[derive(Debug, Clone)]
pub(crate) struct LayerNorm {
    w: Tensor,
    b: Tensor,
    eps: f32,
}

impl LayerNorm {
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::layer_norm(
            &x.contiguous()?,
            &self.w,
            &self.b,
            self.eps,
        )?)
    }
}

/// The part of an encoder layer after the attention context, shared by BERT and DeBERTa:
/// output projection + residual + LayerNorm, then the feed-forward block + residual +
/// LayerNorm.
#[derive(Debug, Clone)]
pub(crate) struct LayerTail {
    attn_out: Linear,
    attn_ln: LayerNorm,
    inter: Linear,
    out: Linear,
    out_ln: LayerNorm,
}

impl LayerTail {
    /// Loads `{l}.attention.output.*`, `{l}.intermediate.dense` and `{l}.output.*`.
    pub fn load(
        w: &Weights,
        l: &str,
        hidden: usize,
        all_heads: usize,
        intermediate: usize,
        eps: f64,
    ) -> Result<Self> {
        Ok(LayerTail {
            attn_out: w.linear(
                &format!("{l}.attention.output.dense"),
                all_heads,
                hidden,
                true,
            )?,
            attn_ln: w.layer_norm(&format!("{l}.attention.output.LayerNorm"), hidden, eps)?,
            inter: w.linear(
                &format!("{l}.intermediate.dense"),
                hidden,
                intermediate,
                true,
            )?,
            out: w.linear(&format!("{l}.output.dense"), intermediate, hidden, true)?,
            out_ln: w.layer_norm(&format!("{l}.output.LayerNorm"), hidden, eps)?,
        })
    }

    /// The layer's output from the attention context and the layer's input rows.
    pub fn forward(&self, ctx: &Tensor, residual: &Tensor, act: Act) -> Result<Tensor> {
        let a = self
            .attn_ln
            .forward(&(self.attn_out.forward(ctx)? + residual)?)?;
        let f = act.forward(&self.inter.forward(&a)?)?;
        self.out_ln.forward(&(self.out.forward(&f)? + &a)?)
    }
}

/// Activation functions named in configs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    GeluErf,
    GeluTanh,
    Relu,
    Tanh,
}

impl Act {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "gelu" => Ok(Act::GeluErf),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Act::GeluTanh),
            "relu" => Ok(Act::Relu),
            "tanh" => Ok(Act::Tanh),
            other => Err(TransformerError::Unsupported(format!(
                "activation {other:?} (supported: gelu, gelu_new, gelu_pytorch_tanh, relu, tanh)"
            ))),
        }
    }

    pub fn forward(self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Act::GeluErf => x.gelu_erf()?,
            Act::GeluTanh => x.gelu()?,
            Act::Relu => x.relu()?,
            Act::Tanh => x.tanh()?,
        })
    }
}

/// `[b*l, heads*d]` → head-major `[heads, b*l, d]` (contiguous).
pub(crate) fn to_heads(x: &Tensor, heads: usize, d: usize) -> Result<Tensor> {
    let rows = x.dim(0)?;
    Ok(x.reshape((rows, heads, d))?.transpose(0, 1)?.contiguous()?)
}

/// Head-major `[heads, rows, d]` → `[rows, heads*d]`.
pub(crate) fn from_heads(x: &Tensor) -> Result<Tensor> {
    let (h, rows, d) = x.dims3()?;
    Ok(x.transpose(0, 1)?.contiguous()?.reshape((rows, h * d))?)
}

/// Additive attention bias `[b, l]` from a 0/1 mask: 0 where attended, `f32::MIN` at padding
/// (what Hugging Face adds).
pub(crate) fn mask_bias(mask: &[u32]) -> Vec<f32> {
    mask.iter()
        .map(|&m| if m != 0 { 0.0 } else { f32::MIN })
        .collect()
}

/// Adds the padding bias `[b, l]` to scores `[heads, b, lq, l]` in place.
pub(crate) fn add_bias(scores: &mut [f32], bias: &[f32], b: usize, lq: usize, l: usize) {
    use rayon::prelude::*;
    scores
        .par_chunks_mut(lq * l)
        .enumerate()
        .for_each(|(c, chunk)| {
            let bb = c % b;
            if let Some(row_bias) = bias.get(bb * l..(bb + 1) * l) {
                for row in chunk.chunks_mut(l) {
                    for (s, m) in row.iter_mut().zip(row_bias) {
                        *s += m;
                    }
                }
            }
        });
}
