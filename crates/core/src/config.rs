//! Pipeline configuration: limits, normalization bounds, policy, hashing, and the layers.
//! Strict TOML (`deny_unknown_fields` everywhere), versioned, with an embedded default.

use crate::decision::Action;
use crate::input::{Limits, Role, Trust};
use crate::location::Location;
use crate::scoring::ScoringConfig;
use crate::vocab::RiskClass;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The configuration schema version this build reads.
pub const CONFIG_VERSION: u32 = 1;

/// `kind` of the built-in score-fusion layer (its layer name defaults to the same).
pub const FUSE_KIND: &str = "fuse";
/// Name of the normalization step in decisions: the first layer of every pipeline, which
/// reports the normalizer's signals (`ENC_90x`). Not a `kind`: it is always there.
pub const NORMALIZE_LAYER: &str = "normalize";

/// What happens when a layer fails or times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailMode {
    /// The failed layer's action is BLOCK (the default).
    Closed,
    /// The failed layer's action is ALLOW; the decision is marked degraded and says why.
    Open,
}

/// `[policy] data_injection`: what a BLOCK becomes when its only counted evidence lies in
/// data channels (`tool`, `retrieved` segments).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataInjection {
    /// It stays BLOCK (the default).
    #[default]
    Block,
    /// SANITIZE: the injected units are removed from the data and the rest is passed on.
    /// Still BLOCK when any other evidence is high risk, a blocking layer failed or has no
    /// localized finding, a data finding is too weak to be removed, or nothing could be
    /// removed.
    Sanitize,
}

/// Which action each risk class maps to, trust per role, fail mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// A version string recorded in every decision.
    pub version: String,
    /// Action for low risk. Default ALLOW.
    pub low_risk: Action,
    /// Action for medium risk. Default SANITIZE.
    pub medium_risk: Action,
    /// Action for high risk. Default BLOCK.
    pub high_risk: Action,
    /// Behaviour on layer error or timeout. Default closed.
    pub fail_mode: FailMode,
    /// Time budget per layer, in milliseconds. Default 2000.
    pub layer_timeout_ms: u64,
    /// Trust level per role.
    pub trust: BTreeMap<Role, Trust>,
    /// Replacement for each span SANITIZE removes; `{rule}` is replaced by the rule ID.
    pub sanitize_marker: String,
    /// A BLOCK whose only counted evidence lies in data channels: BLOCK (default) or
    /// SANITIZE ([`DataInjection`]).
    pub data_injection: DataInjection,
    /// The scoring table's tunables.
    pub scoring: ScoringConfig,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        let trust = Role::ALL
            .into_iter()
            .map(|r| {
                let t = match r {
                    Role::System | Role::Developer => Trust::Trusted,
                    _ => Trust::Untrusted,
                };
                (r, t)
            })
            .collect();
        Self {
            version: "default-1".into(),
            low_risk: Action::Allow,
            medium_risk: Action::Sanitize,
            high_risk: Action::Block,
            fail_mode: FailMode::Closed,
            layer_timeout_ms: 2000,
            trust,
            sanitize_marker: "[removed:{rule}]".into(),
            data_injection: DataInjection::Block,
            scoring: ScoringConfig::default(),
        }
    }
}

impl PolicyConfig {
    /// The action for a risk class.
    pub fn action_for(&self, risk: RiskClass) -> Action {
        match risk {
            RiskClass::LowRisk => self.low_risk,
            RiskClass::MediumRisk => self.medium_risk,
            RiskClass::HighRisk => self.high_risk,
        }
    }

    /// The trust level of a role (untrusted when the table omits it).
    pub fn trust_of(&self, role: Role) -> Trust {
        self.trust.get(&role).copied().unwrap_or(Trust::Untrusted)
    }
}

/// Bounds of the normalization layer (see `rampart_normalize::NormalizeConfig`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NormalizeSection {
    /// Maximum decoder nesting.
    pub max_decode_depth: usize,
    /// Maximum total view bytes as a multiple of the input.
    pub max_expansion_ratio: f64,
    /// Maximum number of views.
    pub max_views: usize,
}

impl Default for NormalizeSection {
    fn default() -> Self {
        let d = rampart_normalize::NormalizeConfig::default();
        Self {
            max_decode_depth: d.max_decode_depth,
            max_expansion_ratio: d.max_expansion_ratio,
            max_views: d.max_views,
        }
    }
}

