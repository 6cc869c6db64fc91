//! Converting tabular files (JSON, JSONL, CSV, Parquet) to records with a column mapping.
//!
//! Every format is first turned into one JSON object per row, then one mapping function
//! ([`ImportOptions`]) turns a row into a [`Record`]. A row that cannot be converted becomes a
//! [`RowError`] and the import goes on; only a file that cannot be read at all (bad CSV
//! header, not a Parquet file, invalid JSON document) fails the whole call.

use crate::error::DatasetError;
use crate::record::{Label, Record, RowError, Split};
use rampart_core::{Role, Segment};
use rampart_fetch::{MAX_SOURCE_BYTES, read_capped};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// Largest prompt text accepted in one record (bytes); longer rows are skipped with a
/// per-row error.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;

/// A tabular input format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Format {
    /// A JSON document: an array of objects, or an object holding one (see
    /// [`ImportOptions::records_key`]).
    Json,
    /// One JSON object per line.
    Jsonl,
    /// Comma-separated values with a header row.
    Csv,
    /// Apache Parquet (Snappy-compressed or uncompressed column chunks).
    Parquet,
}

impl Format {
    /// Parses `json`, `jsonl` (or `ndjson`), `csv`, `parquet`.
    pub fn parse(s: &str) -> Option<Format> {
        match s.to_ascii_lowercase().as_str() {
            "json" => Some(Format::Json),
            "jsonl" | "ndjson" => Some(Format::Jsonl),
            "csv" => Some(Format::Csv),
            "parquet" | "pq" => Some(Format::Parquet),
            _ => None,
        }
    }

    /// Guesses the format from a file extension.
    pub fn from_path(path: &Path) -> Option<Format> {
        path.extension()
            .and_then(|e| e.to_str())
            .and_then(Format::parse)
    }
}

/// Which source column (or dotted path into a JSON object, e.g. `content.prompt`) fills each
/// record field. At least one of `text` and `segments` is required.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnMap {
    /// The prompt text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The record id; without it ids are `{id_prefix}-{row index}` (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The label value, mapped through [`ImportOptions::label_map`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// The language code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// A list of `{"role", "text"}` objects (or a JSON string holding one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<String>,
    /// A system layer: when non-empty the record becomes segments `[system, user(text)]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The channel the text arrives on, mapped through [`ImportOptions::role_map`]; a
    /// non-user role makes the record one segment of that role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// How to turn rows into records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOptions {
    /// The column mapping.
    pub columns: ColumnMap,
    /// Source label value → our label (`"1"` → attack). Integers and booleans are looked up
    /// by their decimal / `true`/`false` spelling. Empty: values must be our label names.
    pub label_map: BTreeMap<String, Label>,
    /// The label of every row when there is no label column.
    pub label: Option<Label>,
    /// Category → label, applied after the mapping (a per-category exception).
    pub label_overrides: BTreeMap<String, Label>,
    /// Source channel value → role (for [`ColumnMap::role`]). Empty: values must be role
    /// names (`user`, `tool`, `retrieved` …).
    pub role_map: BTreeMap<String, Role>,
    /// Prefix of generated ids.
    pub id_prefix: String,
    /// `source` of every record.
    pub source: Option<String>,
    /// `split` of every record.
    pub split: Option<Split>,
    /// `language` of every record without a language column value.
    pub language: Option<String>,
    /// JSON only: dotted path of the array of rows inside a top-level object.
    pub records_key: Option<String>,
    /// Literal substitutions applied to every text (template placeholders).
    pub replacements: BTreeMap<String, String>,
    /// Rows whose text (all segments together) is longer are skipped.
    pub max_text_bytes: usize,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            columns: ColumnMap::default(),
            label_map: BTreeMap::new(),
            label: None,
            label_overrides: BTreeMap::new(),
            role_map: BTreeMap::new(),
            id_prefix: "row".into(),
            source: None,
            split: None,
            language: None,
            records_key: None,
            replacements: BTreeMap::new(),
            max_text_bytes: MAX_TEXT_BYTES,
        }
    }
}

