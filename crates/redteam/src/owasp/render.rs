//! The report, as Markdown: the coverage of each risk from the claims in the notes and the
//! facts (rules, layers, capabilities, measured rates, the matrix), then the sections.

use super::matrix::{FAMILY_FLOOR, not_configured, strongest, summaries};
use super::measure::{MEASURED, SetResult};
use super::notes::Level;
use super::{Inputs, NOTES_PATH};
use rampart_core::{Capability, Owasp, Protection};
use rampart_rules::Rule;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The coverage of one risk and why it is not the claim, when lowered.
fn coverage(inputs: &Inputs<'_>, id: Owasp) -> (Level, Option<String>) {
    let Some(notes) = inputs.notes.risk(id) else {
        return (Level::None, None);
    };
    let addressed = rules(inputs).any(|(_, r)| r.owasp.contains(&id))
        || inputs.protections.iter().any(|p| p.owasp.contains(&id));
    if !addressed {
        let why = (notes.claim > Level::None).then(|| {
            format!(
                "claimed {}, but no rule, layer or capability carries {id}",
                notes.claim.name()
            )
        });
        return (Level::None, why);
    }
    if notes.claim == Level::Full
        && let Some(min) = notes.min_tpr
    {
        let mut under = Vec::new();
        if let Some(m) = inputs.measured {
            let default = MEASURED.len() - 1;
            for e in &notes.evidence {
                if let Some(s) = m.sets.get(e)
                    && let Some(&k) = s.flagged.get(default)
                    && s.n > 0
                    && (k as f64 / s.n as f64) < min
                {
                    under.push(format!("{e} ({})", pct(k, s.n)));
                }
            }
        }
        if notes.matrix
            && let Some(m) = inputs.matrix
            && let Some(best) = strongest(&summaries(m))
            && let Some((family, tpr)) = &best.min
            && *tpr < min
        {
            under.push(format!(
                "red-team family {family} on {} ({:.1} %)",
                best.pipeline,
                tpr * 100.0
            ));
        }
        if !under.is_empty() {
            return (
                Level::Partial,
                Some(format!(
                    "claimed full, lowered: under the {:.0} % bar: {}",
                    min * 100.0,
                    under.join("; ")
                )),
            );
        }
    }
    if notes.claim == Level::None {
        return (
            Level::Partial,
            Some(format!("claimed none, but parts of Rampart carry {id}")),
        );
    }
    (notes.claim, None)
}

fn pct(k: usize, n: usize) -> String {
    if n == 0 {
        "n/a".into()
    } else {
        format!("{:.1} %", k as f64 * 100.0 / n as f64)
    }
}

/// Rule ids, compact: per prefix, runs of consecutive numbers as ranges
/// (`CTRL_001–065, SYS_015–020, SYS_027`).
pub fn compact_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> String {
    let mut by_prefix: BTreeMap<&str, BTreeSet<(u32, usize)>> = BTreeMap::new();
    let mut odd: BTreeSet<&str> = BTreeSet::new();
    for id in ids {
        match id.split_once('_') {
            Some((p, n)) if n.bytes().all(|b| b.is_ascii_digit()) => match n.parse::<u32>() {
                Ok(v) => {
                    by_prefix.entry(p).or_default().insert((v, n.len()));
                }
                Err(_) => {
                    odd.insert(id);
                }
            },
            _ => {
                odd.insert(id);
            }
        }
    }
    let mut parts = Vec::new();
    for (prefix, nums) in by_prefix {
        let nums: Vec<(u32, usize)> = nums.into_iter().collect();
        let mut i = 0;
        while i < nums.len() {
            let mut j = i;
            while j + 1 < nums.len() && nums[j + 1].0 == nums[j].0 + 1 {
                j += 1;
            }
            let (a, wa) = nums[i];
            let (b, wb) = nums[j];
            if i == j {
                parts.push(format!("{prefix}_{a:0wa$}"));
            } else {
                parts.push(format!("{prefix}_{a:0wa$}–{b:0wb$}"));
            }
            i = j + 1;
        }
    }
    parts.extend(odd.into_iter().map(str::to_string));
    parts.join(", ")
}

