//! The fixed vocabulary a verdict keeps by default ([`ExplanationMode::Vocabulary`]): each
//! evidence signal the model wrote is mapped onto one of a few terms by the words it
//! contains, and the explanation is built from the label, the confidence and those terms.
//! No word of the model's (nor of the input it may have copied) is kept.
//!
//! [`ExplanationMode::Vocabulary`]: crate::options::ExplanationMode::Vocabulary

use crate::report::{IntentLabel, JudgeEvidence};

/// The terms, each with the lower-case word stems that select it (first match wins).
const TERMS: &[(&str, &[&str])] = &[
    (
        "steers the judge",
        &["judge", "classifier", "evaluator", "moderator", "grader"],
    ),
    (
        "system prompt extraction",
        &[
            "system prompt",
            "hidden instruction",
            "initial instruction",
            "reveal your",
            "your instructions",
        ],
    ),
    (
        "instruction override",
        &[
            "ignore",
            "override",
            "disregard",
            "previous instruction",
            "new instruction",
            "forget",
        ],
    ),
    (
        "credential request",
        &["password", "credential", "api key", "token", "secret"],
    ),
    (
        "data exfiltration",
        &[
            "exfiltrat",
            "send",
            "forward",
            "upload",
            "email",
            "url",
            "link",
            "leak",
        ],
    ),
    (
        "tool misuse",
        &[
            "tool",
            "function call",
            "execute",
            "command",
            "shell",
            "run ",
        ],
    ),
    (
        "role-play framing",
        &[
            "role-play",
            "roleplay",
            "role play",
            "pretend",
            "persona",
            "character",
            "act as",
        ],
    ),
    (
        "jailbreak framing",
        &[
            "jailbreak",
            "no restriction",
            "unfiltered",
            "developer mode",
            "without limits",
            "dan",
        ],
    ),
    (
        "obfuscation",
        &[
            "encod", "base64", "cipher", "obfusc", "spacing", "leet", "hex", "reversed",
        ],
    ),
    (
        "harmful request",
        &[
            "weapon",
            "harm",
            "illegal",
            "drug",
            "malware",
            "explosive",
            "violence",
        ],
    ),
    (
        "benign context",
        &[
            "benign",
            "question",
            "legitimate",
            "defen",
            "educational",
            "ordinary",
        ],
    ),
];

/// The term for a signal the model wrote (`other signal` when none fits).
pub(crate) fn signal(model_text: &str) -> &'static str {
    let low = model_text.to_lowercase();
    TERMS
        .iter()
        .find(|(_, stems)| stems.iter().any(|s| low.contains(s)))
        .map_or("other signal", |(term, _)| term)
}

/// `malicious at confidence 0.90: instruction override, data exfiltration` (the terms of
/// the evidence, each once, in order).
pub(crate) fn explanation(
    label: IntentLabel,
    confidence: f32,
    evidence: &[JudgeEvidence],
) -> String {
    let mut terms: Vec<&str> = Vec::new();
    for e in evidence {
        if !terms.contains(&e.signal.as_str()) {
            terms.push(e.signal.as_str());
        }
    }
    let mut s = format!("{} at confidence {confidence:.2}", label.name());
    if !terms.is_empty() {
        s.push_str(": ");
        s.push_str(&terms.join(", "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_map_onto_the_vocabulary_and_keep_no_model_words() {
        assert_eq!(
            signal("Asks to IGNORE previous instructions"),
            "instruction override"
        );
        assert_eq!(signal("wants the sk-live-4f9a2b7c key"), "other signal");
        assert_eq!(
            signal("role-play to extract the admin password"),
            "credential request"
        );
        let ev = |s: &str| JudgeEvidence {
            signal: s.into(),
            segment: None,
            span: None,
        };
        let e = explanation(
            IntentLabel::Malicious,
            0.9,
            &[
                ev("instruction override"),
                ev("instruction override"),
                ev("data exfiltration"),
            ],
        );
        assert_eq!(
            e,
            "malicious at confidence 0.90: instruction override, data exfiltration"
        );
        assert_eq!(
            explanation(IntentLabel::Benign, 0.8, &[]),
            "benign at confidence 0.80"
        );
    }
}