impl ImportOptions {
    /// Checks that the options can produce records at all.
    pub fn validate(&self) -> Result<(), DatasetError> {
        if self.columns.text.is_none() && self.columns.segments.is_none() {
            return Err(DatasetError::Options(
                "a text column (or a segments column) is required".into(),
            ));
        }
        if self.columns.label.is_none() && self.label.is_none() {
            return Err(DatasetError::Options(
                "no label column and no constant label: give one of them".into(),
            ));
        }
        if self.id_prefix.trim().is_empty() {
            return Err(DatasetError::Options("empty id prefix".into()));
        }
        Ok(())
    }
}

/// Parses a label map written as `"1=attack,0=benign"`.
pub fn parse_label_map(spec: &str) -> Result<BTreeMap<String, Label>, DatasetError> {
    let mut map = BTreeMap::new();
    for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(DatasetError::Options(format!(
                "label map entry `{pair}` is not VALUE=LABEL"
            )));
        };
        let label = parse_label(v.trim()).ok_or_else(|| {
            DatasetError::Options(format!(
                "`{}` is not a label (one of: {})",
                v.trim(),
                Label::ALL.map(Label::name).join(", ")
            ))
        })?;
        map.insert(k.trim().to_owned(), label);
    }
    if map.is_empty() {
        return Err(DatasetError::Options("empty label map".into()));
    }
    Ok(map)
}

/// Parses one of our label names (`attack`, `harmful_request` …).
pub fn parse_label(s: &str) -> Option<Label> {
    Label::ALL.into_iter().find(|l| l.name() == s)
}

/// Parses a split name.
pub fn parse_split(s: &str) -> Option<Split> {
    Split::ALL.into_iter().find(|x| x.name() == s)
}

/// The result of a conversion: the good records, one error per skipped row, and the number
/// of skipped rows per reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Outcome {
    /// Converted records, in source order.
    pub records: Vec<Record>,
    /// One entry per skipped row (`line` is the file line for CSV/JSONL, the 1-based row
    /// number otherwise).
    pub errors: Vec<RowError>,
    /// Skipped rows per reason.
    pub skipped: BTreeMap<String, usize>,
    /// Records kept but shortened, per reason (a converter's bounds), and what was cut.
    pub cut: BTreeMap<String, usize>,
}

impl Outcome {
    /// Records a skipped row.
    pub fn skip(&mut self, line: usize, id: Option<String>, reason: &str, detail: impl AsRef<str>) {
        let detail = detail.as_ref();
        let message = if detail.is_empty() {
            reason.to_owned()
        } else {
            format!("{reason}: {detail}")
        };
        self.errors.push(RowError { line, id, message });
        *self.skipped.entry(reason.to_owned()).or_default() += 1;
    }

    /// Number of skipped rows.
    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }

    /// Drops records whose id was already used (keeps the first).
    pub fn dedupe_ids(&mut self) {
        let mut seen = HashSet::new();
        let records = std::mem::take(&mut self.records);
        for (i, r) in records.into_iter().enumerate() {
            if seen.insert(r.id.clone()) {
                self.records.push(r);
            } else {
                self.skip(i + 1, Some(r.id), "duplicate id", "");
            }
        }
    }

    /// Drops records whose text (segments joined) is byte-identical to an earlier record's.
    pub fn dedupe_exact_text(&mut self) {
        let mut seen = HashSet::new();
        let records = std::mem::take(&mut self.records);
        for (i, r) in records.into_iter().enumerate() {
            if seen.insert(r.joined_text()) {
                self.records.push(r);
            } else {
                self.skip(i + 1, Some(r.id), "duplicate text", "");
            }
        }
    }
}

