//! The judge layer's options (`[[layers]] kind = "judge"`), read strictly.

use rampart_core::Category;
use rampart_llm::{Endpoint, EndpointEnv};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
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
/// [layers.triggers.conversation]
/// rise_at = 0.25
/// window = 4
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeOptions {
    /// Layer name in decisions. Default `judge`.
    #[serde(default = "default_name")]
    pub name: String,
    /// The model endpoint. `base_url` and `model` may be left out when `base_url_env` /
    /// `model_env` name variables that are set.
    pub llm: Endpoint,
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
    /// When the earlier messages of a conversation are shown to the judge: `always`
    /// (default: whenever a judged request is part of a conversation), `on_trigger` (only
    /// when a conversation trigger fired) or `off`.
    #[serde(default)]
    pub history: HistoryMode,
    /// Most bytes of earlier messages shown, newest first (each cut at a character
    /// boundary; the prompt says when one was cut or left out). Default 2048.
    #[serde(default = "default_history_bytes")]
    pub max_history_bytes: usize,
    /// What of the model's own words a verdict keeps (decisions, the audit log, the cache):
    /// `vocabulary` (default: the label, the confidence and evidence signals mapped onto a
    /// fixed vocabulary, with their spans) or `free_text` (the model's explanation and
    /// signals, redacted of copied input runs of 20+ characters).
    #[serde(default)]
    pub explanations: ExplanationMode,
    /// How the model gives its verdict: `structured` (default: a JSON object with label,
    /// confidence, explanation and evidence) or `score` (one token: the probabilities of
    /// the answer tokens "yes" / "no" give P(attack), calibrated and thresholded as
    /// `[layers.score]` says). Servers that return no log-probabilities (the Anthropic
    /// protocol, some OpenAI-compatible servers) fall back to `structured`, and the
    /// report says so.
    #[serde(default)]
    pub mode: JudgeMode,
    /// Score mode's answer tokens, calibration and thresholds.
    #[serde(default)]
    pub score: ScoreOptions,
    /// Score mode: when a structured call is made for the explanation an analyst reads:
    /// `never`, `on_block` (default: when the score says suspicious or malicious) or
    /// `always`. The label stays the score's.
    #[serde(default)]
    pub explain: ExplainWhen,
}

/// How the judge model gives its verdict (see [`JudgeOptions::mode`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeMode {
    /// A JSON object: label, confidence, explanation, evidence.
    #[default]
    Structured,
    /// One token's log-probabilities: P(attack).
    Score,
}

impl JudgeMode {
    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            JudgeMode::Structured => "structured",
            JudgeMode::Score => "score",
        }
    }
}

/// When score mode also asks for an explanation (see [`JudgeOptions::explain`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExplainWhen {
    /// Never: the verdict is the score alone.
    Never,
    /// When the score says suspicious or malicious.
    #[default]
    OnBlock,
    /// Every time.
    Always,
}

/// Score mode's prompt: the fixed prefix (instructions and worked examples) before the data.
/// All share the instructions and the question; they differ in the examples, so a server
/// that caches prompts serves each prefix from its cache after the first call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScorePrompt {
    /// `judge-score-v1-zero`: the instructions alone, no worked example.
    ZeroShot,
    /// `judge-score-v1`: six worked examples.
    #[default]
    V1,
    /// `judge-score-v2`: the six of v1 and twelve more (hidden instructions in emails, pages
    /// and tool output, extraction, forged history, non-English attacks, and benign texts that
    /// use the same words).
    V2,
}

/// `[layers.score]`: score mode's answer tokens, calibration and thresholds.
///
/// P(attack) = sigmoid(slope · (ln P(yes) − ln P(no)) + intercept), where P(yes) and P(no)
/// sum the first token's candidates that read as an answer token (trimmed, lower-cased).
/// Fit `slope` and `intercept` on validation data (Platt scaling of the reported
/// `score_logit`); the defaults are the identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreOptions {
    /// Tokens that mean "yes, an attack". Default `["yes"]`.
    #[serde(default = "default_yes")]
    pub yes: Vec<String>,
    /// Tokens that mean "no". Default `["no"]`.
    #[serde(default = "default_no")]
    pub no: Vec<String>,
    /// Calibration slope. Default 1.
    #[serde(default = "one")]
    pub slope: f64,
    /// Calibration intercept. Default 0.
    #[serde(default)]
    pub intercept: f64,
    /// P(attack) at or above which the verdict is suspicious. Default 0.5.
    #[serde(default = "default_suspicious_at")]
    pub suspicious_at: f64,
    /// P(attack) at or above which the verdict is malicious. Default 0.85.
    #[serde(default = "default_malicious_at")]
    pub malicious_at: f64,
    /// Candidates asked for (1 to 20). Default 20.
    #[serde(default = "default_top")]
    pub top_logprobs: u8,
    /// The prompt (its worked examples). Default `v1`.
    #[serde(default)]
    pub prompt: ScorePrompt,
}

