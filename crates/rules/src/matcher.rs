//! Compiling packs into an immutable [`Matcher`], and scanning normalized text with it.
//!
//! Compile once, scan many: [`MatcherBuilder::build`] folds every literal the way the
//! normalizer folds text, adds ROT13 and reversed variants of long literals, and builds
//! two Aho-Corasick automata (folded views / cased views) and two regex sets. A scan is one
//! automaton pass plus one regex-set pass per view; individual regexes run only to locate
//! spans of rules the set already reported.

use crate::error::{CompileError, Location};
use crate::schema::{Rule, RuleMatch, RulePack};
use aho_corasick::{AhoCorasick, MatchKind};
use rampart_normalize::{Normalized, TransformKind, View, decode, fold_pattern};
use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

/// Default compiled-size limit for one regex (bytes of compiled program).
pub const DEFAULT_REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Default cap on hits reported per rule per scanned input.
pub const DEFAULT_MAX_HITS_PER_RULE: usize = 16;
/// Literals with at least this many ASCII letters are also matched ROT13-encoded and reversed.
pub const VARIANT_MIN_LETTERS: usize = 8;

/// Collects packs and limits, then builds a [`Matcher`].
#[derive(Debug, Clone)]
pub struct MatcherBuilder {
    packs: Vec<RulePack>,
    regex_size_limit: usize,
    max_hits_per_rule: usize,
}

impl Default for MatcherBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl MatcherBuilder {
    /// An empty builder with default limits.
    pub fn new() -> Self {
        Self {
            packs: Vec::new(),
            regex_size_limit: DEFAULT_REGEX_SIZE_LIMIT,
            max_hits_per_rule: DEFAULT_MAX_HITS_PER_RULE,
        }
    }

    /// Adds a pack. Rule IDs must be unique across all packs.
    pub fn add_pack(mut self, pack: RulePack) -> Self {
        self.packs.push(pack);
        self
    }

    /// Sets the compiled-size limit for each regex.
    pub fn regex_size_limit(mut self, bytes: usize) -> Self {
        self.regex_size_limit = bytes;
        self
    }

    /// Sets the cap on hits reported per rule per input.
    pub fn max_hits_per_rule(mut self, n: usize) -> Self {
        self.max_hits_per_rule = n.max(1);
        self
    }

