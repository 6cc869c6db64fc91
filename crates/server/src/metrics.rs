//! Prometheus metrics (text format at `/metrics`). Labels carry endpoint names, statuses,
//! actions, layer names and finding categories: never keys, prompt text or rule patterns.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use rampart_core::{Decision, Pipeline};
use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::AtomicU64;

/// A label value: borrowed for the fixed names (endpoints, actions, categories, results), so
/// that counting a request allocates nothing once its series exists.
type Label = Cow<'static, str>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: Label,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    endpoint: Label,
    action: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LayerLabels {
    layer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CategoryLabels {
    category: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JudgeCallLabels {
    outcome: Label,
    cache: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JudgeLabelLabels {
    label: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    direction: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: Label,
}

fn latency_histogram() -> Histogram {
    // 10 µs … ~20 s.
    Histogram::new(exponential_buckets(0.000_01, 4.0, 12))
}

/// `rampart_judge_explanations_total`, shared with the tasks that run deferred explanations.
#[derive(Clone, Debug)]
pub(crate) struct ExplanationCounter(Family<ResultLabels, Counter>);

impl ExplanationCounter {
    /// One deferred explanation, by result.
    pub(crate) fn inc(&self, result: &'static str) {
        self.0
            .get_or_create(&ResultLabels {
                result: Cow::Borrowed(result),
            })
            .inc();
    }
}

/// The service's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    decisions: Family<ActionLabels, Counter>,
    degraded: Counter,
    layer_seconds: Family<LayerLabels, Histogram, fn() -> Histogram>,
    findings: Family<CategoryLabels, Counter>,
    audit_appends: Family<ResultLabels, Counter>,
    reloads: Family<ResultLabels, Counter>,
    pipeline_failures: Counter,
    pipeline_layers: Gauge,
    rate_limited: Counter,
    auth_failures_limited: Counter,
    connections_refused: Counter,
    connections_timed_out: Family<ReasonLabels, Counter>,
    audit_writer: Family<StatLabels, Gauge>,
    conversation_state: Family<StatLabels, Gauge>,
    judge_calls: Family<JudgeCallLabels, Counter>,
    judge_not_called: Counter,
    judge_labels: Family<JudgeLabelLabels, Counter>,
    judge_tokens: Family<DirectionLabels, Counter>,
    judge_cost: Counter<f64, AtomicU64>,
    judge_seconds: Histogram,
    judge_explanations: Family<ResultLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatLabels {
    stat: String,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("rampart");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by endpoint and status",
            requests.clone(),
        );
        let request_seconds: Family<EndpointLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency by endpoint",
            request_seconds.clone(),
        );
        let decisions = Family::<ActionLabels, Counter>::default();
        registry.register(
            "decisions",
            "Decisions by endpoint and action",
            decisions.clone(),
        );
        let degraded = Counter::default();
        registry.register(
            "decisions_degraded",
            "Decisions where a layer or the request deadline failed and the fail mode decided",
            degraded.clone(),
        );
        let layer_seconds: Family<LayerLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "layer_duration_seconds",
            "Pipeline layer latency by layer",
            layer_seconds.clone(),
        );
        let findings = Family::<CategoryLabels, Counter>::default();
        registry.register("findings", "Findings by category", findings.clone());
        let audit_appends = Family::<ResultLabels, Counter>::default();
        registry.register(
            "audit_appends",
            "Audit log appends by result (ok, full, closed, error)",
            audit_appends.clone(),
        );
        let reloads = Family::<ResultLabels, Counter>::default();
        registry.register("reloads", "Pipeline reloads by result", reloads.clone());
        let pipeline_failures = Counter::default();
        registry.register(
            "pipeline_failures",
            "Pipeline runs past the request deadline or panicked",
            pipeline_failures.clone(),
        );
        let pipeline_layers = Gauge::default();
        registry.register(
            "pipeline_layers",
            "Layers in the pipeline in force (normalize included)",
            pipeline_layers.clone(),
        );
        let conversation_state = Family::<StatLabels, Gauge>::default();
        registry.register(
            "conversation_state",
            "Conversation state held (`[conversation]`): nodes (known message prefixes), \
             ledger_entries (answers recorded)",
            conversation_state.clone(),
        );
        let rate_limited = Counter::default();
        registry.register(
            "rate_limited",
            "Requests refused by a per-key rate limit",
            rate_limited.clone(),
        );
        let auth_failures_limited = Counter::default();
        registry.register(
            "auth_failures_limited",
            "Requests refused because their client address failed authentication too often",
            auth_failures_limited.clone(),
        );
        let connections_refused = Counter::default();
        registry.register(
            "connections_refused",
            "Connections closed at once because server.max_connections were open",
            connections_refused.clone(),
        );
        let connections_timed_out = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "connections_timed_out",
            "Connections closed or requests answered 408 by a deadline (header, idle, body, tls)",
            connections_timed_out.clone(),
        );
        let audit_writer = Family::<StatLabels, Gauge>::default();
        registry.register(
            "audit_writer",
            "Audit writer counters (queued, writing, committed, refused, failed, batches, pruned)",
            audit_writer.clone(),
        );
        let judge_calls = Family::<JudgeCallLabels, Counter>::default();
        registry.register(
            "judge_calls",
            "Judge (intent layer) calls by outcome (ok, timeout, …; none for a replay miss) and \
             cache status (hit, miss, off, replay_miss)",
            judge_calls.clone(),
        );
        let judge_not_called = Counter::default();
        registry.register(
            "judge_not_called",
            "Decisions of a pipeline with a judge layer where no trigger fired or an earlier \
             layer had already decided BLOCK",
            judge_not_called.clone(),
        );
        let judge_labels = Family::<JudgeLabelLabels, Counter>::default();
        registry.register(
            "judge_verdicts",
            "Judge verdicts by intent label",
            judge_labels.clone(),
        );
        let judge_tokens = Family::<DirectionLabels, Counter>::default();
        registry.register(
            "judge_tokens",
            "Tokens of judge calls that went to the model (input, output)",
            judge_tokens.clone(),
        );
        let judge_cost = Counter::<f64, AtomicU64>::default();
        registry.register(
            "judge_cost_usd",
            "Cost of judge calls in USD (priced models only)",
            judge_cost.clone(),
        );
        let judge_seconds = latency_histogram();
        registry.register(
            "judge_call_duration_seconds",
            "Latency of judge calls that went to the model",
            judge_seconds.clone(),
        );
        let judge_explanations = Family::<ResultLabels, Counter>::default();
        registry.register(
            "judge_explanations",
            "Deferred judge explanations (score mode) by result: the call's outcome (ok, \
             timeout, …), dropped (the queue was full, or the decision was not written), \
             unrecorded (the audit log refused the update)",
            judge_explanations.clone(),
        );
        for r in ["ok", "failed"] {
            let _ = reloads.get_or_create(&ResultLabels {
                result: Cow::Borrowed(r),
            });
        }
        Metrics {
            registry,
            requests,
            request_seconds,
            decisions,
            degraded,
            layer_seconds,
            findings,
            audit_appends,
            reloads,
            pipeline_failures,
            pipeline_layers,
            rate_limited,
            auth_failures_limited,
            connections_refused,
            connections_timed_out,
            audit_writer,
            conversation_state,
            judge_calls,
            judge_not_called,
            judge_labels,
            judge_tokens,
            judge_cost,
            judge_seconds,
            judge_explanations,
        }
    }

    /// The counter of deferred judge explanations, for the tasks that run them.
    pub(crate) fn explanation_counter(&self) -> ExplanationCounter {
        ExplanationCounter(self.judge_explanations.clone())
    }

    /// One deferred judge explanation, by result (`ok`, `timeout`, `dropped`, …).
    pub(crate) fn judge_explanation(&self, result: &'static str) {
        self.judge_explanations
            .get_or_create(&ResultLabels {
                result: Cow::Borrowed(result),
            })
            .inc();
    }

    /// One finished HTTP request (`endpoint`: the matched route, or `unmatched`).
    pub fn observe_request(&self, endpoint: &'static str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                endpoint: Cow::Borrowed(endpoint),
                status,
            })
            .inc();
        self.request_seconds
            .get_or_create(&EndpointLabels {
                endpoint: Cow::Borrowed(endpoint),
            })
            .observe(seconds);
    }

    /// One decision: action, per-layer latency, findings per category.
    pub fn observe_decision(&self, endpoint: &'static str, d: &Decision) {
        self.decisions
            .get_or_create(&ActionLabels {
                endpoint: Cow::Borrowed(endpoint),
                action: Cow::Borrowed(d.action.name()),
            })
            .inc();
        if d.degraded {
            self.degraded.inc();
        }
        for l in &d.layers {
            self.layer_seconds
                .get_or_create(&LayerLabels {
                    layer: l.layer.clone(),
                })
                .observe(l.elapsed_us as f64 / 1e6);
        }
        for f in &d.findings {
            self.findings
                .get_or_create(&CategoryLabels {
                    category: Cow::Borrowed(f.category.name()),
                })
                .inc();
        }
        if let Some(j) = d.reports.find::<rampart_judge::JudgeReport>() {
            self.observe_judge(&j);
        }
    }

    /// The judge's part of a decision: calls by outcome and cache status (the cache's hit
    /// and miss counts), verdicts by label, and tokens, cost and latency of real calls.
    fn observe_judge(&self, j: &rampart_judge::JudgeReport) {
        if !j.called {
            self.judge_not_called.inc();
            return;
        }
        self.judge_calls
            .get_or_create(&JudgeCallLabels {
                outcome: Cow::Borrowed(j.outcome.map_or("none", |o| o.name())),
                cache: Cow::Borrowed(j.cache.name()),
            })
            .inc();
        if let Some(label) = j.intent_label {
            self.judge_labels
                .get_or_create(&JudgeLabelLabels {
                    label: Cow::Borrowed(label.name()),
                })
                .inc();
        }
        if matches!(
            j.cache,
            rampart_judge::CacheStatus::Hit | rampart_judge::CacheStatus::ReplayMiss
        ) {
            return;
        }
        for (direction, n) in [("input", j.input_tokens), ("output", j.output_tokens)] {
            self.judge_tokens
                .get_or_create(&DirectionLabels {
                    direction: Cow::Borrowed(direction),
                })
                .inc_by(n);
        }
        if let Some(c) = j.cost_usd {
            self.judge_cost.inc_by(c);
        }
        self.judge_seconds.observe(j.latency_ms as f64 / 1e3);
    }

    /// One tool-call decision (`ALLOW`, `CONFIRM`, `BLOCK`), counted with the decisions.
    pub(crate) fn observe_tool(&self, endpoint: &'static str, action: &'static str) {
        self.decisions
            .get_or_create(&ActionLabels {
                endpoint: Cow::Borrowed(endpoint),
                action: Cow::Borrowed(action),
            })
            .inc();
    }

    pub(crate) fn audit_ok(&self) {
        self.audit_appends
            .get_or_create(&ResultLabels {
                result: Cow::Borrowed("ok"),
            })
            .inc();
    }

    pub(crate) fn audit_failed(&self, kind: &'static str) {
        self.audit_appends
            .get_or_create(&ResultLabels {
                result: Cow::Borrowed(kind),
            })
            .inc();
    }

    pub(crate) fn reload(&self, ok: bool) {
        self.reloads
            .get_or_create(&ResultLabels {
                result: Cow::Borrowed(if ok { "ok" } else { "failed" }),
            })
            .inc();
    }

    pub(crate) fn pipeline_failure(&self) {
        self.pipeline_failures.inc();
    }

    pub(crate) fn rate_limited(&self) {
        self.rate_limited.inc();
    }

    pub(crate) fn auth_failures_limited(&self) {
        self.auth_failures_limited.inc();
    }

    pub(crate) fn connection_refused(&self) {
        self.connections_refused.inc();
    }

    /// A connection closed (or a request answered 408) by one of its deadlines: `header`,
    /// `idle`, `body` or `tls`.
    pub(crate) fn connection_timed_out(&self, reason: &'static str) {
        self.connections_timed_out
            .get_or_create(&ReasonLabels {
                reason: Cow::Borrowed(reason),
            })
            .inc();
    }

    pub(crate) fn set_audit_stats(&self, s: &rampart_audit::AuditStats) {
        for (k, v) in [
            ("queued", s.queued),
            ("writing", s.writing),
            ("committed", s.committed),
            ("refused", s.refused),
            ("failed", s.failed),
            ("batches", s.batches),
            ("pruned", s.pruned),
        ] {
            self.audit_writer
                .get_or_create(&StatLabels { stat: k.into() })
                .set(i64::try_from(v).unwrap_or(i64::MAX));
        }
    }

    /// The conversation state's size: nodes and ledger entries.
    pub(crate) fn set_conversation_state(&self, nodes: usize, ledger: usize) {
        for (k, v) in [("nodes", nodes), ("ledger_entries", ledger)] {
            self.conversation_state
                .get_or_create(&StatLabels { stat: k.into() })
                .set(i64::try_from(v).unwrap_or(i64::MAX));
        }
    }

    pub(crate) fn set_pipeline_info(&self, p: &Pipeline) {
        self.pipeline_layers.set(p.detectors().len() as i64 + 1);
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        if prometheus_client::encoding::text::encode(&mut s, &self.registry).is_err() {
            s.clear();
        }
        s
    }
}
