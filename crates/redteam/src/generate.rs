//! Generating a red-team dataset: every selected transform applied to every selected record
//! of every source, each variant recorded (`mutation`), each skip tallied with its reason.

use crate::RedteamError;
use crate::registry::{Entry, Family, Registry};
use crate::transform::{Intent, Outcome, Output};
use rampart_core::Role;
use rampart_datasets::{Mutation, Record};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// Schema id of the manifest.
pub const MANIFEST_SCHEMA: &str = "rampart.redteam.manifest.v1";

/// What a variant's `category` says, so that `rampart eval`'s per-category breakdown is the
/// breakdown wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CategoryFrom {
    /// The family id (`encoding`): eval's "by category" table is then TPR/FPR per family.
    #[default]
    Family,
    /// The transform id (`encoding.base64`).
    Transform,
    /// The source record's category, unchanged.
    Source,
}

/// A dataset to draw from.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// Its name (recorded as `source_dataset`, part of every variant id).
    pub name: &'a str,
    /// Its records.
    pub records: &'a [Record],
}

/// What to generate.
#[derive(Debug, Clone, Default)]
pub struct GenerateOptions {
    /// The run's seed; with the same sources and options, the same seed gives the same
    /// output, byte for byte.
    pub seed: u64,
    /// At most this many records of each source (drawn with the seed); all when `None`.
    pub per_source: Option<usize>,
    /// Families to apply (all when empty).
    pub families: Vec<Family>,
    /// Transforms to apply, by id (all of the selected families when empty).
    pub transforms: Vec<String>,
    /// Also mutate benign records (they keep their label: the transform's false-positive
    /// rate). Attack records are always mutated.
    pub benign: bool,
    /// What a variant's `category` is.
    pub category: CategoryFrom,
}

/// Counts for one transform or family.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Variants of attack records.
    pub attack: usize,
    /// Variants of benign records.
    pub benign: usize,
    /// Source records the transform could not apply to.
    pub skipped: usize,
    /// Skips by reason.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub skipped_reasons: BTreeMap<String, usize>,
}

impl Tally {
    fn add(&mut self, attack: bool, skip: Option<&str>) {
        match skip {
            Some(r) => {
                self.skipped += 1;
                *self.skipped_reasons.entry(r.to_owned()).or_default() += 1;
            }
            None if attack => self.attack += 1,
            None => self.benign += 1,
        }
    }
}

/// One source's part in the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceSummary {
    /// The name.
    pub name: String,
    /// Its records.
    pub records: usize,
    /// Records of an eligible label.
    pub eligible: usize,
    /// Records mutated (after `per_source`).
    pub selected: usize,
}

/// A source record a transform could not apply to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skip {
    /// The source dataset.
    pub source_dataset: String,
    /// The source record.
    pub source_id: String,
    /// The transform id.
    pub transform: String,
    /// Why.
    pub reason: String,
}

/// The summary of a run, written beside the dataset (`FILE.manifest.json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifest {
    /// [`MANIFEST_SCHEMA`].
    pub schema: &'static str,
    /// The run's seed.
    pub seed: u64,
    /// The `per_source` limit.
    pub per_source: Option<usize>,
    /// Whether benign records were mutated.
    pub benign: bool,
    /// The sources.
    pub sources: Vec<SourceSummary>,
    /// The transforms applied, in order.
    pub transforms: Vec<String>,
    /// Variants written.
    pub generated: usize,
    /// Skips.
    pub skipped: usize,
    /// Per family.
    pub families: BTreeMap<String, Tally>,
    /// Per transform.
    pub by_transform: BTreeMap<String, Tally>,
    /// Every skip, in output order.
    pub skips: Vec<Skip>,
}

/// A generated dataset and its manifest.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The variants, in order: sources, then their records, then transforms.
    pub records: Vec<Record>,
    /// The summary.
    pub manifest: Manifest,
}

