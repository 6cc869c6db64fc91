//! Anchors: literals a regex match cannot do without (used by the matcher and lint).
//!
//! Seeing none of a regex's anchors in a view proves the regex cannot match there, so the
//! matcher only runs a regex on views where the shared Aho-Corasick pass saw one of its
//! anchors. `regex-syntax` extracts prefix and suffix sets; for regexes that start or end
//! with classes or look-arounds (`^[ \t]*system:`) this module also walks the HIR for
//! required inner literals. Written here because `regex-syntax` offers no inner-literal
//! extraction, and a wrong anchor would silently lose matches: every case below only ever
//! returns strings that every match must contain.

use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{Class, Hir, HirKind};

/// Shortest anchor worth having (shorter ones occur everywhere).
const MIN_ANCHOR: usize = 3;
/// Most anchors per regex.
const MAX_ANCHORS: usize = 64;

/// Lower-cased literals of which every match of `pattern` contains at least one, or `None`
/// when no useful set exists (the regex then runs on every view of its family).
/// For case-sensitive rules (matched against cased views with an ASCII-case-insensitive
/// automaton) anchors must be ASCII.
pub fn regex_anchors(pattern: &str, case_sensitive: bool) -> Option<Vec<String>> {
    regex_anchor_groups(pattern, case_sensitive)
        .into_iter()
        .next()
}

/// Anchors at least this long are selective enough; among such sets the smaller wins.
const GOOD_ENOUGH: usize = 8;

/// Least selectivity of a secondary (gating) group.
const MIN_GATE_SELECTIVITY: usize = 5;

/// Longest anchor kept, in bytes. Any piece of a literal every match contains is itself
/// contained in every match, so cutting anchors short is sound; it keeps the automaton
/// small (its size is what bounds the scan speed) at little cost in selectivity.
const MAX_ANCHOR_LEN: usize = 8;

