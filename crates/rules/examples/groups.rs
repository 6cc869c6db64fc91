//! Prints the anchor groups of one rule of the default pack (development aid).
fn main() {
    let id = std::env::args().nth(1).expect("usage: groups RULE_ID");
    let pack = rampart_rules::RulePack::default_pack().expect("pack");
    for r in &pack.rules {
        if r.id == id
            && let rampart_rules::RuleMatch::Regex { pattern } = &r.matcher
        {
            for g in rampart_rules::anchors::regex_anchor_groups(pattern, r.case_sensitive) {
                println!("{} {:?}", g.len(), &g[..g.len().min(8)]);
            }
        }
    }
}
