//! `rampart owasp`: the OWASP Top 10 for LLM Applications (2025) report,
//! `docs/reports/OWASP_LLM_Top10.md`. The report is made by `rampart_redteam::owasp`; this
//! command gathers its inputs (the shipped rule packs, the binary's layer registry, the notes,
//! the matrix, the measurements with the binary's pipelines) and writes it.

use anyhow::{Context, Result};
use clap::Args;
use rampart_core::Pipeline;
use rampart_redteam::owasp::{self, Inputs, MeasuredPipelines, Notes};
use rampart_rules::RulePack;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// `rampart owasp` options.
#[derive(Debug, Args)]
pub struct OwaspArgs {
    /// The red-team coverage matrix (`rampart redteam report`'s coverage_matrix.json), cited
    /// as evidence where the notes say so.
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// Write the report to FILE (default: standard output).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Hand-written notes (TOML). Default: the embedded docs/reports/owasp_notes.toml.
    #[arg(long, value_name = "FILE")]
    pub notes: Option<PathBuf>,
    /// Do not scan the built-in datasets (faster; the report then has no measured rates).
    #[arg(long)]
    pub no_measure: bool,
}

/// Every pack Rampart ships: the default pack, the conversation layer's history pack and the
/// relational layer's assistant-voice pack.
pub fn shipped_packs() -> Result<Vec<RulePack>> {
    let sources = [
        (
            rampart_rules::DEFAULT_PACK_SRC,
            rampart_rules::DEFAULT_PACK_ORIGIN,
        ),
        (
            rampart_conversation::HISTORY_PACK_SRC,
            rampart_conversation::HISTORY_PACK_ORIGIN,
        ),
        (
            rampart_relational::local::VOICE_PACK_SRC,
            "relational/rules/voice.toml",
        ),
    ];
    sources
        .iter()
        .map(|(src, origin)| RulePack::parse(src, origin).map_err(anyhow::Error::from))
        .collect()
}

/// Scans the notes' evidence and benign sets with the rules-only and the default pipeline.
fn measure(notes: &Notes, packs: &[RulePack]) -> Result<owasp::Measured> {
    let rules = rampart_rules::rules_pipeline().context("building the rules-only pipeline")?;
    let default = Pipeline::from_config_with(crate::default_config()?, &rampart::registry())
        .context("building the default pipeline")?;
    let pipelines = MeasuredPipelines {
        rules: &rules,
        default: &default,
    };
    let data_dir = rampart_datasets::default_data_dir();
    Ok(owasp::measure(notes, packs, &pipelines, &data_dir)?)
}