/// `s` cut to at most [`MAX_ANCHOR_LEN`] bytes on a char boundary.
fn shorten(s: &str) -> String {
    let mut end = s.len().min(MAX_ANCHOR_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Most anchor groups kept per regex.
pub const MAX_GROUPS: usize = 4;

/// Independent anchor groups, most selective first (for case-insensitive rules, which scan
/// folded views, whitespace in the regex is taken as the single space folding leaves): every match contains at least one
/// literal of *each* group. The first group places search windows; the others only gate
/// (a regex runs on a view only when every group occurred in it). Empty when no group is
/// usable.
pub fn regex_anchor_groups(pattern: &str, case_sensitive: bool) -> Vec<Vec<String>> {
    parse_plain(pattern).map_or_else(Vec::new, |hir| anchor_groups_hir(&hir, case_sensitive))
}

/// `pattern` parsed the way the anchor functions read it (case as written, so that literal
/// extraction sees single letters rather than case classes), or `None` if it does not parse.
/// Parsing is a good share of start-up: [`crate::MatcherBuilder`] parses each regex once
/// here and hands the HIR to the `*_hir` functions.
pub(crate) fn parse_plain(pattern: &str) -> Option<Hir> {
    regex_syntax::ParserBuilder::new()
        .case_insensitive(false)
        .build()
        .parse(pattern)
        .ok()
}

/// [`regex_anchor_groups`] of a pattern already parsed by [`parse_plain`].
fn anchor_groups_hir(hir: &Hir, case_sensitive: bool) -> Vec<Vec<String>> {
    // Gates made of common words filter little and cost automaton matches: keep the
    // primary group whatever it is, and only selective gates besides it.
    let mut kept: Vec<Vec<String>> = Vec::new();
    for g in candidate_groups(hir, case_sensitive) {
        if kept.is_empty() || selectivity(&g) >= MIN_GATE_SELECTIVITY {
            kept.push(g);
        }
    }
    kept.truncate(MAX_GROUPS);
    kept
}

/// How a regex is searched: its anchor groups (as [`regex_anchor_groups`]) and whether the
/// first group is a *prefix* group, i.e. every match starts with one of its literals (up to
/// case). A prefix-anchored regex runs as an anchored search at each occurrence, which stops
/// as soon as the automaton fails (usually within a few bytes), instead of an unanchored
/// search over a window of twice the regex's reach around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorPlan {
    /// Anchor groups, the first placing the searches; empty when no group is usable.
    pub groups: Vec<Vec<String>>,
    /// Whether `groups[0]` holds prefixes of every match.
    pub prefix: bool,
}

/// Least selectivity of a prefix group to be preferred as the primary group: short or very
/// common words would start an anchored search almost everywhere.
const MIN_PREFIX_SELECTIVITY: usize = 4;

/// The search plan of a regex: a usable prefix group first when there is one (anchored
/// searches are far cheaper than windows), else the groups of [`regex_anchor_groups`].
pub fn regex_anchor_plan(pattern: &str, case_sensitive: bool) -> AnchorPlan {
    match parse_plain(pattern) {
        Some(hir) => anchor_plan_hir(&hir, case_sensitive),
        None => AnchorPlan {
            groups: Vec::new(),
            prefix: false,
        },
    }
}

/// [`regex_anchor_plan`] of a pattern already parsed by [`parse_plain`].
pub(crate) fn anchor_plan_hir(hir: &Hir, case_sensitive: bool) -> AnchorPlan {
    let groups = anchor_groups_hir(hir, case_sensitive);
    match prefix_group_hir(hir, case_sensitive) {
        Some(p) if selectivity(&p) >= MIN_PREFIX_SELECTIVITY => {
            let mut all = vec![p];
            for g in groups {
                if !all.contains(&g) && selectivity(&g) >= MIN_GATE_SELECTIVITY {
                    all.push(g);
                }
            }
            all.truncate(MAX_GROUPS);
            AnchorPlan {
                groups: all,
                prefix: true,
            }
        }
        _ => AnchorPlan {
            groups,
            prefix: false,
        },
    }
}

/// Lower-cased literals one of which starts every match of `pattern` (compared ignoring
/// case), or `None`. For case-insensitive rules (folded views, where whitespace runs are a
/// single space) literals hold no whitespace but single spaces. Only ASCII literals qualify:
/// folding leaves printable ASCII as it is (up to case), so the view shows them as written.
pub fn prefix_group(pattern: &str, case_sensitive: bool) -> Option<Vec<String>> {
    prefix_group_hir(&parse_plain(pattern)?, case_sensitive)
}

/// [`prefix_group`] of a pattern already parsed by [`parse_plain`].
fn prefix_group_hir(hir: &Hir, case_sensitive: bool) -> Option<Vec<String>> {
    // Case-insensitive pieces (`(?i:you)`) are classes per letter whose case variants would
    // multiply past the extractor's limits; one lower-case letter per class keeps the set
    // small. Sound because every literal is lower-cased and compared ignoring case anyway:
    // the lower-cased matches of the regex and of the folded HIR are the same strings.
    let folded = fold_case_classes(hir);
    let seq = Extractor::new()
        .kind(ExtractKind::Prefix)
        .limit_total(1024)
        .extract(&folded);
    let mut set: Vec<String> = Vec::new();
    for lit in seq.literals()? {
        let s = std::str::from_utf8(lit.as_bytes()).ok()?;
        if !s.is_ascii() {
            return None;
        }
        if !case_sensitive && (s.contains("  ") || s.chars().any(|c| c.is_whitespace() && c != ' '))
        {
            return None;
        }
        set.push(shorten(&s.to_lowercase()));
    }
    set.sort();
    set.dedup();
    // A member starting with another member adds nothing: the shorter one starts there too.
    // Sorted, the members starting with `o` follow `o` in one run, so one pass drops them.
    let mut kept: Vec<String> = Vec::with_capacity(set.len());
    for s in set {
        if kept.last().is_none_or(|o| !s.starts_with(o.as_str())) {
            kept.push(s);
        }
    }
    let set = kept;
    let ok =
        !set.is_empty() && set.len() <= MAX_ANCHORS && set.iter().all(|s| s.len() >= MIN_ANCHOR);
    ok.then_some(set)
}

/// `hir` with every class that stands for one letter in its cases (`[Yy]`) replaced by that
/// letter in lower case.
fn fold_case_classes(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Class(c) => match class_chars(c).as_deref() {
            Some([one]) => {
                let mut buf = [0u8; 4];
                Hir::literal(one.encode_utf8(&mut buf).as_bytes())
            }
            _ => hir.clone(),
        },
        HirKind::Capture(c) => Hir::capture(regex_syntax::hir::Capture {
            index: c.index,
            name: c.name.clone(),
            sub: Box::new(fold_case_classes(&c.sub)),
        }),
        HirKind::Repetition(r) => Hir::repetition(regex_syntax::hir::Repetition {
            min: r.min,
            max: r.max,
            greedy: r.greedy,
            sub: Box::new(fold_case_classes(&r.sub)),
        }),
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(fold_case_classes).collect()),
        HirKind::Alternation(alts) => {
            Hir::alternation(alts.iter().map(fold_case_classes).collect())
        }
        HirKind::Empty | HirKind::Literal(_) | HirKind::Look(_) => hir.clone(),
    }
}

