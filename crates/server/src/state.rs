//! Shared state: the hot-swappable pipeline and configuration, the audit writer, metrics,
//! the upstream client, the key table and rate limiters; and the service's error type.

use crate::audit::{AuditError, AuditRecord, AuditWriter};
use crate::config::{ServerConfig, ServerConfigError, parse_sha256_hex};
use crate::metrics::Metrics;
use crate::output::OutputScanners;
use arc_swap::ArcSwap;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rampart_conversation::{
    AssistantLedger, ConversationError, ConversationOptions, ConversationOutcome,
    ConversationScanner, ConversationStore, OptionsError, SharedConversations,
};
use rampart_core::conversation::ConversationRequest;
use rampart_core::{
    Action, Decision, FailMode, InputError, Pipeline, PipelineConfig, Registry, RiskClass,
    ScanOutcome, ScanRequest, Segment,
};
use rampart_judge::{DeferredExplanations, Explanation, ExplanationJob, JudgeReport};
use rampart_output::OutputScanner;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Who is calling: inserted as a request extension by the auth middleware on every `/v1/*`
/// and `/admin/*` route.
#[derive(Clone, Debug)]
pub struct Caller {
    /// From `X-Request-Id` (when printable and at most 128 bytes) or generated; echoed in the
    /// `X-Request-Id` response header.
    pub request_id: String,
    /// The API key's id; `None` when authentication is off.
    pub key_id: Option<String>,
}

/// An error answered to the client in the OpenAI error shape:
/// `{"error": {"message": …, "type": …, "code": …}}`. Messages never contain prompt text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// 400: malformed or invalid request.
    #[error("{0}")]
    BadRequest(String),
    /// 413: body or input over a limit.
    #[error("{0}")]
    TooLarge(String),
    /// 401: missing or unknown API key.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: the key may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such route.
    #[error("no such endpoint")]
    NotFound,
    /// 405: the route exists, but not with this method.
    #[error("this endpoint does not serve this method (see the Allow header)")]
    MethodNotAllowed,
    /// 404: the route exists, but the resource it names does not (an unknown id).
    #[error("{0}")]
    UnknownId(String),
    /// 409: the resource is no longer in a state that allows this (an approval already
    /// decided).
    #[error("{0}")]
    Conflict(String),
    /// 422: a reload was rejected (the previous pipeline keeps serving).
    #[error("reload rejected, the previous pipeline keeps serving: {0}")]
    ReloadFailed(String),
    /// 429: rate limited; retry after this many seconds.
    #[error("rate limit exceeded; retry after {retry_after_s} s")]
    RateLimited {
        /// Seconds until a token is available.
        retry_after_s: u64,
    },
    /// 429: this client address failed authentication too often (`auth.max_failures`);
    /// retry after this many seconds.
    #[error("too many failed authentications from this address; retry after {retry_after_s} s")]
    AuthFailuresLimited {
        /// Seconds until the address may try again.
        retry_after_s: u64,
    },
    /// 502: the upstream failed.
    #[error("{0}")]
    BadGateway(String),
    /// 503: unavailable (audit log full or closed with fail-closed policy, shutting down).
    #[error("{0}")]
    Unavailable(String),
    /// 504: a deadline passed (upstream).
    #[error("{0}")]
    Timeout(String),
    /// 501: the endpoint is not available with this server's pipeline or build.
    #[error("{0}")]
    NotImplemented(String),
    /// 500: a bug.
    #[error("{0}")]
    Internal(String),
}

