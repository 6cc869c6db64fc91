//! The judge layer's options (`[[layers]] kind = "judge"`), read strictly.

use rampart_core::Category;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Default layer name.
pub const DEFAULT_NAME: &str = "judge";
/// Default ambiguous band of a score trigger.
pub const DEFAULT_BAND: [f32; 2] = [0.4, 0.7];

/// Options of a judge layer.
///
/// ```toml
/// [[layers]]
/// kind = "judge"
/// base_url_env = "RAMPART_JUDGE_URL"
/// model_env = "RAMPART_JUDGE_MODEL"
/// llm = { protocol = "openai", base_url = "http://127.0.0.1:8080/v1", model = "smollm2-135m", api_key_env = "RAMPART_JUDGE_API_KEY" }
/// cache = { path = "data/judge-cache.sqlite", ttl_s = 604800 }
/// [layers.triggers]
/// ambiguous = [{ layer = "linear", band = [0.4, 0.7] }]
/// conflict = [{ rules = "rules", classifier = "linear", high = 0.8, low = 0.2 }]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeOptions {
    /// Layer name in decisions. Default `judge`.
    #[serde(default = "default_name")]
    pub name: String,
    /// The model endpoint: a `rampart_llm::LlmConfig` table. `base_url` and `model` may be
    /// left out when `base_url_env` / `model_env` name variables that are set.
    pub llm: toml::Table,
    /// An environment variable that, when set and not empty, replaces `llm.base_url`.
    #[serde(default)]
    pub base_url_env: Option<String>,
    /// An environment variable that, when set and not empty, replaces `llm.model`.
    #[serde(default)]
    pub model_env: Option<String>,
    /// When the judge is asked.
    #[serde(default)]
    pub triggers: TriggerOptions,
    /// Do not ask when an earlier layer already decided BLOCK and no layer deferred (the
    /// judge cannot lower a verdict, so the call could not change the outcome). Default true.
    #[serde(default = "yes")]
    pub skip_when_blocked: bool,
    /// The verdict cache: `false` (default) or a table.
    #[serde(default)]
    pub cache: CacheSetting,
    /// Most characters of input text shown to the judge, over all segments (each segment
    /// is cut at a character boundary; the prompt says when it was). Default 6000.
    #[serde(default = "default_max_chars")]
    pub max_chars: usize,
}

fn default_name() -> String {
    DEFAULT_NAME.into()
}
fn yes() -> bool {
    true
}
fn default_max_chars() -> usize {
    6000
}
fn default_band() -> [f32; 2] {
    DEFAULT_BAND
}
fn default_rules_layer() -> String {
    rampart_core::RULES_KIND.into()
}
fn default_high() -> f32 {
    0.8
}
fn default_low() -> f32 {
    0.2
}
fn default_ttl() -> u64 {
    7 * 24 * 3600
}
fn default_max_rows() -> u64 {
    100_000
}
fn default_key_env() -> String {
    "RAMPART_HASH_KEY".into()
}

/// The trigger contract: the judge is asked only when one of these fires (a layer that
/// deferred its band always does).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerOptions {
    /// A named layer's score in a band.
    #[serde(default)]
    pub ambiguous: Vec<AmbiguousTrigger>,
    /// Rules and a classifier disagree.
    #[serde(default)]
    pub conflict: Vec<ConflictTrigger>,
    /// Fire on findings of rules the pack marks "needs judgement". Default true.
    #[serde(default = "yes")]
    pub needs_judgement: bool,
    /// More rule IDs whose findings fire the judge.
    #[serde(default)]
    pub rules: Vec<String>,
    /// Categories whose findings fire the judge.
    #[serde(default)]
    pub categories: Vec<Category>,
}

impl Default for TriggerOptions {
    fn default() -> Self {
        Self {
            ambiguous: Vec::new(),
            conflict: Vec::new(),
            needs_judgement: true,
            rules: Vec::new(),
            categories: Vec::new(),
        }
    }
}

