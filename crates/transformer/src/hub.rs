//! Downloading model files from the Hugging Face hub (library only; the CLI wires
//! `rampart models pull NAME` to [`pull`]).

use crate::error::{Result, TransformerError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The files a model directory needs.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The default hub address.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// A well-known model by short name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// Short name (`rampart models pull NAME`).
    pub name: &'static str,
    /// Hub repository.
    pub repo: &'static str,
    /// Revision pulled by default.
    pub revision: &'static str,
    /// What it is.
    pub description: &'static str,
}

const KNOWN: &[KnownModel] = &[
    KnownModel {
        name: "protectai-v2",
        repo: "protectai/deberta-v3-base-prompt-injection-v2",
        revision: "main",
        description: "ProtectAI prompt-injection classifier, DeBERTa-v3-base (SAFE / INJECTION)",
    },
    KnownModel {
        name: "prompt-guard-2-22m",
        repo: "meta-llama/Llama-Prompt-Guard-2-22M",
        revision: "main",
        description: "Meta Llama Prompt Guard 2, 22M, DeBERTa-v3-xsmall (gated: needs HF_TOKEN)",
    },
    KnownModel {
        name: "prompt-guard-2-86m",
        repo: "meta-llama/Llama-Prompt-Guard-2-86M",
        revision: "main",
        description: "Meta Llama Prompt Guard 2, 86M, mDeBERTa-v3-base (gated: needs HF_TOKEN)",
    },
];

/// The catalog of known models.
pub fn known_models() -> &'static [KnownModel] {
    KNOWN
}

/// A known model by short name.
pub fn known_model(name: &str) -> Option<&'static KnownModel> {
    KNOWN.iter().find(|m| m.name == name)
}

/// How to reach the hub.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// Hub address, default [`DEFAULT_ENDPOINT`] (or `HF_ENDPOINT` from the environment).
    pub endpoint: String,
    /// Connect / response-header timeout.
    pub timeout: Duration,
    /// Bearer token for gated repositories (default: `HF_TOKEN` from the environment).
    pub token: Option<String>,
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            endpoint: std::env::var("HF_ENDPOINT").unwrap_or_else(|_| DEFAULT_ENDPOINT.into()),
            timeout: Duration::from_secs(30),
            token: std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty()),
        }
    }
}

/// Where [`pull`] puts `repo_id` at `revision` under `cache_dir`.
pub fn model_dir(repo_id: &str, revision: &str, cache_dir: &Path) -> PathBuf {
    cache_dir
        .join(format!("models--{}", repo_id.replace('/', "--")))
        .join(revision)
}

/// Downloads `config.json`, `tokenizer.json` and `model.safetensors` of `repo_id` at
/// `revision` into `cache_dir` and returns the model directory (loadable with
/// [`crate::Classifier::load`]). Files already there are kept. Uses [`PullOptions::default`].
pub fn pull(repo_id: &str, revision: &str, cache_dir: &Path) -> Result<PathBuf> {
    pull_with(repo_id, revision, cache_dir, &PullOptions::default())
}

/// [`pull`] with explicit options.
pub fn pull_with(
    repo_id: &str,
    revision: &str,
    cache_dir: &Path,
    options: &PullOptions,
) -> Result<PathBuf> {
    let valid = |s: &str| {
        !s.is_empty()
            && !s.contains("..")
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
    };
    if !valid(repo_id)
        || repo_id.matches('/').count() != 1
        || !valid(revision)
        || revision.contains('/')
    {
        return Err(TransformerError::Download(format!(
            "invalid repository {repo_id:?} or revision {revision:?} (expected owner/name and a \
             branch, tag or commit)"
        )));
    }
    let dir = model_dir(repo_id, revision, cache_dir);
    std::fs::create_dir_all(&dir).map_err(|e| TransformerError::Io {
        path: dir.clone(),
        message: e.to_string(),
    })?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(options.timeout))
        .timeout_resolve(Some(options.timeout))
        .timeout_recv_response(Some(options.timeout))
        .user_agent("rampart-transformer")
        .build()
        .into();
    let endpoint = options.endpoint.trim_end_matches('/');
    for file in MODEL_FILES {
        let dest = dir.join(file);
        if dest.is_file() {
            continue;
        }
        let url = format!("{endpoint}/{repo_id}/resolve/{revision}/{file}");
        let mut req = agent.get(&url);
        if let Some(t) = &options.token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let resp = req.call().map_err(|e| {
            let hint = match &e {
                ureq::Error::StatusCode(401 | 403) => {
                    " (gated or private repository: accept its licence on the hub and set HF_TOKEN)"
                }
                ureq::Error::StatusCode(404) => " (no such repository, revision or file)",
                ureq::Error::StatusCode(_) => "",
                _ => " (is the network reachable? set HF_ENDPOINT for a mirror)",
            };
            TransformerError::Download(format!("GET {url}: {e}{hint}"))
        })?;
        let tmp = dir.join(format!(".{file}.part"));
        let mut out = std::fs::File::create(&tmp).map_err(|e| TransformerError::Io {
            path: tmp.clone(),
            message: e.to_string(),
        })?;
        let mut body = resp.into_body().into_reader();
        std::io::copy(&mut body, &mut out)
            .and_then(|_| out.flush())
            .map_err(|e| TransformerError::Download(format!("GET {url}: {e}")))?;
        drop(out);
        std::fs::rename(&tmp, &dest).map_err(|e| TransformerError::Io {
            path: dest.clone(),
            message: e.to_string(),
        })?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog() {
        let names: Vec<&str> = known_models().iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            ["protectai-v2", "prompt-guard-2-22m", "prompt-guard-2-86m"]
        );
        assert_eq!(
            known_model("prompt-guard-2-86m").map(|m| m.repo),
            Some("meta-llama/Llama-Prompt-Guard-2-86M")
        );
        assert!(known_model("nope").is_none());
    }

    #[test]
    fn unreachable_network_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = PullOptions {
            endpoint: DEFAULT_ENDPOINT.into(),
            timeout: Duration::from_secs(3),
            token: None,
        };
        let start = std::time::Instant::now();
        let e = pull_with(
            "protectai/deberta-v3-base-prompt-injection-v2",
            "main",
            tmp.path(),
            &opts,
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("download: GET https://huggingface.co/"),
            "{msg}"
        );
        assert!(msg.contains("network"), "{msg}");
        assert!(start.elapsed() < Duration::from_secs(20));
        // nothing half-written is left as a model file
        let dir = model_dir(
            "protectai/deberta-v3-base-prompt-injection-v2",
            "main",
            tmp.path(),
        );
        assert!(!dir.join("config.json").exists());
    }

    #[test]
    fn refused_connection_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = PullOptions {
            endpoint: "http://127.0.0.1:9".into(),
            timeout: Duration::from_secs(2),
            token: None,
        };
        let e = pull_with("a/b", "main", tmp.path(), &opts).unwrap_err();
        assert!(e.to_string().contains("network"), "{e}");
    }

    #[test]
    fn bad_names_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        for (r, v) in [
            ("../x", "main"),
            ("a", "main"),
            ("a/b/c", "main"),
            ("a/b", "../x"),
        ] {
            let e = pull(r, v, tmp.path()).unwrap_err();
            assert!(e.to_string().contains("invalid"), "{e}");
        }
    }
}
