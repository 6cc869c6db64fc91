//! The `pattern_candidates.v1` validator: every line against the schema (unknown and missing
//! fields, types, enums, ranges, formats), then the rules that span fields and lines (ID
//! prefixes and numbering, sort order). Every error names the line and the field.

use crate::record::{BENIGN_CORPUS_NAME, PatternCandidate, SCHEMA_VERSION};
use crate::timefmt::{check_iso_utc, run_id_timestamp};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One problem in a candidates file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// 1-based line.
    pub line: usize,
    /// Field path, e.g. `evidence.datasets[0].eval_log_path`; empty for the whole line.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "line {}: {}", self.line, self.message)
        } else {
            write!(f, "line {}: {}: {}", self.line, self.field, self.message)
        }
    }
}

/// The result of validating a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidationReport {
    /// Non-empty lines read.
    pub records: usize,
    /// Every problem found, in line order.
    pub errors: Vec<ValidationError>,
}

impl ValidationReport {
    /// Whether the file is valid.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

#[derive(Debug, Clone, Copy)]
enum Ty {
    Str,
    NonEmpty,
    Enum(&'static [&'static str]),
    Bool,
    Count,
    Unit,
    NullOrStr,
    Obj(&'static [(&'static str, Ty)]),
    Arr(&'static Ty),
}

const CATEGORIES: &[&str] = &[
    "system_marker",
    "control_phrase",
    "credential_like",
    "boundary_testing",
    "role_confusion",
    "encoding_obfuscation",
    "other",
];
const PREFIXES: &[&str] = &["SYS", "CTRL", "CRED", "BND", "ROLE", "ENC", "OTH"];
const TARGETS: &[&str] = &[
    "check_system_markers",
    "check_control_phrases",
    "check_credential_patterns",
    "check_boundary_testing",
    "check_role_confusion",
    "check_encoding_obfuscation",
    "check_other",
];

