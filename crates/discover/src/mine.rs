//! The miner: eval logs joined to dataset text by prompt id, word n-grams and special-token
//! shapes over the folded view, exact recount with the rule engine, filters, metrics,
//! decisions, ids and sort order. See the crate documentation for the method.

use crate::category::categorize;
use crate::error::{DiscoverError, joined};
use crate::metrics::{self, MetricInputs};
use crate::record::{
    BenignRegression, DatasetEvidence, Decision, Evidence, GUARDRAIL_ENTRYPOINT, GuardrailInfo,
    Implementation, ModelInfo, OutcomeBuckets, PatternCandidate, PatternKind, PatternSpec,
    Recommendation, RunInfo, SCHEMA_VERSION, SCRIPT_NAME, SplitName, SuggestedAction,
    SuggestedRisk, TargetFunction,
};
use crate::tokens::{Words, is_word_char, shapes};
use rampart_core::timefmt::run_id_timestamp;
use rampart_core::{Category, Location, RiskClass, Strength};
use rampart_datasets::{Record, Split};
use rampart_eval::log::{EVAL_LOG_SCHEMA, EvalLogRecord, Outcome};
use rampart_normalize::{Normalizer, fold_pattern};
use rampart_rules::{Matcher, MatcherBuilder, Rule, RuleMatch, RulePack, RuleScope};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;

/// Function words that never make a candidate on their own.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have",
    "he", "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my",
    "no", "not", "now", "of", "on", "or", "our", "out", "she", "so", "some", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "to", "up", "us", "was", "we",
    "were", "what", "when", "which", "who", "will", "with", "would", "you", "your",
];
/// Words an n-gram may not start or end with (it would only be a padded shorter one).
const EDGE_STOPWORDS: &[&str] = &[
    "a", "an", "and", "at", "but", "by", "for", "from", "in", "into", "is", "of", "on", "or",
    "that", "the", "this", "to", "was", "with",
];

/// Knobs of the miner.
#[derive(Debug, Clone, PartialEq)]
pub struct MineOptions {
    /// Minimum number of attack prompts (TP + FN, all mined datasets) a pattern must match.
    pub min_support: u64,
    /// At most this many candidates are written (the best by the sort order).
    pub max_candidates: usize,
    /// Longest word n-gram (1 to 5).
    pub max_ngram: usize,
    /// A pattern's attack match rate must be at least this multiple of its benign match rate.
    pub min_lift: f64,
    /// `fp_risk_score` at or above which a candidate is recommended `exclude`.
    pub exclude_fp_risk: f64,
    /// Example prompt ids kept per dataset.
    pub examples: usize,
    /// The configuration to mine when the logs hold several.
    pub config: Option<String>,
    /// At most this many patterns are recounted with the rule engine (the best by a
    /// preliminary ranking).
    pub recount_cap: usize,
}

impl Default for MineOptions {
    fn default() -> Self {
        Self {
            min_support: 3,
            max_candidates: 100,
            max_ngram: 5,
            min_lift: 3.0,
            exclude_fp_risk: 0.25,
            examples: 5,
            config: None,
            recount_cap: 3000,
        }
    }
}

/// The clean benign corpus for the regression check.
#[derive(Debug, Clone, Copy)]
pub struct Corpus<'a> {
    /// Its name in reports (`Clean_Benign_Corpus_v1`).
    pub name: &'a str,
    /// Its records.
    pub records: &'a [Record],
}

/// What to mine.
#[derive(Debug, Clone, Copy)]
pub struct MineInput<'a> {
    /// Eval log records (any number of files, concatenated).
    pub logs: &'a [EvalLogRecord],
    /// The records of every dataset the logs name, by dataset name.
    pub datasets: &'a BTreeMap<String, Vec<Record>>,
    /// The clean benign corpus.
    pub benign: Corpus<'a>,
}

/// What the caller knows about the run that the logs do not say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunContext {
    /// `git rev-parse HEAD`, or `"unknown"`.
    pub git_commit: String,
    /// The policy version the prompts were evaluated under.
    pub policy_version: String,
    /// ISO 8601 UTC time the records are written (`created_at`).
    pub created_at: String,
    /// `run.model.version`: the Rampart version.
    pub version: String,
}

impl RunContext {
    /// A context with this crate's version.
    pub fn new(
        git_commit: impl Into<String>,
        policy_version: impl Into<String>,
        created_at: impl Into<String>,
    ) -> Self {
        Self {
            git_commit: git_commit.into(),
            policy_version: policy_version.into(),
            created_at: created_at.into(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// Per-dataset counts of the mined logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatasetStats {
    /// Dataset name.
    pub name: String,
    /// Prompts joined to their text.
    pub prompts: u64,
    /// Log records whose prompt id is not in the dataset (left out of every count).
    pub unjoined: u64,
    /// True positives, false negatives, false positives, true negatives.
    pub buckets: OutcomeBuckets,
}

/// What the miner did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MineStats {
    /// The run mined.
    pub eval_run_id: String,
    /// The configuration mined.
    pub config: String,
    /// Per mined dataset.
    pub datasets: Vec<DatasetStats>,
    /// Prompts in the benign corpus.
    pub corpus_prompts: u64,
    /// Patterns with enough attack support (and at least one false negative).
    pub supported: usize,
    /// Dropped: stop words, not over-represented against benign data.
    pub dropped_not_overrepresented: usize,
    /// Dropped: an existing rule already matches the pattern's own text.
    pub dropped_covered: usize,
    /// Dropped: beyond the recount cap.
    pub dropped_recount_cap: usize,
    /// Dropped after the exact recount (support or lift no longer met).
    pub dropped_after_recount: usize,
    /// Dropped: a longer pattern matches the same attacks with no more benign matches.
    pub dropped_subsumed: usize,
    /// Candidates beyond `max_candidates`.
    pub truncated: usize,
}

/// The result of [`mine`].
#[derive(Debug, Clone)]
pub struct MineOutput {
    /// The candidates, sorted and numbered.
    pub candidates: Vec<PatternCandidate>,
    /// What happened.
    pub stats: MineStats,
}

/// Reads an eval log file (JSONL of [`EvalLogRecord`]). The first bad line is an error.
pub fn read_eval_log(path: &Path) -> Result<Vec<EvalLogRecord>, DiscoverError> {
    let io = |source| DiscoverError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let origin = path.display().to_string();
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io)?;
        if let Some(r) = parse_log_line(&line, &origin, i + 1)? {
            out.push(r);
        }
    }
    Ok(out)
}

