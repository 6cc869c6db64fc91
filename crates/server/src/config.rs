//! The server configuration: one strict, versioned TOML file (`deny_unknown_fields`
//! everywhere), environment overrides, and defaults that work with no file at all.
//!
//! ```toml
//! version = 1
//!
//! [server]
//! listen = "127.0.0.1:8080"
//! max_body_bytes = 2097152
//! request_timeout_ms = 5000
//! header_read_timeout_ms = 10000   # a request head must arrive within this
//! idle_timeout_ms = 30000          # a keep-alive connection without a request is closed
//! body_read_timeout_ms = 30000     # a request body must arrive within this (408 past it)
//! max_connections = 512            # more are closed at once
//! max_connections_per_client = 128 # per client address (IPv6: per /64); more are closed at once
//!
//! [pipeline]
//! path = "configs/rules.toml"      # relative to this file; default: the embedded pipeline
//! packs = ["packs/extra.toml"]     # extra rule packs added to every rules layer
//!
//! [auth]
//! max_failures = 10                # failed authentications per client address …
//! failure_window_ms = 60000        # … per window (429 with Retry-After beyond)
//! max_tracked_clients = 10000      # client addresses remembered (bounded memory)
//!
//! [[auth.keys]]
//! id = "ci"
//! sha256 = "…64 hex digits…"       # `rampart serve hash-key < key.txt`
//! rate_per_s = 50.0
//! burst = 100
//! admin = false
//! approver = false                 # may approve other keys' tool calls (/admin/approvals)
//! caller = { role = "oncall", attributes = { mfa = true } }  # pinned for tool policies
//!
//! [audit]
//! path = "/var/lib/rampart/audit.db"
//!
//! [tls]
//! cert = "cert.pem"
//! key = "key.pem"
//!
//! [tools]                          # tool-call governance (absent: off)
//! policy = "policies/coding_agent.toml"  # compiled once at start; invalid: start fails
//! approval_ttl_s = 600
//! breakglass_max_ttl_s = 3600
//! audit_argument_values = false
//! request_caller = "ignore"        # ignore | accept (caller attributes stated by requests)
//! max_pending_approvals_per_key = 1000
//! approval_webhook_url = "https://approvals.example/hook"  # optional: POSTed per CONFIRM
//!
//! [state]                          # state shared by replicas (default: memory, this process)
//! backend = "redis"                # rate limits, failed-login limits, approvals, break-glass
//! [state.redis]
//! url_env = "RAMPART_REDIS_URL"    # redis://[:password@]host:6379/0
//! key_prefix = "rampart:"
//! pool_size = 16
//! connect_timeout_ms = 250
//! command_timeout_ms = 250
//!
//! [conversation]                   # server-side conversation state (absent: stateless)
//! enabled = true                   # default true when the section is present
//! key_env = "RAMPART_CONVERSATION_KEY"  # key material of the hash chain and the ledger
//! persist_path = "conversations.db"     # optional SQLite file (needs the key variable set)
//! flush_seconds = 10                    # how often the state is written to it
//! block_at = 0.8
//! [conversation.store]
//! max_entries = 100000
//! ttl_seconds = 86400
//! [conversation.store.risk]
//! half_life_turns = 3.0
//! [conversation.ledger]
//! policy = "report"                # report | drop | block (forged assistant turns, proxy)
//! bind_to_prefix = true
//! ```
//!
//! Environment overrides (applied after the file, before validation):
//!
//! | variable | overrides |
//! |---|---|
//! | `RAMPART_CONFIG` | the file itself (read by the CLI when `--config` is absent) |
//! | `RAMPART_LISTEN` | `server.listen` |
//! | `RAMPART_MAX_BODY_BYTES` | `server.max_body_bytes` |
//! | `RAMPART_REQUEST_TIMEOUT_MS` | `server.request_timeout_ms` |
//! | `RAMPART_PIPELINE_CONFIG` | `pipeline.path` |
//! | `RAMPART_AUDIT_PATH` | `audit.path` (creates an `[audit]` section with defaults when absent) |
//! | `RAMPART_TLS_CERT`, `RAMPART_TLS_KEY` | `tls.cert`, `tls.key` (both needed) |
//! | `RAMPART_UPSTREAM_URL` | `proxy.upstream_url` |

use rampart_core::Location;
use rampart_core::{FailMode, PipelineConfig};
use rampart_rules::RulesConfig;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The configuration schema version this build reads.
pub const SERVER_CONFIG_VERSION: u32 = 1;

