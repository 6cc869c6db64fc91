//! The relational model: from per-layer triples and trust violations to the ayni balance,
//! the exchange type and the label. Pure functions of their inputs; `DESIGN.md` gives the
//! formulas, the weights and where they differ from the seed project's.

use crate::{
    ExchangeType, LayerAssessment, PromptLayer, RelationalLabel, TrustViolation, ViolationKind,
};
use serde::{Deserialize, Serialize};

/// How much each layer's truth and indeterminacy count in the balance.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerWeights {
    /// The deployer's instructions. Default 3.
    #[serde(default = "w_system")]
    pub system: f64,
    /// A developer template. Default 2.
    #[serde(default = "w_application")]
    pub application: f64,
    /// The input. Default 1.
    #[serde(default = "w_user")]
    pub user: f64,
}

fn w_system() -> f64 {
    3.0
}
fn w_application() -> f64 {
    2.0
}
fn w_user() -> f64 {
    1.0
}

impl Default for LayerWeights {
    fn default() -> Self {
        Self {
            system: w_system(),
            application: w_application(),
            user: w_user(),
        }
    }
}

impl LayerWeights {
    /// The weight of `layer`.
    pub fn of(&self, layer: PromptLayer) -> f64 {
        match layer {
            PromptLayer::System => self.system,
            PromptLayer::Application => self.application,
            PromptLayer::User => self.user,
        }
    }
}

/// When a lower layer crowds out the layers above it ([`ViolationKind::ContextSaturation`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Saturation {
    /// The lower layer is at least this many times the bytes of the layers above it.
    pub ratio: f64,
    /// And at least this many bytes.
    pub min_bytes: usize,
}

/// The model's parameters (`[layers.model]` of a relational layer). Every default is
/// explained in `DESIGN.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelParams {
    /// Layer weights of truth and indeterminacy.
    #[serde(default)]
    pub weights: LayerWeights,
    /// Indeterminacy tolerated before it lowers the balance. Default 0.3.
    #[serde(default = "d_tolerance")]
    pub indeterminacy_tolerance: f64,
    /// How much each unit of indeterminacy over the tolerance lowers the balance. Default 0.5.
    #[serde(default = "d_penalty")]
    pub indeterminacy_penalty: f64,
    /// The circuit breaker: with any trust violation the balance is at most this. Default
    /// -0.5 (under the tree's -0.2 and 0.3 cut points, so a violation is never reciprocal
    /// or borderline).
    #[serde(default = "d_ceiling")]
    pub violation_ceiling: f64,
    /// A layer below another with at least this falsehood makes the exchange extractive.
    /// Default 0.5.
    #[serde(default = "d_extractive")]
    pub extractive_falsehood: f64,
    /// Context saturation; off by default (a long pasted document under a short system
    /// prompt is ordinary use).
    #[serde(default)]
    pub saturation: Option<Saturation>,
}

fn d_tolerance() -> f64 {
    0.3
}
fn d_penalty() -> f64 {
    0.5
}
fn d_ceiling() -> f64 {
    -0.5
}
fn d_extractive() -> f64 {
    0.5
}

impl Default for ModelParams {
    fn default() -> Self {
        Self {
            weights: LayerWeights::default(),
            indeterminacy_tolerance: d_tolerance(),
            indeterminacy_penalty: d_penalty(),
            violation_ceiling: d_ceiling(),
            extractive_falsehood: d_extractive(),
            saturation: None,
        }
    }
}

/// A [`ModelParams`] value out of its range; the message names the key.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamsError {
    /// A layer weight that is not a positive number.
    #[error("{key} must be a positive number, got {value}")]
    Weight {
        /// `weights.system`, `weights.application` or `weights.user`.
        key: &'static str,
        /// The configured value.
        value: f64,
    },
    /// Weights that increase down the layers.
    #[error(
        "weights must not increase down the layers (system >= application >= user), got \
         {system} / {application} / {user}"
    )]
    WeightOrder {
        /// `weights.system`.
        system: f64,
        /// `weights.application`.
        application: f64,
        /// `weights.user`.
        user: f64,
    },
    /// A parameter outside its range.
    #[error("{key} must be in [{lo}, {hi}], got {value}")]
    OutOfRange {
        /// The key.
        key: &'static str,
        /// The configured value.
        value: f64,
        /// The least value accepted.
        lo: f64,
        /// The greatest value accepted.
        hi: f64,
    },
    /// `saturation.ratio` under 1.
    #[error("saturation.ratio must be >= 1, got {0}")]
    SaturationRatio(f64),
}

