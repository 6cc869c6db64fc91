//! A mock OpenAI-compatible upstream for tests: axum on 127.0.0.1:0, speaking
//! `/v1/chat/completions` and `/v1/completions`, plain and streamed (SSE), with a
//! configurable reply and delays; it records every request it receives.
//!
//! Use it from an integration test with `#[path = "support/upstream.rs"] mod upstream;`.
#![allow(dead_code)]

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the mock answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// This text as the assistant's content (or the completion's text).
    Text(String),
    /// The request's system/developer messages, joined with `\n` (a model leaking its
    /// system prompt).
    EchoSystem,
    /// An error status with this JSON body.
    Error(u16, Value),
    /// Status 200 with exactly this body and `Content-Type` (streamed or not).
    Raw {
        /// The `Content-Type`.
        content_type: String,
        /// The body.
        body: String,
    },
    /// A function call instead of content: a tool call (`tool_calls[0]`), or the legacy
    /// `function_call` when `legacy`. `{system}` in the name or the arguments is replaced by
    /// the request's system messages (as [`Reply::EchoSystem`] gives them). Streamed, the
    /// first event carries the name, the arguments follow in `piece_bytes` pieces.
    Call {
        /// The legacy `function_call` rather than `tool_calls`.
        legacy: bool,
        /// The function's name.
        name: String,
        /// The arguments.
        arguments: String,
    },
}

/// The mock's behaviour.
#[derive(Debug, Clone)]
pub struct MockConfig {
    /// The reply.
    pub reply: Reply,
    /// Wait this long before answering (for timeout tests).
    pub delay: Duration,
    /// Streamed: bytes of content per event.
    pub piece_bytes: usize,
    /// Streamed: pause between network writes (each event is written in two halves).
    pub write_delay: Duration,
    /// Streamed: the `Content-Type` sent. Default `text/event-stream`.
    pub stream_content_type: String,
}

impl Default for MockConfig {
    fn default() -> Self {
        Self {
            reply: Reply::Text("Hello from the mock upstream.".into()),
            delay: Duration::ZERO,
            piece_bytes: 5,
            write_delay: Duration::from_millis(1),
            stream_content_type: "text/event-stream".into(),
        }
    }
}

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The query string, if any.
    pub query: Option<String>,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The JSON body.
    pub body: Value,
}

#[derive(Debug)]
struct Inner {
    config: Mutex<MockConfig>,
    received: Mutex<Vec<Received>>,
}

/// A running mock upstream (stops when the test's runtime ends).
#[derive(Debug, Clone)]
pub struct MockUpstream {
    /// The bound address.
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

impl MockUpstream {
    /// Starts a mock on a free loopback port.
    pub async fn start(config: MockConfig) -> MockUpstream {
        let inner = Arc::new(Inner {
            config: Mutex::new(config),
            received: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/v1/completions", post(handle))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind mock upstream");
        let addr = listener.local_addr().expect("mock address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        MockUpstream { addr, inner }
    }

    /// The base URL to configure as `proxy.upstream_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.inner
            .received
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes the reply.
    pub fn set_reply(&self, reply: Reply) {
        self.inner
            .config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reply = reply;
    }
}

/// A chat completion object with `text` as the assistant's content.
pub fn chat_completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "mock-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
        "system_fingerprint": "fp_mock"
    })
}

/// A legacy text completion object.
pub fn text_completion(text: &str) -> Value {
    json!({
        "id": "cmpl-mock",
        "object": "text_completion",
        "created": 1_700_000_000,
        "model": "mock-model",
        "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    })
}

/// The events of a streamed answer, each as its exact bytes (what the mock writes).
pub fn sse_events(text: &str, piece_bytes: usize, chat: bool) -> Vec<String> {
    let mut events = Vec::new();
    let chunk = |choice: Value, object: &str| {
        json!({"id": "chatcmpl-mock", "object": object, "created": 1_700_000_000,
               "model": "mock-model", "choices": [choice]})
    };
    if chat {
        let first = chunk(
            json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}),
            "chat.completion.chunk",
        );
        events.push(format!("data: {first}\n\n"));
    }
    for piece in split_text(text, piece_bytes.max(1)) {
        let v = if chat {
            chunk(
                json!({"index": 0, "delta": {"content": piece}, "finish_reason": null}),
                "chat.completion.chunk",
            )
        } else {
            chunk(
                json!({"index": 0, "text": piece, "finish_reason": null}),
                "text_completion",
            )
        };
        events.push(format!("data: {v}\n\n"));
    }
    let last = if chat {
        chunk(
            json!({"index": 0, "delta": {}, "finish_reason": "stop"}),
            "chat.completion.chunk",
        )
    } else {
        chunk(
            json!({"index": 0, "text": "", "finish_reason": "stop"}),
            "text_completion",
        )
    };
    events.push(format!("data: {last}\n\n"));
    events.push("data: [DONE]\n\n".to_string());
    events
}

