//! Deferred explanations (score mode, opt-in: [`JudgeLayer::defer_explanations`]).
//!
//! When `explain` wants an explanation (`on_block` with a non-benign score, or `always`) and
//! the layer defers, the structured question is not asked before the decision returns: it is
//! parked here as an [`ExplanationJob`], the decision says `explain_outcome = "deferred"`
//! with an `explain_ticket`, and the owner of the parking (the service) takes the job by its
//! ticket ([`DeferredExplanations::take`]) and runs it off the request path
//! ([`ExplanationJob::run`]), where the judge's client applies its own timeout, retries,
//! concurrency limit and budgets. The [`Explanation`] it gives is what an inline call would
//! have added to the report (the explanation redacted, or from the vocabulary, as
//! `explanations` says), and it replaces the verdict in the judge cache when the call
//! answered.
//!
//! The parking is bounded: when it holds `capacity` jobs a new one is dropped (the decision
//! says `dropped`), and a job nobody took within [`PARKED_MAX_AGE`] is dropped when the next
//! one is parked. A parked job holds the input's text (to locate quotes and redact the
//! answer) in memory only, never on disk.
//!
//! [`JudgeLayer::defer_explanations`]: crate::JudgeLayer::defer_explanations

use crate::cache::VerdictCache;
use crate::layer::{merge_explanation, store_entry};
use crate::options::ExplanationMode;
use crate::report::{ExplainOutcome, JudgeReport, JudgeVerdict};
use rampart_core::{Role, Trust};
use rampart_llm::{ChatRequest, LlmClient, Outcome, redact_with_history};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a parked job waits to be taken before the next park drops it.
pub const PARKED_MAX_AGE: Duration = Duration::from_secs(120);

/// A bounded parking of explanation calls, shared by the judge layers that defer and the
/// owner that runs them. Cheap to clone (the clones share the parking).
#[derive(Clone)]
pub struct DeferredExplanations {
    inner: Arc<Inner>,
}

struct Inner {
    capacity: usize,
    next: AtomicU64,
    dropped: AtomicU64,
    jobs: Mutex<BTreeMap<u64, (Instant, ExplanationJob)>>,
}

