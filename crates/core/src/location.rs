//! Positions in configuration and rule-pack files, for errors that say where.

use std::fmt;

/// A position in a configuration or rule-pack file: `file:line:col`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// File path, or the embedded marker for the default pack.
    pub origin: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub col: usize,
}

impl Location {
    /// The location of byte offset `offset` in `src`.
    pub fn from_span(origin: &str, src: &str, offset: usize) -> Location {
        let mut offset = offset.min(src.len());
        while !src.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &src[..offset];
        let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        Location {
            origin: origin.to_string(),
            line,
            col,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.origin, self.line, self.col)
    }
}