/// Raw-view gates of a case-sensitive regex: literal groups, in the *folded* view's
/// terms, that the folded view must show (one literal of each group) when the raw view can
/// match. Every match of the regex in the raw text leaves its folded form in the folded view,
/// so the groups are those of the regex taken case-insensitively, with whitespace as one
/// space, each literal passed through `fold` (the normalizer's pattern folding, which also
/// collapses and trims whitespace: a literal's fold is a substring of the fold of any text
/// holding the literal). Only printable-ASCII literals qualify (folding keeps them, up to
/// case and whitespace). Empty when no group qualifies.
pub fn raw_gate_groups(pattern: &str, fold: impl Fn(&str) -> String) -> Vec<Vec<String>> {
    parse_plain(pattern).map_or_else(Vec::new, |hir| raw_gate_groups_hir(&hir, fold))
}

/// [`raw_gate_groups`] of a pattern already parsed by [`parse_plain`].
pub(crate) fn raw_gate_groups_hir(hir: &Hir, fold: impl Fn(&str) -> String) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    for g in candidate_groups(hir, false) {
        if !g.iter().all(|s| {
            s.bytes()
                .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
        }) {
            continue;
        }
        // A combining mark after `<`, `=` or `>` composes with it (`≠`): such a last
        // character may be missing from the folded view, so it is dropped from the gate.
        let mut folded: Vec<String> = g
            .iter()
            .map(|s| fold(s).trim_end_matches(['<', '=', '>']).to_string())
            .collect();
        if folded.iter().any(String::is_empty) {
            continue;
        }
        folded.sort();
        folded.dedup();
        if !out.contains(&folded) {
            out.push(folded);
        }
    }
    out.truncate(MAX_GROUPS);
    out
}

/// Every usable anchor group, most selective first.
fn candidate_groups(hir: &Hir, case_sensitive: bool) -> Vec<Vec<String>> {
    let finish = |set: Vec<String>| -> Option<Vec<String>> {
        let mut set: Vec<String> = set
            .into_iter()
            .map(|s| shorten(&s.to_lowercase()))
            .collect();
        set.sort();
        set.dedup();
        // A member containing another member adds nothing to a disjunction.
        let all = set.clone();
        set.retain(|s| !all.iter().any(|o| o != s && s.contains(o.as_str())));
        let ok = !set.is_empty()
            && set.len() <= MAX_ANCHORS
            && set.iter().all(|s| s.len() >= MIN_ANCHOR)
            && (!case_sensitive || set.iter().all(|s| s.is_ascii()));
        ok.then_some(set)
    };
    let mut candidates = vec![extracted(hir, true), extracted(hir, false)];
    candidates.extend(top_level_sets(hir, !case_sensitive).into_iter().map(Some));
    let mut groups: Vec<Vec<String>> = candidates
        .into_iter()
        .flatten()
        .filter_map(finish)
        .collect();
    // Beyond GOOD_ENOUGH bytes, selectivity stops mattering and smaller sets win: every
    // literal is a chain of automaton states built at start-up.
    groups.sort_by_key(|set| {
        (
            std::cmp::Reverse(selectivity(set).min(GOOD_ENOUGH)),
            set.len(),
        )
    });
    groups.dedup();
    groups
}