/// The whole server configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Must be [`SERVER_CONFIG_VERSION`].
    pub version: u32,
    /// Listening, limits, timeouts.
    #[serde(default)]
    pub server: ServerSection,
    /// Which pipeline to serve.
    #[serde(default)]
    pub pipeline: PipelineSource,
    /// API keys.
    #[serde(default)]
    pub auth: AuthSection,
    /// The audit log; absent: no audit log (reported by `/readyz`).
    #[serde(default)]
    pub audit: Option<crate::audit::AuditConfig>,
    /// TLS termination; absent: plain HTTP.
    #[serde(default)]
    pub tls: Option<TlsSection>,
    /// The OpenAI-compatible proxy.
    #[serde(default)]
    pub proxy: crate::proxy::ProxyConfig,
    /// Canary tokens.
    #[serde(default)]
    pub canary: rampart_output::canary::CanaryConfig,
    /// Output (model response) scanning.
    #[serde(default)]
    pub output: rampart_output::OutputConfig,
    /// Server-side conversation state; absent: conversations are scanned statelessly.
    #[serde(default)]
    pub conversation: Option<ConversationSection>,
    /// Tool-call governance (policy, approvals, break-glass); absent: off.
    #[serde(default)]
    pub tools: Option<crate::tools::ToolsSection>,
    /// Where state shared by replicas lives (rate limits, failed-login limits, approvals,
    /// break-glass grants): in the process (default) or Redis.
    #[serde(default)]
    pub state: rampart_state::StateConfig,
    /// The file this configuration was read from (relative paths resolve against its
    /// directory; reload re-reads it). Not part of the file format.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            version: SERVER_CONFIG_VERSION,
            server: ServerSection::default(),
            pipeline: PipelineSource::default(),
            auth: AuthSection::default(),
            audit: None,
            tls: None,
            proxy: Default::default(),
            canary: Default::default(),
            output: Default::default(),
            conversation: None,
            tools: None,
            state: rampart_state::StateConfig::default(),
            source: None,
        }
    }
}

/// Listening address, limits and timeouts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSection {
    /// Address to listen on. Default `127.0.0.1:8080`.
    pub listen: String,
    /// Largest accepted request body in bytes (413 beyond). Default 2 MiB.
    pub max_body_bytes: usize,
    /// Deadline for one pipeline run, in milliseconds; past it the fail mode decides.
    /// Default 5000.
    pub request_timeout_ms: u64,
    /// How long graceful shutdown waits for in-flight requests. Default 10000.
    pub shutdown_grace_ms: u64,
    /// Most items in one `/v1/scan/batch` request. Default 64.
    pub max_batch_items: usize,
    /// What a request past its deadline (or a pipeline panic) gets: `closed` → a BLOCK
    /// decision marked degraded, `open` → an ALLOW decision marked degraded. Default: the
    /// pipeline policy's fail mode.
    pub fail_mode: Option<FailMode>,
    /// How long a client has to send a whole request head, in milliseconds: counted from
    /// the connection's accept (after the TLS handshake, which has the same bound) for the
    /// first request, and from the first byte of each later one. Past it the connection is
    /// closed. Default 10000.
    pub header_read_timeout_ms: u64,
    /// How long a keep-alive connection may wait for the first byte of its next request, in
    /// milliseconds; past it the connection is closed. Default 30000.
    pub idle_timeout_ms: u64,
    /// How long a client has to send a whole request body, in milliseconds, counted from the
    /// end of its head; past it the request is answered 408 and the connection closed.
    /// Default 30000.
    pub body_read_timeout_ms: u64,
    /// Most connections open at once (TLS handshakes included); a connection beyond it is
    /// closed as soon as it is accepted. Keep it under the process's file-descriptor limit.
    /// Fixed at start (a reload keeps it). Default 512.
    pub max_connections: usize,
    /// Most connections open at once from one client address (an IPv4 address, or an IPv6
    /// /64); a connection beyond it is closed as soon as it is accepted. Without it one
    /// client holding partial requests could take every slot of `max_connections`. Behind
    /// a reverse proxy every connection has the proxy's address: raise it there. Fixed at
    /// start (a reload keeps it). Default 128.
    pub max_connections_per_client: usize,
}

impl Default for ServerSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            max_body_bytes: 2 * 1024 * 1024,
            request_timeout_ms: 5000,
            shutdown_grace_ms: 10_000,
            max_batch_items: 64,
            fail_mode: None,
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 30_000,
            body_read_timeout_ms: 30_000,
            max_connections: 512,
            max_connections_per_client: 128,
        }
    }
}

/// Which pipeline the server runs. Without `path` or `inline`: the binary's embedded default.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineSource {
    /// A pipeline configuration file in the usual format (see `configs/*.toml`), relative to
    /// the server configuration file.
    pub path: Option<PathBuf>,
    /// A pipeline configuration inline (`[pipeline.inline]`, same format). Exclusive with
    /// `path`.
    pub inline: Option<toml::Table>,
    /// Extra rule pack files added to every `rules` layer (relative to the server
    /// configuration file). Re-read on reload.
    pub packs: Vec<PathBuf>,
}

