//! The judge layer: the trigger contract, the call (or the cache), the checked verdict, its
//! redaction, and the findings that carry its spans.

use crate::cache::{Cache, CacheError, CacheStats, Entry, SharedCache, VerdictCache, hash_key};
use crate::deferred::{DeferredExplanations, ExplanationJob};
use crate::options::{
    CacheMode, CacheOptions, CacheSetting, ConversationTriggerError, ExplainWhen, ExplanationMode,
    HistoryMode, JudgeMode, JudgeOptions,
};
use crate::prompt::{self, PromptSegment, ShownHistory};
use crate::report::{
    CacheStatus, ExplainOutcome, IntentLabel, JUDGE_KIND, JudgeEvidence, JudgeReport, JudgeTrigger,
    JudgeVerdict,
};
use crate::trigger::{self, Contract, ConversationTrigger};
use rampart_core::{
    BuildError, Category, Detection, Detector, DetectorError, DetectorFactory, Earlier, Finding,
    PipelineConfig, RiskClass, Role, ScanInput, ScanRequest, Span, Strength, Trust, ViewKind,
    layer_options, scoring,
};
use rampart_llm::{ChatRequest, LlmClient, Message, Outcome, OutcomeKind, redact_with_history};
use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use unicode_normalization::UnicodeNormalization;

/// Rule ID of a malicious verdict's findings (high risk, strong).
pub const MALICIOUS_ID: &str = "JDG_001";
/// Rule ID of a suspicious verdict's findings (medium risk, strong: 2 points, the least
/// SANITIZE removes a span for; a weak finding would leave SANITIZE nothing to remove and
/// every suspicious verdict would end as BLOCK).
pub const SUSPICIOUS_ID: &str = "JDG_002";

/// Time kept back from the layer's deadline so a call that runs out of time ends (as a
/// `timeout` outcome, with its report) before the pipeline's own budget check.
const DEADLINE_MARGIN: Duration = Duration::from_millis(100);

/// Why a judge layer could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JudgeError {
    /// The options are invalid.
    #[error("{0}")]
    Options(String),
    /// The `llm` table, with its environment overrides, is not a usable endpoint.
    #[error("llm: {0}")]
    Llm(rampart_llm::EndpointError),
    /// The conversation trigger's settings are out of range.
    #[error(transparent)]
    ConversationTrigger(#[from] ConversationTriggerError),
    /// The cache could not be opened.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// The intent layer. Built once, shared across threads.
#[derive(Debug)]
pub struct JudgeLayer {
    name: String,
    opts: JudgeOptions,
    client: LlmClient,
    cache: Option<CacheSlot>,
    conversation: Option<Arc<dyn ConversationTrigger>>,
    /// Where score mode's explanations are parked instead of asked inline (opt-in:
    /// [`JudgeLayer::defer_explanations`]).
    deferred: OnceLock<DeferredExplanations>,
}

/// The layer's cache: its own SQLite file, or the shared one once set
/// ([`JudgeLayer::share_cache`]).
#[derive(Debug)]
struct CacheSlot {
    local: Arc<dyn VerdictCache>,
    shared: OnceLock<Arc<dyn VerdictCache>>,
    mode: CacheMode,
    key: [u8; 32],
    opts: CacheOptions,
}

impl CacheSlot {
    fn cache(&self) -> &Arc<dyn VerdictCache> {
        self.shared.get().unwrap_or(&self.local)
    }
}

fn check_band(what: &str, [lo, hi]: [f32; 2]) -> Result<(), JudgeError> {
    if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) || lo > hi {
        return Err(JudgeError::Options(format!(
            "{what}: [{lo}, {hi}] must satisfy 0 <= low <= high <= 1"
        )));
    }
    Ok(())
}

impl JudgeLayer {
    /// Builds the layer: checks the options, builds the client, opens the cache.
    pub fn new(opts: JudgeOptions) -> Result<JudgeLayer, JudgeError> {
        if opts.name.is_empty() {
            return Err(JudgeError::Options("name must not be empty".into()));
        }
        if opts.max_chars == 0 {
            return Err(JudgeError::Options("max_chars must be > 0".into()));
        }
        for a in &opts.triggers.ambiguous {
            check_band(&format!("triggers.ambiguous {:?} band", a.layer), a.band)?;
        }
        for c in &opts.triggers.conflict {
            check_band(
                &format!("triggers.conflict {:?} [low, high]", c.classifier),
                [c.low, c.high],
            )?;
        }
        if let Some(c) = opts.triggers.conversation.resolved() {
            c.validate()?;
        }
        opts.score
            .validate()
            .map_err(|e| JudgeError::Options(e.to_string()))?;
        if opts.max_history_bytes == 0 {
            return Err(JudgeError::Options(
                "max_history_bytes must be > 0 (history = \"off\" shows none)".into(),
            ));
        }
        let config = opts
            .llm
            .resolve(opts.endpoint_env())
            .map_err(JudgeError::Llm)?;
        let client = LlmClient::new(config).map_err(|e| JudgeError::Llm(e.into()))?;
        let cache = match &opts.cache {
            CacheSetting::Flag(false) => None,
            CacheSetting::Flag(true) => {
                return Err(JudgeError::Options(
                    "cache = true needs a file: cache = { path = \"…\" }".into(),
                ));
            }
            CacheSetting::On(c) => Some(CacheSlot {
                local: Arc::new(Cache::open(c)?),
                shared: OnceLock::new(),
                mode: c.mode,
                key: hash_key(c),
                opts: c.clone(),
            }),
        };
        Ok(JudgeLayer {
            name: opts.name.clone(),
            opts,
            client,
            cache,
            conversation: None,
            deferred: OnceLock::new(),
        })
    }

