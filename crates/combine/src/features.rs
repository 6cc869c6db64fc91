//! The combiner's inputs: one fixed, named vector of numbers per untrusted segment, read from
//! what the earlier layers decided and from the segment itself.
//!
//! The list is versioned ([`FEATURES_VERSION`]): a model names the features it was fitted on,
//! and a model whose names differ from the extractor's is refused at build time, so a model
//! can never be applied to numbers that mean something else.
//!
//! Nothing here grows or shrinks with text around the evidence: the classifier's best span
//! (the best window, or the whole segment when it is one window), the text measures of that
//! span, the rule findings (padding has none), the channel. (How many windows scored high is
//! not here either: windows that straddle the padding and the evidence change that count.) An attack behind 200 B or 20 KB of ordinary prose gets
//! the same numbers, so the same decision (crates/cli/tests/dilution.rs); an earlier list
//! with the segment's length and whole-text score let padding talk the combiner out of a
//! block.
//!
//! What is not here, and why: the request's shape (how many segments, whether a system
//! prompt is present) and the conversation state's numbers. The only labelled conversations
//! outside the evaluation sets are benign (ShareGPT), so any feature that tells a
//! conversation turn from a single prompt is learned as "benign" and would hide attacks that
//! arrive in a conversation; the conversation layers decide those on their own.
//!
//! **The judge** (optional, `judge = "judge"` on the layer): the intent layer is asked only
//! on some requests (the unsure band, rules that need judgement), so its two features say
//! whether it gave a score and which: `judge.asked` (1 when the judge layer finished with a
//! score-mode probability, else 0) and `judge.logodds` (its log-odds / 4; 0 when not asked).
//! A judge that was not asked, whose call failed (timeout, HTTP error, budget, replay miss:
//! the layer failed, and its own fail mode decides the request) or that answered in the
//! structured mode (no probability) reads as not asked: never as a benign score. Its one
//! score is the request's, so every untrusted segment of the request reads it. The judge's
//! own findings are not counted as rule findings. Without a judge input the list is
//! exactly version 1's, so a model fitted without the judge keeps loading; with one, the two
//! names follow the text measures, and a model names which judge layer it was fitted on.
//!
//! Scores enter as log-odds divided by 4 (a probability clamped to `[1e-4, 1 - 1e-4]`, so
//! about ±2.3), counts and lengths as logarithms, shares as fractions: every feature stays in
//! a few units whatever the input, and no single one can dominate by its scale.

use rampart_core::{Category, Earlier, Role, ScanInput, SegmentInput, Span, Strength, Trust};

/// Version of the feature list (bumped whenever a name, its order or its meaning changes).
pub const FEATURES_VERSION: u32 = 1;

/// Probabilities are clamped to `[EPS, 1 - EPS]` before taking log-odds.
const EPS: f32 = 1e-4;

/// Roles with a feature of their own; `user` is the baseline (all zero).
const ROLE_FEATURES: [(Role, &str); 3] = [
    (Role::Tool, "role.tool"),
    (Role::Retrieved, "role.retrieved"),
    (Role::Assistant, "role.assistant"),
];

/// Computes the feature vector of each untrusted segment. Built once from the names of the
/// classifier layers it reads (`inputs`, in order).
#[derive(Debug, Clone, PartialEq)]
pub struct Extractor {
    inputs: Vec<String>,
    judge: Option<String>,
    names: Vec<String>,
}

/// One untrusted segment's features.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentFeatures {
    /// Index of the segment in the request.
    pub segment: usize,
    /// Its role.
    pub role: Role,
    /// The values, in [`Extractor::names`] order.
    pub values: Vec<f32>,
    /// Where a decision on this segment points: the best span of the first input layer that
    /// scored it, else the whole segment.
    pub anchor: Span,
}

impl Extractor {
    /// An extractor reading the classifier layers named `inputs` (in that order).
    pub fn new(inputs: Vec<String>) -> Extractor {
        Extractor::with_judge(inputs, None)
    }

    /// An extractor reading the classifier layers named `inputs` and, when given, the judge
    /// layer named `judge` (its `judge.asked` and `judge.logodds` features, see the module
    /// docs).
    pub fn with_judge(inputs: Vec<String>, judge: Option<String>) -> Extractor {
        let names = feature_names(&inputs, judge.as_deref());
        Extractor {
            inputs,
            judge,
            names,
        }
    }

    /// The classifier layers read.
    pub fn inputs(&self) -> &[String] {
        &self.inputs
    }

    /// The judge layer read, if any.
    pub fn judge(&self) -> Option<&str> {
        self.judge.as_deref()
    }