/// API keys. With no keys, authentication is off, which is only allowed on a loopback
/// address.
///
/// Failed authentications (a key that matches none) are limited per client address (IPv6
/// addresses per /64): each address may fail `max_failures` times, a failure is forgiven
/// every `failure_window_ms / max_failures`, and an address out of allowance gets 429 with
/// `Retry-After` on every request that needs a key, valid or not, until one is forgiven.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthSection {
    /// The keys.
    pub keys: Vec<ApiKeyConfig>,
    /// Failed authentications one client address may make in a row. Default 10.
    pub max_failures: u32,
    /// The window over which `max_failures` are forgiven, in milliseconds. Default 60000.
    pub failure_window_ms: u64,
    /// Most client addresses whose failures are remembered; past it, the addresses whose
    /// allowance is whole are forgotten first, then the least recent. Default 10000.
    pub max_tracked_clients: usize,
    /// Who may read `/metrics` and `/openapi.json` without a key when keys are configured
    /// (a valid key always may): `loopback` (the default: clients on the same host, such as
    /// a local Prometheus agent), `always`, or `never`.
    pub open_operations: OpenOperations,
}

/// Who may read the operations pages (`/metrics`, `/openapi.json`) without an API key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpenOperations {
    /// Clients connecting from a loopback address.
    #[default]
    Loopback,
    /// Anyone.
    Always,
    /// No one: a key is required.
    Never,
}

impl Default for AuthSection {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            max_failures: 10,
            failure_window_ms: 60_000,
            max_tracked_clients: 10_000,
            open_operations: OpenOperations::default(),
        }
    }
}

/// One API key, stored as the SHA-256 of the key (never the key).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Identifier recorded in logs, metrics and the audit log.
    pub id: String,
    /// Lower-case hex SHA-256 of the key.
    pub sha256: String,
    /// Sustained requests per second (token bucket refill). Default 100.
    #[serde(default = "default_rate")]
    pub rate_per_s: f64,
    /// Bucket size (burst). Default 200.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// May call `/admin/*`. Default false.
    #[serde(default)]
    pub admin: bool,
    /// May list, approve and deny pending tool-call approvals (`/admin/approvals`), other
    /// keys' only. Admin keys may too. Default false.
    #[serde(default)]
    pub approver: bool,
    /// The caller's role and attributes for tool policies' context conditions, pinned on
    /// the key (`caller = { role = "oncall", attributes = { mfa = true } }`): they override
    /// what a request states (see `[tools] request_caller`).
    #[serde(default)]
    pub caller: Option<rampart_tools::CallerInfo>,
}

fn default_rate() -> f64 {
    100.0
}

fn default_burst() -> u32 {
    200
}

/// TLS termination (rustls, ring).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Default environment variable holding the conversation state's key material.
pub const DEFAULT_CONVERSATION_KEY_ENV: &str = "RAMPART_CONVERSATION_KEY";

/// Default `conversation.flush_seconds`.
pub const DEFAULT_CONVERSATION_FLUSH_SECONDS: u64 = 10;

/// `[conversation]`: server-side conversation state for `/v1/scan` conversations and the
/// proxy. Besides `enabled`, `key_env`, `persist_path` and `flush_seconds`, every field of
/// [`rampart_conversation::ConversationOptions`] (`block_at`, `max_rephrasings`,
/// `window_turns`, `max_replay`, `max_turns`, `context_messages`, `context_bytes`,
/// `[conversation.store]` with `[conversation.store.risk]`, `[conversation.ledger]`), with
/// the same defaults; unknown keys are refused. Fixed at start (a reload keeps it), since
/// the state it describes lives as long as the process.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSection {
    /// Keep state. Default true (the section's presence turns it on); false is the same as
    /// no section.
    pub enabled: bool,
    /// The environment variable holding the key material of the hash chain and the
    /// assistant ledger. Default `RAMPART_CONVERSATION_KEY`. Unset or empty: a random key
    /// per process (logged), so state and verified answers do not survive a restart.
    pub key_env: String,
    /// SQLite file the store and the ledger are loaded from at start and written to every
    /// `flush_seconds` and on shutdown (keys, numbers, fingerprints and hashes, never
    /// text). Relative: against the configuration file's directory. `None`: in memory only.
    /// Requires the key variable to be set (rows written under a random key never match).
    pub persist_path: Option<PathBuf>,
    /// Seconds between two flushes to `persist_path` (a crash loses at most this much).
    /// Default 10, at least 1.
    pub flush_seconds: u64,
    /// Scanning, state and ledger options.
    pub options: rampart_conversation::ConversationOptions,
}