/// `{ layer = "linear", band = [0.4, 0.7] }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmbiguousTrigger {
    /// An earlier layer that gives a score.
    pub layer: String,
    /// Inclusive band. Default [0.4, 0.7].
    #[serde(default = "default_band")]
    pub band: [f32; 2],
}

/// `{ rules = "rules", classifier = "linear", high = 0.8, low = 0.2 }`: fires when the rules
/// found counted risk but the classifier's score is at most `low`, or the rules found
/// nothing counted but the classifier's score is at least `high`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConflictTrigger {
    /// The rule layer. Default `rules`.
    #[serde(default = "default_rules_layer")]
    pub rules: String,
    /// The classifier layer.
    pub classifier: String,
    /// Default 0.8.
    #[serde(default = "default_high")]
    pub high: f32,
    /// Default 0.2.
    #[serde(default = "default_low")]
    pub low: f32,
}

/// `cache = false` or `cache = { … }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CacheSetting {
    /// `false` (or `true`, which is refused: a cache needs a path).
    Flag(bool),
    /// The cache's settings.
    On(CacheOptions),
}

impl Default for CacheSetting {
    fn default() -> Self {
        CacheSetting::Flag(false)
    }
}

/// Whether the cache may call the model on a miss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    /// Look up; on a miss call the model and store an ok verdict.
    #[default]
    ReadWrite,
    /// Look up only: a miss makes no call and the layer fails ("replay-only: not in
    /// cache"), so the fail mode decides. For free, deterministic re-runs of an evaluation.
    Replay,
}

/// The SQLite verdict cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheOptions {
    /// The database file (created with its parent directory). A relative path is relative
    /// to the directory `dir_env` names, else to the working directory.
    pub path: PathBuf,
    /// An environment variable naming the directory of a relative `path` (e.g.
    /// `RAMPART_DATA_DIR`); when it is unset or empty, that directory is `./data`, the
    /// project's default data directory. Not set: relative to the working directory.
    #[serde(default)]
    pub dir_env: Option<String>,
    /// Entries older than this are misses (and are deleted when the cache opens). Default
    /// one week.
    #[serde(default = "default_ttl")]
    pub ttl_s: u64,
    /// Most entries kept; the oldest go first. Default 100,000.
    #[serde(default = "default_max_rows")]
    pub max_rows: u64,
    /// `read_write` (default) or `replay`.
    #[serde(default)]
    pub mode: CacheMode,
    /// Environment variable whose value keys the cache's hashes (so the file does not let
    /// anyone confirm a guessed input). Default `RAMPART_HASH_KEY`, as the pipeline's input
    /// hashes; unset, keys are plain content hashes.
    #[serde(default = "default_key_env")]
    pub key_env: String,
}

impl CacheOptions {
    /// A read-write cache at `path` with the defaults.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        CacheOptions {
            path: path.into(),
            dir_env: None,
            ttl_s: default_ttl(),
            max_rows: default_max_rows(),
            mode: CacheMode::ReadWrite,
            key_env: default_key_env(),
        }
    }
}

impl CacheOptions {
    /// The database file: `path`, resolved against `dir_env` when it is relative.
    pub fn resolved_path(&self) -> PathBuf {
        match &self.dir_env {
            Some(var) if self.path.is_relative() => {
                let dir = std::env::var_os(var)
                    .filter(|d| !d.is_empty())
                    .map_or_else(|| PathBuf::from("data"), PathBuf::from);
                dir.join(&self.path)
            }
            _ => self.path.clone(),
        }
    }
}

/// Sets a judge layer's cache to replay-only in its raw options (for `rampart eval`'s replay
/// mode). Fails when the layer has no cache table.
pub fn force_replay(options: &mut toml::Table) -> Result<(), String> {
    match options.get_mut("cache") {
        Some(toml::Value::Table(t)) => {
            t.insert("mode".into(), toml::Value::String("replay".into()));
            Ok(())
        }
        _ => Err("the judge layer has no cache to replay from (cache = { path = … })".into()),
    }
}
