//! DeBERTa-v2 / v3 / mDeBERTa-v3 (`DebertaV2ForSequenceClassification`).
//!
//! Disentangled attention: content-to-content scores plus content-to-position (`c2p`) and
//! position-to-content (`p2c`) terms over log-bucketed relative positions. The position
//! projections of every layer do not depend on the input, so they are computed once at load
//! (`Wk·LN(rel_embeddings)`, `Wq·LN(rel_embeddings)`); a forward pass only gathers from them.

use crate::Batch;
use crate::config::ModelConfig;
use crate::error::{Result, TransformerError};
use crate::nn::{Act, LayerNorm, LayerTail, Linear, Weights, from_heads, mask_bias, to_heads};
use candle_core::{Device, Tensor};
use rayon::prelude::*;

struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    /// Output projection, feed-forward block and their LayerNorms.
    tail: LayerTail,
    /// Cached `c2p` position keys, head-major `[heads, 2*span, d]`.
    pos_key: Option<Tensor>,
    /// Cached `p2c` position queries, head-major `[heads, 2*span, d]`, pre-divided by the
    /// attention scale.
    pos_query: Option<Tensor>,
}

/// A loaded DeBERTa-v2/v3 classifier.
pub(crate) struct Deberta {
    word: Tensor,
    pos: Option<Tensor>,
    token_type0: Option<Tensor>,
    embed_proj: Option<Linear>,
    emb_ln: LayerNorm,
    layers: Vec<Layer>,
    pooler: Linear,
    pooler_act: Act,
    classifier: Linear,
    heads: usize,
    head_size: usize,
    act: Act,
    /// Relative attention on (always in v3).
    relative: bool,
    /// Half the number of relative-position embeddings used (`att_span`).
    span: usize,
    /// `position_buckets` (≤ 0: no log buckets).
    buckets: i64,
    /// `max_relative_positions`.
    max_rel: i64,
    max_positions: Option<usize>,
}

impl std::fmt::Debug for Deberta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deberta")
            .field("layers", &self.layers.len())
            .field("heads", &self.heads)
            .field("span", &self.span)
            .finish_non_exhaustive()
    }
}

/// Hugging Face `make_log_bucket_position` for one relative position, computed in `f32`
/// like PyTorch does.
pub(crate) fn log_bucket(rel: i64, bucket_size: i64, max_position: i64) -> i64 {
    if bucket_size <= 0 || max_position <= 0 {
        return rel;
    }
    let mid = bucket_size / 2;
    let abs_pos = if rel < mid && rel > -mid {
        mid - 1
    } else {
        rel.abs()
    };
    if abs_pos <= mid {
        return rel;
    }
    let log_pos = ((abs_pos as f32 / mid as f32).ln()
        / (((max_position - 1) as f64 / mid as f64) as f32).ln()
        * (mid - 1) as f32)
        .ceil()
        + mid as f32;
    (log_pos * rel.signum() as f32) as i64
}

