//! Downloading model files from the Hugging Face hub (library only; the CLI wires
//! `rampart models pull NAME` to [`pull`]).

use crate::error::{Result, TransformerError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The files a model directory needs (safetensors weights).
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The files of a model directory with ONNX weights, as Optimum exports lay them out on the
/// hub (ProtectAI v2 ships `onnx/model.onnx`).
pub const ONNX_MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "onnx/model.onnx"];

/// Whether `dir` holds a complete model directory (config, tokenizer, and safetensors or
/// ONNX weights).
pub fn is_complete(dir: &Path) -> bool {
    [&MODEL_FILES, &ONNX_MODEL_FILES]
        .iter()
        .any(|files| files.iter().all(|f| dir.join(f).is_file()))
}

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
    /// Download `onnx/model.onnx` ([`ONNX_MODEL_FILES`]) instead of `model.safetensors`.
    pub onnx: bool,
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            endpoint: std::env::var("HF_ENDPOINT").unwrap_or_else(|_| DEFAULT_ENDPOINT.into()),
            timeout: Duration::from_secs(30),
            token: std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty()),
            onnx: false,
        }
    }
}

/// Where [`pull`] puts `repo_id` at `revision` under `cache_dir`.
pub fn model_dir(repo_id: &str, revision: &str, cache_dir: &Path) -> PathBuf {
    cache_dir
        .join(format!("models--{}", repo_id.replace('/', "--")))
        .join(revision)
}

/// Downloads `config.json`, `tokenizer.json` and `model.safetensors` (with
/// [`PullOptions::onnx`], `onnx/model.onnx`) of `repo_id` at `revision` into `cache_dir` and
/// returns the model directory (loadable with
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
    let files = if options.onnx {
        ONNX_MODEL_FILES
    } else {
        MODEL_FILES
    };
    for file in files {
        let dest = dir.join(file);
        if dest.is_file() {
            continue;
        }
        let parent = dest.parent().unwrap_or(&dir);
        std::fs::create_dir_all(parent).map_err(|e| TransformerError::Io {
            path: parent.to_path_buf(),
            message: e.to_string(),
        })?;
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
        let name = file.rsplit('/').next().unwrap_or(file);
        let tmp = parent.join(format!(".{name}.part"));
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
            onnx: false,
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
            onnx: false,
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

    /// A hub stand-in on 127.0.0.1: serves `files` under `/a/b/resolve/main/`, 404 otherwise;
    /// records the paths asked for.
    fn serve(
        files: Vec<(&'static str, Vec<u8>)>,
    ) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        use std::io::{BufRead, BufReader};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = asked.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut line = String::new();
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let path = line.split(' ').nth(1).unwrap_or("").to_string();
                log.lock().unwrap().push(path.clone());
                let body = files
                    .iter()
                    .find(|(f, _)| path == format!("/a/b/resolve/main/{f}"))
                    .map(|(_, b)| b.clone());
                let (status, body) = match body {
                    Some(b) => ("200 OK", b),
                    None => ("404 Not Found", b"not found".to_vec()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&body);
            }
        });
        (format!("http://{addr}"), asked)
    }

    fn fixture(file: &str) -> Vec<u8> {
        std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("testdata/tiny-bert")
                .join(file),
        )
        .unwrap()
    }

    #[test]
    fn pull_writes_a_loadable_model_directory_and_onnx_pulls_the_onnx_layout() {
        let files = vec![
            ("config.json", fixture("config.json")),
            ("tokenizer.json", fixture("tokenizer.json")),
            ("model.safetensors", fixture("model.safetensors")),
            ("onnx/model.onnx", fixture("model.onnx")),
        ];
        let (endpoint, asked) = serve(files);
        let tmp = tempfile::tempdir().unwrap();
        let mut opts = PullOptions {
            endpoint,
            timeout: Duration::from_secs(5),
            token: None,
            onnx: false,
        };
        let dir = pull_with("a/b", "main", tmp.path(), &opts).unwrap();
        assert_eq!(dir, model_dir("a/b", "main", tmp.path()));
        assert!(is_complete(&dir));
        assert_eq!(
            std::fs::read(dir.join("model.safetensors")).unwrap(),
            fixture("model.safetensors")
        );
        let m = crate::Classifier::load(
            &dir,
            &crate::ClassifierOptions {
                threads: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(m.positive_labels(), ["INJECTION"]);
        // ONNX: the two shared files are kept, only onnx/model.onnx is fetched.
        opts.onnx = true;
        pull_with("a/b", "main", tmp.path(), &opts).unwrap();
        assert_eq!(
            std::fs::read(dir.join("onnx/model.onnx")).unwrap(),
            fixture("model.onnx")
        );
        assert_eq!(
            asked.lock().unwrap().as_slice(),
            [
                "/a/b/resolve/main/config.json",
                "/a/b/resolve/main/tokenizer.json",
                "/a/b/resolve/main/model.safetensors",
                "/a/b/resolve/main/onnx/model.onnx",
            ]
        );
        // no partial files left behind
        assert!(!dir.join(".model.safetensors.part").exists());
        assert!(!dir.join("onnx/.model.onnx.part").exists());
        // a missing file is an error naming it, and leaves no model file behind
        let e = pull_with("a/c", "main", tmp.path(), &opts).unwrap_err();
        assert!(e.to_string().contains("404"), "{e}");
        assert!(
            !model_dir("a/c", "main", tmp.path())
                .join("config.json")
                .exists()
        );
    }
}
