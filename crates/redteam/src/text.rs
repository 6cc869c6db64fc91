//! Surface rewrites: spacing, leet, case games, typos, and paraphrase by rule (synonym swaps
//! of trigger words, dropped words).

use crate::transform::{Draw, NO_LETTERS, Outcome, TOO_FEW_WORDS, Transform, params};
use serde_json::json;

/// Separators [`Spaced`] puts between the characters of a word.
pub const SEPARATORS: [&str; 4] = [" ", ".", "-", "_"];

/// Every word's characters separated by `sep` (drawn from [`SEPARATORS`]); words are then
/// separated by three spaces ("i g n o r e   a l l").
#[derive(Debug)]
pub struct Spaced;
impl Transform for Spaced {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        if !input.split_whitespace().any(|w| w.chars().count() > 1) {
            return Outcome::Skipped("no word of two characters or more");
        }
        let (i, sep) = draw.pick(&SEPARATORS).unwrap_or((0, &" "));
        let out = input
            .split_whitespace()
            .map(|w| w.chars().map(String::from).collect::<Vec<_>>().join(sep))
            .collect::<Vec<_>>()
            .join("   ");
        Outcome::text(out, params([("sep", json!(sep)), ("sep_index", json!(i))]))
    }
}

/// One word per line.
#[derive(Debug)]
pub struct Newlines;
impl Transform for Newlines {
    fn apply(&self, input: &str, _draw: &mut Draw) -> Outcome {
        let words: Vec<&str> = input.split_whitespace().collect();
        if words.len() < 2 {
            return Outcome::Skipped(TOO_FEW_WORDS);
        }
        Outcome::text(words.join("\n"), crate::Params::new())
    }
}

/// Leet substitutions, one-to-one so that they can be undone.
pub const LEET: [(char, char); 8] = [
    ('a', '4'),
    ('e', '3'),
    ('i', '1'),
    ('o', '0'),
    ('s', '5'),
    ('t', '7'),
    ('g', '9'),
    ('b', '8'),
];

/// The letter a leet digit stands for.
pub fn unleet(c: char) -> char {
    LEET.iter().find(|(_, d)| *d == c).map_or(c, |(l, _)| *l)
}

fn leet(c: char) -> Option<char> {
    let low = c.to_ascii_lowercase();
    LEET.iter().find(|(l, _)| *l == low).map(|(_, d)| *d)
}

/// Letters replaced by [`LEET`] digits, each with probability `rate`.
#[derive(Debug)]
pub struct Leet;
impl Transform for Leet {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        if !input.chars().any(|c| leet(c).is_some()) {
            return Outcome::Skipped("no letters with a leet form");
        }
        let rate = [0.5, 0.8, 1.0][draw.below(3)];
        let mut replaced = 0usize;
        let mut out: String = input
            .chars()
            .map(|c| match leet(c) {
                Some(d) if draw.chance(rate) => {
                    replaced += 1;
                    d
                }
                _ => c,
            })
            .collect();
        if replaced == 0
            && let Some((i, c)) = input.char_indices().find(|(_, c)| leet(*c).is_some())
            && let Some(d) = leet(c)
        {
            out = input.to_owned();
            out.replace_range(i..i + c.len_utf8(), d.encode_utf8(&mut [0; 4]));
            replaced = 1;
        }
        Outcome::text(
            out,
            params([("rate", json!(rate)), ("replaced", json!(replaced))]),
        )
    }
}

/// Case games, by `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseMode {
    /// All upper case.
    Upper,
    /// aLtErNaTiNg, counting letters only.
    Alternating,
    /// Each letter's case flipped by a coin.
    Random,
    /// Every letter's case swapped.
    Inverted,
}

impl CaseMode {
    fn name(self) -> &'static str {
        match self {
            CaseMode::Upper => "upper",
            CaseMode::Alternating => "alternating",
            CaseMode::Random => "random",
            CaseMode::Inverted => "inverted",
        }
    }
}

fn swap_case(c: char) -> String {
    if c.is_lowercase() {
        c.to_uppercase().collect()
    } else if c.is_uppercase() {
        c.to_lowercase().collect()
    } else {
        c.to_string()
    }
}

/// Case games ([`CaseMode`]).
#[derive(Debug)]
pub struct Case(pub CaseMode);
impl Transform for Case {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        if !input.chars().any(|c| c.is_lowercase() || c.is_uppercase()) {
            return Outcome::Skipped("no cased letters");
        }
        let mut n = 0usize;
        let out: String = input
            .chars()
            .map(|c| {
                let cased = c.is_lowercase() || c.is_uppercase();
                match self.0 {
                    CaseMode::Upper => c.to_uppercase().collect(),
                    CaseMode::Inverted => swap_case(c),
                    CaseMode::Alternating if cased => {
                        n += 1;
                        if n.is_multiple_of(2) {
                            c.to_uppercase().collect()
                        } else {
                            c.to_lowercase().collect()
                        }
                    }
                    CaseMode::Random if cased && draw.chance(0.5) => swap_case(c),
                    _ => c.to_string(),
                }
            })
            .collect();
        Outcome::text(out, params([("mode", json!(self.0.name()))]))
    }
}