/// Required sets of the top-level pieces: for a concatenation, one per piece (or run of
/// fixed pieces) that has one; otherwise the whole expression's.
fn top_level_sets(hir: &Hir, ws: bool) -> Vec<Vec<String>> {
    let HirKind::Concat(parts) = hir.kind() else {
        return required(hir, ws, MAX_ANCHORS).into_iter().collect();
    };
    let mut out = Vec::new();
    let mut run: Option<Vec<String>> = None;
    for p in parts {
        if let Some(f) = fixed_set(p, ws, MAX_ANCHORS) {
            run = match run.take() {
                None => Some(f),
                Some(r) => match cross(&r, &f, MAX_ANCHORS) {
                    Some(x) => Some(x),
                    None => {
                        out.push(r);
                        Some(f)
                    }
                },
            };
            continue;
        }
        if let Some(r) = run.take() {
            out.push(r);
        }
        if let Some(set) = required(p, ws, MAX_ANCHORS) {
            out.push(set);
        }
    }
    out.extend(run);
    out
}

/// Words so frequent in ordinary prompts that, as anchors, they would make a regex run on
/// nearly every input.
const COMMON: &[&str] = &[
    "the",
    "that",
    "you",
    "your",
    "and",
    "for",
    "with",
    "this",
    "are",
    "have",
    "was",
    "not",
    "but",
    "what",
    "all",
    "can",
    "will",
    "from",
    "they",
    "one",
    "about",
    "more",
    "there",
    "which",
    "their",
    "when",
    "make",
    "like",
    "time",
    "just",
    "know",
    "take",
    "into",
    "some",
    "could",
    "them",
    "than",
    "then",
    "now",
    "only",
    "its",
    "over",
    "also",
    "after",
    "use",
    "how",
    "our",
    "work",
    "first",
    "well",
    "way",
    "even",
    "new",
    "want",
    "any",
    "these",
    "give",
    "most",
    "act",
    "play",
    "tell",
    "show",
    "write",
    "list",
    "data",
    "text",
    "code",
    "help",
    "need",
    "please",
    "following",
    "below",
    "above",
    "here",
    "should",
    "would",
    "been",
    "were",
    "has",
    "had",
    "who",
    "get",
    "let",
    "may",
    "each",
    "other",
    "such",
    "into",
    "out",
    "own",
    "same",
    "see",
    "way",
    "why",
    "yes",
    "via",
    "per",
];

/// How selective an anchor set is: its weakest literal's length, where a very common word
/// counts as length 1.
fn selectivity(set: &[String]) -> usize {
    set.iter()
        .map(|s| {
            if COMMON.contains(&s.trim()) {
                1
            } else {
                s.trim().len()
            }
        })
        .min()
        .unwrap_or(0)
}

fn extracted(hir: &Hir, prefix: bool) -> Option<Vec<String>> {
    let kind = if prefix {
        ExtractKind::Prefix
    } else {
        ExtractKind::Suffix
    };
    // Not "optimized": that shortens literals for a prefilter, and we want selective ones.
    let seq = Extractor::new().kind(kind).extract(hir);
    seq.literals()?
        .iter()
        .map(|l| std::str::from_utf8(l.as_bytes()).ok().map(str::to_string))
        .collect()
}

/// Whether a class holds only whitespace (`\s`, `[ \t]`, …).
fn is_space_class(class: &Class) -> bool {
    match class {
        Class::Unicode(u) => u
            .ranges()
            .iter()
            .all(|r| (r.start()..=r.end()).all(char::is_whitespace)),
        Class::Bytes(b) => b
            .ranges()
            .iter()
            .all(|r| (r.start()..=r.end()).all(|c| c.is_ascii_whitespace() || c == 0x0b)),
    }
}

/// Most characters a class may stand for to be expanded into a literal set.
const MAX_CLASS_CHARS: usize = 4;

