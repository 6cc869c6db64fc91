//! The types of a rule that only rule packs have: its matcher kind and its scope.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The kind of a rule's matcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// Alternative literal strings.
    Literal,
    /// One linear-time regular expression.
    Regex,
    /// Several keywords that must co-occur within a window.
    KeywordSet,
}

/// Which segments a rule applies to.
///
/// Some phrasings are attacks only inside data: "do not tell the user" or "AI assistant:
/// before you answer" are injections in a tool result or retrieved document, but ordinary
/// when the user writes them to the assistant.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RuleScope {
    /// Every segment (the default).
    #[default]
    Any,
    /// Data channels only: segments whose role is `tool` or `retrieved`.
    Data,
}

impl RuleScope {
    /// The snake_case name, e.g. `"data"`.
    pub fn name(self) -> &'static str {
        match self {
            RuleScope::Any => "any",
            RuleScope::Data => "data",
        }
    }
}

impl fmt::Display for RuleScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