/// Keys next to each other on a QWERTY keyboard (for substitution typos).
const NEIGHBOURS: [(char, &str); 26] = [
    ('a', "qsz"),
    ('b', "vgn"),
    ('c', "xdv"),
    ('d', "sfe"),
    ('e', "wrd"),
    ('f', "dgr"),
    ('g', "fht"),
    ('h', "gjy"),
    ('i', "uok"),
    ('j', "hku"),
    ('k', "jli"),
    ('l', "kop"),
    ('m', "nj"),
    ('n', "bmh"),
    ('o', "ipl"),
    ('p', "ol"),
    ('q', "wa"),
    ('r', "etf"),
    ('s', "adw"),
    ('t', "ryg"),
    ('u', "yij"),
    ('v', "cbf"),
    ('w', "qes"),
    ('x', "zcs"),
    ('y', "tuh"),
    ('z', "xas"),
];

/// One typo in each word of four letters or more, with probability `rate`: two inner
/// letters swapped, an inner letter dropped or doubled, or a letter replaced by a keyboard
/// neighbour. `typos` counts them.
#[derive(Debug)]
pub struct Typos;
impl Transform for Typos {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        let eligible = |w: &str| w.chars().count() >= 4 && w.chars().all(char::is_alphabetic);
        if !input.split_whitespace().any(eligible) {
            return Outcome::Skipped("no word of four letters or more");
        }
        let rate = [0.3, 0.5, 0.8][draw.below(3)];
        // One eligible word always gets a typo, so that every variant differs.
        let forced = draw.below(input.split_whitespace().filter(|w| eligible(w)).count());
        let mut nth = 0usize;
        let mut typos = 0usize;
        let mut out = String::with_capacity(input.len() + 8);
        // Rebuild the text piece by piece so that its whitespace stays as it was.
        let mut rest = input;
        while !rest.is_empty() {
            let ws = rest.len() - rest.trim_start().len();
            out.push_str(&rest[..ws]);
            rest = &rest[ws..];
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let word = &rest[..end];
            rest = &rest[end..];
            if word.is_empty() || !eligible(word) {
                out.push_str(word);
                continue;
            }
            nth += 1;
            if nth - 1 != forced && !draw.chance(rate) {
                out.push_str(word);
                continue;
            }
            let mut cs: Vec<char> = word.chars().collect();
            let i = 1 + draw.below(cs.len() - 2); // an inner letter, with one after it
            match draw.below(4) {
                // Swapping two equal letters changes nothing: drop one instead.
                0 if cs[i] != cs[i + 1] => cs.swap(i, i + 1),
                0 | 1 => {
                    cs.remove(i);
                }
                2 => cs.insert(i, cs[i]),
                _ => {
                    let low = cs[i].to_ascii_lowercase();
                    match NEIGHBOURS.iter().find(|(k, _)| *k == low) {
                        Some((_, n)) => {
                            let ns: Vec<char> = n.chars().collect();
                            cs[i] = ns[draw.below(ns.len())];
                        }
                        None => {
                            cs.remove(i);
                        }
                    }
                }
            }
            typos += 1;
            out.extend(cs);
        }
        Outcome::text(
            out,
            params([("rate", json!(rate)), ("typos", json!(typos))]),
        )
    }
}

/// Trigger words and phrases of prompt attacks and what [`Synonyms`] may say instead
/// (lowercase; matched as whole words, case-insensitively).
pub const SYNONYMS: [(&str, &[&str]); 30] = [
    (
        "ignore",
        &["set aside", "pay no attention to", "skip over", "look past"],
    ),
    ("disregard", &["set aside", "look past", "brush off"]),
    ("forget", &["let go of", "drop", "discard"]),
    ("previous", &["prior", "earlier", "preceding", "former"]),
    ("above", &["preceding", "earlier", "prior"]),
    (
        "instructions",
        &["directions", "guidance", "orders", "directives"],
    ),
    ("instruction", &["direction", "order", "directive"]),
    ("rules", &["guidelines", "policies", "constraints"]),
    (
        "system prompt",
        &[
            "initial setup text",
            "hidden preamble",
            "startup message",
            "opening configuration",
        ],
    ),
    ("prompt", &["setup text", "preamble", "briefing"]),
    ("reveal", &["disclose", "expose", "bring to light", "share"]),
    ("show", &["display", "present", "lay out"]),
    ("print", &["write out", "output", "type out"]),
    ("repeat", &["echo", "restate", "say again"]),
    ("pretend", &["behave as though", "imagine", "make believe"]),
    (
        "act as",
        &["play the part of", "behave like", "take on the role of"],
    ),
    (
        "bypass",
        &["get around", "circumvent", "sidestep", "work around"],
    ),
    (
        "override",
        &["overrule", "supersede", "take precedence over"],
    ),
    ("restrictions", &["limits", "constraints", "boundaries"]),
    ("filters", &["safeguards", "screens", "checks"]),
    (
        "unrestricted",
        &["unlimited", "unconstrained", "free of limits"],
    ),
    ("uncensored", &["unfiltered", "unredacted", "raw"]),
    ("secret", &["hidden", "private", "undisclosed"]),
    ("password", &["passphrase", "access code", "login phrase"]),
    ("confidential", &["private", "internal", "restricted"]),
    ("jailbreak", &["unlock", "liberate", "free up"]),
    (
        "developer mode",
        &["maintenance mode", "debug mode", "engineering mode"],
    ),
    ("harmful", &["dangerous", "damaging", "hazardous"]),
    ("tell me", &["let me know", "give me", "inform me of"]),
    (
        "now",
        &["from here on", "at this point", "from this moment"],
    ),
];

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '\''
}

