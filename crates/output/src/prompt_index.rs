//! The system prompt's word n-grams, for finding it repeated verbatim in a model response.

use std::collections::HashSet;
use std::ops::Range;

/// Word n-grams of a system prompt, for finding it repeated verbatim in a response.
/// Words are maximal runs of alphanumeric characters, compared case-insensitively, so
/// punctuation, markup and spacing changes do not hide a copy. (Scripts written without
/// spaces form long "words"; a copy of such text is still found when it spans `n` of them.)
#[derive(Clone)]
pub struct PromptIndex {
    n: usize,
    grams: HashSet<u64>,
}

impl std::fmt::Debug for PromptIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptIndex")
            .field("n", &self.n)
            .field("grams", &self.grams.len())
            .finish()
    }
}

impl PromptIndex {
    /// Indexes `prompt` with n-grams of `n` words; `None` when it has fewer than `n` words.
    pub fn new(prompt: &str, n: usize) -> Option<PromptIndex> {
        let n = n.max(1);
        let words = words(prompt);
        if words.len() < n {
            return None;
        }
        let grams = (0..=words.len() - n)
            .map(|i| gram(&words[i..i + n]))
            .collect();
        Some(PromptIndex { n, grams })
    }

    /// The number of consecutive words that make a leak.
    pub fn min_words(&self) -> usize {
        self.n
    }

    /// Maximal runs of `text` made of shared n-grams: (byte span, number of words).
    pub fn find(&self, text: &str) -> Vec<(Range<usize>, usize)> {
        let words = words(text);
        let mut out = Vec::new();
        if words.len() < self.n {
            return out;
        }
        // Covered word range of the current run.
        let mut run: Option<(usize, usize)> = None;
        for i in 0..=words.len() - self.n {
            if self.grams.contains(&gram(&words[i..i + self.n])) {
                run = match run {
                    Some((s, e)) if i <= e => Some((s, i + self.n)),
                    other => {
                        if let Some((s, e)) = other {
                            out.push((words[s].0.start..words[e - 1].0.end, e - s));
                        }
                        Some((i, i + self.n))
                    }
                };
            }
        }
        if let Some((s, e)) = run {
            out.push((words[s].0.start..words[e - 1].0.end, e - s));
        }
        out
    }
}

/// Words with their byte spans and case-folded hashes.
fn words(text: &str) -> Vec<(Range<usize>, u64)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut h: u64 = FNV_OFFSET;
    for (i, ch) in text.char_indices() {
        if ch.is_alphanumeric() {
            if start.is_none() {
                start = Some(i);
                h = FNV_OFFSET;
            }
            for lc in ch.to_lowercase() {
                h = fnv(h, u64::from(u32::from(lc)));
            }
        } else if let Some(s) = start.take() {
            out.push((s..i, h));
        }
    }
    if let Some(s) = start {
        out.push((s..text.len(), h));
    }
    out
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv(h: u64, x: u64) -> u64 {
    (h ^ x).wrapping_mul(0x0000_0100_0000_01b3)
}

fn gram(words: &[(Range<usize>, u64)]) -> u64 {
    words
        .iter()
        .fold(FNV_OFFSET, |h, (_, w)| fnv(h, *w).rotate_left(17))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_index_merges_runs() {
        let idx = PromptIndex::new("a b c d e f g h", 4).expect("index");
        let found = idx.find("x a b c d e f y b c d e z");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].1, 6);
        assert_eq!(found[1].1, 4);
        assert!(PromptIndex::new("too short", 4).is_none());
    }
}