fn layers_for(inputs: &Inputs<'_>, id: Owasp) -> Vec<String> {
    inputs
        .protections
        .iter()
        .filter(|p| p.owasp.contains(&id))
        .filter_map(|p| match p.protection {
            Protection::Layer(l) => Some(format!("`{l}`")),
            Protection::Capability(_) => None,
        })
        .collect()
}

fn capabilities_for(inputs: &Inputs<'_>, id: Owasp) -> Vec<Capability> {
    inputs
        .protections
        .iter()
        .filter(|p| p.owasp.contains(&id))
        .filter_map(|p| match p.protection {
            Protection::Layer(_) => None,
            Protection::Capability(c) => Some(c),
        })
        .collect()
}

/// Every rule of the packs, with its pack's name.
fn rules<'a>(inputs: &Inputs<'a>) -> impl Iterator<Item = (&'a str, &'a Rule)> {
    inputs
        .packs
        .iter()
        .flat_map(|p| p.rules.iter().map(move |r| (p.name.as_str(), r)))
}

fn rules_for<'a>(inputs: &Inputs<'a>, id: Owasp) -> Vec<(&'a str, &'a Rule)> {
    rules(inputs)
        .filter(|(_, r)| r.owasp.contains(&id))
        .collect()
}

fn or_none(v: Vec<String>) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The report, as Markdown.
pub fn render(inputs: &Inputs<'_>) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail; `let _` keeps the renderer free of unwraps.
    let w = &mut s;
    let _ = writeln!(
        w,
        "# OWASP Top 10 for LLM Applications (2025): Rampart's coverage\n"
    );
    let _ = writeln!(
        w,
        "Generated by `{}` on {}. Do not edit: the coverage claims, threat models, residual \
         risks and scope come from `{NOTES_PATH}`; the rules, layers, capabilities and measured \
         figures are computed (rule packs' `owasp` ids, the layer registry, scans of the \
         built-in sets, the red-team coverage matrix). Regenerate after changing rules, \
         layers or the notes.\n",
        inputs.command, inputs.date
    );
    let _ = writeln!(
        w,
        "Coverage: **full**: the vectors in scope are addressed and the measured rates meet \
         the bar; **partial**: some vectors are addressed, others are not (see residual risk); \
         **none**: nothing in Rampart addresses the risk (see out of scope). A claim in the \
         notes is lowered to none when no rule, layer or capability carries the id, and from \
         full to partial when a measured rate is under the bar.\n"
    );
    let _ = writeln!(w, "## Summary\n");
    let _ = writeln!(
        w,
        "| id | risk | coverage | rules | layers | other capabilities |\n|---|---|---|---:|---|---|"
    );
    for id in Owasp::ALL {
        let (level, _) = coverage(inputs, id);
        let caps: Vec<String> = capabilities_for(inputs, id)
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        let _ = writeln!(
            w,
            "| {id} | {} | {} | {} | {} | {} |",
            id.title(),
            level.name(),
            rules_for(inputs, id).len(),
            or_none(layers_for(inputs, id)),
            or_none(caps)
        );
    }
    let _ = writeln!(w);
    render_measurement(inputs, w);
    for id in Owasp::ALL {
        render_risk(inputs, id, w);
    }
    render_2023(inputs, w);
    s
}

