//! Training: AdaGrad logistic regression with L2, seeded shuffling, Platt calibration on
//! validation data, and a threshold picked for a target false-positive rate on the benign
//! validation rows.
//!
//! Single-threaded on purpose: the same inputs and seed give byte-identical weights.

use crate::features::{FeatureConfig, with_features};
use crate::model::{Calibration, LinearModel, ModelHeader, Provenance, sigmoid};
use crate::score::max_margin;
use rampart_normalize::{Normalizer, ViewKind};

/// One labelled training or validation text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// The prompt (all of its text).
    pub text: String,
    /// Whether it is an attack.
    pub attack: bool,
}

/// Hyper-parameters and bookkeeping of a training run.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOptions {
    /// Model name written to the header.
    pub name: String,
    /// Feature extraction.
    pub features: FeatureConfig,
    /// Passes over the training data.
    pub epochs: u32,
    /// Seed of the shuffling.
    pub seed: u64,
    /// L2 regularisation strength (applied to the weights an example touches).
    pub l2: f32,
    /// AdaGrad base learning rate.
    pub learning_rate: f32,
    /// Weight the classes so each contributes equally to the loss.
    pub balance_classes: bool,
    /// The false-positive rate the threshold is picked for, on benign validation data.
    pub target_fpr: f32,
    /// Names of the training sets (recorded in the header).
    pub train_names: Vec<String>,
    /// Names of the validation sets (recorded in the header).
    pub valid_names: Vec<String>,
}

impl Default for TrainOptions {
    fn default() -> Self {
        Self {
            name: "linear".into(),
            features: FeatureConfig::default(),
            epochs: 6,
            seed: 42,
            l2: 1e-6,
            learning_rate: 0.2,
            balance_classes: true,
            target_fpr: 0.01,
            train_names: Vec::new(),
            valid_names: Vec::new(),
        }
    }
}

/// Where training is (for progress bars).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Normalizing the training texts.
    Prepare,
    /// One epoch of SGD (1-based).
    Epoch(u32),
    /// Scoring validation texts (all views).
    Validate,
}

/// A progress report: `done` of `total` items in `phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The phase.
    pub phase: Phase,
    /// Items done.
    pub done: usize,
    /// Items in the phase.
    pub total: usize,
}

/// Why training failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    /// A required class is missing.
    #[error("{0}")]
    Data(String),
    /// Options out of range.
    #[error("invalid training options: {0}")]
    Options(String),
    /// The feature configuration is out of range.
    #[error("invalid training options: {0}")]
    Features(crate::features::FeatureConfigError),
    /// Calibration failed (e.g. the validation scores do not separate the classes at all).
    #[error("calibration failed: {0}")]
    Calibration(String),
}

/// Validation metrics of the trained model, at its threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationReport {
    /// Attack and benign validation examples.
    pub counts: [usize; 2],
    /// Share of validation attacks at or over the threshold.
    pub tpr: f64,
    /// Share of benign validation examples at or over the threshold.
    pub fpr: f64,
    /// ROC AUC of the calibrated scores.
    pub auc: f64,
    /// Mean log-loss of the calibrated probabilities.
    pub log_loss: f64,
}

/// The trained model and how it did on validation data.
#[derive(Debug, Clone)]
pub struct Trained {
    /// The model (with calibration and threshold).
    pub model: LinearModel,
    /// Metrics on the validation data.
    pub validation: ValidationReport,
    /// Mean training log-loss per epoch.
    pub epoch_loss: Vec<f64>,
}

