//! `rampart train combiner`: fits the combine layer's model on validation datasets.
//!
//! The steps: build the configuration's pipeline with its `combine` layer recording features
//! instead of deciding; scan every record (prompts and segment records once, conversations
//! call by call with a throwaway state); label the segments; split the records in two halves
//! by a stable hash of their id (one half fits the weights, the other chooses the operating
//! points, so the thresholds are not picked on the rows the weights saw); fit; choose each
//! channel's points from the per-dataset false-positive-rate targets; write the model.

use anyhow::{Context, Result, bail};
use clap::Args;
use rampart_combine::fit::{FitOptions, fit, operating_point};
use rampart_combine::model::{ChannelTarget, Fitted, FittedDataset, MODEL_FORMAT, MODEL_VERSION};
use rampart_combine::trees::{TreeOptions, fit_forest};
use rampart_combine::{
    COMBINE_KIND, CombineReport, CombinerModel, FEATURES_VERSION, Learner, OperatingPoints,
};
use rampart_core::{Pipeline, PipelineConfig, Role};
use rampart_datasets::{LoadedDataset, Record};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Options of `rampart train combiner`.
#[derive(Debug, Args)]
#[command(
    after_help = "Writes OUT/model.json (load it with `[[layers]] kind = \"combine\"`, \
    `model = \"OUT/model.json\"`) and prints, per dataset, the share of its operating-point half \
    flagged. Records whose id hashes even fit the weights; odd ones choose the operating points. \
    Give validation data only: `:heldout` parts are refused."
)]
pub struct CombinerArgs {
    /// The pipeline configuration with the `combine` layer to fit (its other layers are used
    /// as they are).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Validation datasets (catalog names, built-in names, `NAME:validation`, JSONL files;
    /// repeatable).
    #[arg(long = "dataset", value_name = "NAME", num_args = 1.., required = true)]
    pub datasets: Vec<String>,
    /// A dataset's false-positive-rate target for the `flag` point, `NAME=RATE` (repeatable;
    /// others use --default-target). `block` meets a quarter of each target.
    #[arg(long = "target", value_name = "NAME=RATE")]
    pub targets: Vec<String>,
    /// The target of datasets not named by --target.
    #[arg(long, default_value_t = 0.01)]
    pub default_target: f64,
    /// What to fit: boosted trees or a logistic model.
    #[arg(long, value_enum, default_value_t = LearnerKind::Trees)]
    pub learner: LearnerKind,
    /// Logistic: L2 penalty on the standardized weights.
    #[arg(long, default_value_t = FitOptions::default().l2)]
    pub l2: f64,
    /// Trees: boosting rounds.
    #[arg(long, default_value_t = TreeOptions::default().rounds)]
    pub rounds: usize,
    /// Trees: depth of each tree.
    #[arg(long, default_value_t = TreeOptions::default().depth)]
    pub depth: usize,
    /// Trees: shrinkage of each tree.
    #[arg(long, default_value_t = TreeOptions::default().learning_rate)]
    pub learning_rate: f64,
    /// Output directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Directory of fetched datasets (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Also write every labelled segment (dataset, half, role, label, features) as JSON
    /// Lines, for analysis.
    #[arg(long, value_name = "FILE")]
    pub dump: Option<PathBuf>,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// What `rampart train combiner` fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LearnerKind {
    /// Gradient-boosted trees (the embedded model's).
    Trees,
    /// L2-regularized logistic regression.
    Logistic,
}

/// One labelled segment.
struct Row {
    dataset: usize,
    fit_half: bool,
    role: Role,
    attack: bool,
    values: Vec<f32>,
}

