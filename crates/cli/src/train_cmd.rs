//! `rampart train linear`: trains the built-in fast classifier from catalogued datasets;
//! `rampart train combiner` fits the combine layer (`train_combiner.rs`).

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use rampart_classify::{Example, FeatureConfig, Phase, TrainOptions};
use std::path::PathBuf;

/// Which model to train.
#[derive(Debug, Subcommand)]
pub enum TrainCommand {
    /// Logistic regression over hashed byte and word n-grams (the `linear` layer).
    Linear(LinearArgs),
    /// The combine layer's logistic model over every earlier signal, fitted on validation
    /// datasets, with operating points per channel.
    Combiner(crate::train_combiner::CombinerArgs),
}

/// Options of `rampart train linear`.
#[derive(Debug, Args)]
#[command(
    after_help = "Writes OUT/model.bin (load it with `[[layers]] kind = \"linear\"`, \
    `model = \"OUT/model.bin\"`) and OUT/training.json (validation metrics). The same command \
    and seed give a byte-identical model.bin. ShareGPT parts: `sharegpt_first_turns:train`, \
    `:validation`, `:heldout` (the held-back part must never be given here)."
)]
pub struct LinearArgs {
    /// Training datasets (catalog names, built-in names or JSONL files; repeatable).
    #[arg(long = "train", value_name = "NAME", num_args = 1.., required = true)]
    pub train: Vec<String>,
    /// Validation datasets for calibration and the threshold (repeatable).
    #[arg(long = "valid", value_name = "NAME", num_args = 1.., required = true)]
    pub valid: Vec<String>,
    /// Output directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Seed of the shuffling.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Passes over the training data.
    #[arg(long, default_value_t = TrainOptions::default().epochs)]
    pub epochs: u32,
    /// log2 of the number of hash buckets (weights file = 4 * 2^bits bytes).
    #[arg(long, default_value_t = FeatureConfig::default().bits)]
    pub bits: u8,
    /// Shortest byte n-gram.
    #[arg(long, default_value_t = FeatureConfig::default().char_min)]
    pub char_min: u8,
    /// Longest byte n-gram.
    #[arg(long, default_value_t = FeatureConfig::default().char_max)]
    pub char_max: u8,
    /// Longest word n-gram (0 = no word features).
    #[arg(long, default_value_t = FeatureConfig::default().word_max)]
    pub word_max: u8,
    /// L2 regularisation strength.
    #[arg(long, default_value_t = TrainOptions::default().l2)]
    pub l2: f32,
    /// AdaGrad learning rate.
    #[arg(long, default_value_t = TrainOptions::default().learning_rate)]
    pub lr: f32,
    /// Do not re-weight the classes to equal total weight.
    #[arg(long)]
    pub no_balance: bool,
    /// False-positive rate the threshold is picked for, on the benign validation rows.
    #[arg(long, default_value_t = 0.01)]
    pub target_fpr: f32,
    /// Model name recorded in the header (default: the output directory's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Directory of fetched datasets (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// Runs `rampart train …`.
pub fn run(cmd: &TrainCommand) -> Result<u8> {
    match cmd {
        TrainCommand::Linear(a) => linear(a),
        TrainCommand::Combiner(a) => crate::train_combiner::run(a),
    }
}

fn load(specs: &[String], data_dir: &std::path::Path) -> Result<Vec<Example>> {
    let mut out = Vec::new();
    for spec in specs {
        if spec.ends_with(":heldout") {
            bail!("{spec}: the held-back part is for evaluation only and is never trained on");
        }
        let d =
            rampart_datasets::load(spec, data_dir).with_context(|| format!("loading {spec}"))?;
        if !d.errors.is_empty() {
            eprintln!(
                "rampart: {spec}: skipped {} unreadable row(s)",
                d.errors.len()
            );
        }
        let attacks = d.records.iter().filter(|r| r.label.is_attack()).count();
        eprintln!(
            "rampart: {spec}: {} prompts ({attacks} attack, {} benign)",
            d.records.len(),
            d.records.len() - attacks
        );
        out.extend(d.records.iter().map(|r| Example {
            text: r.joined_text(),
            attack: r.label.is_attack(),
        }));
    }
    Ok(out)
}

fn linear(a: &LinearArgs) -> Result<u8> {
    let data_dir = a
        .data_dir
        .clone()
        .unwrap_or_else(rampart_datasets::default_data_dir);
    let train = load(&a.train, &data_dir)?;
    let valid = load(&a.valid, &data_dir)?;
    let name = a.name.clone().unwrap_or_else(|| {
        a.out
            .file_name()
            .map_or_else(|| "linear".into(), |n| n.to_string_lossy().into_owned())
    });
    let opts = TrainOptions {
        name,
        features: FeatureConfig {
            bits: a.bits,
            char_min: a.char_min,
            char_max: a.char_max,
            word_max: a.word_max,
        },
        epochs: a.epochs,
        seed: a.seed,
        l2: a.l2,
        learning_rate: a.lr,
        balance_classes: !a.no_balance,
        target_fpr: a.target_fpr,
        train_names: a.train.clone(),
        valid_names: a.valid.clone(),
    };

    let bar = crate::progress_bar(
        a.no_progress,
        1,
        "{spinner} {msg:>12} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
    )?;
    let epochs = a.epochs;
    let mut last_phase = None;
    let trained = rampart_classify::train(&train, &valid, &opts, &mut |p| {
        if last_phase != Some(p.phase) {
            last_phase = Some(p.phase);
            bar.reset();
            bar.set_length(p.total as u64);
            bar.set_message(match p.phase {
                Phase::Prepare => "normalize".to_string(),
                Phase::Epoch(e) => format!("epoch {e}/{epochs}"),
                Phase::Validate => "validate".to_string(),
                _ => "training".to_string(),
            });
        }
        bar.set_position(p.done as u64);
    })?;
    bar.finish_and_clear();

    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let model_path = a.out.join("model.bin");
    trained.model.save(&model_path)?;
    let h = trained.model.header();
    let v = &trained.validation;
    let report = serde_json::json!({
        "schema": "rampart.linear_training.v1",
        "model": model_path.display().to_string(),
        "model_bytes": trained.model.to_bytes().len(),
        "train": a.train,
        "valid": a.valid,
        "train_counts": {"attack": h.provenance.train_counts[0], "benign": h.provenance.train_counts[1]},
        "valid_counts": {"attack": v.counts[0], "benign": v.counts[1]},
        "features": h.features,
        "seed": a.seed,
        "epochs": a.epochs,
        "l2": a.l2,
        "learning_rate": a.lr,
        "balance_classes": !a.no_balance,
        "epoch_loss": trained.epoch_loss,
        "calibration": h.calibration,
        "threshold": h.threshold,
        "target_fpr": h.target_fpr,
        "validation": {"tpr": v.tpr, "fpr": v.fpr, "auc": v.auc, "log_loss": v.log_loss},
    });
    let report_path = a.out.join("training.json");
    std::fs::write(&report_path, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", report_path.display()))?;
    outln!(
        "wrote {} ({} bytes): threshold {:.4} (target FPR {:.2}%), validation TPR {:.2}%, FPR {:.2}%, AUC {:.4}",
        model_path.display(),
        trained.model.to_bytes().len(),
        h.threshold,
        100.0 * h.target_fpr,
        100.0 * v.tpr,
        100.0 * v.fpr,
        v.auc
    )?;
    Ok(0)
}