/// The few characters a class stands for when case is ignored (`[Ss]` → `s`, `['’]` →
/// `'`, `’`), or `None` when it stands for more than [`MAX_CLASS_CHARS`].
fn class_chars(class: &Class) -> Option<Vec<char>> {
    let mut found: Vec<char> = Vec::new();
    let mut add = |c: char| -> bool {
        // Simple case folding: Unicode case-insensitive classes also hold the long s and
        // the Kelvin and Angstrom signs.
        let l = match c {
            '\u{17F}' => 's',
            '\u{212A}' => 'k',
            '\u{212B}' => '\u{E5}',
            c => c.to_lowercase().next().unwrap_or(c),
        };
        if !found.contains(&l) {
            found.push(l);
        }
        found.len() <= MAX_CLASS_CHARS
    };
    match class {
        Class::Unicode(u) => {
            for r in u.ranges() {
                if (r.end() as u32) - (r.start() as u32) >= 2 * MAX_CLASS_CHARS as u32 {
                    return None;
                }
                for c in r.start()..=r.end() {
                    if !add(c) {
                        return None;
                    }
                }
            }
        }
        Class::Bytes(b) => {
            for r in b.ranges() {
                if usize::from(r.end() - r.start()) >= 2 * MAX_CLASS_CHARS {
                    return None;
                }
                for c in r.start()..=r.end() {
                    if !c.is_ascii() || !add(char::from(c)) {
                        return None;
                    }
                }
            }
        }
    }
    (!found.is_empty()).then_some(found)
}

/// Longest match of `hir` in bytes, if bounded. With `ws` (folded views, where whitespace is
/// always one space) a repetition of a whitespace class counts as one byte, so `a\s+b` is
/// bounded there.
pub(crate) fn max_len(hir: &Hir, ws: bool) -> Option<usize> {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Some(0),
        HirKind::Literal(l) => Some(l.0.len()),
        HirKind::Class(c) => c.maximum_len(),
        HirKind::Capture(c) => max_len(&c.sub, ws),
        HirKind::Repetition(r) => {
            if ws && matches!(r.sub.kind(), HirKind::Class(c) if is_space_class(c)) {
                return Some(1);
            }
            let m = usize::try_from(r.max?).ok()?;
            max_len(&r.sub, ws)?.checked_mul(m)
        }
        HirKind::Concat(parts) => parts
            .iter()
            .try_fold(0usize, |acc, p| acc.checked_add(max_len(p, ws)?)),
        HirKind::Alternation(alts) => alts
            .iter()
            .try_fold(0usize, |acc, a| Some(acc.max(max_len(a, ws)?))),
    }
}

/// Cross product of two string sets, or `None` past `budget`.
fn cross(a: &[String], b: &[String], budget: usize) -> Option<Vec<String>> {
    if a.len().saturating_mul(b.len()) > budget {
        return None;
    }
    Some(
        a.iter()
            .flat_map(|x| b.iter().map(move |y| format!("{x}{y}")))
            .collect(),
    )
}

/// The finite set of strings (ignoring case) a piece matches exactly, if small:
/// `p(?:ass(?:word|wd)|wd)` → {password, passwd, pwd}.
fn fixed_set(hir: &Hir, ws: bool, budget: usize) -> Option<Vec<String>> {
    match hir.kind() {
        HirKind::Literal(l) => std::str::from_utf8(&l.0).ok().map(|s| vec![s.to_string()]),
        HirKind::Class(c) if ws && is_space_class(c) => Some(vec![" ".into()]),
        HirKind::Class(c) => class_chars(c).map(|cs| cs.into_iter().map(String::from).collect()),
        HirKind::Capture(c) => fixed_set(&c.sub, ws, budget),
        // Folded views hold exactly one ASCII space wherever the text had whitespace, so
        // there `\s+` is " " and `\s*` is "" or " ".
        HirKind::Repetition(r)
            if ws && matches!(r.sub.kind(), HirKind::Class(c) if is_space_class(c)) =>
        {
            Some(if r.min >= 1 {
                vec![" ".into()]
            } else {
                vec![String::new(), " ".into()]
            })
        }
        HirKind::Repetition(r) if r.min == 0 && r.max == Some(1) => {
            let mut set = fixed_set(&r.sub, ws, budget)?;
            set.push(String::new());
            Some(set)
        }
        HirKind::Alternation(alts) => {
            let mut all = Vec::new();
            for a in alts {
                all.extend(fixed_set(a, ws, budget)?);
                if all.len() > budget {
                    return None;
                }
            }
            Some(all)
        }
        HirKind::Concat(parts) => {
            let mut acc = vec![String::new()];
            for p in parts {
                acc = cross(&acc, &fixed_set(p, ws, budget)?, budget)?;
            }
            Some(acc)
        }
        _ => None,
    }
}