    /// The judge layer of a pipeline configuration (its first `kind = "judge"` layer), built
    /// on its own: for `rampart judge "text"` ([`JudgeLayer::judge_direct`]).
    pub fn from_pipeline_config(config: &PipelineConfig) -> Result<JudgeLayer, JudgeError> {
        let layer = config
            .layers
            .iter()
            .find(|l| l.kind == JUDGE_KIND)
            .ok_or_else(|| {
                JudgeError::Options(format!("the configuration has no `{JUDGE_KIND}` layer"))
            })?;
        let opts: JudgeOptions = layer_options(JUDGE_KIND, &layer.options)
            .map_err(|e| JudgeError::Options(e.to_string()))?;
        JudgeLayer::new(opts)
    }

    /// Adds a conversation-level trigger, besides the built-in one of
    /// `[layers.triggers.conversation]` (none by default).
    pub fn with_conversation_trigger(mut self, hook: Arc<dyn ConversationTrigger>) -> Self {
        self.conversation = Some(hook);
        self
    }

    /// Defers score mode's explanations (opt-in; the service sets it): when `explain` wants
    /// one, the decision returns at once with `explain_outcome = "deferred"` and an
    /// `explain_ticket`, and the call waits in `deferred` until its owner takes it
    /// ([`DeferredExplanations::take`]) and runs it ([`ExplanationJob::run`]) off the
    /// request path. Without it (the CLI, library use) the explanation is asked inline.
    pub fn with_deferred_explanations(self, deferred: DeferredExplanations) -> Self {
        self.defer_explanations(deferred);
        self
    }

    /// [`JudgeLayer::with_deferred_explanations`] on a built layer (found in a pipeline
    /// through [`Detector::as_any`]). Set once: false (and nothing changes) when the layer
    /// already defers.
    pub fn defer_explanations(&self, deferred: DeferredExplanations) -> bool {
        self.deferred.set(deferred).is_ok()
    }

    /// Whether score mode's explanations are deferred.
    pub fn defers_explanations(&self) -> bool {
        self.deferred.get().is_some()
    }

