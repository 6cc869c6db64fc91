//! The blocking client: request building, the retry loop, response classification.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::budget::{Ledger, utc_day};
use crate::config::{AuthStyle, LlmConfig, LlmConfigError, MaxTokensField, Protocol, Structured};
use crate::extract::{ExtractError, extract_object, looks_like_refusal};
use crate::outcome::{Completion, Outcome, Usage};

/// Sent as `anthropic-version` unless the configuration's `headers` set it.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Longest server error message kept in an [`Outcome::HttpError`] detail, in characters.
const ERROR_MESSAGE_CHARS: usize = 200;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user.
    User,
    /// The model (for few-shot examples).
    Assistant,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One conversation message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Text.
    pub content: String,
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: content.into(),
        }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// The detail of the [`Outcome::Unparseable`] of a score request whose reply carries no
/// log-probabilities: the server does not return them (callers fall back to another mode).
pub const NO_LOGPROBS: &str =
    "the reply has no log-probabilities (the server does not return them)";

/// One call's input.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// System prompt (omitted from the request when empty).
    pub system: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// JSON Schema of the wanted object. When set, the reply must contain a JSON object that
    /// passes the check in [`crate::extract`], and on `openai` with `structured = json_schema`
    /// it is sent as `response_format` with `strict: true` (OpenAI's strict mode wants every
    /// property in `required` and `additionalProperties: false`).
    pub schema: Option<Value>,
    /// Output-token limit for this call (the configuration's `max_tokens` when `None`).
    pub max_tokens: Option<u32>,
    /// Deadline of this call in milliseconds (the configuration's `timeout_ms` when `None`),
    /// e.g. what is left of a layer's time budget.
    pub timeout_ms: Option<u64>,
    /// Score mode: ask for the log-probabilities of this many most likely first tokens
    /// (OpenAI's `logprobs` / `top_logprobs`, 1 to 20). The reply is then read as its first
    /// token's candidates ([`Outcome::Ok`] with `value = {"top_logprobs": [{"token",
    /// "logprob"}, ...]}`), whether or not the output stopped at `max_tokens`; a reply
    /// without them is [`Outcome::Unparseable`] (the server does not return them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u8>,
}

/// A counting semaphore: most `limit` holders at once.
#[derive(Debug)]
struct Slots {
    limit: usize,
    used: Mutex<usize>,
    freed: Condvar,
}

struct SlotGuard<'a>(&'a Slots);

impl Slots {
    fn lock(&self) -> MutexGuard<'_, usize> {
        self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Take a slot, waiting until `deadline` at most.
    fn acquire(&self, deadline: Instant) -> Option<SlotGuard<'_>> {
        let mut used = self.lock();
        while *used >= self.limit {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            used = self
                .freed
                .wait_timeout(used, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *used += 1;
        Some(SlotGuard(self))
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let mut used = self.0.lock();
        *used = used.saturating_sub(1);
        self.0.freed.notify_one();
    }
}

struct Inner {
    config: LlmConfig,
    endpoint: String,
    agent: ureq::Agent,
    /// Automatic, auth and configured headers, in the order they are sent.
    headers: Vec<(String, String)>,
    key_sent: bool,
    warnings: Vec<String>,
    ledger: Mutex<Ledger>,
    slots: Slots,
}

/// A configured LLM endpoint. Cheap to clone (the clones share the concurrency limit and the
/// budget counters), `Send + Sync`, immutable once built.
#[derive(Clone)]
pub struct LlmClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LlmClient {
    // The API key is among the headers: it is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient")
            .field("endpoint", &self.inner.endpoint)
            .field("model", &self.inner.config.model)
            .field("protocol", &self.inner.config.protocol)
            .field("api_key_sent", &self.inner.key_sent)
            .finish_non_exhaustive()
    }
}

/// What one HTTP attempt returned.
enum Attempt {
    Response {
        status: u16,
        content_type: String,
        retry_after: Option<Duration>,
        body: Result<Vec<u8>, BodyError>,
    },
    Timeout,
    Failed(String),
}

/// Why a response body could not be read.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("response body exceeds max_response_bytes ({0} bytes)")]
    TooLarge(u64),
    /// The transport's description of the failure.
    #[error("reading the response body: {0}")]
    Read(String),
    #[error("reading the response body failed")]
    Failed,
}

