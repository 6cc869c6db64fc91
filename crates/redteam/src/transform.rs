//! The transform trait, what a transform returns, and the seeded source of its choices.

use rampart_core::Segment;
use rampart_datasets::DatasetTurn;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde_json::Value;

/// The parameters a transform drew, by name (recorded with every variant).
pub type Params = serde_json::Map<String, Value>;

/// Longest input a transform is given; a longer prompt is skipped (recorded), so that the
/// most expansive transform (binary, 9 bytes per byte) stays under [`MAX_OUTPUT_BYTES`].
pub const MAX_INPUT_BYTES: usize = 16 * 1024;

/// Longest variant written (all its segments or turns together); a longer one is skipped.
/// Well under the scan limit (1 MiB), so a variant is never blocked for its size alone.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// Whose prompt is mutated. An attack's payload gets the attacker's framing (a lead-in that
/// asks to decode the payload and follow it); a benign prompt gets a neutral frame ("what
/// does this say?"), so that a benign variant is still benign and its false-positive rate
/// measures the transform, not an instruction the generator added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Intent {
    /// An attack record: the framing an attacker would use.
    #[default]
    Attack,
    /// A benign record: a neutral framing that asks nothing an honest user would not.
    Benign,
}

/// The seeded source of a transform's choices, and the [`Intent`] of the prompt. ChaCha8 is
/// value-stable across versions of `rand_chacha`, so a seed reproduces a variant byte for
/// byte.
#[derive(Debug, Clone)]
pub struct Draw {
    rng: ChaCha8Rng,
    intent: Intent,
}

impl Draw {
    /// A source seeded with `seed`, for an attack prompt.
    pub fn new(seed: u64) -> Self {
        Self::with_intent(seed, Intent::Attack)
    }

    /// A source seeded with `seed`, for a prompt of this intent. The intent draws nothing:
    /// an attack and a benign prompt with the same seed get the same parameters.
    pub fn with_intent(seed: u64, intent: Intent) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            intent,
        }
    }

    /// The intent of the prompt being mutated.
    pub fn intent(&self) -> Intent {
        self.intent
    }

    /// A source for a sub-transform: seeded from this one, with the same intent.
    pub fn child(&mut self) -> Self {
        let seed = self.seed();
        Self::with_intent(seed, self.intent)
    }

    /// A number in `0..n` (0 when `n` is 0). The modulo bias is below 2^-40 for the small
    /// `n` used here, and irrelevant to test generation.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.rng.next_u64() % n as u64) as usize
    }

    /// A fresh seed (for a sub-transform's own [`Draw`]).
    pub fn seed(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// `true` with probability `p` (in 0..=1).
    pub fn chance(&mut self, p: f64) -> bool {
        // 53 random bits as a float in [0, 1).
        ((self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// An index into `items` and the item (`None` for an empty slice).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<(usize, &'a T)> {
        if items.is_empty() {
            return None;
        }
        let i = self.below(items.len());
        Some((i, &items[i]))
    }
}

/// What a transform made of a prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// One text, in place of the original.
    Text(String),
    /// Several user segments (payload splitting across segments).
    Segments(Vec<Segment>),
    /// A conversation (payload splitting across turns) and the index of its first message
    /// that carries part of the payload.
    Turns {
        /// The messages; the last is a user turn.
        turns: Vec<DatasetTurn>,
        /// The first message that carries the payload.
        attack_turn: usize,
    },
}

impl Output {
    /// Bytes of text in the output, all parts together.
    pub fn len(&self) -> usize {
        match self {
            Output::Text(t) => t.len(),
            Output::Segments(s) => s.iter().map(|s| s.text.len()).sum(),
            Output::Turns { turns, .. } => turns.iter().map(|t| t.text.len()).sum(),
        }
    }

    /// Whether there is no text at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text, when the output is one text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Output::Text(t) => Some(t),
            _ => None,
        }
    }
}

/// The result of applying a transform.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The variant and the parameters drawn for it.
    Applied {
        /// The variant.
        output: Output,
        /// What was drawn.
        params: Params,
    },
    /// The transform cannot apply to this prompt; the reason is recorded, never dropped.
    /// Reasons are fixed phrases (no counts or text), so that they can be tallied.
    Skipped(&'static str),
}

impl Outcome {
    /// A text variant.
    pub fn text(output: String, params: Params) -> Self {
        Outcome::Applied {
            output: Output::Text(output),
            params,
        }
    }
}

/// One transform. Deterministic: the same input and the same [`Draw`] state give the same
/// outcome. It may assume the input is not blank and at most [`MAX_INPUT_BYTES`] long (the
/// registry checks both, and the output size, around every call).
pub trait Transform: Send + Sync + std::fmt::Debug {
    /// Makes a variant of `input`, or says why it cannot.
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome;
}

/// Builds a [`Params`] from `(name, value)` pairs.
pub fn params<const N: usize>(pairs: [(&str, Value); N]) -> Params {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// Skip reason: no ASCII letters for a letter-based transform.
pub const NO_ASCII_LETTERS: &str = "no ASCII letters to transform";
/// Skip reason: no letters at all.
pub const NO_LETTERS: &str = "no letters to transform";
/// Skip reason: too few words to split or drop.
pub const TOO_FEW_WORDS: &str = "too few words";