impl ServiceError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ServiceError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ServiceError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ServiceError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ServiceError::Forbidden(_) => StatusCode::FORBIDDEN,
            ServiceError::NotFound | ServiceError::UnknownId(_) => StatusCode::NOT_FOUND,
            ServiceError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ServiceError::Conflict(_) => StatusCode::CONFLICT,
            ServiceError::ReloadFailed(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ServiceError::RateLimited { .. } | ServiceError::AuthFailuresLimited { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ServiceError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ServiceError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ServiceError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ServiceError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            ServiceError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The OpenAI-style `type` and `code`.
    pub fn kind(&self) -> (&'static str, &'static str) {
        match self {
            ServiceError::BadRequest(_) => ("invalid_request_error", "invalid_request"),
            ServiceError::TooLarge(_) => ("invalid_request_error", "payload_too_large"),
            ServiceError::Unauthorized(_) => ("authentication_error", "invalid_api_key"),
            ServiceError::Forbidden(_) => ("permission_error", "forbidden"),
            ServiceError::NotFound | ServiceError::UnknownId(_) => {
                ("invalid_request_error", "not_found")
            }
            ServiceError::MethodNotAllowed => ("invalid_request_error", "method_not_allowed"),
            ServiceError::Conflict(_) => ("invalid_request_error", "conflict"),
            ServiceError::ReloadFailed(_) => ("invalid_request_error", "reload_failed"),
            ServiceError::RateLimited { .. } => ("rate_limit_error", "rate_limit_exceeded"),
            ServiceError::AuthFailuresLimited { .. } => {
                ("rate_limit_error", "too_many_failed_authentications")
            }
            ServiceError::BadGateway(_) => ("api_error", "upstream_error"),
            ServiceError::Unavailable(_) => ("api_error", "service_unavailable"),
            ServiceError::Timeout(_) => ("api_error", "timeout"),
            ServiceError::NotImplemented(_) => ("api_error", "not_implemented"),
            ServiceError::Internal(_) => ("api_error", "internal_error"),
        }
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        let (ty, code) = self.kind();
        serde_json::json!({"error": {"message": self.to_string(), "type": ty, "code": code}})
    }
}

impl From<InputError> for ServiceError {
    fn from(e: InputError) -> Self {
        match e {
            InputError::TooLarge { .. } | InputError::TooManySegments { .. } => {
                ServiceError::TooLarge(e.to_string())
            }
            _ => ServiceError::BadRequest(e.to_string()),
        }
    }
}

impl From<ConversationError> for ServiceError {
    fn from(e: ConversationError) -> Self {
        match e {
            ConversationError::Empty => ServiceError::BadRequest(e.to_string()),
            ConversationError::TooManyTurns { .. } | ConversationError::TooLarge { .. } => {
                ServiceError::TooLarge(e.to_string())
            }
            ConversationError::Input { ref source, .. } => match source {
                InputError::TooLarge { .. } | InputError::TooManySegments { .. } => {
                    ServiceError::TooLarge(e.to_string())
                }
                _ => ServiceError::BadRequest(e.to_string()),
            },
            ConversationError::SharedState(ref why) => {
                // Fail closed: no decision without the conversation's shared state.
                tracing::error!(error = %why, "shared conversation state unavailable: request refused");
                ServiceError::Unavailable(format!("{e}; retry later"))
            }
            _ => ServiceError::Internal(format!("the conversation scan failed: {e}")),
        }
    }
}

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let mut resp = (self.status(), axum::Json(self.body())).into_response();
        if let ServiceError::RateLimited { retry_after_s }
        | ServiceError::AuthFailuresLimited { retry_after_s } = self
            && let Ok(v) = HeaderValue::from_str(&retry_after_s.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

/// A built pipeline with what the server derives from it.
#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) pipeline: Arc<Pipeline>,
    /// The output scanners, built with the pipeline from the same configuration.
    pub(crate) output: OutputScanners,
    /// What `/v1/relate` runs, built with the pipeline.
    pub(crate) relate: RelateTarget,
    /// The conversation scanners over this pipeline.
    pub(crate) conversation: ConversationScanners,
    /// Running average (EWMA, 1/8) of this pipeline's scan cost in nanoseconds per KiB of
    /// input (inputs under 1 KiB count as 1 KiB); seeded by the probe scan. Decides whether
    /// a request is cheap enough to scan inline (see [`AppState::scan`]).
    ns_per_kib: AtomicU64,
}

/// Category of the conversation part's findings in the audit log.
const CONVERSATION_CATEGORY: &str = "conversation";

/// Largest input scanned inline on the async worker (when the pipeline is cheap enough).
const INLINE_MAX_BYTES: usize = 16 * 1024;
/// Longest expected scan run inline, in nanoseconds (estimate: `ns_per_kib` × KiB). Below
/// it, handing the scan to the blocking pool (two thread wake-ups) costs more than the scan.
const INLINE_MAX_NS: u64 = 100_000;

/// The pipeline `/v1/relate` runs, and the relational layer whose report it answers.
#[derive(Debug)]
pub(crate) enum RelateTarget {
    /// The served pipeline has a relational layer (its name): relate runs it.
    Served(String),
    /// The served pipeline has none: a pipeline of its own, the served pipeline's layers
    /// (shared, not built again) plus a relational layer with the default options (local
    /// backend, reading the served configuration's `linear` scores and `rules` findings
    /// where it has them). Built with the served pipeline, never on the request path.
    Own {
        /// The pipeline.
        pipeline: Arc<Pipeline>,
        /// Its relational layer's name.
        layer: String,
    },
    /// Why `/v1/relate` is not available (501): the registry has no relational layer kind,
    /// or the pipeline with one could not be built.
    Unavailable(String),
}

impl RelateTarget {
    /// The target for a served pipeline.
    fn for_pipeline(served: &Pipeline, registry: &Registry) -> RelateTarget {
        let pc = served.config();
        if let Some(name) = rampart_relational::relational_layer_name(pc) {
            return RelateTarget::Served(name);
        }
        if !registry
            .kinds()
            .any(|k| k == rampart_relational::RELATIONAL_KIND)
        {
            return RelateTarget::Unavailable(
                "/v1/relate is not available: this server has no relational layer kind".into(),
            );
        }
        // The served pipeline's layers are shared, not built again: only the relational
        // layer is new.
        let built = rampart_relational::relational_layer_for(pc, toml::Table::new())
            .map_err(|e| e.to_string())
            .and_then(|(layer, name)| {
                served
                    .with_layer(layer, registry)
                    .map(|p| (p, name))
                    .map_err(|e| e.to_string())
            });
        match built {
            Ok((p, layer)) => RelateTarget::Own {
                pipeline: Arc::new(p),
                layer,
            },
            Err(e) => {
                tracing::warn!(error = %e, "/v1/relate is not available: cannot add a relational layer to the pipeline");
                RelateTarget::Unavailable(format!(
                    "/v1/relate is not available: cannot add a relational layer to the served pipeline: {e}"
                ))
            }
        }
    }
}

/// The conversation scanners of one pipeline.
#[derive(Debug)]
pub(crate) struct ConversationScanners {
    /// What `/v1/scan` runs on `turns`: stateful over the shared store (without the ledger:
    /// API callers return answers themselves, so none could ever verify) with a
    /// `[conversation]` section, else stateless.
    pub(crate) api: Arc<ConversationScanner>,
    /// What the proxy runs on `messages`, with the store and the ledger; `None` without a
    /// `[conversation]` section (the proxy then scans the messages as plain segments).
    pub(crate) proxy: Option<Arc<ConversationScanner>>,
}

impl ConversationScanners {
    fn build(
        pipeline: &Arc<Pipeline>,
        shared: Option<&Conversations>,
    ) -> Result<Self, OptionsError> {
        // A server compiles everything before it serves, whatever `compile` says.
        let at_build = |o: &ConversationOptions| ConversationOptions {
            compile: Some(rampart_rules::plans::Compile::AtBuild),
            ..o.clone()
        };
        // With `[state] backend = "redis"` the scanners read and write the shared state.
        let place = |s: ConversationScanner, c: &Conversations| match &c.shared {
            Some(shared) => s.with_shared(shared.clone()),
            None => s,
        };
        Ok(match shared {
            Some(c) => ConversationScanners {
                api: Arc::new(place(
                    ConversationScanner::stateful(
                        pipeline.clone(),
                        at_build(&c.options),
                        c.store.clone(),
                        None,
                    )?,
                    c,
                )),
                proxy: Some(Arc::new(place(
                    ConversationScanner::stateful(
                        pipeline.clone(),
                        at_build(&c.options),
                        c.store.clone(),
                        Some(c.ledger.clone()),
                    )?,
                    c,
                ))),
            },
            None => ConversationScanners {
                api: Arc::new(ConversationScanner::stateless(
                    pipeline.clone(),
                    ConversationOptions::default(),
                )?),
                proxy: None,
            },
        })
    }
}

/// The conversation state of this process (`[conversation]`): one store and one ledger,
/// built at start and kept across reloads (only the scanners over them are rebuilt with a
/// new pipeline).
#[derive(Debug)]
pub(crate) struct Conversations {
    options: ConversationOptions,
    store: Arc<ConversationStore>,
    ledger: Arc<AssistantLedger>,
    /// `conversation.persist_path` (resolved) and `flush_seconds`.
    persist: Option<(PathBuf, Duration)>,
    /// The last flush to `persist` failed (for `/readyz`).
    persist_failing: AtomicBool,
    /// `[state] backend = "redis"`: the store and the ledger live there (`store` and
    /// `ledger` above stay empty).
    shared: Option<Arc<SharedConversations>>,
}

/// Why the conversation state could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConversationSetupError {
    /// The `[conversation]` options are invalid.
    #[error("invalid [conversation] options")]
    Options(#[from] OptionsError),
    /// No key material was configured and the OS gave no randomness for one.
    #[error("cannot draw a random conversation key: {0}")]
    Random(String),
    /// `persist_path` is set but the key variable is not: rows written under a random key
    /// would never match after a restart.
    #[error(
        "conversation.persist_path is {} but the environment variable {key_env} \
         (conversation.key_env) is unset or empty: persisted state needs a fixed key \
         (set {key_env}, or remove persist_path)",
        path.display()
    )]
    PersistWithoutKey {
        /// The variable `key_env` names.
        key_env: String,
        /// The resolved `persist_path`.
        path: PathBuf,
    },
    /// The state is in Redis but the key variable is not set: each replica would draw its
    /// own random key, and their conversations would never meet.
    #[error(
        "[state] backend = \"redis\" keeps conversation state shared by every replica, but \
         the environment variable {key_env} (conversation.key_env) is unset or empty: set \
         it to the same secret on every replica"
    )]
    SharedWithoutKey {
        /// The variable `key_env` names.
        key_env: String,
    },
}

