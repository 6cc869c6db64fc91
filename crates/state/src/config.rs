//! The `[state]` section of the server configuration.

use serde::Deserialize;

/// Where the service's shared state lives.
///
/// ```toml
/// [state]
/// backend = "redis"                  # memory (default) | redis
/// [state.redis]
/// url_env = "RAMPART_REDIS_URL"      # the variable holding redis://[:password@]host:port/db
/// key_prefix = "rampart:"            # every key starts with it (one Redis, several services)
/// pool_size = 16                     # connections per replica
/// connect_timeout_ms = 250
/// command_timeout_ms = 250
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// The backend.
    #[serde(default)]
    pub backend: Backend,
    /// Redis settings (used when `backend = "redis"`).
    #[serde(default)]
    pub redis: Option<RedisConfig>,
}

/// A state backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// In the process: nothing to install; state is lost on restart and not shared.
    #[default]
    Memory,
    /// Redis: shared by every replica pointed at it.
    Redis,
}

impl Backend {
    /// The backend's name as configured.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Redis => "redis",
        }
    }
}

/// How to reach Redis.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    /// The URL itself (`redis://host:port/db`); prefer `url_env` for URLs with a password.
    #[serde(default)]
    pub url: Option<String>,
    /// The environment variable holding the URL (used when `url` is absent).
    #[serde(default = "default_url_env")]
    pub url_env: String,
    /// Prefix of every key.
    #[serde(default = "default_prefix")]
    pub key_prefix: String,
    /// Pooled connections per replica.
    #[serde(default = "default_pool")]
    pub pool_size: u32,
    /// Time to get a connection (new or from the pool), milliseconds.
    #[serde(default = "default_timeout")]
    pub connect_timeout_ms: u64,
    /// Time for one command's reply, milliseconds.
    #[serde(default = "default_timeout")]
    pub command_timeout_ms: u64,
}

fn default_url_env() -> String {
    "RAMPART_REDIS_URL".into()
}
fn default_prefix() -> String {
    "rampart:".into()
}
fn default_pool() -> u32 {
    16
}
fn default_timeout() -> u64 {
    250
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            url: None,
            url_env: default_url_env(),
            key_prefix: default_prefix(),
            pool_size: default_pool(),
            connect_timeout_ms: default_timeout(),
            command_timeout_ms: default_timeout(),
        }
    }
}

/// Why a state configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateConfigError {
    /// Neither `url` nor the variable `url_env` names gives a URL.
    #[error("[state.redis] has no url and the environment variable {0} is not set")]
    NoUrl(String),
    /// A setting is out of range.
    #[error("[state.redis] {0}")]
    Invalid(&'static str),
    /// The URL does not parse.
    #[error("[state.redis] the URL is not a Redis URL")]
    Url(#[source] redis::RedisError),
    /// The pool could not be built.
    #[error("cannot build the Redis connection pool")]
    Pool(#[source] r2d2::Error),
}

impl RedisConfig {
    /// The URL: `url`, else the variable `url_env` names.
    pub fn resolve_url(&self) -> Result<String, StateConfigError> {
        if let Some(u) = &self.url {
            return Ok(u.clone());
        }
        std::env::var(&self.url_env)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| StateConfigError::NoUrl(self.url_env.clone()))
    }

    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), StateConfigError> {
        if self.pool_size == 0 || self.pool_size > 1024 {
            return Err(StateConfigError::Invalid("pool_size must be 1..=1024"));
        }
        if self.connect_timeout_ms == 0 || self.command_timeout_ms == 0 {
            return Err(StateConfigError::Invalid("timeouts must be at least 1 ms"));
        }
        if self.key_prefix.len() > 64 {
            return Err(StateConfigError::Invalid(
                "key_prefix is longer than 64 bytes",
            ));
        }
        Ok(())
    }
}
