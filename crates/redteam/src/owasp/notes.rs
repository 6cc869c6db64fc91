//! The hand-written part of the report: `docs/reports/owasp_notes.toml`.

use super::OwaspError;
use rampart_core::Owasp;
use serde::Deserialize;

/// The only version of the notes this build reads.
pub const NOTES_VERSION: u32 = 1;

/// A coverage level. Ordered: none < partial < full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Nothing in Rampart addresses the risk.
    None,
    /// Some vectors are addressed, others are not.
    Partial,
    /// The vectors in scope are addressed and the measured rates meet the bar.
    Full,
}

impl Level {
    /// `none`, `partial` or `full`, as written in the notes and the report.
    pub fn name(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Partial => "partial",
            Level::Full => "full",
        }
    }
}

/// The notes file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notes {
    /// [`NOTES_VERSION`].
    pub version: u32,
    /// Benign datasets for the false-positive rates.
    #[serde(default)]
    pub benign: Vec<String>,
    /// One entry per risk of the list.
    pub risks: Vec<RiskNotes>,
    /// How the 2023 list maps onto the 2025 one.
    pub changes_2023: Changes2023,
}

/// The hand-written part of one risk.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RiskNotes {
    /// The risk.
    pub id: Owasp,
    /// The coverage claimed (lowered by the report when the facts do not carry it).
    pub claim: Level,
    /// A measured rate under this lowers a full claim to partial.
    pub min_tpr: Option<f64>,
    /// Why the claim holds.
    pub why: String,
    /// Attack sets that exercise the risk, `DATASET:CATEGORY`.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Whether the red-team coverage matrix is evidence for the risk.
    #[serde(default)]
    pub matrix: bool,
    /// Figures measured elsewhere, with the command that measures them.
    #[serde(default)]
    pub cited: Vec<Cited>,
    /// What stays uncovered.
    pub residual: String,
    /// What Rampart does not try to address.
    pub out_of_scope: String,
    /// Required when the claim is above none.
    pub threat_model: Option<ThreatModel>,
}

/// A figure measured elsewhere.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cited {
    /// The figure, in words.
    pub figure: String,
    /// The command that measures it.
    pub command: String,
}

/// The threat model of a covered risk.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreatModel {
    /// How the attack arrives.
    pub vectors: String,
    /// What Rampart does about it.
    pub mitigation: String,
    /// How it is detected.
    pub detection: String,
    /// What happens when it is.
    pub response: String,
}

/// The 2023 list and the 2025 list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Changes2023 {
    /// The section's opening paragraph.
    pub intro: String,
    /// One row per 2023 risk.
    pub rows: Vec<Row2023>,
    /// Risks new in 2025.
    #[serde(default)]
    pub new_in_2025: Vec<New2025>,
}

/// A 2023 risk and where it went.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row2023 {
    /// Its 2023 id (`LLM07`).
    pub id_2023: String,
    /// Its 2023 name.
    pub name_2023: String,
    /// The 2025 risks it became.
    pub now: Vec<Owasp>,
    /// A note.
    pub note: String,
}

/// A risk new in 2025.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct New2025 {
    /// The risk.
    pub id: Owasp,
    /// A note.
    pub note: String,
}

impl Notes {
    /// Parses and checks the notes: version 1, each of the ten risks exactly once, a threat
    /// model for every risk claimed as covered, evidence written `DATASET:CATEGORY`.
    /// `origin` names the source in errors.
    pub fn parse(src: &str, origin: &str) -> Result<Notes, OwaspError> {
        let invalid = |problem| OwaspError::NotesInvalid {
            origin: origin.to_owned(),
            problem,
        };
        let notes: Notes = toml::from_str(src).map_err(|source| OwaspError::NotesSyntax {
            origin: origin.to_owned(),
            source,
        })?;
        if notes.version != NOTES_VERSION {
            return Err(invalid(NotesProblem::Version(notes.version)));
        }
        for o in Owasp::ALL {
            let n = notes.risks.iter().filter(|r| r.id == o).count();
            if n != 1 {
                return Err(invalid(NotesProblem::NotOnce { id: o, found: n }));
            }
        }
        for r in &notes.risks {
            if r.claim > Level::None && r.threat_model.is_none() {
                return Err(invalid(NotesProblem::NoThreatModel {
                    id: r.id,
                    claim: r.claim,
                }));
            }
            if let Some(t) = r.min_tpr
                && !(0.0..=1.0).contains(&t)
            {
                return Err(invalid(NotesProblem::MinTpr { id: r.id, value: t }));
            }
            if let Some(e) = r.evidence.iter().find(|e| split_evidence(e).is_none()) {
                return Err(invalid(NotesProblem::Evidence {
                    id: r.id,
                    evidence: e.clone(),
                }));
            }
        }
        Ok(notes)
    }

    /// The notes of one risk.
    pub fn risk(&self, id: Owasp) -> Option<&RiskNotes> {
        self.risks.iter().find(|r| r.id == id)
    }
}

/// What is wrong with notes that parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum NotesProblem {
    /// Another version than [`NOTES_VERSION`].
    #[error("version {0} (this rampart reads version {NOTES_VERSION})")]
    Version(u32),
    /// A risk missing or repeated.
    #[error("risk {id} must appear exactly once in [[risks]], found {found}")]
    NotOnce {
        /// The risk.
        id: Owasp,
        /// How often it appears.
        found: usize,
    },
    /// A covered risk without a threat model.
    #[error("risk {id} claims {} coverage but has no [risks.threat_model]", claim.name())]
    NoThreatModel {
        /// The risk.
        id: Owasp,
        /// Its claim.
        claim: Level,
    },
    /// `min_tpr` outside 0..=1.
    #[error("risk {id}: min_tpr must be in 0..=1, got {value}")]
    MinTpr {
        /// The risk.
        id: Owasp,
        /// The value given.
        value: f64,
    },
    /// Evidence not written `DATASET:CATEGORY`.
    #[error("risk {id}: evidence {evidence:?} must be DATASET:CATEGORY")]
    Evidence {
        /// The risk.
        id: Owasp,
        /// The evidence as written.
        evidence: String,
    },
}

/// `DATASET:CATEGORY` → (dataset, category), both non-empty.
pub(crate) fn split_evidence(e: &str) -> Option<(&str, &str)> {
    e.split_once(':')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

    use super::*;
    use crate::owasp::tests::chain;
    use crate::owasp::{NOTES_ORIGIN, NOTES_SRC};

    #[test]
    fn the_embedded_notes_cover_the_ten_risks_and_the_2023_list() {
        let notes = Notes::parse(NOTES_SRC, NOTES_ORIGIN).unwrap();
        assert_eq!(notes.risks.len(), 10);
        assert_eq!(notes.changes_2023.rows.len(), 10);
    }

    #[test]
    fn notes_with_an_unknown_or_missing_risk_are_refused() {
        let err = |e: OwaspError| chain(&e);
        let bad = NOTES_SRC.replacen("id = \"LLM09\"", "id = \"LLM11\"", 1);
        let e = err(Notes::parse(&bad, "n.toml").unwrap_err());
        assert!(e.contains("unknown variant `LLM11`"), "{e}");
        let dup = NOTES_SRC.replacen("id = \"LLM09\"", "id = \"LLM08\"", 1);
        let e = err(Notes::parse(&dup, "n.toml").unwrap_err());
        assert!(e.contains("LLM08 must appear exactly once"), "{e}");
        let typo = NOTES_SRC.replacen("residual = ", "residul = ", 1);
        assert!(Notes::parse(&typo, "n.toml").is_err());
    }
}
