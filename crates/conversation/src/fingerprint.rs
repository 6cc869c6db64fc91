//! A 64-bit SimHash of word 3-shingles: a locality-sensitive fingerprint, not text.

use crate::chain::{ChainSecret, normalize};

/// SimHash over the word 3-shingles of the normalized text (a text of fewer than three
/// words is one shingle). Each shingle is hashed with the chain secret, so fingerprints
/// cannot be tested against guessed texts without it.
pub fn simhash(secret: &ChainSecret, text: &str) -> u64 {
    let norm = normalize(text);
    let words: Vec<&str> = norm.split(' ').filter(|w| !w.is_empty()).collect();
    let mut votes = [0i32; 64];
    let mut add = |s: &str| {
        let h = secret.shingle_hash(s);
        for (bit, v) in votes.iter_mut().enumerate() {
            if h >> bit & 1 == 1 {
                *v += 1;
            } else {
                *v -= 1;
            }
        }
    };
    if words.len() < 3 {
        add(&norm);
    } else {
        for w in words.windows(3) {
            add(&w.join(" "));
        }
    }
    votes.iter().enumerate().fold(
        0u64,
        |acc, (bit, v)| if *v > 0 { acc | 1 << bit } else { acc },
    )
}

/// Hamming distance between two fingerprints.
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Content words kept per remembered turn.
pub const MAX_CONTENT_WORDS: usize = 32;
/// Shared content words needed, at least, for a rephrasing by words.
const MIN_SHARED_WORDS: usize = 4;

/// Words that carry no topic: function words, and the frames a refused request is rephrased
/// with ("hypothetically", "for a story", "for research"), which must not count as its
/// content.
const STOPWORDS: &[&str] = &[
    "about",
    "also",
    "asking",
    "been",
    "beyond",
    "could",
    "curious",
    "does",
    "educational",
    "fiction",
    "from",
    "give",
    "have",
    "help",
    "here",
    "hypothetical",
    "hypothetically",
    "into",
    "just",
    "kindly",
    "know",
    "like",
    "make",
    "more",
    "much",
    "need",
    "novel",
    "only",
    "please",
    "purely",
    "purposes",
    "really",
    "research",
    "should",
    "some",
    "story",
    "tell",
    "than",
    "that",
    "their",
    "them",
    "then",
    "there",
    "they",
    "this",
    "very",
    "want",
    "were",
    "what",
    "when",
    "where",
    "which",
    "will",
    "with",
    "would",
    "write",
    "your",
];

/// The keyed hashes of a text's content words (normalized, four letters or more, not a
/// stopword), sorted and deduplicated, at most [`MAX_CONTENT_WORDS`].
pub fn content_words(secret: &ChainSecret, text: &str) -> Vec<u32> {
    let norm = normalize(text);
    let mut out: Vec<u32> = norm
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 4 && !STOPWORDS.contains(w))
        .map(|w| secret.word_hash(w))
        .collect();
    out.sort_unstable();
    out.dedup();
    out.truncate(MAX_CONTENT_WORDS);
    out
}

/// Whether `new` shares most of its content words with `old`: at least four, and at least
/// half of the smaller set. This catches a refused request reframed ("hypothetically, …",
/// "for a novel, …") where the 3-shingle SimHash moves too far.
pub fn shares_words(old: &[u32], new: &[u32]) -> bool {
    let shared = new.iter().filter(|w| old.binary_search(w).is_ok()).count();
    let smaller = old.len().min(new.len());
    shared >= MIN_SHARED_WORDS && shared * 2 >= smaller
}
