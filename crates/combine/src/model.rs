//! The combiner model file: a logistic model over the named features, its operating points
//! per channel, and how it was fitted.
//!
//! ```json
//! {
//!   "format": "rampart-combiner", "version": 1, "features_version": 1,
//!   "inputs": ["linear"],
//!   "judge": "judge",                      (only when fitted with the judge's features)
//!   "features": ["linear.whole", …],
//!   "learner": { "kind": "trees", "base": -0.4, "trees": [ { "nodes": [ … ] }, … ] },
//!   "operating_points": { "default": { "flag": 0.62, "block": 0.9 }, "tool": { … } },
//!   "fitted": { … }
//! }
//! ```

use crate::features::FEATURES_VERSION;
use rampart_core::Role;
use serde::{Deserialize, Serialize};

/// The `format` member of every combiner model file.
pub const MODEL_FORMAT: &str = "rampart-combiner";
/// The model file version this build reads.
pub const MODEL_VERSION: u32 = 1;

/// Where a channel's decisions fall: flagged (SANITIZE, medium risk) at or over `flag`,
/// blocked (high risk) at or over `block`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatingPoint {
    /// Probability at or over which a segment is flagged.
    pub flag: f32,
    /// Probability at or over which it is blocked (`>= flag`).
    pub block: f32,
}

/// Operating points: `default`, and per role where one was chosen for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatingPoints {
    /// Roles not named below.
    pub default: OperatingPoint,
    /// User prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<OperatingPoint>,
    /// Tool results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<OperatingPoint>,
    /// Retrieved documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieved: Option<OperatingPoint>,
    /// Model answers scanned as input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant: Option<OperatingPoint>,
    /// System prompts (when the policy does not trust them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<OperatingPoint>,
    /// Developer prompts (when the policy does not trust them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub developer: Option<OperatingPoint>,
}

impl OperatingPoints {
    /// Only a default point.
    pub fn new(default: OperatingPoint) -> OperatingPoints {
        OperatingPoints {
            default,
            user: None,
            tool: None,
            retrieved: None,
            assistant: None,
            system: None,
            developer: None,
        }
    }

    fn slot(&mut self, role: Role) -> &mut Option<OperatingPoint> {
        match role {
            Role::System => &mut self.system,
            Role::Developer => &mut self.developer,
            Role::User => &mut self.user,
            Role::Tool => &mut self.tool,
            Role::Retrieved => &mut self.retrieved,
            Role::Assistant => &mut self.assistant,
        }
    }

    /// The point chosen for `role` itself, if any.
    pub fn of(&self, role: Role) -> Option<OperatingPoint> {
        match role {
            Role::System => self.system,
            Role::Developer => self.developer,
            Role::User => self.user,
            Role::Tool => self.tool,
            Role::Retrieved => self.retrieved,
            Role::Assistant => self.assistant,
        }
    }

    /// Sets the point of `role`.
    pub fn set(&mut self, role: Role, point: OperatingPoint) {
        *self.slot(role) = Some(point);
    }

    /// The point of `role`: its own, else `default`.
    pub fn get(&self, role: Role) -> OperatingPoint {
        self.of(role).unwrap_or(self.default)
    }

    fn validate(&self) -> Result<(), ModelError> {
        let named = std::iter::once(("default".to_string(), self.default)).chain(
            Role::ALL
                .iter()
                .filter_map(|r| self.of(*r).map(|p| (r.name().to_string(), p))),
        );
        for (channel, p) in named {
            let ok = p.flag > 0.0 && p.flag <= 1.0 && p.block >= p.flag && p.block <= 1.0;
            if !ok {
                return Err(ModelError::OperatingPoint {
                    channel,
                    flag: p.flag,
                    block: p.block,
                });
            }
        }
        Ok(())
    }
}

/// How a model was fitted: recorded in the file, shown by `rampart combine show`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fitted {
    /// The command that fitted it.
    pub command: String,
    /// The datasets read, with how many rows each gave to fitting and to the operating points.
    pub datasets: Vec<FittedDataset>,
    /// The learner and its settings, in words.
    pub learner: String,
    /// Boosting rounds, or Newton steps of the logistic fit.
    pub iterations: usize,
    /// Per channel: each benign source's false-positive-rate target for `flag` and what the
    /// chosen point gives on the operating-point half.
    pub targets: Vec<ChannelTarget>,
}