/// Parses eval log JSONL from a string (`origin` names it in errors).
pub fn parse_eval_log(src: &str, origin: &str) -> Result<Vec<EvalLogRecord>, DiscoverError> {
    let mut out = Vec::new();
    for (i, line) in src.lines().enumerate() {
        if let Some(r) = parse_log_line(line, origin, i + 1)? {
            out.push(r);
        }
    }
    Ok(out)
}

fn parse_log_line(
    line: &str,
    origin: &str,
    line_no: usize,
) -> Result<Option<EvalLogRecord>, DiscoverError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let err = |message: String| DiscoverError::LogLine {
        origin: origin.to_string(),
        line: line_no,
        message,
    };
    let rec: EvalLogRecord = serde_json::from_str(line).map_err(|e| err(e.to_string()))?;
    if rec.schema != EVAL_LOG_SCHEMA {
        return Err(err(format!(
            "schema {:?}, expected {EVAL_LOG_SCHEMA:?}",
            rec.schema
        )));
    }
    Ok(Some(rec))
}

/// The rule matcher of the embedded default pack (what "already covered" is checked
/// against), plus `extra` packs.
pub fn existing_rules_matcher(extra: Vec<RulePack>) -> Result<Matcher, DiscoverError> {
    let default = RulePack::default_pack().map_err(|e| DiscoverError::Rules(e.to_string()))?;
    let mut b = MatcherBuilder::new().add_pack(default);
    for p in extra {
        b = b.add_pack(p);
    }
    b.build().map_err(rules_error)
}

/// The conventional path of a dataset's eval log in a run.
pub fn eval_log_path(eval_run_id: &str, dataset: &str) -> String {
    format!("reports/evals/{eval_run_id}_{dataset}.jsonl")
}

const TP: usize = 0;
const FN: usize = 1;
const FP: usize = 2;
const TN: usize = 3;

fn bucket(o: Outcome) -> usize {
    match o {
        Outcome::TruePositive => TP,
        Outcome::FalseNegative => FN,
        Outcome::FalsePositive => FP,
        Outcome::TrueNegative => TN,
    }
}

fn buckets_of(c: &[u64; 4]) -> OutcomeBuckets {
    OutcomeBuckets {
        true_positive: c[TP],
        false_negative: c[FN],
        false_positive: c[FP],
        true_negative: c[TN],
    }
}

/// A prompt of a mined dataset (`ds` is `Some`) or of the corpus (`None`).
struct Prompt<'a> {
    ds: Option<usize>,
    id: &'a str,
    bucket: usize,
    /// Segment texts, as the pipeline sees them (one scan input per segment).
    texts: Vec<&'a str>,
    /// Their folded views.
    folded: Vec<String>,
    /// Special-token shapes in the folded views.
    shapes: Vec<String>,
}

impl<'a> Prompt<'a> {
    fn new(ds: Option<usize>, id: &'a str, bucket: usize, record: &'a Record) -> Self {
        let texts: Vec<&'a str> = match (&record.segments, &record.text) {
            (Some(segs), _) => segs.iter().map(|s| s.text.as_str()).collect(),
            (None, Some(t)) => vec![t.as_str()],
            (None, None) => Vec::new(),
        };
        let folded: Vec<String> = texts.iter().map(|t| fold_pattern(t)).collect();
        let mut sh: Vec<String> = folded.iter().flat_map(|f| shapes(f)).collect();
        sh.sort();
        sh.dedup();
        Prompt {
            ds,
            id,
            bucket,
            texts,
            folded,
            shapes: sh,
        }
    }

    fn is_attack(&self) -> bool {
        self.bucket == TP || self.bucket == FN
    }
}

/// Every distinct n-gram (1..=max_n words) and shape of a prompt, restricted by `keep`.
fn grams_of<'p>(
    p: &'p Prompt<'_>,
    words: &[Words<'p>],
    max_n: usize,
    mut keep: impl FnMut(&str) -> bool,
) -> BTreeSet<&'p str> {
    let mut set = BTreeSet::new();
    for w in words {
        for i in 0..w.len() {
            for n in 1..=max_n {
                match w.gram(i, n) {
                    Some(g) if keep(g) => {
                        set.insert(g);
                    }
                    Some(_) => {}
                    None => break,
                }
            }
        }
    }
    for s in &p.shapes {
        if keep(s) {
            set.insert(s.as_str());
        }
    }
    set
}