fn render_measurement(inputs: &Inputs<'_>, w: &mut String) {
    let _ = writeln!(w, "## How the evidence was measured\n");
    match inputs.measured {
        Some(m) => {
            let _ = writeln!(
                w,
                "Attack rows of the built-in sets, by category (the notes name which categories \
                 exercise which risk), scanned with two pipelines. A row counts as detected when \
                 the decision is SANITIZE or BLOCK, as in `rampart eval`.\n"
            );
            for (name, what) in MEASURED {
                let _ = writeln!(w, "- `{name}`: {what}");
            }
            let _ = writeln!(
                w,
                "\nFalse-positive rate of the same pipelines on the benign rows:\n"
            );
            let _ = writeln!(
                w,
                "| benign set | rows | {} |\n|---|---:|{}",
                MEASURED.map(|(n, _)| format!("`{n}` FPR")).join(" | "),
                "---:|".repeat(MEASURED.len())
            );
            for b in &m.benign {
                let rates: Vec<String> = b.flagged.iter().map(|&k| pct(k, b.n)).collect();
                let _ = writeln!(w, "| {} | {} | {} |", b.set, b.n, rates.join(" | "));
            }
            let _ = writeln!(w);
        }
        None => {
            let _ = writeln!(
                w,
                "The built-in sets were not scanned for this report (`--no-measure`): no \
                 measured detection rates below.\n"
            );
        }
    }
    match inputs.matrix {
        Some(m) => {
            let _ = writeln!(
                w,
                "Red-team coverage matrix: `{}` (generated {}, seed {}; attacks {}; benign {}). \
                 Each family's TPR is over mutated attack prompts, its FPR over the same \
                 transforms applied to benign prompts. Blind spot: a family under {:.0} % TPR.\n",
                m.command,
                m.generated,
                m.seed,
                or_none(m.attack_sources.clone()),
                or_none(m.benign_sources.clone()),
                FAMILY_FLOOR * 100.0
            );
            for (name, status) in not_configured(m) {
                let _ = writeln!(w, "- pipeline `{name}`: {status}");
            }
            if !not_configured(m).is_empty() {
                let _ = writeln!(w);
            }
        }
        None => {
            let _ = writeln!(
                w,
                "No red-team coverage matrix was given (`--matrix`, from `rampart redteam \
                 report`).\n"
            );
        }
    }
}