/// Matches `phrase` (lowercase) at byte `i` of `text` as whole words, case-insensitively;
/// the match's byte length.
fn match_at(text: &str, i: usize, phrase: &str) -> Option<usize> {
    let rest = &text[i..];
    let mut len = 0;
    let mut pc = phrase.chars();
    for c in rest.chars() {
        match pc.next() {
            None => break,
            Some(p) => {
                let mut low = c.to_lowercase();
                if low.next() != Some(p) || low.next().is_some() {
                    return None;
                }
                len += c.len_utf8();
            }
        }
    }
    if pc.next().is_some() {
        return None;
    }
    let before_ok = text[..i]
        .chars()
        .next_back()
        .is_none_or(|c| !is_word_char(c));
    let after_ok = text[i + len..]
        .chars()
        .next()
        .is_none_or(|c| !is_word_char(c));
    (before_ok && after_ok).then_some(len)
}

/// Whether `text` holds `phrase` (lowercase) as whole words.
pub fn contains_phrase(text: &str, phrase: &str) -> bool {
    text.char_indices()
        .any(|(i, _)| match_at(text, i, phrase).is_some())
}

/// Every trigger word or phrase of [`SYNONYMS`] swapped for a drawn synonym (a capital first
/// letter kept); `swaps` lists what was replaced by what.
#[derive(Debug)]
pub struct Synonyms;
impl Transform for Synonyms {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        let mut out = String::with_capacity(input.len() + 16);
        let mut swaps = Vec::new();
        let mut i = 0;
        while i < input.len() {
            // Longest phrase first, so that "system prompt" wins over "prompt".
            let hit = SYNONYMS
                .iter()
                .filter_map(|(k, alts)| match_at(input, i, k).map(|len| (len, k, alts)))
                .max_by_key(|(len, _, _)| *len);
            if let Some((len, key, alts)) = hit {
                let (_, alt) = draw.pick(alts).unwrap_or((0, key));
                let orig = &input[i..i + len];
                let capital = orig.chars().next().is_some_and(char::is_uppercase);
                let mut rep = (*alt).to_string();
                if capital && let Some(f) = rep.chars().next() {
                    rep.replace_range(..f.len_utf8(), &f.to_uppercase().to_string());
                }
                swaps.push(json!([orig, rep]));
                out.push_str(&rep);
                i += len;
            } else {
                let c = input[i..].chars().next().unwrap_or(' ');
                out.push(c);
                i += c.len_utf8();
            }
        }
        if swaps.is_empty() {
            return Outcome::Skipped("no trigger word from the synonym table");
        }
        Outcome::text(out, params([("swaps", json!(swaps))]))
    }
}

/// Function words [`DropWords`] leaves out.
pub const DROPPABLE: [&str; 20] = [
    "the", "a", "an", "all", "any", "your", "my", "of", "to", "and", "please", "just", "that",
    "you", "are", "is", "will", "now", "this", "me",
];

/// Function words ([`DROPPABLE`]) left out, each with probability `rate`, for a
/// telegraphic style; `dropped` counts them. The first word is always kept.
#[derive(Debug)]
pub struct DropWords;
impl Transform for DropWords {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        let words: Vec<&str> = input.split_whitespace().collect();
        if words.len() < 3 {
            return Outcome::Skipped(TOO_FEW_WORDS);
        }
        let droppable = |w: &str| {
            let core = w
                .trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase();
            core == w.to_lowercase() && DROPPABLE.contains(&core.as_str())
        };
        if !words.iter().skip(1).any(|w| droppable(w)) {
            return Outcome::Skipped("no droppable function word");
        }
        let rate = [0.5, 1.0][draw.below(2)];
        let mut dropped = 0usize;
        let mut kept = vec![words[0]];
        for w in &words[1..] {
            if droppable(w) && draw.chance(rate) {
                dropped += 1;
            } else {
                kept.push(w);
            }
        }
        if dropped == 0 {
            // Low rate: drop the first candidate.
            kept = vec![words[0]];
            let mut done = false;
            for w in &words[1..] {
                if !done && droppable(w) {
                    done = true;
                    dropped = 1;
                } else {
                    kept.push(w);
                }
            }
        }
        if kept.iter().all(|w| !w.chars().any(char::is_alphanumeric)) {
            return Outcome::Skipped(NO_LETTERS);
        }
        Outcome::text(
            kept.join(" "),
            params([("rate", json!(rate)), ("dropped", json!(dropped))]),
        )
    }
}