impl NormalizeSection {
    /// The normalizer configuration.
    pub fn to_config(&self) -> rampart_normalize::NormalizeConfig {
        rampart_normalize::NormalizeConfig {
            max_decode_depth: self.max_decode_depth,
            max_expansion_ratio: self.max_expansion_ratio,
            max_views: self.max_views.max(2),
            ..Default::default()
        }
    }
}

/// Where the key for input hashes comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HashSection {
    /// Name of an environment variable holding the key (any string; it is hashed into a
    /// 32-byte key). Default `RAMPART_HASH_KEY`.
    pub key_env: Option<String>,
    /// The key itself (discouraged: prefer the environment).
    pub key: Option<String>,
}

/// One layer of the pipeline. `kind` names a registered detector factory; the remaining
/// keys are that factory's options, validated strictly by the factory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerConfig {
    /// The factory name, e.g. `"rules"`.
    pub kind: String,
    /// When the layer runs (default: always). This is how a cascade is built: an expensive
    /// layer runs only where a cheap earlier layer is unsure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_if: Option<RunIf>,
    /// The layer only scores: its score feeds later layers (`run_if`, a `fuse` or `combine`
    /// layer), its findings are reported but not counted, and its own verdict is ALLOW (a
    /// judge's verdict floor and its resolution of deferred bands are not applied either).
    /// Default false. (A failure or timeout still follows the policy's fail mode.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub score_only: bool,
    /// Defer the layer's ambiguous band to the judge: when its score lies in `[low, high]`
    /// (inclusive), its own verdict is undecided (neither BLOCK nor ALLOW) and a later
    /// `judge` layer decides. Needs a later judge layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defer: Option<[f32; 2]>,
    /// This layer's fail mode, overriding `[policy] fail_mode` (e.g. a remote judge that
    /// may fail open while local layers fail closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_mode: Option<FailMode>,
    /// Factory options.
    #[serde(flatten)]
    pub options: toml::Table,
}

impl LayerConfig {
    /// A layer of `kind` with no options, always run, deciding, with the policy's fail mode.
    pub fn new(kind: impl Into<String>) -> LayerConfig {
        LayerConfig {
            kind: kind.into(),
            run_if: None,
            score_only: false,
            defer: None,
            fail_mode: None,
            options: toml::Table::new(),
        }
    }
}

/// A condition on what earlier layers found, deciding whether a layer runs. A layer that
/// does not run is recorded in the decision as skipped (never silently): it contributes
/// nothing, so the verdict is the earlier layers' (the ratchet still holds).
///
/// ```toml
/// [[layers]]
/// kind = "transformer"
/// run_if = { not_blocked = true, score_of = "linear", between = [0.02, 0.98] }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunIf {
    /// Skip the layer when an earlier layer already decided BLOCK (its verdict could not
    /// change the outcome).
    #[serde(default)]
    pub not_blocked: bool,
    /// An earlier layer whose score decides, with `between`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_of: Option<String>,
    /// Run only when `score_of`'s score lies in `[low, high]` (inclusive). When that layer
    /// yielded no score (it failed, timed out or was skipped), the layer runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub between: Option<[f32; 2]>,
}

/// The whole pipeline configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Must be [`CONFIG_VERSION`].
    pub version: u32,
    /// Input limits.
    #[serde(default)]
    pub limits: Limits,
    /// Normalization bounds.
    #[serde(default)]
    pub normalize: NormalizeSection,
    /// Policy.
    #[serde(default)]
    pub policy: PolicyConfig,
    /// Input hashing.
    #[serde(default)]
    pub hash: HashSection,
    /// How classifier layers cut untrusted text into windows (localized detection).
    #[serde(default)]
    pub localize: crate::localize::LocalizeConfig,
    /// Layers, in order.
    #[serde(default)]
    pub layers: Vec<LayerConfig>,
}

impl PipelineConfig {
    /// A configuration of `layers` with every section at its default.
    pub fn new(layers: Vec<LayerConfig>) -> PipelineConfig {
        PipelineConfig {
            version: CONFIG_VERSION,
            limits: Limits::default(),
            normalize: NormalizeSection::default(),
            policy: PolicyConfig::default(),
            hash: HashSection::default(),
            localize: crate::localize::LocalizeConfig::default(),
            layers,
        }
    }
}

