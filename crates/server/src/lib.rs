//! Rampart as a service: the HTTP check API (`/v1/scan`, `/v1/scan/batch`, `/v1/relate`), the
//! OpenAI-compatible proxy, tool-call governance (`/v1/tools/check`, enforcement of tool calls
//! in proxied answers, `/admin/breakglass`), operations endpoints (`/healthz`, `/readyz`,
//! `/metrics`, `/openapi.json`, `/admin/reload`), API keys with rate limits, optional TLS,
//! and the audit log. See `DESIGN.md` for the request flow, fail modes, reload and audit ordering.
//!
//! The configuration is one strict TOML file:
//!
//! ```
//! use rampart_server::config::ServerConfig;
//!
//! let cfg = ServerConfig::parse(r#"
//! version = 1
//! [server]
//! listen = "127.0.0.1:0"
//! max_body_bytes = 65536
//! [[auth.keys]]
//! id = "ci"
//! sha256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
//! rate_per_s = 10.0
//! burst = 20
//! "#, "server.toml").unwrap();
//! assert_eq!(cfg.auth.keys[0].id, "ci");
//! assert!(ServerConfig::parse("version = 1\nlisten = 1\n", "bad.toml").is_err());
//! ```
//!
//! Serving (in-process; the CLI's `rampart serve` does the same):
//!
//! ```no_run
//! use rampart_server::{Server, ServerOptions, config::ServerConfig};
//! # async fn demo() -> Result<(), rampart_server::ServerError> {
//! let server = Server::bind(ServerConfig::default(), ServerOptions::default()).await?;
//! println!("listening on {}", server.local_addr());
//! server.run(async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```
#![deny(missing_docs)]

mod api;
mod audit;
mod auth;
pub mod config;
mod conn;
mod conv_persist;
mod metrics;
mod ops;
mod output;
mod proxy;
mod rule_examples;
mod state;
mod tls;
mod tool_gate;
mod tools;

pub use proxy::{ProxyConfig, ProxyConfigError, Spotlight};
pub use rule_examples::{RuleExamplesError, check_rule_examples};
pub use state::{
    AppState, Caller, ConversationSetupError, PipelineError, ReloadError, ReloadInfo, ServiceError,
};
pub use tls::TlsError;
pub use tools::{RequestCaller, ToolsConfigError, ToolsSection, ToolsSetupError};

/// Reads and compiles the tool policy of `[tools]` the way start-up does (nothing without
/// the section), for `rampart config check --server`: an unreadable or invalid policy is an
/// error naming the file.
pub fn check_tool_policy(config: &ServerConfig) -> Result<(), ToolsSetupError> {
    tools::ToolGovernance::from_config(config, None).map(|_| ())
}

use config::ServerConfig;
use rampart_core::{PipelineConfig, Registry};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Every route the server serves, as `(method, path)`; the OpenAPI document lists exactly
/// these (checked by the tests).
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("POST", "/admin/reload"),
    ("POST", "/admin/breakglass"),
    ("GET", "/admin/breakglass"),
    ("DELETE", "/admin/breakglass/{id}"),
    ("GET", "/admin/approvals"),
    ("POST", "/admin/approvals/{id}/approve"),
    ("POST", "/admin/approvals/{id}/deny"),
    ("POST", "/v1/scan"),
    ("POST", "/v1/scan/batch"),
    ("POST", "/v1/relate"),
    ("POST", "/v1/tools/check"),
    ("POST", "/v1/scan/output"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
];

/// The OpenAPI 3.1 document (kept in the repository as `crates/server/openapi.json`).
pub const OPENAPI_JSON: &str = include_str!("../openapi.json");

/// What the embedding program supplies: the detector factories and its default pipeline.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Detector factories (`[[layers]] kind = …`).
    pub registry: Arc<Registry>,
    /// The pipeline served when the configuration names none.
    pub default_pipeline: PipelineConfig,
    /// Reload on SIGHUP (unix). The CLI sets it; tests leave it off.
    pub reload_on_sighup: bool,
}

impl Default for ServerOptions {
    /// The product's: every layer kind of this build ([`rampart::registry`]) and the
    /// embedded default configuration ([`rampart::default_config`]), as `rampart serve` has.
    fn default() -> Self {
        Self {
            registry: Arc::new(rampart::registry()),
            // The embedded configuration is tested to parse; the rules alone otherwise.
            default_pipeline: rampart::default_config()
                .unwrap_or_else(|_| rampart_rules::rules_config()),
            reload_on_sighup: false,
        }
    }
}