impl Conversations {
    /// The state a configuration asks for (`None` without an enabled `[conversation]`);
    /// `get` reads the environment (the key material).
    pub(crate) fn from_config(
        cfg: &ServerConfig,
        get: impl Fn(&str) -> Option<String>,
        shared_state: Option<&Arc<dyn rampart_state::SharedStore>>,
    ) -> Result<Option<Self>, ConversationSetupError> {
        let Some(section) = cfg.conversation.as_ref().filter(|c| c.enabled) else {
            return Ok(None);
        };
        let persist = section
            .persist_path
            .as_ref()
            .map(|p| (cfg.resolve(p), Duration::from_secs(section.flush_seconds)));
        let key = match get(&section.key_env).filter(|k| !k.is_empty()) {
            Some(k) => k.into_bytes(),
            None => {
                if shared_state.is_some() {
                    return Err(ConversationSetupError::SharedWithoutKey {
                        key_env: section.key_env.clone(),
                    });
                }
                if let Some((path, _)) = persist {
                    return Err(ConversationSetupError::PersistWithoutKey {
                        key_env: section.key_env.clone(),
                        path,
                    });
                }
                tracing::warn!(
                    key_env = %section.key_env,
                    "no conversation key material in the environment: a random key for this \
                     process; conversation state and verified answers do not survive a restart"
                );
                let mut k = vec![0u8; 32];
                getrandom::fill(&mut k)
                    .map_err(|e| ConversationSetupError::Random(e.to_string()))?;
                k
            }
        };
        let mut options = section.options.clone();
        // Each API key holds at most its share of the store (issue 35), by default an
        // equal share per configured key.
        let keys = cfg.auth.keys.len();
        if options.store.max_entries_per_tenant.is_none() && keys > 1 {
            options.store.max_entries_per_tenant = Some((options.store.max_entries / keys).max(1));
        }
        if options.ledger.max_entries_per_tenant.is_none() && keys > 1 {
            options.ledger.max_entries_per_tenant =
                Some((options.ledger.max_entries / keys).max(1));
        }
        let store = ConversationStore::new(options.store.clone(), &key)?;
        let ledger = AssistantLedger::new(options.ledger.clone(), &key)?;
        let shared = match shared_state {
            Some(s) => Some(Arc::new(SharedConversations::new(
                s.clone(),
                &key,
                options.store.clone(),
                options.ledger.clone(),
            )?)),
            None => None,
        };
        Ok(Some(Conversations {
            options,
            store: Arc::new(store),
            ledger: Arc::new(ledger),
            persist,
            persist_failing: AtomicBool::new(false),
            shared,
        }))
    }

    /// The shared state, when the conversation state is kept there.
    pub(crate) fn shared(&self) -> Option<&Arc<SharedConversations>> {
        self.shared.as_ref()
    }

    /// The ledger.
    pub(crate) fn ledger(&self) -> &Arc<AssistantLedger> {
        &self.ledger
    }

    /// `conversation.persist_path` (resolved) and the flush interval; `None`: in memory.
    pub(crate) fn persist(&self) -> Option<&(PathBuf, Duration)> {
        self.persist.as_ref()
    }

    /// Records whether the last flush failed.
    pub(crate) fn set_persist_failing(&self, failing: bool) {
        self.persist_failing.store(failing, Ordering::Relaxed);
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<ConversationStore> {
        &self.store
    }
}

impl Built {
    fn new(
        pipeline: Pipeline,
        output: OutputScanners,
        relate: RelateTarget,
        conversations: Option<&Conversations>,
        probe: Duration,
        probe_bytes: usize,
    ) -> Result<Self, OptionsError> {
        let pipeline = Arc::new(pipeline);
        let conversation = ConversationScanners::build(&pipeline, conversations)?;
        let b = Built {
            pipeline,
            output,
            relate,
            conversation,
            ns_per_kib: AtomicU64::new(u64::MAX),
        };
        b.observe(probe_bytes, probe);
        Ok(b)
    }

    fn kib(bytes: usize) -> u64 {
        (bytes as u64).div_ceil(1024).max(1)
    }

    /// Whether a scan of `bytes` is expected to be short enough to run inline.
    fn inline_ok(&self, bytes: usize) -> bool {
        bytes <= INLINE_MAX_BYTES
            && self
                .ns_per_kib
                .load(Ordering::Relaxed)
                .saturating_mul(Self::kib(bytes))
                <= INLINE_MAX_NS
    }

    /// Folds one scan's cost into the running average (racy updates only lose samples).
    fn observe(&self, bytes: usize, took: Duration) {
        let sample = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX) / Self::kib(bytes);
        let old = self.ns_per_kib.load(Ordering::Relaxed);
        let new = if old == u64::MAX {
            sample
        } else {
            old - old / 8 + sample / 8
        };
        self.ns_per_kib.store(new, Ordering::Relaxed);
    }
}

/// The key table, derived from the configuration.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    by_hash: HashMap<[u8; 32], KeyEntry>,
}