/// The seed of one variant: the run's seed, the source and the transform hashed together,
/// so that a variant does not depend on what else the run generates.
pub fn variant_seed(seed: u64, dataset: &str, id: &str, transform: &str) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(b"rampart-redteam/v1\0");
    h.update(&seed.to_le_bytes());
    for part in [dataset, id, transform] {
        h.update(part.as_bytes());
        h.update(b"\0");
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&h.finalize().as_bytes()[..8]);
    u64::from_le_bytes(b)
}

/// Where the attacker-written text of a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Text,
    Segment(usize),
    Turn(usize),
}

/// The framing a record's variants get: the attacker's for an attack, a neutral one for a
/// benign record (so that it stays benign).
fn intent_of(r: &Record) -> Intent {
    if r.label.is_attack() {
        Intent::Attack
    } else {
        Intent::Benign
    }
}

/// The text a transform works on: a `text` record's text; in `segments`, the last segment of
/// the record's channel (the injected document or tool result, else the user's message); in
/// `turns`, the `attack_turn` message, else the last message that is not the assistant's.
fn slot(r: &Record) -> Option<(Slot, &str)> {
    if let Some(t) = &r.text {
        return Some((Slot::Text, t));
    }
    if let Some(segs) = &r.segments {
        let role = match r.channel() {
            rampart_datasets::Channel::Tool => Role::Tool,
            rampart_datasets::Channel::Retrieved => Role::Retrieved,
            rampart_datasets::Channel::User => Role::User,
        };
        return segs
            .iter()
            .rposition(|s| s.role == role)
            .map(|i| (Slot::Segment(i), segs[i].text.as_str()));
    }
    let turns = r.turns.as_ref()?;
    let i = match r.attack_turn {
        Some(i) => i,
        None => turns.iter().rposition(|t| t.role != Role::Assistant)?,
    };
    turns.get(i).map(|t| (Slot::Turn(i), t.text.as_str()))
}

/// Skip reason: splitting into segments or turns needs a single-text record.
pub const NOT_SINGLE_TEXT: &str = "splitting into segments or turns applies to text records only";
/// Skip reason: no attacker-written text found.
pub const NO_SLOT: &str = "no attacker-written text in the record";

/// The variant record, or why there is none.
fn variant(
    src: &Record,
    at: Slot,
    output: Output,
    id: String,
    mutation: Mutation,
    category: CategoryFrom,
) -> Result<Record, &'static str> {
    let mut r = src.clone();
    r.id = id;
    match (at, output) {
        (Slot::Text, Output::Text(t)) => r.text = Some(t),
        (Slot::Segment(i), Output::Text(t)) => {
            if let Some(s) = r.segments.as_mut().and_then(|s| s.get_mut(i)) {
                s.text = t;
            }
        }
        (Slot::Turn(i), Output::Text(t)) => {
            if let Some(m) = r.turns.as_mut().and_then(|s| s.get_mut(i)) {
                m.text = t;
            }
        }
        (Slot::Text, Output::Segments(segs)) => {
            r.text = None;
            r.segments = Some(segs);
        }
        (Slot::Text, Output::Turns { turns, attack_turn }) => {
            r.text = None;
            r.turns = Some(turns);
            r.attack_turn = src.label.is_attack().then_some(attack_turn);
        }
        _ => return Err(NOT_SINGLE_TEXT),
    }
    r.category = match category {
        CategoryFrom::Family => Some(mutation.family.clone()),
        CategoryFrom::Transform => Some(format!("{}.{}", mutation.family, mutation.transform)),
        CategoryFrom::Source => src.category.clone(),
    };
    r.mutation = Some(mutation);
    Ok(r)
}

/// The transforms `opts` selects, in registry order.
pub fn select<'r>(
    registry: &'r Registry,
    opts: &GenerateOptions,
) -> Result<Vec<&'r Entry>, RedteamError> {
    for t in &opts.transforms {
        if registry.get(t).is_none() {
            return Err(RedteamError::UnknownTransform(t.clone()));
        }
    }
    Ok(registry
        .entries()
        .iter()
        .filter(|e| opts.families.is_empty() || opts.families.contains(&e.family))
        .filter(|e| opts.transforms.is_empty() || opts.transforms.iter().any(|t| t == e.id))
        .collect())
}