/// A configuration file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{origin}: cannot read configuration: {message}")]
    Io {
        /// The path.
        origin: String,
        /// The OS error.
        message: String,
    },
    /// Syntax error, unknown key, wrong type.
    #[error("{location}: {message}")]
    Syntax {
        /// Where.
        location: Location,
        /// What is wrong.
        message: String,
    },
    /// Semantically invalid.
    #[error("{origin}: {message}")]
    Invalid {
        /// The file.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// The `[localize]` table is out of range.
    #[error("{origin}: {source}")]
    Localize {
        /// The file.
        origin: String,
        /// What is wrong.
        source: crate::localize::LocalizeError,
    },
}

/// The key of a partial configuration that names what it extends ([`PipelineConfig::parse_over`]).
pub const EXTENDS_KEY: &str = "extends";

fn syntax(src: &str, origin: &str, e: &toml::de::Error) -> ConfigError {
    ConfigError::Syntax {
        location: Location::from_span(origin, src, e.span().map(|s| s.start).unwrap_or(0)),
        message: e.message().trim().to_string(),
    }
}

impl PipelineConfig {
    /// Parses and validates a configuration.
    pub fn parse(src: &str, origin: &str) -> Result<PipelineConfig, ConfigError> {
        let cfg: PipelineConfig = toml::from_str(src).map_err(|e| syntax(src, origin, &e))?;
        cfg.validated(origin)
    }

    /// Merges `over`, a partial configuration (already parsed, its `extends` ignored), over
    /// the complete configuration `base`: each table of `over` overrides `base` key by key
    /// (nested tables merged, other values and arrays replaced); each `[[layers]]` entry is
    /// merged into `base`'s layer of the same `kind` (added at the end when `base` has none,
    /// an error when it has several). `version` may be left out. So a file that changes one
    /// threshold holds just that.
    pub fn parse_over(
        base: &str,
        base_origin: &str,
        mut over: toml::Table,
        origin: &str,
    ) -> Result<PipelineConfig, ConfigError> {
        let mut merged: toml::Table =
            toml::from_str(base).map_err(|e| syntax(base, base_origin, &e))?;
        over.remove(EXTENDS_KEY);
        crate::config_merge::merge_config(&mut merged, over).map_err(|message| {
            ConfigError::Invalid {
                origin: origin.to_string(),
                message,
            }
        })?;
        let cfg = PipelineConfig::deserialize(toml::Value::Table(merged)).map_err(|e| {
            ConfigError::Invalid {
                origin: format!("{origin} (over {base_origin})"),
                message: e.message().trim().to_string(),
            }
        })?;
        cfg.validated(origin)
    }

    /// The checks beyond the types.
    fn validated(self, origin: &str) -> Result<PipelineConfig, ConfigError> {
        let cfg = self;
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin.to_string(),
            message,
        };
        if cfg.version != CONFIG_VERSION {
            return Err(invalid(format!(
                "unsupported version {} (this build reads {CONFIG_VERSION})",
                cfg.version
            )));
        }
        if cfg.limits.max_bytes == 0 || cfg.limits.max_segments == 0 {
            return Err(invalid("limits must be greater than zero".into()));
        }
        if cfg.normalize.max_expansion_ratio.is_nan() || cfg.normalize.max_expansion_ratio < 1.0 {
            return Err(invalid("normalize.max_expansion_ratio must be >= 1".into()));
        }
        if cfg.policy.low_risk > cfg.policy.medium_risk
            || cfg.policy.medium_risk > cfg.policy.high_risk
        {
            return Err(invalid(
                "policy actions must not decrease with risk (low <= medium <= high)".into(),
            ));
        }
        if cfg.layers.is_empty() {
            return Err(invalid("at least one layer is required".into()));
        }
        cfg.localize
            .validate()
            .map_err(|source| ConfigError::Localize {
                origin: origin.to_string(),
                source,
            })?;
        Ok(cfg)
    }

    /// Reads and parses a complete configuration file (one with `extends` is read by the
    /// facade, `rampart::load_config`, which knows the embedded default).
    pub fn from_path(path: &std::path::Path) -> Result<PipelineConfig, ConfigError> {
        let origin = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        PipelineConfig::parse(&src, &origin)
    }
}
