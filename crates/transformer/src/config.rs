//! The subset of a Hugging Face `config.json` the supported architectures need.

use crate::error::{Result, TransformerError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Model architecture family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Architecture {
    /// BERT (and MiniLM, which is a small BERT): absolute positions, post-LN.
    Bert,
    /// DeBERTa-v2 / v3 / mDeBERTa-v3: disentangled attention with relative positions.
    DebertaV2,
}

/// Parsed `config.json`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ModelConfig {
    pub model_type: String,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default = "default_max_pos")]
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: Option<u32>,
    #[serde(default)]
    pub id2label: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub num_labels: Option<usize>,
    // DeBERTa-v2
    #[serde(default)]
    pub embedding_size: Option<usize>,
    #[serde(default)]
    pub relative_attention: bool,
    #[serde(default)]
    pub max_relative_positions: Option<i64>,
    #[serde(default)]
    pub position_buckets: Option<i64>,
    #[serde(default)]
    pub pos_att_type: Option<PosAttType>,
    #[serde(default)]
    pub share_att_key: Option<bool>,
    #[serde(default)]
    pub norm_rel_ebd: Option<String>,
    #[serde(default)]
    pub position_biased_input: Option<bool>,
    #[serde(default)]
    pub pooler_hidden_size: Option<usize>,
    #[serde(default)]
    pub pooler_hidden_act: Option<String>,
    #[serde(default)]
    pub conv_kernel_size: Option<usize>,
    #[serde(default)]
    pub attention_head_size: Option<usize>,
}

/// `pos_att_type` is a list in v3 configs and a `"p2c|c2p"` string in older ones.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum PosAttType {
    List(Vec<String>),
    Joined(String),
}

impl PosAttType {
    pub fn contains(&self, what: &str) -> bool {
        match self {
            PosAttType::List(v) => v.iter().any(|s| s.trim().eq_ignore_ascii_case(what)),
            PosAttType::Joined(s) => s.split('|').any(|s| s.trim().eq_ignore_ascii_case(what)),
        }
    }
}

fn default_act() -> String {
    "gelu".into()
}
fn default_max_pos() -> usize {
    512
}
fn default_eps() -> f64 {
    1e-12
}

impl ModelConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let src = std::fs::read_to_string(path).map_err(|e| TransformerError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let cfg: ModelConfig =
            serde_json::from_str(&src).map_err(|e| TransformerError::Config {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        let bad = |m: String| TransformerError::Config {
            path: path.to_path_buf(),
            message: m,
        };
        if cfg.num_attention_heads == 0 || cfg.hidden_size == 0 || cfg.num_hidden_layers == 0 {
            return Err(bad(
                "hidden_size, num_hidden_layers and num_attention_heads must be > 0".into(),
            ));
        }
        if cfg.attention_head_size.is_none()
            && !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads)
        {
            return Err(bad(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                cfg.hidden_size, cfg.num_attention_heads
            )));
        }
        Ok(cfg)
    }

    pub fn architecture(&self) -> Result<Architecture> {
        match self.model_type.as_str() {
            "bert" => Ok(Architecture::Bert),
            "deberta-v2" => Ok(Architecture::DebertaV2),
            other => Err(TransformerError::Unsupported(format!(
                "model_type {other:?} (supported: \"bert\", \"deberta-v2\")"
            ))),
        }
    }

    pub fn head_size(&self) -> usize {
        self.attention_head_size
            .unwrap_or(self.hidden_size / self.num_attention_heads)
    }

    /// Labels by index, `LABEL_i` where the config names none.
    pub fn labels(&self) -> Result<Vec<String>> {
        match &self.id2label {
            Some(map) if !map.is_empty() => {
                let mut out = vec![None; map.len()];
                for (k, v) in map {
                    let i: usize = k.trim().parse().map_err(|_| {
                        TransformerError::Labels(format!("id2label key {k:?} is not an index"))
                    })?;
                    let slot = out.get_mut(i).ok_or_else(|| {
                        TransformerError::Labels(format!(
                            "id2label index {i} out of range (there are {} labels)",
                            map.len()
                        ))
                    })?;
                    *slot = Some(v.clone());
                }
                Ok(out
                    .into_iter()
                    .enumerate()
                    .map(|(i, l)| l.unwrap_or_else(|| format!("LABEL_{i}")))
                    .collect())
            }
            _ => {
                let n = self.num_labels.unwrap_or(2);
                Ok((0..n).map(|i| format!("LABEL_{i}")).collect())
            }
        }
    }
}
