//! The pipeline: built once from a configuration and a [`Registry`], immutable, shared across
//! threads. Scanning is in `scan.rs`.

use crate::config::{FailMode, HashSection, LayerConfig, NORMALIZE_LAYER, PipelineConfig, RunIf};
use crate::decision::ScanOutcome;
use crate::detector::Detector;
use crate::input::{InputError, ScanRequest};
use crate::registry::{BuildError, Registry};
use rampart_normalize::Normalizer;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The assembled, immutable pipeline. `Send + Sync`; share it in an `Arc` and scan from any
/// thread. Nothing is compiled on the request path.
#[derive(Debug)]
pub struct Pipeline {
    pub(crate) config: PipelineConfig,
    pub(crate) normalizer: Normalizer,
    /// The layers after `normalize`, in order.
    pub(crate) layers: Vec<Layer>,
    /// Rule IDs marked "needs judgement" by any detector.
    pub(crate) needs_judgement: BTreeSet<String>,
    hash_key: [u8; 32],
    hash_key_id: String,
}

/// One layer: its detector and the options its `[[layers]]` entry gives it.
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    pub(crate) detector: Arc<dyn Detector>,
    /// When it runs.
    pub(crate) run_if: Option<RunIf>,
    /// Whether it only scores (`score_only`).
    pub(crate) score_only: bool,
    /// Its band deferred to the judge (`defer`).
    pub(crate) defer: Option<[f32; 2]>,
    /// Its fail mode, when it overrides the policy's.
    pub(crate) fail_mode: Option<FailMode>,
}

impl Layer {
    fn configured(detector: Arc<dyn Detector>, config: &LayerConfig) -> Layer {
        Layer {
            detector,
            run_if: config.run_if.clone(),
            score_only: config.score_only,
            defer: config.defer,
            fail_mode: config.fail_mode,
        }
    }

    /// A layer that always runs and decides, with the policy's fail mode.
    fn plain(detector: Arc<dyn Detector>) -> Layer {
        Layer {
            detector,
            run_if: None,
            score_only: false,
            defer: None,
            fail_mode: None,
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.detector.name()
    }
}

impl Pipeline {
    /// Builds the pipeline a configuration describes, with the kinds core implements
    /// ([`Registry::default`]).
    pub fn from_config(config: PipelineConfig) -> Result<Pipeline, BuildError> {
        Pipeline::from_config_with(config, &Registry::default())
    }

    /// Builds the pipeline a configuration describes, with the given factories.
    pub fn from_config_with(
        config: PipelineConfig,
        registry: &Registry,
    ) -> Result<Pipeline, BuildError> {
        let layers = config
            .layers
            .iter()
            .map(|l| Ok(Layer::configured(registry.build(l)?, l)))
            .collect::<Result<Vec<_>, BuildError>>()?;
        Pipeline::assemble(config, layers)
    }

    /// This pipeline with one more layer at the end, built from `layer`; the existing
    /// layers are shared with this pipeline, not built again (a model is loaded once). The
    /// whole is checked as [`Pipeline::from_config_with`] checks a configuration.
    ///
    /// ```
    /// use rampart_core::{LayerConfig, Registry};
    ///
    /// let base = rampart_rules::rules_pipeline().unwrap();
    /// let fuse: LayerConfig =
    ///     toml::from_str("kind = \"fuse\"\ninputs = { rules = 1.0 }\nthreshold = 0.5").unwrap();
    /// let more = base.with_layer(fuse, &Registry::default()).unwrap();
    /// assert_eq!(more.layer_names(), ["normalize", "rules", "fuse"]);
    /// assert_eq!(base.layer_names(), ["normalize", "rules"]);
    /// // Names stay unique.
    /// let rules: LayerConfig = toml::from_str("kind = \"rules\"").unwrap();
    /// assert!(base.with_layer(rules, &rampart_rules::registry()).is_err());
    /// ```
    pub fn with_layer(
        &self,
        layer: LayerConfig,
        registry: &Registry,
    ) -> Result<Pipeline, BuildError> {
        let mut layers = self.layers.clone();
        layers.push(Layer::configured(registry.build(&layer)?, &layer));
        let mut config = self.config.clone();
        config.layers.push(layer);
        Pipeline::assemble(config, layers)
    }