    /// Compiles everything. Reports every error found, not just the first.
    pub fn build(self) -> Result<Matcher, Vec<CompileError>> {
        let mut errors = Vec::new();
        let mut rules: Vec<CompiledRule> = Vec::new();
        let mut first_seen: HashMap<String, Location> = HashMap::new();
        for pack in self.packs {
            for rule in pack.rules {
                if let Some(first) = first_seen.get(&rule.id) {
                    errors.push(CompileError::DuplicateId {
                        location: rule.location.clone(),
                        rule_id: rule.id.clone(),
                        first: first.clone(),
                    });
                    continue;
                }
                first_seen.insert(rule.id.clone(), rule.location.clone());
                rules.push(CompiledRule {
                    pack: pack.name.clone(),
                    rule,
                });
            }
        }
        // Stable order: by rule ID, so output never depends on pack order.
        rules.sort_by(|a, b| a.rule.id.cmp(&b.rule.id));

        let mut folded_lits = LiteralTable::default();
        let mut cased_lits = LiteralTable::default();
        let mut folded_res: Vec<(usize, Regex)> = Vec::new();
        let mut cased_res: Vec<(usize, Regex)> = Vec::new();

        for (idx, cr) in rules.iter().enumerate() {
            let rule = &cr.rule;
            let table = if rule.case_sensitive {
                &mut cased_lits
            } else {
                &mut folded_lits
            };
            match &rule.matcher {
                RuleMatch::Literal { patterns } => {
                    for p in patterns {
                        let text = if rule.case_sensitive {
                            p.clone()
                        } else {
                            fold_pattern(p)
                        };
                        if text.is_empty() {
                            errors.push(CompileError::EmptyPattern {
                                location: rule.location.clone(),
                                rule_id: rule.id.clone(),
                                pattern: p.clone(),
                            });
                            continue;
                        }
                        let letters = text.bytes().filter(u8::is_ascii_alphabetic).count();
                        if !rule.case_sensitive && letters >= VARIANT_MIN_LETTERS {
                            let rot = decode::rot13(&text);
                            let rev = decode::reverse(&text);
                            if rot != text {
                                table.add(rot, idx, 0, Some(TransformKind::Rot13));
                            }
                            if rev != text {
                                table.add(rev, idx, 0, Some(TransformKind::Reversed));
                            }
                        }
                        table.add(text, idx, 0, None);
                    }
                }
                RuleMatch::KeywordSet { keywords, .. } => {
                    for (k, kw) in keywords.iter().enumerate() {
                        let text = if rule.case_sensitive {
                            kw.clone()
                        } else {
                            fold_pattern(kw)
                        };
                        if text.is_empty() {
                            errors.push(CompileError::EmptyPattern {
                                location: rule.location.clone(),
                                rule_id: rule.id.clone(),
                                pattern: kw.clone(),
                            });
                            continue;
                        }
                        table.add(text, idx, k, None);
                    }
                }
                RuleMatch::Regex { pattern } => {
                    match RegexBuilder::new(pattern)
                        .case_insensitive(!rule.case_sensitive)
                        .size_limit(self.regex_size_limit)
                        .build()
                    {
                        Ok(re) => {
                            if re.is_match("") {
                                errors.push(CompileError::EmptyMatch {
                                    location: rule.location.clone(),
                                    rule_id: rule.id.clone(),
                                });
                            } else if rule.case_sensitive {
                                cased_res.push((idx, re));
                            } else {
                                folded_res.push((idx, re));
                            }
                        }
                        Err(e) => errors.push(CompileError::Regex {
                            location: rule.location.clone(),
                            rule_id: rule.id.clone(),
                            message: e.to_string(),
                        }),
                    }
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let folded = Engine::build(folded_lits, folded_res, false, self.regex_size_limit);
        let cased = Engine::build(cased_lits, cased_res, true, self.regex_size_limit);
        match (folded, cased) {
            (Ok(folded), Ok(cased)) => Ok(Matcher {
                rules,
                folded,
                cased,
                max_hits_per_rule: self.max_hits_per_rule,
            }),
            (f, c) => Err(f.err().into_iter().chain(c.err()).collect()),
        }
    }
}

/// A rule as compiled into a matcher, with the pack it came from.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    /// The pack name.
    pub pack: String,
    /// The rule.
    pub rule: Rule,
}

#[derive(Debug, Clone, Copy)]
struct LitEntry {
    rule: usize,
    /// Keyword index for keyword sets; 0 for literals.
    keyword: usize,
    via: Option<TransformKind>,
}

#[derive(Debug, Default)]
struct LiteralTable {
    /// Distinct pattern strings, in insertion order.
    patterns: Vec<String>,
    /// For each distinct pattern, every (rule, keyword, variant) that uses it.
    entries: Vec<Vec<LitEntry>>,
    index: HashMap<String, usize>,
}

impl LiteralTable {
    fn add(&mut self, text: String, rule: usize, keyword: usize, via: Option<TransformKind>) {
        let entry = LitEntry { rule, keyword, via };
        if let Some(&i) = self.index.get(&text) {
            self.entries[i].push(entry);
        } else {
            self.index.insert(text.clone(), self.patterns.len());
            self.patterns.push(text);
            self.entries.push(vec![entry]);
        }
    }
}

/// One family of views (folded or cased): an automaton, a regex set, and the regexes.
#[derive(Debug)]
struct Engine {
    ac: Option<AhoCorasick>,
    entries: Vec<Vec<LitEntry>>,
    patterns: Vec<String>,
    set: Option<RegexSet>,
    regexes: Vec<(usize, Regex)>,
}

impl Engine {
    fn build(
        lits: LiteralTable,
        regexes: Vec<(usize, Regex)>,
        cased: bool,
        size_limit: usize,
    ) -> Result<Engine, CompileError> {
        let ac = if lits.patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .build(&lits.patterns)
                    .map_err(|e| CompileError::Automaton(e.to_string()))?,
            )
        };
        let set = if regexes.is_empty() {
            None
        } else {
            Some(
                RegexSetBuilder::new(regexes.iter().map(|(_, r)| r.as_str()))
                    .case_insensitive(!cased)
                    .size_limit(size_limit.saturating_mul(regexes.len().max(1)))
                    .build()
                    .map_err(|e| CompileError::Automaton(e.to_string()))?,
            )
        };
        Ok(Engine {
            ac,
            entries: lits.entries,
            patterns: lits.patterns,
            set,
            regexes,
        })
    }
}