/// One dataset of a fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FittedDataset {
    /// Its name (with its part).
    pub name: String,
    /// Segments used to fit the weights (attack, benign).
    pub fit: [usize; 2],
    /// Segments used to choose the operating points (attack, benign).
    pub calibrate: [usize; 2],
}

/// The targets of one channel's operating point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelTarget {
    /// `default` or a role.
    pub channel: String,
    /// Per benign source: (dataset, target FPR at `flag`, FPR reached at `flag`, rows).
    pub sources: Vec<(String, f64, f64, usize)>,
    /// Attack segments of the channel on the operating-point half, and the share flagged.
    pub attacks: (usize, f64),
}

/// A combiner model (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CombinerModel {
    /// Always [`MODEL_FORMAT`].
    pub format: String,
    /// Always [`MODEL_VERSION`].
    pub version: u32,
    /// The feature list version it was fitted on ([`FEATURES_VERSION`]).
    pub features_version: u32,
    /// The classifier layers it reads, in order.
    pub inputs: Vec<String>,
    /// The judge layer it reads (`judge.asked`, `judge.logodds`), when fitted with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
    /// Feature names, in vector order.
    pub features: Vec<String>,
    /// The fitted function.
    pub learner: Learner,
    /// Operating points per channel.
    pub operating_points: OperatingPoints,
    /// How it was fitted.
    pub fitted: Fitted,
}

/// The function from features to log-odds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Learner {
    /// Gradient-boosted trees ([`crate::trees`]); contributions along each tree's path.
    Trees {
        /// The starting log-odds.
        base: f32,
        /// The trees.
        trees: Vec<crate::trees::Tree>,
    },
    /// A logistic model ([`crate::fit`]); contributions `weight · (value − mean)`.
    Logistic {
        /// One weight per feature, on the raw feature value.
        weights: Vec<f32>,
        /// The mean of each feature over the fitting rows: a contribution is what the
        /// feature adds against an average segment.
        means: Vec<f32>,
        /// Added to the weighted sum.
        bias: f32,
    },
}

/// Why a combiner model is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Not JSON of this shape.
    #[error("not a combiner model: {0}")]
    Parse(String),
    /// Another format or version.
    #[error(
        "model format {format:?} version {version} (this build reads {MODEL_FORMAT:?} version {MODEL_VERSION})"
    )]
    Version {
        /// `format` as read.
        format: String,
        /// `version` as read.
        version: u32,
    },
    /// Fitted on another feature list.
    #[error(
        "model fitted on features version {found}, this build computes version {FEATURES_VERSION}"
    )]
    FeaturesVersion {
        /// As read.
        found: u32,
    },
    /// Its feature names are not the ones this extractor computes.
    #[error(
        "model features differ from the extractor's at position {position}: model {model:?}, extractor {extractor:?}"
    )]
    Features {
        /// First differing position.
        position: usize,
        /// The model's name there (empty past its end).
        model: String,
        /// The extractor's name there (empty past its end).
        extractor: String,
    },
    /// The trees are malformed.
    #[error("trees: {0}")]
    Trees(#[from] crate::trees::ForestError),
    /// `weights` or `means` do not have one value per feature, or a value is not finite.
    #[error("{what}: expected {expected} finite values, got {got}")]
    Shape {
        /// Which member.
        what: &'static str,
        /// One per feature.
        expected: usize,
        /// As read (or the position of the first value that is not finite).
        got: usize,
    },
    /// An operating point outside `0 < flag <= block <= 1`.
    #[error(
        "operating point {channel}: flag {flag} and block {block} must satisfy 0 < flag <= block <= 1"
    )]
    OperatingPoint {
        /// `default` or the role.
        channel: String,
        /// Its flag threshold.
        flag: f32,
        /// Its block threshold.
        block: f32,
    },
}