impl ModelParams {
    /// Checks every parameter is in range.
    pub fn validate(&self) -> Result<(), ParamsError> {
        let w = &self.weights;
        for (key, value) in [
            ("weights.system", w.system),
            ("weights.application", w.application),
            ("weights.user", w.user),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ParamsError::Weight { key, value });
            }
        }
        if !(w.system >= w.application && w.application >= w.user) {
            return Err(ParamsError::WeightOrder {
                system: w.system,
                application: w.application,
                user: w.user,
            });
        }
        for (key, value, lo, hi) in [
            (
                "indeterminacy_tolerance",
                self.indeterminacy_tolerance,
                0.0,
                1.0,
            ),
            (
                "indeterminacy_penalty",
                self.indeterminacy_penalty,
                0.0,
                2.0,
            ),
            ("violation_ceiling", self.violation_ceiling, -1.0, -0.2),
            ("extractive_falsehood", self.extractive_falsehood, 0.0, 1.0),
        ] {
            if !(value.is_finite() && (lo..=hi).contains(&value)) {
                return Err(ParamsError::OutOfRange { key, value, lo, hi });
            }
        }
        if let Some(s) = &self.saturation
            && !(s.ratio.is_finite() && s.ratio >= 1.0)
        {
            return Err(ParamsError::SaturationRatio(s.ratio));
        }
        Ok(())
    }
}

/// The balance, the exchange type and the label of one set of assessments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judgement {
    /// The ayni balance in [-1, 1].
    pub balance: f64,
    /// The exchange type.
    pub exchange: ExchangeType,
    /// The label.
    pub label: RelationalLabel,
}

/// The ayni balance of the exchange, in [-1, 1]:
///
/// `clip(T_w − F_max − penalty · max(0, I_w − tolerance))`, capped at `violation_ceiling`
/// when any trust violation holds, where `T_w` and `I_w` are the layer-weighted means of
/// truth and indeterminacy and `F_max` the highest falsehood of any layer. No layers: -1.
pub fn balance(layers: &[LayerAssessment], violations: &[TrustViolation], p: &ModelParams) -> f64 {
    if layers.is_empty() {
        return -1.0;
    }
    let (mut wsum, mut t, mut i, mut f) = (0.0, 0.0, 0.0, 0.0_f64);
    for l in layers {
        let w = p.weights.of(l.layer);
        wsum += w;
        t += w * l.value.truth;
        i += w * l.value.indeterminacy;
        f = f.max(l.value.falsehood);
    }
    let (t, i) = (t / wsum, i / wsum);
    let mut b = t - f - p.indeterminacy_penalty * (i - p.indeterminacy_tolerance).max(0.0);
    if !violations.is_empty() {
        b = b.min(p.violation_ceiling);
    }
    b.clamp(-1.0, 1.0)
}

/// The exchange type:
///
/// - **extractive** when the balance is under -0.3, or a layer below another present layer
///   has falsehood of at least `extractive_falsehood`, or commits a violation against it;
/// - **generative** when the balance is over 0.5, every layer's truth is at least 0.7 and
///   no layer's falsehood reaches 0.1;
/// - **neutral** when the balance is within 0.1 of 0;
/// - **reciprocal** otherwise.
pub fn exchange_type(
    layers: &[LayerAssessment],
    violations: &[TrustViolation],
    balance: f64,
    p: &ModelParams,
) -> ExchangeType {
    let top = layers.iter().map(|l| l.layer).min();
    let below_another = |layer: PromptLayer| top.is_some_and(|t| layer > t);
    let takes = layers
        .iter()
        .any(|l| below_another(l.layer) && l.value.falsehood >= p.extractive_falsehood)
        || violations.iter().any(|v| below_another(v.layer));
    if balance < -0.3 || takes {
        ExchangeType::Extractive
    } else if balance > 0.5
        && layers
            .iter()
            .all(|l| l.value.truth >= 0.7 && l.value.falsehood < 0.1)
    {
        ExchangeType::Generative
    } else if balance.abs() < 0.1 {
        ExchangeType::Neutral
    } else {
        ExchangeType::Reciprocal
    }
}