impl ServerOptions {
    /// The rule layer (with core's kinds and the relational layer's) and the rules-only
    /// configuration: a server without the classifier.
    pub fn rules_only() -> Self {
        let mut registry = rampart_rules::registry();
        registry.register(Box::new(rampart_relational::RelationalFactory));
        Self {
            registry: Arc::new(registry),
            default_pipeline: rampart_rules::rules_config(),
            reload_on_sighup: false,
        }
    }
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] config::ServerConfigError),
    /// The pipeline could not be built.
    #[error("cannot build the pipeline")]
    Pipeline(#[source] PipelineError),
    /// The audit log could not be opened.
    #[error("cannot open the audit log {}", path.display())]
    Audit {
        /// The audit database: the SQLite file, or `postgres ($VAR)`.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: rampart_audit::AuditError,
    },
    /// TLS setup failed.
    #[error("TLS setup failed")]
    Tls(#[from] tls::TlsError),
    /// Tool governance (`[tools]`) could not be set up: the policy file is unreadable or
    /// invalid (the error names it), or the approval key is missing.
    #[error("cannot set up tool governance")]
    Tools(#[source] tools::ToolsSetupError),
    /// The shared state (`[state]`) could not be set up (no Redis URL, a malformed one).
    #[error("cannot set up the shared state")]
    State(#[source] rampart_state::StateConfigError),
    /// The conversation state could not be set up.
    #[error("cannot set up the conversation state")]
    Conversation(#[source] ConversationSetupError),
    /// The conversation database (`conversation.persist_path`) could not be opened or
    /// loaded (the error names the file).
    #[error("cannot load the conversation state")]
    ConversationPersist(#[source] rampart_conversation::PersistError),
    /// The HTTP client for the proxy's upstream could not be built.
    #[error("cannot build the HTTP client for the upstream")]
    HttpClient(#[source] reqwest::Error),
    /// Another socket holds the listening address.
    #[error(
        "cannot listen on {addr}: address already in use (use --listen to pick another address)"
    )]
    AddrInUse {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// Binding the listening address failed for another reason.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The thread that flushes the conversation state could not be started.
    #[error("cannot start the conversation state's flush thread")]
    FlushThread(#[source] std::io::Error),
    /// The bound listener could not report its address.
    #[error("cannot read the listening address")]
    LocalAddr(#[source] std::io::Error),
}

/// A bound, ready server. [`Server::run`] serves until the shutdown future resolves.
pub struct Server {
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<AppState>,
    audit: Option<audit::AuditLog>,
    persistence: Option<conv_persist::Persistence>,
    local_addr: SocketAddr,
    sighup: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Validates the configuration, builds the pipeline, opens the audit log, loads TLS
    /// material, and binds the listener (port 0 picks a free port).
    pub async fn bind(config: ServerConfig, options: ServerOptions) -> Result<Server, ServerError> {
        config.validate(
            &config
                .source
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "<config>".into()),
        )?;
        let addr = config
            .listen_addr()
            .map_err(|e| config::ServerConfigError::Section {
                origin: "<config>".into(),
                error: e.into(),
            })?;
        let tls = match &config.tls {
            Some(t) => Some(tls::acceptor(
                &config.resolve(&t.cert),
                &config.resolve(&t.key),
            )?),
            None => None,
        };
        let shared = rampart_state::open(&config.state).map_err(ServerError::State)?;
        let conversations =
            state::Conversations::from_config(&config, |k| std::env::var(k).ok(), shared.as_ref())
                .map_err(ServerError::Conversation)?
                .map(Arc::new);
        // Loaded before the pipeline is built and anything is served, into the fresh store
        // and ledger.
        let persistence = match &conversations {
            Some(c) => {
                let c = c.clone();
                tokio::task::spawn_blocking(move || conv_persist::Persistence::open(&c))
                    .await
                    .map_err(|e| ServerError::Pipeline(PipelineError::Task(e)))?
                    .map_err(ServerError::ConversationPersist)?
            }
            None => None,
        };
        // With an audit log, the judge's score-mode explanations are deferred: asked after
        // the decision is returned, recorded in its audit row.
        let explanations = config
            .audit
            .is_some()
            .then(|| rampart_judge::DeferredExplanations::new(state::EXPLAIN_QUEUE));
        let built = {
            let cfg = config.clone();
            let opts = options.clone();
            let conv = conversations.clone();
            let explanations = explanations.clone();
            let shared = shared.clone();
            tokio::task::spawn_blocking(move || {
                state::build_pipeline(
                    &cfg,
                    &opts.default_pipeline,
                    &opts.registry,
                    conv.as_deref(),
                    explanations.as_ref(),
                    shared.as_ref(),
                )
            })
            .await
            .map_err(|e| ServerError::Pipeline(PipelineError::Task(e)))?
            .map_err(ServerError::Pipeline)?
        };
        let audit = match &config.audit {
            Some(a) => {
                let mut a = a.clone();
                a.path = config.resolve(&a.path);
                // The SQLite file, or `postgres ($VAR)` (never the URL).
                let path = std::path::PathBuf::from(a.location());
                Some(
                    audit::AuditLog::open(a)
                        .map_err(|source| ServerError::Audit { path, source })?,
                )
            }
            None => {
                tracing::warn!(
                    "audit log disabled: decisions are not recorded (add an [audit] section or set RAMPART_AUDIT_PATH)"
                );
                None
            }
        };
        let writer = audit.as_ref().map(|a| a.writer());
        let tool_governance = tools::ToolGovernance::from_config(&config, shared.clone())
            .map_err(ServerError::Tools)?
            .map(Arc::new);
        let state = AppState::new(
            config,
            built,
            options.registry.clone(),
            options.default_pipeline.clone(),
            writer,
            conversations,
            tool_governance,
        )
        .map_err(ServerError::HttpClient)?
        .with_shared_state(shared)
        .with_deferred_explanations(explanations);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::AddrInUse => ServerError::AddrInUse { addr },
                _ => ServerError::Bind { addr, source },
            })?;
        let local_addr = listener.local_addr().map_err(ServerError::LocalAddr)?;
        Ok(Server {
            listener,
            tls,
            state: Arc::new(state),
            audit,
            persistence,
            local_addr,
            sighup: options.reload_on_sighup,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Whether TLS is on.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The shared state (e.g. to trigger a reload).
    pub fn state(&self) -> Arc<AppState> {
        self.state.clone()
    }

    /// Serves until `shutdown` resolves, then stops accepting, drains in-flight requests
    /// (up to `server.shutdown_grace_ms`), writes the conversation state to
    /// `conversation.persist_path` (a last flush and a checkpoint) and shuts the audit log
    /// down (flushing it).
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let Server {
            listener,
            tls,
            state,
            audit,
            persistence,
            local_addr,
            sighup,
        } = self;
        let flusher = match persistence {
            Some(p) => Some(p.start().map_err(ServerError::FlushThread)?),
            None => None,
        };
        let grace = Duration::from_millis(state.config().server.shutdown_grace_ms);
        if sighup {
            spawn_sighup(state.clone());
        }
        let app = api::router(state.clone());
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let signal = async move {
            shutdown.await;
            let _ = started_tx.send(());
        };
        let serve = conn::serve(listener, tls, app, state.clone(), signal);
        let grace_timer = async move {
            if started_rx.await.is_ok() {
                tokio::time::sleep(grace).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = serve => {}
            () = grace_timer => {
                tracing::warn!(grace_ms = grace.as_millis() as u64, "shutdown grace period over; dropping remaining connections");
            }
        }
        drop(state);
        if let Some(f) = flusher
            && tokio::task::spawn_blocking(move || f.shutdown())
                .await
                .is_err()
        {
            tracing::error!("the last conversation state flush did not complete");
        }
        if let Some(a) = audit {
            match a.shutdown_async().await {
                Ok(stats) => tracing::info!(committed = stats.committed, "audit log closed"),
                Err(e) => tracing::error!(error = %e, "audit log shutdown failed"),
            }
        }
        tracing::info!(%local_addr, "stopped");
        Ok(())
    }
}

#[cfg(unix)]
fn spawn_sighup(state: Arc<AppState>) {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::hangup()) {
        Ok(mut s) => {
            tokio::spawn(async move {
                while s.recv().await.is_some() {
                    tracing::info!("SIGHUP: reloading");
                    let _ = state.reload().await;
                }
            });
        }
        Err(e) => tracing::warn!(error = %e, "cannot install the SIGHUP handler"),
    }
}

#[cfg(not(unix))]
fn spawn_sighup(_state: Arc<AppState>) {}