/// Imports a file (capped at [`MAX_SOURCE_BYTES`]).
pub fn import_file(
    path: &Path,
    format: Format,
    opts: &ImportOptions,
) -> Result<Outcome, DatasetError> {
    let bytes = read_capped(path, MAX_SOURCE_BYTES)?;
    import_bytes(&bytes, format, opts, &path.display().to_string())
}

/// Imports an in-memory file. `what` names it in errors.
pub fn import_bytes(
    bytes: &[u8],
    format: Format,
    opts: &ImportOptions,
    what: &str,
) -> Result<Outcome, DatasetError> {
    opts.validate()?;
    let mut out = Outcome::default();
    match format {
        Format::Csv => csv_rows(bytes, opts, what, &mut out)?,
        Format::Jsonl => jsonl_rows(bytes, opts, &mut out),
        Format::Json => json_rows(bytes, opts, what, &mut out)?,
        Format::Parquet => parquet_rows(bytes, opts, what, &mut out)?,
    }
    out.dedupe_ids();
    Ok(out)
}

fn csv_rows(
    bytes: &[u8],
    opts: &ImportOptions,
    what: &str,
    out: &mut Outcome,
) -> Result<(), DatasetError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(bytes);
    let headers: Vec<String> = reader
        .byte_headers()
        .map_err(|e| DatasetError::format(what, format!("CSV header: {e}")))?
        .iter()
        .map(|h| {
            String::from_utf8_lossy(h)
                .trim_start_matches('\u{feff}')
                .to_owned()
        })
        .collect();
    if headers.is_empty() || headers.iter().all(String::is_empty) {
        return Err(DatasetError::format(what, "CSV file has no header row"));
    }
    for (index, row) in reader.byte_records().enumerate() {
        let row = match row {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map_or(index + 2, |p| p.line() as usize);
                out.skip(line, None, "malformed row", e.to_string());
                continue;
            }
        };
        let line = row.position().map_or(index + 2, |p| p.line() as usize);
        let mut obj = Map::new();
        let mut bad_utf8 = None;
        for (h, field) in headers.iter().zip(row.iter()) {
            match std::str::from_utf8(field) {
                Ok(s) => {
                    obj.insert(h.clone(), Value::String(s.to_owned()));
                }
                Err(_) => bad_utf8 = Some(h.clone()),
            }
        }
        if let Some(col) = bad_utf8 {
            out.skip(line, None, "invalid UTF-8", format!("column `{col}`"));
            continue;
        }
        map_and_push(index, line, &Value::Object(obj), opts, out);
    }
    Ok(())
}

fn jsonl_rows(bytes: &[u8], opts: &ImportOptions, out: &mut Outcome) {
    let mut index = 0;
    for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = i + 1;
        let Ok(text) = std::str::from_utf8(raw) else {
            out.skip(line, None, "invalid UTF-8", "");
            index += 1;
            continue;
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(text) {
            Ok(v) => map_and_push(index, line, &v, opts, out),
            Err(e) => out.skip(line, None, "malformed row", e.to_string()),
        }
        index += 1;
    }
}

fn json_rows(
    bytes: &[u8],
    opts: &ImportOptions,
    what: &str,
    out: &mut Outcome,
) -> Result<(), DatasetError> {
    let doc: Value = serde_json::from_slice(bytes)
        .map_err(|e| DatasetError::format(what, format!("invalid JSON document: {e}")))?;
    let rows = match &opts.records_key {
        Some(key) => lookup(&doc, key).ok_or_else(|| {
            DatasetError::format(what, format!("no `{key}` in the top-level object"))
        })?,
        None => &doc,
    };
    let Value::Array(rows) = rows else {
        return Err(DatasetError::format(
            what,
            "expected an array of objects (for an object holding the array, give the records key)",
        ));
    };
    for (index, row) in rows.iter().enumerate() {
        map_and_push(index, index + 1, row, opts, out);
    }
    Ok(())
}