    /// Cache hit/miss/store counters, when a cache is configured.
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.as_ref().map(|c| c.cache().stats())
    }

    /// Keeps the layer's verdict cache in the shared state instead of its SQLite file (the
    /// service sets it with `[state] backend = "redis"`, so that every replica answers a
    /// repeated question from one cache), with the layer's TTL, row cap, key and mode (see
    /// [`SharedCache`]). Set once, on a built layer (found in a pipeline through
    /// [`Detector::as_any`]): false (and nothing changes) when the layer has no cache or
    /// shares one already.
    pub fn share_cache(&self, store: Arc<dyn rampart_state::SharedStore>) -> bool {
        match &self.cache {
            Some(slot) => {
                let shared: Arc<dyn VerdictCache> = Arc::new(SharedCache::new(store, &slot.opts));
                slot.shared.set(shared).is_ok()
            }
            None => false,
        }
    }

    /// Whether the verdict cache is the shared one ([`JudgeLayer::share_cache`]).
    pub fn shares_cache(&self) -> bool {
        self.cache
            .as_ref()
            .is_some_and(|c| c.shared.get().is_some())
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.client.config().model
    }

    /// The client's warnings (e.g. an API-key variable that is not set).
    pub fn warnings(&self) -> &[String] {
        self.client.warnings()
    }

    /// Asks the judge about `req` directly (`rampart judge "text"`), bypassing the trigger
    /// contract: the trigger is [`JudgeTrigger::Direct`]; prompt, cache and redaction are the
    /// layer's. Segment trust is the segment's own, else trusted for system and developer
    /// roles and untrusted otherwise (the default policy).
    pub fn judge_direct(&self, req: &ScanRequest) -> JudgeReport {
        let segs: Vec<(usize, Role, Trust, &str)> = req
            .segments
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let trust = s.trust.unwrap_or(match s.role {
                    Role::System | Role::Developer => Trust::Trusted,
                    _ => Trust::Untrusted,
                });
                (i, s.role, trust, s.text.as_str())
            })
            .collect();
        let signals = "none: asked directly, no other layer ran".to_string();
        self.ask(&segs, &[], vec![JudgeTrigger::Direct], &signals, None)
    }

    fn base_report(&self, triggers: Vec<JudgeTrigger>) -> JudgeReport {
        let mut r = JudgeReport::not_called(&self.name, "");
        r.not_called = None;
        r.called = true;
        r.triggers = triggers;
        r.model = self.model().to_string();
        r.prompt_id = prompt::PROMPT_ID.into();
        r.prompt_hash = prompt::prompt_hash().into();
        r.cache = if self.cache.is_some() {
            CacheStatus::Miss
        } else {
            CacheStatus::Off
        };
        r
    }

    /// The cache key: a keyed hash of everything that decides the answer but the nonce. The
    /// earlier messages shown are part of it (the same newest text after another history is
    /// another question); without them the key is what it was before history existed, so
    /// plain requests keep their cached verdicts. Score mode without explanations
    /// ([`JudgeLayer::score_key_only`]) leaves out the signals and the history: its prompt
    /// holds neither, so the same text asked through another trigger (a deferred band in
    /// one configuration, an ambiguous score in another) is the same question.
    fn cache_key(
        &self,
        cache: &CacheSlot,
        shown: &[PromptSegment<'_>],
        history: &ShownHistory<'_>,
        signals: &str,
    ) -> String {
        let cfg = self.client.config();
        let mut h = blake3::Hasher::new_keyed(&cache.key);
        let mut put = |b: &[u8]| {
            h.update(&(b.len() as u64).to_le_bytes());
            h.update(b);
        };
        put(prompt::PROMPT_ID.as_bytes());
        put(prompt::prompt_hash().as_bytes());
        if self.opts.mode == JudgeMode::Score {
            // Length 5 where the protocol name that follows otherwise is 6 or 9: a score
            // verdict never answers a structured question.
            put(b"score");
            put(prompt::score_prompt_hash(self.opts.score.prompt).as_bytes());
            put(format!("{:?}", self.opts.score).as_bytes());
            put(format!("{:?}", self.opts.explain).as_bytes());
        }
        put(cfg.protocol.name().as_bytes());
        put(cfg.model.as_bytes());
        put(&cfg.temperature.to_bits().to_le_bytes());
        put(&cfg.max_tokens.to_le_bytes());
        put(format!("{:?}", cfg.structured_mode()).as_bytes());
        let score_only = self.score_key_only();
        let signals: &[u8] = if score_only { &[] } else { signals.as_bytes() };
        put(signals);
        for s in shown {
            put(&(s.index as u64).to_le_bytes());
            put(s.role.name().as_bytes());
            put(&[u8::from(s.trust == Trust::Trusted), u8::from(s.cut)]);
            put(s.text.nfc().collect::<String>().as_bytes());
        }
        if !history.messages.is_empty() && !score_only {
            // Length 7, where every segment's first field has length 8: no plain request's
            // fields read the same.
            put(b"history");
            put(prompt::history_prompt_hash().as_bytes());
            put(&(history.omitted as u64).to_le_bytes());
            for m in &history.messages {
                put(m.role.name().as_bytes());
                put(&[u8::from(m.cut)]);
                put(m.text.nfc().collect::<String>().as_bytes());
            }
        }
        h.finalize().to_hex().to_string()
    }

    /// Whether the cache key is the score question's alone: score mode that asks for no
    /// explanation, on a protocol with log-probabilities. Its answer depends on the fenced
    /// text only, not on the signals or the earlier messages (which only the structured
    /// prompt shows).
    fn score_key_only(&self) -> bool {
        self.opts.mode == JudgeMode::Score
            && self.opts.explain == ExplainWhen::Never
            && self.client.config().protocol != rampart_llm::Protocol::Anthropic
    }

    /// Asks (or looks up) the verdict for `segs`, after the conversation's earlier messages
    /// `history` (empty: none).
    fn ask(
        &self,
        segs: &[(usize, Role, Trust, &str)],
        history: &[(Role, String)],
        triggers: Vec<JudgeTrigger>,
        signals: &str,
        deadline: Option<Instant>,
    ) -> JudgeReport {
        let mut report = self.base_report(triggers);
        let shown = prompt::shown_segments(segs.iter().copied(), self.opts.max_chars);
        let history = prompt::shown_history(history, self.opts.max_history_bytes);
        if !history.messages.is_empty() {
            report.prompt_id = prompt::HISTORY_PROMPT_ID.into();
            report.prompt_hash = prompt::history_prompt_hash().into();
        }
        let texts: Vec<&str> = segs.iter().map(|s| s.3).collect();
        let earlier: Vec<(usize, &str)> =
            history.messages.iter().map(|m| (m.label, m.text)).collect();
        let redact = |t: &str| redact_with_history(t, &texts, &earlier);
        let key = match self.look_up(&mut report, &shown, &history, signals, &texts) {
            Cached::Answered => return report,
            Cached::Ask(key) => key,
        };
        let fenced: Vec<&str> = texts
            .iter()
            .chain(earlier.iter().map(|e| &e.1))
            .copied()
            .collect();
        let nonce = match prompt::nonce(&fenced) {
            Ok(n) => n,
            Err(e) => {
                report.outcome_detail = Some(e.to_string());
                return report;
            }
        };
        if self.opts.mode == JudgeMode::Score {
            let ctx = ScoreContext {
                nonce: &nonce,
                signals,
                shown: &shown,
                history: &history,
                deadline,
                segs,
                redact: &redact,
                key: key.as_deref(),
            };
            match self.ask_score(&ctx, &mut report) {
                ScoreRun::Done => {
                    report.outcome_detail = report.outcome_detail.take().map(|d| redact(&d));
                    return report;
                }
                ScoreRun::Fallback(why) => report.mode_fallback = Some(why),
            }
        }
        // A server that returned no log-probabilities: the structured verdict depends on the
        // signals and history the score question's key leaves out, so it is not stored.
        let key = if self.score_key_only() { None } else { key };
        report.mode = Some(JudgeMode::Structured);
        let (req, timeout_ms) = self.chat_request(&nonce, signals, &shown, &history, deadline);
        let done = self.client.complete(&req);
        add_usage(&mut report, &done);
        let (outcome, detail) = self.settle(
            done.outcome,
            timeout_ms,
            segs,
            &redact,
            key.as_deref(),
            &mut report,
        );
        report.outcome = Some(outcome);
        // A server's error message may echo the prompt.
        report.outcome_detail = detail.map(|d| redact(&d));
        report
    }

    /// Score mode: one token's log-probabilities give P(attack), calibrated and
    /// thresholded into the verdict; an explanation is asked for afterwards when `explain`
    /// says so. `Fallback` when the server returns no log-probabilities.
    fn ask_score(&self, c: &ScoreContext<'_>, report: &mut JudgeReport) -> ScoreRun {
        let cfg = self.client.config();
        if cfg.protocol == rampart_llm::Protocol::Anthropic {
            return ScoreRun::Fallback(
                "the anthropic protocol returns no log-probabilities".into(),
            );
        }
        let timeout_ms = self.timeout_ms(c.deadline);
        let (system, messages) = prompt::build_score(self.opts.score.prompt, c.nonce, c.shown);
        let req = ChatRequest {
            system,
            messages: to_messages(messages),
            schema: None,
            max_tokens: Some(1),
            timeout_ms: Some(timeout_ms),
            top_logprobs: Some(self.opts.score.top_logprobs),
        };
        let done = self.client.complete(&req);
        add_usage(report, &done);
        match done.outcome {
            Outcome::Unparseable { detail } if detail == rampart_llm::NO_LOGPROBS => {
                return ScoreRun::Fallback(detail);
            }
            Outcome::Ok { value, .. } => {
                report.mode = Some(JudgeMode::Score);
                report.prompt_id = prompt::score_prompt_id(self.opts.score.prompt).into();
                report.prompt_hash = prompt::score_prompt_hash(self.opts.score.prompt).into();
                let top: Vec<(String, f64)> = value["top_logprobs"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|t| {
                                Some((t["token"].as_str()?.to_string(), t["logprob"].as_f64()?))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let Some((p, logit)) = self.opts.score.probability(&top) else {
                    report.outcome = Some(OutcomeKind::Unparseable);
                    report.outcome_detail = Some(format!(
                        "no answer token ({} / {}) among the first token's {} candidates",
                        self.opts.score.yes.join(", "),
                        self.opts.score.no.join(", "),
                        top.len()
                    ));
                    return ScoreRun::Done;
                };
                let s = &self.opts.score;
                let label = if p >= s.malicious_at {
                    IntentLabel::Malicious
                } else if p >= s.suspicious_at {
                    IntentLabel::Suspicious
                } else {
                    IntentLabel::Benign
                };
                let mut verdict = JudgeVerdict {
                    intent_label: label,
                    confidence: if label == IntentLabel::Benign {
                        1.0 - p
                    } else {
                        p
                    } as f32,
                    explanation: format!("score mode: P(attack) = {p:.3}"),
                    evidence: Vec::new(),
                };
                report.score = Some(p as f32);
                report.score_logit = Some(logit as f32);
                let wanted = match self.opts.explain {
                    ExplainWhen::Never => false,
                    ExplainWhen::OnBlock => label != IntentLabel::Benign,
                    ExplainWhen::Always => true,
                };
                if wanted {
                    match self.deferred.get() {
                        Some(d) => self.defer(c, &verdict, report, d),
                        None => self.explain(c, &mut verdict, report),
                    }
                }
                self.store(c.key, &verdict, report);
                report.outcome = Some(OutcomeKind::Ok);
                report.intent_label = Some(verdict.intent_label);
                report.verdict = Some(verdict);
            }
            other => {
                report.mode = Some(JudgeMode::Score);
                report.prompt_id = prompt::score_prompt_id(self.opts.score.prompt).into();
                report.prompt_hash = prompt::score_prompt_hash(self.opts.score.prompt).into();
                let (outcome, detail) =
                    self.settle(other, timeout_ms, c.segs, c.redact, None, report);
                report.outcome = Some(outcome);
                report.outcome_detail = detail;
            }
        }
        ScoreRun::Done
    }

    /// Score mode's explanation: the structured question asked after the score; its
    /// explanation and evidence join the score's verdict, whose label stays. A failed call
    /// leaves the verdict as the score gave it (`explain_outcome` says how it ended).
    fn explain(&self, c: &ScoreContext<'_>, verdict: &mut JudgeVerdict, report: &mut JudgeReport) {
        let (req, _) = self.chat_request(c.nonce, c.signals, c.shown, c.history, c.deadline);
        let done = self.client.complete(&req);
        accumulate_usage(report, &done);
        let kind = merge_explanation(
            self.opts.explanations,
            done.outcome,
            verdict,
            c.segs,
            c.redact,
        );
        report.explain_outcome = Some(kind.into());
    }

    /// Deferred explanations: the question is parked (the request's own deadline does not
    /// bound it: the client's timeout does), and the report says `deferred` with its ticket,
    /// or `dropped` when the parking is full.
    fn defer(
        &self,
        c: &ScoreContext<'_>,
        verdict: &JudgeVerdict,
        report: &mut JudgeReport,
        deferred: &DeferredExplanations,
    ) {
        let (request, timeout_ms) = self.chat_request(c.nonce, c.signals, c.shown, c.history, None);
        let job = ExplanationJob {
            layer: self.name.clone(),
            client: self.client.clone(),
            cache: self.cache.as_ref().map(|c| Arc::clone(c.cache())),
            key: c.key.map(str::to_string),
            explanations: self.opts.explanations,
            request,
            timeout_ms,
            segs: c.segs.iter().map(|&(i, r, t, _)| (i, r, t)).collect(),
            texts: c.segs.iter().map(|s| s.3.to_string()).collect(),
            earlier: c
                .history
                .messages
                .iter()
                .map(|m| (m.label, m.text.to_string()))
                .collect(),
            verdict: verdict.clone(),
            score_usage: (report.input_tokens, report.output_tokens, report.cost_usd),
            score: (report.score, report.score_logit),
        };
        match deferred.park(job) {
            Some(ticket) => {
                report.explain_outcome = Some(ExplainOutcome::Deferred);
                report.explain_ticket = Some(ticket);
            }
            None => report.explain_outcome = Some(ExplainOutcome::Dropped),
        }
    }

    /// The client's timeout, or less when the layer's `deadline` comes first.
    fn timeout_ms(&self, deadline: Option<Instant>) -> u64 {
        let cfg_timeout = self.client.config().timeout_ms;
        deadline.map_or(cfg_timeout, |d| {
            let left = d.saturating_duration_since(Instant::now() + DEADLINE_MARGIN);
            cfg_timeout.min(millis(left).max(1))
        })
    }

    /// Looks the question up in the cache, if there is one: a hit (or a miss in replay-only
    /// mode) completes `report`; otherwise the model is asked, with the key to store its
    /// verdict under.
    fn look_up(
        &self,
        report: &mut JudgeReport,
        shown: &[PromptSegment<'_>],
        history: &ShownHistory<'_>,
        signals: &str,
        texts: &[&str],
    ) -> Cached {
        let Some(slot) = &self.cache else {
            return Cached::Ask(None);
        };
        let mode = &slot.mode;
        let t = Instant::now();
        let k = self.cache_key(slot, shown, history, signals);
        match slot.cache().get(&k) {
            Ok(Some(entry)) => {
                let mut verdict = entry.verdict;
                keep_valid_spans(&mut verdict, texts);
                report.cache = CacheStatus::Hit;
                report.mode = Some(self.opts.mode);
                report.outcome = Some(OutcomeKind::Ok);
                report.intent_label = Some(verdict.intent_label);
                report.verdict = Some(verdict);
                // Score mode's probability comes back too: the layer's score on a hit is
                // the one the call gave.
                report.score = entry.score;
                report.score_logit = entry.score_logit;
                report.latency_ms = millis(t.elapsed());
                Cached::Answered
            }
            Ok(None) if *mode == CacheMode::Replay => {
                report.cache = CacheStatus::ReplayMiss;
                report.outcome_detail = Some("replay-only: not in cache".into());
                report.latency_ms = millis(t.elapsed());
                Cached::Answered
            }
            Err(e) if *mode == CacheMode::Replay => {
                report.cache = CacheStatus::ReplayMiss;
                report.outcome_detail = Some(format!("replay-only: {e}"));
                Cached::Answered
            }
            // A cache that cannot be read is a miss: the model still answers.
            Ok(None) | Err(_) => Cached::Ask(Some(k)),
        }
    }

    /// The chat request asking the question, and its timeout in milliseconds (the client's,
    /// or less when the layer's `deadline` comes first).
    fn chat_request(
        &self,
        nonce: &str,
        signals: &str,
        shown: &[PromptSegment<'_>],
        history: &ShownHistory<'_>,
        deadline: Option<Instant>,
    ) -> (ChatRequest, u64) {
        let (system, messages) = prompt::build(nonce, signals, shown, history);
        let timeout_ms = self.timeout_ms(deadline);
        let req = ChatRequest {
            system,
            messages: to_messages(messages),
            schema: Some(prompt::schema()),
            max_tokens: None,
            timeout_ms: Some(timeout_ms),
            top_logprobs: None,
        };
        (req, timeout_ms)
    }

    /// The judge's outcome of the call and its detail: an answer is checked into the verdict
    /// (put on `report` and stored in the cache under `key`), anything else is a failure.
    fn settle(
        &self,
        outcome: Outcome,
        timeout_ms: u64,
        segs: &[(usize, Role, Trust, &str)],
        redact: &dyn Fn(&str) -> String,
        key: Option<&str>,
        report: &mut JudgeReport,
    ) -> (OutcomeKind, Option<String>) {
        match outcome {
            Outcome::Ok { value, .. } => match prompt::parse_answer(&value) {
                Ok(answer) => {
                    let verdict = self.verdict(answer, segs, redact);
                    self.store(key, &verdict, report);
                    report.intent_label = Some(verdict.intent_label);
                    report.verdict = Some(verdict);
                    (OutcomeKind::Ok, None)
                }
                Err(why) => (OutcomeKind::Unparseable, Some(why.to_string())),
            },
            Outcome::Refused { reason } => (OutcomeKind::Refused, Some(reason)),
            Outcome::Unparseable { detail } => (OutcomeKind::Unparseable, Some(detail)),
            Outcome::Empty => (OutcomeKind::Empty, None),
            Outcome::Truncated => (OutcomeKind::Truncated, None),
            Outcome::Timeout => (
                OutcomeKind::Timeout,
                Some(format!("no answer within {timeout_ms} ms")),
            ),
            Outcome::HttpError { status, detail } => (
                OutcomeKind::HttpError,
                Some(match status {
                    Some(s) => format!("HTTP {s}: {detail}"),
                    None => detail,
                }),
            ),
            Outcome::BudgetExhausted {
                window,
                resource,
                limit,
                used,
            } => {
                let (window, resource) = (window.name(), resource.name());
                (
                    OutcomeKind::BudgetExhausted,
                    Some(format!(
                        "{window} {resource} budget spent ({used} of {limit}); no call made"
                    )),
                )
            }
        }
    }

    /// Stores a fresh verdict in the cache under `key` (none: no cache, or not to be
    /// stored), with the call's usage from `report`.
    fn store(&self, key: Option<&str>, verdict: &JudgeVerdict, report: &JudgeReport) {
        if let (Some(slot), Some(k)) = (&self.cache, key) {
            store_entry(
                slot.cache().as_ref(),
                k,
                verdict,
                (report.input_tokens, report.output_tokens, report.cost_usd),
                (report.score, report.score_logit),
            );
        }
    }

    /// The verdict of a checked answer: explanation and signals redacted, quotes located in
    /// the input (exactly, else ignoring case) and replaced by spans.
    fn verdict(
        &self,
        a: prompt::Answer,
        segs: &[(usize, Role, Trust, &str)],
        redact: &dyn Fn(&str) -> String,
    ) -> JudgeVerdict {
        checked_verdict(self.opts.explanations, a, segs, redact)
    }

    /// Findings for a suspicious or malicious verdict: one per located evidence span, else
    /// one per segment the triggers point at (else per untrusted segment).
    fn findings(
        &self,
        report: &JudgeReport,
        pointed: &BTreeSet<usize>,
        input: &ScanInput<'_>,
    ) -> Vec<Finding> {
        let Some(v) = &report.verdict else {
            return Vec::new();
        };
        let (id, strength, severity) = match v.intent_label {
            IntentLabel::Benign => return Vec::new(),
            IntentLabel::Suspicious => (SUSPICIOUS_ID, Strength::Strong, RiskClass::MediumRisk),
            IntentLabel::Malicious => (MALICIOUS_ID, Strength::Strong, RiskClass::HighRisk),
        };
        let mut places: Vec<(usize, Span)> = v
            .evidence
            .iter()
            .filter_map(|e| Some((e.segment?, e.span?)))
            .filter(|(s, _)| input.segments.get(*s).is_some())
            .collect();
        if places.is_empty() {
            let untrusted = |s: &usize| {
                input
                    .segments
                    .get(*s)
                    .is_some_and(|x| x.trust == Trust::Untrusted)
            };
            let mut segs: Vec<usize> = pointed.iter().copied().filter(untrusted).collect();
            if segs.is_empty() {
                segs = (0..input.segments.len()).filter(untrusted).collect();
            }
            places = segs
                .into_iter()
                .filter_map(|s| {
                    let len = input.segments.get(s)?.text.len();
                    Some((s, Span { start: 0, end: len }))
                })
                .collect();
        }
        places.sort();
        places.dedup();
        places
            .into_iter()
            .filter_map(|(s, span)| {
                let seg = input.segments.get(s)?;
                Some(Finding {
                    layer: self.name.clone(),
                    rule_id: id.into(),
                    category: Category::Other,
                    strength,
                    points: scoring::points(strength, severity),
                    severity,
                    segment: s,
                    role: seg.role,
                    counted: seg.trust == Trust::Untrusted,
                    span,
                    view: ViewKind::Raw,
                    via: Vec::new(),
                    rationale: format!("the intent judge read this as {}", v.intent_label),
                })
            })
            .collect()
    }
}

/// The verdict of a checked answer: explanation and signals redacted (or from the
/// vocabulary), quotes located in the input (exactly, else ignoring case) and replaced by
/// spans.
pub(crate) fn checked_verdict(
    explanations: ExplanationMode,
    a: prompt::Answer,
    segs: &[(usize, Role, Trust, &str)],
    redact: &dyn Fn(&str) -> String,
) -> JudgeVerdict {
    // Untrusted segments first: a phrase the system prompt shares with the user's text
    // points at the user's.
    let mut order: Vec<&(usize, Role, Trust, &str)> = segs.iter().collect();
    order.sort_by_key(|s| s.2 == Trust::Trusted);
    let evidence = a
        .evidence
        .into_iter()
        .map(|(signal, quote)| {
            let found = order
                .iter()
                .find_map(|&&(i, _, _, t)| prompt::locate(t, &quote).map(|(s, e)| (i, s, e)));
            let signal = match explanations {
                ExplanationMode::FreeText => redact(&signal),
                ExplanationMode::Vocabulary => crate::vocabulary::signal(&signal).into(),
            };
            JudgeEvidence {
                signal,
                segment: found.map(|f| f.0),
                span: found.map(|(_, s, e)| Span { start: s, end: e }),
            }
        })
        .collect::<Vec<_>>();
    let explanation = match explanations {
        ExplanationMode::FreeText => redact(&a.explanation),
        ExplanationMode::Vocabulary => {
            crate::vocabulary::explanation(a.label, a.confidence, &evidence)
        }
    };
    JudgeVerdict {
        intent_label: a.label,
        confidence: a.confidence,
        explanation,
        evidence,
    }
}

/// Score mode's explanation call's answer joined to the score's `verdict`: the words and
/// evidence are the model's, the label and its confidence stay the score's (a vocabulary
/// explanation names them). How the call ended (`unparseable` for an answer that is not a
/// verdict); a failed call leaves the verdict as it was.
pub(crate) fn merge_explanation(
    explanations: ExplanationMode,
    outcome: Outcome,
    verdict: &mut JudgeVerdict,
    segs: &[(usize, Role, Trust, &str)],
    redact: &dyn Fn(&str) -> String,
) -> OutcomeKind {
    let kind = outcome.kind();
    if let Outcome::Ok { value, .. } = outcome {
        let Ok(mut answer) = prompt::parse_answer(&value) else {
            return OutcomeKind::Unparseable;
        };
        answer.label = verdict.intent_label;
        answer.confidence = verdict.confidence;
        let explained = checked_verdict(explanations, answer, segs, redact);
        verdict.explanation = format!("{} ({})", explained.explanation, verdict.explanation);
        verdict.evidence = explained.evidence;
    }
    kind
}

/// Stores an ok verdict under `key` with its calls' `(input tokens, output tokens, cost)`
/// and score mode's `(probability, logit)`. A verdict that cannot be stored is still the
/// request's verdict: errors are ignored.
pub(crate) fn store_entry(
    cache: &dyn VerdictCache,
    key: &str,
    verdict: &JudgeVerdict,
    (input_tokens, output_tokens, cost_usd): (u64, u64, Option<f64>),
    (score, score_logit): (Option<f32>, Option<f32>),
) {
    let entry = Entry {
        verdict: verdict.clone(),
        created_at: Cache::now(),
        input_tokens,
        output_tokens,
        cost_usd,
        score,
        score_logit,
    };
    let _ = cache.put(key, &entry);
}

/// What the cache said about a question.
enum Cached {
    /// The report is complete: a hit, or a miss in replay-only mode.
    Answered,
    /// The model is asked; its verdict is stored under this key (none: no cache).
    Ask(Option<String>),
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Drops evidence spans that do not fit the current segments (a cached verdict made for a
/// canonically equivalent text with other bytes); their signals stay.
fn keep_valid_spans(v: &mut JudgeVerdict, texts: &[&str]) {
    for e in &mut v.evidence {
        let fits = match (e.segment, e.span) {
            (Some(s), Some(sp)) => texts.get(s).is_some_and(|t| {
                sp.start < sp.end
                    && t.is_char_boundary(sp.start)
                    && t.is_char_boundary(sp.end)
                    && sp.end <= t.len()
            }),
            _ => false,
        };
        if !fits {
            e.segment = None;
            e.span = None;
        }
    }
}

/// What the judge is told about why it is asked: the triggers, and the earlier layers'
/// scores and counted rule IDs. Scores are rounded to two decimals so that the prompt (and
/// the cache key) does not change with noise below that.
fn signals(triggers: &[JudgeTrigger], earlier: &Earlier<'_>) -> String {
    let mut parts: Vec<String> = triggers
        .iter()
        .map(|t| match t {
            JudgeTrigger::AmbiguousScore { layer, score, band } => format!(
                "{layer} score {score:.2} in the ambiguous band [{}, {}]",
                band[0], band[1]
            ),
            JudgeTrigger::Deferred { layer, score } => {
                format!("{layer} deferred its band (score {score:.2})")
            }
            JudgeTrigger::LayerConflict {
                rules,
                rules_flagged,
                classifier,
                score,
            } => {
                let found = if *rules_flagged { "risk" } else { "nothing" };
                format!("{rules} found {found}, {classifier} {score:.2}: layers disagree")
            }
            JudgeTrigger::NeedsJudgement { rule_id } => format!("rule {rule_id} needs judgement"),
            JudgeTrigger::Conversation { reason } => format!("conversation: {reason}"),
            JudgeTrigger::Direct => "asked directly".into(),
        })
        .collect();
    let scores: Vec<String> = earlier
        .layers
        .iter()
        .filter_map(|l| Some(format!("{} {:.2}", l.layer, l.score?)))
        .collect();
    if !scores.is_empty() {
        parts.push(format!("scores: {}", scores.join(", ")));
    }
    let mut ids: Vec<&str> = earlier
        .findings
        .iter()
        .filter(|f| f.points > 0)
        .map(|f| f.rule_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.truncate(12);
    if !ids.is_empty() {
        parts.push(format!("rules fired: {}", ids.join(", ")));
    }
    parts.join("; ")
}

/// What score mode's call needs of the question.
struct ScoreContext<'a> {
    nonce: &'a str,
    signals: &'a str,
    shown: &'a [PromptSegment<'a>],
    history: &'a ShownHistory<'a>,
    deadline: Option<Instant>,
    segs: &'a [(usize, Role, Trust, &'a str)],
    redact: &'a dyn Fn(&str) -> String,
    key: Option<&'a str>,
}

/// How score mode ended.
enum ScoreRun {
    /// The report is complete (a verdict, or a failed outcome).
    Done,
    /// Ask in structured mode instead, for this reason.
    Fallback(String),
}

/// Chat messages from (is the user's, text) pairs.
fn to_messages(messages: Vec<(bool, String)>) -> Vec<Message> {
    messages
        .into_iter()
        .map(|(user, m)| {
            if user {
                Message::user(m)
            } else {
                Message::assistant(m)
            }
        })
        .collect()
}

/// Adds a second call's latency, attempts, tokens and cost to the report's.
fn accumulate_usage(report: &mut JudgeReport, done: &rampart_llm::Completion) {
    report.latency_ms += done.latency_ms;
    report.attempts += done.attempts;
    if let Some(u) = done.usage {
        report.input_tokens += u.input_tokens;
        report.output_tokens += u.output_tokens;
    }
    report.cost_usd = match (report.cost_usd, done.cost_usd) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
}

/// Puts a call's latency, attempts, tokens and cost on the report.
fn add_usage(report: &mut JudgeReport, done: &rampart_llm::Completion) {
    report.latency_ms = done.latency_ms;
    report.attempts = done.attempts;
    if let Some(u) = done.usage {
        report.input_tokens = u.input_tokens;
        report.output_tokens = u.output_tokens;
    }
    report.cost_usd = done.cost_usd;
}

impl Detector for JudgeLayer {
    fn name(&self) -> &str {
        &self.name
    }

    fn detect(&self, input: &ScanInput<'_>) -> Result<Detection, DetectorError> {
        let none = BTreeSet::new();
        let earlier = Earlier {
            layers: &[],
            findings: &[],
            spans: &[],
            needs_judgement: &none,
        };
        self.detect_after(input, &earlier)
    }

    fn detect_after(
        &self,
        input: &ScanInput<'_>,
        earlier: &Earlier<'_>,
    ) -> Result<Detection, DetectorError> {
        let contract = trigger::evaluate(
            &self.opts.triggers,
            self.opts.skip_when_blocked,
            self.conversation.as_deref(),
            input,
            earlier,
        );
        let (triggers, pointed) = match contract {
            Contract::Skip(why) => {
                let mut r = JudgeReport::not_called(&self.name, why);
                // The prompt's version is in every decision, asked or not.
                r.model = self.model().to_string();
                r.prompt_id = prompt::PROMPT_ID.into();
                r.prompt_hash = prompt::prompt_hash().into();
                return Ok(r.into_detection(Vec::new()));
            }
            Contract::Ask { triggers, segments } => (triggers, segments),
        };
        let signals = signals(&triggers, earlier);
        let segs: Vec<(usize, Role, Trust, &str)> = input
            .segments
            .iter()
            .map(|s| (s.index, s.role, s.trust, s.text))
            .collect();
        let conversation_fired = triggers
            .iter()
            .any(|t| matches!(t, JudgeTrigger::Conversation { .. }));
        let history = match (self.opts.history, input.conversation) {
            (HistoryMode::Always, Some(c)) => c.history.as_slice(),
            (HistoryMode::OnTrigger, Some(c)) if conversation_fired => c.history.as_slice(),
            _ => &[],
        };
        let report = self.ask(&segs, history, triggers, &signals, Some(input.deadline));
        let findings = self.findings(&report, &pointed, input);
        Ok(report.into_detection(findings))
    }

    fn reads_layers(&self) -> Vec<String> {
        let t = &self.opts.triggers;
        let mut names: Vec<String> = t
            .ambiguous
            .iter()
            .map(|a| a.layer.clone())
            .chain(
                t.conflict
                    .iter()
                    .flat_map(|c| [c.rules.clone(), c.classifier.clone()]),
            )
            .collect();
        names.sort();
        names.dedup();
        names
    }

    fn resolves_deferred(&self) -> bool {
        true
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// The `judge` layer factory, for a [`rampart_core::Registry`].
#[derive(Debug, Default, Clone)]
pub struct JudgeFactory {
    conversation: Option<Arc<dyn ConversationTrigger>>,
}

impl JudgeFactory {
    /// A factory whose layers get `hook` as their conversation trigger.
    pub fn with_conversation_trigger(hook: Arc<dyn ConversationTrigger>) -> Self {
        JudgeFactory {
            conversation: Some(hook),
        }
    }
}

impl DetectorFactory for JudgeFactory {
    fn kind(&self) -> &str {
        JUDGE_KIND
    }

    /// Decides the intent of what the other layers leave open: prompt injection and jailbreaks.
    fn owasp(&self) -> &'static [rampart_core::Owasp] {
        &[rampart_core::Owasp::Llm01]
    }

    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        let opts: JudgeOptions = layer_options(JUDGE_KIND, options)?;
        let mut layer = JudgeLayer::new(opts).map_err(|e| match e {
            JudgeError::Options(_) | JudgeError::Llm(_) | JudgeError::ConversationTrigger(_) => {
                BuildError::Options {
                    kind: JUDGE_KIND.into(),
                    message: e.to_string(),
                }
            }
            JudgeError::Cache(_) => BuildError::Layer {
                kind: JUDGE_KIND.into(),
                message: e.to_string(),
            },
        })?;
        if let Some(h) = &self.conversation {
            layer = layer.with_conversation_trigger(h.clone());
        }
        Ok(Arc::new(layer))
    }
}