/// PromptGuard's layer-aware decision tree:
///
/// ```text
/// 1. balance > 0.5                                            → reciprocal
/// 2. layers > 1 and (balance < −0.2 or exchange = extractive) → extractive
/// 3. balance < 0.3                                            → manipulative
/// 4. exchange = extractive                                    → extractive
/// 5. otherwise                                                → borderline
/// ```
pub fn label(layer_count: usize, balance: f64, exchange: ExchangeType) -> RelationalLabel {
    let extractive = exchange == ExchangeType::Extractive;
    if balance > 0.5 {
        RelationalLabel::Reciprocal
    } else if layer_count > 1 && (balance < -0.2 || extractive) {
        RelationalLabel::Extractive
    } else if balance < 0.3 {
        RelationalLabel::Manipulative
    } else if extractive {
        RelationalLabel::Extractive
    } else {
        RelationalLabel::Borderline
    }
}

/// Violations that follow from the layers' sizes alone (context saturation, when
/// configured).
pub fn structural_violations(layers: &[LayerAssessment], p: &ModelParams) -> Vec<TrustViolation> {
    let Some(s) = p.saturation else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for l in layers {
        let above: usize = layers
            .iter()
            .filter(|a| a.layer < l.layer)
            .map(|a| a.bytes)
            .sum();
        if above > 0 && l.bytes >= s.min_bytes && l.bytes as f64 >= s.ratio * above as f64 {
            out.push(TrustViolation {
                kind: ViolationKind::ContextSaturation,
                layer: l.layer,
                evidence: vec![format!("bytes:{}/{}", l.bytes, above)],
            });
        }
    }
    out
}

/// Sorts violations and merges those of the same kind and layer (their evidence united).
pub fn normalize_violations(mut v: Vec<TrustViolation>) -> Vec<TrustViolation> {
    v.sort_by_key(|a| (a.kind, a.layer));
    let mut out: Vec<TrustViolation> = Vec::with_capacity(v.len());
    for x in v {
        match out.last_mut() {
            Some(last) if last.kind == x.kind && last.layer == x.layer => {
                last.evidence.extend(x.evidence);
            }
            _ => out.push(x),
        }
    }
    for x in &mut out {
        x.evidence.sort();
        x.evidence.dedup();
    }
    out
}

/// Which rule of [`exchange_type`] and which step of [`label`]'s tree gave `j`, in words
/// (rule IDs, layer names and numbers; never input text). A label can disagree in sign
/// with the balance: a positive balance with an extractive exchange is labelled extractive
/// by step 2 or 4 when a lower layer takes from a higher one, and this says so.
pub fn explain(
    layers: &[LayerAssessment],
    violations: &[TrustViolation],
    p: &ModelParams,
    j: &Judgement,
) -> String {
    let exchange = exchange_reason(layers, violations, p, j);
    let extractive = j.exchange == ExchangeType::Extractive;
    let step = if j.balance > 0.5 {
        "step 1 (balance > 0.5)".to_string()
    } else if layers.len() > 1 && (j.balance < -0.2 || extractive) {
        format!(
            "step 2 ({} layers and {})",
            layers.len(),
            if j.balance < -0.2 {
                "balance < -0.2"
            } else {
                "exchange extractive"
            }
        )
    } else if j.balance < 0.3 {
        "step 3 (balance < 0.3)".to_string()
    } else if extractive {
        "step 4 (exchange extractive)".to_string()
    } else {
        "step 5 (no earlier step applies)".to_string()
    };
    format!(
        "{} by {step} of the label tree; exchange {}: {exchange}",
        j.label, j.exchange
    )
}

/// Why [`exchange_type`] gave `j.exchange`.
fn exchange_reason(
    layers: &[LayerAssessment],
    violations: &[TrustViolation],
    p: &ModelParams,
    j: &Judgement,
) -> String {
    let top = layers.iter().map(|l| l.layer).min();
    let below = |layer: PromptLayer| top.filter(|&t| layer > t);
    let taking_layer = layers.iter().find_map(|l| {
        let t = below(l.layer)?;
        (l.value.falsehood >= p.extractive_falsehood).then(|| {
            format!(
                "the {} layer, below the {} layer, has falsehood {:.2} >= {:.2}",
                l.layer.name(),
                t.name(),
                l.value.falsehood,
                p.extractive_falsehood
            )
        })
    });
    let violating = violations.iter().find_map(|v| {
        let t = below(v.layer)?;
        Some(format!(
            "the {} layer, below the {} layer, commits a {} violation ({})",
            v.layer.name(),
            t.name(),
            v.kind.name(),
            v.evidence.join(", ")
        ))
    });
    match j.exchange {
        ExchangeType::Extractive if j.balance < -0.3 => format!("balance {:+.2} < -0.3", j.balance),
        ExchangeType::Extractive => taking_layer
            .or(violating)
            .unwrap_or_else(|| "a lower layer takes from a higher one".to_string()),
        ExchangeType::Generative => {
            "balance > 0.5, every layer's truth >= 0.7 and falsehood < 0.1".to_string()
        }
        ExchangeType::Neutral => format!("balance {:+.2} within 0.1 of 0", j.balance),
        ExchangeType::Reciprocal => "no layer takes and the balance is not near 0".to_string(),
    }
}

