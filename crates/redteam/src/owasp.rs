//! The OWASP Top 10 for LLM Applications (2025) report (`docs/reports/OWASP_LLM_Top10.md`,
//! written by `rampart owasp`).
//!
//! It combines what is computed with what is written by hand:
//! - computed: which rules of the given packs carry each id (`owasp = [...]` in the packs),
//!   which layer kinds and capabilities address it (`Registry::owasp`), detection and
//!   false-positive rates of the rules-only and the default pipeline on the built-in sets
//!   ([`measure`], over the attack categories the notes name as evidence), and the red-team
//!   [`CoverageMatrix`] when there is one;
//! - written: the coverage claim, threat model, residual risk and scope of each risk, in the
//!   [`Notes`] (`docs/reports/owasp_notes.toml`, embedded as [`NOTES_SRC`]).
//!
//! A claim is lowered to none when no rule, layer or capability carries the id, and from full
//! to partial when a measured rate is under the risk's bar. The report is deterministic apart
//! from its date line, and names the command that made it.
//!
//! ```
//! use rampart_core::Registry;
//! use rampart_redteam::owasp::{self, Inputs, Notes};
//! use rampart_rules::RulePack;
//!
//! let notes = Notes::parse(owasp::NOTES_SRC, owasp::NOTES_ORIGIN)?;
//! let packs = [RulePack::default_pack()?];
//! let registry = Registry::default();
//! let report = owasp::render(&Inputs {
//!     notes: &notes,
//!     packs: &packs,
//!     protections: &registry.owasp(),
//!     measured: None,
//!     matrix: None,
//!     command: "rampart owasp --no-measure",
//!     date: "2026-11-26",
//! });
//! assert!(report.starts_with("# OWASP Top 10 for LLM Applications (2025)"));
//! assert!(report.contains("## LLM01: Prompt Injection\n\n**Coverage: partial.**"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::report::CoverageMatrix;
use rampart_core::OwaspEntry;
use rampart_rules::RulePack;

mod matrix;
mod measure;
mod notes;
mod render;

pub use matrix::{FAMILY_FLOOR, parse_matrix};
pub use measure::{BenignResult, MEASURED, Measured, MeasuredPipelines, SetResult, measure};
pub use notes::{
    Changes2023, Cited, Level, NOTES_VERSION, New2025, Notes, NotesProblem, RiskNotes, Row2023,
    ThreatModel,
};
pub use render::{compact_ids, render};

/// The notes Rampart ships (`docs/reports/owasp_notes.toml`).
pub const NOTES_SRC: &str = include_str!("../../../docs/reports/owasp_notes.toml");
/// The origin [`NOTES_SRC`] is named by in errors.
pub const NOTES_ORIGIN: &str = "<embedded>/docs/reports/owasp_notes.toml";
/// Where the notes live in the repository (named in the report).
pub const NOTES_PATH: &str = "docs/reports/owasp_notes.toml";

/// Everything the report is made of.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The hand-written notes.
    pub notes: &'a Notes,
    /// Every rule pack that ships: each rule's `owasp` ids are facts of the report.
    pub packs: &'a [RulePack],
    /// Layer kinds and capabilities with the risks they address (`Registry::owasp`).
    pub protections: &'a [OwaspEntry<'a>],
    /// Measured figures, when measured ([`measure`]).
    pub measured: Option<&'a Measured>,
    /// The red-team coverage matrix, when given.
    pub matrix: Option<&'a CoverageMatrix>,
    /// The command line that made the report.
    pub command: &'a str,
    /// The date (YYYY-MM-DD): the only part that changes from run to run.
    pub date: &'a str,
}

