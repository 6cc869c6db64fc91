//! The scoring vocabulary every layer shares: categories, strengths, risk classes, and the
//! OWASP Top 10 (2025) ids that rules, layers and capabilities cite.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The category of a rule, fixed by its ID prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// `SYS_`: chat-template / system-prompt markers, delimiter spoofing, prompt extraction.
    SystemMarker,
    /// `CTRL_`: instruction overrides and mode switches.
    ControlPhrase,
    /// `CRED_`: credential-like tokens.
    CredentialLike,
    /// `BND_`: weak boundary-testing phrases.
    BoundaryTesting,
    /// `ROLE_`: fake turns, fake tool results, impersonated authority.
    RoleConfusion,
    /// `ENC_`: encoding and obfuscation.
    EncodingObfuscation,
    /// `OTH_`: exfiltration and everything else.
    Other,
}

impl Category {
    /// All categories, in a stable order.
    pub const ALL: [Category; 7] = [
        Category::SystemMarker,
        Category::ControlPhrase,
        Category::CredentialLike,
        Category::BoundaryTesting,
        Category::RoleConfusion,
        Category::EncodingObfuscation,
        Category::Other,
    ];

    /// The rule-ID prefix (without the underscore), e.g. `"CTRL"`.
    pub fn prefix(self) -> &'static str {
        match self {
            Category::SystemMarker => "SYS",
            Category::ControlPhrase => "CTRL",
            Category::CredentialLike => "CRED",
            Category::BoundaryTesting => "BND",
            Category::RoleConfusion => "ROLE",
            Category::EncodingObfuscation => "ENC",
            Category::Other => "OTH",
        }
    }

    /// The snake_case name, e.g. `"control_phrase"`.
    pub fn name(self) -> &'static str {
        match self {
            Category::SystemMarker => "system_marker",
            Category::ControlPhrase => "control_phrase",
            Category::CredentialLike => "credential_like",
            Category::BoundaryTesting => "boundary_testing",
            Category::RoleConfusion => "role_confusion",
            Category::EncodingObfuscation => "encoding_obfuscation",
            Category::Other => "other",
        }
    }

    /// The category whose prefix is `prefix` (e.g. `"SYS"`).
    pub fn from_prefix(prefix: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.prefix() == prefix)
    }

    /// Parses a rule ID of the form `PREFIX_NNN` (three or more digits) and returns its category.
    pub fn from_rule_id(id: &str) -> Option<Category> {
        let (prefix, num) = id.split_once('_')?;
        if num.len() < 3 || !num.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Category::from_prefix(prefix)
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How strongly a rule hit indicates an attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strength {
    /// Double-edged: appears in attacks and benign prompts alike. Never escalates alone.
    Weak,
    /// A clear indicator.
    Strong,
}

impl Strength {
    /// Both strengths.
    pub const ALL: [Strength; 2] = [Strength::Weak, Strength::Strong];

    /// The snake_case name (as serialized): `"weak"` or `"strong"`.
    pub fn name(self) -> &'static str {
        match self {
            Strength::Weak => "weak",
            Strength::Strong => "strong",
        }
    }
}

impl fmt::Display for Strength {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A risk class: the severity hint of a rule, and the risk of a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskClass {
    /// Nothing (or only weak signals) found.
    LowRisk,
    /// A clear signal, not conclusive.
    MediumRisk,
    /// High-confidence malicious, or several independent clear signals.
    HighRisk,
}

impl RiskClass {
    /// Every risk class, lowest first.
    pub const ALL: [RiskClass; 3] = [
        RiskClass::LowRisk,
        RiskClass::MediumRisk,
        RiskClass::HighRisk,
    ];

    /// The snake_case name, e.g. `"high_risk"`.
    pub fn name(self) -> &'static str {
        match self {
            RiskClass::LowRisk => "low_risk",
            RiskClass::MediumRisk => "medium_risk",
            RiskClass::HighRisk => "high_risk",
        }
    }
}

impl fmt::Display for RiskClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A risk of the OWASP Top 10 for LLM Applications, 2025 edition.
///
/// Written `"LLM01"` … `"LLM10"` in rule packs; any other id is an error, so a pack cannot
/// cite a risk the list does not have (or the 2023 numbering, which differs: see
/// [`Owasp::title`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Owasp {
    /// LLM01:2025 Prompt Injection.
    #[serde(rename = "LLM01")]
    Llm01,
    /// LLM02:2025 Sensitive Information Disclosure.
    #[serde(rename = "LLM02")]
    Llm02,
    /// LLM03:2025 Supply Chain.
    #[serde(rename = "LLM03")]
    Llm03,
    /// LLM04:2025 Data and Model Poisoning.
    #[serde(rename = "LLM04")]
    Llm04,
    /// LLM05:2025 Improper Output Handling.
    #[serde(rename = "LLM05")]
    Llm05,
    /// LLM06:2025 Excessive Agency.
    #[serde(rename = "LLM06")]
    Llm06,
    /// LLM07:2025 System Prompt Leakage.
    #[serde(rename = "LLM07")]
    Llm07,
    /// LLM08:2025 Vector and Embedding Weaknesses.
    #[serde(rename = "LLM08")]
    Llm08,
    /// LLM09:2025 Misinformation.
    #[serde(rename = "LLM09")]
    Llm09,
    /// LLM10:2025 Unbounded Consumption.
    #[serde(rename = "LLM10")]
    Llm10,
}

impl Owasp {
    /// The ten, in list order.
    pub const ALL: [Owasp; 10] = [
        Owasp::Llm01,
        Owasp::Llm02,
        Owasp::Llm03,
        Owasp::Llm04,
        Owasp::Llm05,
        Owasp::Llm06,
        Owasp::Llm07,
        Owasp::Llm08,
        Owasp::Llm09,
        Owasp::Llm10,
    ];

    /// The id as written in packs, e.g. `"LLM01"`.
    pub fn id(self) -> &'static str {
        match self {
            Owasp::Llm01 => "LLM01",
            Owasp::Llm02 => "LLM02",
            Owasp::Llm03 => "LLM03",
            Owasp::Llm04 => "LLM04",
            Owasp::Llm05 => "LLM05",
            Owasp::Llm06 => "LLM06",
            Owasp::Llm07 => "LLM07",
            Owasp::Llm08 => "LLM08",
            Owasp::Llm09 => "LLM09",
            Owasp::Llm10 => "LLM10",
        }
    }

    /// The risk's name in the 2025 list, e.g. `"Prompt Injection"`.
    pub fn title(self) -> &'static str {
        match self {
            Owasp::Llm01 => "Prompt Injection",
            Owasp::Llm02 => "Sensitive Information Disclosure",
            Owasp::Llm03 => "Supply Chain",
            Owasp::Llm04 => "Data and Model Poisoning",
            Owasp::Llm05 => "Improper Output Handling",
            Owasp::Llm06 => "Excessive Agency",
            Owasp::Llm07 => "System Prompt Leakage",
            Owasp::Llm08 => "Vector and Embedding Weaknesses",
            Owasp::Llm09 => "Misinformation",
            Owasp::Llm10 => "Unbounded Consumption",
        }
    }

    /// The risk whose id is `id` (`"LLM01"` … `"LLM10"`).
    pub fn from_id(id: &str) -> Option<Owasp> {
        Owasp::ALL.into_iter().find(|o| o.id() == id)
    }
}

impl fmt::Display for Owasp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}
