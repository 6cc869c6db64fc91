//! Anchor groups of the default pack's regex rules (development aid):
//! `groups` lists rules by number of anchor literals; `groups RULE_ID` prints one rule's.
fn main() {
    let want = std::env::args().nth(1);
    let pack = rampart_rules::RulePack::default_pack().expect("pack");
    let mut rows = Vec::new();
    for r in &pack.rules {
        let rampart_rules::RuleMatch::Regex { pattern } = &r.matcher else {
            continue;
        };
        let groups = rampart_rules::anchors::regex_anchor_groups(pattern, r.case_sensitive);
        if want.as_deref() == Some(r.id.as_str()) {
            for g in &groups {
                println!("{} {:?}", g.len(), &g[..g.len().min(8)]);
            }
        }
        let sizes: Vec<usize> = groups.iter().map(Vec::len).collect();
        rows.push((sizes.iter().sum::<usize>(), r.id.clone(), sizes));
    }
    if want.is_none() {
        rows.sort();
        rows.reverse();
        for (n, id, sizes) in rows.iter().take(15) {
            println!("{n:>5} {id} {sizes:?}");
        }
    }
}