#[derive(Debug, Clone)]
pub(crate) struct KeyEntry {
    pub(crate) id: String,
    pub(crate) rate_per_s: f64,
    pub(crate) burst: f64,
    pub(crate) admin: bool,
    pub(crate) approver: bool,
}

impl Keys {
    fn from_config(cfg: &ServerConfig) -> Keys {
        let by_hash = cfg
            .auth
            .keys
            .iter()
            .filter_map(|k| {
                parse_sha256_hex(&k.sha256).map(|h| {
                    (
                        h,
                        KeyEntry {
                            id: k.id.clone(),
                            rate_per_s: k.rate_per_s,
                            burst: f64::from(k.burst),
                            admin: k.admin,
                            approver: k.approver,
                        },
                    )
                })
            })
            .collect();
        Keys { by_hash }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    pub(crate) fn lookup(&self, presented: &str) -> Option<&KeyEntry> {
        use sha2::Digest;
        let h: [u8; 32] = sha2::Sha256::digest(presented.as_bytes()).into();
        self.by_hash.get(&h)
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// What a successful reload reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadInfo {
    /// Layer names of the new pipeline, in order.
    pub layers: Vec<String>,
    /// The new policy version.
    pub policy_version: String,
}

/// Everything a handler needs. Shared as `Arc<AppState>`.
#[derive(Debug)]
pub struct AppState {
    config: ArcSwap<ServerConfig>,
    built: ArcSwap<Built>,
    keys: ArcSwap<Keys>,
    buckets: Mutex<HashMap<String, Bucket>>,
    auth_failures: crate::auth::FailureLimiter,
    registry: Arc<Registry>,
    default_pipeline: PipelineConfig,
    audit: Option<AuditWriter>,
    http: reqwest::Client,
    metrics: Metrics,
    reload_lock: tokio::sync::Mutex<()>,
    started: Instant,
    conversations: Option<Arc<Conversations>>,
    tools: Option<Arc<crate::tools::ToolGovernance>>,
    /// `[state] backend = "redis"`: rate limits and failed-login limits count here, across
    /// replicas (approvals and grants through the tool gate).
    shared: Option<Arc<dyn rampart_state::SharedStore>>,
    /// Deferred judge explanations (with an audit log): parked by the judge layers, run
    /// after the decision is written, recorded in its audit row.
    explainer: Option<Explainer>,
}

/// Deferred judge explanations the service runs at once (after their decisions are
/// written): at most this many parked or running; past it they are dropped (and recorded as
/// `dropped` in their audit rows).
pub(crate) const EXPLAIN_QUEUE: usize = 64;

/// Runs deferred judge explanations off the request path.
#[derive(Debug)]
struct Explainer {
    parked: DeferredExplanations,
    slots: Arc<tokio::sync::Semaphore>,
}

/// An error from the shared state as one line (logs, 503 bodies).
pub(crate) fn state_error(e: &rampart_state::StateError) -> String {
    error_chain(e)
}

/// Why a pipeline could not be built for serving (at start-up or on reload).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The server configuration, or the pipeline configuration it names, is invalid.
    #[error(transparent)]
    Config(#[from] ServerConfigError),
    /// A layer could not be built.
    #[error(transparent)]
    Build(#[from] rampart_core::BuildError),
    /// A layer failed to compile what it had left for first use.
    #[error(transparent)]
    WarmUp(#[from] rampart_core::WarmUpError),
    /// A rule pack fails its own examples.
    #[error(transparent)]
    Examples(#[from] crate::rule_examples::RuleExamplesError),
    /// The probe scan run on every new pipeline failed.
    #[error("pipeline probe failed")]
    Probe(#[source] InputError),
    /// The output scanners could not be built.
    #[error(transparent)]
    Output(#[from] rampart_output::OutputError),
    /// The task building the pipeline panicked.
    #[error("the pipeline build task failed")]
    Task(#[source] tokio::task::JoinError),
    /// The conversation scanners could not be built.
    #[error("cannot build the conversation scanner")]
    Conversation(#[source] OptionsError),
}

/// Why a reload was rejected (the previous configuration and pipeline keep serving).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// The configuration, as it would be in force after the reload, is invalid.
    #[error(transparent)]
    Config(#[from] ServerConfigError),
    /// The pipeline could not be built.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The task running the reload panicked.
    #[error("the reload task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// An error and its sources, joined by `: ` (for logs and response bodies).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Builds a pipeline and its output scanners, runs its rule packs' own examples, and probes
/// the pipeline once (warms it up and seeds its cost estimate).
pub(crate) fn build_pipeline(
    cfg: &ServerConfig,
    default_pipeline: &PipelineConfig,
    registry: &Registry,
    conversations: Option<&Conversations>,
    explanations: Option<&DeferredExplanations>,
    shared: Option<&Arc<dyn rampart_state::SharedStore>>,
) -> Result<Built, PipelineError> {
    let pc = cfg.pipeline_config(default_pipeline)?;
    warn_if_request_deadline_cuts_judge(cfg, &pc);
    let pipeline = Pipeline::from_config_with(pc, registry)?;
    // With `[state] backend = "redis"` every judge layer with a cache keeps it there: the
    // replicas answer a repeated question from one cache (its own SQLite file is not used).
    if let Some(store) = shared {
        for layer in pipeline.detectors() {
            if let Some(j) = layer
                .as_any()
                .and_then(|a| a.downcast_ref::<rampart_judge::JudgeLayer>())
                && j.share_cache(Arc::clone(store))
            {
                tracing::info!(
                    layer = layer.name(),
                    backend = store.backend(),
                    "judge verdict cache kept in the shared state"
                );
            }
        }
    }
    // With an audit log, score mode's explanations are asked after the decision is
    // returned and recorded in its audit row (without one they stay inline: there would be
    // nowhere to put them).
    if let Some(d) = explanations {
        for layer in pipeline.detectors() {
            if let Some(j) = layer
                .as_any()
                .and_then(|a| a.downcast_ref::<rampart_judge::JudgeLayer>())
            {
                j.defer_explanations(d.clone());
            }
        }
    }
    // A configuration may defer compiling (`compile = "first_use"`): a server compiles
    // everything before it serves, so that no request does.
    pipeline.warm_up()?;
    crate::rule_examples::check_rule_examples(&pipeline)?;
    let output = OutputScanners::build(pipeline.config(), &cfg.output)?;
    const PROBE: &str = "rampart readiness probe";
    let started = Instant::now();
    pipeline.scan_text(PROBE).map_err(PipelineError::Probe)?;
    let probe = started.elapsed();
    let relate = RelateTarget::for_pipeline(&pipeline, registry);
    Built::new(pipeline, output, relate, conversations, probe, PROBE.len())
        .map_err(PipelineError::Conversation)
}

/// A judge layer takes seconds; when the request deadline is not above the layer budget,
/// judged requests can end as degraded decisions before the judge answers. Not an error (a
/// tight deadline is a valid choice), but said once per build.
fn warn_if_request_deadline_cuts_judge(cfg: &ServerConfig, pc: &PipelineConfig) {
    if request_deadline_cuts_judge(cfg, pc) {
        tracing::warn!(
            request_timeout_ms = cfg.server.request_timeout_ms,
            layer_timeout_ms = pc.policy.layer_timeout_ms,
            "the pipeline has a judge layer and server.request_timeout_ms is not above the \
             policy's layer_timeout_ms: judged requests past the request deadline get a \
             degraded decision (fail mode) before the judge answers; raise \
             server.request_timeout_ms (or RAMPART_REQUEST_TIMEOUT_MS)"
        );
    }
}

fn request_deadline_cuts_judge(cfg: &ServerConfig, pc: &PipelineConfig) -> bool {
    let has_judge = pc
        .layers
        .iter()
        .any(|l| l.kind == rampart_judge::JUDGE_KIND);
    has_judge && cfg.server.request_timeout_ms <= pc.policy.layer_timeout_ms
}

impl AppState {
    pub(crate) fn new(
        config: ServerConfig,
        built: Built,
        registry: Arc<Registry>,
        default_pipeline: PipelineConfig,
        audit: Option<AuditWriter>,
        conversations: Option<Arc<Conversations>>,
        tools: Option<Arc<crate::tools::ToolGovernance>>,
    ) -> Result<AppState, reqwest::Error> {
        let http = build_http_client(&config)?;
        let keys = Keys::from_config(&config);
        let metrics = Metrics::new();
        metrics.set_pipeline_info(&built.pipeline);
        Ok(AppState {
            config: ArcSwap::from_pointee(config),
            built: ArcSwap::from_pointee(built),
            keys: ArcSwap::from_pointee(keys),
            buckets: Mutex::new(HashMap::new()),
            auth_failures: crate::auth::FailureLimiter::default(),
            registry,
            default_pipeline,
            audit,
            http,
            metrics,
            reload_lock: tokio::sync::Mutex::new(()),
            started: Instant::now(),
            conversations,
            tools,
            shared: None,
            explainer: None,
        })
    }

    /// Runs the explanations the judge layers park in `parked` (the pipelines were built
    /// with it) after their decisions are written.
    pub(crate) fn with_deferred_explanations(
        mut self,
        parked: Option<DeferredExplanations>,
    ) -> Self {
        self.explainer = parked.map(|parked| Explainer {
            parked,
            slots: Arc::new(tokio::sync::Semaphore::new(EXPLAIN_QUEUE)),
        });
        self
    }

    /// Counts rate limits and failed logins in `shared` (across replicas) when set.
    pub(crate) fn with_shared_state(
        mut self,
        shared: Option<Arc<dyn rampart_state::SharedStore>>,
    ) -> Self {
        self.shared = shared;
        self
    }

    /// The shared state, when `[state]` names one.
    pub(crate) fn shared_state(&self) -> Option<&Arc<dyn rampart_state::SharedStore>> {
        self.shared.as_ref()
    }

    /// The pipeline in force (hot-reloadable; hold the `Arc` for one request).
    pub fn pipeline(&self) -> Arc<Pipeline> {
        self.built.load().pipeline.clone()
    }

    /// The output scanner `/v1/scan/output` uses, built with the pipeline in force.
    pub(crate) fn output_scanner(&self) -> Arc<OutputScanner> {
        self.built.load().output.configured().clone()
    }

    /// The output scanner for proxied responses, built with the pipeline in force.
    pub(crate) fn proxy_output_scanner(&self) -> Arc<OutputScanner> {
        self.built.load().output.for_proxy().clone()
    }

    /// The conversation scanner `/v1/scan` runs on `turns`, over the pipeline in force, in
    /// the partition of the API key `tenant` (`None`: authentication off).
    pub(crate) fn api_conversation_scanner(
        &self,
        tenant: Option<&str>,
    ) -> Arc<ConversationScanner> {
        Arc::new(self.built.load().conversation.api.for_tenant(tenant))
    }

    /// The proxy's conversation scanner, over the pipeline in force, in the partition of
    /// the API key `tenant`; `None` without a `[conversation]` section.
    pub(crate) fn proxy_conversation_scanner(
        &self,
        tenant: Option<&str>,
    ) -> Option<Arc<ConversationScanner>> {
        self.built
            .load()
            .conversation
            .proxy
            .as_ref()
            .map(|s| Arc::new(s.for_tenant(tenant)))
    }

    /// Conversation nodes held in the state (0 without a `[conversation]` section).
    pub fn conversation_nodes(&self) -> usize {
        self.conversations.as_ref().map_or(0, |c| c.store().len())
    }

    /// Whether conversation state is kept (`[conversation]`).
    pub(crate) fn conversation_stateful(&self) -> bool {
        self.conversations.is_some()
    }

    /// Where conversation state is kept: `none`, `memory` (this process), or the shared
    /// state's backend (`redis`).
    pub(crate) fn conversation_store(&self) -> &'static str {
        match &self.conversations {
            None => "none",
            Some(c) => c.shared().map_or("memory", |s| s.backend()),
        }
    }

    /// The persistence of the conversation state: `off` (in memory only, or no state),
    /// `ok`, or `failing` (the last flush failed; the next one retries with a full snapshot).
    pub(crate) fn conversation_persistence(&self) -> &'static str {
        match &self.conversations {
            Some(c) if c.persist.is_some() => {
                if c.persist_failing.load(Ordering::Relaxed) {
                    "failing"
                } else {
                    "ok"
                }
            }
            _ => "off",
        }
    }

    /// The conversation state's size: nodes and ledger entries.
    pub(crate) fn conversation_sizes(&self) -> Option<(usize, usize)> {
        self.conversations
            .as_ref()
            .map(|c| (c.store.len(), c.ledger.len()))
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.config.load_full()
    }

    /// The client for upstream calls.
    pub fn http_client(&self) -> &reqwest::Client {
        &self.http
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub(crate) fn auth_failures(&self) -> &crate::auth::FailureLimiter {
        &self.auth_failures
    }

    pub(crate) fn keys(&self) -> Arc<Keys> {
        self.keys.load_full()
    }

    /// Tool governance (`[tools]`), when configured.
    pub(crate) fn tools(&self) -> Option<&Arc<crate::tools::ToolGovernance>> {
        self.tools.as_ref()
    }

    /// The audit log's writer, when there is an audit log.
    pub(crate) fn audit_writer(&self) -> Option<&AuditWriter> {
        self.audit.as_ref()
    }

    pub(crate) fn audit_enabled(&self) -> bool {
        self.audit.is_some()
    }

    /// Whether the audit writer accepts records (true when there is no audit log).
    pub(crate) fn audit_alive(&self) -> bool {
        self.audit.as_ref().is_none_or(|w| !w.is_closed())
    }

    /// The audit writer's counters, when there is an audit log.
    pub(crate) fn audit_stats(&self) -> Option<rampart_audit::AuditStats> {
        self.audit.as_ref().map(|w| w.stats())
    }

    pub(crate) fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Runs the pipeline under `server.request_timeout_ms`: on the blocking pool, or inline
    /// on the async worker when the input is at most 16 KiB and this pipeline's measured
    /// cost predicts at most 100 µs for it (the deterministic pipeline on ordinary prompts;
    /// never a transformer layer), which saves two thread hand-offs per request.
    ///
    /// Input errors (limits, no segments) are `Err` (400/413). A run past the deadline, or a
    /// pipeline panic, is `Ok` with a synthetic decision marked `degraded` whose action is the
    /// fail mode's: BLOCK for `closed`, ALLOW for `open` (`server.fail_mode`, default the
    /// pipeline policy's). The timed-out run finishes in the background (each layer has its
    /// own budget, so it is bounded).
    pub async fn scan(&self, req: ScanRequest) -> Result<ScanOutcome, ServiceError> {
        let built = self.built.load_full();
        let pipeline = built.pipeline.clone();
        self.run_pipeline(built, pipeline, true, req).await
    }

    /// Relates a layered prompt (`/v1/relate`): runs the served pipeline when it has a
    /// relational layer, else the pipeline built for relate (the served configuration plus
    /// a default local relational layer), on the blocking pool under the same request
    /// deadline and fail mode as [`AppState::scan`]. Returns the outcome and the name of the
    /// relational layer; 501 when relate is not available.
    pub(crate) async fn relate(
        &self,
        req: ScanRequest,
    ) -> Result<(ScanOutcome, String), ServiceError> {
        let built = self.built.load_full();
        let (pipeline, layer, inline) = match &built.relate {
            RelateTarget::Served(name) => (built.pipeline.clone(), name.clone(), true),
            RelateTarget::Own { pipeline, layer } => (pipeline.clone(), layer.clone(), false),
            RelateTarget::Unavailable(why) => {
                return Err(ServiceError::NotImplemented(why.clone()));
            }
        };
        let outcome = self.run_pipeline(built, pipeline, inline, req).await?;
        Ok((outcome, layer))
    }

    /// Runs `pipeline` under the request deadline and fail mode. The `served` pipeline may
    /// run inline when its cost estimate allows (and feeds that estimate); any other runs
    /// on the blocking pool.
    async fn run_pipeline(
        &self,
        built: Arc<Built>,
        pipeline: Arc<Pipeline>,
        served: bool,
        req: ScanRequest,
    ) -> Result<ScanOutcome, ServiceError> {
        let cfg = self.config();
        // Refuse over-limit input before spending a blocking thread on it.
        req.check(&pipeline.config().limits)?;
        let req = Arc::new(req);
        let bytes = req.total_bytes();
        let deadline = Duration::from_millis(cfg.server.request_timeout_ms);
        let late = || {
            format!(
                "the request deadline ({} ms) passed before the pipeline finished",
                cfg.server.request_timeout_ms
            )
        };
        let failure = if served && built.inline_ok(bytes) {
            let started = Instant::now();
            let res =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pipeline.scan(&req)));
            let took = started.elapsed();
            built.observe(bytes, took);
            match res {
                Ok(res) if took <= deadline => return res.map_err(ServiceError::from),
                Ok(_) => late(),
                Err(_) => {
                    tracing::error!("pipeline panicked");
                    "the pipeline failed (internal error)".to_string()
                }
            }
        } else {
            let r2 = req.clone();
            let b2 = built.clone();
            let p2 = pipeline.clone();
            let task = tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let res = p2.scan(&r2);
                if served {
                    b2.observe(r2.total_bytes(), started.elapsed());
                }
                res
            });
            match tokio::time::timeout(deadline, task).await {
                Ok(Ok(res)) => return res.map_err(ServiceError::from),
                Ok(Err(join)) => {
                    tracing::error!(error = %join, "pipeline task failed");
                    "the pipeline failed (internal error)".to_string()
                }
                Err(_) => late(),
            }
        };
        Ok(ScanOutcome {
            decision: self.degraded(&cfg, &pipeline, &req, failure),
            sanitized: None,
        })
    }

    /// Scans a conversation with `scanner` on the blocking pool under
    /// `server.request_timeout_ms` and the fail mode, as [`AppState::scan`] does for one
    /// request: input errors are `Err`; a run past the deadline or a panic is a degraded
    /// decision (without a conversation part; the run finishes in the background and still
    /// updates the state).
    pub(crate) async fn scan_conversation(
        &self,
        scanner: Arc<ConversationScanner>,
        req: Arc<ConversationRequest>,
    ) -> Result<ConversationOutcome, ServiceError> {
        let cfg = self.config();
        let deadline = Duration::from_millis(cfg.server.request_timeout_ms);
        let (s2, r2) = (scanner.clone(), req.clone());
        let task = tokio::task::spawn_blocking(move || s2.scan(&r2));
        let failure = match tokio::time::timeout(deadline, task).await {
            Ok(Ok(res)) => return res.map_err(ServiceError::from),
            Ok(Err(join)) => {
                tracing::error!(error = %join, "conversation scan task failed");
                "the pipeline failed (internal error)".to_string()
            }
            Err(_) => format!(
                "the request deadline ({} ms) passed before the pipeline finished",
                cfg.server.request_timeout_ms
            ),
        };
        let mut segments: Vec<Segment> = req
            .turns
            .iter()
            .map(|t| Segment::new(t.role, t.content()))
            .collect();
        if segments.is_empty() {
            segments.push(Segment::new(rampart_core::Role::User, ""));
        }
        let mut as_request = ScanRequest::segments(segments);
        as_request.id = req.id.clone();
        Ok(ConversationOutcome {
            decision: self.degraded(&cfg, scanner.pipeline(), &as_request, failure),
            sanitized: None,
            drop_messages: Vec::new(),
        })
    }

    /// The decision of a run that failed or passed its deadline: the fail mode's action,
    /// marked degraded.
    fn degraded(
        &self,
        cfg: &ServerConfig,
        pipeline: &Pipeline,
        req: &ScanRequest,
        failure: String,
    ) -> Decision {
        let deadline = Duration::from_millis(cfg.server.request_timeout_ms);
        self.metrics.pipeline_failure();
        let mode = cfg
            .server
            .fail_mode
            .unwrap_or(pipeline.config().policy.fail_mode);
        let action = match mode {
            FailMode::Closed => Action::Block,
            FailMode::Open => Action::Allow,
        };
        let reason = format!(
            "{failure}; fail mode {}",
            if mode == FailMode::Closed {
                "closed"
            } else {
                "open"
            }
        );
        Decision {
            id: req.id.clone(),
            action,
            risk: if action == Action::Block {
                RiskClass::HighRisk
            } else {
                RiskClass::LowRisk
            },
            categories: BTreeMap::new(),
            layers: Vec::new(),
            findings: Vec::new(),
            transforms: Vec::new(),
            reasons: vec![reason],
            degraded: true,
            input_hash: pipeline.input_hash(req),
            hash_key_id: pipeline.hash_key_id().to_string(),
            input_bytes: req.total_bytes(),
            segments: req.segments.len(),
            policy_version: pipeline.config().policy.version.clone(),
            elapsed_us: deadline.as_micros() as u64,
            reports: rampart_core::Reports::default(),
        }
    }

    /// Counts the decision in the metrics and appends it to the audit log, resolving after
    /// the record is committed (so an acknowledged response is in the log). With no audit
    /// log configured, only the metrics. A full queue (with `on_full` failing rather than
    /// waiting) or a closed writer is 503: the response is not sent as a success.
    pub async fn record(
        &self,
        caller: &Caller,
        endpoint: &'static str,
        decision: &Decision,
    ) -> Result<(), ServiceError> {
        self.metrics.observe_decision(endpoint, decision);
        if self.audit.is_none() {
            return Ok(());
        }
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let mut rec = AuditRecord::from_decision(
            decision,
            &caller.request_id,
            caller.key_id.as_deref(),
            endpoint,
            now_ms,
        );
        // The conversation part's findings (HIST_001, CONV_00x) are rule ids like any other:
        // logged in the findings, under the conversation layer. Never text.
        if let Some(c) = decision
            .reports
            .find::<rampart_conversation::ConversationReport>()
        {
            rec.findings
                .extend(c.findings.iter().map(|f| rampart_audit::AuditFinding {
                    rule_id: f.id.clone(),
                    category: CONVERSATION_CATEGORY.into(),
                    strength: rampart_core::Strength::Strong,
                    layer: rampart_conversation::CONVERSATION_LAYER.into(),
                }));
        }
        // A deferred explanation is taken before the append, so that a decision that cannot
        // be written does not leave it parked.
        let judge = decision.reports.find::<JudgeReport>();
        let job = match (&self.explainer, &judge) {
            (Some(ex), Some(j)) => {
                if j.explain_outcome == Some(rampart_judge::ExplainOutcome::Dropped) {
                    self.metrics.judge_explanation("dropped");
                }
                j.explain_ticket.and_then(|t| ex.parked.take(t))
            }
            _ => None,
        };
        match self.append_audit(caller, rec).await {
            Ok(Some(id)) => {
                if let Some(job) = job {
                    self.explain_later(job, id, &caller.request_id);
                }
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                if job.is_some() {
                    self.metrics.judge_explanation("dropped");
                }
                Err(e)
            }
        }
    }

    /// Runs a deferred explanation off the request path (a blocking-pool thread; the judge
    /// client's timeout, retries, concurrency and budgets apply) and records it in the
    /// decision's audit row `decision_id`. With [`EXPLAIN_QUEUE`] explanations already
    /// running or waiting it is not run: the row records `dropped`. Never waits.
    fn explain_later(&self, job: ExplanationJob, decision_id: i64, request_id: &str) {
        let (Some(ex), Some(writer)) = (&self.explainer, &self.audit) else {
            return;
        };
        let writer = writer.clone();
        let counter = self.metrics.explanation_counter();
        let request_id = request_id.to_string();
        let layer = job.layer().to_string();
        let permit = ex.slots.clone().try_acquire_owned().ok();
        tokio::spawn(async move {
            let explanation = match permit {
                None => Explanation::dropped(&layer, "the queue of deferred explanations is full"),
                Some(permit) => {
                    let done = tokio::task::spawn_blocking(move || job.run()).await;
                    drop(permit);
                    done.unwrap_or_else(|_| {
                        Explanation::dropped(&layer, "the explanation task failed")
                    })
                }
            };
            counter.inc(explanation.outcome.name());
            let e = rampart_audit::AuditExplanation::from_explanation(
                decision_id,
                &request_id,
                &explanation,
            );
            match writer.record_explanation(e).await {
                Ok(true) => {}
                Ok(false) => {
                    counter.inc("unrecorded");
                    tracing::warn!(%request_id, decision_id, "deferred judge explanation: its audit row is gone");
                }
                Err(err) => {
                    counter.inc("unrecorded");
                    tracing::warn!(%request_id, decision_id, error = %err, "deferred judge explanation not recorded");
                }
            }
        });
    }

    /// Appends one record and returns its row ID (`None`: no audit log); a full (after the
    /// configured wait) or closed writer is 503.
    async fn append_audit(
        &self,
        caller: &Caller,
        rec: AuditRecord,
    ) -> Result<Option<i64>, ServiceError> {
        let Some(writer) = &self.audit else {
            return Ok(None);
        };
        match writer.append(rec).await {
            Ok(id) => {
                self.metrics.audit_ok();
                Ok(Some(id))
            }
            Err(e) => {
                let kind = match e {
                    AuditError::Full => "full",
                    AuditError::Closed => "closed",
                    _ => "error",
                };
                self.metrics.audit_failed(kind);
                tracing::error!(request_id = %caller.request_id, error = %e, "audit append failed");
                Err(ServiceError::Unavailable(format!(
                    "the decision could not be written to the audit log ({kind}); retry later"
                )))
            }
        }
    }

    /// The shared-state operation that takes one token from the key's bucket (one bucket
    /// for all replicas).
    pub(crate) fn rate_op(&self, key: &KeyEntry) -> rampart_state::Op {
        rampart_state::Op::Bucket {
            key: format!("rate:{}", key.id),
            capacity: key.burst,
            per_s: key.rate_per_s,
            take: 1.0,
            need: 1.0,
            force: false,
            now_ms: crate::tools::now_ms(),
        }
    }

    /// Takes one token from the key's bucket in this process; `Err(Wait(seconds))` when
    /// empty.
    pub(crate) fn take_token(&self, key: &KeyEntry) -> Result<(), u64> {
        let mut buckets = match self.buckets.lock() {
            Ok(b) => b,
            Err(p) => p.into_inner(),
        };
        let now = Instant::now();
        let b = buckets.entry(key.id.clone()).or_insert(Bucket {
            tokens: key.burst,
            last: now,
        });
        let refill = now.duration_since(b.last).as_secs_f64() * key.rate_per_s;
        b.tokens = (b.tokens + refill).min(key.burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - b.tokens) / key.rate_per_s;
            Err(wait.ceil().max(1.0) as u64)
        }
    }

    /// Rebuilds the pipeline (re-reading the server configuration file when there is one,
    /// the pipeline file and the rule packs) off the request path and swaps it in. On error
    /// nothing changes and the error is returned (and logged and counted). Requests in flight
    /// keep the pipeline they started with.
    pub async fn reload(self: &Arc<Self>) -> Result<ReloadInfo, ReloadError> {
        let _guard = self.reload_lock.lock().await;
        let this = self.clone();
        let res = tokio::task::spawn_blocking(move || this.rebuild())
            .await
            .map_err(ReloadError::Task)
            .and_then(|r| r);
        match &res {
            Ok(info) => {
                self.metrics.reload(true);
                tracing::info!(layers = ?info.layers, policy_version = %info.policy_version, "reloaded");
            }
            Err(e) => {
                self.metrics.reload(false);
                tracing::error!(error = %error_chain(e), "reload rejected; the previous pipeline keeps serving");
            }
        }
        res
    }

    fn rebuild(&self) -> Result<ReloadInfo, ReloadError> {
        let old = self.config();
        let new_cfg = match &old.source {
            Some(p) => {
                let mut c = ServerConfig::from_path(p)?;
                c.apply_env(|k| std::env::var(k).ok())?;
                // What cannot change without a restart stays as it was: the listener (whose
                // address may come from `--listen`, not the file), TLS, the audit log and the
                // connection cap.
                c.server.listen = old.server.listen.clone();
                c.server.max_connections = old.server.max_connections;
                c.server.max_connections_per_client = old.server.max_connections_per_client;
                c.tls = old.tls.clone();
                c.audit = old.audit.clone();
                // The conversation state lives as long as the process.
                c.conversation = old.conversation.clone();
                // The tool policy is compiled once at start (pending approvals and grants
                // live with it).
                c.tools = old.tools.clone();
                // The checks run on the configuration that would be in force, not on the
                // file alone: keys removed from a file whose own `listen` is loopback must
                // not open a non-loopback listener.
                c.validate(&p.display().to_string())?;
                c
            }
            None => (*old).clone(),
        };
        let built = build_pipeline(
            &new_cfg,
            &self.default_pipeline,
            &self.registry,
            self.conversations.as_deref(),
            self.explainer.as_ref().map(|e| &e.parked),
            self.shared.as_ref(),
        )?;
        let info = ReloadInfo {
            layers: layer_names(&built.pipeline),
            policy_version: built.pipeline.config().policy.version.clone(),
        };
        self.metrics.set_pipeline_info(&built.pipeline);
        self.keys.store(Arc::new(Keys::from_config(&new_cfg)));
        self.config.store(Arc::new(new_cfg));
        self.built.store(Arc::new(built));
        Ok(info)
    }
}

/// Layer names of a pipeline: `normalize`, then each detector's.
pub(crate) fn layer_names(p: &Pipeline) -> Vec<String> {
    p.layer_names().into_iter().map(str::to_string).collect()
}

fn build_http_client(_cfg: &ServerConfig) -> Result<reqwest::Client, reqwest::Error> {
    // Per-request deadlines come from `proxy.timeout_ms` (set by the proxy per call).
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(90))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(probe: Duration) -> Built {
        let p = rampart_rules::rules_pipeline().expect("default pipeline builds");
        let output = OutputScanners::build(p.config(), &Default::default()).expect("builds");
        Built::new(
            p,
            output,
            RelateTarget::Unavailable("test".into()),
            None,
            probe,
            23,
        )
        .expect("default options")
    }

    #[test]
    fn a_request_deadline_under_the_judge_budget_is_flagged() {
        let judge = PipelineConfig::parse(
            "version = 1\n[policy]\nlayer_timeout_ms = 15000\n[[layers]]\nkind = \"rules\"\n\
             [[layers]]\nkind = \"judge\"\n",
            "test",
        )
        .expect("parses");
        let mut cfg = ServerConfig::default();
        assert_eq!(cfg.server.request_timeout_ms, 5000);
        assert!(request_deadline_cuts_judge(&cfg, &judge));
        cfg.server.request_timeout_ms = 20_000;
        assert!(!request_deadline_cuts_judge(&cfg, &judge));
        cfg.server.request_timeout_ms = 1000;
        assert!(
            !request_deadline_cuts_judge(&cfg, &rampart_rules::rules_config()),
            "no judge layer, nothing to say"
        );
    }

    #[test]
    fn cheap_pipelines_scan_small_inputs_inline() {
        let b = built(Duration::from_micros(10));
        assert!(b.inline_ok(1024));
        assert!(b.inline_ok(8 * 1024), "8 KiB at 10 µs/KiB");
        assert!(
            !b.inline_ok(INLINE_MAX_BYTES + 1),
            "never above the size cap"
        );
    }

    #[test]
    fn slow_pipelines_use_the_blocking_pool_until_they_prove_cheap() {
        let b = built(Duration::from_millis(5));
        assert!(
            !b.inline_ok(100),
            "a 5 ms probe (e.g. a transformer) is not inline"
        );
        for _ in 0..64 {
            b.observe(1024, Duration::from_micros(20));
        }
        assert!(
            b.inline_ok(1024),
            "the running average follows the measured cost"
        );
        for _ in 0..64 {
            b.observe(1024, Duration::from_millis(2));
        }
        assert!(!b.inline_ok(1024), "and back when scans get slow");
    }
}
