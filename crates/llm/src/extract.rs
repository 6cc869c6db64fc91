//! Tolerant extraction of a JSON object from a model's reply, minimal repair, and a check
//! against the subset of JSON Schema that Rampart's prompts use.
//!
//! Extraction: every `{` not inside an object that already parsed is a candidate start (at
//! most [`MAX_CANDIDATES`]); from it a scanner walks to the matching `}` respecting strings and
//! escapes, and rewrites on the way the breakage small models produce: trailing commas, smart
//! quotes and single quotes used as string delimiters, raw newlines inside strings, Python's
//! `True`/`False`/`None`, and an object left unclosed at the end of the text. The untouched
//! slice is tried first, so valid JSON (fenced or inside prose) is `repaired = false`. The
//! first candidate that parses to an object and passes the schema wins.
//!
//! Schema check: a hand-written validator for `type`, `required`, `properties`,
//! `additionalProperties: false`, `enum`, `minimum`/`maximum`, `maxLength` and `items`. The
//! `jsonschema` crate covers the whole specification but brings regex engines, remote `$ref`
//! resolution and a large dependency tree for a check of a few fixed fields; unknown keywords
//! are ignored here.

use serde_json::{Map, Value};

/// Most candidate `{` positions tried in one reply (bounds the work on hostile text).
pub const MAX_CANDIDATES: usize = 16;

/// A recovered object.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    /// The object.
    pub value: Value,
    /// Whether the text needed rewriting to parse.
    pub repaired: bool,
}

/// Why no object was recovered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExtractError {
    /// No `{` in the text.
    #[error("no JSON object in the reply")]
    NoObject,
    /// Objects were found but none parsed.
    #[error("no candidate object parsed as JSON")]
    NotJson,
    /// An object parsed but did not match the schema (the first such failure).
    #[error("object does not match the schema: {0}")]
    Schema(SchemaError),
}

/// Where a value fails the schema and how; the path names the place (`$.evidence[0]`),
/// never the value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {mismatch}")]
pub struct SchemaError {
    /// The value's path from the root `$`.
    pub path: String,
    /// What is wrong with it.
    pub mismatch: Mismatch,
}

/// How a value fails a schema keyword.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Mismatch {
    /// `type`: the value is of another type (the keyword's value).
    #[error("expected type {0}")]
    Type(Value),
    /// `enum`.
    #[error("value not in enum")]
    NotInEnum,
    /// `minimum`.
    #[error("below minimum {0}")]
    BelowMinimum(f64),
    /// `maximum`.
    #[error("above maximum {0}")]
    AboveMaximum(f64),
    /// `maxLength`, in characters.
    #[error("longer than maxLength {0}")]
    TooLong(u64),
    /// `required`: the property's name.
    #[error("missing required property `{0}`")]
    MissingProperty(String),
    /// `additionalProperties: false`: how many properties the schema does not name.
    #[error("{0} property(ies) not in the schema")]
    ExtraProperties(usize),
}

impl Mismatch {
    fn at(self, path: &str) -> SchemaError {
        SchemaError {
            path: path.to_string(),
            mismatch: self,
        }
    }
}

/// Find the first JSON object in `text` that parses (after repair if needed) and, when
/// `schema` is given, validates.
pub fn extract_object(text: &str, schema: Option<&Value>) -> Result<Extracted, ExtractError> {
    let mut tried = 0usize;
    // A candidate inside an object that already parsed is part of it (a nested object), not
    // an answer of its own: an inner object must not pass where its enclosing one failed.
    let mut skip_until = 0usize;
    let mut first_schema_err: Option<SchemaError> = None;
    for (start, _) in text.match_indices('{') {
        if start < skip_until {
            continue;
        }
        if tried >= MAX_CANDIDATES {
            break;
        }
        tried += 1;
        let Some(scan) = scan_object(&text[start..]) else {
            continue;
        };
        let raw = &text[start..start + scan.raw_len];
        let parsed = match serde_json::from_str::<Value>(raw) {
            Ok(v) if v.is_object() && scan.closed => Some((v, false)),
            _ => match serde_json::from_str::<Value>(&scan.repaired) {
                Ok(v) if v.is_object() => Some((v, true)),
                _ => None,
            },
        };
        let Some((value, repaired)) = parsed else {
            continue;
        };
        skip_until = start + scan.raw_len;
        if let Some(schema) = schema
            && let Err(e) = validate(&value, schema, "$")
        {
            first_schema_err.get_or_insert(e);
            continue;
        }
        return Ok(Extracted { value, repaired });
    }
    if tried == 0 {
        return Err(ExtractError::NoObject);
    }
    Err(match first_schema_err {
        Some(e) => ExtractError::Schema(e),
        None => ExtractError::NotJson,
    })
}

