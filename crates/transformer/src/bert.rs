//! BERT (`BertForSequenceClassification`; MiniLM is a small BERT): absolute position
//! embeddings, post-LayerNorm encoder layers, tanh pooler on `[CLS]`, linear classifier.

use crate::Batch;
use crate::config::ModelConfig;
use crate::error::{Result, TransformerError};
use crate::nn::{Act, LayerNorm, LayerTail, Linear, Weights, from_heads, to_heads};
use candle_core::{Device, Tensor};

struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    /// Output projection, feed-forward block and their LayerNorms.
    tail: LayerTail,
}

/// A loaded BERT classifier.
pub(crate) struct Bert {
    word: Tensor,
    pos: Tensor,
    token_type0: Option<Tensor>,
    emb_ln: LayerNorm,
    layers: Vec<Layer>,
    pooler: Linear,
    classifier: Linear,
    heads: usize,
    head_size: usize,
    act: Act,
    max_positions: usize,
}

impl std::fmt::Debug for Bert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bert")
            .field("layers", &self.layers.len())
            .field("heads", &self.heads)
            .finish_non_exhaustive()
    }
}

impl Bert {
    pub fn load(cfg: &ModelConfig, w: &Weights, num_labels: usize) -> Result<Self> {
        let p = if w.contains("bert.embeddings.word_embeddings.weight") {
            "bert."
        } else if w.contains("embeddings.word_embeddings.weight") {
            ""
        } else {
            return Err(TransformerError::Weights(
                "no \"bert.embeddings.word_embeddings.weight\" (is this a BERT checkpoint?)".into(),
            ));
        };
        let h = cfg.hidden_size;
        let eps = cfg.layer_norm_eps;
        let word = w.get_cols(&format!("{p}embeddings.word_embeddings.weight"), h)?;
        let pos = w.get(
            &format!("{p}embeddings.position_embeddings.weight"),
            &[cfg.max_position_embeddings, h],
        )?;
        let token_type0 = if cfg.type_vocab_size > 0 {
            let t = w.get(
                &format!("{p}embeddings.token_type_embeddings.weight"),
                &[cfg.type_vocab_size, h],
            )?;
            Some(t.narrow(0, 0, 1)?)
        } else {
            None
        };
        let emb_ln = w.layer_norm(&format!("{p}embeddings.LayerNorm"), h, eps)?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let l = format!("{p}encoder.layer.{i}");
            let all = cfg.num_attention_heads * cfg.head_size();
            let scale = 1.0 / (cfg.head_size() as f64).sqrt();
            layers.push(Layer {
                // 1/sqrt(d) folded into the query projection
                q: w.linear(&format!("{l}.attention.self.query"), h, all, true)?
                    .scaled(scale)?,
                k: w.linear(&format!("{l}.attention.self.key"), h, all, true)?,
                v: w.linear(&format!("{l}.attention.self.value"), h, all, true)?,
                tail: LayerTail::load(w, &l, h, all, cfg.intermediate_size, eps)?,
            });
        }
        let pooler = w.linear(&format!("{p}pooler.dense"), h, h, true)?;
        let classifier = w.linear("classifier", h, num_labels, true)?;
        Ok(Bert {
            word,
            pos,
            token_type0,
            emb_ln,
            layers,
            pooler,
            classifier,
            heads: cfg.num_attention_heads,
            head_size: cfg.head_size(),
            act: Act::parse(&cfg.hidden_act)?,
            max_positions: cfg.max_position_embeddings,
        })
    }

    /// The longest input (in tokens, special tokens included) the model accepts.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Logits `[batch, labels]`.
    pub fn forward(&self, batch: &Batch) -> Result<Tensor> {
        let (b, l) = (batch.batch, batch.len);
        if l > self.max_positions {
            return Err(TransformerError::Options(format!(
                "window of {l} tokens exceeds max_position_embeddings {}",
                self.max_positions
            )));
        }
        let dev = Device::Cpu;
        let ids = Tensor::from_slice(&batch.ids, b * l, &dev)?;
        let h = self.word.dim(1)?;
        let mut x = self.word.index_select(&ids, 0)?.reshape((b, l, h))?;
        x = x.broadcast_add(&self.pos.narrow(0, 0, l)?)?;
        if let Some(t) = &self.token_type0 {
            x = x.broadcast_add(t)?;
        }
        let mut x = self.emb_ln.forward(&x.reshape((b * l, h))?)?;
        // Padding bias, only when the batch has padding.
        let bias = if batch.mask.iter().all(|&m| m != 0) {
            None
        } else {
            Some(crate::nn::mask_bias(&batch.mask))
        };
        let n = self.layers.len();
        for (i, layer) in self.layers.iter().enumerate() {
            // The classifier reads only [CLS]: the last layer computes only that row.
            let cls_only = i + 1 == n;
            x = self.layer(layer, &x, b, l, bias.as_deref(), cls_only)?;
        }
        // x is [b, h] (the [CLS] rows) after the last layer.
        let pooled = self.pooler.forward(&x)?.tanh()?;
        self.classifier.forward(&pooled)
    }

    fn layer(
        &self,
        layer: &Layer,
        x: &Tensor,
        b: usize,
        l: usize,
        bias: Option<&[f32]>,
        cls_only: bool,
    ) -> Result<Tensor> {
        let (nh, d) = (self.heads, self.head_size);
        let h = x.dim(1)?;
        let (xq, lq) = if cls_only {
            (x.reshape((b, l, h))?.narrow(1, 0, 1)?.reshape((b, h))?, 1)
        } else {
            (x.clone(), l)
        };
        let q = to_heads(&layer.q.forward(&xq)?, nh, d)?.reshape((nh, b, lq, d))?;
        let k = to_heads(&layer.k.forward(x)?, nh, d)?.reshape((nh, b, l, d))?;
        let v = to_heads(&layer.v.forward(x)?, nh, d)?.reshape((nh, b, l, d))?;
        // One head per task: each head's small matmuls on one thread, the heads side by side
        // (splitting every small matmul across the threads left them waiting).
        use rayon::prelude::*;
        let heads: Vec<Tensor> = (0..nh)
            .into_par_iter()
            .map(|hd| -> Result<Tensor> {
                let (qh, kh, vh) = (q.get(hd)?, k.get(hd)?, v.get(hd)?);
                let mut scores = qh.matmul(&kh.t()?)?;
                if let Some(bias) = bias {
                    let mut s = scores.flatten_all()?.to_vec1::<f32>()?;
                    crate::nn::add_bias(&mut s, bias, b, lq, l);
                    scores = Tensor::from_vec(s, (b, lq, l), &Device::Cpu)?;
                }
                crate::nn::softmax_last_dim_in_place(&scores)?;
                Ok(scores.matmul(&vh)?)
            })
            .collect::<Result<_>>()?;
        let ctx = Tensor::stack(&heads, 0)?.reshape((nh, b * lq, d))?;
        let ctx = from_heads(&ctx)?;
        layer.tail.forward(&ctx, &xq, self.act)
    }
}
