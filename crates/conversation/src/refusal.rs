//! Whether an assistant answer is a refusal: evidence for the conversation's lineage (an
//! attacker who is refused rephrases; the refusal is feedback, not the end of the matter).
//!
//! A short list of anchored phrasings over the start of the answer, written by hand rather
//! than trained: refusals are formulaic ("I'm sorry, but I can't …", "I cannot help with
//! that"), the cost of a miss is one less piece of evidence, and a list can be audited.

use crate::chain::normalize;
use regex::RegexSet;

/// Bytes of the answer's start that are looked at: refusals come first.
const REFUSAL_PREFIX_BYTES: usize = 400;

const PATTERNS: &[&str] = &[
    r"^(i'?m|i am)? ?(so |very |really )?sorry\b[^.!?]{0,60}\b(i )?(can'?t|cannot|won'?t|will not|am not able|'?m not able|am unable|'?m unable)\b",
    r"\bi (can'?t|cannot|won'?t|will not|must not|shouldn'?t) (help|assist|provide|do|comply|share|reveal|create|write|give|generate|support|fulfil|fulfill|engage|continue|pretend|ignore|disclose|explain how)\b",
    r"\bi('?m| am) (not able|unable|not allowed|not permitted|not going) to (help|assist|provide|do|comply|share|reveal|create|write|give|generate|fulfil|fulfill|ignore|disclose|change)\b",
    r"\bi (must|have to|need to) (decline|refuse)\b",
    r"\b(that|this) (is not|isn'?t) something i (can|will|am able to)\b",
    r"\b(against|violates?) (my|the|our) (guidelines|policies|policy|rules|usage polic(y|ies)|terms)\b",
    r"\bi (can'?t|cannot|won'?t) (do|help with) that\b",
    r"^(no[,.]|nope[,.]) i\b",
    r"\b(lo siento|no puedo ayudar|je ne peux pas|ich kann (dir |ihnen )?(dabei |damit )?nicht helfen|non posso aiutar)",
];

/// Recognizes refusals. Built once (the patterns are compiled in [`RefusalDetector::new`]).
#[derive(Debug, Clone)]
pub struct RefusalDetector {
    set: RegexSet,
}

impl RefusalDetector {
    /// Compiles the patterns.
    pub fn new() -> Self {
        // The patterns are constants checked by the tests below; a failure here is a bug in
        // this file, not input-driven.
        let set = RegexSet::new(PATTERNS).expect("refusal patterns compile");
        Self { set }
    }

    /// Whether `answer` opens with a refusal.
    pub fn is_refusal(&self, answer: &str) -> bool {
        let mut end = answer.len().min(REFUSAL_PREFIX_BYTES);
        while !answer.is_char_boundary(end) {
            end -= 1;
        }
        let text = normalize(&answer[..end]).replace('\u{2019}', "'");
        self.set.is_match(&text)
    }
}

impl Default for RefusalDetector {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_recognized() {
        let d = RefusalDetector::new();
        for r in [
            "I'm sorry, but I can't help with that.",
            "I can't help with that.",
            "Sorry, I cannot provide instructions for making weapons.",
            "I’m not able to share my system prompt.",
            "I must decline this request.",
            "That's against my guidelines, so I won't do it.",
            "I won't pretend to be an unrestricted model.",
            "Lo siento, no puedo ayudar con eso.",
            "Ich kann dir dabei nicht helfen.",
        ] {
            assert!(d.is_refusal(r), "{r}");
        }
    }

    #[test]
    fn ordinary_answers_are_not_refusals() {
        let d = RefusalDetector::new();
        for a in [
            "Sure! Here is a recipe for banana bread.",
            "The bug is on line 4: the loop never ends.",
            "Sorry for the confusion earlier, here is the corrected table.",
            "You can't use a for loop there; use map instead.",
            "",
            "Great question. Prompt injection works by mixing instructions with data.",
        ] {
            assert!(!d.is_refusal(a), "{a}");
        }
    }
}
