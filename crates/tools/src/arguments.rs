//! Tool-call arguments from the wire: bounded in size and depth before anything parses or
//! walks them, so a hostile model output (10 MB, or `[[[[…` a thousand deep) costs a bounded
//! amount of work and fails closed.

/// The largest arguments accepted, in bytes of JSON text (or of the value's JSON form when
/// [`crate::Policy::check`] is given a value).
pub const MAX_ARGUMENT_BYTES: usize = 65_536;

/// The deepest nesting of arrays and objects accepted (the arguments object itself is 1).
pub const MAX_ARGUMENT_DEPTH: usize = 32;

/// Why a `function.arguments` string was refused. Never holds the arguments' text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentsError {
    /// Longer than [`MAX_ARGUMENT_BYTES`].
    #[error("arguments are {bytes} bytes, more than the {max} allowed")]
    TooLarge {
        /// The size given.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// Not JSON (the parser's message: position and kind, no content).
    #[error("arguments are not JSON: {0}")]
    NotJson(String),
    /// Nested deeper than [`MAX_ARGUMENT_DEPTH`].
    #[error("arguments are nested deeper than {max}")]
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// JSON, but not an object.
    #[error("arguments are not a JSON object")]
    NotAnObject,
}

/// Parses OpenAI's `function.arguments` (a string holding a JSON object). An empty (or
/// all-blank) string is `{}`, as OpenAI sends for a tool without parameters. The size is
/// checked first, then the nesting depth by a scan of the text (so the parser never
/// recurses deeply), then the text is parsed and must be an object.
pub fn parse_arguments(raw: &str) -> Result<serde_json::Value, ArgumentsError> {
    if raw.len() > MAX_ARGUMENT_BYTES {
        return Err(ArgumentsError::TooLarge {
            bytes: raw.len(),
            max: MAX_ARGUMENT_BYTES,
        });
    }
    if raw.trim().is_empty() {
        return Ok(serde_json::Value::Object(serde_json::Map::new()));
    }
    if text_depth_exceeds(raw, MAX_ARGUMENT_DEPTH) {
        return Err(ArgumentsError::TooDeep {
            max: MAX_ARGUMENT_DEPTH,
        });
    }
    // Strict: a key given twice, or two keys equal after folding, is not JSON this
    // checker can read one way.
    let v = crate::strict::from_str(raw).map_err(|e| ArgumentsError::NotJson(e.to_string()))?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(ArgumentsError::NotAnObject)
    }
}

/// Whether JSON text nests arrays and objects deeper than `max` (brackets inside strings do
/// not count). Works on any text: invalid JSON is the parser's to report.
fn text_depth_exceeds(raw: &str, max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for b in raw.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Why an argument value (already parsed) is refused by [`crate::Policy::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueShape {
    TooDeep,
    TooLarge,
    FoldedKeys,
}

/// Checks a value's depth (bounded recursion: it stops descending past the limit, so a
/// value built a million deep costs at most `MAX_ARGUMENT_DEPTH` frames), then its JSON
/// size (serialized into a counting sink that stops at the limit: no allocation), then
/// that no object has two keys equal after case and width folding.
pub(crate) fn value_shape(v: &serde_json::Value) -> Result<(), ValueShape> {
    if value_depth_exceeds(v, 1, MAX_ARGUMENT_DEPTH) {
        return Err(ValueShape::TooDeep);
    }
    let mut sink = CountingSink {
        bytes: 0,
        max: MAX_ARGUMENT_BYTES,
    };
    // The only error the sink raises is "over the limit"; serde_json cannot fail otherwise
    // on a `Value` (its map keys are strings).
    if serde_json::to_writer(&mut sink, v).is_err() {
        return Err(ValueShape::TooLarge);
    }
    // Values built in code (or read by a lax parser) can still hold `path` and `PATH`.
    match crate::strict::folded_collision(v) {
        Some(_) => Err(ValueShape::FoldedKeys),
        None => Ok(()),
    }
}

fn value_depth_exceeds(v: &serde_json::Value, depth: usize, max: usize) -> bool {
    let deeper = |c: &serde_json::Value| value_depth_exceeds(c, depth + 1, max);
    match v {
        serde_json::Value::Array(a) => depth > max || a.iter().any(deeper),
        serde_json::Value::Object(m) => depth > max || m.values().any(deeper),
        _ => false,
    }
}

struct CountingSink {
    bytes: usize,
    max: usize,
}

impl std::io::Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes = self.bytes.saturating_add(buf.len());
        if self.bytes > self.max {
            return Err(std::io::Error::other("arguments over the size limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn parse_arguments_bounds() {
        assert_eq!(parse_arguments(""), Ok(json!({})));
        assert_eq!(parse_arguments("  \n"), Ok(json!({})));
        assert_eq!(
            parse_arguments(r#"{"a": "[[[[{"}"#),
            Ok(json!({"a": "[[[[{"}))
        );
        assert_eq!(parse_arguments("[1]"), Err(ArgumentsError::NotAnObject));
        assert!(matches!(
            parse_arguments("{not json"),
            Err(ArgumentsError::NotJson(_))
        ));
        let deep = format!(r#"{{"a": {}}}"#, nested(1000));
        assert_eq!(
            parse_arguments(&deep),
            Err(ArgumentsError::TooDeep {
                max: MAX_ARGUMENT_DEPTH
            })
        );
        let ok_deep = format!(r#"{{"a": {}}}"#, nested(MAX_ARGUMENT_DEPTH - 1));
        assert!(parse_arguments(&ok_deep).is_ok());
        let huge = format!(r#"{{"a": "{}"}}"#, "x".repeat(10 << 20));
        assert!(matches!(
            parse_arguments(&huge),
            Err(ArgumentsError::TooLarge {
                max: MAX_ARGUMENT_BYTES,
                ..
            })
        ));
    }

    #[test]
    fn value_shape_bounds() {
        assert_eq!(value_shape(&json!({"a": [1, {"b": "c"}]})), Ok(()));
        let mut v = json!(1);
        for _ in 0..MAX_ARGUMENT_DEPTH {
            v = json!([v]);
        }
        assert_eq!(value_shape(&v), Ok(()));
        let v = json!([v]);
        assert_eq!(value_shape(&v), Err(ValueShape::TooDeep));
        let big = json!({"a": "x".repeat(MAX_ARGUMENT_BYTES)});
        assert_eq!(value_shape(&big), Err(ValueShape::TooLarge));
    }
}
