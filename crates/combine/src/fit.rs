//! Fitting: L2-regularized logistic regression by Newton's method, and operating points
//! chosen from false-positive-rate targets.
//!
//! Written here rather than taken from a crate: the problem is a few dozen dense features
//! and tens of thousands of rows, where Newton's method converges in about ten steps and
//! needs only a Cholesky solve of a matrix the size of the feature list. The maintained
//! alternatives (`linfa-logistic`) bring `ndarray` and `argmin` for a quasi-Newton search
//! whose result depends on its line-search settings; this is ~100 lines, deterministic (sums
//! in row order, no threads), and tested against a closed-form case.

// Matrix code (the Hessian, the Cholesky factor) reads as the textbook formulas with indices.
#![allow(clippy::needless_range_loop)]

use crate::model::OperatingPoint;

/// Fitting options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitOptions {
    /// L2 penalty on the standardized weights (not on the bias), per row of total weight.
    pub l2: f64,
    /// Newton steps at most.
    pub max_iterations: usize,
    /// Weigh the classes so each has half of the total weight.
    pub balance: bool,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            l2: 1e-3,
            max_iterations: 50,
            balance: true,
        }
    }
}

/// A fitted model on the raw feature scale.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// One weight per feature.
    pub weights: Vec<f32>,
    /// Per-feature means of the fitting rows.
    pub means: Vec<f32>,
    /// Bias.
    pub bias: f32,
    /// Newton steps run.
    pub iterations: usize,
}

/// Why fitting failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FitError {
    /// Rows of different lengths, or none.
    #[error("rows must be non-empty and of one length ({0})")]
    Shape(String),
    /// A class has no rows.
    #[error("both classes need rows (attacks {attacks}, benign {benign})")]
    OneClass {
        /// Attack rows.
        attacks: usize,
        /// Benign rows.
        benign: usize,
    },
    /// A value is not finite.
    #[error("row {row} feature {feature} is not a finite number")]
    NotFinite {
        /// Row.
        row: usize,
        /// Feature position.
        feature: usize,
    },
    /// The Newton system could not be solved (should not happen with a positive penalty).
    #[error("the Newton system is not positive definite")]
    Singular,
}

/// Fits `y ~ sigmoid(bias + w·x)` (see the module docs).
pub fn fit(rows: &[Vec<f32>], labels: &[bool], opts: FitOptions) -> Result<Fit, FitError> {
    let d = check_rows(rows, labels)?;
    let (means, stds) = moments(rows, d);
    let z: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .zip(means.iter().zip(&stds))
                .map(|(x, (m, s))| (f64::from(*x) - m) / s)
                .collect()
        })
        .collect();
    let pos = labels.iter().filter(|y| **y).count() as f64;
    let neg = labels.len() as f64 - pos;
    let total = labels.len() as f64;
    let (wp, wn) = if opts.balance {
        (total / (2.0 * pos), total / (2.0 * neg))
    } else {
        (1.0, 1.0)
    };
    // beta[0] is the bias, beta[1..] the standardized weights.
    let mut beta = vec![0.0f64; d + 1];
    beta[0] = (pos / neg).ln();
    let lambda = opts.l2 * total;
    let mut iterations = 0;
    for _ in 0..opts.max_iterations {
        iterations += 1;
        let mut grad = vec![0.0f64; d + 1];
        let mut hess = vec![vec![0.0f64; d + 1]; d + 1];
        for (zi, &yi) in z.iter().zip(labels) {
            let eta = beta[0] + beta[1..].iter().zip(zi).map(|(b, x)| b * x).sum::<f64>();
            let p = 1.0 / (1.0 + (-eta).exp());
            let w = if yi { wp } else { wn };
            let r = w * (p - f64::from(u8::from(yi)));
            let h = w * p * (1.0 - p);
            let x = |j: usize| if j == 0 { 1.0 } else { zi[j - 1] };
            for j in 0..=d {
                grad[j] += r * x(j);
                let hj = h * x(j);
                for k in 0..=j {
                    hess[j][k] += hj * x(k);
                }
            }
        }
        for j in 1..=d {
            grad[j] += lambda * beta[j];
            hess[j][j] += lambda;
        }
        for j in 0..=d {
            for k in 0..j {
                hess[k][j] = hess[j][k];
            }
        }
        let step = cholesky_solve(hess, &grad).ok_or(FitError::Singular)?;
        let mut biggest = 0.0f64;
        for (b, s) in beta.iter_mut().zip(&step) {
            *b -= s;
            biggest = biggest.max(s.abs());
        }
        if biggest < 1e-9 {
            break;
        }
    }
    // Back to the raw scale: w_raw = w / s, bias_raw = b − Σ w m / s.
    let weights: Vec<f64> = beta[1..].iter().zip(&stds).map(|(b, s)| b / s).collect();
    let bias = beta[0] - weights.iter().zip(&means).map(|(w, m)| w * m).sum::<f64>();
    Ok(Fit {
        weights: weights.iter().map(|w| *w as f32).collect(),
        means: means.iter().map(|m| *m as f32).collect(),
        bias: bias as f32,
        iterations,
    })
}