    /// Builds a pipeline from already-built detectors (the config's `layers`, and so their
    /// `run_if` and `score_only` settings, are ignored: every detector runs and decides).
    pub fn with_detectors(
        config: PipelineConfig,
        detectors: Vec<Arc<dyn Detector>>,
    ) -> Result<Pipeline, BuildError> {
        let layers = detectors.into_iter().map(Layer::plain).collect();
        Pipeline::assemble(config, layers)
    }

    /// Checks layer names, the layers each layer reads, `run_if` conditions and `defer`
    /// bands, and builds.
    fn assemble(config: PipelineConfig, layers: Vec<Layer>) -> Result<Pipeline, BuildError> {
        check_names(&layers)?;
        check_reads(&layers)?;
        check_run_ifs(&layers)?;
        check_deferrals(&layers)?;
        let needs_judgement = layers
            .iter()
            .flat_map(|l| l.detector.judgement_rules())
            .collect();
        let hash_key = resolve_hash_key(&config.hash);
        let hash_key_id = blake3::hash(&hash_key).to_hex()[..8].to_string();
        Ok(Pipeline {
            normalizer: Normalizer::new(config.normalize.to_config()),
            config,
            layers,
            needs_judgement,
            hash_key,
            hash_key_id,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// The detectors, in order.
    pub fn detectors(&self) -> impl ExactSizeIterator<Item = &Arc<dyn Detector>> {
        self.layers.iter().map(|l| &l.detector)
    }

    /// Warms every layer up ([`Detector::warm_up`]): after it, no request compiles or
    /// loads anything. A long-running process calls it before it serves. The error names
    /// the layer.
    pub fn warm_up(&self) -> Result<(), WarmUpError> {
        for l in &self.layers {
            l.detector.warm_up().map_err(|source| WarmUpError {
                layer: l.name().to_string(),
                source,
            })?;
        }
        Ok(())
    }

    /// The names of the layers every decision reports, in order: [`NORMALIZE_LAYER`], then
    /// each detector's.
    pub fn layer_names(&self) -> Vec<&str> {
        std::iter::once(NORMALIZE_LAYER)
            .chain(self.layers.iter().map(Layer::name))
            .collect()
    }

    /// The ID of the key input hashes are made with (every decision's `hash_key_id`).
    pub fn hash_key_id(&self) -> &str {
        &self.hash_key_id
    }

    /// Keyed BLAKE3 hash of a request's segments (roles and texts), hex.
    pub fn input_hash(&self, req: &ScanRequest) -> String {
        let mut h = blake3::Hasher::new_keyed(&self.hash_key);
        for s in &req.segments {
            h.update(s.role.name().as_bytes());
            h.update(&[0]);
            h.update(&(s.text.len() as u64).to_le_bytes());
            h.update(s.text.as_bytes());
        }
        h.finalize().to_hex().to_string()
    }

    /// Scans plain text as one user segment.
    pub fn scan_text(&self, text: &str) -> Result<ScanOutcome, InputError> {
        self.scan(&ScanRequest::text(text))
    }

    /// The fail mode of layer `i` (after `normalize`): its own, else the policy's.
    pub(crate) fn fail_mode_of(&self, i: usize) -> FailMode {
        self.layers
            .get(i)
            .and_then(|l| l.fail_mode)
            .unwrap_or(self.config.policy.fail_mode)
    }
}

/// Layer names are unique, and none is `normalize`.
fn check_names(layers: &[Layer]) -> Result<(), BuildError> {
    let mut names = BTreeSet::new();
    names.insert(NORMALIZE_LAYER);
    for l in layers {
        if !names.insert(l.name()) {
            return Err(BuildError::DuplicateLayer(l.name().to_string()));
        }
    }
    Ok(())
}

/// Every layer a layer reads ([`Detector::reads_layers`]) comes before it.
fn check_reads(layers: &[Layer]) -> Result<(), BuildError> {
    for (i, l) in layers.iter().enumerate() {
        for input in l.detector.reads_layers() {
            if !layers[..i].iter().any(|e| e.name() == input) {
                return Err(BuildError::NotEarlier {
                    layer: l.name().to_string(),
                    input,
                });
            }
        }
    }
    Ok(())
}

/// Every `run_if` is well-formed and names an earlier layer.
fn check_run_ifs(layers: &[Layer]) -> Result<(), BuildError> {
    for (i, l) in layers.iter().enumerate() {
        let Some(c) = &l.run_if else { continue };
        let err = |message: String| BuildError::RunIf {
            layer: l.name().to_string(),
            message,
        };
        match (&c.score_of, c.between) {
            (Some(name), Some([lo, hi])) => {
                if !layers[..i].iter().any(|d| d.name() == name) {
                    return Err(err(format!("score_of {name:?} is not an earlier layer")));
                }
                if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) || lo > hi {
                    return Err(err(format!(
                        "between [{lo}, {hi}] must satisfy 0 <= low <= high <= 1"
                    )));
                }
            }
            (None, None) if c.not_blocked => {}
            (None, None) => return Err(err("an empty condition".into())),
            _ => return Err(err("score_of and between go together".into())),
        }
    }
    Ok(())
}

/// Checks every `defer` band: well-formed, and followed by the pipeline's only judge.
fn check_deferrals(layers: &[Layer]) -> Result<(), BuildError> {
    let judges: Vec<usize> = (0..layers.len())
        .filter(|&i| layers[i].detector.resolves_deferred())
        .collect();
    if let [_, second, ..] = judges[..] {
        return Err(BuildError::Defer {
            layer: layers[second].name().to_string(),
            message: "a pipeline has at most one judge layer".into(),
        });
    }
    for (i, l) in layers.iter().enumerate() {
        let Some([lo, hi]) = l.defer else { continue };
        let err = |message: String| BuildError::Defer {
            layer: l.name().to_string(),
            message,
        };
        if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) || lo > hi {
            return Err(err(format!(
                "[{lo}, {hi}] must satisfy 0 <= low <= high <= 1"
            )));
        }
        if !judges.iter().any(|&j| j > i) {
            // The layer that decides deferred bands is the `judge` kind's (no other kind
            // resolves them today); the message names it so a user knows what to add.
            return Err(err("no `judge` layer after it to decide its band".into()));
        }
        if judges.iter().all(|&j| j < i || layers[j].score_only) {
            return Err(err(
                "the `judge` layer after it is score_only and decides no band".into(),
            ));
        }
    }
    Ok(())
}

/// The 32-byte hash key: from the configured environment variable or literal, else a
/// random per-process key (hashes then correlate only within one process).
fn resolve_hash_key(section: &HashSection) -> [u8; 32] {
    let material = section
        .key_env
        .as_deref()
        .and_then(|name| std::env::var(name).ok())
        .filter(|k| !k.is_empty())
        .or_else(|| section.key.clone());
    match material {
        Some(k) => blake3::derive_key("rampart input hash v1", k.as_bytes()),
        None => {
            use std::hash::{BuildHasher, Hasher};
            let mut seed = Vec::new();
            for _ in 0..4 {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u128(
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_nanos())
                        .unwrap_or(0),
                );
                h.write_u32(std::process::id());
                seed.extend_from_slice(&h.finish().to_le_bytes());
            }
            blake3::derive_key("rampart input hash v1 (ephemeral)", &seed)
        }
    }
}

/// A layer that failed to warm up ([`Pipeline::warm_up`]).
#[derive(Debug, thiserror::Error)]
#[error("layer {layer} failed to warm up: {source}")]
pub struct WarmUpError {
    /// The layer's name.
    pub layer: String,
    /// What went wrong.
    #[source]
    pub source: crate::DetectorError,
}