/// A small, seeded, portable PRNG (SplitMix64).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by rejection (no modulo bias).
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// Trains a model: SGD on the folded view of each training text, then calibration and
/// threshold on the validation texts scored exactly as the detector scores them (the
/// maximum margin over every normalized view).
pub fn train(
    train: &[Example],
    valid: &[Example],
    opts: &TrainOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Trained, TrainError> {
    check_options(opts)?;
    let (tc, vc) = class_counts(train, valid)?;
    let normalizer = Normalizer::default();
    let texts = folded_texts(&normalizer, train, progress);
    let fit = fit_sgd(&texts, tc, opts, progress);
    let header = ModelHeader {
        name: opts.name.clone(),
        features: opts.features,
        bias: fit.bias,
        calibration: Calibration::IDENTITY,
        threshold: 0.5,
        target_fpr: opts.target_fpr,
        validation_fpr: 0.0,
        provenance: Provenance {
            train: opts.train_names.clone(),
            valid: opts.valid_names.clone(),
            seed: opts.seed,
            epochs: opts.epochs,
            l2: opts.l2,
            learning_rate: opts.learning_rate,
            train_counts: tc,
            valid_counts: vc,
        },
    };
    let mut model = LinearModel::new(header, fit.w)
        .map_err(|e| TrainError::Options(format!("training diverged: {e}")))?;
    let margins = validation_margins(&normalizer, &model, valid, progress);
    let validation = calibrate(&mut model, &margins, opts.target_fpr)?;
    Ok(Trained {
        model,
        validation,
        epoch_loss: fit.epoch_loss,
    })
}

/// Checks the options that the feature configuration does not check itself.
fn check_options(opts: &TrainOptions) -> Result<(), TrainError> {
    opts.features.validate().map_err(TrainError::Features)?;
    if opts.epochs == 0 {
        return Err(TrainError::Options("epochs must be at least 1".into()));
    }
    let l2_ok = opts.l2 >= 0.0 && opts.l2.is_finite();
    let lr_ok = opts.learning_rate > 0.0 && opts.learning_rate.is_finite();
    if !(l2_ok && lr_ok) {
        return Err(TrainError::Options(
            "l2 must be >= 0 and the learning rate > 0".into(),
        ));
    }
    if !(opts.target_fpr > 0.0 && opts.target_fpr < 1.0) {
        return Err(TrainError::Options("target FPR must be in (0, 1)".into()));
    }
    Ok(())
}

/// The (attack, benign) counts of the training and the validation data; both classes must
/// be in both.
fn class_counts(
    train: &[Example],
    valid: &[Example],
) -> Result<([usize; 2], [usize; 2]), TrainError> {
    let count = |xs: &[Example]| {
        let a = xs.iter().filter(|e| e.attack).count();
        [a, xs.len() - a]
    };
    let (tc, vc) = (count(train), count(valid));
    if tc.contains(&0) {
        return Err(TrainError::Data(format!(
            "training data needs both classes (attack {}, benign {})",
            tc[0], tc[1]
        )));
    }
    if vc.contains(&0) {
        return Err(TrainError::Data(format!(
            "validation data needs both classes (attack {}, benign {})",
            vc[0], vc[1]
        )));
    }
    Ok((tc, vc))
}

/// The training text of each example: its folded view (what most rules read too).
fn folded_texts(
    normalizer: &Normalizer,
    train: &[Example],
    progress: &mut dyn FnMut(Progress),
) -> Vec<(String, bool)> {
    let total = train.len();
    let mut texts: Vec<(String, bool)> = Vec::with_capacity(total);
    for (i, e) in train.iter().enumerate() {
        let n = normalizer.normalize(&e.text);
        let folded = n
            .view(ViewKind::Folded)
            .map_or_else(|| e.text.clone(), |v| v.text.clone());
        texts.push((folded, e.attack));
        if i % 256 == 0 {
            progress(Progress {
                phase: Phase::Prepare,
                done: i,
                total,
            });
        }
    }
    texts
}

/// What SGD learned: the weights, the bias, and the mean loss of each epoch.
struct Fit {
    w: Vec<f32>,
    bias: f32,
    epoch_loss: Vec<f64>,
}

/// AdaGrad state of a run: the weights and bias with their sums of squared gradients.
struct AdaGrad {
    w: Vec<f32>,
    g2: Vec<f32>,
    bias: f32,
    bias_g2: f32,
    lr: f32,
    l2: f32,
}

impl AdaGrad {
    /// The margin of an example with features `feats`.
    fn margin(&self, feats: &[(u32, f32)]) -> f32 {
        let mut m = self.bias;
        for &(b, v) in feats {
            m += self.w[b as usize] * v;
        }
        m
    }

    /// One update with the loss gradient `g` (already class-weighted) at the margin.
    fn step(&mut self, feats: &[(u32, f32)], g: f32) {
        let lr = self.lr;
        for &(b, v) in feats {
            let j = b as usize;
            let grad = g * v + self.l2 * self.w[j];
            self.g2[j] += grad * grad;
            self.w[j] -= lr * grad / (self.g2[j].sqrt() + 1e-8);
        }
        self.bias_g2 += g * g;
        self.bias -= lr * g / (self.bias_g2.sqrt() + 1e-8);
    }
}

/// Seeded SGD (AdaGrad, L2 on the touched weights) over `texts`, `opts.epochs` passes;
/// `tc` is the training (attack, benign) counts, for class balancing.
fn fit_sgd(
    texts: &[(String, bool)],
    tc: [usize; 2],
    opts: &TrainOptions,
    progress: &mut dyn FnMut(Progress),
) -> Fit {
    let cfg = opts.features;
    let total = texts.len();
    let mut ada = AdaGrad {
        w: vec![0.0f32; cfg.buckets()],
        g2: vec![0.0f32; cfg.buckets()],
        bias: 0.0,
        bias_g2: 0.0,
        lr: opts.learning_rate,
        l2: opts.l2,
    };
    // Class weights: each class carries half of the total weight when balancing.
    let cw = if opts.balance_classes {
        let n = total as f32;
        [n / (2.0 * tc[0] as f32), n / (2.0 * tc[1] as f32)]
    } else {
        [1.0, 1.0]
    };
    let mut rng = SplitMix64::new(opts.seed);
    let mut order: Vec<usize> = (0..total).collect();
    let mut feats: Vec<(u32, f32)> = Vec::new();
    let mut epoch_loss = Vec::new();
    for epoch in 1..=opts.epochs {
        rng.shuffle(&mut order);
        let mut loss = 0.0f64;
        for (k, &i) in order.iter().enumerate() {
            let (text, attack) = &texts[i];
            feats.clear();
            with_features(&cfg, text, |b, v| feats.push((b, v)));
            let p = sigmoid(ada.margin(&feats));
            let y = if *attack { 1.0 } else { 0.0 };
            let c = cw[usize::from(!*attack)];
            loss += f64::from(c) * log_loss(p, *attack);
            ada.step(&feats, (p - y) * c);
            if k % 256 == 0 {
                progress(Progress {
                    phase: Phase::Epoch(epoch),
                    done: k,
                    total,
                });
            }
        }
        epoch_loss.push(loss / total as f64);
    }
    Fit {
        w: ada.w,
        bias: ada.bias,
        epoch_loss,
    }
}

/// Validation margins, scored like the detector: max over every normalized view.
fn validation_margins(
    normalizer: &Normalizer,
    model: &LinearModel,
    valid: &[Example],
    progress: &mut dyn FnMut(Progress),
) -> Vec<(f32, bool)> {
    let mut margins = Vec::with_capacity(valid.len());
    for (i, e) in valid.iter().enumerate() {
        let n = normalizer.normalize(&e.text);
        margins.push((
            max_margin(model, &n).map_or(model.header().bias, |m| m.margin),
            e.attack,
        ));
        if i % 256 == 0 {
            progress(Progress {
                phase: Phase::Validate,
                done: i,
                total: valid.len(),
            });
        }
    }
    margins
}

/// Fits the calibration to the validation margins, picks the threshold for `target_fpr` on
/// the benign ones, sets both on the model and reports the validation metrics.
fn calibrate(
    model: &mut LinearModel,
    margins: &[(f32, bool)],
    target_fpr: f32,
) -> Result<ValidationReport, TrainError> {
    let calibration = fit_platt(margins)?;
    let probs: Vec<(f32, bool)> = margins
        .iter()
        .map(|&(m, y)| (calibration.apply(m), y))
        .collect();
    let benign: Vec<f32> = probs.iter().filter(|p| !p.1).map(|p| p.0).collect();
    let threshold = threshold_for_fpr(&benign, target_fpr);
    let report = evaluate(&probs, threshold);
    model
        .set_decision(calibration, threshold, target_fpr, report.fpr as f32)
        .map_err(|e| TrainError::Calibration(e.to_string()))?;
    Ok(report)
}

fn log_loss(p: f32, attack: bool) -> f64 {
    let p = f64::from(p).clamp(1e-7, 1.0 - 1e-7);
    if attack { -p.ln() } else { -(1.0 - p).ln() }
}

/// Fits Platt scaling `sigmoid(a·m + b)` to (margin, is_attack) pairs by Newton's method on
/// the log-loss, with Platt's smoothed targets. Fails unless `a > 0` (a monotone map).
pub fn fit_platt(data: &[(f32, bool)]) -> Result<Calibration, TrainError> {
    let pos = data.iter().filter(|d| d.1).count() as f64;
    let neg = data.len() as f64 - pos;
    if pos == 0.0 || neg == 0.0 {
        return Err(TrainError::Calibration("needs both classes".into()));
    }
    let (t_pos, t_neg) = ((pos + 1.0) / (pos + 2.0), 1.0 / (neg + 2.0));
    let (mut a, mut b) = (1.0f64, 0.0f64);
    for _ in 0..100 {
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (0.0, 0.0, 1e-9, 0.0, 1e-9);
        for &(m, y) in data {
            let m = f64::from(m.max(-1e6));
            let t = if y { t_pos } else { t_neg };
            let z = a * m + b;
            let p = 1.0 / (1.0 + (-z).exp());
            let d = p - t;
            ga += d * m;
            gb += d;
            let s = p * (1.0 - p);
            haa += s * m * m;
            hab += s * m;
            hbb += s;
        }
        let det = haa * hbb - hab * hab;
        if det.abs() < 1e-18 {
            break;
        }
        let da = (hbb * ga - hab * gb) / det;
        let db = (haa * gb - hab * ga) / det;
        a -= da;
        b -= db;
        if da.abs() < 1e-10 && db.abs() < 1e-10 {
            break;
        }
    }
    let cal = Calibration {
        a: a as f32,
        b: b as f32,
    };
    if !(cal.a.is_finite() && cal.a > 0.0 && cal.b.is_finite()) {
        return Err(TrainError::Calibration(format!(
            "fitted slope {a} is not positive: the scores do not rank attacks above benign prompts"
        )));
    }
    Ok(cal)
}

/// The lowest threshold `t` such that the share of `benign` scores `>= t` is at most
/// `target_fpr`. Never below the smallest positive float, never above 1.
pub fn threshold_for_fpr(benign: &[f32], target_fpr: f32) -> f32 {
    if benign.is_empty() {
        return 0.5;
    }
    let mut s: Vec<f32> = benign.to_vec();
    s.sort_by(|a, b| b.total_cmp(a));
    // At most k benign scores may reach the threshold.
    let k = (f64::from(target_fpr) * s.len() as f64).floor() as usize;
    if k >= s.len() {
        return f32::MIN_POSITIVE;
    }
    // Everything strictly above s[k] is allowed through; s[k] itself must not reach it.
    let t = next_up(s[k]);
    t.clamp(f32::MIN_POSITIVE, 1.0)
}

fn next_up(x: f32) -> f32 {
    if x.is_nan() || x == f32::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f32::from_bits(1);
    }
    let bits = x.to_bits();
    f32::from_bits(if x > 0.0 { bits + 1 } else { bits - 1 })
}