fn render_risk(inputs: &Inputs<'_>, id: Owasp, w: &mut String) {
    let _ = writeln!(w, "## {id}: {}\n", id.title());
    let (level, lowered) = coverage(inputs, id);
    let Some(notes) = inputs.notes.risk(id) else {
        return;
    };
    let _ = writeln!(w, "**Coverage: {}.** {}", level.name(), notes.why);
    if let Some(l) = lowered {
        let _ = writeln!(w, "({l}.)");
    }
    let _ = writeln!(w);
    let rules = rules_for(inputs, id);
    let mut packs: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for &(pack, r) in &rules {
        packs.entry(pack).or_default().push(&r.id);
    }
    let by_pack: Vec<String> = packs
        .iter()
        .map(|(p, ids)| {
            format!(
                "`{p}` ({}): {}",
                ids.len(),
                compact_ids(ids.iter().copied())
            )
        })
        .collect();
    let _ = writeln!(
        w,
        "- **Rules ({}):** {}",
        rules.len(),
        if by_pack.is_empty() {
            "none".into()
        } else {
            by_pack.join("; ")
        }
    );
    let _ = writeln!(w, "- **Layers:** {}", or_none(layers_for(inputs, id)));
    let caps: Vec<String> = capabilities_for(inputs, id)
        .iter()
        .map(|c| format!("{} ({})", c.name(), c.location()))
        .collect();
    let _ = writeln!(w, "- **Other capabilities:** {}\n", or_none(caps));

    let measured_rows: Vec<&SetResult> = inputs
        .measured
        .map(|m| {
            notes
                .evidence
                .iter()
                .filter_map(|e| m.sets.get(e))
                .collect()
        })
        .unwrap_or_default();
    let summaries = if notes.matrix {
        inputs.matrix.map(summaries).unwrap_or_default()
    } else {
        Vec::new()
    };
    if !measured_rows.is_empty() || !summaries.is_empty() || !notes.cited.is_empty() {
        let _ = writeln!(w, "**Measured evidence**\n");
    }
    if !measured_rows.is_empty() {
        let _ = writeln!(
            w,
            "| attack set | rows | {} | a rule carrying {id} fired (`rules`) |\n|---|---:|{}---:|",
            MEASURED.map(|(n, _)| format!("`{n}`")).join(" | "),
            "---:|".repeat(MEASURED.len())
        );
        let mut n = 0;
        let mut total = vec![0; MEASURED.len()];
        let mut own = 0;
        for r in &measured_rows {
            let rates: Vec<String> = r.flagged.iter().map(|&k| pct(k, r.n)).collect();
            let by = r.by_risk_rules.get(&id).copied().unwrap_or(0);
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} |",
                r.set,
                r.n,
                rates.join(" | "),
                pct(by, r.n)
            );
            n += r.n;
            own += by;
            for (t, k) in total.iter_mut().zip(&r.flagged) {
                *t += k;
            }
        }
        if measured_rows.len() > 1 {
            let rates: Vec<String> = total.iter().map(|&k| pct(k, n)).collect();
            let _ = writeln!(
                w,
                "| **all** | {n} | {} | {} |",
                rates.join(" | "),
                pct(own, n)
            );
        }
        let _ = writeln!(w);
    } else if !notes.evidence.is_empty() && inputs.measured.is_none() {
        let _ = writeln!(
            w,
            "Evidence sets (not measured for this report): {}.\n",
            notes.evidence.join(", ")
        );
    }
    if !summaries.is_empty() {
        let _ = writeln!(
            w,
            "Red-team matrix, per pipeline:\n\n| pipeline | families | mean TPR | lowest TPR | families under {:.0} % | highest benign FPR |\n|---|---:|---:|---|---|---|",
            FAMILY_FLOOR * 100.0
        );
        for m in &summaries {
            let lowest = m
                .min
                .as_ref()
                .map_or("n/a".into(), |(f, t)| format!("{f} {:.1} %", t * 100.0));
            let fpr = m
                .max_fpr
                .as_ref()
                .map_or("n/a".into(), |(f, t)| format!("{f} {:.1} %", t * 100.0));
            let _ = writeln!(
                w,
                "| `{}`{} | {} | {} | {} | {} | {} |",
                m.pipeline,
                if m.config.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", m.config)
                },
                m.families,
                m.mean
                    .map_or("n/a".into(), |t| format!("{:.1} %", t * 100.0)),
                lowest,
                if m.below.is_empty() {
                    "none".into()
                } else {
                    m.below.join(", ")
                },
                fpr
            );
        }
        let _ = writeln!(w);
    }
    for c in &notes.cited {
        let _ = writeln!(w, "- {} (`{}`)", c.figure, c.command);
    }
    if !notes.cited.is_empty() {
        let _ = writeln!(w);
    }
    if level > Level::None
        && let Some(t) = &notes.threat_model
    {
        let _ = writeln!(w, "**Threat model**\n");
        let _ = writeln!(w, "- *Vectors:* {}", t.vectors);
        let _ = writeln!(w, "- *Mitigation:* {}", t.mitigation);
        let _ = writeln!(w, "- *Detection:* {}", t.detection);
        let _ = writeln!(w, "- *Response:* {}\n", t.response);
    }
    let _ = writeln!(w, "**Residual risk.** {}\n", notes.residual);
    let _ = writeln!(w, "**Out of scope.** {}\n", notes.out_of_scope);
}

fn render_2023(inputs: &Inputs<'_>, w: &mut String) {
    let c = &inputs.notes.changes_2023;
    let _ = writeln!(w, "## The 2023 list and the 2025 list\n");
    let _ = writeln!(w, "{}\n", c.intro);
    let _ = writeln!(w, "| 2023 | 2023 name | 2025 | note |\n|---|---|---|---|");
    for r in &c.rows {
        let now: Vec<String> = r.now.iter().map(|o| format!("{o} {}", o.title())).collect();
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} |",
            r.id_2023,
            r.name_2023,
            now.join(", "),
            r.note
        );
    }
    let _ = writeln!(w);
    for n in &c.new_in_2025 {
        let _ = writeln!(w, "- **{} {}**: {}", n.id, n.id.title(), n.note);
    }
    if !c.new_in_2025.is_empty() {
        let _ = writeln!(w);
    }
}
