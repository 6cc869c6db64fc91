//! Search plan of every regex rule of the default pack (development aid): prefix-anchored
//! or windowed, and the groups.
use rampart_rules::{RuleMatch, RulePack, anchors::regex_anchor_plan};

fn main() {
    let pack = RulePack::default_pack().expect("pack");
    let (mut prefix, mut windowed, mut whole) = (0, 0, 0);
    for r in &pack.rules {
        let RuleMatch::Regex { pattern } = &r.matcher else {
            continue;
        };
        let plan = regex_anchor_plan(pattern, r.case_sensitive);
        let kind = if plan.groups.is_empty() {
            whole += 1;
            "whole"
        } else if plan.prefix {
            prefix += 1;
            "prefix"
        } else {
            windowed += 1;
            "window"
        };
        let first = plan.groups.first().map(|g| g.join("|")).unwrap_or_default();
        println!(
            "{:<9} {kind:<6} {} groups  {first:.90}",
            r.id,
            plan.groups.len()
        );
    }
    println!("{prefix} prefix-anchored, {windowed} windowed, {whole} on whole views");
}