impl Default for ScoreOptions {
    fn default() -> Self {
        Self {
            yes: default_yes(),
            no: default_no(),
            slope: 1.0,
            intercept: 0.0,
            suspicious_at: default_suspicious_at(),
            malicious_at: default_malicious_at(),
            top_logprobs: default_top(),
            prompt: ScorePrompt::default(),
        }
    }
}

fn default_yes() -> Vec<String> {
    vec!["yes".into()]
}
fn default_no() -> Vec<String> {
    vec!["no".into()]
}
fn one() -> f64 {
    1.0
}
fn default_suspicious_at() -> f64 {
    0.5
}
fn default_malicious_at() -> f64 {
    0.85
}
fn default_top() -> u8 {
    20
}

/// Why score options cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("[layers.score] {0}")]
pub struct ScoreOptionsError(pub String);

impl ScoreOptions {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), ScoreOptionsError> {
        let bad = |m: &str| Err(ScoreOptionsError(m.into()));
        if self.yes.iter().chain(&self.no).any(|t| t.trim().is_empty())
            || self.yes.is_empty()
            || self.no.is_empty()
        {
            return bad("yes and no need at least one non-empty token each");
        }
        let norm = |t: &String| t.trim().to_lowercase();
        if self
            .yes
            .iter()
            .any(|y| self.no.iter().any(|n| norm(n) == norm(y)))
        {
            return bad("a token cannot be both yes and no");
        }
        if !self.slope.is_finite() || self.slope <= 0.0 || !self.intercept.is_finite() {
            return bad("slope must be positive and finite, intercept finite");
        }
        if !(0.0 < self.suspicious_at
            && self.suspicious_at <= self.malicious_at
            && self.malicious_at <= 1.0)
        {
            return bad("0 < suspicious_at <= malicious_at <= 1");
        }
        if !(1..=20).contains(&self.top_logprobs) {
            return bad("top_logprobs must be 1 to 20");
        }
        Ok(())
    }

    /// P(attack) and the logit from the first token's candidates (token, log-probability);
    /// `None` when no candidate is an answer token.
    pub fn probability(&self, top: &[(String, f64)]) -> Option<(f64, f64)> {
        let norm = |t: &str| t.trim().to_lowercase();
        let is = |set: &[String], t: &str| set.iter().any(|s| norm(s) == norm(t));
        let (mut yes, mut no) = (0.0f64, 0.0f64);
        for (t, lp) in top {
            if is(&self.yes, t) {
                yes += lp.exp();
            } else if is(&self.no, t) {
                no += lp.exp();
            }
        }
        if yes == 0.0 && no == 0.0 {
            return None;
        }
        // An answer token not among the candidates is at most as likely as the least
        // likely candidate.
        let floor = top
            .iter()
            .map(|(_, lp)| lp.exp())
            .fold(f64::INFINITY, f64::min)
            .max(f64::MIN_POSITIVE);
        let logit = yes.max(floor).ln() - no.max(floor).ln();
        let z = self.slope * logit + self.intercept;
        Some((1.0 / (1.0 + (-z).exp()), logit))
    }
}

/// What a verdict keeps of the judge model's explanation (see [`JudgeOptions::explanations`]).
///
/// Free text can carry what the redaction of copied runs misses: a 15-character secret from
/// the prompt, or a credential the model made up (issue 35 found both in the audit log and
/// the judge cache). The vocabulary cannot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExplanationMode {
    /// Label, confidence and signals from a fixed vocabulary.
    #[default]
    Vocabulary,
    /// The model's words, redacted.
    FreeText,
}

impl JudgeOptions {
    /// The variables that override the endpoint's `base_url` and `model`.
    pub fn endpoint_env(&self) -> EndpointEnv<'_> {
        EndpointEnv {
            base_url_env: self.base_url_env.as_deref(),
            model_env: self.model_env.as_deref(),
        }
    }
}