/// A pattern under consideration.
#[derive(Debug, Clone)]
struct Gram {
    text: String,
    shape: bool,
    words: usize,
    /// Per mined dataset: TP, FN, FP, TN matched.
    per_ds: Vec<[u64; 4]>,
    /// Per mined dataset and bucket: the smallest matched ids.
    examples: Vec<[BTreeSet<String>; 4]>,
    corpus: u64,
    corpus_examples: BTreeSet<String>,
}

impl Gram {
    fn new(text: &str, shape: bool, n_ds: usize) -> Self {
        Gram {
            text: text.to_string(),
            shape,
            words: if shape { 1 } else { text.split(' ').count() },
            per_ds: vec![[0; 4]; n_ds],
            examples: vec![Default::default(); n_ds],
            corpus: 0,
            corpus_examples: BTreeSet::new(),
        }
    }

    fn sum(&self, b: usize) -> u64 {
        self.per_ds.iter().map(|c| c[b]).sum()
    }

    /// Counts a prompt the pattern matches, keeping the `k` smallest ids as examples of its
    /// dataset and bucket (or of the corpus).
    fn count_match(&mut self, p: &Prompt<'_>, k: usize) {
        let (counts, ex) = match p.ds {
            Some(d) => match (self.per_ds.get_mut(d), self.examples.get_mut(d)) {
                (Some(counts), Some(ex)) => (&mut counts[p.bucket], &mut ex[p.bucket]),
                _ => return,
            },
            None => (&mut self.corpus, &mut self.corpus_examples),
        };
        *counts += 1;
        ex.insert(p.id.to_string());
        if ex.len() > k {
            ex.pop_last();
        }
    }
}

/// Totals the metrics and filters need.
struct Totals {
    fn_total: u64,
    tp_total: u64,
    /// Benign prompts of the logs, the corpus's own log excluded.
    log_benign_total: u64,
    corpus_total: u64,
    /// Distinct prompts (the corpus once).
    all_total: u64,
    /// The index of the corpus among the mined datasets, when its log is mined too.
    corpus_ds: Option<usize>,
}

impl Totals {
    /// The totals of the mined datasets' counts, the corpus's `corpus_total` prompts
    /// counted once.
    fn new(
        datasets: &[DatasetStats],
        corpus_ds: Option<usize>,
        n_mined: usize,
        corpus_total: u64,
    ) -> Totals {
        Totals {
            fn_total: datasets.iter().map(|d| d.buckets.false_negative).sum(),
            tp_total: datasets.iter().map(|d| d.buckets.true_positive).sum(),
            log_benign_total: datasets
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != corpus_ds)
                .map(|(_, d)| d.buckets.false_positive + d.buckets.true_negative)
                .sum(),
            corpus_total,
            all_total: n_mined as u64 + if corpus_ds.is_some() { 0 } else { corpus_total },
            corpus_ds,
        }
    }

    fn log_benign(&self, g: &Gram) -> u64 {
        g.per_ds
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != self.corpus_ds)
            .map(|(_, c)| c[FP] + c[TN])
            .sum()
    }

    fn inputs(&self, g: &Gram) -> MetricInputs {
        let mined: u64 = g.per_ds.iter().flatten().sum();
        let corpus_extra = if self.corpus_ds.is_some() {
            0
        } else {
            g.corpus
        };
        MetricInputs {
            fn_matched: g.sum(FN),
            fn_total: self.fn_total,
            tp_matched: g.sum(TP),
            tp_total: self.tp_total,
            corpus_matched: g.corpus,
            corpus_total: self.corpus_total,
            log_benign_matched: self.log_benign(g),
            log_benign_total: self.log_benign_total,
            all_matched: mined + corpus_extra,
            all_total: self.all_total,
            pattern_chars: g.text.chars().count(),
        }
    }

    /// Attack rate at least `min_lift` × benign rate (or no benign match at all).
    fn over_represented(&self, g: &Gram, min_lift: f64) -> bool {
        let attacks = self.fn_total + self.tp_total;
        let benign_matched = g.corpus + self.log_benign(g);
        if benign_matched == 0 {
            return true;
        }
        let benign_total = self.corpus_total + self.log_benign_total;
        if attacks == 0 || benign_total == 0 {
            return false;
        }
        let attack_rate = (g.sum(FN) + g.sum(TP)) as f64 / attacks as f64;
        let benign_rate = benign_matched as f64 / benign_total as f64;
        attack_rate >= min_lift * benign_rate
    }

    fn supported(&self, g: &Gram, min_support: u64) -> bool {
        g.sum(FN) >= 1 && g.sum(FN) + g.sum(TP) >= min_support
    }
}

fn emit_worthy(g: &Gram) -> bool {
    if g.shape {
        return true;
    }
    let words: Vec<&str> = g.text.split(' ').collect();
    if words.iter().all(|w| w.chars().all(|c| c.is_ascii_digit())) {
        return false;
    }
    match words.as_slice() {
        [w] => w.chars().count() >= 3 && !STOPWORDS.contains(w),
        [first, .., last] => !EDGE_STOPWORDS.contains(first) && !EDGE_STOPWORDS.contains(last),
        [] => false,
    }
}

/// Whether `needle` occurs in `hay` with no word character touching it.
fn contains_at_boundary(hay: &str, needle: &str) -> bool {
    hay.match_indices(needle).any(|(i, m)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + m.len()..].chars().next();
        !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
    })
}

/// A pattern with its metrics and sort keys.
struct Ranked {
    m: crate::record::Metrics,
    fns: u64,
    benign: u64,
    g: Gram,
}