/// One feature's part in a probability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contribution {
    /// Feature name.
    pub feature: String,
    /// Its value.
    pub value: f32,
    /// `weight · (value − mean)`, in log-odds.
    pub contribution: f32,
}

impl CombinerModel {
    /// Reads and checks a model file's text against the feature names `expected`.
    pub fn parse(src: &str, expected: &[String]) -> Result<CombinerModel, ModelError> {
        let m: CombinerModel =
            serde_json::from_str(src).map_err(|e| ModelError::Parse(e.to_string()))?;
        m.check(expected)?;
        Ok(m)
    }

    /// Checks the model against the feature names `expected`.
    pub fn check(&self, expected: &[String]) -> Result<(), ModelError> {
        if self.format != MODEL_FORMAT || self.version != MODEL_VERSION {
            return Err(ModelError::Version {
                format: self.format.clone(),
                version: self.version,
            });
        }
        if self.features_version != FEATURES_VERSION {
            return Err(ModelError::FeaturesVersion {
                found: self.features_version,
            });
        }
        if self.features != expected {
            let position = self
                .features
                .iter()
                .zip(expected)
                .position(|(a, b)| a != b)
                .unwrap_or(self.features.len().min(expected.len()));
            let at = |v: &[String]| v.get(position).cloned().unwrap_or_default();
            return Err(ModelError::Features {
                position,
                model: at(&self.features),
                extractor: at(expected),
            });
        }
        match &self.learner {
            Learner::Trees { base, trees } => {
                crate::trees::Forest {
                    base: *base,
                    trees: trees.clone(),
                }
                .check(expected.len())?;
            }
            Learner::Logistic {
                weights,
                means,
                bias,
            } => {
                for (what, v) in [("weights", weights), ("means", means)] {
                    if v.len() != expected.len() {
                        return Err(ModelError::Shape {
                            what,
                            expected: expected.len(),
                            got: v.len(),
                        });
                    }
                    if let Some(bad) = v.iter().position(|x| !x.is_finite()) {
                        return Err(ModelError::Shape {
                            what,
                            expected: expected.len(),
                            got: bad,
                        });
                    }
                }
                if !bias.is_finite() {
                    return Err(ModelError::Shape {
                        what: "bias",
                        expected: 1,
                        got: 0,
                    });
                }
            }
        }
        self.operating_points.validate()
    }

    /// The log-odds of `values` (in feature order).
    pub fn log_odds(&self, values: &[f32]) -> f32 {
        match &self.learner {
            Learner::Trees { base, trees } => {
                base + trees.iter().map(|t| t.output(values)).sum::<f32>()
            }
            Learner::Logistic { weights, bias, .. } => {
                bias + weights.iter().zip(values).map(|(w, x)| w * x).sum::<f32>()
            }
        }
    }

    /// The probability of `values`.
    pub fn probability(&self, values: &[f32]) -> f32 {
        sigmoid(self.log_odds(values))
    }

    /// Every feature's contribution to the log-odds of `values`, against an average segment.
    pub fn contributions(&self, values: &[f32]) -> Vec<f32> {
        match &self.learner {
            Learner::Trees { trees, .. } => {
                crate::trees::contributions(trees, values, self.features.len())
            }
            Learner::Logistic { weights, means, .. } => weights
                .iter()
                .zip(means)
                .zip(values)
                .map(|((w, m), x)| w * (x - m))
                .collect(),
        }
    }

    /// The `n` largest contributions by size, largest first (ties: feature order).
    pub fn top_contributions(&self, values: &[f32], n: usize) -> Vec<Contribution> {
        let mut all: Vec<(usize, f32)> = self
            .contributions(values)
            .into_iter()
            .enumerate()
            .filter(|(_, c)| *c != 0.0)
            .collect();
        all.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()).then(a.0.cmp(&b.0)));
        all.into_iter()
            .take(n)
            .filter_map(|(i, c)| {
                Some(Contribution {
                    feature: self.features.get(i)?.clone(),
                    value: *values.get(i)?,
                    contribution: c,
                })
            })
            .collect()
    }
}

/// The logistic function.
pub fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}