/// Generates the variants. `progress` is called with the number of source records done.
pub fn generate(
    registry: &Registry,
    sources: &[Source<'_>],
    opts: &GenerateOptions,
    progress: &dyn Fn(u64),
) -> Result<Generated, RedteamError> {
    let entries = select(registry, opts)?;
    if entries.is_empty() {
        return Err(RedteamError::NothingSelected);
    }
    let mut records = Vec::new();
    let mut ids = HashSet::new();
    let mut manifest = Manifest {
        schema: MANIFEST_SCHEMA,
        seed: opts.seed,
        per_source: opts.per_source,
        benign: opts.benign,
        sources: Vec::new(),
        transforms: entries.iter().map(|e| e.id.to_owned()).collect(),
        generated: 0,
        skipped: 0,
        families: BTreeMap::new(),
        by_transform: BTreeMap::new(),
        skips: Vec::new(),
    };
    for src in sources {
        let chosen = choose(src, opts);
        manifest.sources.push(SourceSummary {
            name: src.name.to_owned(),
            records: src.records.len(),
            eligible: src
                .records
                .iter()
                .filter(|r| r.label.is_attack() || opts.benign)
                .count(),
            selected: chosen.len(),
        });
        for rec in chosen {
            for e in &entries {
                let seed = variant_seed(opts.seed, src.name, &rec.id, e.id);
                let result = match slot(rec) {
                    None => Err(NO_SLOT),
                    Some((at, text)) => match registry.apply_as(e, text, seed, intent_of(rec)) {
                        Outcome::Skipped(r) => Err(r),
                        Outcome::Applied { output, params } => {
                            let id = format!("{}/{}/{}", src.name, rec.id, e.id);
                            let mutation = Mutation {
                                family: e.family.id().to_owned(),
                                transform: e.name().to_owned(),
                                params,
                                seed,
                                source_dataset: src.name.to_owned(),
                                source_id: rec.id.clone(),
                                source_category: rec.category.clone(),
                            };
                            variant(rec, at, output, id, mutation, opts.category)
                        }
                    },
                };
                let attack = rec.label.is_attack();
                let skip = result.as_ref().err().copied();
                manifest
                    .families
                    .entry(e.family.id().to_owned())
                    .or_default()
                    .add(attack, skip);
                manifest
                    .by_transform
                    .entry(e.id.to_owned())
                    .or_default()
                    .add(attack, skip);
                match result {
                    Ok(v) => {
                        v.validate().map_err(|error| RedteamError::InvalidVariant {
                            id: v.id.clone(),
                            error,
                        })?;
                        if !ids.insert(v.id.clone()) {
                            return Err(RedteamError::DuplicateId(v.id));
                        }
                        manifest.generated += 1;
                        records.push(v);
                    }
                    Err(reason) => {
                        manifest.skipped += 1;
                        manifest.skips.push(Skip {
                            source_dataset: src.name.to_owned(),
                            source_id: rec.id.clone(),
                            transform: e.id.to_owned(),
                            reason: reason.to_owned(),
                        });
                    }
                }
            }
            progress(1);
        }
    }
    Ok(Generated { records, manifest })
}

/// How many source records [`generate`] will mutate (for a progress bar).
pub fn planned_records(sources: &[Source<'_>], opts: &GenerateOptions) -> u64 {
    sources.iter().map(|s| choose(s, opts).len() as u64).sum()
}

/// The records of `src` to mutate: attacks, and benign ones when asked; at most
/// `per_source`, drawn by hashing each id with the seed, kept in file order.
fn choose<'a>(src: &Source<'a>, opts: &GenerateOptions) -> Vec<&'a Record> {
    let mut eligible: Vec<(usize, &Record)> = src
        .records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.label.is_attack() || opts.benign)
        .collect();
    if let Some(k) = opts.per_source
        && k < eligible.len()
    {
        eligible.sort_by_key(|(i, r)| (variant_seed(opts.seed, src.name, &r.id, "select"), *i));
        eligible.truncate(k);
        eligible.sort_by_key(|(i, _)| *i);
    }
    eligible.into_iter().map(|(_, r)| r).collect()
}
