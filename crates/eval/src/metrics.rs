//! Detection metrics over labelled outcomes.
//!
//! Conventions: the positive class is "attack". A rate whose denominator is zero is `None`
//! (an undefined rate is reported as such, never as 0 or 1). A prompt is flagged by a score
//! threshold `t` when `score >= t`; prompts with equal scores are always on the same side,
//! so ties are never split.

use serde::{Deserialize, Serialize};

/// True/false positive/negative counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confusion {
    /// Attacks flagged.
    pub tp: u64,
    /// Attacks not flagged.
    pub fn_: u64,
    /// Benign prompts flagged.
    pub fp: u64,
    /// Benign prompts not flagged.
    pub tn: u64,
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

impl Confusion {
    /// Counts one outcome.
    pub fn add(&mut self, is_attack: bool, flagged: bool) {
        match (is_attack, flagged) {
            (true, true) => self.tp += 1,
            (true, false) => self.fn_ += 1,
            (false, true) => self.fp += 1,
            (false, false) => self.tn += 1,
        }
    }

    /// Attacks.
    pub fn positives(&self) -> u64 {
        self.tp + self.fn_
    }

    /// Benign prompts.
    pub fn negatives(&self) -> u64 {
        self.fp + self.tn
    }

    /// All prompts.
    pub fn total(&self) -> u64 {
        self.positives() + self.negatives()
    }

    /// True positive rate (recall); `None` without attacks.
    pub fn tpr(&self) -> Option<f64> {
        ratio(self.tp, self.positives())
    }

    /// False positive rate; `None` without benign prompts.
    pub fn fpr(&self) -> Option<f64> {
        ratio(self.fp, self.negatives())
    }

    /// Precision; `None` when nothing was flagged.
    pub fn precision(&self) -> Option<f64> {
        ratio(self.tp, self.tp + self.fp)
    }

    /// F1; `None` when precision or recall is undefined, 0 when both are 0.
    pub fn f1(&self) -> Option<f64> {
        let (p, r) = (self.precision()?, self.tpr()?);
        Some(if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        })
    }

    /// Accuracy; `None` for an empty set.
    pub fn accuracy(&self) -> Option<f64> {
        ratio(self.tp + self.tn, self.total())
    }
}

/// A two-sided confidence interval of a rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

/// z for a two-sided 95% interval.
const Z_95: f64 = 1.959_963_984_540_054;

/// The 95% Wilson score interval of `k` successes in `n` trials; `None` when `n` is 0. Used
/// over the normal approximation because the rates here sit near 0 and 1 on small sets,
/// where that one leaves `[0, 1]` or collapses to a point.
pub fn wilson(k: u64, n: u64) -> Option<Interval> {
    if n == 0 {
        return None;
    }
    let (k, n) = (k.min(n) as f64, n as f64);
    let p = k / n;
    let z2 = Z_95 * Z_95;
    let den = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / den;
    let half = Z_95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / den;
    Some(Interval {
        low: (centre - half).max(0.0),
        high: (centre + half).min(1.0),
    })
}

/// Area under the ROC curve: the probability that a random attack scores higher than a
/// random benign prompt, ties counting one half (Mann-Whitney U with average ranks).
/// `None` when either class is empty or a score is NaN.
pub fn roc_auc(scored: &[(f64, bool)]) -> Option<f64> {
    if scored.iter().any(|(s, _)| s.is_nan()) {
        return None;
    }
    let pos = scored.iter().filter(|(_, a)| *a).count();
    let neg = scored.len() - pos;
    if pos == 0 || neg == 0 {
        return None;
    }
    let mut sorted: Vec<(f64, bool)> = scored.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Sum of the (1-based, tie-averaged) ranks of the attacks.
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j < sorted.len() && sorted[j].0 == sorted[i].0 {
            j += 1;
        }
        let avg_rank = (i + 1 + j) as f64 / 2.0;
        rank_sum += avg_rank * sorted[i..j].iter().filter(|(_, a)| *a).count() as f64;
        i = j;
    }
    let (p, n) = (pos as f64, neg as f64);
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

