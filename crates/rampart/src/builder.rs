//! Building a pipeline from a configuration and the overrides a front end offers.

use rampart_core::{BuildError, ConfigError, FailMode, Pipeline, PipelineConfig, Registry};
use rampart_rules::RulesConfig;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a pipeline could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration could not be read or is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A layer could not be built (unknown kind, invalid options, a model missing …).
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// Where the configuration comes from.
#[derive(Debug, Clone)]
enum Source {
    Embedded,
    File(PathBuf),
    Toml { text: String, origin: String },
    Config(Box<PipelineConfig>),
}

/// A pipeline to build: a configuration and the overrides the command line, the server and
/// the Python package offer. [`Builder::build`] gives an immutable pipeline.
///
/// ```
/// use rampart::{Action, Builder};
///
/// let pipeline = Builder::from_toml(
///     r#"
/// version = 1
/// [policy]
/// medium_risk = "BLOCK"
/// [[layers]]
/// kind = "rules"
/// "#,
///     "inline.toml",
/// )
/// .fail_open()
/// .build()?;
/// let out = pipeline.scan_text("What is the capital of France?")?;
/// assert_eq!(out.decision.action, Action::Allow);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Builder {
    source: Source,
    rule_packs: Vec<PathBuf>,
    no_default_rules: bool,
    fail_open: bool,
    compile_on_first_use: bool,
    registry: Option<Registry>,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("source", &self.source)
            .field("rule_packs", &self.rule_packs)
            .field("no_default_rules", &self.no_default_rules)
            .field("fail_open", &self.fail_open)
            .field("compile_on_first_use", &self.compile_on_first_use)
            .field("registry", &self.registry)
            .finish()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    fn with_source(source: Source) -> Builder {
        Builder {
            source,
            rule_packs: Vec::new(),
            no_default_rules: false,
            fail_open: false,
            compile_on_first_use: false,
            registry: None,
        }
    }

    /// The embedded default configuration ([`crate::DEFAULT_CONFIG_SRC`]).
    pub fn new() -> Builder {
        Builder::with_source(Source::Embedded)
    }

    /// A configuration file (TOML).
    pub fn from_file(path: impl AsRef<Path>) -> Builder {
        Builder::with_source(Source::File(path.as_ref().to_path_buf()))
    }

    /// A configuration as TOML text; `origin` names it in error messages.
    pub fn from_toml(text: impl Into<String>, origin: impl Into<String>) -> Builder {
        Builder::with_source(Source::Toml {
            text: text.into(),
            origin: origin.into(),
        })
    }

    /// An already parsed configuration.
    pub fn from_config(config: PipelineConfig) -> Builder {
        Builder::with_source(Source::Config(Box::new(config)))
    }

    /// The embedded configuration, or `path` when given: what a `--config` option means.
    pub fn from_optional_file(path: Option<&Path>) -> Builder {
        match path {
            Some(p) => Builder::from_file(p),
            None => Builder::new(),
        }
    }

    /// Adds rule packs to every `rules` layer, after the packs each already loads.
    pub fn rule_packs(mut self, packs: impl IntoIterator<Item = PathBuf>) -> Builder {
        self.rule_packs.extend(packs);
        self
    }

    /// Leaves the embedded default rule pack out of every `rules` layer.
    pub fn no_default_rules(mut self) -> Builder {
        self.no_default_rules = true;
        self
    }

    /// A layer that fails or times out gives ALLOW (the decision marked degraded) instead
    /// of BLOCK.
    pub fn fail_open(mut self) -> Builder {
        self.fail_open = true;
        self
    }

    /// Rules layers that do not say when to compile (`compile` unset) compile the embedded
    /// packs' regexes the first time a scan needs each ([`rampart_rules::plans::Compile`]):
    /// start-up drops from a fifth of a second to a few hundredths, for commands that
    /// scan and exit. A long-running process leaves it off, or calls
    /// [`Pipeline::warm_up`] before it serves.
    pub fn compile_on_first_use(mut self) -> Builder {
        self.compile_on_first_use = true;
        self
    }

    /// Builds with these layer kinds instead of [`crate::registry`].
    pub fn registry(mut self, registry: Registry) -> Builder {
        self.registry = Some(registry);
        self
    }

    /// The configuration with the overrides applied, without building it.
    pub fn config(&self) -> Result<PipelineConfig, Error> {
        let mut config = match &self.source {
            Source::Embedded => crate::default_config()?,
            Source::File(p) => crate::load_config(p)?,
            Source::Toml { text, origin } => crate::parse_config(text, origin)?,
            Source::Config(c) => (**c).clone(),
        };
        if self.fail_open {
            config.policy.fail_mode = FailMode::Open;
        }
        if self.no_default_rules {
            config.edit_rules_layers(|o| o.default_pack = false)?;
        }
        config.add_rule_packs(&self.rule_packs)?;
        if self.compile_on_first_use {
            config.edit_rules_layers(|o| {
                o.compile
                    .get_or_insert(rampart_rules::plans::Compile::FirstUse);
            })?;
        }
        Ok(config)
    }

    /// Builds the pipeline: every layer compiled and loaded once, immutable, `Send + Sync`.
    pub fn build(self) -> Result<Pipeline, Error> {
        let config = self.config()?;
        let pipeline = match &self.registry {
            Some(r) => Pipeline::from_config_with(config, r)?,
            None => Pipeline::from_config_with(config, &crate::registry())?,
        };
        Ok(pipeline)
    }
}