impl std::fmt::Debug for DeferredExplanations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredExplanations")
            .field("capacity", &self.inner.capacity)
            .field("parked", &self.parked())
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl DeferredExplanations {
    /// A parking for at most `capacity` jobs (at least 1).
    pub fn new(capacity: usize) -> Self {
        DeferredExplanations {
            inner: Arc::new(Inner {
                capacity: capacity.max(1),
                next: AtomicU64::new(1),
                dropped: AtomicU64::new(0),
                jobs: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, (Instant, ExplanationJob)>> {
        self.inner
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Parks `job`; its ticket, or `None` (counted as dropped) when the parking is full.
    pub(crate) fn park(&self, job: ExplanationJob) -> Option<u64> {
        let now = Instant::now();
        let mut jobs = self.jobs();
        let before = jobs.len();
        jobs.retain(|_, (at, _)| now.duration_since(*at) < PARKED_MAX_AGE);
        let expired = (before - jobs.len()) as u64;
        if expired > 0 {
            self.inner.dropped.fetch_add(expired, Ordering::Relaxed);
        }
        if jobs.len() >= self.inner.capacity {
            self.inner.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let ticket = self.inner.next.fetch_add(1, Ordering::Relaxed);
        jobs.insert(ticket, (now, job));
        Some(ticket)
    }

    /// Takes the job parked under `ticket` (a decision's `explain_ticket`), if it is still
    /// there.
    pub fn take(&self, ticket: u64) -> Option<ExplanationJob> {
        self.jobs().remove(&ticket).map(|(_, job)| job)
    }

    /// Jobs parked now.
    pub fn parked(&self) -> usize {
        self.jobs().len()
    }

    /// Jobs dropped so far: the parking was full, or nobody took them in time.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }
}

/// One deferred explanation call: the structured question about a score-mode verdict, with
/// what it takes to check and redact the answer.
pub struct ExplanationJob {
    pub(crate) layer: String,
    pub(crate) client: LlmClient,
    pub(crate) cache: Option<Arc<dyn VerdictCache>>,
    pub(crate) key: Option<String>,
    pub(crate) explanations: ExplanationMode,
    pub(crate) request: ChatRequest,
    pub(crate) timeout_ms: u64,
    pub(crate) segs: Vec<(usize, Role, Trust)>,
    pub(crate) texts: Vec<String>,
    pub(crate) earlier: Vec<(usize, String)>,
    pub(crate) verdict: JudgeVerdict,
    /// The score call's (input tokens, output tokens, cost), for the cache entry.
    pub(crate) score_usage: (u64, u64, Option<f64>),
    /// The score call's (probability, logit), for the cache entry.
    pub(crate) score: (Option<f32>, Option<f32>),
}

impl std::fmt::Debug for ExplanationJob {
    // Never the input's text.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExplanationJob")
            .field("layer", &self.layer)
            .field("label", &self.verdict.intent_label)
            .field("timeout_ms", &self.timeout_ms)
            .finish_non_exhaustive()
    }
}

impl ExplanationJob {
    /// The judge layer's name.
    pub fn layer(&self) -> &str {
        &self.layer
    }

    /// Asks the question (blocking: run it on a thread that may wait, up to the client's
    /// timeout and retries). When the answer is a verdict, its words and evidence join the
    /// score's verdict (label and confidence stay the score's) and the explained verdict
    /// replaces the unexplained one in the judge cache.
    pub fn run(self) -> Explanation {
        let done = self.client.complete(&self.request);
        let texts: Vec<&str> = self.texts.iter().map(String::as_str).collect();
        let earlier: Vec<(usize, &str)> =
            self.earlier.iter().map(|(l, t)| (*l, t.as_str())).collect();
        let redact = |t: &str| redact_with_history(t, &texts, &earlier);
        let segs: Vec<(usize, Role, Trust, &str)> = self
            .segs
            .iter()
            .zip(&texts)
            .map(|(&(i, r, t), text)| (i, r, t, *text))
            .collect();
        let detail = match &done.outcome {
            Outcome::Timeout => Some(format!("no answer within {} ms", self.timeout_ms)),
            Outcome::HttpError { status, detail } => Some(match status {
                Some(s) => format!("HTTP {s}: {}", redact(detail)),
                None => redact(detail),
            }),
            Outcome::Refused { reason } => Some(redact(reason)),
            Outcome::Unparseable { detail } => Some(redact(detail)),
            Outcome::BudgetExhausted { .. } => Some("budget spent; no call made".into()),
            _ => None,
        };
        let (input_tokens, output_tokens) = done
            .usage
            .map_or((0, 0), |u| (u.input_tokens, u.output_tokens));
        let mut verdict = self.verdict;
        let kind = merge_explanation(
            self.explanations,
            done.outcome,
            &mut verdict,
            &segs,
            &redact,
        );
        let outcome = ExplainOutcome::from(kind);
        let ok = outcome == ExplainOutcome::Ok;
        if ok && let (Some(cache), Some(key)) = (&self.cache, &self.key) {
            let (i, o, c) = self.score_usage;
            let cost = match (c, done.cost_usd) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
            store_entry(
                cache.as_ref(),
                key,
                &verdict,
                (i + input_tokens, o + output_tokens, cost),
                self.score,
            );
        }
        Explanation {
            layer: self.layer,
            outcome,
            verdict: ok.then_some(verdict),
            detail: if ok { None } else { detail },
            input_tokens,
            output_tokens,
            cost_usd: done.cost_usd,
            latency_ms: done.latency_ms,
            attempts: done.attempts,
        }
    }
}

/// What a deferred explanation call gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The judge layer's name.
    pub layer: String,
    /// How the call ended (`dropped` when it was never made).
    pub outcome: ExplainOutcome,
    /// The explained verdict (the score's label and confidence, the model's words, redacted
    /// or from the vocabulary, and evidence spans), when the outcome is ok.
    pub verdict: Option<JudgeVerdict>,
    /// Why it failed (never input text: redacted).
    pub detail: Option<String>,
    /// The call's input tokens.
    pub input_tokens: u64,
    /// The call's output tokens.
    pub output_tokens: u64,
    /// The call's cost, when the model is priced.
    pub cost_usd: Option<f64>,
    /// The call's latency, milliseconds.
    pub latency_ms: u64,
    /// HTTP attempts made.
    pub attempts: u32,
}

impl Explanation {
    /// An explanation that was never asked for (the queue was full, the service stopped).
    pub fn dropped(layer: &str, why: impl Into<String>) -> Explanation {
        Explanation {
            layer: layer.to_string(),
            outcome: ExplainOutcome::Dropped,
            verdict: None,
            detail: Some(why.into()),
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: None,
            latency_ms: 0,
            attempts: 0,
        }
    }

    /// Applies it to the decision's judge report, as an inline call would have: the
    /// outcome, the explained verdict, and the call's tokens, cost, latency and attempts
    /// added to the report's. The ticket is cleared.
    pub fn apply(&self, report: &mut JudgeReport) {
        report.explain_outcome = Some(self.outcome);
        report.explain_ticket = None;
        if let Some(v) = &self.verdict {
            report.intent_label = Some(v.intent_label);
            report.verdict = Some(v.clone());
        }
        report.input_tokens += self.input_tokens;
        report.output_tokens += self.output_tokens;
        report.latency_ms += self.latency_ms;
        report.attempts += self.attempts;
        report.cost_usd = match (report.cost_usd, self.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}