/// Runs `rampart train combiner`.
pub fn run(a: &CombinerArgs) -> Result<u8> {
    let targets = parse_targets(&a.targets)?;
    if let Some(bad) = a.datasets.iter().find(|d| d.ends_with(":heldout")) {
        bail!("{bad}: the held-back part is for evaluation only and is never fitted on");
    }
    let (pipeline, inputs, judge) = recording_pipeline(&a.config)?;
    let data_dir = a
        .data_dir
        .clone()
        .unwrap_or_else(rampart_datasets::default_data_dir);
    let datasets = crate::load_datasets(&a.datasets, &data_dir, |_| {})?;
    let rows = collect_rows(&pipeline, &datasets, a.no_progress)?;
    let names = rampart_combine::Extractor::with_judge(inputs.clone(), judge.clone())
        .names()
        .to_vec();
    if let Some(path) = &a.dump {
        dump_rows(path, &datasets, &rows, &names)?;
    }

    let (fit_x, fit_y): (Vec<Vec<f32>>, Vec<bool>) = rows
        .iter()
        .filter(|r| r.fit_half)
        .map(|r| (r.values.clone(), r.attack))
        .unzip();
    let (learner, iterations) = fit_learner(a, &fit_x, &fit_y)?;
    let mut model = CombinerModel {
        format: MODEL_FORMAT.into(),
        version: MODEL_VERSION,
        features_version: FEATURES_VERSION,
        inputs,
        judge,
        features: names,
        learner,
        operating_points: OperatingPoints::new(rampart_combine::OperatingPoint {
            flag: 0.5,
            block: 0.5,
        }),
        fitted: Fitted {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            datasets: dataset_counts(&datasets, &rows),
            learner: learner_line(a),
            iterations,
            targets: Vec::new(),
        },
    };
    choose_points(&mut model, &datasets, &rows, &targets, a.default_target)?;
    model.check(&model.features.clone())?;

    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let path = a.out.join("model.json");
    std::fs::write(&path, serde_json::to_string_pretty(&model)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    print_summary(&model, &path)?;
    Ok(0)
}

fn learner_line(a: &CombinerArgs) -> String {
    match a.learner {
        LearnerKind::Trees => format!(
            "trees: {} rounds, depth {}, learning rate {}, classes balanced",
            a.rounds, a.depth, a.learning_rate
        ),
        LearnerKind::Logistic => format!("logistic: L2 {}, classes balanced", a.l2),
    }
}

/// Fits the chosen learner; returns it and its rounds or Newton steps.
fn fit_learner(a: &CombinerArgs, x: &[Vec<f32>], y: &[bool]) -> Result<(Learner, usize)> {
    match a.learner {
        LearnerKind::Logistic => {
            let opts = FitOptions {
                l2: a.l2,
                ..FitOptions::default()
            };
            let f = fit(x, y, opts).context("fitting the combiner")?;
            Ok((
                Learner::Logistic {
                    weights: f.weights,
                    means: f.means,
                    bias: f.bias,
                },
                f.iterations,
            ))
        }
        LearnerKind::Trees => {
            let pos = y.iter().filter(|v| **v).count();
            let neg = y.len() - pos;
            if pos == 0 || neg == 0 {
                bail!("both classes need rows on the fitting half (attacks {pos}, benign {neg})");
            }
            let total = y.len() as f64;
            let (wp, wn) = (total / (2.0 * pos as f64), total / (2.0 * neg as f64));
            let w: Vec<f64> = y.iter().map(|v| if *v { wp } else { wn }).collect();
            let opts = TreeOptions {
                rounds: a.rounds,
                depth: a.depth,
                learning_rate: a.learning_rate,
                ..TreeOptions::default()
            };
            let f = fit_forest(x, y, &w, opts);
            Ok((
                Learner::Trees {
                    base: f.base,
                    trees: f.trees,
                },
                a.rounds,
            ))
        }
    }
}

fn dump_rows(
    path: &std::path::Path,
    datasets: &[LoadedDataset],
    rows: &[Row],
    names: &[String],
) -> Result<()> {
    use std::io::Write;
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    writeln!(w, "{}", serde_json::json!({ "features": names }))?;
    for r in rows {
        let line = serde_json::json!({
            "dataset": datasets.get(r.dataset).map(|d| d.name.as_str()),
            "fit": r.fit_half,
            "role": r.role,
            "attack": r.attack,
            "x": r.values,
        });
        writeln!(w, "{line}")?;
    }
    w.flush()?;
    Ok(())
}

fn parse_targets(specs: &[String]) -> Result<BTreeMap<String, f64>> {
    let mut out = BTreeMap::new();
    for s in specs {
        let Some((name, rate)) = s.rsplit_once('=') else {
            bail!("--target {s:?}: expected NAME=RATE");
        };
        let rate: f64 = rate
            .parse()
            .with_context(|| format!("--target {s:?}: the rate is not a number"))?;
        if !(0.0..1.0).contains(&rate) {
            bail!("--target {s:?}: the rate must be in [0, 1)");
        }
        out.insert(name.to_string(), rate);
    }
    Ok(out)
}

/// The configuration's pipeline with its one `combine` layer in `record` mode, that layer's
/// inputs and the judge layer it reads, if any.
fn recording_pipeline(
    path: &std::path::Path,
) -> Result<(Arc<Pipeline>, Vec<String>, Option<String>)> {
    let mut config: PipelineConfig =
        rampart::load_config(path).with_context(|| format!("reading {}", path.display()))?;
    let mut combine = config.layers.iter_mut().filter(|l| l.kind == COMBINE_KIND);
    let (Some(layer), None) = (combine.next(), combine.next()) else {
        bail!(
            "{}: needs exactly one layer of kind \"{COMBINE_KIND}\"",
            path.display()
        );
    };
    layer
        .options
        .insert("mode".into(), toml::Value::String("record".into()));
    let inputs: Vec<String> = match layer.options.get("inputs") {
        Some(toml::Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => bail!("{}: the combine layer needs `inputs`", path.display()),
    };
    let judge = match layer.options.get("judge") {
        None => None,
        Some(toml::Value::String(j)) => Some(j.clone()),
        Some(_) => bail!(
            "{}: the combine layer's `judge` must be a layer name",
            path.display()
        ),
    };
    let pipeline = Pipeline::from_config_with(config, &rampart::registry())
        .with_context(|| format!("building {}", path.display()))?;
    Ok((Arc::new(pipeline), inputs, judge))
}

/// Scans every record and labels its segments (see [`label_segments`]).
fn collect_rows(
    pipeline: &Arc<Pipeline>,
    datasets: &[LoadedDataset],
    no_progress: bool,
) -> Result<Vec<Row>> {
    let base = rampart_conversation::ConversationScanner::stateless(
        pipeline.clone(),
        rampart_conversation::ConversationOptions::default(),
    )?;
    let total: usize = datasets.iter().map(|d| d.records.len()).sum();
    let bar = crate::progress_bar(
        no_progress,
        total as u64,
        "{spinner} scan [{elapsed_precise}] {wide_bar} {pos}/{len} records ({per_sec}, eta {eta})",
    )?;
    let jobs: Vec<(usize, &Record)> = datasets
        .iter()
        .enumerate()
        .flat_map(|(d, ds)| ds.records.iter().map(move |r| (d, r)))
        .collect();
    let per: Vec<Result<Vec<Row>>> = jobs
        .par_iter()
        .map(|&(d, rec)| {
            let out = record_rows(pipeline, &base, d, rec);
            bar.inc(1);
            out
        })
        .collect();
    bar.finish_and_clear();
    let mut rows = Vec::new();
    for r in per {
        rows.extend(r?);
    }
    Ok(rows)
}

/// The labelled segments of one record. A prompt or segment record is scanned once: a
/// benign record's untrusted segments are all negatives; an attack record's positive is its
/// longest untrusted segment (the carrier, where an embedded attack sits; the short request
/// beside it is left out, being neither). A conversation is replayed: each call's newest
/// untrusted segment is a negative in a benign conversation; in an attack conversation only
/// the last call's is used, as the positive.
fn record_rows(
    pipeline: &Pipeline,
    base: &rampart_conversation::ConversationScanner,
    dataset: usize,
    rec: &Record,
) -> Result<Vec<Row>> {
    let attack = rec.label.is_attack();
    let fit_half = stable_hash(&rec.id).is_multiple_of(2);
    let row = |s: &rampart_combine::SegmentReport| Row {
        dataset,
        fit_half,
        role: s.role,
        attack,
        values: s.features.clone().unwrap_or_default(),
    };
    let mut rows = Vec::new();
    if rec.is_conversation() {
        let turns = rec.turns.as_deref().unwrap_or_default();
        let replay = rampart_eval::replay::replay(base, &rec.id, turns)
            .with_context(|| format!("replaying {}", rec.id))?;
        let n = replay.calls.len();
        for (i, call) in replay.calls.iter().enumerate() {
            if attack && i + 1 != n {
                continue;
            }
            let Some(report) = call.decision.reports.get::<CombineReport>()? else {
                continue;
            };
            if let Some(s) = report.segments.last() {
                rows.push(row(s));
            }
        }
        return Ok(rows);
    }
    let req = rec.to_request();
    let Ok(out) = pipeline.scan(&req) else {
        return Ok(rows); // over the limits: nothing to learn from
    };
    let Some(report) = out.decision.reports.get::<CombineReport>()? else {
        return Ok(rows);
    };
    if attack {
        let longest = report
            .segments
            .iter()
            .max_by_key(|s| req.segments.get(s.segment).map_or(0, |g| g.text.len()));
        rows.extend(longest.map(row));
    } else {
        rows.extend(report.segments.iter().map(row));
    }
    Ok(rows)
}

/// FNV-1a over the id: a stable split that needs no key (it only separates fitting from
/// choosing thresholds; it protects nothing).
fn stable_hash(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn dataset_counts(datasets: &[LoadedDataset], rows: &[Row]) -> Vec<FittedDataset> {
    datasets
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let count = |fit: bool, attack: bool| {
                rows.iter()
                    .filter(|r| r.dataset == i && r.fit_half == fit && r.attack == attack)
                    .count()
            };
            FittedDataset {
                name: d.name.clone(),
                fit: [count(true, true), count(true, false)],
                calibrate: [count(false, true), count(false, false)],
            }
        })
        .collect()
}

/// The channel a segment's operating point belongs to: data channels (tool, retrieved) get
/// their own when the data has benign rows of them; everything else is `default`.
fn channel(role: Role) -> Option<Role> {
    matches!(role, Role::Tool | Role::Retrieved).then_some(role)
}

fn choose_points(
    model: &mut CombinerModel,
    datasets: &[LoadedDataset],
    rows: &[Row],
    targets: &BTreeMap<String, f64>,
    default_target: f64,
) -> Result<()> {
    let calibrate: Vec<(&Row, f32)> = rows
        .iter()
        .filter(|r| !r.fit_half)
        .map(|r| (r, model.probability(&r.values)))
        .collect();
    for ch in [None, Some(Role::Tool), Some(Role::Retrieved)] {
        let in_channel: Vec<&(&Row, f32)> = calibrate
            .iter()
            .filter(|(r, _)| channel(r.role) == ch)
            .collect();
        let mut sources: Vec<(String, Vec<f32>, f64)> = Vec::new();
        for (i, d) in datasets.iter().enumerate() {
            let benign: Vec<f32> = in_channel
                .iter()
                .filter(|(r, _)| r.dataset == i && !r.attack)
                .map(|(_, p)| *p)
                .collect();
            if !benign.is_empty() {
                let rate = targets.get(&d.name).copied().unwrap_or(default_target);
                sources.push((d.name.clone(), benign, rate));
            }
        }
        let name = ch.map_or("default", Role::name).to_string();
        if sources.is_empty() {
            if ch.is_none() {
                bail!("no benign segment outside the data channels to choose the default point");
            }
            continue;
        }
        let refs: Vec<(&[f32], f64)> = sources.iter().map(|(_, s, r)| (&s[..], *r)).collect();
        let point = operating_point(&refs);
        let reached =
            |s: &[f32]| s.iter().filter(|p| **p >= point.flag).count() as f64 / s.len() as f64;
        let attacks: Vec<f32> = in_channel
            .iter()
            .filter(|(r, _)| r.attack)
            .map(|(_, p)| *p)
            .collect();
        model.fitted.targets.push(ChannelTarget {
            channel: name,
            sources: sources
                .iter()
                .map(|(n, s, r)| (n.clone(), *r, reached(s), s.len()))
                .collect(),
            attacks: (
                attacks.len(),
                if attacks.is_empty() {
                    0.0
                } else {
                    reached(&attacks)
                },
            ),
        });
        match ch {
            None => model.operating_points.default = point,
            Some(role) => model.operating_points.set(role, point),
        }
    }
    Ok(())
}

fn print_summary(model: &CombinerModel, path: &std::path::Path) -> Result<()> {
    outln!(
        "wrote {} ({} features; {})",
        path.display(),
        model.features.len(),
        model.fitted.learner
    )?;
    for t in &model.fitted.targets {
        let p = Role::ALL
            .into_iter()
            .find(|r| r.name() == t.channel)
            .map_or(model.operating_points.default, |r| {
                model.operating_points.get(r)
            });
        outln!(
            "{:<10} flag {:.4} block {:.4}; attacks flagged {:.1}% of {}",
            t.channel,
            p.flag,
            p.block,
            100.0 * t.attacks.1,
            t.attacks.0
        )?;
        for (name, target, reached, n) in &t.sources {
            outln!(
                "    {name:<40} benign flagged {:>6.2}% of {n} (target {:.2}%)",
                100.0 * reached,
                100.0 * target
            )?;
        }
    }
    Ok(())
}
