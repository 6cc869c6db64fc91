//! Running named pipeline configurations over datasets, in parallel, one
//! [`EvalLogRecord`] per (configuration, prompt).

use crate::error::EvalError;
use crate::log::{
    EVAL_LOG_SCHEMA, EvalLogRecord, FindingLog, JudgeLog, LayerLog, Outcome, RelationalLog,
};
use rampart_core::{Action, Decision, Pipeline, RiskClass};
use rampart_datasets::{LoadedDataset, Record, RowError};
use rayon::prelude::*;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// A pipeline under evaluation, with the name reports and logs use for it.
#[derive(Debug)]
pub struct NamedPipeline {
    /// Name in reports (`default`, a file stem, or the `NAME` of `NAME=FILE`).
    pub name: String,
    /// The pipeline.
    pub pipeline: Pipeline,
}

impl NamedPipeline {
    /// Pairs a name and a pipeline.
    pub fn new(name: impl Into<String>, pipeline: Pipeline) -> Self {
        Self {
            name: name.into(),
            pipeline,
        }
    }
}

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Worker threads (default: rayon's global pool, one per core).
    pub threads: Option<usize>,
    /// Evaluate at most this many records per dataset (the first ones, in file order).
    pub limit: Option<usize>,
}

/// What a configuration was, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConfigInfo {
    /// Name.
    pub name: String,
    /// The policy version string of the configuration.
    pub policy_version: String,
    /// Layers in pipeline order (`normalize` first).
    pub layers: Vec<String>,
}

/// One dataset's part of a run.
#[derive(Debug, Clone)]
pub struct DatasetRun {
    /// Name used in reports and file names (made unique within the run).
    pub name: String,
    /// Where it came from.
    pub origin: String,
    /// Records in the dataset (readable rows).
    pub records_total: usize,
    /// Records evaluated (fewer than `records_total` under a limit).
    pub records_evaluated: usize,
    /// Rows that could not be read (not evaluated).
    pub row_errors: Vec<RowError>,
    /// Log records, configuration by configuration (in run order), each in record order.
    pub logs: Vec<EvalLogRecord>,
}

/// The result of [`run`]: every log record plus what is needed to report on them.
#[derive(Debug, Clone)]
pub struct EvalRun {
    /// `eval_{YYYYMMDD_HHMMSS}`.
    pub run_id: String,
    /// Start of the run, ISO 8601 UTC.
    pub timestamp_utc: String,
    /// The configurations, in run order.
    pub configs: Vec<ConfigInfo>,
    /// The datasets, in run order.
    pub datasets: Vec<DatasetRun>,
    /// Wall time of the scans (loading and reporting excluded).
    pub wall: Duration,
    /// Worker threads used.
    pub threads: usize,
}

impl EvalRun {
    /// Number of (configuration, prompt) scans.
    pub fn scans(&self) -> usize {
        self.datasets.iter().map(|d| d.logs.len()).sum()
    }
}

/// The number of scans [`run`] will make (the length of a progress bar).
pub fn planned_scans(configs: usize, datasets: &[LoadedDataset], opts: &RunOptions) -> u64 {
    datasets
        .iter()
        .map(|d| {
            opts.limit
                .map_or(d.records.len(), |l| d.records.len().min(l)) as u64
        })
        .sum::<u64>()
        * configs as u64
}

/// Evaluates every configuration over every dataset. Scans run in parallel; `progress` is
/// called with the number of scans just completed (from worker threads). Log records come
/// back in a deterministic order whatever the thread count. Dataset names that repeat get a
/// `_2`, `_3`… suffix.
pub fn run(
    run_id: &str,
    timestamp_utc: &str,
    configs: &[NamedPipeline],
    datasets: Vec<LoadedDataset>,
    opts: &RunOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<EvalRun, EvalError> {
    if configs.is_empty() {
        return Err(EvalError::Empty("no configuration"));
    }
    if datasets.is_empty() {
        return Err(EvalError::Empty("no dataset"));
    }
    let mut names = BTreeSet::new();
    for c in configs {
        if !names.insert(c.name.as_str()) {
            return Err(EvalError::DuplicateConfig(c.name.clone()));
        }
    }
    let info: Vec<ConfigInfo> = configs
        .iter()
        .map(|c| ConfigInfo {
            name: c.name.clone(),
            policy_version: c.pipeline.config().policy.version.clone(),
            layers: c
                .pipeline
                .layer_names()
                .into_iter()
                .map(str::to_string)
                .collect(),
        })
        .collect();
    let key_ids: Vec<&str> = configs.iter().map(|c| c.pipeline.hash_key_id()).collect();
    let names = unique_names(&datasets);

    let pool = match opts.threads {
        Some(n) => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build()
                .map_err(|e| EvalError::ThreadPool {
                    threads: n,
                    message: e.to_string(),
                })?,
        ),
        None => None,
    };
    let threads = pool
        .as_ref()
        .map_or_else(rayon::current_num_threads, |p| p.current_num_threads());

    let evaluated: Vec<&[Record]> = datasets
        .iter()
        .map(|d| {
            let n = opts
                .limit
                .map_or(d.records.len(), |l| d.records.len().min(l));
            &d.records[..n]
        })
        .collect();
    // One job per (dataset, configuration, record), in that order.
    let jobs: Vec<(usize, usize, usize)> = evaluated
        .iter()
        .enumerate()
        .flat_map(|(d, recs)| {
            (0..configs.len()).flat_map(move |c| (0..recs.len()).map(move |r| (d, c, r)))
        })
        .collect();

    let started = Instant::now();
    let work = || -> Vec<EvalLogRecord> {
        jobs.par_iter()
            .map(|&(d, c, r)| {
                let rec = eval_one(run_id, &configs[c], key_ids[c], &names[d], &evaluated[d][r]);
                progress(1);
                rec
            })
            .collect()
    };
    let mut logs = match &pool {
        Some(p) => p.install(work),
        None => work(),
    };
    let wall = started.elapsed();

    let mut out = Vec::with_capacity(datasets.len());
    // Split the flat, ordered log back into datasets (from the end, to move not copy).
    let mut parts = Vec::with_capacity(datasets.len());
    for recs in evaluated.iter().rev() {
        let n = recs.len() * configs.len();
        parts.push(logs.split_off(logs.len() - n));
    }
    parts.reverse();
    for ((d, name), part) in datasets.into_iter().zip(names).zip(parts) {
        out.push(DatasetRun {
            records_evaluated: opts
                .limit
                .map_or(d.records.len(), |l| d.records.len().min(l)),
            records_total: d.records.len(),
            name,
            origin: d.origin,
            row_errors: d.errors,
            logs: part,
        });
    }
    Ok(EvalRun {
        run_id: run_id.to_string(),
        timestamp_utc: timestamp_utc.to_string(),
        configs: info,
        datasets: out,
        wall,
        threads,
    })
}