impl Ranked {
    fn new(g: Gram, totals: &Totals) -> Self {
        Ranked {
            m: metrics::compute(&totals.inputs(&g)),
            fns: g.sum(FN),
            benign: g.corpus,
            g,
        }
    }
}

/// The spec's order (priority descending, false negatives descending, benign matches
/// ascending), then the pattern text so that the order is total.
fn rank_order(a: &Ranked, b: &Ranked) -> std::cmp::Ordering {
    b.m.priority_score
        .total_cmp(&a.m.priority_score)
        .then(b.fns.cmp(&a.fns))
        .then(a.benign.cmp(&b.benign))
        .then_with(|| a.g.text.cmp(&b.g.text))
}

fn map_split(splits: &BTreeSet<Option<Split>>) -> SplitName {
    let mut names = splits.iter().map(|s| match s {
        Some(Split::Train) => SplitName::Train,
        Some(Split::Test) => SplitName::Test,
        // Validation sets are evaluated, never trained on, here.
        Some(Split::Eval | Split::Validation) => SplitName::Eval,
        _ => SplitName::Unknown,
    });
    match (names.next(), names.next()) {
        (Some(one), None) => one,
        _ => SplitName::Unknown,
    }
}

/// Mines candidates. `existing` is the matcher of the rules already in force (see
/// [`existing_rules_matcher`]): a pattern it matches is already covered.
///
/// The phases, in order: select the run, join its logs to the datasets' text, find the
/// patterns with attack support, filter them on preliminary counts, recount the survivors
/// exactly with the rule engine, drop subsumed patterns, rank, and write one record each.
pub fn mine(
    input: &MineInput<'_>,
    existing: &Matcher,
    opts: &MineOptions,
    ctx: &RunContext,
) -> Result<MineOutput, DiscoverError> {
    let run = select_run(input, opts)?;
    let (joined, datasets) = join_prompts(input, &run.logs)?;
    let corpus_total = input.benign.records.len() as u64;
    let totals = Totals::new(&datasets, joined.corpus_ds, joined.n_mined, corpus_total);
    let mut stats = MineStats {
        eval_run_id: run.id.clone(),
        config: run.config.clone(),
        datasets,
        corpus_prompts: corpus_total,
        ..MineStats::default()
    };

    let mined = Mined::new(&joined, opts.max_ngram);
    let supported = mined.supported(opts.min_support);
    stats.supported = supported.len();
    let pre = mined.preliminary(&supported, &totals, existing, opts.min_lift, &mut stats);
    let pre = cap_recount(pre, &totals, opts.recount_cap, &mut stats);
    let mut cands = mined.recount(&pre, existing, opts.examples)?;
    let before = cands.len();
    cands.retain(|g| {
        totals.supported(g, opts.min_support) && totals.over_represented(g, opts.min_lift)
    });
    stats.dropped_after_recount = before - cands.len();
    let kept = drop_subsumed(cands, &totals, &mut stats);
    let kept = rank(kept, &totals, opts.max_candidates, &mut stats);

    let records = Records {
        run: RunInfo {
            eval_run_id: run.id,
            timestamp_utc: run.timestamp_utc,
            git_commit: ctx.git_commit.clone(),
            script: SCRIPT_NAME.to_string(),
            model: ModelInfo {
                name: run.config,
                version: ctx.version.clone(),
            },
            guardrail: GuardrailInfo {
                entrypoint: GUARDRAIL_ENTRYPOINT.to_string(),
                policy_version: ctx.policy_version.clone(),
            },
        },
        totals: &totals,
        ds_names: &joined.ds_names,
        ds_prompts: stats.datasets.iter().map(|d| d.prompts).collect(),
        splits: &joined.splits,
        benign_name: input.benign.name,
        opts,
        created_at: &ctx.created_at,
    };
    let candidates = records.numbered(kept);
    Ok(MineOutput { candidates, stats })
}

/// The run the logs are mined for: its configuration, id and records.
struct SelectedRun<'a> {
    config: String,
    id: String,
    /// The run's time, from its id.
    timestamp_utc: String,
    /// The log records of the configuration.
    logs: Vec<&'a EvalLogRecord>,
}

/// The configuration to mine (`opts.config`, or the logs' only one) and its run, which
/// must be a single one.
fn select_run<'a>(
    input: &MineInput<'a>,
    opts: &MineOptions,
) -> Result<SelectedRun<'a>, DiscoverError> {
    if input.logs.is_empty() {
        return Err(DiscoverError::NoLogRecords);
    }
    let configs: BTreeSet<&str> = input.logs.iter().map(|r| r.config.as_str()).collect();
    let list = |s: &BTreeSet<&str>| s.iter().copied().collect::<Vec<_>>().join(", ");
    let config: String = match &opts.config {
        Some(c) if configs.contains(c.as_str()) => c.clone(),
        Some(c) => {
            return Err(DiscoverError::UnknownConfig {
                config: c.clone(),
                found: list(&configs),
            });
        }
        None if configs.len() == 1 => configs
            .iter()
            .next()
            .map_or_else(String::new, |c| (*c).to_string()),
        None => return Err(DiscoverError::AmbiguousConfig(list(&configs))),
    };
    let logs: Vec<&EvalLogRecord> = input.logs.iter().filter(|r| r.config == config).collect();
    let runs: BTreeSet<&str> = logs.iter().map(|r| r.eval_run_id.as_str()).collect();
    if runs.len() > 1 {
        return Err(DiscoverError::MixedRuns(list(&runs)));
    }
    let id = runs
        .iter()
        .next()
        .map_or_else(String::new, |r| (*r).to_string());
    let timestamp_utc = run_id_timestamp(&id).map_err(DiscoverError::BadRunId)?;
    Ok(SelectedRun {
        config,
        id,
        timestamp_utc,
        logs,
    })
}