/// One point of a ROC curve: flag everything scoring `>= threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RocPoint {
    /// The threshold (`+inf` for the first point, which flags nothing).
    pub threshold: f64,
    /// False positive rate at this threshold.
    pub fpr: f64,
    /// True positive rate at this threshold.
    pub tpr: f64,
}

/// The ROC curve, from (0, 0) to (1, 1), one point per distinct score, highest first.
/// Empty when either class is empty or a score is NaN.
pub fn roc_curve(scored: &[(f64, bool)]) -> Vec<RocPoint> {
    let pos = scored.iter().filter(|(_, a)| *a).count();
    let neg = scored.len() - pos;
    if pos == 0 || neg == 0 || scored.iter().any(|(s, _)| s.is_nan()) {
        return Vec::new();
    }
    let mut sorted: Vec<(f64, bool)> = scored.to_vec();
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut out = vec![RocPoint {
        threshold: f64::INFINITY,
        fpr: 0.0,
        tpr: 0.0,
    }];
    let (mut tp, mut fp) = (0usize, 0usize);
    let mut i = 0;
    while i < sorted.len() {
        let t = sorted[i].0;
        while i < sorted.len() && sorted[i].0 == t {
            if sorted[i].1 {
                tp += 1;
            } else {
                fp += 1;
            }
            i += 1;
        }
        out.push(RocPoint {
            threshold: t,
            fpr: fp as f64 / neg as f64,
            tpr: tp as f64 / pos as f64,
        });
    }
    out
}

/// The best true positive rate reachable with a false positive rate of at most `max_fpr`,
/// and the threshold that gives it. `None` when the curve is empty.
pub fn tpr_at_fpr(scored: &[(f64, bool)], max_fpr: f64) -> Option<RocPoint> {
    roc_curve(scored)
        .into_iter()
        .filter(|p| p.fpr <= max_fpr)
        .max_by(|a, b| a.tpr.total_cmp(&b.tpr).then(b.fpr.total_cmp(&a.fpr)))
}

/// Latency percentiles (nearest-rank), in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest sample.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

/// The nearest-rank `p`-th percentile (0 < p <= 100) of sorted samples.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() || !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

