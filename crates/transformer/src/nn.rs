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
    /// The bias, as a slice for the fused kernels.
    b: Option<Vec<f32>>,
}

impl Linear {
    pub fn new(w: Tensor, b: Option<Tensor>) -> Result<Self> {
        Ok(Linear {
            wt: w.t()?.contiguous()?,
            b: match b {
                Some(b) => Some(b.flatten_all()?.to_vec1::<f32>()?),
                None => None,
            },
        })
    }

    /// The same layer with its output multiplied by `factor` (folded into the weights).
    pub fn scaled(&self, factor: f64) -> Result<Self> {
        Ok(Linear {
            wt: (&self.wt * factor)?,
            b: self
                .b
                .as_ref()
                // as candle's `affine` computes `tensor * factor` on f32 data
                .map(|b| b.iter().map(|&v| v * factor as f32 + 0.0).collect()),
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_fused(x, None, false)
    }

    /// `act(x Wᵀ + b)`: the bias and a GELU (erf) in one pass over the output.
    pub fn forward_act(&self, x: &Tensor, act: Act) -> Result<Tensor> {
        if act == Act::GeluErf {
            return self.forward_fused(x, None, true);
        }
        act.forward(&self.forward(x)?)
    }

    /// `x Wᵀ + b + residual` in one pass over the output.
    pub fn forward_residual(&self, x: &Tensor, residual: &Tensor) -> Result<Tensor> {
        self.forward_fused(x, Some(residual), false)
    }

    fn forward_fused(&self, x: &Tensor, residual: Option<&Tensor>, gelu: bool) -> Result<Tensor> {
        let y = x.matmul(&self.wt)?;
        let op = Epilogue {
            bias: self.b.as_deref(),
            gelu,
        };
        // In place on the matmul's fresh output: a new output buffer cost an allocation, a
        // zeroing pass and, for the feed-forward block's large ones, page faults (~4% of a
        // 512-token pass).
        match residual {
            Some(r) => y.inplace_op2(&r.contiguous()?, &op)?,
            None if self.b.is_none() && !gelu => {}
            None => y.inplace_op1(&op)?,
        }
        Ok(y)
    }
}

/// The element-wise work after a matmul: `+ bias` (per column), `+ residual`, GELU (erf),
/// fused into one in-place pass that runs on the caller's rayon pool (the classifier's).
/// Written here because candle's own element-wise kernels run on a separate spin-waiting
/// thread pool: with 2 threads on 2 cores, a quarter of the CPU of a MiniLM forward pass
/// went to spinning (perf). GELU is `0.5 * v * (erf(v / sqrt 2) + 1)` with the vectorizable
/// [`erf`].
struct Epilogue<'a> {
    bias: Option<&'a [f32]>,
    gelu: bool,
}

/// Below this many elements the epilogue and the softmax run on one thread.
const PARALLEL_MIN: usize = 1 << 15;

/// Runs `f(first_row, rows)` over `data` (rows of `cols` values): in one call when it is
/// smaller than [`PARALLEL_MIN`], else in chunks of whole rows of about that many values on
/// the caller's rayon pool.
fn for_row_chunks(data: &mut [f32], cols: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    use rayon::prelude::*;
    let cols = cols.max(1);
    if data.len() < PARALLEL_MIN {
        f(0, data);
    } else {
        let per_rows = (PARALLEL_MIN / cols).max(1);
        data.par_chunks_mut(per_rows * cols)
            .enumerate()
            .for_each(|(c, chunk)| f(c * per_rows, chunk));
    }
}

impl Epilogue<'_> {
    fn run(&self, out: &mut [f32], cols: usize, residual: Option<&[f32]>) {
        let cols = cols.max(1);
        let arch = pulp::Arch::new();
        // Under pulp's dispatch (compiled for AVX2/FMA too: the GELU's polynomial is most of
        // the work).
        for_row_chunks(out, cols, |first_row, out| {
            arch.dispatch(EpilogueRows {
                op: self,
                out,
                cols,
                residual: residual.and_then(|r| r.get(first_row * cols..)),
            })
        });
    }