const PATTERN: &[(&str, Ty)] = &[
    ("value", Ty::NonEmpty),
    ("normalized_value", Ty::NonEmpty),
    (
        "pattern_kind",
        Ty::Enum(&["literal", "regex", "keyword_set"]),
    ),
    ("regex", Ty::NullOrStr),
    ("case_sensitive", Ty::Bool),
    ("token_boundary", Ty::Bool),
    ("signal_strength", Ty::Enum(&["weak", "strong"])),
    (
        "severity_hint",
        Ty::Enum(&["low_risk", "medium_risk", "high_risk"]),
    ),
];
const BUCKETS: &[(&str, Ty)] = &[
    ("true_positive", Ty::Count),
    ("false_negative", Ty::Count),
    ("false_positive", Ty::Count),
    ("true_negative", Ty::Count),
];
const DATASET: &[(&str, Ty)] = &[
    ("dataset_name", Ty::NonEmpty),
    ("split", Ty::Enum(&["train", "test", "eval", "unknown"])),
    ("eval_log_path", Ty::NonEmpty),
    ("sample_count_total", Ty::Count),
    ("match_count_total", Ty::Count),
    ("outcome_buckets", Ty::Obj(BUCKETS)),
    ("example_prompt_ids", Ty::Arr(&Ty::NonEmpty)),
];
const BENIGN: &[(&str, Ty)] = &[
    ("dataset_name", Ty::NonEmpty),
    ("eval_log_path", Ty::NonEmpty),
    ("sample_count_total", Ty::Count),
    ("match_count_total", Ty::Count),
    ("example_prompt_ids", Ty::Arr(&Ty::NonEmpty)),
];
const EVIDENCE: &[(&str, Ty)] = &[
    ("datasets", Ty::Arr(&Ty::Obj(DATASET))),
    ("benign_regression", Ty::Obj(BENIGN)),
];
const MODEL: &[(&str, Ty)] = &[("name", Ty::NonEmpty), ("version", Ty::NonEmpty)];
const GUARDRAIL: &[(&str, Ty)] = &[
    ("entrypoint", Ty::NonEmpty),
    ("policy_version", Ty::NonEmpty),
];
const RUN: &[(&str, Ty)] = &[
    ("eval_run_id", Ty::NonEmpty),
    ("timestamp_utc", Ty::NonEmpty),
    ("git_commit", Ty::NonEmpty),
    ("script", Ty::NonEmpty),
    ("model", Ty::Obj(MODEL)),
    ("guardrail", Ty::Obj(GUARDRAIL)),
];
const METRICS: &[(&str, Ty)] = &[
    ("fn_coverage_rate", Ty::Unit),
    ("tp_support_rate", Ty::Unit),
    ("fp_risk_score", Ty::Unit),
    ("rarity_score", Ty::Unit),
    ("priority_score", Ty::Unit),
];
const DECISION: &[(&str, Ty)] = &[
    (
        "recommendation",
        Ty::Enum(&["include", "exclude", "review"]),
    ),
    ("requires_review", Ty::Bool),
    ("reason", Ty::NonEmpty),
];
const IMPLEMENTATION: &[(&str, Ty)] = &[
    ("target_function", Ty::Enum(TARGETS)),
    (
        "suggested_action",
        Ty::Enum(&["escalate", "score_only", "log_only"]),
    ),
    (
        "suggested_risk",
        Ty::Enum(&["none", "low_risk", "medium_risk", "high_risk"]),
    ),
    ("notes", Ty::Str),
];
const RECORD: &[(&str, Ty)] = &[
    ("schema_version", Ty::NonEmpty),
    ("pattern_id", Ty::NonEmpty),
    ("category", Ty::Enum(CATEGORIES)),
    ("pattern", Ty::Obj(PATTERN)),
    ("evidence", Ty::Obj(EVIDENCE)),
    ("run", Ty::Obj(RUN)),
    ("metrics", Ty::Obj(METRICS)),
    ("decision", Ty::Obj(DECISION)),
    ("implementation", Ty::Obj(IMPLEMENTATION)),
    ("created_at", Ty::NonEmpty),
];

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Errors of one line, with its number.
struct Line {
    no: usize,
    errors: Vec<ValidationError>,
}