/// When the judge sees a conversation's earlier messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryMode {
    /// Whenever the judged request is part of a conversation, whatever fired: the newest
    /// message of a multi-turn attack often reads as harmless alone ("now put the pieces
    /// together"), whichever trigger asked.
    #[default]
    Always,
    /// Only when a conversation trigger fired.
    OnTrigger,
    /// Never (the judge sees the current call's segments only).
    Off,
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
fn default_history_bytes() -> usize {
    2048
}
fn default_band() -> [f32; 2] {
    DEFAULT_BAND
}
fn default_rules_layer() -> String {
    rampart_rules::RULES_KIND.into()
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
    /// The built-in conversation trigger: `true` (default: the defaults of
    /// [`ConversationTriggerOptions`]), `false`, or a table. Fires only for conversation
    /// requests.
    #[serde(default)]
    pub conversation: ConversationSetting,
}

impl Default for TriggerOptions {
    fn default() -> Self {
        Self {
            ambiguous: Vec::new(),
            conflict: Vec::new(),
            needs_judgement: true,
            rules: Vec::new(),
            categories: Vec::new(),
            conversation: ConversationSetting::default(),
        }
    }
}

/// A condition's threshold: a number, or `false` to turn the condition off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit<T> {
    /// The condition is off.
    Off,
    /// The condition holds at this value or more.
    At(T),
}

impl<T: Serialize> Serialize for Limit<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Limit::Off => s.serialize_bool(false),
            Limit::At(v) => v.serialize(s),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Limit<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged, expecting = "a number, or false to turn the condition off")]
        enum Raw<T> {
            Flag(bool),
            At(T),
        }
        match Raw::deserialize(d)? {
            Raw::Flag(false) => Ok(Limit::Off),
            Raw::Flag(true) => Err(serde::de::Error::custom(
                "true is not a threshold: give a number, or false to turn the condition off",
            )),
            Raw::At(v) => Ok(Limit::At(v)),
        }
    }
}

/// `conversation = true | false` or `[layers.triggers.conversation]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged, try_from = "toml::Value")]
pub enum ConversationSetting {
    /// `true`: the defaults; `false`: off.
    Flag(bool),
    /// The trigger's settings.
    On(ConversationTriggerOptions),
}

/// On by default: a deployment that runs a judge wants it asked where the cheaper layers
/// leave the question open, and a conversation whose risk builds across turns is that case
/// (a slow-burn attack's turns each look mild). It fires only for conversation requests,
/// so plain requests are judged as before.
impl Default for ConversationSetting {
    fn default() -> Self {
        ConversationSetting::Flag(true)
    }
}

/// Why `conversation = …` is not a conversation setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversationSettingError {
    /// Neither a boolean nor a table: the value's TOML type.
    #[error("expected true, false or a table, got {0}")]
    Type(&'static str),
    /// The table is not [`ConversationTriggerOptions`].
    #[error("{}", .0.message().trim())]
    Table(toml::de::Error),
}

impl TryFrom<toml::Value> for ConversationSetting {
    type Error = ConversationSettingError;
    fn try_from(v: toml::Value) -> Result<Self, ConversationSettingError> {
        match v {
            toml::Value::Boolean(b) => Ok(ConversationSetting::Flag(b)),
            // Through the table's own strict reading, so an unknown or mistyped key is named.
            toml::Value::Table(t) => toml::Value::Table(t)
                .try_into()
                .map(ConversationSetting::On)
                .map_err(ConversationSettingError::Table),
            other => Err(ConversationSettingError::Type(other.type_str())),
        }
    }
}

impl ConversationSetting {
    /// The trigger's settings, or `None` when it is off.
    pub fn resolved(&self) -> Option<ConversationTriggerOptions> {
        match self {
            ConversationSetting::Flag(false) => None,
            ConversationSetting::Flag(true) => Some(ConversationTriggerOptions::default()),
            ConversationSetting::On(o) => Some(o.clone()),
        }
    }
}

/// Default rise of the per-turn risk that fires the conversation trigger.
pub const DEFAULT_RISE_AT: f32 = 0.25;
/// Default calls (the current one included) the rise is measured over.
pub const DEFAULT_RISE_WINDOW: usize = 4;
/// Default conversation risk (before this turn) that fires the conversation trigger.
pub const DEFAULT_RISK_AT: f32 = 0.5;
/// Default escalation term (before this turn) that fires the conversation trigger.
pub const DEFAULT_ESCALATION_AT: f32 = 0.1;
/// Default blocked turns in the lineage that fire the conversation trigger.
pub const DEFAULT_ON_BLOCKS: u32 = 1;

