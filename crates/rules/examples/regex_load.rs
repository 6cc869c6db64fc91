//! Which regex rules run on how much text of a corpus, given their anchor groups
//! (development aid): `regex_load corpus.jsonl`.
#[path = "support/corpus.rs"]
mod corpus;
use rampart_normalize::Normalizer;
use rampart_rules::{RuleMatch, RulePack, anchors::regex_anchor_groups};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: regex_load corpus.jsonl");
    let texts = corpus::texts(&path);
    let n = Normalizer::default();
    let views: Vec<(String, String)> = texts
        .iter()
        .map(|t| {
            let z = n.normalize(t);
            (z.views[0].text.to_lowercase(), z.views[1].text.clone())
        })
        .collect();
    let pack = RulePack::default_pack().expect("pack");
    let mut rows = Vec::new();
    for r in &pack.rules {
        let RuleMatch::Regex { pattern } = &r.matcher else {
            continue;
        };
        let groups = regex_anchor_groups(pattern, r.case_sensitive);
        let mut runs = 0usize;
        let mut bytes = 0usize;
        for (raw, folded) in &views {
            let v = if r.case_sensitive { raw } else { folded };
            if groups
                .iter()
                .all(|g| g.iter().any(|a| v.contains(a.as_str())))
            {
                runs += 1;
                bytes += v.len();
            }
        }
        rows.push((
            bytes,
            runs,
            r.id.clone(),
            groups.first().map(|g| g.join("|")).unwrap_or_default(),
        ));
    }
    rows.sort();
    rows.reverse();
    for (bytes, runs, id, g) in rows.iter().take(20) {
        let g: String = g.chars().take(80).collect();
        println!("{:>7.2} MB {runs:>6} runs {id:<9} {g}", *bytes as f64 / 1e6);
    }
}