    /// Every earlier layer read: the classifiers, then the judge.
    pub fn layers(&self) -> Vec<String> {
        self.inputs.iter().chain(&self.judge).cloned().collect()
    }

    /// The feature names, in vector order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The features of every untrusted segment, in segment order. Fails when an input
    /// layer's score is not a finite number (a broken model must not combine into a silent
    /// ALLOW).
    pub fn extract(
        &self,
        input: &ScanInput<'_>,
        earlier: &Earlier<'_>,
    ) -> Result<Vec<SegmentFeatures>, NotFinite> {
        let judge = self.judge_values(earlier)?;
        let mut out = Vec::new();
        for seg in input
            .segments
            .iter()
            .filter(|s| s.trust == Trust::Untrusted)
        {
            out.push(self.segment(earlier, seg, judge)?);
        }
        Ok(out)
    }

    /// The judge's two features for this request (`None` without a judge input): asked and
    /// its log-odds when the judge layer finished with a score; not asked when it was not
    /// called, failed, timed out or gave a verdict without a probability.
    fn judge_values(&self, earlier: &Earlier<'_>) -> Result<Option<[f32; 2]>, NotFinite> {
        let Some(name) = &self.judge else {
            return Ok(None);
        };
        // `score_of` is `None` unless the layer finished (status ok) with a score.
        match earlier.score_of(name) {
            Some(s) if !s.is_finite() => Err(NotFinite {
                layer: name.clone(),
                score: s,
            }),
            Some(s) => Ok(Some([1.0, log_odds(s)])),
            None => Ok(Some([0.0, 0.0])),
        }
    }

    fn segment(
        &self,
        earlier: &Earlier<'_>,
        seg: &SegmentInput<'_>,
        judge: Option<[f32; 2]>,
    ) -> Result<SegmentFeatures, NotFinite> {
        let mut v: Vec<f32> = Vec::with_capacity(self.names.len());
        let whole_span = Span {
            start: 0,
            end: seg.text.len(),
        };
        let mut anchor = None;
        for name in &self.inputs {
            let spans: Vec<_> = earlier
                .spans_of(name)
                .iter()
                .filter(|s| s.segment == seg.index)
                .collect();
            if let Some(bad) = spans.iter().find(|s| !s.score.is_finite()) {
                return Err(NotFinite {
                    layer: name.clone(),
                    score: bad.score,
                });
            }
            // Spans come highest first. The best window, when the segment was cut into
            // windows: the whole segment's score moves with the text around the evidence.
            let best = spans
                .iter()
                .find(|s| s.span != whole_span)
                .or(spans.first());
            match best {
                Some(best) => {
                    v.extend([log_odds(best.score), 0.0]);
                    if anchor.is_none() {
                        anchor = Some(best.span);
                    }
                }
                None => v.extend([0.0, 1.0]),
            }
        }
        self.rule_features(earlier, seg.index, &mut v);
        for (role, _) in ROLE_FEATURES {
            v.push(f32::from(u8::from(seg.role == role)));
        }
        let anchor = anchor.unwrap_or(whole_span);
        let text = seg.text.get(anchor.start..anchor.end).unwrap_or(seg.text);
        text_features(text, &mut v);
        if let Some(j) = judge {
            v.extend(j);
        }
        debug_assert_eq!(v.len(), self.names.len());
        Ok(SegmentFeatures {
            segment: seg.index,
            role: seg.role,
            values: v,
            anchor,
        })
    }

    /// Per category, the counted weak findings (up to three) and whether a strong one
    /// occurred, from every earlier layer that is neither an input classifier nor the judge;
    /// then whether any was found only after decoding.
    fn rule_features(&self, earlier: &Earlier<'_>, segment: usize, v: &mut Vec<f32>) {
        let findings: Vec<_> = earlier
            .findings
            .iter()
            .filter(|f| {
                f.segment == segment
                    && f.counted
                    && !self.inputs.contains(&f.layer)
                    && self.judge.as_ref() != Some(&f.layer)
            })
            .collect();
        for cat in Category::ALL {
            let weak = findings
                .iter()
                .filter(|f| f.category == cat && f.strength == Strength::Weak)
                .count()
                .min(3) as f32;
            let strong = findings
                .iter()
                .any(|f| f.category == cat && f.strength == Strength::Strong);
            v.push(weak / 3.0);
            v.push(f32::from(u8::from(strong)));
        }
        v.push(f32::from(u8::from(
            findings.iter().any(|f| !f.via.is_empty()),
        )));
    }
}