impl Default for ConversationSection {
    fn default() -> Self {
        Self {
            enabled: true,
            key_env: DEFAULT_CONVERSATION_KEY_ENV.into(),
            persist_path: None,
            flush_seconds: DEFAULT_CONVERSATION_FLUSH_SECONDS,
            options: Default::default(),
        }
    }
}

// `ConversationOptions` refuses unknown keys itself; serde's `flatten` cannot be combined
// with `deny_unknown_fields`, so the section's own keys are taken out of the table first.
impl<'de> Deserialize<'de> for ConversationSection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut t = toml::Table::deserialize(d)?;
        let enabled = match t.remove("enabled") {
            None => true,
            Some(toml::Value::Boolean(b)) => b,
            Some(_) => return Err(D::Error::custom("conversation.enabled must be a boolean")),
        };
        let key_env = match t.remove("key_env") {
            None => DEFAULT_CONVERSATION_KEY_ENV.to_string(),
            Some(toml::Value::String(s)) => s,
            Some(_) => return Err(D::Error::custom("conversation.key_env must be a string")),
        };
        let persist_path = match t.remove("persist_path") {
            None => None,
            Some(toml::Value::String(s)) => Some(PathBuf::from(s)),
            Some(_) => {
                return Err(D::Error::custom(
                    "conversation.persist_path must be a string (a file path)",
                ));
            }
        };
        let flush_seconds = match t.remove("flush_seconds") {
            None => DEFAULT_CONVERSATION_FLUSH_SECONDS,
            Some(toml::Value::Integer(n)) => u64::try_from(n)
                .map_err(|_| D::Error::custom("conversation.flush_seconds must be at least 1"))?,
            Some(_) => {
                return Err(D::Error::custom(
                    "conversation.flush_seconds must be an integer (seconds)",
                ));
            }
        };
        let options = t.try_into().map_err(|e: toml::de::Error| {
            D::Error::custom(format!("[conversation]: {}", e.message().trim()))
        })?;
        Ok(Self {
            enabled,
            key_env,
            persist_path,
            flush_seconds,
            options,
        })
    }
}

impl ConversationSection {
    fn validate(&self) -> Result<(), ConversationConfigError> {
        if self.key_env.is_empty() {
            return Err(ConversationConfigError::KeyEnv);
        }
        if self
            .persist_path
            .as_ref()
            .is_some_and(|p| p.as_os_str().is_empty())
        {
            return Err(ConversationConfigError::PersistPath);
        }
        if self.flush_seconds == 0 {
            return Err(ConversationConfigError::FlushSeconds);
        }
        Ok(self.options.validate()?)
    }
}

/// A `[conversation]` section that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversationConfigError {
    /// `key_env` is empty.
    #[error("conversation.key_env must not be empty")]
    KeyEnv,
    /// `persist_path` is empty.
    #[error(
        "conversation.persist_path must not be empty (leave it out to keep the state in \
         memory only)"
    )]
    PersistPath,
    /// `flush_seconds` is zero.
    #[error("conversation.flush_seconds must be at least 1")]
    FlushSeconds,
    /// A scanning, state or ledger option is invalid.
    #[error(transparent)]
    Options(#[from] rampart_conversation::OptionsError),
}

/// `server.listen` is not an `IP:port` address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("server.listen {listen:?} is not an IP:port address")]
pub struct ListenAddrError {
    /// The value given.
    pub listen: String,
    /// Why it does not parse.
    #[source]
    pub source: std::net::AddrParseError,
}

