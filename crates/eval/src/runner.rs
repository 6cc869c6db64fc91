//! Running named pipeline configurations over datasets, in parallel, one
//! [`EvalLogRecord`] per (configuration, prompt).

use crate::error::EvalError;
use crate::log::{
    ConversationLog, EVAL_LOG_SCHEMA, EvalLogRecord, FindingLog, JudgeLog, LayerLog, Outcome,
    RelationalLog,
};
use crate::replay::{Replay, replay};
use rampart_conversation::{ConversationOptions, ConversationReport, ConversationScanner};
use rampart_core::{Action, Decision, Pipeline, RiskClass};
use rampart_datasets::{LoadedDataset, Record, RowError};
use rayon::prelude::*;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A pipeline under evaluation, with the name reports and logs use for it.
#[derive(Debug)]
pub struct NamedPipeline {
    /// Name in reports (`default`, a file stem, or the `NAME` of `NAME=FILE`).
    pub name: String,
    /// The pipeline (shared with the conversation scanners of conversation records).
    pub pipeline: Arc<Pipeline>,
}

impl NamedPipeline {
    /// Pairs a name and a pipeline.
    pub fn new(name: impl Into<String>, pipeline: Pipeline) -> Self {
        Self {
            name: name.into(),
            pipeline: Arc::new(pipeline),
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
    /// How conversation records are scanned (each replayed with a fresh state).
    pub conversation: ConversationOptions,
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
    opts.conversation.validate()?;
    // Compiled once per configuration; each conversation replay gets its own state.
    let bases: Vec<ConversationScanner> = configs
        .iter()
        .map(|c| ConversationScanner::stateless(c.pipeline.clone(), opts.conversation.clone()))
        .collect::<Result<_, _>>()?;
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
                let record = &evaluated[d][r];
                let rec = if record.is_conversation() {
                    eval_conversation(
                        run_id,
                        &configs[c],
                        &bases[c],
                        key_ids[c],
                        &names[d],
                        record,
                    )
                } else {
                    eval_one(run_id, &configs[c], key_ids[c], &names[d], record)
                };
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
    let t = Instant::now();
    let result = config.pipeline.scan(&req);
    let elapsed_us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
    let mut log = base_log(run_id, config, hash_key_id, dataset, record, elapsed_us);
    match result {
        Ok(out) => fill_from_decision(&mut log, out.decision),
        Err(e) => {
            log.input_hash = config.pipeline.input_hash(&req);
            log.error = Some(e.to_string());
        }
    }
    log
}

/// Replays one conversation record ([`crate::replay`]) with one configuration. The log's
/// decision fields are the first flagged call's (the last call's when none was flagged);
/// `score` is the highest over the calls and `elapsed_us` their sum. A call the scanner
/// refuses (over the limits) ends the replay and counts as flagged (fail closed), like a
/// refused prompt.
pub fn eval_conversation(
    run_id: &str,
    config: &NamedPipeline,
    base: &ConversationScanner,
    hash_key_id: &str,
    dataset: &str,
    record: &Record,
) -> EvalLogRecord {
    let turns = record.turns.as_deref().unwrap_or_default();
    let t = Instant::now();
    let result = replay(base, &record.id, turns);
    let elapsed_us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
    let mut log = base_log(run_id, config, hash_key_id, dataset, record, elapsed_us);
    let rep = match result {
        Ok(r) => r,
        Err(e) => Replay {
            error: Some((turns.len().saturating_sub(1), e.to_string())),
            ..Replay::default()
        },
    };
    let first = rep.first_flag();
    let decisive = first.map(|(_, c)| c).or(rep.calls.last());
    if let Some(c) = decisive {
        fill_from_decision(&mut log, c.decision.clone());
        log.elapsed_us = rep.calls.iter().map(|c| c.decision.elapsed_us).sum();
        log.score = rep
            .calls
            .iter()
            .flat_map(|c| {
                c.decision
                    .layers
                    .iter()
                    .filter(|l| !l.score_only)
                    .filter_map(|l| l.score)
            })
            .filter(|s| !s.is_nan())
            .reduce(f32::max);
    }
    let risks = rep.calls.iter().filter_map(|c| {
        c.decision
            .reports
            .find::<ConversationReport>()
            .map(|r| r.risk)
    });
    let mut conv = ConversationLog {
        messages: turns.len(),
        calls: rep.calls.len(),
        attack_turn: record.attack_turn,
        first_flag_call: first.map(|(n, _)| n),
        first_flag_message: first.map(|(_, c)| c.message),
        flagged_by: first
            .map(|(_, c)| flagged_by(&c.decision))
            .unwrap_or_default(),
        risk: rep
            .calls
            .last()
            .and_then(|c| c.decision.reports.find::<ConversationReport>())
            .map_or(0.0, |r| r.risk),
        peak_risk: risks.fold(0.0, f32::max),
        rewinds: turns.iter().filter(|t| t.rewind.is_some()).count(),
        forged: turns.iter().filter(|t| t.forged).count(),
        flagged_calls: rep.calls.iter().filter(|c| c.flagged()).count(),
        flagged_later_calls: rep.calls.iter().skip(1).filter(|c| c.flagged()).count(),
        flagged_calls_by: rep
            .calls
            .iter()
            .filter(|c| c.flagged())
            .map(|c| flagged_by(&c.decision).join("+"))
            .collect(),
        call_kinds: rep
            .calls
            .iter()
            .map(|c| call_kind(turns, c.message))
            .collect(),
        flagged_call_kinds: rep
            .calls
            .iter()
            .filter(|c| c.flagged())
            .map(|c| call_kind(turns, c.message))
            .collect(),
        judge_calls: rep
            .calls
            .iter()
            .filter_map(|c| c.decision.reports.find::<rampart_judge::JudgeReport>())
            .filter(|j| j.called)
            .map(|j| JudgeLog::from_report(&j))
            .collect(),
    };
    if let Some((message, why)) = &rep.error {
        log.error = Some(why.clone());
        if first.is_none() {
            // Fail closed: the refused call is the first flag.
            log.outcome = Outcome::of(log.attack, true);
            log.action = Action::Block;
            log.risk = RiskClass::HighRisk;
            conv.first_flag_call = Some(rep.calls.len() + 1);
            conv.first_flag_message = Some(*message);
            conv.flagged_by = vec![crate::report::ATTR_INPUT_ERROR.to_string()];
        }
    }
    log.conversation = Some(conv);
    log
}

/// The ids of what flagged a call: counted findings and conversation findings, sorted and
/// unique; the deciding layer in parentheses when no finding did (a classifier score).
/// The content kind of a call's newest message.
fn call_kind(turns: &[rampart_datasets::DatasetTurn], message: usize) -> String {
    turns
        .get(message)
        .map_or(crate::kind::ContentKind::Chat, |t| {
            crate::kind::content_kind(&t.text)
        })
        .name()
        .to_string()
}

fn flagged_by(d: &Decision) -> Vec<String> {
    let mut ids: BTreeSet<String> = d
        .findings
        .iter()
        .filter(|f| f.counted && f.points > 0)
        .map(|f| f.rule_id.clone())
        .collect();
    if let Some(c) = d.reports.find::<ConversationReport>() {
        ids.extend(c.findings.iter().map(|f| f.id.clone()));
    }
    if ids.is_empty()
        && let Some(l) = d.layers.iter().find(|l| l.action != Action::Allow)
    {
        ids.insert(format!("({})", l.layer));
    }
    ids.into_iter().collect()
}

/// A log record for `record` before its decision is known: fail-closed defaults (BLOCK,
/// flagged) that the decision overwrites.
fn base_log(
    run_id: &str,
    config: &NamedPipeline,
    hash_key_id: &str,
    dataset: &str,
    record: &Record,
    elapsed_us: u64,
) -> EvalLogRecord {
    let attack = record.label.is_attack();
    EvalLogRecord {
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
        conversation: None,
    }
}

fn fill_from_decision(log: &mut EvalLogRecord, d: Decision) {
    log.outcome = Outcome::of(log.attack, d.action != Action::Allow);
    log.action = d.action;
    log.risk = d.risk;
    log.score = d
        .layers
        .iter()
        .filter(|l| !l.score_only)
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
    log.judge = d
        .reports
        .find::<rampart_judge::JudgeReport>()
        .as_ref()
        .map(JudgeLog::from_report);
    log.relational = d
        .reports
        .find::<rampart_relational::RelationalReport>()
        .as_ref()
        .map(RelationalLog::from_report);
    log.input_hash = d.input_hash;
    log.hash_key_id = d.hash_key_id;
}