impl LlmClient {
    /// Validate `config` and build the client. The API key is read from `api_key_env` here.
    pub fn new(config: LlmConfig) -> Result<LlmClient, LlmConfigError> {
        config.validate()?;
        let mut warnings = Vec::new();
        let key = match &config.api_key_env {
            Some(var) => match std::env::var(var) {
                Ok(k) if !k.trim().is_empty() => Some(k.trim().to_string()),
                _ => {
                    warnings.push(format!(
                        "environment variable {var} is unset or empty: no API key is sent"
                    ));
                    None
                }
            },
            None => None,
        };
        if config.price_of(&config.model).is_none() {
            warnings.push(format!(
                "no price for model {:?} in prices: cost_usd is not computed",
                config.model
            ));
        }
        let mut headers: Vec<(String, String)> = Vec::new();
        if config.protocol == Protocol::Anthropic {
            headers.push(("anthropic-version".into(), ANTHROPIC_VERSION.into()));
        }
        if let Some(k) = &key {
            let (name, value) = match config.auth_style() {
                AuthStyle::Bearer => ("authorization", format!("Bearer {k}")),
                AuthStyle::ApiKey => ("api-key", k.clone()),
                AuthStyle::XApiKey => ("x-api-key", k.clone()),
            };
            if ureq::http::HeaderValue::from_str(&value).is_err() {
                return Err(LlmConfigError::BadHeader {
                    name: format!(
                        "{name} (from {})",
                        config.api_key_env.as_deref().unwrap_or("")
                    ),
                });
            }
            headers.push((name.into(), value));
        }
        for (name, value) in &config.headers {
            let lname = name.to_ascii_lowercase();
            headers.retain(|(n, _)| *n != lname);
            headers.push((lname, value.clone()));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .user_agent(concat!("rampart-llm/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(LlmClient {
            inner: Arc::new(Inner {
                endpoint: config.endpoint_url(),
                slots: Slots {
                    limit: config.concurrency,
                    used: Mutex::new(0),
                    freed: Condvar::new(),
                },
                config,
                agent,
                headers,
                key_sent: key.is_some(),
                warnings,
                ledger: Mutex::new(Ledger::default()),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LlmConfig {
        &self.inner.config
    }

    /// The full URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// Whether an API key was found and is sent.
    pub fn api_key_sent(&self) -> bool {
        self.inner.key_sent
    }

    /// Things a caller should show once (an unset key variable, a model without a price).
    pub fn warnings(&self) -> &[String] {
        &self.inner.warnings
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.inner
            .ledger
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Make one call. Never fails: every failure is an [`Outcome`] variant.
    pub fn complete(&self, req: &ChatRequest) -> Completion {
        let start = Instant::now();
        let cfg = &self.inner.config;
        let deadline = start + Duration::from_millis(req.timeout_ms.unwrap_or(cfg.timeout_ms));
        let mut done = Completion {
            outcome: Outcome::Timeout,
            usage: None,
            cost_usd: None,
            latency_ms: 0,
            attempts: 0,
            model: None,
            http_status: None,
        };
        let finish = |mut c: Completion, outcome: Outcome| {
            c.outcome = outcome;
            c.latency_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
            c
        };
        if let Some(o) = self.budget_check() {
            return finish(done, o);
        }
        let Some(_slot) = self.inner.slots.acquire(deadline) else {
            return finish(done, Outcome::Timeout);
        };
        // Other calls may have spent the budget while this one waited for a slot.
        if let Some(o) = self.budget_check() {
            return finish(done, o);
        }
        let body = self.request_body(req).to_string();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return finish(done, Outcome::Timeout);
            }
            done.attempts += 1;
            let (status, content_type, retry_after, bytes) = match self.send(&body, left) {
                Attempt::Timeout => return finish(done, Outcome::Timeout),
                Attempt::Failed(detail) => {
                    return finish(
                        done,
                        Outcome::HttpError {
                            status: None,
                            detail,
                        },
                    );
                }
                Attempt::Response {
                    status,
                    content_type,
                    retry_after,
                    body,
                } => (status, content_type, retry_after, body),
            };
            done.http_status = Some(status);
            if (200..300).contains(&status) {
                let bytes = match bytes {
                    Ok(b) => b,
                    Err(e) => {
                        return finish(
                            done,
                            Outcome::HttpError {
                                status: Some(status),
                                detail: e.to_string(),
                            },
                        );
                    }
                };
                let parsed = self.classify(&bytes, &content_type, req);
                done.model = parsed.model;
                done.usage = parsed.usage;
                if let Some(u) = parsed.usage {
                    let price = done
                        .model
                        .as_deref()
                        .and_then(|m| cfg.price_of(m))
                        .or_else(|| cfg.price_of(&cfg.model));
                    done.cost_usd = price.map(|p| {
                        (u.input_tokens as f64 * p.input_per_mtok
                            + u.output_tokens as f64 * p.output_per_mtok)
                            / 1_000_000.0
                    });
                    self.ledger().record(
                        u,
                        done.cost_usd,
                        Instant::now(),
                        utc_day(SystemTime::now()),
                    );
                }
                let outcome = match parsed.outcome {
                    Outcome::HttpError { detail, .. } => Outcome::HttpError {
                        status: Some(status),
                        detail,
                    },
                    o => o,
                };
                return finish(done, outcome);
            }
            let detail = match &bytes {
                Ok(b) => error_detail(status, &content_type, b),
                Err(e) => format!("HTTP {status}: {e}"),
            };
            let retryable = status == 429 || (500..600).contains(&status);
            if !retryable || done.attempts > cfg.max_retries {
                let detail = if retryable {
                    format!("{detail} (after {} attempts)", done.attempts)
                } else {
                    detail
                };
                return finish(
                    done,
                    Outcome::HttpError {
                        status: Some(status),
                        detail,
                    },
                );
            }
            let cap = Duration::from_millis(cfg.max_backoff_ms);
            let wait = match retry_after {
                Some(ra) if ra > cap => {
                    return finish(
                        done,
                        Outcome::HttpError {
                            status: Some(status),
                            detail: format!(
                                "{detail} (Retry-After {} ms exceeds max_backoff_ms {}; not retried)",
                                ra.as_millis(),
                                cfg.max_backoff_ms
                            ),
                        },
                    );
                }
                Some(ra) => ra,
                None => backoff(cfg.backoff_ms, cfg.max_backoff_ms, done.attempts),
            };
            if Instant::now() + wait >= deadline {
                return finish(
                    done,
                    Outcome::HttpError {
                        status: Some(status),
                        detail: format!(
                            "{detail} (retry in {} ms would pass timeout_ms; not retried)",
                            wait.as_millis()
                        ),
                    },
                );
            }
            std::thread::sleep(wait);
        }
    }

    fn budget_check(&self) -> Option<Outcome> {
        self.ledger().check(
            &self.inner.config.budget,
            Instant::now(),
            utc_day(SystemTime::now()),
        )
    }

    /// The JSON body of a request.
    pub fn request_body(&self, req: &ChatRequest) -> Value {
        let cfg = &self.inner.config;
        let max_tokens = req.max_tokens.unwrap_or(cfg.max_tokens);
        match cfg.protocol {
            Protocol::Openai => {
                let mut messages = Vec::with_capacity(req.messages.len() + 1);
                if !req.system.is_empty() {
                    messages.push(json!({"role": "system", "content": req.system}));
                }
                messages.extend(
                    req.messages
                        .iter()
                        .map(|m| json!({"role": m.role.name(), "content": m.content})),
                );
                let mut body = json!({
                    "model": cfg.model,
                    "messages": messages,
                    "temperature": cfg.temperature,
                    "stream": false,
                });
                let field = match cfg.max_tokens_field {
                    MaxTokensField::MaxTokens => "max_tokens",
                    MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
                };
                body[field] = json!(max_tokens);
                if let Some(n) = req.top_logprobs {
                    body["logprobs"] = json!(true);
                    body["top_logprobs"] = json!(n.clamp(1, 20));
                }
                if let Some(schema) = &req.schema {
                    match cfg.structured_mode() {
                        Structured::JsonSchema => {
                            body["response_format"] = json!({
                                "type": "json_schema",
                                "json_schema": {
                                    "name": schema_name(schema),
                                    "schema": schema,
                                    "strict": true,
                                }
                            });
                        }
                        Structured::JsonObject => {
                            body["response_format"] = json!({"type": "json_object"});
                        }
                        Structured::JsonObjectSchema => {
                            body["response_format"] =
                                json!({"type": "json_object", "schema": schema});
                        }
                        Structured::None => {}
                    }
                }
                body
            }
            Protocol::Anthropic => {
                let mut messages: Vec<Value> = req
                    .messages
                    .iter()
                    .map(|m| json!({"role": m.role.name(), "content": m.content}))
                    .collect();
                if self.prefilled(req) {
                    messages.push(json!({"role": "assistant", "content": "{"}));
                }
                let mut body = json!({
                    "model": cfg.model,
                    "max_tokens": max_tokens,
                    "messages": messages,
                    "temperature": cfg.temperature,
                });
                if !req.system.is_empty() {
                    body["system"] = json!(req.system);
                }
                body
            }
        }
    }

    fn prefilled(&self, req: &ChatRequest) -> bool {
        let cfg = &self.inner.config;
        cfg.protocol == Protocol::Anthropic && cfg.prefill_json && req.schema.is_some()
    }

    fn send(&self, body: &str, left: Duration) -> Attempt {
        let mut rb = self.inner.agent.post(&self.inner.endpoint);
        for (n, v) in &self.inner.headers {
            rb = rb.header(n.as_str(), v.as_str());
        }
        let rb = rb
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .config()
            .timeout_global(Some(left))
            .build();
        let resp = match rb.send(body.as_bytes()) {
            Ok(r) => r,
            Err(e) => return transport_error(e),
        };
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .map(str::to_string)
        };
        let content_type = header("content-type").unwrap_or_default();
        let retry_after = header("retry-after-ms")
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|ms| ms.is_finite() && *ms >= 0.0)
            .map(|ms| Duration::from_secs_f64(ms.min(1e9) / 1000.0))
            .or_else(|| {
                header("retry-after")
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| Duration::from_secs_f64(s.min(1e9)))
            });
        let limit = self.inner.config.max_response_bytes;
        let body = match resp.into_body().with_config().limit(limit).read_to_vec() {
            Ok(b) => Ok(b),
            Err(ureq::Error::BodyExceedsLimit(_)) => Err(BodyError::TooLarge(limit)),
            Err(e) => match transport_error(e) {
                Attempt::Timeout => return Attempt::Timeout,
                Attempt::Failed(d) => Err(BodyError::Read(d)),
                Attempt::Response { .. } => Err(BodyError::Failed),
            },
        };
        Attempt::Response {
            status,
            content_type,
            retry_after,
            body,
        }
    }

    fn classify(&self, bytes: &[u8], content_type: &str, req: &ChatRequest) -> Parsed {
        let not_chat = |what: String| Parsed {
            outcome: Outcome::HttpError {
                status: None,
                detail: format!(
                    "response is not a {} {what}",
                    match self.inner.config.protocol {
                        Protocol::Openai => "chat completion:",
                        Protocol::Anthropic => "Messages API reply:",
                    }
                ),
            },
            usage: None,
            model: None,
        };
        let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
            return not_chat(format!(
                "body is not JSON ({}, {} bytes)",
                if content_type.is_empty() {
                    "no content type"
                } else {
                    content_type
                },
                bytes.len()
            ));
        };
        if !v.is_object() {
            return not_chat("body is not a JSON object".into());
        }
        if v.get("error").is_some_and(|e| !e.is_null()) {
            return not_chat(format!(
                "it carries an error ({})",
                error_summary(&v).unwrap_or_else(|| "no message".into())
            ));
        }
        let model = v.get("model").and_then(Value::as_str).map(str::to_string);
        let reply = match self.inner.config.protocol {
            Protocol::Openai => openai_reply(&v),
            Protocol::Anthropic => anthropic_reply(&v),
        };
        let reply = match reply {
            Ok(r) => r,
            Err(what) => return not_chat(what.to_string()),
        };
        let mut text = reply.text;
        if self.prefilled(req) && reply.has_text {
            text.insert(0, '{');
        }
        let outcome = if req.top_logprobs.is_some() {
            match reply.first_token_logprobs {
                Some(top) if !top.is_empty() => Outcome::Ok {
                    value: json!({
                        "top_logprobs": top
                            .iter()
                            .map(|(t, lp)| json!({"token": t, "logprob": lp}))
                            .collect::<Vec<_>>()
                    }),
                    text,
                    repaired: false,
                },
                _ => Outcome::Unparseable {
                    detail: NO_LOGPROBS.into(),
                },
            }
        } else if let Some(reason) = reply.refusal {
            Outcome::Refused { reason }
        } else if reply.truncated {
            Outcome::Truncated
        } else if !reply.has_text || text.trim().is_empty() {
            Outcome::Empty
        } else if let Some(schema) = &req.schema {
            match extract_object(&text, Some(schema)) {
                Ok(e) => Outcome::Ok {
                    value: e.value,
                    text,
                    repaired: e.repaired,
                },
                Err(ExtractError::NoObject | ExtractError::NotJson)
                    if looks_like_refusal(&text) =>
                {
                    Outcome::Refused {
                        reason: "the reply has no JSON object and opens with a refusal phrase"
                            .into(),
                    }
                }
                Err(e) => Outcome::Unparseable {
                    detail: format!("{e} (reply of {} characters)", text.chars().count()),
                },
            }
        } else {
            Outcome::Ok {
                value: Value::String(text.clone()),
                text,
                repaired: false,
            }
        };
        Parsed {
            outcome,
            usage: reply.usage,
            model,
        }
    }
}

struct Parsed {
    outcome: Outcome,
    usage: Option<Usage>,
    model: Option<String>,
}

/// The protocol-independent content of a 2xx reply.
struct Reply {
    text: String,
    has_text: bool,
    refusal: Option<String>,
    truncated: bool,
    usage: Option<Usage>,
    /// The first generated token's most likely candidates (token, log-probability), when the
    /// server returned them.
    first_token_logprobs: Option<Vec<(String, f64)>>,
}

fn u64_at(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// What a 2xx body lacks to be a reply of its protocol.
#[derive(Debug, thiserror::Error)]
enum ReplyError {
    #[error("no choices[0]")]
    NoChoice,
    #[error("no choices[0].message object")]
    NoMessage,
    #[error("choices[0].message.content is not a string")]
    ContentNotText,
    #[error("type is not \"message\"")]
    NotMessage,
    #[error("no content array")]
    NoContent,
}

fn openai_reply(v: &Value) -> Result<Reply, ReplyError> {
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or(ReplyError::NoChoice)?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or(ReplyError::NoMessage)?;
    let (text, has_text) = match message.get("content") {
        None | Some(Value::Null) => (String::new(), false),
        Some(Value::String(s)) => (s.clone(), true),
        // Content parts (some servers): the text parts joined.
        Some(Value::Array(parts)) => {
            let t: String = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (t, true)
        }
        Some(_) => return Err(ReplyError::ContentNotText),
    };
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    let refusal = match message.get("refusal") {
        Some(Value::String(r)) if !r.trim().is_empty() => Some(format!(
            "the model returned message.refusal ({} characters)",
            r.chars().count()
        )),
        _ if finish == Some("content_filter") => {
            Some("finish_reason is content_filter".to_string())
        }
        _ => None,
    };
    let usage = v.get("usage").and_then(|u| {
        Some(Usage {
            input_tokens: u64_at(u, "prompt_tokens")?,
            output_tokens: u64_at(u, "completion_tokens").unwrap_or(0),
        })
    });
    // OpenAI (and llama.cpp, vLLM): choices[0].logprobs.content[0].top_logprobs.
    let first_token_logprobs = choice
        .pointer("/logprobs/content/0/top_logprobs")
        .and_then(Value::as_array)
        .map(|top| {
            top.iter()
                .filter_map(|c| {
                    Some((
                        c.get("token")?.as_str()?.to_string(),
                        c.get("logprob")?.as_f64()?,
                    ))
                })
                .collect()
        });
    Ok(Reply {
        text,
        has_text,
        refusal,
        truncated: finish == Some("length"),
        usage,
        first_token_logprobs,
    })
}

fn anthropic_reply(v: &Value) -> Result<Reply, ReplyError> {
    if v.get("type").and_then(Value::as_str) != Some("message") {
        return Err(ReplyError::NotMessage);
    }
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or(ReplyError::NoContent)?;
    let mut text = String::new();
    let mut has_text = false;
    for b in blocks {
        if b.get("type").and_then(Value::as_str) == Some("text")
            && let Some(t) = b.get("text").and_then(Value::as_str)
        {
            text.push_str(t);
            has_text = true;
        }
    }
    let stop = v.get("stop_reason").and_then(Value::as_str);
    let usage = v.get("usage").and_then(|u| {
        // Cache writes and reads are input tokens too (billed at other rates; counted at the
        // input price here).
        let input = u64_at(u, "input_tokens")?
            .saturating_add(u64_at(u, "cache_creation_input_tokens").unwrap_or(0))
            .saturating_add(u64_at(u, "cache_read_input_tokens").unwrap_or(0));
        Some(Usage {
            input_tokens: input,
            output_tokens: u64_at(u, "output_tokens").unwrap_or(0),
        })
    });
    Ok(Reply {
        text,
        has_text,
        refusal: (stop == Some("refusal")).then(|| "stop_reason is refusal".to_string()),
        truncated: stop == Some("max_tokens"),
        usage,
        // The Messages API has no log-probabilities.
        first_token_logprobs: None,
    })
}

/// `type: message` from an OpenAI (`{"error": {...}}`) or Anthropic (`{"type": "error",
/// "error": {...}}`) error body, the message cut to [`ERROR_MESSAGE_CHARS`].
fn error_summary(v: &Value) -> Option<String> {
    let e = v.get("error")?;
    if let Some(s) = e.as_str() {
        return Some(cut(s));
    }
    let kind = e
        .get("type")
        .or_else(|| e.get("code"))
        .and_then(|t| match t {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
    let msg = e.get("message").and_then(Value::as_str).map(cut);
    match (kind, msg) {
        (Some(k), Some(m)) => Some(format!("{k}: {m}")),
        (Some(k), None) => Some(k),
        (None, Some(m)) => Some(m),
        (None, None) => None,
    }
}

fn cut(s: &str) -> String {
    let mut out: String = s.chars().take(ERROR_MESSAGE_CHARS).collect();
    if s.chars().count() > ERROR_MESSAGE_CHARS {
        out.push('…');
    }
    out
}

fn error_detail(status: u16, content_type: &str, body: &[u8]) -> String {
    match serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| error_summary(&v))
    {
        Some(s) => format!("HTTP {status}: {s}"),
        None => format!(
            "HTTP {status}: {} body of {} bytes",
            if content_type.is_empty() {
                "untyped"
            } else {
                content_type
            },
            body.len()
        ),
    }
}

fn transport_error(e: ureq::Error) -> Attempt {
    match e {
        ureq::Error::Timeout(_) => Attempt::Timeout,
        ureq::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            Attempt::Timeout
        }
        ureq::Error::Io(io) => Attempt::Failed(format!("connection error: {io}")),
        ureq::Error::HostNotFound => Attempt::Failed("host not found (DNS)".into()),
        ureq::Error::ConnectionFailed => Attempt::Failed("connection failed".into()),
        other => Attempt::Failed(other.to_string()),
    }
}

/// `response_format.json_schema.name`: the schema's `title` when it fits OpenAI's
/// `^[a-zA-Z0-9_-]{1,64}$`, else `response`.
fn schema_name(schema: &Value) -> String {
    match schema.get("title").and_then(Value::as_str) {
        Some(t)
            if !t.is_empty()
                && t.len() <= 64
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
        {
            t.to_string()
        }
        _ => "response".to_string(),
    }
}

/// Exponential backoff with jitter for retry number `retry` (1-based): a uniform wait in
/// `[d/2, d]` where `d = min(base * 2^(retry-1), cap)`.
pub(crate) fn backoff(base_ms: u64, cap_ms: u64, retry: u32) -> Duration {
    let exp = base_ms.saturating_mul(1u64 << retry.saturating_sub(1).min(20));
    let d = exp.min(cap_ms);
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|t| t.as_nanos())
            .unwrap_or(0),
    );
    let frac = (h.finish() >> 11) as f64 / (1u64 << 53) as f64;
    Duration::from_millis(d / 2 + (frac * (d - d / 2) as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        for retry in 1..=12 {
            let d = backoff(100, 1_000, retry).as_millis() as u64;
            let full = (100u64 << (retry - 1)).min(1_000);
            assert!(d >= full / 2 && d <= full, "retry {retry}: {d}");
        }
        assert_eq!(backoff(0, 0, 3), Duration::ZERO);
        // Huge retry numbers do not overflow.
        assert!(backoff(60_000, 60_000, u32::MAX) <= Duration::from_secs(60));
    }

    #[test]
    fn schema_name_from_title() {
        assert_eq!(
            schema_name(&json!({"title": "judge_verdict"})),
            "judge_verdict"
        );
        assert_eq!(schema_name(&json!({"title": "has space"})), "response");
        assert_eq!(schema_name(&json!({})), "response");
    }

    #[test]
    fn error_detail_is_short_and_typed() {
        let long = "x".repeat(1000);
        let body = json!({"error": {"type": "invalid_request_error", "message": long}}).to_string();
        let d = error_detail(400, "application/json", body.as_bytes());
        assert!(d.starts_with("HTTP 400: invalid_request_error: xxx"));
        assert!(d.chars().count() < 260);
        let d = error_detail(502, "text/html", b"<html>bad gateway</html>");
        assert_eq!(d, "HTTP 502: text/html body of 24 bytes");
    }
}
