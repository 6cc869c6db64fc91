//! The proxy's handlers: one proxied request chained step by step ([`proxy_inner`]).

use super::ledger::AnswerLedger;
use super::plain::respond_plain;
use super::relay::stream_response;
use super::reply::{caller_of, error_response};
use super::rewrite::spotlight;
use super::scan_up::{Upward, scan_up, scan_up_conversation};
use super::upstream::{forward, is_event_stream};
use super::wire::{ParsedRequest, parse_request};
use super::{CONVERSATION_ID_HEADER, Kind, MAX_CONVERSATION_ID_BYTES};
use crate::api::ApiBytes;
use crate::config::ServerConfig;
use crate::state::{AppState, Caller, ServiceError};
use crate::tool_gate::ProxyTools;
use axum::extract::{Extension, State};
use axum::http::header;
use axum::response::Response;
use bytes::Bytes;
use rampart_core::Action;
use rampart_output::canary::{self, Canary, CanarySet};
use rampart_output::{OutputContext, OutputScanner, PromptIndex};
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn chat_completions(
    State(state): State<Arc<AppState>>,
    caller: Option<Extension<Caller>>,
    headers: header::HeaderMap,
    ApiBytes(body): ApiBytes,
) -> Response {
    let caller = caller_of(caller);
    let hint = match conversation_hint(&headers) {
        Ok(h) => h,
        Err(e) => return error_response(e, &caller, None),
    };
    proxy(state, caller, body, Kind::Chat, hint, headers).await
}

pub(super) async fn completions(
    State(state): State<Arc<AppState>>,
    caller: Option<Extension<Caller>>,
    ApiBytes(body): ApiBytes,
) -> Response {
    let caller = caller_of(caller);
    proxy(
        state,
        caller,
        body,
        Kind::Completions,
        None,
        header::HeaderMap::new(),
    )
    .await
}

/// The client's conversation id from [`CONVERSATION_ID_HEADER`]: printable ASCII, at most
/// 256 bytes (400 otherwise); empty counts as absent.
pub(super) fn conversation_hint(
    headers: &header::HeaderMap,
) -> Result<Option<String>, ServiceError> {
    let Some(v) = headers.get(CONVERSATION_ID_HEADER) else {
        return Ok(None);
    };
    let bad = || {
        ServiceError::BadRequest(format!(
            "{CONVERSATION_ID_HEADER} must be printable ASCII of at most \
             {MAX_CONVERSATION_ID_BYTES} bytes"
        ))
    };
    let s = v.to_str().map_err(|_| bad())?.trim();
    if s.len() > MAX_CONVERSATION_ID_BYTES {
        return Err(bad());
    }
    Ok((!s.is_empty()).then(|| s.to_string()))
}

pub(super) async fn proxy(
    state: Arc<AppState>,
    caller: Caller,
    raw: Bytes,
    kind: Kind,
    hint: Option<String>,
    headers: header::HeaderMap,
) -> Response {
    match proxy_inner(&state, &caller, raw, kind, hint, &headers).await {
        Ok(r) => r,
        Err((e, action)) => error_response(e, &caller, action),
    }
}

/// A proxy answer, or an error with the request's action once it is known (for the
/// `x-rampart-action` header).
pub(super) type ProxyResult = Result<Response, (ServiceError, Option<Action>)>;