fn parquet_rows(
    bytes: &[u8],
    opts: &ImportOptions,
    what: &str,
    out: &mut Outcome,
) -> Result<(), DatasetError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(bytes::Bytes::copy_from_slice(bytes))
        .map_err(|e| DatasetError::format(what, format!("not a readable Parquet file: {e}")))?;
    let rows = reader
        .get_row_iter(None)
        .map_err(|e| DatasetError::format(what, format!("Parquet schema: {e}")))?;
    for (index, row) in rows.enumerate() {
        match row {
            Ok(row) => {
                let obj: Map<String, Value> = row
                    .get_column_iter()
                    .map(|(name, field)| (name.clone(), field_to_json(field)))
                    .collect();
                map_and_push(index, index + 1, &Value::Object(obj), opts, out);
            }
            Err(e) => {
                // A column chunk that cannot be decoded spoils the rest of the row group; stop
                // instead of reporting the same failure for every remaining row.
                out.skip(index + 1, None, "unreadable Parquet rows", e.to_string());
                break;
            }
        }
    }
    Ok(())
}

fn field_to_json(field: &parquet::record::Field) -> Value {
    use parquet::record::Field as F;
    match field {
        F::Null => Value::Null,
        F::Bool(b) => Value::Bool(*b),
        F::Byte(n) => Value::from(*n),
        F::Short(n) => Value::from(*n),
        F::Int(n) => Value::from(*n),
        F::Long(n) => Value::from(*n),
        F::UByte(n) => Value::from(*n),
        F::UShort(n) => Value::from(*n),
        F::UInt(n) => Value::from(*n),
        F::ULong(n) => Value::from(*n),
        F::Float(x) => Value::from(f64::from(*x)),
        F::Double(x) => Value::from(*x),
        F::Str(s) => Value::String(s.clone()),
        F::Bytes(b) => match std::str::from_utf8(b.data()) {
            Ok(s) => Value::String(s.to_owned()),
            Err(_) => Value::Null,
        },
        F::ListInternal(list) => Value::Array(list.elements().iter().map(field_to_json).collect()),
        F::Group(row) => Value::Object(
            row.get_column_iter()
                .map(|(k, v)| (k.clone(), field_to_json(v)))
                .collect(),
        ),
        other => Value::String(other.to_string()),
    }
}

/// Looks up a column: the exact key first, then a dotted path through nested objects.
fn lookup<'a>(row: &'a Value, key: &str) -> Option<&'a Value> {
    if let Some(v) = row.get(key) {
        return Some(v);
    }
    let mut cur = row;
    for part in key.split('.') {
        cur = cur.get(part)?;
    }
    Some(cur)
}

