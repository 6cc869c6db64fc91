//! The metric formulas of `pattern_candidates.v1` (see the crate documentation for the
//! rationale). Every function returns a value in 0..1, rounded to 4 decimals, so that what is
//! written is what is sorted on.

use crate::record::Metrics;

/// The false-positive-rate budget a single pattern is measured against (the FPR gate on the
/// clean benign corpus is 2.0%). A pattern that alone matches this share of benign prompts
/// has `fp_risk_score` 1.
pub const FPR_BUDGET: f64 = 0.02;

/// Characters at which a pattern counts as fully specific in `rarity_score`.
pub const SPECIFIC_CHARS: f64 = 20.0;

/// Weights of `priority_score` (FN coverage, TP support, rarity); they sum to 1.
pub const PRIORITY_WEIGHTS: (f64, f64, f64) = (0.6, 0.1, 0.3);

/// Counts the metrics are computed from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MetricInputs {
    /// False negatives the pattern matches, over all mined datasets.
    pub fn_matched: u64,
    /// All false negatives of the mined datasets.
    pub fn_total: u64,
    /// True positives the pattern matches.
    pub tp_matched: u64,
    /// All true positives.
    pub tp_total: u64,
    /// Clean-benign-corpus prompts the pattern matches.
    pub corpus_matched: u64,
    /// Prompts in the clean benign corpus.
    pub corpus_total: u64,
    /// Benign prompts (FP + TN) of the mined logs the pattern matches (the corpus's own log
    /// excluded, it is counted above).
    pub log_benign_matched: u64,
    /// Benign prompts of the mined logs (the corpus's own log excluded).
    pub log_benign_total: u64,
    /// Distinct prompts, mined and corpus, the pattern matches.
    pub all_matched: u64,
    /// Distinct prompts, mined and corpus.
    pub all_total: u64,
    /// Characters in the normalized pattern.
    pub pattern_chars: usize,
}

/// Rounds to 4 decimals and clamps to 0..1 (NaN becomes 0).
pub fn round4(x: f64) -> f64 {
    if x.is_nan() {
        return 0.0;
    }
    ((x.clamp(0.0, 1.0)) * 10_000.0).round() / 10_000.0
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// `fn_matched / fn_total` (0 when there is no false negative).
pub fn fn_coverage_rate(m: &MetricInputs) -> f64 {
    ratio(m.fn_matched, m.fn_total)
}

/// `tp_matched / tp_total` (0 when there is no true positive).
pub fn tp_support_rate(m: &MetricInputs) -> f64 {
    ratio(m.tp_matched, m.tp_total)
}

/// The worse benign match rate (clean corpus, benign prompts in the logs), as a share of the
/// [`FPR_BUDGET`], capped at 1. 0 when the pattern matches no benign prompt.
pub fn fp_risk_score(m: &MetricInputs) -> f64 {
    let rate = ratio(m.corpus_matched, m.corpus_total)
        .max(ratio(m.log_benign_matched, m.log_benign_total));
    (rate / FPR_BUDGET).min(1.0)
}

/// Half inverse document frequency over every prompt seen (a pattern in most prompts is
/// generic), half length (`chars / 20`, capped at 1: "ignore" is less specific than
/// "do anything now").
pub fn rarity_score(m: &MetricInputs) -> f64 {
    let df = ratio(m.all_matched, m.all_total);
    0.5 * (1.0 - df) + 0.5 * (m.pattern_chars as f64 / SPECIFIC_CHARS).min(1.0)
}

/// `(1 - fp_risk) × (0.6·√fn_coverage + 0.1·√tp_support + 0.3·rarity)`. The square roots
/// keep small coverages apart (one pattern rarely explains more than a few percent of the
/// misses); the factor `(1 - fp_risk)` sends anything that eats the FPR budget to the bottom.
pub fn priority_score(fn_coverage: f64, tp_support: f64, fp_risk: f64, rarity: f64) -> f64 {
    let (wf, wt, wr) = PRIORITY_WEIGHTS;
    (1.0 - fp_risk) * (wf * fn_coverage.sqrt() + wt * tp_support.sqrt() + wr * rarity)
}

/// All five metrics, rounded; the priority is computed from the rounded parts.
pub fn compute(m: &MetricInputs) -> Metrics {
    let fn_coverage_rate = round4(fn_coverage_rate(m));
    let tp_support_rate = round4(tp_support_rate(m));
    let fp_risk_score = round4(fp_risk_score(m));
    let rarity_score = round4(rarity_score(m));
    Metrics {
        fn_coverage_rate,
        tp_support_rate,
        fp_risk_score,
        rarity_score,
        priority_score: round4(priority_score(
            fn_coverage_rate,
            tp_support_rate,
            fp_risk_score,
            rarity_score,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> MetricInputs {
        MetricInputs {
            fn_matched: 9,
            fn_total: 100,
            tp_matched: 3,
            tp_total: 300,
            corpus_matched: 0,
            corpus_total: 240,
            log_benign_matched: 0,
            log_benign_total: 0,
            all_matched: 12,
            all_total: 640,
            pattern_chars: 7,
        }
    }

    #[test]
    fn hand_computed() {
        let m = compute(&inputs());
        assert_eq!(m.fn_coverage_rate, 0.09);
        assert_eq!(m.tp_support_rate, 0.01);
        assert_eq!(m.fp_risk_score, 0.0);
        // 0.5 * (1 - 12/640) + 0.5 * 7/20 = 0.490625 + 0.175
        assert_eq!(m.rarity_score, 0.6656);
        // 0.6 * 0.3 + 0.1 * 0.1 + 0.3 * 0.6656 = 0.18 + 0.01 + 0.19968
        assert_eq!(m.priority_score, 0.3897);
    }

    #[test]
    fn benign_matches_scale_to_the_budget() {
        let mut i = inputs();
        i.corpus_matched = 1; // 1/240 = 0.41667% of a 2% budget
        assert_eq!(compute(&i).fp_risk_score, 0.2083);
        i.corpus_matched = 5; // 2.08% > budget
        let m = compute(&i);
        assert_eq!(m.fp_risk_score, 1.0);
        assert_eq!(m.priority_score, 0.0);
        // The logs' benign prompts count too; the worse rate wins.
        i.corpus_matched = 0;
        i.log_benign_matched = 1;
        i.log_benign_total = 100;
        assert_eq!(compute(&i).fp_risk_score, 0.5);
    }

    #[test]
    fn empty_classes_are_zero_not_nan() {
        let m = compute(&MetricInputs::default());
        assert_eq!(
            (m.fn_coverage_rate, m.tp_support_rate, m.fp_risk_score),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(m.rarity_score, 0.5);
        assert_eq!(m.priority_score, 0.15);
    }

    #[test]
    fn longer_and_rarer_is_more_specific() {
        let mut i = inputs();
        let short = rarity_score(&i);
        i.pattern_chars = 30;
        assert!(rarity_score(&i) > short);
        i.all_matched = 600;
        assert!(rarity_score(&i) < 0.6);
    }
}
