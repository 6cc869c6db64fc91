//! The OpenAI-compatible proxy: `POST /v1/chat/completions`, `POST /v1/completions`, and
//! the output check `POST /v1/scan/output`.
//!
//! Request flow (chat), one function per step ([`handler::proxy_inner`] chains them):
//! 1. Parse ([`wire::parse_request`]): the body is parsed as JSON; only the fields the model reads
//!    are interpreted, every other field is forwarded untouched. Each message's text (string
//!    content, or the `text` of each content part; tool-call and legacy function-call
//!    arguments) becomes one segment with the message's role (`system`, `developer`, `user`,
//!    `assistant`, `tool`; `function` is `tool`). The messages' `name`s follow, one segment
//!    per role; then every string value and every object key in `tools`, `functions` and
//!    `response_format` (descriptions, names, property names, `enum`, `const`, `default`,
//!    `examples`, `title`…; JSON schemas walked at any depth, up to 64 levels; deeper is
//!    refused with 400) as one `tool` segment: definitions often come from third parties
//!    (MCP servers, plugins), and a poisoned definition is an injection the model reads. A
//!    non-string `description` or call `arguments` is refused with 400. Trust per role comes
//!    from the pipeline's policy.
//! 2. Scan up ([`scan_up::scan_up`]): the pipeline decides; the decision is recorded (metrics + audit)
//!    before anything is forwarded. BLOCK answers `400` with `code: "rampart_blocked"` and a
//!    summary of the decision (rule IDs, categories, spans; never text); the upstream sees
//!    nothing. SANITIZE forwards the sanitized texts in place of the originals (the strings
//!    of a grouped segment are scanned one by one for that; the request is blocked when one
//!    is BLOCK on its own, when none can be sanitized on its own (a finding spanning two
//!    strings, or in a key), or when the group has more than 64 strings).
//!
//!    With a `[conversation]` section (chat only, [`scan_up::scan_up_conversation`]) the messages are
//!    one conversation instead, scanned with server-side state: the newest call's per-turn
//!    decision plus the conversation part (risk over the lineage, rewinds, forged assistant
//!    turns: `HIST_001`, handled per `conversation.ledger.policy`: `report` forwards,
//!    `drop` removes them, `block` blocks). History beyond the replay bound is scanned as
//!    plain segments ([`scan_up::scan_unreplayed`]); definitions and names as before. The client's
//!    conversation id is the `x-rampart-conversation-id` header (a hint, never the key).
//!    Every answer the client receives whole (plain, or a completed stream assembled from
//!    its deltas) is recorded in the ledger ([`ledger::AnswerLedger`]), so it verifies when sent back.
//! 3. Spotlight ([`rewrite::spotlight`], chat only, `[proxy] spotlight`, off by default): the
//!    (possibly sanitized) tool messages are marked as data for the model (random
//!    delimiters or datamarking) and an instruction is added as a new system message after
//!    the leading system/developer messages. The scan has already decided on the original
//!    text, so the markers never change a decision.
//! 4. Prepare the output check ([`handler::prepare_output`]): with `[canary] enabled`, a
//!    fresh canary is planted in the system prompt (see [`rampart_output::canary`]).
//! 5. Forward ([`upstream::forward`]): the request goes to `proxy.upstream_url` with the endpoint path
//!    joined to its path (its query, e.g. `?api-version=…`, is kept), with
//!    `Authorization: Bearer $OPENAI_API_KEY` (`proxy.upstream_api_key_env`) when set. The
//!    client's own `Authorization` is a Rampart key and is never forwarded, nor are other
//!    client headers. Logs and errors name the upstream without its query or credentials.
//! 6. Scan back and respond: the response is scanned ([`rampart_output::OutputScanner`]) before the client
//!    sees it: every text of every choice, tool-call and legacy function-call arguments and
//!    names included. Plain JSON responses ([`plain::respond_plain`]) are passed through byte for
//!    byte when allowed; a blocked response is `400` with `code: "rampart_output_blocked"` (a
//!    4xx, so OpenAI SDKs do not retry it and regenerate). A `Content-Type` of
//!    `text/event-stream` (compared case-insensitively, parameters ignored) is a stream,
//!    guarded by [`rampart_output::sse::StreamGuard`] ([`relay::stream_response`]): on a leak the client gets
//!    a final `data: {"error": …}` event, then `data: [DONE]`.
//!
//! Status codes: no upstream configured 503 (`service_unavailable`); upstream unreachable or
//! a malformed/oversized upstream answer 502 (`upstream_error`); no response within
//! `proxy.timeout_ms` (or a stream idle for `proxy.stream_idle_timeout_ms`) 504. Failing
//! open makes no sense for a forward (there is no answer to pass on), so these are always
//! errors. Upstream error statuses (4xx/5xx) are passed through with their body (after the
//! body is checked for canary and secret leaks). A request body over
//! `server.max_body_bytes` is 413 in the JSON error shape (see [`crate::api`]).
//!
//! Every response carries `x-rampart-action` (the request's action; for plain responses the
//! stricter of request and response) and `x-rampart-request-id`.

mod config;
mod handler;
mod ledger;
mod plain;
mod relay;
mod reply;
mod rewrite;
mod scan_output;
mod scan_up;
mod turns;
mod upstream;
mod wire;

pub use config::{ProxyConfig, ProxyConfigError, Spotlight, set_upstream_url};

use crate::state::AppState;
use axum::Router;
use axum::routing::post;
use std::sync::Arc;

/// Endpoint label of the chat proxy (metrics, audit).
const EP_CHAT: &str = "/v1/chat/completions";
/// Endpoint label of a chat response scan.
const EP_CHAT_RESPONSE: &str = "/v1/chat/completions#response";
/// Endpoint label of the legacy completions proxy.
const EP_COMPLETIONS: &str = "/v1/completions";
/// Endpoint label of a legacy completions response scan.
const EP_COMPLETIONS_RESPONSE: &str = "/v1/completions#response";
/// Endpoint label of the scan of a conversation-scanned chat request's definitions and
/// message names (what is not a message text).
const EP_CHAT_DEFINITIONS: &str = "/v1/chat/completions#definitions";
/// Header carrying the client's conversation id (a hint for the conversation state, never
/// its key).
const CONVERSATION_ID_HEADER: &str = "x-rampart-conversation-id";
/// Longest conversation-id hint accepted.
const MAX_CONVERSATION_ID_BYTES: usize = 256;
/// Endpoint label of the output check.
const EP_SCAN_OUTPUT: &str = "/v1/scan/output";
/// Most canaries one `/v1/scan/output` call may give.
const MAX_CANARIES: usize = 32;

/// Which proxied endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Completions,
}

impl Kind {
    fn path(self) -> &'static str {
        match self {
            Kind::Chat => "/chat/completions",
            Kind::Completions => "/completions",
        }
    }
    fn endpoint(self) -> &'static str {
        match self {
            Kind::Chat => EP_CHAT,
            Kind::Completions => EP_COMPLETIONS,
        }
    }
    fn response_endpoint(self) -> &'static str {
        match self {
            Kind::Chat => EP_CHAT_RESPONSE,
            Kind::Completions => EP_COMPLETIONS_RESPONSE,
        }
    }
}

/// The proxy and output-check routes (the caller adds authentication).
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/chat/completions", post(handler::chat_completions))
        .route("/v1/completions", post(handler::completions))
        .route("/v1/scan/output", post(scan_output::scan_output))
}