/// Balance, exchange type and label of `layers` under `violations`.
pub fn judge(
    layers: &[LayerAssessment],
    violations: &[TrustViolation],
    p: &ModelParams,
) -> Judgement {
    let balance = balance(layers, violations, p);
    let exchange = exchange_type(layers, violations, balance, p);
    Judgement {
        balance,
        exchange,
        label: label(layers.len(), balance, exchange),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Neutrosophic;

    fn layer(layer: PromptLayer, t: f64, i: f64, f: f64) -> LayerAssessment {
        LayerAssessment {
            layer,
            segments: vec![0],
            bytes: 100,
            value: Neutrosophic::checked(t, i, f).unwrap(),
            evidence: vec![],
            reasoning: None,
        }
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    /// Regression (issue 34): "Pretend you are a pirate and tell me a joke." was labelled
    /// extractive at balance +0.26 with nothing saying why. A lower layer with falsehood at
    /// the extractive threshold makes the exchange extractive whatever the balance, and the
    /// explanation names the step, the layer and the numbers.
    #[test]
    fn an_extractive_label_at_a_positive_balance_says_which_rule_made_it() {
        let p = ModelParams::default();
        let l = vec![
            layer(PromptLayer::System, 0.9, 0.1, 0.0),
            layer(PromptLayer::User, 0.3, 0.1, p.extractive_falsehood),
        ];
        let j = judge(&l, &[], &p);
        assert!(j.balance > 0.0, "{j:?}");
        assert_eq!(j.exchange, ExchangeType::Extractive);
        assert_eq!(j.label, RelationalLabel::Extractive);
        let why = explain(&l, &[], &p, &j);
        assert!(why.starts_with("extractive by step"), "{why}");
        assert!(
            why.contains("the user layer, below the system layer, has falsehood"),
            "{why}"
        );
        let reciprocal = vec![layer(PromptLayer::User, 0.9, 0.1, 0.0)];
        let j = judge(&reciprocal, &[], &p);
        let why = explain(&reciprocal, &[], &p, &j);
        assert!(why.contains(&format!("{} by step", j.label)), "{why}");
    }

    #[test]
    fn an_ordinary_request_is_reciprocal() {
        // T_w = 0.9, F = 0.05, I_w = 0.05 (under the tolerance): 0.9 - 0.05 = 0.85.
        let l = [layer(PromptLayer::User, 0.9, 0.05, 0.05)];
        let j = judge(&l, &[], &ModelParams::default());
        close(j.balance, 0.85);
        assert_eq!(j.exchange, ExchangeType::Generative);
        assert_eq!(j.label, RelationalLabel::Reciprocal);
    }

    #[test]
    fn a_single_layer_jailbreak_is_manipulative() {
        // 0.2 - 0.7 - 0.5 * max(0, 0.1 - 0.3) = -0.5: extractive exchange, one layer.
        let l = [layer(PromptLayer::User, 0.2, 0.1, 0.7)];
        let j = judge(&l, &[], &ModelParams::default());
        close(j.balance, -0.5);
        assert_eq!(j.exchange, ExchangeType::Extractive);
        assert_eq!(j.label, RelationalLabel::Manipulative);
    }

    #[test]
    fn the_system_layer_weighs_more_and_an_attack_below_it_is_extractive() {
        // T_w = (3 * 1.0 + 1 * 0.3) / 4 = 0.825; F_max = 0.6: balance 0.225.
        // The user layer is below the system layer with F >= 0.5: extractive exchange.
        let l = [
            layer(PromptLayer::System, 1.0, 0.0, 0.0),
            layer(PromptLayer::User, 0.3, 0.1, 0.6),
        ];
        let j = judge(&l, &[], &ModelParams::default());
        close(j.balance, 0.225);
        assert_eq!(j.exchange, ExchangeType::Extractive);
        assert_eq!(j.label, RelationalLabel::Extractive);
        // The same user layer alone: balance 0.3 - 0.6 = -0.3, manipulative.
        let j = judge(&l[1..], &[], &ModelParams::default());
        close(j.balance, -0.3);
        assert_eq!(j.label, RelationalLabel::Manipulative);
    }

    #[test]
    fn mild_pressure_under_a_strong_system_layer_stays_reciprocal() {
        // T_w = (3 * 1.0 + 1 * 0.6) / 4 = 0.9; F = 0.3: 0.6 > 0.5.
        let l = [
            layer(PromptLayer::System, 1.0, 0.0, 0.0),
            layer(PromptLayer::User, 0.6, 0.1, 0.3),
        ];
        let j = judge(&l, &[], &ModelParams::default());
        close(j.balance, 0.6);
        assert_eq!(j.exchange, ExchangeType::Reciprocal);
        assert_eq!(j.label, RelationalLabel::Reciprocal);
        // Alone, the same layer is borderline: 0.6 - 0.3 = 0.3, neither > 0.5 nor < 0.3.
        let j = judge(&l[1..], &[], &ModelParams::default());
        close(j.balance, 0.3);
        assert_eq!(j.label, RelationalLabel::Borderline);
    }

    #[test]
    fn excess_indeterminacy_lowers_the_balance() {
        // T = 0.4, I = 0.5, F = 0.1: 0.4 - 0.1 - 0.5 * (0.5 - 0.3) = 0.2.
        let l = [layer(PromptLayer::User, 0.4, 0.5, 0.1)];
        let j = judge(&l, &[], &ModelParams::default());
        close(j.balance, 0.2);
        assert_eq!(j.label, RelationalLabel::Manipulative);
    }

    #[test]
    fn a_violation_is_a_circuit_breaker() {
        let l = [
            layer(PromptLayer::System, 1.0, 0.0, 0.0),
            layer(PromptLayer::User, 0.9, 0.1, 0.0),
        ];
        let v = [TrustViolation {
            kind: ViolationKind::RoleConfusion,
            layer: PromptLayer::User,
            evidence: vec!["ROLE_001".into()],
        }];
        let j = judge(&l, &v, &ModelParams::default());
        // Without it: 0.975; with it, capped at -0.5.
        close(j.balance, -0.5);
        assert_eq!(j.exchange, ExchangeType::Extractive);
        assert_eq!(j.label, RelationalLabel::Extractive);
        let j = judge(&l[1..], &v, &ModelParams::default());
        assert_eq!(j.label, RelationalLabel::Manipulative);
    }

    #[test]
    fn the_tree_follows_its_five_steps() {
        use ExchangeType::*;
        use RelationalLabel as L;
        assert_eq!(label(3, 0.51, Extractive), L::Reciprocal);
        assert_eq!(label(2, -0.21, Reciprocal), L::Extractive);
        assert_eq!(label(2, 0.4, Extractive), L::Extractive);
        assert_eq!(label(1, -0.9, Extractive), L::Manipulative);
        assert_eq!(label(2, 0.0, Neutral), L::Manipulative);
        assert_eq!(label(1, 0.4, Extractive), L::Extractive);
        assert_eq!(label(1, 0.4, Reciprocal), L::Borderline);
        assert_eq!(label(1, 0.5, Neutral), L::Borderline);
        assert_eq!(label(1, 0.3, Reciprocal), L::Borderline);
    }

    #[test]
    fn saturation_is_off_by_default_and_measured_against_the_layers_above() {
        let mut l = [
            layer(PromptLayer::System, 1.0, 0.0, 0.0),
            layer(PromptLayer::User, 1.0, 0.0, 0.0),
        ];
        l[0].bytes = 100;
        l[1].bytes = 50_000;
        assert!(structural_violations(&l, &ModelParams::default()).is_empty());
        let p = ModelParams {
            saturation: Some(Saturation {
                ratio: 100.0,
                min_bytes: 10_000,
            }),
            ..ModelParams::default()
        };
        let v = structural_violations(&l, &p);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].kind, ViolationKind::ContextSaturation);
        assert_eq!(v[0].evidence, ["bytes:50000/100"]);
        l[1].bytes = 9_999;
        assert!(structural_violations(&l, &p).is_empty());
    }

    #[test]
    fn params_are_checked() {
        assert!(ModelParams::default().validate().is_ok());
        let mut p = ModelParams::default();
        p.weights.user = 5.0;
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("must not increase")
        );
        let p = ModelParams {
            violation_ceiling: 0.4,
            ..ModelParams::default()
        };
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("violation_ceiling")
        );
    }

    #[test]
    fn no_layers_is_the_lowest_balance() {
        close(balance(&[], &[], &ModelParams::default()), -1.0);
    }
}
