use rampart_normalize::Normalizer;
use std::collections::BTreeMap;
fn main() {
    let path = std::env::args().nth(1).expect("corpus");
    let data = std::fs::read_to_string(path).expect("read");
    let n = Normalizer::default();
    let mut stats: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for l in data.lines() {
        let Some(i) = l.find("\"text\": \"") else {
            continue;
        };
        let t = l[i + 9..l.len().saturating_sub(2)].replace("\\n", "\n");
        let z = n.normalize(&t);
        for view in &z.views {
            let e = stats.entry(format!("{:?}", view.kind)).or_default();
            e.0 += 1;
            e.1 += view.text.len();
        }
    }
    for (k, (c, b)) in stats {
        println!("{k:<20} {c:>7} views {:>10} bytes", b);
    }
}