struct Scan {
    /// Bytes of the original text the object spans (to the end when unclosed).
    raw_len: usize,
    /// The rewritten object, closed.
    repaired: String,
    /// Whether the matching `}` was found.
    closed: bool,
}

fn is_open_quote(c: char) -> Option<char> {
    match c {
        '"' => Some('"'),
        '\'' => Some('\''),
        '\u{201C}' | '\u{201D}' | '\u{201E}' => Some('\u{201D}'),
        '\u{2018}' | '\u{2019}' => Some('\u{2019}'),
        _ => None,
    }
}

fn closes(delim: char, c: char) -> bool {
    match delim {
        '"' => c == '"',
        '\'' => c == '\'',
        '\u{201D}' => matches!(c, '\u{201C}' | '\u{201D}' | '"'),
        '\u{2019}' => matches!(c, '\u{2018}' | '\u{2019}'),
        _ => false,
    }
}

/// Walk from a `{` to its matching `}`, producing a repaired copy. `None` when `s` does not
/// start with `{`.
fn scan_object(s: &str) -> Option<Scan> {
    if !s.starts_with('{') {
        return None;
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut stack: Vec<char> = Vec::new();
    let mut delim: Option<char> = None;
    let mut esc = false;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if let Some(d) = delim {
            if esc {
                esc = false;
                // `\'` is not a JSON escape; inside a single-quoted string it means `'`.
                if c == '\'' {
                    out.pop();
                }
                out.push(c);
            } else if c == '\\' {
                esc = true;
                out.push(c);
            } else if closes(d, c) {
                delim = None;
                out.push('"');
            } else if c == '"' {
                // A double quote inside a single- or smart-quoted string.
                out.push_str("\\\"");
            } else if c == '\n' {
                out.push_str("\\n");
            } else if c == '\r' {
                out.push_str("\\r");
            } else if c == '\t' {
                out.push_str("\\t");
            } else {
                out.push(c);
            }
            continue;
        }
        if let Some(d) = is_open_quote(c) {
            delim = Some(d);
            out.push('"');
            continue;
        }
        match c {
            '{' => {
                stack.push('}');
                out.push(c);
            }
            '[' => {
                stack.push(']');
                out.push(c);
            }
            '}' | ']' => {
                strip_trailing_comma(&mut out);
                out.push(c);
                if stack.pop() != Some(c) {
                    // Mismatched bracket: leave it to the parser to reject.
                    return Some(Scan {
                        raw_len: i + c.len_utf8(),
                        repaired: out,
                        closed: true,
                    });
                }
                if stack.is_empty() {
                    return Some(Scan {
                        raw_len: i + c.len_utf8(),
                        repaired: out,
                        closed: true,
                    });
                }
            }
            c if c.is_ascii_alphabetic() => {
                let mut word = String::from(c);
                while let Some(&(_, n)) = chars.peek() {
                    if n.is_ascii_alphanumeric() || n == '_' {
                        word.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push_str(match word.as_str() {
                    "True" => "true",
                    "False" => "false",
                    "None" => "null",
                    w => w,
                });
            }
            _ => out.push(c),
        }
    }
    // Unclosed: close the string and the open brackets.
    if delim.is_some() {
        if esc {
            out.pop();
        }
        out.push('"');
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    if out.ends_with(':') {
        out.push_str("null");
    }
    while let Some(close) = stack.pop() {
        strip_trailing_comma(&mut out);
        out.push(close);
    }
    Some(Scan {
        raw_len: s.len(),
        repaired: out,
        closed: false,
    })
}

fn strip_trailing_comma(out: &mut String) {
    let trimmed = out.trim_end().len();
    if out[..trimmed].ends_with(',') {
        out.truncate(trimmed - 1);
    }
}

/// Check `value` against the supported subset of `schema`; the error names the path.
pub fn validate(value: &Value, schema: &Value, path: &str) -> Result<(), SchemaError> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    if let Some(t) = schema.get("type") {
        let ok = match t {
            Value::String(t) => type_matches(value, t),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| type_matches(value, t)),
            _ => true,
        };
        if !ok {
            return Err(Mismatch::Type(t.clone()).at(path));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        return Err(Mismatch::NotInEnum.at(path));
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(Mismatch::BelowMinimum(min).at(path));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(Mismatch::AboveMaximum(max).at(path));
        }
    }
    if let (Some(s), Some(max)) = (
        value.as_str(),
        schema.get("maxLength").and_then(Value::as_u64),
    ) && s.chars().count() as u64 > max
    {
        return Err(Mismatch::TooLong(max).at(path));
    }
    if let Value::Object(obj) = value {
        validate_object(obj, schema, path)?;
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            validate(item, item_schema, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

fn validate_object(
    obj: &Map<String, Value>,
    schema: &Map<String, Value>,
    path: &str,
) -> Result<(), SchemaError> {
    if let Some(Value::Array(req)) = schema.get("required") {
        for key in req.iter().filter_map(Value::as_str) {
            if !obj.contains_key(key) {
                return Err(Mismatch::MissingProperty(key.to_string()).at(path));
            }
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(props) = props {
        for (key, sub) in props {
            if let Some(v) = obj.get(key) {
                validate(v, sub, &format!("{path}.{key}"))?;
            }
        }
    }
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        let extra = obj
            .keys()
            .filter(|k| !props.is_some_and(|p| p.contains_key(k.as_str())))
            .count();
        if extra > 0 {
            return Err(Mismatch::ExtraProperties(extra).at(path));
        }
    }
    Ok(())
}

fn type_matches(value: &Value, t: &str) -> bool {
    match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    }
}

/// Openings of a plain-text refusal. Checked only when a JSON object was asked for and none was
/// recovered, against the start of the reply (case-insensitive, apostrophes normalized), so a
/// JSON answer whose explanation says "I cannot" is never a refusal. Kept short on purpose: a
/// miss is still not benign (it is `Unparseable`).
pub const REFUSAL_OPENINGS: &[&str] = &[
    "i can't",
    "i cannot",
    "i can not",
    "i won't",
    "i will not",
    "i'm sorry",
    "i am sorry",
    "sorry, i",
    "i'm not able to",
    "i am not able to",
    "i'm unable to",
    "i am unable to",
    "as an ai",
    "i must decline",
    "i'm not comfortable",
];

/// Whether `text` opens with a refusal phrase (see [`REFUSAL_OPENINGS`]).
pub fn looks_like_refusal(text: &str) -> bool {
    let head: String = text
        .trim_start()
        .trim_start_matches(|c: char| c == '*' || c == '"' || c == '#' || c.is_whitespace())
        .chars()
        .take(40)
        .map(|c| if c == '\u{2019}' { '\'' } else { c })
        .collect::<String>()
        .to_lowercase();
    REFUSAL_OPENINGS.iter().any(|p| head.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ex(t: &str) -> Result<Extracted, ExtractError> {
        extract_object(t, None)
    }

    #[test]
    fn plain_fenced_and_prose_json_is_not_repaired() {
        for t in [
            r#"{"a": 1}"#,
            "```json\n{\"a\": 1}\n```",
            "Here you go: {\"a\": 1} hope it helps {\"b\": 2}",
        ] {
            let e = ex(t).expect(t);
            assert_eq!(e.value, json!({"a": 1}), "{t}");
            assert!(!e.repaired, "{t}");
        }
    }

    #[test]
    fn braces_inside_strings_are_respected() {
        let e = ex(r#"{"a": "x } { \" y", "b": [1, {"c": "}"}]}"#).expect("parses");
        assert_eq!(e.value, json!({"a": "x } { \" y", "b": [1, {"c": "}"}]}));
        assert!(!e.repaired);
    }

    #[test]
    fn common_breakage_is_repaired() {
        let cases = [
            (r#"{"a": 1, "b": [1, 2,],}"#, json!({"a": 1, "b": [1, 2]})),
            ("{\u{201C}a\u{201D}: \u{201C}x\u{201D}}", json!({"a": "x"})),
            (r#"{'a': 'it\'s "q"'}"#, json!({"a": "it's \"q\""})),
            ("{\"a\": \"line\nbreak\"}", json!({"a": "line\nbreak"})),
            (
                r#"{"a": True, "b": None, "c": False}"#,
                json!({"a": true, "b": null, "c": false}),
            ),
            (r#"{"a": {"b": [1, 2"#, json!({"a": {"b": [1, 2]}})),
            (r#"{"a": "unfinished"#, json!({"a": "unfinished"})),
            (r#"{"a": 1, "b":"#, json!({"a": 1, "b": null})),
        ];
        for (t, want) in cases {
            let e = ex(t).unwrap_or_else(|err| panic!("{t}: {err}"));
            assert_eq!(e.value, want, "{t}");
            assert!(e.repaired, "{t}");
        }
    }

    #[test]
    fn smart_quotes_inside_a_valid_string_are_content() {
        let t = "{\"a\": \"she said \u{201C}hi\u{201D} and it's fine\"}";
        let e = ex(t).expect("parses");
        assert_eq!(e.value["a"], "she said \u{201C}hi\u{201D} and it's fine");
        assert!(!e.repaired);
    }

    #[test]
    fn no_object_and_garbage() {
        assert_eq!(ex("no json here"), Err(ExtractError::NoObject));
        assert_eq!(ex("{ this is : not json ]"), Err(ExtractError::NotJson));
        assert_eq!(ex("[1, 2]"), Err(ExtractError::NoObject));
    }

    #[test]
    fn candidate_count_is_bounded() {
        let t = "{".repeat(10_000);
        assert!(ex(&t).is_err());
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["label", "confidence"],
            "additionalProperties": false,
            "properties": {
                "label": {"type": "string", "enum": ["benign", "malicious"]},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "evidence": {"type": "array", "items": {"type": "string", "maxLength": 5}}
            }
        })
    }

    #[test]
    fn schema_subset_is_checked() {
        let s = schema();
        let ok = extract_object(r#"{"label": "benign", "confidence": 0.9}"#, Some(&s));
        assert!(ok.is_ok());
        for (t, needle) in [
            (
                r#"{"label": "benign"}"#,
                "missing required property `confidence`",
            ),
            (
                r#"{"label": "safe", "confidence": 0.9}"#,
                "$.label: value not in enum",
            ),
            (
                r#"{"label": "benign", "confidence": "high"}"#,
                "$.confidence: expected type",
            ),
            (r#"{"label": "benign", "confidence": 1.5}"#, "above maximum"),
            (
                r#"{"label": "benign", "confidence": 0.5, "x": 1}"#,
                "not in the schema",
            ),
            (
                r#"{"label": "benign", "confidence": 0.5, "evidence": ["toolong"]}"#,
                "$.evidence[0]: longer than maxLength",
            ),
        ] {
            match extract_object(t, Some(&s)) {
                Err(ExtractError::Schema(e)) => assert!(e.to_string().contains(needle), "{t}: {e}"),
                other => panic!("{t}: {other:?}"),
            }
        }
    }

    #[test]
    fn first_valid_candidate_wins_over_a_non_matching_one() {
        let s = schema();
        let t = r#"Example: {"x": 1}. Answer: {"label": "malicious", "confidence": 0.8}"#;
        let e = extract_object(t, Some(&s)).expect("second candidate");
        assert_eq!(e.value["label"], "malicious");
    }

    #[test]
    fn nested_object_does_not_pass_where_its_parent_failed() {
        let s = schema();
        let t = r#"{"label": "malicious", "confidence": 0.8, "x": {"label": "benign", "confidence": 0.9}}"#;
        assert!(matches!(
            extract_object(t, Some(&s)),
            Err(ExtractError::Schema(_))
        ));
    }

    #[test]
    fn refusal_openings() {
        assert!(looks_like_refusal("I can't help with that."));
        assert!(looks_like_refusal("  **I\u{2019}m sorry**, but no."));
        assert!(looks_like_refusal("As an AI language model, I"));
        assert!(!looks_like_refusal("The text is benign."));
        assert!(!looks_like_refusal("Sure: the label is benign"));
    }
}