/// Splits text into pieces of about `n` bytes on char boundaries.
pub fn split_text(text: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for ch in text.chars() {
        cur.push(ch);
        if cur.len() >= n {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = uri.path().to_string();
    let query = uri.query().map(str::to_string);
    inner
        .received
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Received {
            path: path.clone(),
            query,
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            body: body.clone(),
        });
    let cfg = inner
        .config
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if !cfg.delay.is_zero() {
        tokio::time::sleep(cfg.delay).await;
    }
    let chat = path.ends_with("/chat/completions");
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    let system = || {
        body.get("messages")
            .and_then(Value::as_array)
            .map(|ms| {
                ms.iter()
                    .filter(|m| {
                        matches!(
                            m.get("role").and_then(Value::as_str),
                            Some("system" | "developer")
                        )
                    })
                    .filter_map(|m| m.get("content").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    };
    let text = match &cfg.reply {
        Reply::Text(t) => t.clone(),
        Reply::EchoSystem => system(),
        Reply::Call {
            legacy,
            name,
            arguments,
        } => {
            let name = name.replace("{system}", &system());
            let arguments = arguments.replace("{system}", &system());
            if stream {
                let events = call_events(*legacy, &name, &arguments, cfg.piece_bytes);
                return stream_reply(events, &cfg);
            }
            return axum::Json(call_completion(*legacy, &name, &arguments)).into_response();
        }
        Reply::Raw { content_type, body } => {
            return (
                StatusCode::OK,
                [(axum::http::header::CONTENT_TYPE, content_type.clone())],
                body.clone(),
            )
                .into_response();
        }
        Reply::Error(status, v) => {
            return (
                StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                axum::Json(v.clone()),
            )
                .into_response();
        }
    };
    if stream {
        return stream_reply(sse_events(&text, cfg.piece_bytes, chat), &cfg);
    }
    let v = if chat {
        chat_completion(&text)
    } else {
        text_completion(&text)
    };
    axum::Json(v).into_response()
}

/// A streamed answer: each event in two writes, so events and their JSON are split across
/// chunks.
fn stream_reply(events: Vec<String>, cfg: &MockConfig) -> Response {
    let mut writes: Vec<Bytes> = Vec::new();
    for e in events {
        let b = e.into_bytes();
        let mid = b.len() / 2;
        writes.push(Bytes::copy_from_slice(&b[..mid]));
        writes.push(Bytes::copy_from_slice(&b[mid..]));
    }
    let delay = cfg.write_delay;
    let stream = futures_util::stream::unfold(writes.into_iter(), move |mut it| async move {
        let next = it.next()?;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Some((Ok::<Bytes, Infallible>(next), it))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, cfg.stream_content_type.as_str())
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// A chat completion whose message is a function call (see [`Reply::Call`]).
pub fn call_completion(legacy: bool, name: &str, arguments: &str) -> Value {
    let call = json!({"name": name, "arguments": arguments});
    let message = if legacy {
        json!({"role": "assistant", "content": null, "function_call": call})
    } else {
        json!({"role": "assistant", "content": null,
               "tool_calls": [{"id": "call_1", "type": "function", "function": call}]})
    };
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "mock-model",
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": if legacy { "function_call" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    })
}

/// The events of a streamed function call: the name first, then the arguments in pieces.
pub fn call_events(legacy: bool, name: &str, arguments: &str, piece_bytes: usize) -> Vec<String> {
    let delta = |name: Option<&str>, arguments: &str| {
        let mut call = json!({"arguments": arguments});
        if let Some(n) = name {
            call["name"] = json!(n);
        }
        if legacy {
            json!({"function_call": call})
        } else {
            let mut tool = json!({"index": 0, "function": call});
            if name.is_some() {
                tool["id"] = json!("call_1");
                tool["type"] = json!("function");
            }
            json!({"tool_calls": [tool]})
        }
    };
    let event = |delta: Value, finish: Value| {
        let v = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk",
            "created": 1_700_000_000, "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {v}\n\n")
    };
    let mut events = vec![event(delta(Some(name), ""), Value::Null)];
    for piece in split_text(arguments, piece_bytes.max(1)) {
        events.push(event(delta(None, &piece), Value::Null));
    }
    let finish = if legacy {
        "function_call"
    } else {
        "tool_calls"
    };
    events.push(event(json!({}), json!(finish)));
    events.push("data: [DONE]\n\n".to_string());
    events
}