impl Line {
    fn err(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ValidationError {
            line: self.no,
            field: field.into(),
            message: message.into(),
        });
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn walk(v: &Value, ty: Ty, path: &str, line: &mut Line) {
    match ty {
        Ty::Str => {
            if !v.is_string() {
                line.err(path, format!("must be a string, found {}", type_name(v)));
            }
        }
        Ty::NonEmpty => match v.as_str() {
            Some(s) if s.trim().is_empty() => line.err(path, "must not be empty"),
            Some(_) => {}
            None => line.err(path, format!("must be a string, found {}", type_name(v))),
        },
        Ty::Enum(allowed) => match v.as_str() {
            Some(s) if allowed.contains(&s) => {}
            Some(s) => line.err(path, format!("{s:?} is not one of {}", allowed.join(" | "))),
            None => line.err(path, format!("must be a string, found {}", type_name(v))),
        },
        Ty::Bool => {
            if !v.is_boolean() {
                line.err(path, format!("must be a boolean, found {}", type_name(v)));
            }
        }
        Ty::Count => {
            if v.as_u64().is_none() {
                line.err(path, format!("must be a non-negative integer, found {v}"));
            }
        }
        Ty::Unit => match v.as_f64() {
            Some(x) if (0.0..=1.0).contains(&x) => {}
            Some(x) => line.err(path, format!("{x} is out of range 0..1")),
            None => line.err(
                path,
                format!("must be a number in 0..1, found {}", type_name(v)),
            ),
        },
        Ty::NullOrStr => {
            if !(v.is_null() || v.is_string()) {
                line.err(
                    path,
                    format!("must be a string or null, found {}", type_name(v)),
                );
            }
        }
        Ty::Obj(fields) => {
            let Some(obj) = v.as_object() else {
                line.err(path, format!("must be an object, found {}", type_name(v)));
                return;
            };
            for key in obj.keys() {
                if !fields.iter().any(|(k, _)| k == key) {
                    line.err(join(path, key), "unknown field");
                }
            }
            for (key, fty) in fields {
                match obj.get(*key) {
                    Some(fv) => walk(fv, *fty, &join(path, key), line),
                    None => line.err(join(path, key), "missing field"),
                }
            }
        }
        Ty::Arr(elem) => {
            let Some(arr) = v.as_array() else {
                line.err(path, format!("must be an array, found {}", type_name(v)));
                return;
            };
            for (i, e) in arr.iter().enumerate() {
                walk(e, *elem, &format!("{path}[{i}]"), line);
            }
        }
    }
}

fn at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

/// A non-blank string at `path` (blank strings are reported by the structural walk).
fn str_at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    at(v, path)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

fn u64_at(v: &Value, path: &[&str]) -> Option<u64> {
    at(v, path).and_then(Value::as_u64)
}

/// Checks `reports/evals/eval_{YYYYMMDD_HHMMSS}_{DATASET}.jsonl` and returns (run id, dataset).
fn parse_log_path(p: &str) -> Result<(&str, &str), String> {
    let bad = || format!("{p:?} is not reports/evals/eval_{{YYYYMMDD_HHMMSS}}_{{DATASET}}.jsonl");
    let file = p
        .strip_prefix("reports/evals/")
        .and_then(|f| f.strip_suffix(".jsonl"))
        .ok_or_else(bad)?;
    // eval_ + 8 + _ + 6 = 20 bytes, then _DATASET.
    let (run, rest) = (
        file.get(..20).ok_or_else(bad)?,
        file.get(20..).ok_or_else(bad)?,
    );
    let dataset = rest.strip_prefix('_').ok_or_else(bad)?;
    if dataset.is_empty() || dataset.contains(['/', '\\']) || dataset.trim() != dataset {
        return Err(bad());
    }
    run_id_timestamp(run).map_err(|e| format!("{p:?}: {e}"))?;
    Ok((run, dataset))
}

fn check_git_commit(s: &str) -> bool {
    s == "unknown" || ((7..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn check_ids(v: &Value, path: &str, max: Option<u64>, line: &mut Line) {
    let Some(ids) = v.as_array() else { return };
    if let Some(max) = max
        && ids.len() as u64 > max
    {
        line.err(path, format!("{} example ids for {max} matches", ids.len()));
    }
    let mut seen = BTreeSet::new();
    for (i, id) in ids.iter().enumerate() {
        let Some(s) = id.as_str() else { continue };
        if s.chars().count() > 256 || s.contains(['\n', '\r']) {
            line.err(
                format!("{path}[{i}]"),
                "does not look like a prompt id (over 256 characters or a line break): ids only, never text",
            );
        }
        if !seen.insert(s) {
            line.err(format!("{path}[{i}]"), format!("duplicate id {s:?}"));
        }
    }
}

/// `PREFIX_NNN` with a known prefix and a number from 001: (prefix, number).
fn id_parts(id: &str) -> Option<(&str, u32)> {
    let (prefix, num) = id.split_once('_')?;
    if !PREFIXES.contains(&prefix) || num.len() != 3 || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    num.parse().ok().filter(|n| *n > 0).map(|n| (prefix, n))
}

/// The semantic checks of one record whose structure is known to be right where the values
/// are read (every getter tolerates a wrong type; the structural walk reported it).
fn check_record(v: &Value, line: &mut Line) {
    check_identity(v, line);
    check_pattern(v, line);
    let run_id = str_at(v, &["run", "eval_run_id"]);
    check_evidence(v, run_id, line);
    check_run(v, run_id, line);
    check_decision(v, line);
}

/// Schema version, pattern id and target function against the category.
fn check_identity(v: &Value, line: &mut Line) {
    if let Some(s) = str_at(v, &["schema_version"])
        && s != SCHEMA_VERSION
    {
        line.err(
            "schema_version",
            format!("{s:?}, expected {SCHEMA_VERSION:?}"),
        );
    }
    let category = str_at(v, &["category"]).and_then(|c| CATEGORIES.iter().position(|x| *x == c));
    if let Some(id) = str_at(v, &["pattern_id"]) {
        match id_parts(id) {
            Some((prefix, _)) => {
                if let Some(c) = category
                    && PREFIXES[c] != prefix
                {
                    line.err(
                        "pattern_id",
                        format!(
                            "prefix {prefix}_ does not match category {} ({}_)",
                            CATEGORIES[c], PREFIXES[c]
                        ),
                    );
                }
            }
            _ => line.err(
                "pattern_id",
                format!(
                    "{id:?} is not PREFIX_NNN (prefix one of {}, three digits from 001)",
                    PREFIXES.join(", ")
                ),
            ),
        }
    }
    if let (Some(c), Some(t)) = (category, str_at(v, &["implementation", "target_function"]))
        && TARGETS.contains(&t)
        && TARGETS[c] != t
    {
        line.err(
            "implementation.target_function",
            format!(
                "{t:?} does not belong to category {} (expected {:?})",
                CATEGORIES[c], TARGETS[c]
            ),
        );
    }
}

/// The `pattern` object: normalized value, regex, signal strength.
fn check_pattern(v: &Value, line: &mut Line) {
    if let Some(n) = str_at(v, &["pattern", "normalized_value"])
        && (n.trim() != n || n.to_lowercase() != n)
    {
        line.err(
            "pattern.normalized_value",
            "must be lower-cased and trimmed",
        );
    }
    match (
        str_at(v, &["pattern", "pattern_kind"]),
        at(v, &["pattern", "regex"]),
    ) {
        (Some("regex"), Some(Value::Null)) => line.err(
            "pattern.regex",
            "pattern_kind is \"regex\" but regex is null",
        ),
        (_, Some(Value::String(re))) => {
            if let Err(e) = regex::Regex::new(re) {
                line.err("pattern.regex", format!("does not compile: {e}"));
            }
        }
        _ => {}
    }
    if str_at(v, &["category"]) == Some("boundary_testing")
        && str_at(v, &["pattern", "signal_strength"]) == Some("strong")
    {
        line.err(
            "pattern.signal_strength",
            "boundary_testing patterns are weak signals only (rules of use)",
        );
    }
}

/// The `evidence` object: each dataset's counts, then the benign regression.
fn check_evidence(v: &Value, run_id: Option<&str>, line: &mut Line) {
    if let Some(datasets) = at(v, &["evidence", "datasets"]).and_then(Value::as_array) {
        if datasets.is_empty() {
            line.err(
                "evidence.datasets",
                "no evidence: at least one dataset with outcome_buckets is required",
            );
        }
        let mut names = BTreeSet::new();
        for (i, d) in datasets.iter().enumerate() {
            check_dataset_evidence(
                d,
                &format!("evidence.datasets[{i}]"),
                run_id,
                &mut names,
                line,
            );
        }
    }
    if let Some(b) = at(v, &["evidence", "benign_regression"]) {
        check_benign_regression(b, run_id, line);
    }
}

/// One entry of `evidence.datasets` at `p`; `names` holds the dataset names seen before it.
fn check_dataset_evidence<'v>(
    d: &'v Value,
    p: &str,
    run_id: Option<&str>,
    names: &mut BTreeSet<&'v str>,
    line: &mut Line,
) {
    let name = str_at(d, &["dataset_name"]);
    if let Some(n) = name
        && !names.insert(n)
    {
        line.err(
            format!("{p}.dataset_name"),
            format!("dataset {n:?} listed twice"),
        );
    }
    check_log_path(d, p, name, run_id, line);
    let sample = u64_at(d, &["sample_count_total"]);
    let matched = u64_at(d, &["match_count_total"]);
    if let (Some(s), Some(m)) = (sample, matched)
        && m > s
    {
        line.err(
            format!("{p}.match_count_total"),
            format!("{m} matches exceed sample_count_total {s}"),
        );
    }
    let buckets: Option<Vec<u64>> = BUCKETS
        .iter()
        .map(|(k, _)| u64_at(d, &["outcome_buckets", k]))
        .collect();
    if let (Some(b), Some(m)) = (buckets, matched)
        && b.iter().sum::<u64>() != m
    {
        line.err(
            format!("{p}.outcome_buckets"),
            format!(
                "buckets sum to {}, but match_count_total is {m}",
                b.iter().sum::<u64>()
            ),
        );
    }
    if let Some(ids) = d.get("example_prompt_ids") {
        check_ids(ids, &format!("{p}.example_prompt_ids"), matched, line);
    }
}

/// `evidence.benign_regression`: the benign corpus, its log and its counts.
fn check_benign_regression(b: &Value, run_id: Option<&str>, line: &mut Line) {
    let p = "evidence.benign_regression";
    let name = str_at(b, &["dataset_name"]);
    if let Some(n) = name
        && n != BENIGN_CORPUS_NAME
    {
        line.err(
            format!("{p}.dataset_name"),
            format!("{n:?}, expected {BENIGN_CORPUS_NAME:?}"),
        );
    }
    check_log_path(b, p, name, run_id, line);
    let matched = u64_at(b, &["match_count_total"]);
    if let (Some(s), Some(m)) = (u64_at(b, &["sample_count_total"]), matched)
        && m > s
    {
        line.err(
            format!("{p}.match_count_total"),
            format!("{m} matches exceed sample_count_total {s}"),
        );
    }
    if let Some(ids) = b.get("example_prompt_ids") {
        check_ids(ids, &format!("{p}.example_prompt_ids"), matched, line);
    }
}

/// The `run` object and `created_at`: run id, timestamps, commit.
fn check_run(v: &Value, run_id: Option<&str>, line: &mut Line) {
    if let Some(r) = run_id
        && let Err(e) = run_id_timestamp(r)
    {
        line.err("run.eval_run_id", e);
    }
    for (field, path) in [
        ("run.timestamp_utc", &["run", "timestamp_utc"][..]),
        ("created_at", &["created_at"][..]),
    ] {
        if let Some(t) = str_at(v, path)
            && let Err(e) = check_iso_utc(t)
        {
            line.err(field, e);
        }
    }
    if let Some(g) = str_at(v, &["run", "git_commit"])
        && !check_git_commit(g)
    {
        line.err(
            "run.git_commit",
            format!("{g:?} is neither a hex commit SHA nor \"unknown\""),
        );
    }
}

/// The `decision` object: a one-line reason, review flags that agree.
fn check_decision(v: &Value, line: &mut Line) {
    if let Some(r) = str_at(v, &["decision", "reason"])
        && r.contains(['\n', '\r'])
    {
        line.err("decision.reason", "must be one line");
    }
    if str_at(v, &["decision", "recommendation"]) == Some("review")
        && at(v, &["decision", "requires_review"]) == Some(&Value::Bool(false))
    {
        line.err(
            "decision.requires_review",
            "recommendation is \"review\" but requires_review is false",
        );
    }
}

fn check_log_path(d: &Value, p: &str, name: Option<&str>, run_id: Option<&str>, line: &mut Line) {
    let Some(path) = str_at(d, &["eval_log_path"]) else {
        return;
    };
    match parse_log_path(path) {
        Err(e) => line.err(format!("{p}.eval_log_path"), e),
        Ok((run, dataset)) => {
            if let Some(n) = name
                && n != dataset
            {
                line.err(
                    format!("{p}.eval_log_path"),
                    format!("names dataset {dataset:?}, but dataset_name is {n:?}"),
                );
            }
            if let Some(r) = run_id
                && r != run
            {
                line.err(
                    format!("{p}.eval_log_path"),
                    format!("names run {run:?}, but run.eval_run_id is {r:?}"),
                );
            }
        }
    }
}

/// The sort keys of a record: priority, false negatives, benign matches.
fn sort_keys(v: &Value) -> Option<(f64, u64, u64)> {
    let priority = at(v, &["metrics", "priority_score"]).and_then(Value::as_f64)?;
    let fns = at(v, &["evidence", "datasets"])?
        .as_array()?
        .iter()
        .map(|d| u64_at(d, &["outcome_buckets", "false_negative"]))
        .sum::<Option<u64>>()?;
    let benign = u64_at(v, &["evidence", "benign_regression", "match_count_total"])?;
    Some((priority, fns, benign))
}

/// Validates a whole file's text.
pub fn validate_jsonl(src: &str) -> ValidationReport {
    let mut report = ValidationReport::default();
    let mut next_number: BTreeMap<usize, u32> = BTreeMap::new();
    let mut prev: Option<(usize, (f64, u64, u64))> = None;
    for (i, text) in src.lines().enumerate() {
        let mut line = Line {
            no: i + 1,
            errors: Vec::new(),
        };
        if text.trim().is_empty() {
            line.err("", "empty line");
            report.errors.append(&mut line.errors);
            continue;
        }
        report.records += 1;
        let v: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                line.err("", format!("not JSON: {e}"));
                report.errors.append(&mut line.errors);
                continue;
            }
        };
        walk(&v, Ty::Obj(RECORD), "", &mut line);
        check_record(&v, &mut line);
        // Numbering within the category, in file order.
        let category =
            str_at(&v, &["category"]).and_then(|c| CATEGORIES.iter().position(|x| *x == c));
        if let (Some(c), Some(id)) = (category, str_at(&v, &["pattern_id"])) {
            let n = next_number.entry(c).or_insert(0);
            *n += 1;
            let expected = format!("{}_{:03}", PREFIXES[c], n);
            let well_formed = id_parts(id).is_some_and(|(p, _)| p == PREFIXES[c]);
            if well_formed && id != expected {
                line.err(
                    "pattern_id",
                    format!(
                        "{id:?} out of sequence: expected {expected:?} (numbered 001, 002, … within {} in file order)",
                        CATEGORIES[c]
                    ),
                );
            }
        }
        // Sort order against the previous record.
        if let Some(keys) = sort_keys(&v) {
            if let Some((pl, p)) = prev {
                let (field, detail) = if keys.0 > p.0 {
                    (
                        "metrics.priority_score",
                        format!("{} > {} on line {pl}", keys.0, p.0),
                    )
                } else if keys.0 == p.0 && keys.1 > p.1 {
                    (
                        "evidence.datasets[].outcome_buckets.false_negative",
                        format!(
                            "equal priority and {} false negatives > {} on line {pl}",
                            keys.1, p.1
                        ),
                    )
                } else if keys.0 == p.0 && keys.1 == p.1 && keys.2 < p.2 {
                    (
                        "evidence.benign_regression.match_count_total",
                        format!(
                            "equal priority and false negatives, and {} benign matches < {} on line {pl}",
                            keys.2, p.2
                        ),
                    )
                } else {
                    ("", String::new())
                };
                if !field.is_empty() {
                    line.err(
                        field,
                        format!(
                            "out of order (priority_score descending, then false negatives descending, then benign matches ascending): {detail}"
                        ),
                    );
                }
            }
            prev = Some((line.no, keys));
        }
        if line.errors.is_empty()
            && let Err(e) = serde_json::from_value::<PatternCandidate>(v)
        {
            line.err("", format!("does not read as a record: {e}"));
        }
        report.errors.append(&mut line.errors);
    }
    report
}