/// Why the report could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OwaspError {
    /// The notes are not valid TOML of the notes' schema.
    #[error("{origin}")]
    NotesSyntax {
        /// Where the notes came from.
        origin: String,
        /// What the parser said.
        #[source]
        source: toml::de::Error,
    },
    /// The notes parse but break a rule of [`Notes::parse`].
    #[error("{origin}")]
    NotesInvalid {
        /// Where the notes came from.
        origin: String,
        /// What is wrong.
        #[source]
        problem: NotesProblem,
    },
    /// The matrix is not a coverage matrix.
    #[error("{origin}")]
    MatrixSyntax {
        /// Where the matrix came from.
        origin: String,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// The matrix is of another version.
    #[error(
        "{origin}: coverage matrix version {version} (this rampart reads version {})",
        crate::report::MATRIX_VERSION
    )]
    MatrixVersion {
        /// Where the matrix came from.
        origin: String,
        /// Its version.
        version: u32,
    },
    /// A dataset the notes name could not be loaded.
    #[error("loading {role} dataset {dataset}")]
    Load {
        /// `evidence` or `benign`.
        role: &'static str,
        /// The dataset as the notes name it.
        dataset: String,
        /// Why.
        #[source]
        source: rampart_datasets::LoadError,
    },
    /// An evidence set (`DATASET:CATEGORY`) has no attack rows.
    #[error("evidence {set}: no attack rows of that category")]
    NoEvidenceRows {
        /// The set.
        set: String,
    },
    /// A pipeline refused a row.
    #[error("scanning an evidence row")]
    Scan {
        /// Why.
        #[source]
        source: rampart_core::InputError,
    },
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

    use super::*;
    use rampart_core::{Owasp, Registry};
    use std::collections::BTreeMap;

    /// An error and its sources, joined as the CLI prints them.
    pub(crate) fn chain(e: &dyn std::error::Error) -> String {
        let mut s = e.to_string();
        let mut src = e.source();
        while let Some(inner) = src {
            s = format!("{s}: {inner}");
            src = inner.source();
        }
        s
    }

    /// A coverage matrix in `rampart redteam report`'s schema (version 1) whose weakest
    /// family (`encoding` on `cascade`) has TPR `low_tpr`.
    pub(crate) fn matrix_json(low_tpr: f64) -> String {
        include_str!("../testdata/owasp_matrix.json").replacen(
            "\"tpr\": 0.41",
            &format!("\"tpr\": {low_tpr}"),
            1,
        )
    }

    /// With the core registry (rules and fuse layers, every capability) and the default
    /// pack: the measured rows, the matrix summary and the lowering of a full claim.
    #[test]
    fn the_report_shows_measured_rows_and_the_matrix_and_lowers_a_weak_full_claim() {
        let full = NOTES_SRC.replacen(
            "id = \"LLM01\"\nclaim = \"partial\"",
            "id = \"LLM01\"\nclaim = \"full\"",
            1,
        );
        let notes = Notes::parse(&full, "n.toml").unwrap();
        let packs = [RulePack::default_pack().unwrap()];
        let registry = Registry::default();
        let protections = registry.owasp();
        let set = "Handwritten_Attacks_v1:system_prompt_extraction".to_owned();
        let measured = Measured {
            sets: BTreeMap::from([(
                set.clone(),
                SetResult {
                    set,
                    n: 40,
                    flagged: vec![10, 30],
                    by_risk_rules: BTreeMap::from([(Owasp::Llm07, 8)]),
                },
            )]),
            benign: vec![BenignResult {
                set: "Clean_Benign_Corpus_v1".to_owned(),
                n: 200,
                flagged: vec![0, 3],
            }],
        };
        let report = |matrix: &CoverageMatrix| {
            render(&Inputs {
                notes: &notes,
                packs: &packs,
                protections: &protections,
                measured: Some(&measured),
                matrix: Some(matrix),
                command: "rampart owasp --matrix fixture.json",
                date: "2026-11-26",
            })
        };
        let weak = parse_matrix(&matrix_json(0.41), "m.json").unwrap();
        let r = report(&weak);
        assert!(r.contains("## LLM01: Prompt Injection\n\n**Coverage: partial.**"));
        assert!(r.contains(
            "(claimed full, lowered: under the 95 % bar: red-team family encoding on cascade (41.0 %).)"
        ));
        assert!(r.contains(
            "| Handwritten_Attacks_v1:system_prompt_extraction | 40 | 25.0 % | 75.0 % | 20.0 % |"
        ));
        assert!(r.contains("| Clean_Benign_Corpus_v1 | 200 | 0.0 % | 1.5 % |"));
        assert!(r.contains("- pipeline `judge`: not_configured: no judge model"));
        let strong = parse_matrix(&matrix_json(0.97), "m.json").unwrap();
        assert!(report(&strong).contains("## LLM01: Prompt Injection\n\n**Coverage: full.**"));
    }

    #[test]
    fn compact_ids_collapses_runs_per_prefix() {
        let ids = [
            "SYS_015", "SYS_016", "SYS_017", "SYS_027", "CTRL_001", "ROLE_202", "ROLE_203",
        ];
        assert_eq!(
            compact_ids(ids),
            "CTRL_001, ROLE_202–203, SYS_015–017, SYS_027"
        );
    }
}