fn check_rows(rows: &[Vec<f32>], labels: &[bool]) -> Result<usize, FitError> {
    let d = rows.first().map(Vec::len).unwrap_or(0);
    if rows.is_empty() || d == 0 || rows.len() != labels.len() {
        return Err(FitError::Shape(format!(
            "{} rows, {} labels",
            rows.len(),
            labels.len()
        )));
    }
    for (i, r) in rows.iter().enumerate() {
        if r.len() != d {
            return Err(FitError::Shape(format!(
                "row {i} has {} values, not {d}",
                r.len()
            )));
        }
        if let Some(j) = r.iter().position(|x| !x.is_finite()) {
            return Err(FitError::NotFinite { row: i, feature: j });
        }
    }
    let attacks = labels.iter().filter(|y| **y).count();
    let benign = labels.len() - attacks;
    if attacks == 0 || benign == 0 {
        return Err(FitError::OneClass { attacks, benign });
    }
    Ok(d)
}

/// Per-feature mean and standard deviation (1 for a constant feature, which then only meets
/// the penalty and keeps a zero weight).
fn moments(rows: &[Vec<f32>], d: usize) -> (Vec<f64>, Vec<f64>) {
    let n = rows.len() as f64;
    let mut means = vec![0.0f64; d];
    for r in rows {
        for (m, x) in means.iter_mut().zip(r) {
            *m += f64::from(*x) / n;
        }
    }
    let mut vars = vec![0.0f64; d];
    for r in rows {
        for ((v, x), m) in vars.iter_mut().zip(r).zip(&means) {
            *v += (f64::from(*x) - m).powi(2) / n;
        }
    }
    let stds = vars
        .iter()
        .map(|v| if *v > 1e-12 { v.sqrt() } else { 1.0 })
        .collect();
    (means, stds)
}

/// Solves `a x = b` for a symmetric positive definite `a`.
fn cholesky_solve(mut a: Vec<Vec<f64>>, b: &[f64]) -> Option<Vec<f64>> {
    let n = b.len();
    for j in 0..n {
        let mut s = a[j][j];
        for k in 0..j {
            s -= a[j][k] * a[j][k];
        }
        if s <= 0.0 || !s.is_finite() {
            return None;
        }
        let l = s.sqrt();
        a[j][j] = l;
        for i in j + 1..n {
            let mut t = a[i][j];
            for k in 0..j {
                t -= a[i][k] * a[j][k];
            }
            a[i][j] = t / l;
        }
    }
    let mut y = vec![0.0; n];
    for i in 0..n {
        let mut t = b[i];
        for k in 0..i {
            t -= a[i][k] * y[k];
        }
        y[i] = t / a[i][i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let mut t = y[i];
        for k in i + 1..n {
            t -= a[k][i] * x[k];
        }
        x[i] = t / a[i][i];
    }
    Some(x)
}

/// The lowest threshold at which at most `rate` of `benign` scores reach it (`score >=
/// threshold` flags). With `k = floor(rate · n)` allowed false positives it sits just above
/// the `(k+1)`-th highest score; with no scores it is the lowest positive probability.
pub fn threshold_for_rate(benign: &[f32], rate: f64) -> f32 {
    let mut s: Vec<f32> = benign.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(|a, b| b.total_cmp(a));
    let k = (rate * s.len() as f64).floor() as usize;
    match s.get(k) {
        Some(&x) => next_up(x).min(1.0),
        None => f32::MIN_POSITIVE,
    }
}

/// An operating point from per-source targets: `flag` is the lowest threshold that meets
/// every source's target, `block` the one that meets a quarter of each.
pub fn operating_point(sources: &[(&[f32], f64)]) -> OperatingPoint {
    let pick = |div: f64| {
        sources
            .iter()
            .map(|(s, r)| threshold_for_rate(s, r / div))
            .fold(f32::MIN_POSITIVE, f32::max)
    };
    let flag = pick(1.0);
    OperatingPoint {
        flag,
        block: pick(4.0).max(flag),
    }
}

/// The smallest `f32` above `x` (for `0 <= x < 1`).
fn next_up(x: f32) -> f32 {
    if x < 0.0 {
        return 0.0;
    }
    f32::from_bits(x.to_bits() + 1)
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn cholesky_solves_a_small_system() {
        let a = vec![vec![4.0, 2.0], vec![2.0, 3.0]];
        let x = cholesky_solve(a, &[2.0, 1.0]).unwrap_or_default();
        assert!((x[0] - 0.5).abs() < 1e-12 && x[1].abs() < 1e-12, "{x:?}");
    }

    #[test]
    fn threshold_for_rate_allows_floor_rate_n_positives() {
        let s: Vec<f32> = (0..100).map(|i| i as f32 / 100.0).collect();
        let t = threshold_for_rate(&s, 0.02);
        assert_eq!(s.iter().filter(|x| **x >= t).count(), 2);
        let t0 = threshold_for_rate(&s, 0.0);
        assert_eq!(s.iter().filter(|x| **x >= t0).count(), 0);
    }
}
