//! Writes every hit of the default pack over a corpus, one line per hit (development aid
//! for checking that optimisations keep results identical): `hits_dump corpus.jsonl`.
use rampart_normalize::Normalizer;
use rampart_rules::{MatcherBuilder, RulePack};
use std::io::Write;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: hits_dump corpus.jsonl");
    let data = std::fs::read_to_string(path).expect("read");
    let n = Normalizer::default();
    let m = MatcherBuilder::new()
        .add_pack(RulePack::default_pack().expect("pack"))
        .build()
        .expect("build");
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    for (i, l) in data.lines().enumerate() {
        let Some(s) = l.find("\"text\": \"") else {
            continue;
        };
        let t = l[s + 9..l.len().saturating_sub(2)].replace("\\n", "\n");
        let h = m.scan(&n.normalize(&t));
        for hit in &h.hits {
            let _ = writeln!(
                out,
                "{i} {} {} {:?} {:?}",
                m.rules()[hit.rule].rule.id,
                hit.view,
                hit.view_span,
                hit.span
            );
        }
        if h.dropped > 0 {
            let _ = writeln!(out, "{i} dropped {}", h.dropped);
        }
    }
}