/// An input layer gave a score that is not a number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("input layer {layer:?} gave a score that is not a number: {score}")]
pub struct NotFinite {
    /// The layer.
    pub layer: String,
    /// Its score.
    pub score: f32,
}

fn log_odds(p: f32) -> f32 {
    let p = p.clamp(EPS, 1.0 - EPS);
    (p / (1.0 - p)).ln() / 4.0
}

fn feature_names(inputs: &[String], judge: Option<&str>) -> Vec<String> {
    let mut names = Vec::new();
    for l in inputs {
        for part in ["best", "missing"] {
            names.push(format!("{l}.{part}"));
        }
    }
    for cat in Category::ALL {
        names.push(format!("rules.{}.weak", cat.name()));
        names.push(format!("rules.{}.strong", cat.name()));
    }
    names.push("rules.decoded".into());
    names.extend(ROLE_FEATURES.iter().map(|(_, n)| (*n).to_string()));
    for n in TEXT_FEATURES {
        names.push(n.into());
    }
    if let Some(j) = judge {
        names.push(format!("{j}.asked"));
        names.push(format!("{j}.logodds"));
    }
    names
}

const TEXT_FEATURES: [&str; 7] = [
    "text.log_bytes",
    "text.log_lines",
    "text.non_ascii",
    "text.non_latin_letters",
    "text.symbols",
    "text.digits",
    "text.upper_letters",
];

/// Length and make-up of the text: code, logs and tables read differently from prose, and
/// non-Latin scripts differently from English, to the classifiers this layer corrects.
fn text_features(text: &str, v: &mut Vec<f32>) {
    let (mut chars, mut non_ascii, mut letters, mut non_latin) = (0u32, 0u32, 0u32, 0u32);
    let (mut visible, mut symbols, mut digits, mut upper) = (0u32, 0u32, 0u32, 0u32);
    for c in text.chars() {
        chars += 1;
        if !c.is_ascii() {
            non_ascii += 1;
        }
        if c.is_alphabetic() {
            letters += 1;
            if !is_latin(c) {
                non_latin += 1;
            }
            if c.is_uppercase() {
                upper += 1;
            }
        }
        if !c.is_whitespace() {
            visible += 1;
            if c.is_ascii_punctuation() {
                symbols += 1;
            }
            if c.is_ascii_digit() {
                digits += 1;
            }
        }
    }
    let share = |n: u32, of: u32| if of == 0 { 0.0 } else { n as f32 / of as f32 };
    let lines = text.lines().count() as f32;
    v.push((text.len() as f32).ln_1p() / 10.0);
    v.push(lines.ln_1p() / 5.0);
    v.push(share(non_ascii, chars));
    v.push(share(non_latin, letters));
    v.push(share(symbols, visible));
    v.push(share(digits, visible));
    v.push(share(upper, letters));
}

/// Latin letters: ASCII, Latin-1, Latin Extended A/B, IPA, Latin Extended Additional.
fn is_latin(c: char) -> bool {
    matches!(c as u32, 0..=0x024F | 0x0250..=0x02AF | 0x1E00..=0x1EFF | 0xFF21..=0xFF5A)
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn names_are_unique_and_counted() {
        let e = Extractor::new(vec!["linear".into(), "minilm".into()]);
        let mut n = e.names().to_vec();
        let len = n.len();
        n.sort();
        n.dedup();
        assert_eq!(n.len(), len);
        assert_eq!(len, 4 + 15 + 3 + 7);
    }

    #[test]
    fn a_judge_appends_two_names_and_leaves_the_rest_as_version_1() {
        let plain = Extractor::new(vec!["linear".into()]);
        let judged = Extractor::with_judge(vec!["linear".into()], Some("judge".into()));
        assert_eq!(judged.names().len(), plain.names().len() + 2);
        assert_eq!(&judged.names()[..plain.names().len()], plain.names());
        assert_eq!(
            &judged.names()[plain.names().len()..],
            ["judge.asked", "judge.logodds"]
        );
        assert_eq!(judged.layers(), ["linear", "judge"]);
        assert_eq!(plain.layers(), ["linear"]);
    }

    #[test]
    fn text_features_stay_in_range_on_mixed_scripts() {
        let mut v = Vec::new();
        text_features("Привет, мир! Hello 123 — नमस्ते", &mut v);
        assert_eq!(v.len(), TEXT_FEATURES.len());
        assert!(v.iter().all(|x| (0.0..=1.0).contains(x)), "{v:?}");
        assert!(v[3] > 0.5, "most letters are not Latin: {v:?}");
    }
}
