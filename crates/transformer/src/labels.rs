//! Which logits mean "attack": decided from the label names in `config.json`.

use crate::error::{Result, TransformerError};

/// Words that make a label positive (compared per word, case-insensitive, plural allowed).
pub const POSITIVE_WORDS: &[&str] = &[
    "INJECTION",
    "JAILBREAK",
    "MALICIOUS",
    "UNSAFE",
    "ATTACK",
    "HARMFUL",
];

/// Words that make a label negative whatever else it says (`NOT_INJECTION`, `SAFE`).
const NEGATIVE_WORDS: &[&str] = &["NOT", "NON", "NO", "BENIGN", "SAFE", "LEGIT", "LEGITIMATE"];

fn words(label: &str) -> Vec<String> {
    label
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_uppercase())
        .collect()
}

fn is_word(w: &str, list: &[&str]) -> bool {
    list.iter()
        .any(|k| w == *k || (w.len() == k.len() + 1 && w.starts_with(k) && w.ends_with('S')))
}

fn is_generic(label: &str) -> bool {
    label
        .strip_prefix("LABEL_")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The indices of the positive labels.
///
/// With `explicit` (the `positive_labels` option) every name must be a label of the model
/// (case-insensitive). Otherwise a label is positive when one of its words is in
/// [`POSITIVE_WORDS`] and none is a negation or a benign word (`SAFE`, `BENIGN`, `NOT` …);
/// a two-label model with generic names (`LABEL_0`, `LABEL_1`) counts `LABEL_1` as positive.
/// Anything else is an error that asks for `positive_labels`.
pub fn positive_indices(labels: &[String], explicit: Option<&[String]>) -> Result<Vec<usize>> {
    if let Some(names) = explicit {
        if names.is_empty() {
            return Err(TransformerError::Labels("positive_labels is empty".into()));
        }
        let mut out = Vec::new();
        for n in names {
            let i = labels
                .iter()
                .position(|l| l.eq_ignore_ascii_case(n))
                .ok_or_else(|| {
                    TransformerError::Labels(format!(
                        "positive label {n:?} is not a label of the model (labels: {})",
                        labels.join(", ")
                    ))
                })?;
            if !out.contains(&i) {
                out.push(i);
            }
        }
        out.sort_unstable();
        return check_not_all(labels, out);
    }
    let out: Vec<usize> = labels
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            let ws = words(l);
            ws.iter().any(|w| is_word(w, POSITIVE_WORDS))
                && !ws.iter().any(|w| is_word(w, NEGATIVE_WORDS))
        })
        .map(|(i, _)| i)
        .collect();
    if !out.is_empty() {
        return check_not_all(labels, out);
    }
    if labels.len() == 2 && labels.iter().all(|l| is_generic(l)) {
        return Ok(vec![1]);
    }
    Err(TransformerError::Labels(format!(
        "cannot tell which labels mean an attack from their names ({}); set positive_labels",
        labels.join(", ")
    )))
}

fn check_not_all(labels: &[String], out: Vec<usize>) -> Result<Vec<usize>> {
    if out.len() == labels.len() && labels.len() > 1 {
        return Err(TransformerError::Labels(format!(
            "every label is positive ({}): the score would always be 1; set positive_labels",
            labels.join(", ")
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_decide() {
        assert_eq!(
            positive_indices(&l(&["SAFE", "INJECTION"]), None).unwrap(),
            vec![1]
        );
        assert_eq!(
            positive_indices(&l(&["BENIGN", "MALICIOUS"]), None).unwrap(),
            vec![1]
        );
        assert_eq!(
            positive_indices(&l(&["BENIGN", "INJECTION", "JAILBREAK"]), None).unwrap(),
            vec![1, 2]
        );
        assert_eq!(
            positive_indices(&l(&["unsafe", "safe"]), None).unwrap(),
            vec![0]
        );
        assert_eq!(
            positive_indices(&l(&["not_injection", "prompt_injection"]), None).unwrap(),
            vec![1]
        );
        assert_eq!(
            positive_indices(&l(&["LABEL_0", "LABEL_1"]), None).unwrap(),
            vec![1]
        );
    }

    #[test]
    fn unclear_names_need_an_option() {
        let e = positive_indices(&l(&["POSITIVE", "NEGATIVE"]), None).unwrap_err();
        assert!(e.to_string().contains("positive_labels"), "{e}");
        assert!(positive_indices(&l(&["LABEL_0", "LABEL_1", "LABEL_2"]), None).is_err());
        assert_eq!(
            positive_indices(&l(&["POSITIVE", "NEGATIVE"]), Some(&l(&["negative"]))).unwrap(),
            vec![1]
        );
        assert!(positive_indices(&l(&["A", "B"]), Some(&l(&["C"]))).is_err());
        assert!(positive_indices(&l(&["A", "B"]), Some(&l(&["A", "b"]))).is_err());
    }
}
