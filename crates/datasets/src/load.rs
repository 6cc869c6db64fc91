//! Resolving a dataset by file path or by name.

use crate::record::{Record, RowError, read_jsonl, read_jsonl_str};
use std::path::{Path, PathBuf};

/// The hand-written benign corpus, embedded in the binary.
pub const CLEAN_BENIGN_V1: &str = include_str!("../../../datasets/clean_benign_v1.jsonl");
/// The hand-written attack set, embedded in the binary.
pub const HANDWRITTEN_ATTACKS_V1: &str =
    include_str!("../../../datasets/attacks_handwritten_v1.jsonl");

/// The generated set of injections embedded in data (held-back part), embedded in the binary.
/// Written by `scripts/data/gen_embedded.py`.
pub const EMBEDDED_INJECTIONS_V1: &str =
    include_str!("../../../datasets/embedded_injections_v1.jsonl");

/// The hand-written over-defense benchmark: benign prompts built around trigger words, in
/// many languages, embedded in the binary.
pub const TRIGGER_BENIGN_V1: &str = include_str!("../../../datasets/trigger_benign_v1.jsonl");
/// The hand-written multilingual attack set, embedded in the binary.
pub const MULTILINGUAL_ATTACKS_V1: &str =
    include_str!("../../../datasets/multilingual_attacks_v1.jsonl");

/// Name of the clean benign corpus in reports and gates.
pub const CLEAN_BENIGN_NAME: &str = "Clean_Benign_Corpus_v1";
/// Name of the hand-written attack set.
pub const HANDWRITTEN_ATTACKS_NAME: &str = "Handwritten_Attacks_v1";

/// Name of the embedded-injection set.
pub const EMBEDDED_INJECTIONS_NAME: &str = "Embedded_Injections_v1";

/// Name of the trigger-word over-defense benchmark.
pub const TRIGGER_BENIGN_NAME: &str = "Trigger_Benign_v1";
/// Name of the hand-written multilingual attack set.
pub const MULTILINGUAL_ATTACKS_NAME: &str = "Multilingual_Attacks_v1";

/// The hand-written conversation set (attack and benign multi-turn conversations),
/// embedded in the binary.
pub const CONVERSATIONS_V1: &str = include_str!("../../../datasets/conversations_v1.jsonl");
/// Name of the hand-written conversation set.
pub const CONVERSATIONS_NAME: &str = "Conversations_v1";

/// Datasets compiled into the binary: (name, JSONL source).
pub const BUILTIN: [(&str, &str); 6] = [
    (CLEAN_BENIGN_NAME, CLEAN_BENIGN_V1),
    (HANDWRITTEN_ATTACKS_NAME, HANDWRITTEN_ATTACKS_V1),
    (EMBEDDED_INJECTIONS_NAME, EMBEDDED_INJECTIONS_V1),
    (TRIGGER_BENIGN_NAME, TRIGGER_BENIGN_V1),
    (MULTILINGUAL_ATTACKS_NAME, MULTILINGUAL_ATTACKS_V1),
    (CONVERSATIONS_NAME, CONVERSATIONS_V1),
];

/// A dataset ready to evaluate.
#[derive(Debug, Clone)]
pub struct LoadedDataset {
    /// The name used in reports and log file names.
    pub name: String,
    /// Where it came from (`builtin:NAME` or a path).
    pub origin: String,
    /// The readable records.
    pub records: Vec<Record>,
    /// Rows that could not be read.
    pub errors: Vec<RowError>,
}

impl LoadedDataset {
    /// A note for a warning when rows could not be read (they are skipped):
    /// `NAME: N row(s) could not be read and are skipped (first: …)`.
    pub fn unreadable_note(&self) -> Option<String> {
        self.errors.first().map(|first| {
            format!(
                "{}: {} row(s) could not be read and are skipped (first: {first})",
                self.name,
                self.errors.len()
            )
        })
    }
}

