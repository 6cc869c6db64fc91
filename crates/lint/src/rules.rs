//! The rules as data (`crates/lint/rules.toml`): id, name, severity, why, how to fix, and the
//! examples that must and must not fire.

use serde::{Deserialize, Serialize};

/// The rule file, embedded.
pub const RULES_TOML: &str = include_str!("../rules.toml");

/// A rule's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RuleId {
    /// A suppression comment without a reason.
    RL000,
    /// Unguarded model input.
    RL001,
    /// Guard after the fact, ignored, or partial.
    RL002,
    /// Raw prompt in logs.
    RL003,
    /// Model output to a dangerous sink.
    RL004,
    /// Ungoverned tool.
    RL005,
    /// Secret in a prompt.
    RL006,
}

impl RuleId {
    /// The id as written (`RL001`).
    pub fn as_str(self) -> &'static str {
        match self {
            RuleId::RL000 => "RL000",
            RuleId::RL001 => "RL001",
            RuleId::RL002 => "RL002",
            RuleId::RL003 => "RL003",
            RuleId::RL004 => "RL004",
            RuleId::RL005 => "RL005",
            RuleId::RL006 => "RL006",
        }
    }

    /// Parses `RL001`.
    pub fn parse(s: &str) -> Option<RuleId> {
        [
            RuleId::RL000,
            RuleId::RL001,
            RuleId::RL002,
            RuleId::RL003,
            RuleId::RL004,
            RuleId::RL005,
            RuleId::RL006,
        ]
        .into_iter()
        .find(|r| r.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

impl std::fmt::Display for RuleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth a look.
    Note,
    /// Likely a problem.
    Warning,
    /// A hole.
    Error,
}

impl Severity {
    /// The snake_case name (also SARIF's `level`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One example of a rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// Whether the rule must fire on it.
    pub fires: bool,
    /// Python source.
    pub code: String,
    /// Tools the project's policy lists, for RL005 examples (none: no policy).
    #[serde(default)]
    pub policy_tools: Option<Vec<String>>,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Id.
    pub id: RuleId,
    /// Short name.
    pub name: String,
    /// Default severity.
    pub severity: Severity,
    /// Why it matters.
    pub why: String,
    /// How to fix it.
    pub fix: String,
    /// Examples.
    #[serde(default, rename = "example")]
    pub examples: Vec<Example>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    version: u32,
    #[serde(rename = "rule")]
    rules: Vec<Rule>,
}

/// The rule set.
#[derive(Debug, Clone)]
pub struct Rules {
    rules: Vec<Rule>,
}

/// The suppression rule, built in (it is about the comments, not the code).
fn suppression_rule() -> Rule {
    Rule {
        id: RuleId::RL000,
        name: "suppression-without-reason".into(),
        severity: Severity::Error,
        why: "A suppression must say why the finding does not apply, so that a reviewer can \
              check the reason; one without a reason suppresses nothing."
            .into(),
        fix: "Write the reason after `--`: `# rampart: ignore[RL003] -- the value is a hash`."
            .into(),
        examples: Vec::new(),
    }
}

impl Rules {
    /// The embedded rules.
    pub fn embedded() -> Result<Rules, String> {
        let f: RuleFile = toml::from_str(RULES_TOML).map_err(|e| e.to_string())?;
        if f.version != 1 {
            return Err(format!(
                "rules.toml version {} (this build reads 1)",
                f.version
            ));
        }
        let mut rules = vec![suppression_rule()];
        rules.extend(f.rules);
        Ok(Rules { rules })
    }

    /// Every rule, by id.
    pub fn all(&self) -> &[Rule] {
        &self.rules
    }

    /// One rule.
    pub fn get(&self, id: RuleId) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// docs/LINTER_RULES.md.
    pub fn markdown(&self) -> String {
        let mut s = String::from(
            "# `rampart lint` rules\n\n<!-- Generated from crates/lint/rules.toml by \
             `rampart lint --rules-doc`; do not edit. -->\n\nSuppress a finding on its line \
             or the line above with `# rampart: ignore[RL003] -- the reason`; a suppression \
             without a reason is itself a finding (RL000).\n\n| id | name | severity |\n|---|---|---|\n",
        );
        for r in &self.rules {
            s.push_str(&format!(
                "| [{}](#{}) | {} | {} |\n",
                r.id,
                r.id.as_str().to_ascii_lowercase(),
                r.name,
                r.severity.as_str()
            ));
        }
        for r in &self.rules {
            s.push_str(&format!(
                "\n## {}\n\n**{}**, {}.\n\n{}\n\n**Fix.** {}\n",
                r.id,
                r.name,
                r.severity.as_str(),
                r.why,
                r.fix
            ));
            for (i, e) in r.examples.iter().enumerate() {
                let what = if e.fires { "fires" } else { "does not fire" };
                let policy = e.policy_tools.as_ref().map_or(String::new(), |t| {
                    format!(" (tool policy lists: {})", t.join(", "))
                });
                s.push_str(&format!(
                    "\nExample {} ({what}){policy}:\n\n```python\n{}\n```\n",
                    i + 1,
                    e.code.trim()
                ));
            }
        }
        s
    }
}
