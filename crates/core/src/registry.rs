//! Layer kinds: the [`DetectorFactory`] a crate registers for each kind it implements, the
//! [`Registry`] a pipeline is built with, and why building fails.

use crate::config::{FUSE_KIND, LayerConfig};
use crate::detector::Detector;
use crate::fuse::{FuseDetector, FuseOptions};
use crate::owasp::{Capability, Owasp, OwaspEntry, Protection};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Builds a detector from a layer's options. Crates that add detectors (classifiers, an LLM
/// judge) register a factory so pipelines can be assembled from configuration.
pub trait DetectorFactory: Send + Sync {
    /// The `kind` this factory builds.
    fn kind(&self) -> &str;
    /// Builds the detector, validating the options strictly.
    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError>;
    /// The risks of the OWASP Top 10 for LLM Applications (2025) that layers of this kind
    /// address (`rampart owasp` reports them). Empty by default: a kind that says nothing
    /// claims no coverage.
    fn owasp(&self) -> &'static [Owasp] {
        &[]
    }
}

/// Known detector factories, by kind.
pub struct Registry {
    factories: BTreeMap<String, Box<dyn DetectorFactory>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("kinds", &self.factories.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for Registry {
    /// A registry with the kinds core implements: `fuse`. Layer crates add theirs
    /// (`rampart_rules::RulesFactory`, …); the `rampart` crate's registry has them all.
    fn default() -> Self {
        let mut r = Registry {
            factories: BTreeMap::new(),
        };
        r.register(Box::new(FuseFactory));
        r
    }
}

impl Registry {
    /// Adds (or replaces) a factory.
    pub fn register(&mut self, factory: Box<dyn DetectorFactory>) {
        self.factories.insert(factory.kind().to_string(), factory);
    }

    /// The registered kinds.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }

    /// Every registered layer kind and every [`Capability`], with the OWASP risks each
    /// addresses: layers first (by kind), then capabilities (in [`Capability::ALL`] order).
    pub fn owasp(&self) -> Vec<OwaspEntry<'_>> {
        let layers = self.factories.iter().map(|(kind, f)| OwaspEntry {
            protection: Protection::Layer(kind),
            owasp: sorted(f.owasp()),
        });
        let caps = Capability::ALL.into_iter().map(|c| OwaspEntry {
            protection: Protection::Capability(c),
            owasp: sorted(c.owasp()),
        });
        layers.chain(caps).collect()
    }

    pub(crate) fn build(&self, layer: &LayerConfig) -> Result<Arc<dyn Detector>, BuildError> {
        let factory = self
            .factories
            .get(&layer.kind)
            .ok_or_else(|| BuildError::UnknownLayer {
                kind: layer.kind.clone(),
                known: self.factories.keys().cloned().collect(),
            })?;
        factory.build(&layer.options)
    }
}

fn sorted(ids: &[Owasp]) -> Vec<Owasp> {
    let mut v = ids.to_vec();
    v.sort();
    v.dedup();
    v
}

/// Reads a `[[layers]]` entry's options (everything but `kind`, `run_if` and `score_only`)
/// into the layer's options type `T`; a type or unknown-key error becomes
/// [`BuildError::Options`] for `kind`. Shared by every factory.
pub fn layer_options<T: serde::de::DeserializeOwned>(
    kind: &str,
    options: &toml::Table,
) -> Result<T, BuildError> {
    toml::Value::Table(options.clone())
        .try_into()
        .map_err(|e: toml::de::Error| BuildError::Options {
            kind: kind.into(),
            message: e.message().trim().to_string(),
        })
}

struct FuseFactory;

impl DetectorFactory for FuseFactory {
    fn kind(&self) -> &str {
        FUSE_KIND
    }

    /// Fuses the prompt-injection scores of earlier layers.
    fn owasp(&self) -> &'static [Owasp] {
        &[Owasp::Llm01]
    }

    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        let opts: FuseOptions = layer_options(FUSE_KIND, options)?;
        let det = FuseDetector::new(opts).map_err(|e| BuildError::Options {
            kind: FUSE_KIND.into(),
            message: e.to_string(),
        })?;
        Ok(Arc::new(det))
    }
}

/// Why a pipeline could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No factory for a layer kind.
    #[error("unknown layer kind {kind:?} (known: {})", known.join(", "))]
    UnknownLayer {
        /// The kind asked for.
        kind: String,
        /// The kinds registered.
        known: Vec<String>,
    },
    /// A layer's options are invalid.
    #[error("layer {kind:?}: invalid options: {message}")]
    Options {
        /// The layer kind.
        kind: String,
        /// What is wrong.
        message: String,
    },
    /// A layer failed to build (e.g. a rule pack failed to compile).
    #[error("layer {kind:?} failed to build:\n{message}")]
    Layer {
        /// The layer kind.
        kind: String,
        /// What is wrong.
        message: String,
    },
    /// Two layers share a name.
    #[error("two layers are named {0:?}")]
    DuplicateLayer(String),
    /// A `run_if` condition is malformed or names no earlier layer.
    #[error("layer {layer:?}: invalid run_if: {message}")]
    RunIf {
        /// The layer whose condition is wrong.
        layer: String,
        /// What is wrong.
        message: String,
    },
    /// A `defer` band is malformed, has no judge after it, or there are two judges.
    #[error("layer {layer:?}: invalid defer: {message}")]
    Defer {
        /// The layer.
        layer: String,
        /// What is wrong.
        message: String,
    },
    /// A layer reads the result of a layer that does not come before it.
    #[error("layer {layer:?} reads layer {input:?}, which is not an earlier layer")]
    NotEarlier {
        /// The reading layer.
        layer: String,
        /// The layer it names.
        input: String,
    },
}