/// One rule hit in one view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleHit {
    /// Index of the rule in [`Matcher::rules`].
    pub rule: usize,
    /// Index of the view in [`Normalized::views`].
    pub view: usize,
    /// Byte span in the view's text.
    pub view_span: Range<usize>,
    /// Byte span in the original text.
    pub span: Range<usize>,
    /// Set when the literal matched ROT13-encoded or reversed.
    pub via: Option<TransformKind>,
}

/// The result of scanning one normalized input.
#[derive(Debug, Clone, Default)]
pub struct ScanHits {
    /// Hits, sorted by rule ID then original span; one per (rule, span), from the earliest view.
    pub hits: Vec<RuleHit>,
    /// How many hits were dropped by the per-rule cap.
    pub dropped: usize,
}

/// An immutable, `Send + Sync` compiled rule set. Build once, share in an `Arc`, scan many.
#[derive(Debug)]
pub struct Matcher {
    rules: Vec<CompiledRule>,
    folded: Engine,
    cased: Engine,
    max_hits_per_rule: usize,
}

impl Matcher {
    /// The compiled rules, sorted by ID. [`RuleHit::rule`] indexes this slice.
    pub fn rules(&self) -> &[CompiledRule] {
        &self.rules
    }

    /// The rule with this ID.
    pub fn rule_by_id(&self, id: &str) -> Option<&CompiledRule> {
        self.rules
            .binary_search_by(|r| r.rule.id.as_str().cmp(id))
            .ok()
            .map(|i| &self.rules[i])
    }

    /// Every distinct literal the automata search for (folded, then cased; variants
    /// included). Used by benchmarks that compare against `rg -F -f`.
    pub fn literal_patterns(&self) -> impl Iterator<Item = &str> {
        self.folded
            .patterns
            .iter()
            .chain(self.cased.patterns.iter())
            .map(String::as_str)
    }

    /// Scans every view of a normalized input.
    pub fn scan(&self, normalized: &Normalized) -> ScanHits {
        let mut raw_hits: Vec<RuleHit> = Vec::new();
        for (vi, view) in normalized.views.iter().enumerate() {
            let engine = if view.kind.is_cased() {
                &self.cased
            } else {
                &self.folded
            };
            self.scan_view(engine, vi, view, &mut raw_hits);
        }
        // Sort by rule, original span, then view order; keep the first view per (rule, span).
        raw_hits.sort_by(|a, b| {
            (a.rule, a.span.start, a.span.end, a.view).cmp(&(b.rule, b.span.start, b.span.end, b.view))
        });
        raw_hits.dedup_by(|b, a| a.rule == b.rule && a.span == b.span);
        let mut out = ScanHits::default();
        let mut per_rule: BTreeMap<usize, usize> = BTreeMap::new();
        for hit in raw_hits {
            let n = per_rule.entry(hit.rule).or_insert(0);
            if *n < self.max_hits_per_rule {
                *n += 1;
                out.hits.push(hit);
            } else {
                out.dropped += 1;
            }
        }
        out
    }

