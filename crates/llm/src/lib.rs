//! The LLM client of Rampart: one blocking, `Send + Sync` client for every LLM feature.
//!
//! - **Protocols:** OpenAI-compatible chat completions ([`Protocol::Openai`]: OpenAI, Azure
//!   OpenAI, vLLM, Ollama, llama.cpp's server, LiteLLM) and Anthropic's Messages API
//!   ([`Protocol::Anthropic`]).
//! - **Calls:** one deadline (`timeout_ms`) per call covering the wait for a concurrency slot,
//!   every attempt and every backoff; retries with exponential backoff and jitter only on HTTP
//!   429 and 5xx, honouring `Retry-After` up to `max_backoff_ms`; a concurrency limit shared by
//!   all clones of a client.
//! - **Accounting:** tokens from the `usage` fields, cost from the configured price table,
//!   budgets per sliding minute and per UTC day checked before each call.
//! - **Structured output:** `response_format` JSON schema where the server supports it, and
//!   always tolerant extraction, repair and a schema check of the reply ([`extract`]).
//! - **Endpoints:** an [`Endpoint`] is the `llm` table of a layer's options; its one
//!   resolution applies the `base_url_env` / `model_env` overrides and checks the result
//!   ([`endpoint`]).
//! - **Redaction:** [`redact_copied`] replaces text a model copied from its input by span
//!   references before an answer reaches a report ([`redact`]).
//! - **Outcomes:** [`LlmClient::complete`] returns a [`Completion`] whose [`Outcome`] is one of
//!   ok, refused, unparseable, empty, truncated, timeout, HTTP error or budget exhausted. It
//!   never returns a `Result`: no failure can be defaulted into an answer.
//!
//! The client is blocking because Rampart's pipeline is synchronous (the server runs pipelines
//! on a blocking pool); see `DESIGN.md`.
//!
//! ```
//! use rampart_llm::fake::{FakeResponse, FakeServer};
//! use rampart_llm::{ChatRequest, LlmClient, LlmConfig, Message, OutcomeKind, Protocol};
//! use serde_json::json;
//!
//! let server = FakeServer::start(vec![FakeResponse::openai_text(
//!     "```json\n{\"label\": \"benign\"}\n```",
//! )])
//! .unwrap();
//! let client = LlmClient::new(LlmConfig::new(Protocol::Openai, server.base_url(), "m")).unwrap();
//! let done = client.complete(&ChatRequest {
//!     system: "Answer in JSON.".into(),
//!     messages: vec![Message::user("Classify: hello")],
//!     schema: Some(json!({
//!         "type": "object",
//!         "required": ["label"],
//!         "properties": {"label": {"type": "string", "enum": ["benign", "malicious"]}}
//!     })),
//!     max_tokens: None,
//!     top_logprobs: None,
//!     timeout_ms: None,
//! });
//! assert_eq!(done.outcome.kind(), OutcomeKind::Ok);
//! assert_eq!(done.outcome.value().unwrap()["label"], "benign");
//! assert_eq!(done.usage.unwrap().input_tokens, 10);
//! assert_eq!(done.attempts, 1);
//! // What the server received: the schema went out as response_format.
//! let sent = server.requests()[0].json();
//! assert_eq!(sent["response_format"]["type"], "json_schema");
//! ```

mod budget;
mod client;
pub mod config;
pub mod endpoint;
pub mod extract;
pub mod fake;
mod outcome;
pub mod redact;

pub use client::{ANTHROPIC_VERSION, ChatRequest, LlmClient, Message, NO_LOGPROBS, Role};
pub use config::{
    AuthStyle, BudgetConfig, Limit, LlmConfig, LlmConfigError, MaxTokensField, Price, Protocol,
    Structured,
};
pub use endpoint::{Endpoint, EndpointEnv, EndpointError};
pub use outcome::{BudgetResource, BudgetWindow, Completion, Outcome, OutcomeKind, Usage};
pub use redact::{MIN_COPY, redact_copied, redact_with_history};