/// The mined logs joined to their datasets' text.
struct Joined<'a> {
    /// The mined datasets, sorted by name.
    ds_names: Vec<&'a str>,
    /// Each mined dataset's split.
    splits: Vec<SplitName>,
    /// The mined datasets' joined prompts (the first `n_mined`), then the corpus's.
    prompts: Vec<Prompt<'a>>,
    n_mined: usize,
    /// The index of the corpus among the mined datasets, when its log is mined too.
    corpus_ds: Option<usize>,
}

/// Groups the log records by dataset (sorted by name) and joins each to its record's
/// text; the corpus's records follow. Also returns each dataset's counts.
fn join_prompts<'a>(
    input: &MineInput<'a>,
    logs: &[&'a EvalLogRecord],
) -> Result<(Joined<'a>, Vec<DatasetStats>), DiscoverError> {
    let mut by_ds: BTreeMap<&str, Vec<&EvalLogRecord>> = BTreeMap::new();
    for &r in logs {
        by_ds.entry(r.dataset.as_str()).or_default().push(r);
    }
    let ds_names: Vec<&str> = by_ds.keys().copied().collect();
    let corpus_ds = ds_names.iter().position(|n| *n == input.benign.name);
    let mut datasets = Vec::with_capacity(ds_names.len());
    let mut splits: Vec<SplitName> = Vec::with_capacity(ds_names.len());
    let mut prompts: Vec<Prompt<'_>> = Vec::new();
    for (di, (name, recs)) in by_ds.iter().enumerate() {
        let records = input
            .datasets
            .get(*name)
            .ok_or_else(|| DiscoverError::MissingDataset((*name).to_string()))?;
        let by_id: HashMap<&str, &Record> = records.iter().map(|r| (r.id.as_str(), r)).collect();
        let mut seen: HashSet<&str> = HashSet::new();
        let mut ds_stats = DatasetStats {
            name: (*name).to_string(),
            ..DatasetStats::default()
        };
        let mut counts = [0u64; 4];
        for r in recs {
            if !seen.insert(r.prompt_id.as_str()) {
                return Err(DiscoverError::DuplicatePrompt {
                    dataset: (*name).to_string(),
                    id: r.prompt_id.clone(),
                });
            }
            let Some(rec) = by_id.get(r.prompt_id.as_str()) else {
                ds_stats.unjoined += 1;
                continue;
            };
            let b = bucket(r.outcome);
            counts[b] += 1;
            prompts.push(Prompt::new(Some(di), r.prompt_id.as_str(), b, rec));
        }
        ds_stats.prompts = counts.iter().sum();
        ds_stats.buckets = buckets_of(&counts);
        datasets.push(ds_stats);
        splits.push(map_split(&recs.iter().map(|r| r.split).collect()));
    }
    let n_mined = prompts.len();
    for rec in input.benign.records {
        prompts.push(Prompt::new(None, rec.id.as_str(), TN, rec));
    }
    let joined = Joined {
        ds_names,
        splits,
        prompts,
        n_mined,
        corpus_ds,
    };
    Ok((joined, datasets))
}

/// A pattern's kind and attack counts: (shape, [TP, FN]).
type Support = (bool, [u64; 2]);

/// The prompts being mined, with the words of their folded views.
struct Mined<'p, 'a> {
    prompts: &'p [Prompt<'a>],
    words: Vec<Vec<Words<'p>>>,
    n_mined: usize,
    n_ds: usize,
    corpus_ds: Option<usize>,
    /// Longest word n-gram.
    max_n: usize,
    normalizer: Normalizer,
}

impl<'p, 'a> Mined<'p, 'a> {
    fn new(joined: &'p Joined<'a>, max_ngram: usize) -> Self {
        Mined {
            prompts: &joined.prompts,
            words: joined
                .prompts
                .iter()
                .map(|p| p.folded.iter().map(|f| Words::new(f)).collect())
                .collect(),
            n_mined: joined.n_mined,
            n_ds: joined.ds_names.len(),
            corpus_ds: joined.corpus_ds,
            max_n: max_ngram.clamp(1, 5),
            normalizer: Normalizer::default(),
        }
    }