/// TPR, FPR (at `threshold`), AUC and log-loss of calibrated scores.
pub fn evaluate(probs: &[(f32, bool)], threshold: f32) -> ValidationReport {
    let pos = probs.iter().filter(|p| p.1).count();
    let neg = probs.len() - pos;
    let tp = probs.iter().filter(|p| p.1 && p.0 >= threshold).count();
    let fp = probs.iter().filter(|p| !p.1 && p.0 >= threshold).count();
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let log_loss = if probs.is_empty() {
        0.0
    } else {
        probs.iter().map(|&(p, y)| log_loss(p, y)).sum::<f64>() / probs.len() as f64
    };
    ValidationReport {
        counts: [pos, neg],
        tpr: ratio(tp, pos),
        fpr: ratio(fp, neg),
        auc: auc(probs),
        log_loss,
    }
}

/// ROC AUC by ranks (ties count half).
pub fn auc(probs: &[(f32, bool)]) -> f64 {
    let mut s: Vec<(f32, bool)> = probs.to_vec();
    s.sort_by(|a, b| a.0.total_cmp(&b.0));
    let pos = s.iter().filter(|p| p.1).count() as f64;
    let neg = s.len() as f64 - pos;
    if pos == 0.0 || neg == 0.0 {
        return 0.5;
    }
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < s.len() {
        let mut j = i;
        while j < s.len() && s[j].0 == s[i].0 {
            j += 1;
        }
        let avg = (i + j + 1) as f64 / 2.0; // mean of 1-based ranks i+1..=j
        rank_sum += avg * s[i..j].iter().filter(|p| p.1).count() as f64;
        i = j;
    }
    (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg)
}
