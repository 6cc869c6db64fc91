//! Prints what the agreement detector finds in each line of stdin (one text per line), or
//! with `--data PATH` in each record of a history-claims JSONL file:
//! `fires strongest score rule_ids | label id | text`.
//!
//! ```text
//! cargo run -p rampart-conversation --example agreement_dump -- --data datasets/history_claims_v1.jsonl
//! ```

use rampart_conversation::{AgreementDetector, parse_claims};
use std::io::BufRead;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let detector = AgreementDetector::embedded(rampart_rules::plans::Compile::AtBuild)?;
    let mut args = std::env::args().skip(1);
    let rows: Vec<(String, String)> = match (args.next().as_deref(), args.next()) {
        (Some("--data"), Some(path)) => parse_claims(&std::fs::read_to_string(&path)?)?
            .into_iter()
            .map(|r| (format!("{:?} {:?} {}", r.label, r.split, r.id), r.text))
            .collect(),
        (None, _) => std::io::stdin()
            .lock()
            .lines()
            .map(|l| l.map(|t| (String::new(), t)))
            .collect::<Result<_, _>>()?,
        _ => return Err("usage: agreement_dump [--data PATH]".into()),
    };
    for (tag, text) in rows {
        let s = detector.assess(&text);
        println!(
            "{} {:<6} {:.3} {:<30} | {tag} | {text}",
            if s.fires() { "FIRE" } else { "----" },
            s.strongest.map_or("-".to_string(), |x| format!("{x:?}")),
            s.score,
            s.rule_ids.join(",")
        );
    }
    Ok(())
}