    fn slice<'s>(
        s: &'s candle_core::CpuStorage,
        l: &candle_core::Layout,
    ) -> candle_core::Result<&'s [f32]> {
        let candle_core::CpuStorage::F32(data) = s else {
            return Err(candle_core::Error::Msg("epilogue: f32 tensors only".into()));
        };
        let Some((start, end)) = l.contiguous_offsets() else {
            return Err(candle_core::Error::Msg(
                "epilogue: contiguous tensors only".into(),
            ));
        };
        data.get(start..end)
            .ok_or_else(|| candle_core::Error::Msg("epilogue: bad layout".into()))
    }

    fn slice_mut<'s>(
        s: &'s mut candle_core::CpuStorage,
        l: &candle_core::Layout,
    ) -> candle_core::Result<&'s mut [f32]> {
        let candle_core::CpuStorage::F32(data) = s else {
            return Err(candle_core::Error::Msg("epilogue: f32 tensors only".into()));
        };
        let Some((start, end)) = l.contiguous_offsets() else {
            return Err(candle_core::Error::Msg(
                "epilogue: contiguous tensors only".into(),
            ));
        };
        data.get_mut(start..end)
            .ok_or_else(|| candle_core::Error::Msg("epilogue: bad layout".into()))
    }

    fn cols(&self, l: &candle_core::Layout) -> candle_core::Result<usize> {
        let cols = l.dims().last().copied().unwrap_or(1);
        match self.bias {
            Some(b) if b.len() != cols => Err(candle_core::Error::Msg(format!(
                "epilogue: bias of {} for {cols} columns",
                b.len()
            ))),
            _ => Ok(cols),
        }
    }
}

/// Rows of an [`Epilogue`] (`residual` starts at the same row as `out`), under pulp's
/// runtime CPU-feature dispatch.
struct EpilogueRows<'a> {
    op: &'a Epilogue<'a>,
    out: &'a mut [f32],
    cols: usize,
    residual: Option<&'a [f32]>,
}

impl pulp::WithSimd for EpilogueRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        // One row (it stays in L1) at a time, in simple passes the compiler vectorizes.
        for (k, o) in self.out.chunks_mut(self.cols).enumerate() {
            if let Some(b) = self.op.bias {
                for (o, &b) in o.iter_mut().zip(b) {
                    *o += b;
                }
            }
            if let Some(r) = self
                .residual
                .and_then(|r| r.get(k * self.cols..(k + 1) * self.cols))
            {
                for (o, &r) in o.iter_mut().zip(r) {
                    *o += r;
                }
            }
            if self.op.gelu {
                for v in o.iter_mut() {
                    *v = (erf(*v * std::f32::consts::FRAC_1_SQRT_2) + 1.0) * 0.5 * *v;
                }
            }
        }
    }
}

impl candle_core::InplaceOp1 for Epilogue<'_> {
    fn name(&self) -> &'static str {
        "rampart-epilogue"
    }

    fn cpu_fwd(
        &self,
        s: &mut candle_core::CpuStorage,
        l: &candle_core::Layout,
    ) -> candle_core::Result<()> {
        let cols = self.cols(l)?;
        self.run(Self::slice_mut(s, l)?, cols, None);
        Ok(())
    }
}

impl candle_core::InplaceOp2 for Epilogue<'_> {
    fn name(&self) -> &'static str {
        "rampart-epilogue-residual"
    }

    fn cpu_fwd(
        &self,
        s1: &mut candle_core::CpuStorage,
        l1: &candle_core::Layout,
        s2: &candle_core::CpuStorage,
        l2: &candle_core::Layout,
    ) -> candle_core::Result<()> {
        if l1.dims() != l2.dims() {
            return Err(candle_core::Error::Msg(format!(
                "epilogue: residual {:?} for output {:?}",
                l2.dims(),
                l1.dims()
            )));
        }
        let cols = self.cols(l1)?;
        let r = Self::slice(s2, l2)?;
        self.run(Self::slice_mut(s1, l1)?, cols, Some(r));
        Ok(())
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
            .forward(&self.attn_out.forward_residual(ctx, residual)?)?;
        let f = self.inter.forward_act(&a, act)?;
        self.out_ln.forward(&self.out.forward_residual(&f, &a)?)
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

/// `e^x` for `f32`, written so that loops over slices vectorize (no calls, no branches):
/// Cody–Waite range reduction `x = n·ln 2 + r`, Cephes' degree-6 polynomial for `e^r`, `2^n`
/// from the exponent bits. Relative error about 2e-7 over the range softmax uses; inputs below
/// −87 give 0 (as `f32::exp` underflows there), inputs above 88 are clamped. Hand-written
/// because libm's `expf` is a scalar call per element: the softmax of a 512-token window
/// spent more time in it than PyTorch's whole attention.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4; // ln 2, high part
    const C2: f32 = -2.121_944_4e-4; // ln 2, low part
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer
    let underflow = x < -87.0;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * C1 - n * C2;
    let z = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5; // Cephes: 5.0000001201e-1, which is 0.5 in f32
    let e = p * z + r + 1.0;
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    if underflow { 0.0 } else { e * scale }
}

/// `erf(x)` for `f32`, vectorizable: Abramowitz & Stegun 7.1.26 with [`exp`] (absolute error
/// 1.5e-7 in exact arithmetic, below 6e-7 in `f32`; measured by the test below). In GELU the
/// error is below `3e-7 · |x|`.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_8,
        -1.453_152_1,
        1.061_405_4,
    ];
    let a = x.abs();
    let t = 1.0 / (1.0 + P * a);
    let poly = ((((A[4] * t + A[3]) * t + A[2]) * t + A[1]) * t + A[0]) * t;
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