impl Deberta {
    pub fn load(cfg: &ModelConfig, w: &Weights, num_labels: usize) -> Result<Self> {
        if cfg.conv_kernel_size.unwrap_or(0) > 0 {
            return Err(TransformerError::Unsupported(
                "DeBERTa-v2 with conv_kernel_size > 0 (v2-xlarge style convolution)".into(),
            ));
        }
        let p = "deberta.";
        if !w.contains("deberta.embeddings.word_embeddings.weight") {
            return Err(TransformerError::Weights(
                "no \"deberta.embeddings.word_embeddings.weight\" (is this a DeBERTa-v2 \
                 sequence-classification checkpoint?)"
                    .into(),
            ));
        }
        let h = cfg.hidden_size;
        let e = cfg.embedding_size.unwrap_or(h);
        let eps = cfg.layer_norm_eps;
        let nh = cfg.num_attention_heads;
        let d = cfg.head_size();
        let all = nh * d;
        let word = w.get_cols(&format!("{p}embeddings.word_embeddings.weight"), e)?;
        let position_biased = cfg.position_biased_input.unwrap_or(true);
        let pos = if position_biased {
            Some(w.get(
                &format!("{p}embeddings.position_embeddings.weight"),
                &[cfg.max_position_embeddings, e],
            )?)
        } else {
            None
        };
        let token_type0 = if cfg.type_vocab_size > 0 {
            let t = w.get(
                &format!("{p}embeddings.token_type_embeddings.weight"),
                &[cfg.type_vocab_size, e],
            )?;
            Some(t.narrow(0, 0, 1)?)
        } else {
            None
        };
        let embed_proj = if e != h {
            Some(w.linear(&format!("{p}embeddings.embed_proj"), e, h, false)?)
        } else {
            None
        };
        let emb_ln = w.layer_norm(&format!("{p}embeddings.LayerNorm"), h, eps)?;

        let relative = cfg.relative_attention;
        let pos_att = cfg.pos_att_type.clone();
        let c2p = relative && pos_att.as_ref().is_some_and(|t| t.contains("c2p"));
        let p2c = relative && pos_att.as_ref().is_some_and(|t| t.contains("p2c"));
        let share = cfg.share_att_key.unwrap_or(false);
        let buckets = cfg.position_buckets.unwrap_or(-1);
        let mut max_rel = cfg.max_relative_positions.unwrap_or(-1);
        if max_rel < 1 {
            max_rel = cfg.max_position_embeddings as i64;
        }
        let span = if buckets > 0 { buckets } else { max_rel } as usize;
        let scale_factor = 1 + usize::from(c2p) + usize::from(p2c);
        let scale = 1.0 / ((d * scale_factor) as f64).sqrt();

        // Relative embeddings, normalised once.
        let rel = if relative {
            let table = w.get_cols(&format!("{p}encoder.rel_embeddings.weight"), h)?;
            if table.dim(0)? < 2 * span {
                return Err(TransformerError::Weights(format!(
                    "rel_embeddings has {} rows, expected at least {}",
                    table.dim(0)?,
                    2 * span
                )));
            }
            let table = table.narrow(0, 0, 2 * span)?;
            let norm = cfg
                .norm_rel_ebd
                .as_deref()
                .unwrap_or("none")
                .to_ascii_lowercase();
            if norm.split('|').any(|s| s.trim() == "layer_norm") {
                Some(
                    w.layer_norm(&format!("{p}encoder.LayerNorm"), h, eps)?
                        .forward(&table)?,
                )
            } else {
                Some(table)
            }
        } else {
            None
        };

        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let l = format!("{p}encoder.layer.{i}");
            let q = w.linear(&format!("{l}.attention.self.query_proj"), h, all, true)?;
            let k = w.linear(&format!("{l}.attention.self.key_proj"), h, all, true)?;
            let (mut pos_key, mut pos_query) = (None, None);
            if let Some(rel) = &rel {
                if c2p {
                    let proj = if share {
                        k.clone()
                    } else {
                        w.linear(&format!("{l}.attention.self.pos_key_proj"), h, all, true)?
                    };
                    pos_key = Some(to_heads(&proj.forward(rel)?, nh, d)?);
                }
                if p2c {
                    let proj = if share {
                        q.clone()
                    } else {
                        w.linear(&format!("{l}.attention.self.pos_query_proj"), h, all, true)?
                    };
                    pos_query = Some((to_heads(&proj.forward(rel)?, nh, d)? * scale)?);
                }
            }
            layers.push(Layer {
                // the attention scale folded into the query projection (after the position
                // queries above were made from the unscaled one)
                q: q.scaled(scale)?,
                k,
                v: w.linear(&format!("{l}.attention.self.value_proj"), h, all, true)?,
                tail: LayerTail::load(w, &l, h, all, cfg.intermediate_size, eps)?,
                pos_key,
                pos_query,
            });
        }
        let ph = cfg.pooler_hidden_size.unwrap_or(h);
        if ph != h {
            return Err(TransformerError::Unsupported(format!(
                "pooler_hidden_size {ph} != hidden_size {h}"
            )));
        }
        let pooler = w.linear("pooler.dense", ph, ph, true)?;
        let pooler_act = Act::parse(cfg.pooler_hidden_act.as_deref().unwrap_or("gelu"))?;
        let classifier = w.linear("classifier", ph, num_labels, true)?;
        Ok(Deberta {
            word,
            pos,
            token_type0,
            embed_proj,
            emb_ln,
            layers,
            pooler,
            pooler_act,
            classifier,
            heads: nh,
            head_size: d,
            act: Act::parse(&cfg.hidden_act)?,
            relative,
            span,
            buckets,
            max_rel,
            max_positions: position_biased.then_some(cfg.max_position_embeddings),
        })
    }

    /// The longest input the model accepts, if bounded (absolute position embeddings).
    pub fn max_positions(&self) -> Option<usize> {
        self.max_positions
    }

    /// Logits `[batch, labels]`.
    pub fn forward(&self, batch: &Batch) -> Result<Tensor> {
        let (b, l) = (batch.batch, batch.len);
        if let Some(m) = self.max_positions
            && l > m
        {
            return Err(TransformerError::Options(format!(
                "window of {l} tokens exceeds max_position_embeddings {m}"
            )));
        }
        let dev = Device::Cpu;
        let ids = Tensor::from_slice(&batch.ids, b * l, &dev)?;
        let e = self.word.dim(1)?;
        let mut x = self.word.index_select(&ids, 0)?;
        if self.pos.is_some() || self.token_type0.is_some() {
            let mut x3 = x.reshape((b, l, e))?;
            if let Some(pos) = &self.pos {
                x3 = x3.broadcast_add(&pos.narrow(0, 0, l)?)?;
            }
            if let Some(t) = &self.token_type0 {
                x3 = x3.broadcast_add(t)?;
            }
            x = x3.reshape((b * l, e))?;
        }
        if let Some(p) = &self.embed_proj {
            x = p.forward(&x)?;
        }
        let mask_f: Vec<f32> = batch.mask.iter().map(|&m| m as f32).collect();
        let mask_t = Tensor::from_vec(mask_f, (b * l, 1), &dev)?;
        let mut x = self.emb_ln.forward(&x)?.broadcast_mul(&mask_t)?;

        let bias = mask_bias(&batch.mask);
        // Relative-position indices into the cached projections, for this length.
        let (idx, lo, width) = self.rel_index(l);
        let n = self.layers.len();
        for (i, layer) in self.layers.iter().enumerate() {
            let cls_only = i + 1 == n;
            x = self.layer(layer, &x, b, l, &bias, (&idx, lo, width), cls_only)?;
        }
        let pooled = self.pooler_act.forward(&self.pooler.forward(&x)?)?;
        self.classifier.forward(&pooled)
    }

    /// `idx[i*l + j]` = clamp(span + bucket(i − j)) − lo, with `lo..lo+width` the rows of the
    /// position tables a sequence of length `l` touches.
    fn rel_index(&self, l: usize) -> (Vec<usize>, usize, usize) {
        if !self.relative {
            return (Vec::new(), 0, 0);
        }
        let span = self.span as i64;
        let mut raw = Vec::with_capacity(l * l);
        for i in 0..l as i64 {
            for j in 0..l as i64 {
                let r = span + log_bucket(i - j, self.buckets, self.max_rel);
                raw.push(r.clamp(0, 2 * span - 1) as usize);
            }
        }
        let lo = raw.iter().copied().min().unwrap_or(0);
        let hi = raw.iter().copied().max().unwrap_or(0);
        for r in &mut raw {
            *r -= lo;
        }
        (raw, lo, hi - lo + 1)
    }

    #[allow(clippy::too_many_arguments)]
    fn layer(
        &self,
        layer: &Layer,
        x: &Tensor,
        b: usize,
        l: usize,
        bias: &[f32],
        (idx, lo, width): (&[usize], usize, usize),
        cls_only: bool,
    ) -> Result<Tensor> {
        let (nh, d) = (self.heads, self.head_size);
        let h = x.dim(1)?;
        let (xq, lq) = if cls_only {
            (x.reshape((b, l, h))?.narrow(1, 0, 1)?.reshape((b, h))?, 1)
        } else {
            (x.clone(), l)
        };
        // [nh, b*lq, d], scaled so every score term shares the 1/sqrt(d*factor) scale.
        let q = to_heads(&layer.q.forward(&xq)?, nh, d)?;
        let k = to_heads(&layer.k.forward(x)?, nh, d)?;
        let v = to_heads(&layer.v.forward(x)?, nh, d)?;
        // One head per task, as in BERT: each head's matmuls (content, c2p, p2c, ·v), the
        // position gather and the softmax on one thread, the heads side by side (splitting
        // every small matmul across the threads left them waiting).
        let heads: Vec<Tensor> = (0..nh)
            .into_par_iter()
            .map(|hd| -> Result<Tensor> {
                let (qh, kh, vh) = (q.get(hd)?, k.get(hd)?, v.get(hd)?);
                let qk = qh
                    .reshape((b, lq, d))?
                    .matmul(&kh.reshape((b, l, d))?.t()?)?;
                let mut scores = qk.flatten_all()?.to_vec1::<f32>()?;
                // x against this head's relative-position projection, rows of `width`
                let rel = |x: &Tensor, pos: &Option<Tensor>| -> Result<Option<Vec<f32>>> {
                    pos.as_ref()
                        .map(|p| -> Result<Vec<f32>> {
                            Ok(x.matmul(&p.get(hd)?.narrow(0, lo, width)?.t()?)?
                                .flatten_all()?
                                .to_vec1::<f32>()?)
                        })
                        .transpose()
                };
                // [b*lq, width] and [b*l, width]
                let c2p = rel(&qh, &layer.pos_key)?;
                let p2c = rel(&kh, &layer.pos_query)?;
                // scores[b][i][j] += c2p[b*lq+i][idx(i,j)] + p2c[b*l+j][idx(i,j)] + bias[b][j]
                for (bb, chunk) in scores.chunks_mut(lq * l).enumerate() {
                    for (i, row) in chunk.chunks_mut(l).enumerate() {
                        // with cls_only the single query is position 0
                        let irow = idx.get(i * l..(i + 1) * l).unwrap_or(&[]);
                        for (j, s) in row.iter_mut().enumerate() {
                            *s += bias[bb * l + j];
                            if let Some(&t) = irow.get(j) {
                                if let Some(a) = &c2p {
                                    *s += a[(bb * lq + i) * width + t];
                                }
                                if let Some(p) = &p2c {
                                    *s += p[(bb * l + j) * width + t];
                                }
                            }
                        }
                    }
                }
                let scores = Tensor::from_vec(scores, (b, lq, l), &Device::Cpu)?;
                crate::nn::softmax_last_dim_in_place(&scores)?;
                Ok(scores.matmul(&vh.reshape((b, l, d))?)?)
            })
            .collect::<Result<_>>()?;
        let ctx = Tensor::stack(&heads, 0)?.reshape((nh, b * lq, d))?;
        let ctx = from_heads(&ctx)?;
        layer.tail.forward(&ctx, &xq, self.act)
    }
}