/// One proxied request, step by step: parse, scan up, prepare the output check, forward,
/// then scan back and respond (streamed or plain).
pub(super) async fn proxy_inner(
    state: &Arc<AppState>,
    caller: &Caller,
    raw: Bytes,
    kind: Kind,
    hint: Option<String>,
    headers: &header::HeaderMap,
) -> ProxyResult {
    let mut request = parse_request(&raw, kind).map_err(|e| (e, None))?;
    let tool_hint = hint.clone();
    let conversation = match kind {
        Kind::Chat => state.proxy_conversation_scanner(caller.key_id.as_deref()),
        Kind::Completions => None,
    };
    let upward = match conversation {
        Some(scanner) => scan_up_conversation(state, caller, scanner, &mut request, hint).await,
        None => scan_up(state, caller, kind, &mut request).await,
    };
    let (action, answers, injection_score, provenance) = match upward.map_err(|e| (e, None))? {
        Upward::Blocked(response) => return Ok(response),
        Upward::Forward(action, answers, score, provenance) => (action, answers, score, provenance),
    };
    let with_action = |e: ServiceError| (e, Some(action));
    // Tool calls in the answer are decided against what the client sent (before
    // spotlighting and canaries).
    let tools = match kind {
        Kind::Chat => crate::tool_gate::proxy_tools(
            state,
            caller,
            headers,
            tool_hint.as_deref(),
            &request.body,
            injection_score,
            provenance,
        )
        .map_err(with_action)?,
        Kind::Completions => None,
    };
    let config = state.config();
    let url = config.proxy.endpoint(kind.path()).map_err(with_action)?;
    if kind == Kind::Chat {
        spotlight(&mut request.body, config.proxy.spotlight).map_err(with_action)?;
    }
    let output = prepare_output(state, &config, kind, &mut request)
        .await
        .map_err(with_action)?;
    let payload = serde_json::to_vec(&request.body)
        .map_err(|e| with_action(ServiceError::Internal(e.to_string())))?;
    // Stream or not is what the client asked for: an answer of the other kind would be read
    // one way here and another by the client (an SSE stream sent as JSON passed ungated).
    let streamed = request
        .body
        .get("stream")
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    let started = tokio::time::Instant::now();
    let resp = forward(state, caller, &config, url, payload)
        .await
        .map_err(with_action)?;
    let answer = AnswerContext {
        kind,
        output,
        action,
        answers,
        tools,
    };
    if resp.status().is_success() && is_event_stream(resp.headers()) != streamed {
        return Err(with_action(ServiceError::BadGateway(format!(
            "the upstream answered a {} request with a {} answer; it is withheld (its tool \
             calls and text could not be checked as the client would read them)",
            if streamed {
                "streaming"
            } else {
                "non-streaming"
            },
            if streamed { "plain" } else { "streamed" },
        ))));
    }
    if resp.status().is_success() && streamed {
        let idle = Duration::from_millis(config.proxy.stream_idle_timeout_ms);
        return Ok(stream_response(
            state.clone(),
            caller.clone(),
            resp,
            idle,
            answer,
        ));
    }
    respond_plain(state, caller, &config, resp, started, answer)
        .await
        .map_err(with_action)
}

/// What the answer's steps need from the request's: which endpoint, what the answer is
/// checked against, the request's action, where the answer is recorded (conversation
/// state) and the tool context (tool governance).
pub(super) struct AnswerContext {
    pub(super) kind: Kind,
    pub(super) output: OutputCheck,
    pub(super) action: Action,
    pub(super) answers: Option<AnswerLedger>,
    pub(super) tools: Option<ProxyTools>,
}

/// What the answer is checked against: the canary and system prompt, and the scanner
/// (`None` when output scanning is off and no canary was planted).
pub(super) struct OutputCheck {
    pub(super) ctx: OutputContext,
    pub(super) scanner: Option<Arc<OutputScanner>>,
}

/// Step 4: plants the canary (chat only, when enabled) and gets the output scanner.
pub(super) async fn prepare_output(
    state: &AppState,
    config: &ServerConfig,
    kind: Kind,
    request: &mut ParsedRequest,
) -> Result<OutputCheck, ServiceError> {
    let mut canaries = Vec::new();
    if config.canary.enabled && kind == Kind::Chat {
        let canary = Canary::generate(&config.canary.prefix)
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        canary::plant(
            &mut request.body,
            &config.canary.render(&canary),
            config.canary.placement,
        );
        canaries.push(canary);
    }
    let ctx = OutputContext {
        canaries: CanarySet::new(&canaries),
        system_prompt: PromptIndex::new(
            &request.extracted.system_prompt,
            config.output.system_prompt_min_words,
        ),
    };
    // Output scanning off: only the planted canary is looked for.
    let scanner =
        (config.output.enabled || !canaries.is_empty()).then(|| state.proxy_output_scanner());
    Ok(OutputCheck { ctx, scanner })
}