    /// The n-grams and shapes matched by at least `min_support` attacks, one of them a
    /// false negative. N-grams are counted level-wise (apriori) over the attack prompts:
    /// an n-gram is counted only when its two (n-1)-grams are supported, which is exact
    /// because support only shrinks with length.
    fn supported(&self, min_support: u64) -> BTreeMap<&'p str, Support> {
        let prompts = self.prompts;
        let attack: Vec<usize> = (0..self.n_mined)
            .filter(|&i| prompts[i].is_attack())
            .collect();
        let mut supported: BTreeMap<&'p str, Support> = BTreeMap::new();
        let mut prev: HashSet<&str> = HashSet::new();
        for n in 1..=self.max_n {
            let mut counts: HashMap<&str, [u64; 2]> = HashMap::new();
            for &pi in &attack {
                let mut seen: HashSet<&str> = HashSet::new();
                for w in &self.words[pi] {
                    for i in 0..w.len() {
                        let Some(g) = w.gram(i, n) else { continue };
                        if n > 1
                            && !(w.gram(i, n - 1).is_some_and(|p| prev.contains(p))
                                && w.gram(i + 1, n - 1).is_some_and(|s| prev.contains(s)))
                        {
                            continue;
                        }
                        seen.insert(g);
                    }
                }
                let b = usize::from(prompts[pi].bucket == FN);
                for g in seen {
                    counts.entry(g).or_default()[b] += 1;
                }
            }
            let keep = |c: &[u64; 2]| c[1] >= 1 && c[0] + c[1] >= min_support;
            prev = counts
                .iter()
                .filter(|(_, c)| keep(c))
                .map(|(g, _)| *g)
                .collect();
            for (g, c) in counts.into_iter().filter(|(_, c)| keep(c)) {
                supported.insert(g, (false, c));
            }
            if prev.is_empty() {
                break;
            }
        }
        let mut shape_counts: BTreeMap<&str, [u64; 2]> = BTreeMap::new();
        for &pi in &attack {
            let b = usize::from(prompts[pi].bucket == FN);
            for s in &prompts[pi].shapes {
                shape_counts.entry(s.as_str()).or_default()[b] += 1;
            }
        }
        for (s, c) in shape_counts {
            if c[1] >= 1 && c[0] + c[1] >= min_support {
                supported.insert(s, (true, c));
            }
        }
        supported
    }

    /// Preliminary counts: attack buckets from `supported`, benign matches by the same
    /// n-gram enumeration over the benign prompts of the logs and the corpus. Keeps the
    /// patterns worth emitting that are over-represented in attacks and that no existing
    /// rule matches.
    fn preliminary(
        &self,
        supported: &BTreeMap<&'p str, Support>,
        totals: &Totals,
        existing: &Matcher,
        min_lift: f64,
        stats: &mut MineStats,
    ) -> Vec<Gram> {
        let n_ds = self.n_ds;
        let mut grams: BTreeMap<&str, Gram> = BTreeMap::new();
        for (g, (shape, c)) in supported {
            let mut gram = Gram::new(g, *shape, n_ds);
            // Attack counts are kept in dataset 0's slots for the preliminary ranking only.
            if let Some(slot) = gram.per_ds.first_mut() {
                slot[TP] = c[0];
                slot[FN] = c[1];
            }
            grams.insert(g, gram);
        }
        let corpus_ds = self.corpus_ds;
        let benign_slot = (0..n_ds).find(|&i| Some(i) != corpus_ds);
        for (pi, p) in self.prompts.iter().enumerate() {
            let benign_log = p.ds.is_some_and(|d| Some(d) != corpus_ds) && !p.is_attack();
            if !(benign_log || p.ds.is_none()) {
                continue;
            }
            for g in grams_of(p, &self.words[pi], self.max_n, |g| grams.contains_key(g)) {
                if let Some(gram) = grams.get_mut(g) {
                    if p.ds.is_none() {
                        gram.corpus += 1;
                    } else if let Some(slot) = benign_slot.and_then(|i| gram.per_ds.get_mut(i)) {
                        // Any dataset other than the corpus's own: only the sum is used
                        // before the recount.
                        slot[TN] += 1;
                    }
                }
            }
        }
        let mut pre: Vec<Gram> = Vec::new();
        for (_, g) in grams {
            if !emit_worthy(&g) || !totals.over_represented(&g, min_lift) {
                stats.dropped_not_overrepresented += 1;
            } else if !existing
                .scan(&self.normalizer.normalize(&g.text))
                .hits
                .is_empty()
            {
                stats.dropped_covered += 1;
            } else {
                pre.push(g);
            }
        }
        pre
    }

    /// Exact recount: every pattern of `pre` becomes a literal rule and the rule engine
    /// scans every prompt (all views, segment by segment), so the evidence is what the rule
    /// would match. An occurrence inside a span an existing rule already matches is not
    /// counted. Keeps `examples` example ids per dataset and bucket.
    fn recount(
        &self,
        pre: &[Gram],
        existing: &Matcher,
        examples: usize,
    ) -> Result<Vec<Gram>, DiscoverError> {
        let mut cands: Vec<Gram> = pre
            .iter()
            .map(|g| Gram::new(&g.text, g.shape, self.n_ds))
            .collect();
        if cands.is_empty() {
            return Ok(cands);
        }
        let matcher = recount_matcher(&cands)?;
        let to_cand: Vec<Option<usize>> = matcher
            .rules()
            .iter()
            .map(|r| r.rule.id.get(4..).and_then(|n| n.parse().ok()))
            .collect();
        for p in self.prompts {
            for c in self.new_hits(p, existing, &matcher, &to_cand) {
                if let Some(g) = cands.get_mut(c) {
                    g.count_match(p, examples);
                }
            }
        }
        Ok(cands)
    }

    /// The candidates (by index, through `to_cand`) the recount `matcher` finds in `p`
    /// outside every span an `existing` rule matches.
    fn new_hits(
        &self,
        p: &Prompt<'_>,
        existing: &Matcher,
        matcher: &Matcher,
        to_cand: &[Option<usize>],
    ) -> BTreeSet<usize> {
        let mut hit: BTreeSet<usize> = BTreeSet::new();
        for t in &p.texts {
            let normalized = self.normalizer.normalize(t);
            let covered: Vec<std::ops::Range<usize>> = existing
                .scan(&normalized)
                .hits
                .into_iter()
                .map(|h| h.span)
                .collect();
            for h in matcher.scan(&normalized).hits {
                let inside_existing = covered
                    .iter()
                    .any(|s| s.start <= h.span.start && h.span.end <= s.end);
                if inside_existing {
                    continue;
                }
                if let Some(Some(c)) = to_cand.get(h.rule) {
                    hit.insert(*c);
                }
            }
        }
        hit
    }
}