fn command_line(args: &OwaspArgs) -> String {
    let mut c = String::from("rampart owasp");
    if let Some(m) = &args.matrix {
        let _ = write!(c, " --matrix {}", m.display());
    }
    if let Some(n) = &args.notes {
        let _ = write!(c, " --notes {}", n.display());
    }
    if args.no_measure {
        c.push_str(" --no-measure");
    }
    if let Some(o) = &args.out {
        let _ = write!(c, " --out {}", o.display());
    }
    c
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Runs `rampart owasp`.
pub fn run(args: &OwaspArgs) -> Result<u8> {
    let notes = match &args.notes {
        Some(p) => Notes::parse(&read(p)?, &p.display().to_string())?,
        None => Notes::parse(owasp::NOTES_SRC, owasp::NOTES_ORIGIN)?,
    };
    let matrix = match &args.matrix {
        Some(p) => Some(owasp::parse_matrix(&read(p)?, &p.display().to_string())?),
        None => None,
    };
    let packs = shipped_packs()?;
    let registry = rampart::registry();
    let protections = registry.owasp();
    let measured = if args.no_measure {
        None
    } else {
        Some(measure(&notes, &packs)?)
    };
    let now = rampart_core::timefmt::now_rfc3339();
    let date = now.get(..10).unwrap_or(&now);
    let command = command_line(args);
    let report = owasp::render(&Inputs {
        notes: &notes,
        packs: &packs,
        protections: &protections,
        measured: measured.as_ref(),
        matrix: matrix.as_ref(),
        command: &command,
        date,
    });
    match &args.out {
        Some(p) => {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(p, &report).with_context(|| format!("writing {}", p.display()))?;
            eprintln!("rampart owasp: wrote {}", p.display());
        }
        None => out!("{report}")?,
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

    use super::*;
    use rampart_core::{Owasp, Protection};
    use rampart_redteam::owasp::{BenignResult, Measured, SetResult, render};
    use rampart_redteam::report::CoverageMatrix;
    use std::collections::{BTreeMap, BTreeSet};

    /// A coverage matrix in `rampart redteam report`'s schema (version 1) whose weakest
    /// family (`encoding` on `cascade`) has TPR `low_tpr` (the fixture of rampart-redteam's
    /// own tests).
    fn matrix_json(low_tpr: f64) -> String {
        include_str!("../../redteam/testdata/owasp_matrix.json").replacen(
            "\"tpr\": 0.41",
            &format!("\"tpr\": {low_tpr}"),
            1,
        )
    }

    fn measured() -> Measured {
        let mut m = Measured::default();
        let set = "Handwritten_Attacks_v1:system_prompt_extraction".to_string();
        m.sets.insert(
            set.clone(),
            SetResult {
                set,
                n: 12,
                flagged: vec![3, 10],
                by_risk_rules: BTreeMap::from([(Owasp::Llm01, 3), (Owasp::Llm07, 3)]),
            },
        );
        m.benign.push(BenignResult {
            set: "Clean_Benign_Corpus_v1".into(),
            n: 284,
            flagged: vec![1, 1],
        });
        m
    }

    fn report(notes: &Notes, matrix: Option<&CoverageMatrix>, date: &str) -> String {
        let packs = shipped_packs().unwrap();
        let registry = rampart::registry();
        let protections = registry.owasp();
        let m = measured();
        render(&Inputs {
            notes,
            packs: &packs,
            protections: &protections,
            measured: Some(&m),
            matrix,
            command: "rampart owasp --matrix fixture.json",
            date,
        })
    }

    /// The section of `report` about `id`: from its heading to the next one.
    fn section(report: &str, id: Owasp) -> String {
        let head = format!("## {id}: {}\n", id.title());
        let start = report.find(&head).unwrap();
        let rest = &report[start + head.len()..];
        let end = rest.find("\n## ").map_or(rest.len(), |i| i + 1);
        rest[..end].to_string()
    }

    fn coverage_line(report: &str, id: Owasp) -> String {
        section(report, id)
            .lines()
            .find(|l| l.starts_with("**Coverage:"))
            .unwrap()
            .to_string()
    }

    /// Every rule of every shipped pack names the OWASP risks it addresses: a rule added to
    /// any of them without `owasp` (and no pack default) fails here.
    #[test]
    fn every_rule_of_every_shipped_pack_has_an_owasp_id() {
        let packs = shipped_packs().unwrap();
        assert_eq!(packs.len(), 3);
        let missing: Vec<String> = packs
            .iter()
            .flat_map(|p| {
                p.rules
                    .iter()
                    .filter(|r| r.owasp.is_empty())
                    .map(move |r| format!("{}:{}", p.name, r.id))
            })
            .collect();
        assert!(missing.is_empty(), "rules without an OWASP id: {missing:?}");
    }

    /// The rules layer claims what its default pack's rules address, no more and no less.
    #[test]
    fn the_rules_layer_claims_the_union_of_the_default_packs_ids() {
        let union: BTreeSet<Owasp> = RulePack::default_pack()
            .unwrap()
            .rules
            .iter()
            .flat_map(|r| r.owasp.iter().copied())
            .collect();
        let registry = rampart::registry();
        let rules_layer = registry
            .owasp()
            .into_iter()
            .find(|p| p.protection == Protection::Layer(rampart_rules::RULES_KIND))
            .unwrap();
        assert_eq!(rules_layer.owasp, union.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn every_layer_kind_of_the_binary_addresses_something() {
        let registry = rampart::registry();
        for e in registry.owasp() {
            assert!(!e.owasp.is_empty(), "{} claims no OWASP risk", e.protection);
        }
        assert!(registry.kinds().count() >= 6);
    }

    #[test]
    fn the_report_has_ten_sections_and_is_deterministic_apart_from_the_date() {
        let notes = Notes::parse(owasp::NOTES_SRC, owasp::NOTES_ORIGIN).unwrap();
        let matrix = owasp::parse_matrix(&matrix_json(0.41), "fixture.json").unwrap();
        let a = report(&notes, Some(&matrix), "2026-11-26");
        let b = report(&notes, Some(&matrix), "2026-11-26");
        assert_eq!(a, b);
        let c = report(&notes, Some(&matrix), "2027-01-02");
        let differing: Vec<(&str, &str)> =
            a.lines().zip(c.lines()).filter(|(x, y)| x != y).collect();
        assert_eq!(differing.len(), 1, "{differing:?}");
        assert!(
            differing[0]
                .0
                .contains("rampart owasp --matrix fixture.json")
        );
        for id in Owasp::ALL {
            let s = section(&a, id);
            assert!(s.contains("**Residual risk.**"), "{id}");
            assert!(s.contains("**Out of scope.**"), "{id}");
        }
        assert!(a.contains("## The 2023 list and the 2025 list"));
        assert!(a.contains("| LLM07 | Insecure Plugin Design | LLM06 Excessive Agency |"));
    }

    #[test]
    fn coverage_levels_follow_the_claims_and_what_carries_each_id() {
        let notes = Notes::parse(owasp::NOTES_SRC, owasp::NOTES_ORIGIN).unwrap();
        let matrix = owasp::parse_matrix(&matrix_json(0.41), "fixture.json").unwrap();
        let r = report(&notes, Some(&matrix), "2026-11-26");
        for (id, level) in [
            (Owasp::Llm01, "partial"),
            (Owasp::Llm03, "none"),
            (Owasp::Llm07, "partial"),
            (Owasp::Llm09, "none"),
            (Owasp::Llm10, "partial"),
        ] {
            assert!(
                coverage_line(&r, id).starts_with(&format!("**Coverage: {level}.**")),
                "{id}: {}",
                coverage_line(&r, id)
            );
        }
        // Covered risks have a threat model, uncovered ones none.
        assert!(section(&r, Owasp::Llm07).contains("**Threat model**"));
        assert!(!section(&r, Owasp::Llm03).contains("**Threat model**"));
        // Computed facts: the rules, layers and capabilities that carry the id.
        let llm07 = section(&r, Owasp::Llm07);
        assert!(llm07.contains("SYS_015–020"), "{llm07}");
        assert!(
            llm07.contains("canaries (") && llm07.contains("`relational`"),
            "{llm07}"
        );
        assert!(section(&r, Owasp::Llm06).contains("tool_policy ("));
        assert!(section(&r, Owasp::Llm02).contains("CRED_001–017"));
        // Measured evidence and the matrix summary, with the skipped pipeline named.
        assert!(llm07.contains(
            "| Handwritten_Attacks_v1:system_prompt_extraction | 12 | 25.0 % | 83.3 % | 25.0 % |"
        ));
        let llm01 = section(&r, Owasp::Llm01);
        assert!(
            llm01.contains("| `cascade` (configs/cascade.toml) | 2 | 70.0 % | encoding 41.0 % | encoding | unicode 4.0 % |"),
            "{llm01}"
        );
        assert!(r.contains("- pipeline `judge`: not_configured: no judge model"));
    }

    #[test]
    fn a_full_claim_is_lowered_by_a_weak_matrix_family_and_kept_by_a_strong_one() {
        let full = owasp::NOTES_SRC.replacen(
            "id = \"LLM01\"\nclaim = \"partial\"",
            "id = \"LLM01\"\nclaim = \"full\"",
            1,
        );
        assert_ne!(full, owasp::NOTES_SRC);
        let notes = Notes::parse(&full, "n.toml").unwrap();
        let weak = owasp::parse_matrix(&matrix_json(0.41), "m.json").unwrap();
        let r = report(&notes, Some(&weak), "2026-11-26");
        assert!(coverage_line(&r, Owasp::Llm01).starts_with("**Coverage: partial.**"));
        assert!(
            section(&r, Owasp::Llm01)
                .contains("(claimed full, lowered: under the 95 % bar: red-team family encoding on cascade (41.0 %).)"),
            "{}",
            section(&r, Owasp::Llm01)
        );
        let strong = owasp::parse_matrix(&matrix_json(0.97), "m.json").unwrap();
        let r = report(&notes, Some(&strong), "2026-11-26");
        assert!(coverage_line(&r, Owasp::Llm01).starts_with("**Coverage: full.**"));
    }

    #[test]
    fn a_risk_nothing_carries_is_none_whatever_the_notes_claim() {
        let notes = Notes::parse(owasp::NOTES_SRC, owasp::NOTES_ORIGIN).unwrap();
        let packs = shipped_packs().unwrap();
        let registry = rampart::registry();
        let without_limits: Vec<_> = registry
            .owasp()
            .into_iter()
            .filter(|p| !p.owasp.contains(&Owasp::Llm10))
            .collect();
        let r = render(&Inputs {
            notes: &notes,
            packs: &packs,
            protections: &without_limits,
            measured: None,
            matrix: None,
            command: "rampart owasp --no-measure",
            date: "2026-11-26",
        });
        let s = section(&r, Owasp::Llm10);
        assert!(s.trim_start().starts_with("**Coverage: none.**"), "{s}");
        assert!(s.contains("claimed partial, but no rule, layer or capability carries LLM10"));
        assert!(!s.contains("**Threat model**"));
        assert!(r.contains("`--no-measure`"));
    }
}