/// A section of the configuration that fails its semantic checks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SectionError {
    /// `server.listen`.
    #[error(transparent)]
    Listen(#[from] ListenAddrError),
    /// `[proxy]`.
    #[error(transparent)]
    Proxy(#[from] crate::proxy::ProxyConfigError),
    /// `[canary]`.
    #[error(transparent)]
    Canary(#[from] rampart_output::canary::CanaryConfigError),
    /// `[output]`.
    #[error(transparent)]
    Output(#[from] rampart_output::OutputConfigError),
    /// `[conversation]`.
    #[error(transparent)]
    Conversation(#[from] ConversationConfigError),
    /// `[tools]`.
    #[error(transparent)]
    Tools(#[from] crate::tools::ToolsConfigError),
}

/// A server configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerConfigError {
    /// The file could not be read.
    #[error("{origin}: cannot read configuration: {message}")]
    Io {
        /// The path.
        origin: String,
        /// The OS error.
        message: String,
    },
    /// Syntax error, unknown key, wrong type (with file:line:col).
    #[error("{location}: {message}")]
    Syntax {
        /// Where.
        location: Location,
        /// What is wrong.
        message: String,
    },
    /// Semantically invalid.
    #[error("{origin}: {message}")]
    Invalid {
        /// The file (or `<environment>`).
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// A section fails its own checks. (The section's error is part of the message rather
    /// than a source, so that the error reads the same printed alone or with its chain.)
    #[error("{origin}: {error}")]
    Section {
        /// The file (or `<environment>`).
        origin: String,
        /// What is wrong.
        error: SectionError,
    },
    /// The pipeline configuration it names (a file or `[pipeline.inline]`) is invalid.
    #[error(transparent)]
    Pipeline(#[from] rampart_core::ConfigError),
    /// `[pipeline.inline]` could not be re-encoded for the pipeline parser.
    #[error("[pipeline.inline]: {0}")]
    Inline(#[source] toml::ser::Error),
    /// `[pipeline].packs` could not be added to the pipeline's rules layers.
    #[error("[pipeline].packs: {0}")]
    Packs(#[source] rampart_core::BuildError),
}

impl ServerConfig {
    /// Parses and validates a configuration (no environment overrides).
    pub fn parse(src: &str, origin: &str) -> Result<ServerConfig, ServerConfigError> {
        let cfg: ServerConfig = toml::from_str(src).map_err(|e| ServerConfigError::Syntax {
            location: Location::from_span(origin, src, e.span().map(|s| s.start).unwrap_or(0)),
            message: e.message().trim().to_string(),
        })?;
        cfg.validate(origin)?;
        Ok(cfg)
    }

    /// Reads, parses and validates a file (no environment overrides). Relative paths in it
    /// resolve against its directory.
    pub fn from_path(path: &Path) -> Result<ServerConfig, ServerConfigError> {
        let origin = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|e| ServerConfigError::Io {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        let mut cfg = ServerConfig::parse(&src, &origin)?;
        cfg.source = Some(path.to_path_buf());
        Ok(cfg)
    }

    /// Loads the configuration the way `rampart serve` does: `path`, else `$RAMPART_CONFIG`,
    /// else the defaults; then the environment overrides; then validation.
    pub fn load(path: Option<&Path>) -> Result<ServerConfig, ServerConfigError> {
        ServerConfig::load_with(path, |k| std::env::var(k).ok())
    }

    /// [`ServerConfig::load`] with an explicit environment (`get` reads a variable).
    pub fn load_with(
        path: Option<&Path>,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<ServerConfig, ServerConfigError> {
        let env_path = get("RAMPART_CONFIG").map(PathBuf::from);
        let path = path.or(env_path.as_deref());
        let mut cfg = match path {
            Some(p) => ServerConfig::from_path(p)?,
            None => ServerConfig::default(),
        };
        cfg.apply_env(get)?;
        Ok(cfg)
    }

    /// Applies the environment overrides (`get` reads a variable) and re-validates.
    pub fn apply_env(
        &mut self,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ServerConfigError> {
        let invalid = |message: String| ServerConfigError::Invalid {
            origin: "<environment>".into(),
            message,
        };
        if let Some(v) = get("RAMPART_LISTEN") {
            self.server.listen = v;
        }
        if let Some(v) = get("RAMPART_MAX_BODY_BYTES") {
            self.server.max_body_bytes = v
                .parse()
                .map_err(|_| invalid(format!("RAMPART_MAX_BODY_BYTES={v:?} is not a number")))?;
        }
        if let Some(v) = get("RAMPART_REQUEST_TIMEOUT_MS") {
            self.server.request_timeout_ms = v.parse().map_err(|_| {
                invalid(format!("RAMPART_REQUEST_TIMEOUT_MS={v:?} is not a number"))
            })?;
        }
        if let Some(v) = get("RAMPART_PIPELINE_CONFIG") {
            self.pipeline.path = Some(PathBuf::from(v));
            self.pipeline.inline = None;
        }
        if let Some(v) = get("RAMPART_AUDIT_PATH") {
            let mut audit = self.audit.take().unwrap_or_default();
            audit.path = PathBuf::from(v);
            self.audit = Some(audit);
        }
        if let Some(v) = get("RAMPART_UPSTREAM_URL") {
            crate::proxy::set_upstream_url(&mut self.proxy, v);
        }
        match (get("RAMPART_TLS_CERT"), get("RAMPART_TLS_KEY")) {
            (Some(cert), Some(key)) => {
                self.tls = Some(TlsSection {
                    cert: cert.into(),
                    key: key.into(),
                })
            }
            (None, None) => {}
            _ => {
                return Err(invalid(
                    "RAMPART_TLS_CERT and RAMPART_TLS_KEY must be set together".into(),
                ));
            }
        }
        self.validate("<environment>")
    }

    /// Semantic checks that do not touch the filesystem.
    pub fn validate(&self, origin: &str) -> Result<(), ServerConfigError> {
        let invalid = |message: String| ServerConfigError::Invalid {
            origin: origin.to_string(),
            message,
        };
        if self.version != SERVER_CONFIG_VERSION {
            return Err(invalid(format!(
                "unsupported version {} (this build reads {SERVER_CONFIG_VERSION})",
                self.version
            )));
        }
        let section = |e: SectionError| ServerConfigError::Section {
            origin: origin.to_string(),
            error: e,
        };
        let addr = self.listen_addr().map_err(|e| section(e.into()))?;
        self.check_limits(&invalid)?;
        self.proxy.validate().map_err(|e| section(e.into()))?;
        self.canary.validate().map_err(|e| section(e.into()))?;
        self.output.validate().map_err(|e| section(e.into()))?;
        if let Some(c) = &self.conversation {
            c.validate().map_err(|e| section(e.into()))?;
        }
        if let Some(t) = &self.tools {
            t.validate().map_err(|e| section(e.into()))?;
        }
        self.check_state(&invalid)?;
        self.check_keys(addr, &invalid)
    }

    /// `[state]`: Redis settings in range; with Redis, the approval tokens' key must be
    /// shared (`[tools] approval_key_env`), and conversation state lives in Redis, so its
    /// SQLite persistence (`persist_path`) is refused. (The conversation key itself must be
    /// set in the environment `key_env` names: checked at start.)
    fn check_state(
        &self,
        invalid: &impl Fn(String) -> ServerConfigError,
    ) -> Result<(), ServerConfigError> {
        if self.state.backend != rampart_state::Backend::Redis {
            if self.state.redis.is_some() {
                return Err(invalid(
                    "[state.redis] is set but [state] backend is not \"redis\"".into(),
                ));
            }
            if self
                .tools
                .as_ref()
                .is_some_and(|t| t.approval_key_env.is_some())
            {
                return Err(invalid(
                    "[tools] approval_key_env needs [state] backend = \"redis\": with tokens \
                     in one process, a configured key would let a token be replayed after a \
                     restart"
                        .into(),
                ));
            }
            return Ok(());
        }
        if let Some(r) = &self.state.redis {
            r.validate().map_err(|e| invalid(e.to_string()))?;
        }
        if self
            .tools
            .as_ref()
            .is_some_and(|t| t.approval_key_env.is_none())
        {
            return Err(invalid(
                "[state] backend = \"redis\" with [tools] needs [tools] approval_key_env: \
                 the variable holding the approval tokens' key (64 hex digits), the same on \
                 every replica"
                    .into(),
            ));
        }
        if self
            .conversation
            .as_ref()
            .is_some_and(|c| c.enabled && c.persist_path.is_some())
        {
            return Err(invalid(
                "[conversation] persist_path cannot be used with [state] backend = \"redis\": \
                 conversation state and the answer ledger are kept in Redis then, shared by \
                 every replica (remove persist_path, and give Redis persistence instead)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// `[server]` and `[auth]` numbers, and the pipeline's source.
    fn check_limits(
        &self,
        invalid: &impl Fn(String) -> ServerConfigError,
    ) -> Result<(), ServerConfigError> {
        if self.server.max_body_bytes == 0 {
            return Err(invalid(
                "server.max_body_bytes must be greater than zero".into(),
            ));
        }
        if self.server.request_timeout_ms == 0 {
            return Err(invalid(
                "server.request_timeout_ms must be greater than zero".into(),
            ));
        }
        if self.server.max_batch_items == 0 {
            return Err(invalid(
                "server.max_batch_items must be greater than zero".into(),
            ));
        }
        for (name, v) in [
            (
                "server.header_read_timeout_ms",
                self.server.header_read_timeout_ms,
            ),
            ("server.idle_timeout_ms", self.server.idle_timeout_ms),
            (
                "server.body_read_timeout_ms",
                self.server.body_read_timeout_ms,
            ),
            ("server.max_connections", self.server.max_connections as u64),
            (
                "server.max_connections_per_client",
                self.server.max_connections_per_client as u64,
            ),
            ("auth.max_failures", u64::from(self.auth.max_failures)),
            ("auth.failure_window_ms", self.auth.failure_window_ms),
            (
                "auth.max_tracked_clients",
                self.auth.max_tracked_clients as u64,
            ),
        ] {
            if v == 0 {
                return Err(invalid(format!("{name} must be greater than zero")));
            }
        }
        if self.server.max_connections > tokio::sync::Semaphore::MAX_PERMITS {
            return Err(invalid(format!(
                "server.max_connections must be at most {}",
                tokio::sync::Semaphore::MAX_PERMITS
            )));
        }
        if self.pipeline.path.is_some() && self.pipeline.inline.is_some() {
            return Err(invalid(
                "pipeline.path and pipeline.inline are exclusive".into(),
            ));
        }
        Ok(())
    }

    /// `[[auth.keys]]`, and authentication when the address is not loopback.
    fn check_keys(
        &self,
        addr: SocketAddr,
        invalid: &impl Fn(String) -> ServerConfigError,
    ) -> Result<(), ServerConfigError> {
        let mut ids = std::collections::BTreeSet::new();
        for k in &self.auth.keys {
            if k.id.is_empty() {
                return Err(invalid("auth.keys: id must not be empty".into()));
            }
            if !ids.insert(k.id.as_str()) {
                return Err(invalid(format!("auth.keys: duplicate id {:?}", k.id)));
            }
            if parse_sha256_hex(&k.sha256).is_none() {
                return Err(invalid(format!(
                    "auth.keys {:?}: sha256 must be 64 hex digits (use `rampart serve hash-key`)",
                    k.id
                )));
            }
            if !(k.rate_per_s.is_finite() && k.rate_per_s > 0.0) || k.burst == 0 {
                return Err(invalid(format!(
                    "auth.keys {:?}: rate_per_s and burst must be greater than zero",
                    k.id
                )));
            }
        }
        if self.auth.keys.is_empty() && !addr.ip().is_loopback() {
            return Err(invalid(format!(
                "refusing to listen on {addr} without authentication: add [[auth.keys]] \
                 (authentication may be off only on a loopback address)"
            )));
        }
        Ok(())
    }

    /// The listening address, parsed.
    pub fn listen_addr(&self) -> Result<SocketAddr, ListenAddrError> {
        self.server
            .listen
            .parse()
            .map_err(|source| ListenAddrError {
                listen: self.server.listen.clone(),
                source,
            })
    }

    /// Resolves a path from the file against the file's directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        match (&self.source, p.is_relative()) {
            (Some(src), true) => src
                .parent()
                .map(|d| d.join(p))
                .unwrap_or_else(|| p.to_path_buf()),
            _ => p.to_path_buf(),
        }
    }

    /// The pipeline configuration this server configuration describes (reads the pipeline
    /// file when there is one); `default` is the binary's embedded pipeline.
    pub fn pipeline_config(
        &self,
        default: &PipelineConfig,
    ) -> Result<PipelineConfig, ServerConfigError> {
        let mut pc = if let Some(p) = &self.pipeline.path {
            rampart::load_config(&self.resolve(p))?
        } else if let Some(t) = &self.pipeline.inline {
            let src = toml::to_string(t).map_err(ServerConfigError::Inline)?;
            rampart::parse_config(&src, "[pipeline.inline]")?
        } else {
            default.clone()
        };
        let extra: Vec<PathBuf> = self
            .pipeline
            .packs
            .iter()
            .map(|p| self.resolve(p))
            .collect();
        pc.add_rule_packs(&extra)
            .map_err(ServerConfigError::Packs)?;
        Ok(pc)
    }
}

/// Decodes 64 hex digits.
pub(crate) fn parse_sha256_hex(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks_exact(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

/// Lower-case hex SHA-256 of an API key, the form `auth.keys[].sha256` takes.
pub fn hash_api_key(key: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(key.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        let c = ServerConfig::parse("version = 1\n", "t.toml").expect("parses");
        assert_eq!(c.server.listen, "127.0.0.1:8080");
        assert!(c.audit.is_none());
    }

    #[test]
    fn unknown_key_has_location() {
        let e = ServerConfig::parse(
            "version = 1\n[server]\nlisten = \"127.0.0.1:1\"\nbogus = 2\n",
            "t.toml",
        )
        .expect_err("unknown key");
        let s = e.to_string();
        assert!(s.starts_with("t.toml:4:"), "{s}");
        assert!(s.contains("bogus"), "{s}");
    }

    #[test]
    fn refuses_open_non_loopback() {
        let e = ServerConfig::parse("version = 1\n[server]\nlisten = \"0.0.0.0:8080\"\n", "t")
            .expect_err("no keys on 0.0.0.0");
        assert!(e.to_string().contains("refusing"), "{e}");
    }

    #[test]
    fn env_overrides() {
        let mut c = ServerConfig::default();
        c.apply_env(|k| match k {
            "RAMPART_LISTEN" => Some("127.0.0.1:9999".into()),
            "RAMPART_AUDIT_PATH" => Some("/tmp/x.db".into()),
            _ => None,
        })
        .expect("valid");
        assert_eq!(c.server.listen, "127.0.0.1:9999");
        assert_eq!(
            c.audit.as_ref().map(|a| a.path.clone()),
            Some(PathBuf::from("/tmp/x.db"))
        );
    }

    #[test]
    fn conversation_section_is_strict_and_defaults_on() {
        let c = ServerConfig::parse(
            "version = 1\n[conversation]\nblock_at = 0.7\n[conversation.ledger]\npolicy = \"drop\"\n\
             [conversation.store.risk]\nhalf_life_turns = 2.0\n",
            "t.toml",
        )
        .expect("parses");
        let conv = c.conversation.expect("section");
        assert!(conv.enabled);
        assert_eq!(conv.key_env, DEFAULT_CONVERSATION_KEY_ENV);
        assert_eq!(conv.options.block_at, 0.7);
        assert_eq!(
            conv.options.ledger.policy,
            rampart_conversation::HistoryPolicy::Drop
        );
        assert_eq!(conv.options.store.risk.half_life_turns, 2.0);
        for bad in [
            "[conversation]\nbogus = 1\n",
            "[conversation.store]\nbogus = 1\n",
            "[conversation]\nenabled = \"yes\"\n",
            "[conversation]\nblock_at = 1.5\n",
            "[conversation]\nkey_env = \"\"\n",
            "[conversation.ledger]\npolicy = \"maybe\"\n",
        ] {
            let e = ServerConfig::parse(&format!("version = 1\n{bad}"), "t.toml");
            assert!(e.is_err(), "{bad}");
        }
        let e = ServerConfig::parse("version = 1\n[conversation.store]\nbogus = 1\n", "t.toml")
            .expect_err("unknown key");
        let s = e.to_string();
        assert!(s.starts_with("t.toml:") && s.contains("bogus"), "{s}");
        let off = ServerConfig::parse("version = 1\n[conversation]\nenabled = false\n", "t")
            .expect("parses");
        assert!(!off.conversation.expect("section").enabled);
    }

    #[test]
    fn conversation_persistence_options_are_strict() {
        let c = ServerConfig::parse(
            "version = 1\n[conversation]\npersist_path = \"state/conv.db\"\nflush_seconds = 3\n",
            "t.toml",
        )
        .expect("parses");
        let conv = c.conversation.expect("section");
        assert_eq!(conv.persist_path, Some(PathBuf::from("state/conv.db")));
        assert_eq!(conv.flush_seconds, 3);
        let d = ServerConfig::parse("version = 1\n[conversation]\n", "t.toml").expect("parses");
        let d = d.conversation.expect("section");
        assert_eq!(d.persist_path, None, "in memory only by default");
        assert_eq!(d.flush_seconds, DEFAULT_CONVERSATION_FLUSH_SECONDS);
        for (bad, says) in [
            ("persist_path = 3", "persist_path must be a string"),
            ("persist_path = \"\"", "persist_path must not be empty"),
            ("flush_seconds = 0", "flush_seconds must be at least 1"),
            ("flush_seconds = -5", "flush_seconds must be at least 1"),
            ("flush_seconds = 1.5", "flush_seconds must be an integer"),
            ("flush_seconds = \"10\"", "flush_seconds must be an integer"),
            ("persist_paht = \"x.db\"", "persist_paht"),
        ] {
            let e = ServerConfig::parse(&format!("version = 1\n[conversation]\n{bad}\n"), "t.toml")
                .expect_err(bad);
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn tools_section_is_strict_with_defaults() {
        let c = ServerConfig::parse(
            "version = 1\n[tools]\npolicy = \"p.toml\"\n\
             [[auth.keys]]\nid = \"a\"\nsha256 = \"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"\n\
             caller = { role = \"ci\", attributes = { mfa = true } }\n",
            "t.toml",
        )
        .expect("parses");
        let t = c.tools.expect("section");
        assert_eq!(t.policy, PathBuf::from("p.toml"));
        assert_eq!(t.approval_ttl_s, 600);
        assert_eq!(t.breakglass_max_ttl_s, 3600);
        assert_eq!(t.request_caller, crate::RequestCaller::Ignore);
        assert_eq!(t.max_pending_approvals_per_key, 1000);
        assert_eq!(t.approval_webhook_url, None);
        assert!(t.enforce_proxy);
        let caller = c.auth.keys[0].caller.clone().expect("pinned caller");
        assert_eq!(caller.role.as_deref(), Some("ci"));
        assert_eq!(caller.attributes["mfa"], serde_json::json!(true));
        for (bad, says) in [
            ("[tools]\n", "policy"),
            ("[tools]\npolicy = \"p\"\npolcy = 1\n", "polcy"),
            (
                "[tools]\npolicy = \"p\"\napproval_ttl_s = 0\n",
                "approval_ttl_s",
            ),
            (
                "[tools]\npolicy = \"p\"\nrequest_caller = \"maybe\"\n",
                "maybe",
            ),
            ("[tools]\npolicy = \"\"\n", "tools.policy"),
        ] {
            let e = ServerConfig::parse(&format!("version = 1\n{bad}"), "t.toml").expect_err(bad);
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn hash_key_is_sha256_hex() {
        assert_eq!(
            hash_api_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(parse_sha256_hex(&hash_api_key("abc")).is_some());
    }
}