/// At most `cap` patterns go to the exact recount: the best by a preliminary ranking.
fn cap_recount(pre: Vec<Gram>, totals: &Totals, cap: usize, stats: &mut MineStats) -> Vec<Gram> {
    if pre.len() <= cap {
        return pre;
    }
    let mut ranked: Vec<Ranked> = pre.into_iter().map(|g| Ranked::new(g, totals)).collect();
    ranked.sort_by(rank_order);
    stats.dropped_recount_cap = ranked.len() - cap;
    ranked.truncate(cap);
    ranked.into_iter().map(|r| r.g).collect()
}

/// Subsumption: drops a pattern when a longer one containing it matches the same attacks
/// in every dataset with no more benign matches.
fn drop_subsumed(cands: Vec<Gram>, totals: &Totals, stats: &mut MineStats) -> Vec<Gram> {
    let signature =
        |g: &Gram| -> Vec<(u64, u64)> { g.per_ds.iter().map(|c| (c[TP], c[FN])).collect() };
    let mut groups: HashMap<Vec<(u64, u64)>, Vec<usize>> = HashMap::new();
    for (i, g) in cands.iter().enumerate() {
        groups.entry(signature(g)).or_default().push(i);
    }
    let mut drop = vec![false; cands.len()];
    for members in groups.values() {
        for &a in members {
            let ga = &cands[a];
            let benign_a = ga.corpus + totals.log_benign(ga);
            drop[a] = members.iter().any(|&b| {
                let gb = &cands[b];
                b != a
                    && gb.text.len() > ga.text.len()
                    && gb.corpus + totals.log_benign(gb) <= benign_a
                    && contains_at_boundary(&gb.text, &ga.text)
            });
        }
    }
    stats.dropped_subsumed = drop.iter().filter(|d| **d).count();
    cands
        .into_iter()
        .zip(drop)
        .filter(|(_, d)| !d)
        .map(|(g, _)| g)
        .collect()
}

/// The patterns with their metrics, in the spec's order, at most `max`.
fn rank(kept: Vec<Gram>, totals: &Totals, max: usize, stats: &mut MineStats) -> Vec<Ranked> {
    let mut ranked: Vec<Ranked> = kept.into_iter().map(|g| Ranked::new(g, totals)).collect();
    ranked.sort_by(rank_order);
    if ranked.len() > max {
        stats.truncated = ranked.len() - max;
        ranked.truncate(max);
    }
    ranked
}

/// A list of rule-engine errors as one [`DiscoverError::Rules`].
fn rules_error(errs: Vec<rampart_rules::CompileError>) -> DiscoverError {
    DiscoverError::Rules(joined(&errs))
}

fn recount_matcher(cands: &[Gram]) -> Result<Matcher, DiscoverError> {
    let rules = cands
        .iter()
        .enumerate()
        .map(|(i, g)| Rule {
            id: format!("OTH_{i:07}"),
            category: Category::Other,
            matcher: RuleMatch::Literal {
                patterns: vec![g.text.clone()],
            },
            case_sensitive: false,
            token_boundary: !g.shape,
            strength: Strength::Weak,
            severity: RiskClass::LowRisk,
            scope: RuleScope::Any,
            rationale: "discovery recount".into(),
            languages: Vec::new(),
            tags: Vec::new(),
            must_match: Vec::new(),
            must_not_match: Vec::new(),
            needs_judgement: false,
            owasp: Vec::new(),
            location: Location {
                origin: "<rampart discover>".into(),
                line: i + 1,
                col: 1,
            },
        })
        .collect();
    let pack = RulePack {
        name: "discover-recount".into(),
        version: "0".into(),
        description: String::new(),
        origin: "<rampart discover>".into(),
        owasp: Vec::new(),
        rules,
    };
    MatcherBuilder::new()
        .add_pack(pack)
        .max_hits_per_rule(64)
        .build()
        .map_err(rules_error)
}

/// What every candidate record of a run shares.
struct Records<'r> {
    run: RunInfo,
    totals: &'r Totals,
    ds_names: &'r [&'r str],
    /// Joined prompts per mined dataset.
    ds_prompts: Vec<u64>,
    splits: &'r [SplitName],
    /// The benign corpus's name.
    benign_name: &'r str,
    opts: &'r MineOptions,
    created_at: &'r str,
}