/// Strings every match contains one of (`None`: unknown).
fn required(hir: &Hir, ws: bool, budget: usize) -> Option<Vec<String>> {
    if let Some(set) = fixed_set(hir, ws, budget) {
        return Some(set);
    }
    match hir.kind() {
        HirKind::Capture(c) => required(&c.sub, ws, budget),
        HirKind::Repetition(r) if r.min >= 1 => required(&r.sub, ws, budget),
        HirKind::Alternation(alts) => {
            let share = (budget / alts.len().max(1)).max(1);
            let mut all = Vec::new();
            for a in alts {
                all.extend(required(a, ws, share)?);
            }
            Some(all)
        }
        HirKind::Concat(parts) => {
            // Candidates: each maximal run of fixed pieces (as a cross product), and each
            // other piece's required set.
            let mut best: Option<Vec<String>> = None;
            let mut consider = |cand: Vec<String>| {
                let key =
                    |v: &Vec<String>| (selectivity(v).min(GOOD_ENOUGH), std::cmp::Reverse(v.len()));
                if best.as_ref().is_none_or(|b| key(&cand) > key(b)) {
                    best = Some(cand);
                }
            };
            let mut run: Option<Vec<String>> = None;
            for p in parts {
                if let Some(f) = fixed_set(p, ws, budget) {
                    run = match run.take() {
                        None => Some(f),
                        Some(r) => match cross(&r, &f, budget) {
                            Some(x) => Some(x),
                            None => {
                                consider(r);
                                Some(f)
                            }
                        },
                    };
                    continue;
                }
                if let Some(r) = run.take() {
                    consider(r);
                }
                if let Some(set) = required(p, ws, budget) {
                    consider(set);
                }
            }
            if let Some(r) = run {
                consider(r);
            }
            best
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_anchors_take_whitespace_as_one_space_in_folded_views() {
        // "ignore previous" cut to 8 bytes keeps the space: a cross-word anchor.
        let groups = regex_anchor_groups("(ignore|disregard)\\s+previous", false);
        assert!(
            groups.contains(&vec!["disregar".to_string(), "ignore p".to_string()]),
            "{groups:?}"
        );
        // Cased views keep their whitespace: there `\s+` is not a fixed string, and each
        // word is a group of its own (the longest places the windows).
        let groups = regex_anchor_groups("(ignore|disregard)\\s+previous", true);
        assert_eq!(groups[0], vec!["previous".to_string()]);
        assert!(groups.contains(&vec!["disregar".to_string(), "ignore".to_string()]));
    }

    #[test]
    fn small_classes_expand_and_raw_gates_are_folded_terms() {
        let groups = regex_anchor_groups("don['’]t\\s+comply", false);
        assert!(
            groups.contains(&vec!["don't co".to_string(), "don’t ".to_string()]),
            "{groups:?}"
        );
        let gates = raw_gate_groups("(?i:api[_-]?key)\\s*[:=]\\s*[A-Z]{8}", |s| s.to_lowercase());
        assert!(
            gates
                .iter()
                .any(|g| g.iter().any(|s| s.starts_with("api_key"))),
            "{gates:?}"
        );
        assert!(
            gates.iter().flatten().all(|s| !s.ends_with('=')),
            "{gates:?}"
        );
    }

    #[test]
    fn inner_anchor_after_a_class_and_case_flags() {
        let a = regex_anchors("(?im)^[ \\t>*#]*system[ \\t]*:[ \\t]*(you|ignore)", true).unwrap();
        assert!(a.iter().all(|s| s.contains("system")), "{a:?}");
    }

    #[test]
    fn optional_parts_stay_optional() {
        // Every match contains "key"; "api_" is optional, so "key…" must be in the set.
        let a = regex_anchors("(api_)?key\\s*=\\s*[a-z0-9]{8}", false).unwrap();
        assert!(a.iter().all(|s| s.contains("key")), "{a:?}");
        assert!(a.iter().any(|s| s.starts_with("key")), "{a:?}");
        assert_eq!(regex_anchors("[a-z0-9]{20,}", false), None);
    }

    #[test]
    fn anchors_are_necessary_on_examples() {
        let cases = [
            (
                "(?i)bearer\\s+[a-z0-9._-]{20,}",
                "Authorization: BEARER abcdefghijklmnopqrstuvwxyz",
            ),
            (
                "(?im)^\\s*(user|human)\\s*:.{0,50}\\n\\s*(assistant|ai)\\s*:",
                "x\nUser: hi\nAI: yo",
            ),
        ];
        for (re, text) in cases {
            let r = regex::RegexBuilder::new(re).build().unwrap();
            assert!(r.is_match(text));
            let lower = text.to_lowercase();
            for group in regex_anchor_groups(re, true) {
                assert!(
                    group.iter().any(|s| lower.contains(s.as_str())),
                    "{re}: {group:?}"
                );
            }
        }
        // Folded family: the text as the folded view holds it (lower case, single spaces).
        let folded = [
            (
                "you\\s+are\\s+(now|no\\s+longer)\\s+(dan|evil)",
                "so you are no longer evil",
            ),
            (
                "(enable|activate)\\s+(the\\s+)?(dan|dude)\\s+mode",
                "please activate the dude mode",
            ),
        ];
        for (re, text) in folded {
            let r = regex::RegexBuilder::new(re)
                .case_insensitive(true)
                .build()
                .unwrap();
            assert!(r.is_match(text));
            let groups = regex_anchor_groups(re, false);
            assert!(!groups.is_empty());
            for group in groups {
                assert!(
                    group.iter().any(|s| text.contains(s.as_str())),
                    "{re}: {group:?}"
                );
            }
        }
    }
}

#[cfg(test)]
mod prefix_tests {
    use super::*;

    #[test]
    fn prefix_groups_fold_case_and_keep_starts() {
        assert_eq!(
            prefix_group("(?i:you\\s+are|act\\s+as)\\s+(DAN|STAN)", true),
            Some(vec!["act".to_string(), "you".to_string()])
        );
        let plan = regex_anchor_plan("(?i:you\\s+are|act\\s+as)\\s+(DAN|STAN)", true);
        // "you" is a common word: the prefix group is not preferred.
        assert!(!plan.prefix);
        let plan = regex_anchor_plan("(send|post|forward)\\s+(the\\s+)?(chat|context)", false);
        assert!(plan.prefix);
        assert_eq!(plan.groups[0], ["forward", "post", "send"]);
        // Classes and look-arounds at the start give no prefix.
        assert_eq!(prefix_group("(^|\\W)(ignore)\\s+previous", false), None);
        // A member starting with another member is dropped.
        assert_eq!(
            prefix_group("(abcd|abcdef)", false),
            Some(vec!["abcd".to_string()])
        );
    }

    #[test]
    fn prefixes_start_every_example_match() {
        let cases = [
            (
                "(send|post|forward)\\s+(the\\s+)?(chat|context)",
                "please Forward the chat now",
            ),
            (
                "(?i:respond|reply)\\s+(in|using)\\s+base64",
                "and REPLY using base64",
            ),
            ("[Dd]eveloper\\s+mode", "enable Developer mode"),
        ];
        for (re, text) in cases {
            let set = prefix_group(re, false).expect(re);
            let m = regex::RegexBuilder::new(re)
                .case_insensitive(true)
                .build()
                .unwrap()
                .find(text)
                .unwrap();
            let matched = m.as_str().to_lowercase();
            assert!(
                set.iter().any(|p| matched.starts_with(p.as_str())),
                "{re}: {set:?}"
            );
        }
    }
}