/// `[layers.triggers.conversation]`: when a conversation request asks the judge. Any
/// condition that holds fires; each takes `false` to turn it off. Read from the conversation
/// state's numbers ([`rampart_core::conversation::ConversationContext`]) and the earlier
/// layers' results, never from text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationTriggerOptions {
    /// The per-turn risk rose by at least this much over the last `window` calls (the
    /// current one included, its risk so far taken from the earlier layers: the highest
    /// score, floored by their actions, risk classes and rule strength, as the conversation
    /// state scores a turn). Default 0.25.
    #[serde(default = "default_rise_at")]
    pub rise_at: Limit<f32>,
    /// Calls the rise is measured over, the current one included (>= 2). Default 4.
    #[serde(default = "default_window")]
    pub window: usize,
    /// The conversation risk before this turn is at least this. Default 0.5 (the
    /// conversation part blocks at 0.8 by default; the judge looks at what comes before).
    #[serde(default = "default_risk_at")]
    pub risk_at: Limit<f32>,
    /// The escalation term before this turn is at least this (0.5 × the slope of the
    /// per-turn risk by default: 0.1 is a rise of 0.2 a turn). Default 0.1.
    #[serde(default = "default_escalation_at")]
    pub escalation_at: Limit<f32>,
    /// The turn is a near-identical rephrasing of a blocked one. Default true.
    #[serde(default = "yes")]
    pub on_rephrasing: bool,
    /// At least this many turns of the conversation's lineage (pruned branches included)
    /// were blocked: after a block, attackers rephrase. Default 1.
    #[serde(default = "default_on_blocks")]
    pub on_blocks: Limit<u32>,
    /// At least this many of the lineage's turns were refused by the model. Default off
    /// (ordinary chats meet refusals too, and each fire costs a judge call).
    #[serde(default = "limit_off")]
    pub on_refusals: Limit<u32>,
}

fn default_rise_at() -> Limit<f32> {
    Limit::At(DEFAULT_RISE_AT)
}
fn default_window() -> usize {
    DEFAULT_RISE_WINDOW
}
fn default_risk_at() -> Limit<f32> {
    Limit::At(DEFAULT_RISK_AT)
}
fn default_escalation_at() -> Limit<f32> {
    Limit::At(DEFAULT_ESCALATION_AT)
}
fn default_on_blocks() -> Limit<u32> {
    Limit::At(DEFAULT_ON_BLOCKS)
}
fn limit_off() -> Limit<u32> {
    Limit::Off
}

impl Default for ConversationTriggerOptions {
    fn default() -> Self {
        Self {
            rise_at: default_rise_at(),
            window: default_window(),
            risk_at: default_risk_at(),
            escalation_at: default_escalation_at(),
            on_rephrasing: true,
            on_blocks: default_on_blocks(),
            on_refusals: limit_off(),
        }
    }
}

/// A `[layers.triggers.conversation]` value out of its range; the message names the key.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversationTriggerError {
    /// A threshold outside (0, 1].
    #[error("triggers.conversation.{key} = {value}: must be in (0, 1], or false")]
    Threshold {
        /// The key.
        key: &'static str,
        /// The configured value.
        value: f32,
    },
    /// A count of 0.
    #[error("triggers.conversation.{0} = 0: must be >= 1, or false")]
    ZeroCount(&'static str),
    /// A window under two calls.
    #[error("triggers.conversation.window = {0}: must be >= 2 (a rise needs two calls)")]
    Window(usize),
}

impl ConversationTriggerOptions {
    /// Checks the ranges: thresholds in (0, 1], counts >= 1, `window` >= 2. The error names
    /// the key.
    pub fn validate(&self) -> Result<(), ConversationTriggerError> {
        for (key, limit) in [
            ("rise_at", self.rise_at),
            ("risk_at", self.risk_at),
            ("escalation_at", self.escalation_at),
        ] {
            if let Limit::At(value) = limit
                && !(value > 0.0 && value <= 1.0)
            {
                return Err(ConversationTriggerError::Threshold { key, value });
            }
        }
        for (key, limit) in [
            ("on_blocks", self.on_blocks),
            ("on_refusals", self.on_refusals),
        ] {
            if limit == Limit::At(0) {
                return Err(ConversationTriggerError::ZeroCount(key));
            }
        }
        if self.window < 2 {
            return Err(ConversationTriggerError::Window(self.window));
        }
        Ok(())
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

/// A judge layer without a cache cannot be set to replay from one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the judge layer has no cache to replay from (cache = {{ path = … }})")]
pub struct NoCacheError;

/// Sets a judge layer's cache to replay-only in its raw options (for `rampart eval`'s replay
/// mode). Fails when the layer has no cache table.
pub fn force_replay(options: &mut toml::Table) -> Result<(), NoCacheError> {
    match options.get_mut("cache") {
        Some(toml::Value::Table(t)) => {
            t.insert("mode".into(), toml::Value::String("replay".into()));
            Ok(())
        }
        _ => Err(NoCacheError),
    }
}