fn unique_names(datasets: &[LoadedDataset]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    datasets
        .iter()
        .map(|d| {
            let mut name = d.name.clone();
            let mut n = 2;
            while !seen.insert(name.clone()) {
                name = format!("{}_{n}", d.name);
                n += 1;
            }
            name
        })
        .collect()
}

/// Scans one record with one configuration and turns the result into a log record.
/// Input the pipeline refuses (over its limits) is an error record that counts as flagged
/// (BLOCK, fail closed).
pub fn eval_one(
    run_id: &str,
    config: &NamedPipeline,
    hash_key_id: &str,
    dataset: &str,
    record: &Record,
) -> EvalLogRecord {
    let req = record.to_request();
    let attack = record.label.is_attack();
    let t = Instant::now();
    let result = config.pipeline.scan(&req);
    let elapsed_us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
    let mut log = EvalLogRecord {
        schema: EVAL_LOG_SCHEMA.to_string(),
        eval_run_id: run_id.to_string(),
        config: config.name.clone(),
        dataset: dataset.to_string(),
        split: record.split,
        prompt_id: record.id.clone(),
        input_hash: String::new(),
        hash_key_id: hash_key_id.to_string(),
        label: record.label,
        attack,
        category: record.category.clone(),
        language: record.language.clone(),
        channel: Some(record.channel()),
        position: record.position,
        carrier: record.carrier.clone(),
        outcome: Outcome::of(attack, true),
        action: Action::Block,
        risk: RiskClass::HighRisk,
        score: None,
        deciding_layer: None,
        layers: Vec::new(),
        findings: Vec::new(),
        transforms: Vec::new(),
        elapsed_us,
        error: None,
        judge: None,
        relational: None,
    };
    match result {
        Ok(out) => fill_from_decision(&mut log, out.decision),
        Err(e) => {
            log.input_hash = config.pipeline.input_hash(&req);
            log.error = Some(e.to_string());
        }
    }
    log
}

fn fill_from_decision(log: &mut EvalLogRecord, d: Decision) {
    log.outcome = Outcome::of(log.attack, d.action != Action::Allow);
    log.action = d.action;
    log.risk = d.risk;
    log.score = d
        .layers
        .iter()
        .filter_map(|l| l.score)
        .filter(|s| !s.is_nan())
        .reduce(f32::max);
    log.deciding_layer = d
        .layers
        .iter()
        .find(|l| l.action != Action::Allow)
        .map(|l| l.layer.clone());
    log.layers = d
        .layers
        .into_iter()
        .map(|l| LayerLog {
            layer: l.layer,
            status: l.status,
            action: l.action,
            risk: l.risk,
            score: l.score,
            findings: l.findings,
            elapsed_us: l.elapsed_us,
        })
        .collect();
    log.findings = d
        .findings
        .into_iter()
        .map(|f| FindingLog {
            layer: f.layer,
            rule_id: f.rule_id,
            category: f.category,
            strength: f.strength,
            points: if f.counted { f.points } else { 0 },
            segment: f.segment,
            span: f.span,
            view: f.view,
        })
        .collect();
    log.transforms = d
        .transforms
        .iter()
        .map(|t| t.kind.name().to_string())
        .collect();
    log.elapsed_us = d.elapsed_us;
    log.judge = d.judge.as_ref().map(JudgeLog::from_report);
    log.relational = d.relational.as_ref().map(RelationalLog::from_report);
    log.input_hash = d.input_hash;
    log.hash_key_id = d.hash_key_id;
}