/// Why a dataset could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Not a file, not built in, not in the data directory.
    #[error(
        "unknown dataset `{name}`: not a file, not built in, and not in the data directory {} \
         ({}run `rampart datasets fetch` or `rampart datasets list`)",
        data_dir.display(),
        suggestion.as_ref().map(|s| format!("did you mean `{s}`? ")).unwrap_or_default()
    )]
    Unknown {
        /// The name asked for.
        name: String,
        /// The data directory looked in.
        data_dir: PathBuf,
        /// The closest built-in or downloaded name, when one is close.
        suggestion: Option<String>,
    },
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Loads a dataset: an existing file path (name = file stem), a built-in name
/// ([`BUILTIN`]), or `DATA_DIR/NAME.jsonl`.
pub fn load(spec: &str, data_dir: &Path) -> Result<LoadedDataset, LoadError> {
    if let Some((base, part)) = spec.rsplit_once(':')
        && let Some(part) = HashPart::parse(part)
        && !Path::new(spec).is_file()
    {
        let mut d = load(base, data_dir)?;
        d.records.retain(|r| part.contains(&r.id));
        d.name = format!("{}_{}", d.name, part.name());
        d.origin = format!("{} (hash split {})", d.origin, part.name());
        return Ok(d);
    }
    let as_path = Path::new(spec);
    let file = if as_path.is_file() {
        Some(as_path.to_path_buf())
    } else if let Some((name, src)) = BUILTIN.iter().find(|(n, _)| *n == spec) {
        let (records, errors) = read_jsonl_str(src);
        return Ok(LoadedDataset {
            name: (*name).to_owned(),
            origin: format!("builtin:{name}"),
            records,
            errors,
        });
    } else {
        let p = data_dir.join(format!("{spec}.jsonl"));
        p.is_file().then_some(p)
    };
    let Some(path) = file else {
        return Err(LoadError::Unknown {
            name: spec.to_owned(),
            data_dir: data_dir.to_path_buf(),
            suggestion: closest_name(spec, data_dir),
        });
    };
    let (records, errors) = read_jsonl(&path).map_err(|source| LoadError::Io {
        path: path.clone(),
        source,
    })?;
    let name = path
        .file_stem()
        .map_or_else(|| spec.to_owned(), |s| s.to_string_lossy().into_owned());
    Ok(LoadedDataset {
        name,
        origin: path.display().to_string(),
        records,
        errors,
    })
}

/// The built-in or downloaded (`DATA_DIR/*.jsonl`) dataset name closest to `spec`, when one
/// is close enough to be a typo of it (case and `-`/`_` aside, or a Jaro-Winkler similarity of
/// at least 0.85).
fn closest_name(spec: &str, data_dir: &Path) -> Option<String> {
    let fold = |s: &str| s.to_lowercase().replace('-', "_");
    let mut names: Vec<String> = BUILTIN.iter().map(|(n, _)| (*n).to_owned()).collect();
    if let Ok(dir) = std::fs::read_dir(data_dir) {
        names.extend(dir.filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "jsonl").then(|| p.file_stem()?.to_str().map(str::to_owned))?
        }));
    }
    let wanted = fold(spec);
    names
        .into_iter()
        .map(|n| (strsim::jaro_winkler(&wanted, &fold(&n)), n))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(&a.1)))
        .map(|(_, n)| n)
}

/// Loads datasets in the order given ([`load`] each). `loaded` sees each one as soon as it
/// is read, before the next (to warn about [`LoadedDataset::unreadable_note`] as it goes); the
/// first that cannot be loaded ends the run.
pub fn load_all<S: AsRef<str>>(
    specs: &[S],
    data_dir: &Path,
    mut loaded: impl FnMut(&LoadedDataset),
) -> Result<Vec<LoadedDataset>, LoadError> {
    specs
        .iter()
        .map(|spec| {
            let d = load(spec.as_ref(), data_dir)?;
            loaded(&d);
            Ok(d)
        })
        .collect()
}

/// A deterministic part of a dataset that has no splits of its own (ShareGPT first turns):
/// `NAME:train`, `NAME:validation` or `NAME:heldout` keep the records whose id hashes into
/// that part. The rule, shared by every trainer: the first byte of SHA-256(id), modulo 10:
/// 0–5 train (60 %), 6–7 validation (20 %), 8–9 held back (20 %, never trained or tuned on).
/// The loaded dataset is named `NAME_train`, `NAME_validation`, `NAME_heldout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashPart {
    /// Buckets 0–5.
    Train,
    /// Buckets 6–7.
    Validation,
    /// Buckets 8–9.
    Heldout,
}

