//! `rampart rules check|test|lint|list|literals`.

use anyhow::Result;
use clap::Subcommand;
use rampart_normalize::Normalizer;
use rampart_rules::{MatcherBuilder, RulePack, lint, run_examples};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Parse and compile packs: schema, unknown fields, duplicate IDs, bad regexes (file:line:col).
    Check(PackArgs),
    /// Check, then run every rule's must_match / must_not_match examples.
    Test(PackArgs),
    /// Check, then print warnings about rules likely to misbehave.
    Lint(LintArgs),
    /// List the rules (ID, category, kind, strength, severity, scope, pack).
    List(PackArgs),
    /// Print the literal and keyword patterns of the rules (as matched), one per line.
    Literals(LiteralsArgs),
}

#[derive(Debug, clap::Args)]
pub struct PackArgs {
    /// Pack files. Without any, the embedded default pack.
    pub packs: Vec<PathBuf>,
    /// Also include the embedded default pack when files are given.
    #[arg(long)]
    pub with_default: bool,
}

#[derive(Debug, clap::Args)]
pub struct LintArgs {
    #[command(flatten)]
    pub packs: PackArgs,
    /// Exit non-zero when there are warnings.
    #[arg(long)]
    pub deny_warnings: bool,
}

#[derive(Debug, clap::Args)]
pub struct LiteralsArgs {
    #[command(flatten)]
    pub packs: PackArgs,
    /// Print every string the automata search for, regex anchors included.
    #[arg(long)]
    pub anchors: bool,
}

fn load(args: &PackArgs) -> Result<Vec<RulePack>, String> {
    let mut packs = Vec::new();
    let mut errors = Vec::new();
    if args.packs.is_empty() || args.with_default {
        match RulePack::default_pack() {
            Ok(p) => packs.push(p),
            Err(e) => errors.push(e.to_string()),
        }
    }
    for p in &args.packs {
        match RulePack::from_path(p) {
            Ok(p) => packs.push(p),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if errors.is_empty() {
        Ok(packs)
    } else {
        Err(errors.join("\n"))
    }
}

pub fn run(cmd: &RulesCommand) -> Result<u8> {
    let args = match cmd {
        RulesCommand::Check(a) | RulesCommand::Test(a) | RulesCommand::List(a) => a,
        RulesCommand::Lint(a) => &a.packs,
        RulesCommand::Literals(a) => &a.packs,
    };
    let packs = match load(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return Ok(1);
        }
    };
    let n_rules: usize = packs.iter().map(|p| p.rules.len()).sum();
    let names: Vec<String> = packs
        .iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect();
    let mut builder = MatcherBuilder::new();
    for p in &packs {
        builder = builder.add_pack(p.clone());
    }
    let matcher = match builder.build() {
        Ok(m) => m,
        Err(errs) => {
            for e in errs {
                eprintln!("{e}");
            }
            return Ok(1);
        }
    };
    match cmd {
        RulesCommand::Check(_) => {
            outln!(
                "ok: {n_rules} rules in {} pack(s): {}",
                packs.len(),
                names.join(", ")
            )?;
            Ok(0)
        }
        RulesCommand::Test(_) => {
            let report = run_examples(&matcher, &Normalizer::default());
            for f in &report.failures {
                outln!("FAIL {f}")?;
            }
            outln!(
                "{} passed, {} failed ({n_rules} rules)",
                report.total - report.failures.len(),
                report.failures.len()
            )?;
            Ok(if report.failures.is_empty() { 0 } else { 1 })
        }
        RulesCommand::Lint(a) => {
            let warnings = lint(&packs);
            for w in &warnings {
                outln!("{w}")?;
            }
            outln!("{} warning(s) in {n_rules} rules", warnings.len())?;
            Ok(if a.deny_warnings && !warnings.is_empty() {
                1
            } else {
                0
            })
        }
        RulesCommand::List(_) => {
            for cr in matcher.rules() {
                let r = &cr.rule;
                outln!(
                    "{:<9} {:<21} {:<12} {:<7} {:<12} {:<5} {}",
                    r.id,
                    r.category.name(),
                    format!("{:?}", r.matcher.kind()).to_lowercase(),
                    format!("{:?}", r.strength).to_lowercase(),
                    r.severity.name(),
                    r.scope.name(),
                    cr.pack
                )?;
            }
            Ok(0)
        }
        RulesCommand::Literals(a) => {
            if a.anchors {
                for l in matcher.literal_patterns() {
                    outln!("{l}")?;
                }
                return Ok(0);
            }
            // The literal and keyword patterns of the rules, as matched (folded unless the
            // rule is case-sensitive), each once.
            let mut seen = std::collections::BTreeSet::new();
            for cr in matcher.rules() {
                for (_, l) in cr.rule.matched_literals() {
                    if seen.insert(l.clone()) {
                        outln!("{l}")?;
                    }
                }
            }
            Ok(0)
        }
    }
}
