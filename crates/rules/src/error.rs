//! Errors, each carrying the rule ID and `file:line:col` where it applies.

use rampart_core::Location;
use std::fmt;

/// Line starts of a source text, for turning many byte offsets into locations without
/// rescanning the text for each (a pack has hundreds of rules).
#[derive(Debug, Clone)]
pub(crate) struct LineIndex<'a> {
    src: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Indexes `src`.
    pub(crate) fn new(src: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { src, starts }
    }

    /// The same location as [`Location::from_span`] gives.
    pub(crate) fn location(&self, origin: &str, offset: usize) -> Location {
        let mut offset = offset.min(self.src.len());
        while !self.src.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset);
        let line_start = self
            .starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        Location {
            origin: origin.to_string(),
            line,
            col: self.src[line_start..offset].chars().count() + 1,
        }
    }
}

/// A problem found while reading or validating a rule pack.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PackError {
    /// The file could not be read.
    #[error("{origin}: cannot read rule pack: {message}")]
    Io {
        /// The path.
        origin: String,
        /// The OS error.
        message: String,
    },
    /// TOML syntax error, unknown field, wrong type or bad enum value.
    #[error("{location}: {message}")]
    Syntax {
        /// Where.
        location: Location,
        /// What the parser said.
        message: String,
    },
    /// A `schema_version` this build does not read.
    #[error("{location}: unsupported schema_version {found} (this build reads 1)")]
    SchemaVersion {
        /// Where.
        location: Location,
        /// The version found.
        found: u32,
    },
    /// Two rules share an ID.
    #[error("{location}: duplicate rule id {rule_id} (first defined at {first})")]
    DuplicateId {
        /// The second definition.
        location: Location,
        /// The ID.
        rule_id: String,
        /// The first definition.
        first: Location,
    },
    /// A rule (or the pack header) violates the schema.
    #[error("{location}: {}{message}", rule_id.as_ref().map(|r| format!("rule {r}: ")).unwrap_or_default())]
    Invalid {
        /// Where.
        location: Location,
        /// The rule, if the problem is in one.
        rule_id: Option<String>,
        /// What is wrong.
        message: String,
    },
}

/// One or more [`PackError`]s: validation reports every problem it finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackErrors(pub Vec<PackError>);

impl fmt::Display for PackErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PackErrors {}

/// A problem found while compiling packs into a matcher.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// A regex did not compile (syntax, or over the size limit).
    #[error("{location}: rule {rule_id}: bad regex: {message}")]
    Regex {
        /// Where.
        location: Location,
        /// The rule.
        rule_id: String,
        /// What the regex compiler said.
        message: String,
    },
    /// A regex matches the empty string, which would fire on every input.
    #[error("{location}: rule {rule_id}: regex matches the empty string")]
    EmptyMatch {
        /// Where.
        location: Location,
        /// The rule.
        rule_id: String,
    },
    /// A pattern folds to nothing (e.g. only invisible characters).
    #[error("{location}: rule {rule_id}: pattern {pattern:?} is empty after folding")]
    EmptyPattern {
        /// Where.
        location: Location,
        /// The rule.
        rule_id: String,
        /// The pattern as written.
        pattern: String,
    },
    /// The same rule ID in two packs.
    #[error("{location}: duplicate rule id {rule_id} across packs (first defined at {first})")]
    DuplicateId {
        /// The second definition.
        location: Location,
        /// The ID.
        rule_id: String,
        /// The first definition.
        first: Location,
    },
    /// The multi-pattern automaton could not be built.
    #[error("cannot build literal automaton: {0}")]
    Automaton(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_index_agrees_with_from_span() {
        let src = "a\nbé\n\nxyz\n";
        let idx = LineIndex::new(src);
        for off in 0..=src.len() + 2 {
            assert_eq!(
                idx.location("f", off),
                Location::from_span("f", src, off),
                "{off}"
            );
        }
    }
}