impl HashPart {
    /// `train`, `validation` or `heldout`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "train" => Some(Self::Train),
            "validation" => Some(Self::Validation),
            "heldout" => Some(Self::Heldout),
            _ => None,
        }
    }

    /// The part's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Train => "train",
            Self::Validation => "validation",
            Self::Heldout => "heldout",
        }
    }

    /// The part a record id falls in.
    pub fn of(id: &str) -> Self {
        use sha2::{Digest, Sha256};
        match Sha256::digest(id.as_bytes())[0] % 10 {
            0..=5 => Self::Train,
            6..=7 => Self::Validation,
            _ => Self::Heldout,
        }
    }

    /// Whether `id` falls in this part.
    pub fn contains(self, id: &str) -> bool {
        Self::of(id) == self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_load_by_name() {
        let d = load(CLEAN_BENIGN_NAME, Path::new("/nonexistent")).unwrap();
        assert!(d.errors.is_empty());
        assert!(d.records.len() >= 240);
        assert!(d.records.iter().all(|r| !r.label.is_attack()));
        let a = load(HANDWRITTEN_ATTACKS_NAME, Path::new("/nonexistent")).unwrap();
        assert!(a.records.len() >= 120);
        assert!(a.records.iter().all(|r| r.label.is_attack()));
        let e = load(EMBEDDED_INJECTIONS_NAME, Path::new("/nonexistent")).unwrap();
        assert!(e.errors.is_empty(), "{:?}", e.errors.first());
        assert!(e.records.len() >= 1000);
        assert!(e.records.iter().any(|r| r.label.is_attack()));
        assert!(e.records.iter().any(|r| !r.label.is_attack()));
        assert!(e.records.iter().all(|r| r.segments.is_some()));
        let t = load(TRIGGER_BENIGN_NAME, Path::new("/nonexistent")).unwrap();
        assert!(t.errors.is_empty(), "{:?}", t.errors.first());
        assert!(t.records.len() >= 400);
        assert!(t.records.iter().all(|r| !r.label.is_attack()));
        let c = load(CONVERSATIONS_NAME, Path::new("/nonexistent")).unwrap();
        assert!(c.errors.is_empty(), "{:?}", c.errors.first());
        assert!(c.records.iter().all(|r| r.is_conversation()));
        assert!(c.records.iter().any(|r| r.label.is_attack()));
        assert!(c.records.iter().any(|r| !r.label.is_attack()));
        assert!(
            c.records
                .iter()
                .all(|r| r.label.is_attack() == r.attack_turn.is_some()),
            "attack_turn on every attack and on no benign conversation"
        );
    }

    #[test]
    fn hash_parts_partition_a_dataset() {
        let all = load(CLEAN_BENIGN_NAME, Path::new("/nonexistent")).unwrap();
        let parts: Vec<LoadedDataset> = ["train", "validation", "heldout"]
            .iter()
            .map(|p| {
                load(
                    &format!("{CLEAN_BENIGN_NAME}:{p}"),
                    Path::new("/nonexistent"),
                )
                .unwrap()
            })
            .collect();
        assert_eq!(
            parts.iter().map(|d| d.records.len()).sum::<usize>(),
            all.records.len()
        );
        assert_eq!(parts[2].name, "Clean_Benign_Corpus_v1_heldout");
        // Roughly 60/20/20 and disjoint.
        assert!(parts[0].records.len() > parts[1].records.len());
        let mut ids: Vec<&str> = parts
            .iter()
            .flat_map(|d| d.records.iter().map(|r| r.id.as_str()))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all.records.len());
        // The rule is fixed: first byte of SHA-256("a") is 0xca = 202, 202 % 10 = 2 → train.
        assert_eq!(HashPart::of("a"), HashPart::Train);
        assert!(load("Clean_Benign_Corpus_v1:nope", Path::new("/nonexistent")).is_err());
    }

    #[test]
    fn load_all_loads_in_order_and_stops_at_the_first_unknown() {
        let dir = Path::new("/nonexistent");
        let mut seen = Vec::new();
        let all = load_all(&[CLEAN_BENIGN_NAME, CONVERSATIONS_NAME], dir, |d| {
            seen.push(d.name.clone());
        })
        .unwrap();
        assert_eq!(seen, [CLEAN_BENIGN_NAME, CONVERSATIONS_NAME]);
        assert_eq!(all.len(), 2);
        assert!(all[0].unreadable_note().is_none());
        let mut seen = 0;
        let e = load_all(&[CLEAN_BENIGN_NAME, "no_such_set"], dir, |_| seen += 1).unwrap_err();
        assert!(matches!(e, LoadError::Unknown { ref name, .. } if name == "no_such_set"));
        assert_eq!(seen, 1);
    }

    #[test]
    fn the_unreadable_note_counts_and_quotes_the_first_bad_row() {
        let (records, errors) = read_jsonl_str("not json\n{}\n");
        let d = LoadedDataset {
            name: "x".to_owned(),
            origin: "test".to_owned(),
            records,
            errors,
        };
        let note = d.unreadable_note().unwrap();
        assert!(
            note.starts_with("x: 2 row(s) could not be read and are skipped (first: line 1"),
            "{note}"
        );
    }

    #[test]
    fn unknown_name_is_a_clear_error() {
        let e = load("no_such_set", Path::new("/nonexistent")).unwrap_err();
        assert!(e.to_string().contains("rampart datasets fetch"), "{e}");
        assert!(!e.to_string().contains("did you mean"), "{e}");
    }

    /// An unknown dataset name got no "did you mean".
    #[test]
    fn a_near_miss_of_a_name_suggests_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("My_Downloaded_Set.jsonl"), "").unwrap();
        for (typo, meant) in [
            ("handwritten_attacks_v1", "Handwritten_Attacks_v1"),
            ("Handwriten_Attacks_v1", "Handwritten_Attacks_v1"),
            ("my-downloaded-set", "My_Downloaded_Set"),
        ] {
            let e = load(typo, dir.path()).unwrap_err();
            assert!(
                e.to_string().contains(&format!("did you mean `{meant}`?")),
                "{typo}: {e}"
            );
        }
    }
}