/// A scalar as the string a label or role map is keyed by.
fn scalar_key(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn optional_string(row: &Value, col: Option<&String>) -> Option<String> {
    let v = lookup(row, col?)?;
    scalar_key(v).filter(|s| !s.is_empty())
}

fn map_and_push(index: usize, line: usize, row: &Value, opts: &ImportOptions, out: &mut Outcome) {
    match map_row(index, row, opts) {
        Ok(rec) => out.records.push(rec),
        Err((reason, detail, id)) => out.skip(line, id, reason, detail),
    }
}

type RowFailure = (&'static str, String, Option<String>);

/// Maps one row (a JSON object) to a record.
pub(crate) fn map_row(
    index: usize,
    row: &Value,
    opts: &ImportOptions,
) -> Result<Record, RowFailure> {
    if !row.is_object() {
        return Err(("not an object", format!("row is {}", kind_of(row)), None));
    }
    let cols = &opts.columns;
    let id = match &cols.id {
        Some(col) => match lookup(row, col)
            .and_then(scalar_key)
            .filter(|s| !s.is_empty())
        {
            Some(id) => id,
            None => return Err(("missing id", format!("no value in column `{col}`"), None)),
        },
        None => format!("{}-{index}", opts.id_prefix),
    };
    let fail = |reason: &'static str, detail: String| (reason, detail, Some(id.clone()));

    let text = match &cols.text {
        Some(col) => match lookup(row, col) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None if cols.segments.is_some() => None,
            Some(Value::Null) | None => {
                return Err(fail("missing text", format!("no value in column `{col}`")));
            }
            Some(other) => {
                return Err(fail(
                    "missing text",
                    format!("column `{col}` holds {}, not a string", kind_of(other)),
                ));
            }
        },
        None => None,
    };
    let mut segments: Option<Vec<Segment>> = None;
    if let Some(col) = &cols.segments
        && let Some(v) = lookup(row, col).filter(|v| !v.is_null())
    {
        let parsed = match v {
            Value::String(s) => serde_json::from_str::<Vec<Segment>>(s),
            other => serde_json::from_value::<Vec<Segment>>(other.clone()),
        };
        match parsed {
            Ok(s) => segments = Some(s),
            Err(e) => return Err(fail("bad segments", e.to_string())),
        }
    }
    let (text, segments) = match (text, segments) {
        (_, Some(segs)) => (None, Some(segs)),
        (Some(t), None) => {
            let system = optional_string(row, cols.system.as_ref());
            let role =
                match &cols.role {
                    Some(col) => match lookup(row, col).and_then(scalar_key) {
                        Some(v) => Some(map_role(&v, &opts.role_map).ok_or_else(|| {
                            fail("unknown role", format!("`{v}` in column `{col}`"))
                        })?),
                        None => None,
                    },
                    None => None,
                };
            let role = role.unwrap_or(Role::User);
            match (system, role) {
                (None, Role::User) => (Some(t), None),
                (None, r) => (None, Some(vec![Segment::new(r, t)])),
                (Some(sys), r) => (
                    None,
                    Some(vec![Segment::new(Role::System, sys), Segment::new(r, t)]),
                ),
            }
        }
        (None, None) => return Err(fail("missing text", "neither text nor segments".into())),
    };
    let (text, segments) = apply_replacements(text, segments, &opts.replacements);

    let label = match &cols.label {
        Some(col) => {
            let Some(raw) = lookup(row, col)
                .and_then(scalar_key)
                .filter(|s| !s.is_empty())
            else {
                return match opts.label {
                    Some(l) => finish(id, text, segments, l, row, opts),
                    None => Err(fail("missing label", format!("no value in column `{col}`"))),
                };
            };
            let mapped = if opts.label_map.is_empty() {
                parse_label(&raw)
            } else {
                opts.label_map.get(&raw).copied()
            };
            match mapped {
                Some(l) => l,
                None => return Err(fail("unknown label", format!("`{raw}` in column `{col}`"))),
            }
        }
        None => match opts.label {
            Some(l) => l,
            None => return Err(fail("missing label", "no label column".into())),
        },
    };
    finish(id, text, segments, label, row, opts)
}

fn finish(
    id: String,
    text: Option<String>,
    segments: Option<Vec<Segment>>,
    label: Label,
    row: &Value,
    opts: &ImportOptions,
) -> Result<Record, RowFailure> {
    let category = optional_string(row, opts.columns.category.as_ref());
    let language =
        optional_string(row, opts.columns.language.as_ref()).or_else(|| opts.language.clone());
    let label = category
        .as_ref()
        .and_then(|c| opts.label_overrides.get(c).copied())
        .unwrap_or(label);
    let record = Record {
        id,
        text,
        segments,
        turns: None,
        attack_turn: None,
        label,
        category,
        source: opts.source.clone(),
        split: opts.split,
        language,
        carrier: None,
        position: None,
        mutation: None,
    };
    check_record(&record, opts.max_text_bytes).map_err(|(r, d)| (r, d, Some(record.id.clone())))?;
    Ok(record)
}

/// The checks every converted record passes: valid shape, not blank, not too long.
pub(crate) fn check_record(
    record: &Record,
    max_text_bytes: usize,
) -> Result<(), (&'static str, String)> {
    record
        .validate()
        .map_err(|e| ("invalid record", e.to_string()))?;
    let len: usize = match (&record.segments, &record.text, &record.turns) {
        (Some(segs), _, _) => segs.iter().map(|s| s.text.len()).sum(),
        (None, Some(t), _) => t.len(),
        (None, None, Some(turns)) => turns.iter().map(|t| t.to_turn().bytes()).sum(),
        (None, None, None) => 0,
    };
    if len > max_text_bytes {
        return Err((
            "text too long",
            format!("{len} bytes, limit {max_text_bytes}"),
        ));
    }
    let blank = match (&record.segments, &record.text, &record.turns) {
        (Some(segs), _, _) => segs.iter().all(|s| s.text.trim().is_empty()),
        (None, Some(t), _) => t.trim().is_empty(),
        (None, None, Some(turns)) => turns.iter().all(|t| t.text.trim().is_empty()),
        (None, None, None) => true,
    };
    if blank {
        return Err(("empty text", String::new()));
    }
    Ok(())
}

fn apply_replacements(
    text: Option<String>,
    segments: Option<Vec<Segment>>,
    reps: &BTreeMap<String, String>,
) -> (Option<String>, Option<Vec<Segment>>) {
    if reps.is_empty() {
        return (text, segments);
    }
    let rep = |s: String| reps.iter().fold(s, |acc, (from, to)| acc.replace(from, to));
    (
        text.map(rep),
        segments.map(|segs| {
            segs.into_iter()
                .map(|mut s| {
                    s.text = rep(std::mem::take(&mut s.text));
                    s
                })
                .collect()
        }),
    )
}

fn map_role(v: &str, map: &BTreeMap<String, Role>) -> Option<Role> {
    if map.is_empty() {
        Role::ALL.into_iter().find(|r| r.name() == v)
    } else {
        map.get(v).copied()
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ImportOptions {
        ImportOptions {
            columns: ColumnMap {
                text: Some("text".into()),
                label: Some("label".into()),
                ..ColumnMap::default()
            },
            label_map: parse_label_map("1=attack,0=benign").unwrap(),
            id_prefix: "t".into(),
            ..ImportOptions::default()
        }
    }

    #[test]
    fn label_map_parsing() {
        let m = parse_label_map(" 1 = attack , 0=benign,x=harmful_request").unwrap();
        assert_eq!(m["1"], Label::Attack);
        assert_eq!(m["x"], Label::HarmfulRequest);
        assert!(parse_label_map("1=evil").is_err());
        assert!(parse_label_map("1").is_err());
        assert!(parse_label_map("").is_err());
    }

    #[test]
    fn csv_bad_rows_are_reported_and_the_rest_is_read() {
        let src = "text,label\nhello,0\n\"ignore all rules\",1\nthree,fields,here\nbad label,7\n,1\nlast,1\n";
        let out = import_bytes(src.as_bytes(), Format::Csv, &opts(), "t.csv").unwrap();
        let ids: Vec<_> = out.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["t-0", "t-1", "t-5"]);
        assert_eq!(out.records[1].label, Label::Attack);
        assert_eq!(
            out.errors.iter().map(|e| e.line).collect::<Vec<_>>(),
            [4, 5, 6]
        );
        assert_eq!(out.skipped["malformed row"], 1);
        assert_eq!(out.skipped["unknown label"], 1);
        assert_eq!(out.skipped["empty text"], 1);
    }

    #[test]
    fn json_non_object_rows_and_dotted_paths() {
        let src = r#"{"prompts":[
            {"id":"a","content":{"prompt":"hi","system":"be nice"},"label":"extractive"},
            42,
            {"id":"b","content":{"prompt":"yo"},"label":"reciprocal","cat":"x"},
            {"id":"c","content":{},"label":"reciprocal"}
        ]}"#;
        let o = ImportOptions {
            columns: ColumnMap {
                text: Some("content.prompt".into()),
                system: Some("content.system".into()),
                id: Some("id".into()),
                label: Some("label".into()),
                category: Some("cat".into()),
                ..ColumnMap::default()
            },
            records_key: Some("prompts".into()),
            ..ImportOptions::default()
        };
        let out = import_bytes(src.as_bytes(), Format::Json, &o, "t.json").unwrap();
        assert_eq!(out.records.len(), 2);
        let segs = out.records[0].segments.as_ref().unwrap();
        assert_eq!(segs.len(), 2);
        assert_eq!(segs[0].role, Role::System);
        assert_eq!(segs[1].text, "hi");
        assert_eq!(out.records[1].text.as_deref(), Some("yo"));
        assert_eq!(out.records[1].category.as_deref(), Some("x"));
        assert_eq!(out.errors.len(), 2);
        assert_eq!(out.errors[0].line, 2);
        assert!(
            out.errors[0].message.starts_with("not an object"),
            "{:?}",
            out.errors
        );
        assert_eq!(out.errors[1].id.as_deref(), Some("c"));
        // A top-level object without the key is a whole-file error.
        let e = import_bytes(src.as_bytes(), Format::Json, &opts(), "t.json").unwrap_err();
        assert!(e.to_string().contains("records key"), "{e}");
    }

    #[test]
    fn jsonl_roles_segments_overrides_and_limits() {
        let src = concat!(
            "{\"t\":\"a\",\"ch\":\"tool_output\",\"l\":\"malicious\",\"c\":\"x\"}\n",
            "not json\n",
            "{\"t\":\"b\",\"ch\":\"user_input\",\"l\":\"benign\",\"c\":\"special\"}\n",
            "{\"t\":\"c\",\"ch\":\"radio\",\"l\":\"benign\"}\n",
            "{\"segs\":[{\"role\":\"retrieved\",\"text\":\"doc\"}],\"l\":\"malicious\"}\n",
            "{\"t\":\"0123456789abcdef0123\",\"l\":\"benign\"}\n",
        );
        let o = ImportOptions {
            columns: ColumnMap {
                text: Some("t".into()),
                segments: Some("segs".into()),
                label: Some("l".into()),
                category: Some("c".into()),
                role: Some("ch".into()),
                ..ColumnMap::default()
            },
            label_map: parse_label_map("malicious=attack,benign=benign").unwrap(),
            label_overrides: [("special".to_owned(), Label::Borderline)].into(),
            role_map: [
                ("tool_output".to_owned(), Role::Tool),
                ("user_input".to_owned(), Role::User),
            ]
            .into(),
            max_text_bytes: 16,
            id_prefix: "j".into(),
            ..ImportOptions::default()
        };
        let out = import_bytes(src.as_bytes(), Format::Jsonl, &o, "t.jsonl").unwrap();
        let ids: Vec<_> = out.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["j-0", "j-2", "j-4"]);
        assert_eq!(
            out.records[0].segments.as_ref().unwrap()[0].role,
            Role::Tool
        );
        assert_eq!(out.records[1].text.as_deref(), Some("b"));
        assert_eq!(out.records[1].label, Label::Borderline);
        assert_eq!(
            out.records[2].segments.as_ref().unwrap()[0].role,
            Role::Retrieved
        );
        let reasons: Vec<_> = out.skipped.keys().map(String::as_str).collect();
        assert_eq!(reasons, ["malformed row", "text too long", "unknown role"]);
        assert_eq!(
            out.errors.iter().map(|e| e.line).collect::<Vec<_>>(),
            [2, 4, 6]
        );
    }

    #[test]
    fn options_without_text_or_label_are_rejected() {
        let mut o = opts();
        o.columns.text = None;
        assert!(import_bytes(b"", Format::Jsonl, &o, "x").is_err());
        let mut o = opts();
        o.columns.label = None;
        assert!(import_bytes(b"", Format::Jsonl, &o, "x").is_err());
        o.label = Some(Label::Benign);
        assert!(import_bytes(b"", Format::Jsonl, &o, "x").is_ok());
    }
}