impl Records<'_> {
    /// The records of the ranked patterns, numbered per category in rank order.
    fn numbered(&self, kept: Vec<Ranked>) -> Vec<PatternCandidate> {
        let mut next_id: BTreeMap<Category, usize> = BTreeMap::new();
        let mut candidates = Vec::with_capacity(kept.len());
        for Ranked { m, g, .. } in kept {
            let category = categorize(&g.text, g.shape);
            let n = next_id.entry(category).or_insert(0);
            *n += 1;
            let pattern_id = format!("{}_{:03}", category.prefix(), n);
            candidates.push(self.record(pattern_id, category, &g, m));
        }
        candidates
    }

    fn record(
        &self,
        pattern_id: String,
        category: Category,
        g: &Gram,
        metrics: crate::record::Metrics,
    ) -> PatternCandidate {
        let no_benign = g.corpus == 0 && self.totals.log_benign(g) == 0;
        let signal_strength =
            if category != Category::BoundaryTesting && no_benign && (g.shape || g.words >= 2) {
                Strength::Strong
            } else {
                Strength::Weak
            };
        // The miner never proposes high_risk (strong + high_risk blocks on its own, reserved
        // for phrasings a person has judged essentially never benign).
        let severity_hint = match signal_strength {
            Strength::Strong => RiskClass::MediumRisk,
            Strength::Weak => RiskClass::LowRisk,
        };
        let (decision, implementation) =
            self.decide(category, g, &metrics, signal_strength, severity_hint);
        PatternCandidate {
            schema_version: SCHEMA_VERSION.to_string(),
            pattern_id,
            category,
            pattern: PatternSpec {
                value: g.text.clone(),
                normalized_value: g.text.trim().to_lowercase(),
                pattern_kind: PatternKind::Literal,
                regex: None,
                case_sensitive: false,
                token_boundary: !g.shape,
                signal_strength,
                severity_hint,
            },
            evidence: self.evidence(g),
            run: self.run.clone(),
            metrics,
            decision,
            implementation,
            created_at: self.created_at.to_string(),
        }
    }

    /// Where the pattern matched: per mined dataset it matched in, and in the corpus.
    fn evidence(&self, g: &Gram) -> Evidence {
        let k = self.opts.examples;
        let run_id = &self.run.eval_run_id;
        let datasets: Vec<DatasetEvidence> = g
            .per_ds
            .iter()
            .enumerate()
            .filter(|(_, c)| c.iter().sum::<u64>() > 0)
            .map(|(d, c)| {
                let name = self.ds_names.get(d).copied().unwrap_or_default();
                let example_prompt_ids = g
                    .examples
                    .get(d)
                    .map(|ex| {
                        [FN, TP, FP, TN]
                            .iter()
                            .flat_map(|&b| ex[b].iter().cloned())
                            .take(k)
                            .collect()
                    })
                    .unwrap_or_default();
                DatasetEvidence {
                    dataset_name: name.to_string(),
                    split: self.splits.get(d).copied().unwrap_or(SplitName::Unknown),
                    eval_log_path: eval_log_path(run_id, name),
                    sample_count_total: self.ds_prompts.get(d).copied().unwrap_or(0),
                    match_count_total: c.iter().sum(),
                    outcome_buckets: buckets_of(c),
                    example_prompt_ids,
                }
            })
            .collect();
        let benign_regression = BenignRegression {
            dataset_name: self.benign_name.to_string(),
            eval_log_path: eval_log_path(run_id, self.benign_name),
            sample_count_total: self.totals.corpus_total,
            match_count_total: g.corpus,
            example_prompt_ids: g.corpus_examples.iter().take(k).cloned().collect(),
        };
        Evidence {
            datasets,
            benign_regression,
        }
    }

    /// The recommendation and how to implement it: exclude when benign matches eat the
    /// FPR budget, review a weak signal, include a strong one.
    fn decide(
        &self,
        category: Category,
        g: &Gram,
        metrics: &crate::record::Metrics,
        signal_strength: Strength,
        severity_hint: RiskClass,
    ) -> (Decision, Implementation) {
        let totals = self.totals;
        let benign_name = self.benign_name;
        let log_benign = totals.log_benign(g);
        let no_benign = g.corpus == 0 && log_benign == 0;
        let (fn_m, tp_m) = (g.sum(FN), g.sum(TP));
        let benign_desc = format!(
            "{} of {} {} prompts and {} of {} benign log prompts",
            g.corpus, totals.corpus_total, benign_name, log_benign, totals.log_benign_total
        );
        if metrics.fp_risk_score >= self.opts.exclude_fp_risk {
            (
                Decision {
                    recommendation: Recommendation::Exclude,
                    requires_review: false,
                    reason: format!("Benign matches too frequent: {benign_desc}."),
                },
                Implementation {
                    target_function: TargetFunction::of(category),
                    suggested_action: SuggestedAction::LogOnly,
                    suggested_risk: SuggestedRisk::None,
                    notes: "Do not adopt: its benign match rate eats the FPR budget.".into(),
                },
            )
        } else if signal_strength == Strength::Weak {
            let reason = if category == Category::BoundaryTesting {
                "Boundary-testing phrase: double-edged, only as a weak signal that escalates with a strong one.".to_string()
            } else if !no_benign {
                format!(
                    "In {fn_m} missed and {tp_m} caught attacks, but ambiguous FP risk: {benign_desc}."
                )
            } else {
                format!(
                    "In {fn_m} missed and {tp_m} caught attacks, no benign match, but a single word is generic."
                )
            };
            (
                Decision {
                    recommendation: Recommendation::Review,
                    requires_review: true,
                    reason,
                },
                Implementation {
                    target_function: TargetFunction::of(category),
                    suggested_action: SuggestedAction::ScoreOnly,
                    suggested_risk: SuggestedRisk::LowRisk,
                    notes:
                        "Weak signal: 1 point; never escalates alone, only with a strong signal."
                            .into(),
                },
            )
        } else {
            (
                Decision {
                    recommendation: Recommendation::Include,
                    requires_review: false,
                    reason: format!(
                        "In {fn_m} missed and {tp_m} caught attacks; no match in {benign_name} or benign log prompts."
                    ),
                },
                Implementation {
                    target_function: TargetFunction::of(category),
                    suggested_action: SuggestedAction::Escalate,
                    suggested_risk: severity_hint.into(),
                    notes: format!(
                        "Strong signal: 2 points ({}); literal, case-insensitive on folded views{}.",
                        severity_hint.name(),
                        if g.shape { "" } else { ", token boundaries" }
                    ),
                },
            )
        }
    }
}
