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