    fn scan_view(&self, engine: &Engine, vi: usize, view: &View, out: &mut Vec<RuleHit>) {
        let text = view.text.as_str();
        if text.is_empty() {
            return;
        }
        // Per rule, keyword occurrences (keyword index, view span) for keyword sets.
        let mut keyword_hits: BTreeMap<usize, Vec<(usize, Range<usize>)>> = BTreeMap::new();
        if let Some(ac) = &engine.ac {
            for m in ac.find_overlapping_iter(text) {
                for e in &engine.entries[m.pattern().as_usize()] {
                    let rule = &self.rules[e.rule].rule;
                    if rule.token_boundary && !boundary_ok(text, m.start(), m.end()) {
                        continue;
                    }
                    if let RuleMatch::KeywordSet { .. } = rule.matcher {
                        let list = keyword_hits.entry(e.rule).or_default();
                        // Bound the work on adversarial repetition.
                        if list.len() < 4096 {
                            list.push((e.keyword, m.start()..m.end()));
                        }
                        continue;
                    }
                    out.push(RuleHit {
                        rule: e.rule,
                        view: vi,
                        view_span: m.start()..m.end(),
                        span: view.to_original(m.start()..m.end()),
                        via: e.via,
                    });
                }
            }
        }
        for (rule_idx, occurrences) in keyword_hits {
            let RuleMatch::KeywordSet {
                min_distinct,
                window,
                ..
            } = self.rules[rule_idx].rule.matcher
            else {
                continue;
            };
            if let Some(span) = keyword_window(&occurrences, min_distinct, window) {
                out.push(RuleHit {
                    rule: rule_idx,
                    view: vi,
                    span: view.to_original(span.clone()),
                    view_span: span,
                    via: None,
                });
            }
        }
        if let Some(set) = &engine.set {
            for si in set.matches(text).iter() {
                let (rule_idx, re) = &engine.regexes[si];
                let rule = &self.rules[*rule_idx].rule;
                let mut found = 0;
                for m in re.find_iter(text) {
                    if rule.token_boundary && !boundary_ok(text, m.start(), m.end()) {
                        continue;
                    }
                    out.push(RuleHit {
                        rule: *rule_idx,
                        view: vi,
                        view_span: m.start()..m.end(),
                        span: view.to_original(m.start()..m.end()),
                        via: None,
                    });
                    found += 1;
                    if found >= self.max_hits_per_rule {
                        break;
                    }
                }
            }
        }
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `text[start..end]` does not touch a word character on a side where the match
/// itself begins or ends with one (so `system:` needs no right-hand boundary).
fn boundary_ok(text: &str, start: usize, end: usize) -> bool {
    let Some(m) = text.get(start..end) else {
        return false;
    };
    let (Some(first), Some(last)) = (m.chars().next(), m.chars().next_back()) else {
        return false;
    };
    if is_word(first) && text[..start].chars().next_back().is_some_and(is_word) {
        return false;
    }
    if is_word(last) && text[end..].chars().next().is_some_and(is_word) {
        return false;
    }
    true
}

/// The first window of at most `window` bytes holding `min_distinct` different keywords.
fn keyword_window(
    occ: &[(usize, Range<usize>)],
    min_distinct: usize,
    window: usize,
) -> Option<Range<usize>> {
    let mut sorted: Vec<&(usize, Range<usize>)> = occ.iter().collect();
    sorted.sort_by_key(|(_, r)| (r.start, r.end));
    let mut counts: HashMap<usize, usize> = HashMap::new();
    let mut lo = 0;
    for hi in 0..sorted.len() {
        *counts.entry(sorted[hi].0).or_insert(0) += 1;
        while sorted[hi].1.end.saturating_sub(sorted[lo].1.start) > window {
            let k = sorted[lo].0;
            if let Some(c) = counts.get_mut(&k) {
                *c -= 1;
                if *c == 0 {
                    counts.remove(&k);
                }
            }
            lo += 1;
        }
        if counts.len() >= min_distinct {
            let end = sorted[lo..=hi].iter().map(|(_, r)| r.end).max().unwrap_or(0);
            return Some(sorted[lo].1.start..end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_requires_non_word_neighbours_only_on_word_edges() {
        assert!(boundary_ok("say system: hi", 4, 11));
        assert!(!boundary_ok("mysystem: hi", 2, 9));
        assert!(boundary_ok("system:x", 0, 7));
        assert!(!boundary_ok("ignoreme", 0, 6));
        assert!(boundary_ok("ignore me", 0, 6));
    }

    #[test]
    fn keyword_window_needs_distinct_keywords_close_together() {
        let occ = vec![(0, 0..4), (0, 10..14), (1, 200..204)];
        assert_eq!(keyword_window(&occ, 2, 120), None);
        let occ = vec![(0, 0..4), (1, 100..104)];
        assert_eq!(keyword_window(&occ, 2, 120), Some(0..104));
    }
}