/// Softmax over the last dimension of a contiguous `f32` tensor, in place (the tensor must
/// own its storage: a fresh matmul result or one built from a `Vec`), one row at a time on
/// the caller's rayon pool, with [`exp`]. Replaces `candle_nn::ops::softmax_last_dim`, whose
/// scalar `expf` per score was the largest cost after the matmuls at 512 tokens; in place,
/// the scores' buffer is reused rather than a zeroed one allocated.
pub(crate) fn softmax_last_dim_in_place(x: &Tensor) -> Result<()> {
    Ok(x.inplace_op1(&Softmax)?)
}

struct Softmax;

/// The softmax of each row of `x`, in place, under `pulp`'s runtime CPU-feature dispatch:
/// `with_simd` is compiled once per instruction set (AVX2/FMA or baseline) and the inlined
/// row loops are vectorized for it. Safe code: the dispatch checks the CPU.
struct SoftmaxRows<'a> {
    x: &'a mut [f32],
    cols: usize,
}

impl pulp::WithSimd for SoftmaxRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        for row in self.x.chunks_mut(self.cols) {
            softmax_row(row);
        }
    }
}

#[inline(always)]
fn softmax_row(x: &mut [f32]) {
    // 8 partial maxima / sums so that the reductions vectorize.
    let mut m = [f32::NEG_INFINITY; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            m[k] = m[k].max(c[k]);
        }
    }
    let mut max = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    for v in m {
        max = max.max(v);
    }
    for v in x.iter_mut() {
        *v = exp(*v - max);
    }
    let mut s = [0f32; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            s[k] += c[k];
        }
    }
    let sum: f32 = s.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>();
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

impl candle_core::InplaceOp1 for Softmax {
    fn name(&self) -> &'static str {
        "rampart-softmax"
    }

    fn cpu_fwd(
        &self,
        s: &mut candle_core::CpuStorage,
        l: &candle_core::Layout,
    ) -> candle_core::Result<()> {
        let cols = l.dims().last().copied().unwrap_or(1).max(1);
        let x = Epilogue::slice_mut(s, l)?;
        let arch = pulp::Arch::new();
        for_row_chunks(x, cols, |_, x| arch.dispatch(SoftmaxRows { x, cols }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_erf_match_the_standard_library() {
        let mut worst_exp = 0f64;
        let mut worst_erf = 0f64;
        let mut x = -90.0f32;
        while x < 30.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            if want > 1e-37 {
                worst_exp = worst_exp.max(((got - want) / want).abs());
            } else {
                assert!(got < 1e-30, "exp({x}) = {got}");
            }
            x += 0.001_3;
        }
        let mut x = -6.0f32;
        while x < 6.0 {
            let want = libm_erf(f64::from(x));
            worst_erf = worst_erf.max((f64::from(erf(x)) - want).abs());
            x += 0.000_7;
        }
        assert!(worst_exp < 5e-7, "exp relative error {worst_exp}");
        assert!(worst_erf < 1e-6, "erf absolute error {worst_erf}");
    }

    /// erf by its Taylor series (|x| < 3) or continued fraction, in f64: a reference for the
    /// test only.
    fn libm_erf(x: f64) -> f64 {
        let a = x.abs();
        let v = if a < 3.0 {
            let (mut term, mut sum, mut n) = (a, a, 0.0);
            while term.abs() > 1e-17 {
                n += 1.0;
                term *= -a * a / n;
                sum += term / (2.0 * n + 1.0);
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // erfc continued fraction (Lentz), accurate for a >= 3
            let mut f = a;
            for k in (1..60).rev() {
                f = a + (k as f64 / 2.0) / f;
            }
            1.0 - (-a * a).exp() / (f * std::f64::consts::PI.sqrt())
        };
        v.copysign(x)
    }

    #[test]
    fn softmax_rows_sum_to_one_and_keep_order() {
        let x = Tensor::from_vec(
            vec![
                1.0f32,
                2.0,
                3.0,
                f32::MIN,
                0.5,
                -40.0,
                7.0,
                7.0,
                0.0,
                1.0,
                2.0,
                3.0,
            ],
            (2, 6),
            &Device::Cpu,
        )
        .unwrap();
        let y = x.copy().unwrap();
        softmax_last_dim_in_place(&y).unwrap();
        let y = y.to_vec2::<f32>().unwrap();
        let want = candle_nn::ops::softmax_last_dim(&x)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        for (r, w) in y.iter().zip(&want) {
            assert!((r.iter().sum::<f32>() - 1.0).abs() < 1e-6);
            for (a, b) in r.iter().zip(w) {
                assert!((a - b).abs() < 1e-6, "{a} vs {b}");
            }
        }
        assert_eq!(y[0][3], 0.0, "a masked score gets no weight");
    }
}