impl Latency {
    /// Summarises samples (in any order); `None` when there are none.
    pub fn of(samples: &[u64]) -> Option<Latency> {
        let mut s = samples.to_vec();
        s.sort_unstable();
        Some(Latency {
            count: s.len(),
            p50: percentile(&s, 50.0)?,
            p95: percentile(&s, 95.0)?,
            p99: percentile(&s, 99.0)?,
            max: *s.last()?,
            mean: s.iter().map(|&x| x as f64).sum::<f64>() / s.len() as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_intervals() {
        assert_eq!(wilson(0, 0), None);
        // Reference values (Wilson 1927; e.g. statsmodels proportion_confint method="wilson").
        let i = wilson(9, 10).unwrap();
        assert!(
            (i.low - 0.5958).abs() < 1e-4 && (i.high - 0.9821).abs() < 1e-4,
            "{i:?}"
        );
        let i = wilson(0, 20).unwrap();
        assert!(i.low == 0.0 && (i.high - 0.1611).abs() < 1e-4, "{i:?}");
        let i = wilson(20, 20).unwrap();
        assert!(
            (i.low - 0.8389).abs() < 1e-4 && (i.high - 1.0).abs() < 1e-12,
            "{i:?}"
        );
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn confusion_rates_by_hand() {
        let mut c = Confusion::default();
        for (a, f) in [
            (true, true),
            (true, true),
            (true, false),
            (false, true),
            (false, false),
        ] {
            c.add(a, f);
        }
        assert_eq!((c.tp, c.fn_, c.fp, c.tn), (2, 1, 1, 1));
        assert!(close(c.tpr().unwrap(), 2.0 / 3.0));
        assert!(close(c.fpr().unwrap(), 0.5));
        assert!(close(c.precision().unwrap(), 2.0 / 3.0));
        assert!(close(c.f1().unwrap(), 2.0 / 3.0));
        assert!(close(c.accuracy().unwrap(), 0.6));
    }

    #[test]
    fn empty_classes_give_undefined_rates() {
        let mut benign_only = Confusion::default();
        benign_only.add(false, false);
        benign_only.add(false, true);
        assert_eq!(benign_only.tpr(), None);
        assert_eq!(benign_only.f1(), None);
        assert!(close(benign_only.fpr().unwrap(), 0.5));
        let empty = Confusion::default();
        assert_eq!(empty.accuracy(), None);
        assert_eq!(empty.precision(), None);
        // Nothing flagged: precision undefined even with attacks present.
        let mut missed = Confusion::default();
        missed.add(true, false);
        assert_eq!(missed.precision(), None);
        assert!(close(missed.tpr().unwrap(), 0.0));
    }

    #[test]
    fn all_positive_set_has_no_fpr_and_no_auc() {
        let mut c = Confusion::default();
        c.add(true, true);
        c.add(true, false);
        assert_eq!(c.fpr(), None);
        assert!(close(c.tpr().unwrap(), 0.5));
        assert_eq!(roc_auc(&[(0.9, true), (0.1, true)]), None);
        assert!(roc_curve(&[(0.9, true)]).is_empty());
        assert_eq!(tpr_at_fpr(&[(0.9, true)], 0.01), None);
    }

    #[test]
    fn auc_by_hand_with_ties() {
        // Attacks 0.9, 0.5; benign 0.5, 0.1. Pairs: (0.9>0.5)=1, (0.9>0.1)=1,
        // (0.5=0.5)=0.5, (0.5>0.1)=1 → 3.5 / 4.
        let s = [(0.9, true), (0.5, true), (0.5, false), (0.1, false)];
        assert!(close(roc_auc(&s).unwrap(), 0.875));
        // All tied: 0.5.
        let t = [(0.3, true), (0.3, false), (0.3, true)];
        assert!(close(roc_auc(&t).unwrap(), 0.5));
        // Perfect and inverted.
        assert!(close(roc_auc(&[(1.0, true), (0.0, false)]).unwrap(), 1.0));
        assert!(close(roc_auc(&[(0.0, true), (1.0, false)]).unwrap(), 0.0));
        assert_eq!(roc_auc(&[(f64::NAN, true), (0.0, false)]), None);
    }

    #[test]
    fn roc_curve_groups_ties_and_tpr_at_fpr_respects_the_bound() {
        let s = [(0.9, true), (0.5, true), (0.5, false), (0.1, false)];
        let c = roc_curve(&s);
        let pts: Vec<(f64, f64)> = c.iter().map(|p| (p.fpr, p.tpr)).collect();
        assert_eq!(pts, vec![(0.0, 0.0), (0.0, 0.5), (0.5, 1.0), (1.0, 1.0)]);
        let p = tpr_at_fpr(&s, 0.0).unwrap();
        assert!(close(p.tpr, 0.5) && close(p.threshold, 0.9));
        let p = tpr_at_fpr(&s, 0.5).unwrap();
        assert!(close(p.tpr, 1.0) && close(p.fpr, 0.5));
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&s, 50.0), Some(50));
        assert_eq!(percentile(&s, 99.0), Some(99));
        assert_eq!(percentile(&s, 100.0), Some(100));
        assert_eq!(percentile(&[7], 95.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&s, 0.0), None);
        let l = Latency::of(&[30, 10, 20]).unwrap();
        assert_eq!((l.p50, l.p95, l.max, l.count), (20, 30, 30, 3));
        assert!(close(l.mean, 20.0));
        assert_eq!(Latency::of(&[]), None);
    }
}
