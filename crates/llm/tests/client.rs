//! Every outcome of a call, produced deterministically by the scripted fake server.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rampart_llm::fake::{FakeResponse, FakeServer};
use rampart_llm::{
    BudgetResource, BudgetWindow, ChatRequest, Completion, Limit, LlmClient, LlmConfig, Message,
    Outcome, OutcomeKind, Price, Protocol, Structured,
};
use serde_json::{Value, json};

fn schema() -> Value {
    json!({
        "title": "verdict",
        "type": "object",
        "required": ["label", "confidence"],
        "additionalProperties": false,
        "properties": {
            "label": {"type": "string", "enum": ["benign", "suspicious", "malicious"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1}
        }
    })
}

fn ask() -> ChatRequest {
    ChatRequest {
        system: "You label text. Reply with JSON.".into(),
        messages: vec![Message::user("label this: hello there")],
        schema: Some(schema()),
        max_tokens: None,
        timeout_ms: None,
        top_logprobs: None,
    }
}

fn config(server_url: String) -> LlmConfig {
    let mut c = LlmConfig::new(Protocol::Openai, server_url, "fake-model");
    c.backoff_ms = 1;
    c.max_backoff_ms = 50;
    c
}

fn client(c: LlmConfig) -> LlmClient {
    LlmClient::new(c).expect("valid config")
}

fn one(resp: FakeResponse) -> (FakeServer, Completion) {
    let server = FakeServer::start(vec![resp]).expect("fake server");
    let done = client(config(server.base_url())).complete(&ask());
    (server, done)
}

const VERDICT: &str = r#"{"label": "malicious", "confidence": 0.9}"#;

// ---- ok ----

#[test]
fn ok_parses_schema_object_and_reports_usage() {
    let (server, done) = one(FakeResponse::openai_text(VERDICT));
    match &done.outcome {
        Outcome::Ok {
            value,
            text,
            repaired,
        } => {
            assert_eq!(value["label"], "malicious");
            assert_eq!(text, VERDICT);
            assert!(!repaired);
        }
        other => panic!("{other:?}"),
    }
    assert!(done.outcome.is_ok());
    assert_eq!(done.attempts, 1);
    assert_eq!(done.http_status, Some(200));
    assert_eq!(done.model.as_deref(), Some("fake-model"));
    let u = done.usage.expect("usage");
    assert_eq!((u.input_tokens, u.output_tokens), (10, 5));
    assert_eq!(server.request_count(), 1);
}

#[test]
fn ok_with_repair_is_marked_repaired() {
    let (_s, done) = one(FakeResponse::openai_text(
        "Sure! ```json\n{'label': 'benign', 'confidence': 0.7,}\n```",
    ));
    match done.outcome {
        Outcome::Ok {
            value, repaired, ..
        } => {
            assert_eq!(value, json!({"label": "benign", "confidence": 0.7}));
            assert!(repaired);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ok_without_schema_is_the_text_as_a_string() {
    let server = FakeServer::start(vec![FakeResponse::openai_text("just prose")]).expect("fake");
    let mut req = ask();
    req.schema = None;
    let done = client(config(server.base_url())).complete(&req);
    assert_eq!(done.outcome.value(), Some(&json!("just prose")));
    assert!(server.requests()[0].json().get("response_format").is_none());
}

// ---- request shapes ----

#[test]
fn openai_request_shape_with_json_schema() {
    let (server, _done) = one(FakeResponse::openai_text(VERDICT));
    let r = &server.requests()[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("authorization"), None, "no key configured");
    let b = r.json();
    assert_eq!(b["model"], "fake-model");
    assert_eq!(b["temperature"], 0.0);
    assert_eq!(b["max_tokens"], 512);
    assert_eq!(b["stream"], false);
    assert_eq!(
        b["messages"][0],
        json!({"role": "system", "content": "You label text. Reply with JSON."})
    );
    assert_eq!(
        b["messages"][1],
        json!({"role": "user", "content": "label this: hello there"})
    );
    assert_eq!(
        b["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema(), "strict": true}})
    );
}

#[test]
fn openai_json_object_mode_and_max_completion_tokens() {
    let server = FakeServer::start(vec![FakeResponse::openai_text(VERDICT)]).expect("fake");
    let mut c = config(server.base_url());
    c.structured = Some(Structured::JsonObject);
    c.max_tokens_field = rampart_llm::MaxTokensField::MaxCompletionTokens;
    let mut req = ask();
    req.max_tokens = Some(64);
    let done = client(c).complete(&req);
    assert!(done.outcome.is_ok());
    let b = server.requests()[0].json();
    assert_eq!(b["response_format"], json!({"type": "json_object"}));
    assert_eq!(b["max_completion_tokens"], 64);
    assert!(b.get("max_tokens").is_none());
}

#[test]
fn openai_json_object_with_schema_for_llama_cpp() {
    let server = FakeServer::start(vec![FakeResponse::openai_text(VERDICT)]).expect("fake");
    let mut c = config(server.base_url());
    c.structured = Some(Structured::JsonObjectSchema);
    assert!(client(c).complete(&ask()).outcome.is_ok());
    assert_eq!(
        server.requests()[0].json()["response_format"],
        json!({"type": "json_object", "schema": schema()})
    );
}

#[test]
fn structured_none_sends_no_response_format() {
    let server = FakeServer::start(vec![FakeResponse::openai_text(VERDICT)]).expect("fake");
    let mut c = config(server.base_url());
    c.structured = Some(Structured::None);
    assert!(client(c).complete(&ask()).outcome.is_ok());
    assert!(server.requests()[0].json().get("response_format").is_none());
}

#[test]
fn api_key_from_env_var_and_extra_headers_are_sent() {
    // `std::env::set_var` needs `unsafe` in edition 2024 and the workspace forbids unsafe
    // code, so the test re-runs itself with the variable set in the child's environment.
    let var = "RAMPART_LLM_TEST_KEY_OPENAI_7F3A";
    let Ok(key) = std::env::var(var) else {
        let exe = std::env::current_exe().expect("test binary");
        let status = std::process::Command::new(exe)
            .args([
                "--exact",
                "api_key_from_env_var_and_extra_headers_are_sent",
                "--nocapture",
            ])
            .env(var, "sk-test-123")
            .status()
            .expect("re-run the test with the key set");
        assert!(status.success());
        return;
    };
    assert_eq!(key, "sk-test-123");
    let server = FakeServer::start(vec![FakeResponse::openai_text(VERDICT)]).expect("fake");
    let mut c = config(server.base_url());
    c.api_key_env = Some(var.into());
    c.headers.insert("X-Team".into(), "secops".into());
    let cl = client(c);
    assert!(cl.api_key_sent());
    assert!(
        !format!("{cl:?}").contains("sk-test-123"),
        "Debug hides the key"
    );
    assert!(cl.complete(&ask()).outcome.is_ok());
    let r = &server.requests()[0];
    assert_eq!(r.header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(r.header("x-team"), Some("secops"));
}

#[test]
fn key_env_var_unset_sends_no_key_and_warns() {
    let server = FakeServer::start(vec![FakeResponse::openai_text(VERDICT)]).expect("fake");
    let mut c = config(server.base_url());
    c.api_key_env = Some("RAMPART_LLM_TEST_SURELY_UNSET_VAR_91C2".into());
    let cl = client(c);
    assert!(!cl.api_key_sent());
    assert!(
        cl.warnings()
            .iter()
            .any(|w| w.contains("RAMPART_LLM_TEST_SURELY_UNSET_VAR_91C2"))
    );
    assert!(cl.complete(&ask()).outcome.is_ok());
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[test]
fn anthropic_request_shape_and_response_parsing() {
    let var = "RAMPART_LLM_TEST_KEY_ANTHROPIC_52D1";
    let Ok(_) = std::env::var(var) else {
        let exe = std::env::current_exe().expect("test binary");
        let status = std::process::Command::new(exe)
            .args(["--exact", "anthropic_request_shape_and_response_parsing"])
            .env(var, "ak-test-456")
            .status()
            .expect("re-run the test with the key set");
        assert!(status.success());
        return;
    };
    let reply = FakeResponse::json(
        200,
        &json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [
                {"type": "text", "text": "{\"label\": \"suspicious\","},
                {"type": "text", "text": " \"confidence\": 0.5}"}
            ],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 5}
        }),
    );
    let server = FakeServer::start(vec![reply]).expect("fake");
    let mut c = LlmConfig::new(Protocol::Anthropic, server.base_url(), "claude-x");
    c.api_key_env = Some(var.into());
    c.prices.insert(
        "claude-x".into(),
        Price {
            input_per_mtok: 3.0,
            output_per_mtok: 15.0,
        },
    );
    let done = client(c).complete(&ask());
    assert_eq!(done.outcome.value().expect("ok")["label"], "suspicious");
    let u = done.usage.expect("usage");
    assert_eq!((u.input_tokens, u.output_tokens), (105, 20));
    let cost = done.cost_usd.expect("priced");
    assert!((cost - (105.0 * 3.0 + 20.0 * 15.0) / 1e6).abs() < 1e-12);
    assert_eq!(done.model.as_deref(), Some("claude-x"));
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("ak-test-456"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    let b = r.json();
    assert_eq!(b["system"], "You label text. Reply with JSON.");
    assert_eq!(b["max_tokens"], 512);
    assert_eq!(b["model"], "claude-x");
    assert_eq!(
        b["messages"],
        json!([{"role": "user", "content": "label this: hello there"}])
    );
    assert!(b.get("response_format").is_none());
}

#[test]
fn anthropic_prefill_and_version_override() {
    let server = FakeServer::start(vec![FakeResponse::anthropic_text(
        "\"label\": \"benign\", \"confidence\": 0.2}",
        "end_turn",
    )])
    .expect("fake");
    let mut c = LlmConfig::new(Protocol::Anthropic, server.base_url(), "claude-x");
    c.prefill_json = true;
    c.headers
        .insert("anthropic-version".into(), "2099-01-01".into());
    let done = client(c).complete(&ask());
    assert_eq!(done.outcome.value().expect("ok")["label"], "benign");
    let r = &server.requests()[0];
    assert_eq!(r.header("anthropic-version"), Some("2099-01-01"));
    let msgs = r.json()["messages"].clone();
    assert_eq!(msgs[1], json!({"role": "assistant", "content": "{"}));
}

#[test]
fn anthropic_stop_reasons_map_to_outcomes() {
    let server = FakeServer::start(vec![
        FakeResponse::anthropic_text("I won't label this.", "refusal"),
        FakeResponse::anthropic_text("{\"label\": \"benign\", \"conf", "max_tokens"),
        FakeResponse::json(
            200,
            &json!({"type": "message", "model": "m", "content": [], "stop_reason": "end_turn",
                    "usage": {"input_tokens": 3, "output_tokens": 0}}),
        ),
    ])
    .expect("fake");
    let cl = client(LlmConfig::new(
        Protocol::Anthropic,
        server.base_url(),
        "claude-x",
    ));
    assert_eq!(cl.complete(&ask()).outcome.kind(), OutcomeKind::Refused);
    assert_eq!(cl.complete(&ask()).outcome, Outcome::Truncated);
    let empty = cl.complete(&ask());
    assert_eq!(empty.outcome, Outcome::Empty);
    assert_eq!(empty.usage.map(|u| u.input_tokens), Some(3));
}

// ---- refused ----

#[test]
fn refused_by_openai_refusal_field() {
    let (_s, done) = one(FakeResponse::json(
        200,
        &json!({"model": "m", "choices": [{"message": {"role": "assistant", "content": null,
            "refusal": "I'm sorry, I cannot help with that request about hello there"},
            "finish_reason": "stop"}]}),
    ));
    match done.outcome {
        Outcome::Refused { reason } => {
            assert!(reason.contains("message.refusal"));
            assert!(
                !reason.contains("hello there"),
                "no model text in the reason"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn refused_by_content_filter() {
    let (_s, done) = one(FakeResponse::openai(Some(""), "content_filter", None));
    assert_eq!(done.outcome.kind(), OutcomeKind::Refused);
}

#[test]
fn refused_by_refusal_phrase_without_json() {
    let (_s, done) = one(FakeResponse::openai_text(
        "I can't help with classifying that text.",
    ));
    assert_eq!(done.outcome.kind(), OutcomeKind::Refused);
}

// ---- unparseable ----

#[test]
fn unparseable_prose_has_no_model_text_in_detail() {
    let (_s, done) = one(FakeResponse::openai_text(
        "The text seems fine to me, secret-marker-xyz.",
    ));
    match done.outcome {
        Outcome::Unparseable { detail } => {
            assert!(!detail.contains("secret-marker-xyz"));
            assert!(detail.contains("45 characters"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unparseable_when_the_object_breaks_the_schema() {
    let (_s, done) = one(FakeResponse::openai_text(
        r#"{"label": "safe", "confidence": 0.1}"#,
    ));
    match done.outcome {
        Outcome::Unparseable { detail } => assert!(detail.contains("$.label"), "{detail}"),
        other => panic!("{other:?}"),
    }
    // A reply that answers with an extra "verdict" key is not accepted either.
    let (_s, done) = one(FakeResponse::openai_text(
        r#"{"label": "benign", "confidence": 0.1, "note": "x"}"#,
    ));
    assert_eq!(done.outcome.kind(), OutcomeKind::Unparseable);
}

// ---- empty ----

#[test]
fn empty_content_null_and_whitespace() {
    let (_s, done) = one(FakeResponse::openai(None, "stop", Some((9, 0))));
    assert_eq!(done.outcome, Outcome::Empty);
    assert_eq!(done.usage.map(|u| u.input_tokens), Some(9));
    let (_s, done) = one(FakeResponse::openai(Some("  \n "), "stop", None));
    assert_eq!(done.outcome, Outcome::Empty);
    assert_eq!(done.usage, None);
}

// ---- truncated ----

#[test]
fn truncated_even_when_json_parses() {
    let (_s, done) = one(FakeResponse::openai(
        Some(VERDICT),
        "length",
        Some((10, 512)),
    ));
    assert_eq!(done.outcome, Outcome::Truncated);
    assert_eq!(done.outcome.kind().name(), "truncated");
    assert_eq!(done.usage.map(|u| u.output_tokens), Some(512));
}

// ---- timeout ----

#[test]
fn timeout_when_the_server_is_slow_and_no_retry() {
    let server = FakeServer::start(vec![
        FakeResponse::openai_text(VERDICT).with_delay(Duration::from_secs(3)),
    ])
    .expect("fake");
    let mut c = config(server.base_url());
    c.timeout_ms = 300;
    c.max_retries = 3;
    let done = client(c).complete(&ask());
    assert_eq!(done.outcome, Outcome::Timeout);
    assert_eq!(done.attempts, 1);
    // Timing is the point here; the bound is generous for a loaded machine.
    assert!(done.latency_ms < 2_500, "{}", done.latency_ms);
    assert_eq!(server.request_count(), 1);
}

#[test]
fn timeout_while_waiting_for_a_concurrency_slot() {
    let server = FakeServer::start(vec![
        FakeResponse::openai_text(VERDICT).with_delay(Duration::from_millis(1500)),
    ])
    .expect("fake");
    let mut c = config(server.base_url());
    c.concurrency = 1;
    c.timeout_ms = 30_000;
    let cl = client(c);
    let holder = {
        let cl = cl.clone();
        thread::spawn(move || cl.complete(&ask()))
    };
    // The first call holds the only slot from before its request reached the server until
    // its answer (1.5 s later) is read.
    assert!(server.wait_for_requests(1, Duration::from_secs(20)));
    let waited = cl.complete(&ChatRequest {
        timeout_ms: Some(200),
        ..ask()
    });
    assert_eq!(waited.outcome, Outcome::Timeout);
    assert_eq!(waited.attempts, 0, "no request made");
    assert_eq!(waited.http_status, None);
    let first = holder.join().expect("holder thread");
    assert!(first.outcome.is_ok());
    assert_eq!(server.request_count(), 1);
}

#[test]
fn concurrency_limit_bounds_requests_in_flight() {
    let server = FakeServer::start_repeating(
        FakeResponse::openai_text(VERDICT).with_delay(Duration::from_millis(150)),
    )
    .expect("fake");
    let mut c = config(server.base_url());
    c.concurrency = 2;
    c.timeout_ms = 60_000;
    let cl = Arc::new(client(c));
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let cl = Arc::clone(&cl);
            thread::spawn(move || cl.complete(&ask()))
        })
        .collect();
    for h in handles {
        assert!(h.join().expect("thread").outcome.is_ok());
    }
    assert_eq!(server.request_count(), 6);
    assert!(server.max_in_flight() <= 2, "{}", server.max_in_flight());
    assert!(server.max_in_flight() >= 1);
}

// ---- HTTP errors ----

#[test]
fn http_error_when_the_server_is_down() {
    let url = FakeServer::down_url().expect("free port");
    let mut c = config(url);
    c.max_retries = 3;
    let done = client(c).complete(&ask());
    match &done.outcome {
        Outcome::HttpError { status, detail } => {
            assert_eq!(*status, None);
            assert!(!detail.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(done.attempts, 1, "connection errors are not retried");
}

#[test]
fn http_error_on_an_html_200() {
    let (_s, done) = one(FakeResponse::raw(
        200,
        "text/html",
        "<html><body>Welcome to nginx!</body></html>",
    ));
    match done.outcome {
        Outcome::HttpError {
            status: Some(200),
            detail,
        } => {
            assert!(
                detail.starts_with("response is not a chat completion"),
                "{detail}"
            );
            assert!(detail.contains("text/html"), "{detail}");
            assert!(!detail.contains("nginx"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn http_error_on_json_of_the_wrong_shape() {
    for body in [
        json!({"result": "benign"}),
        json!({"choices": []}),
        json!({"choices": [{"text": "legacy completion"}]}),
        json!([1, 2, 3]),
        json!({"error": {"message": "proxy says no"}}),
    ] {
        let (_s, done) = one(FakeResponse::json(200, &body));
        match &done.outcome {
            Outcome::HttpError {
                status: Some(200),
                detail,
            } => assert!(
                detail.starts_with("response is not a chat completion"),
                "{detail}"
            ),
            other => panic!("{body}: {other:?}"),
        }
    }
    // An OpenAI-shaped reply sent to an Anthropic client is the wrong shape too.
    let server = FakeServer::start(vec![FakeResponse::openai_text(VERDICT)]).expect("fake");
    let done = client(LlmConfig::new(Protocol::Anthropic, server.base_url(), "c")).complete(&ask());
    assert_eq!(done.outcome.kind(), OutcomeKind::HttpError);
}

#[test]
fn http_error_400_is_not_retried() {
    let server = FakeServer::start(vec![
        FakeResponse::json(
            400,
            &json!({"error": {"type": "invalid_request_error", "message": "bad model"}}),
        ),
        FakeResponse::openai_text(VERDICT),
    ])
    .expect("fake");
    let mut c = config(server.base_url());
    c.max_retries = 3;
    let done = client(c).complete(&ask());
    assert_eq!(
        done.outcome,
        Outcome::HttpError {
            status: Some(400),
            detail: "HTTP 400: invalid_request_error: bad model".into()
        }
    );
    assert_eq!(done.attempts, 1);
    assert_eq!(server.request_count(), 1);
}

#[test]
fn http_error_after_500s_exhaust_the_retries() {
    let server = FakeServer::start_repeating(FakeResponse::raw(503, "text/html", "<h1>down</h1>"))
        .expect("fake");
    let mut c = config(server.base_url());
    c.max_retries = 2;
    let done = client(c).complete(&ask());
    match &done.outcome {
        Outcome::HttpError {
            status: Some(503),
            detail,
        } => assert!(detail.contains("after 3 attempts"), "{detail}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(done.attempts, 3);
    assert_eq!(server.request_count(), 3);
}

#[test]
fn retry_after_429_then_ok() {
    let server = FakeServer::start(vec![
        FakeResponse::json(429, &json!({"error": {"message": "slow down"}}))
            .with_header("Retry-After", "1"),
        FakeResponse::openai_text(VERDICT),
    ])
    .expect("fake");
    let mut c = config(server.base_url());
    c.max_backoff_ms = 5_000;
    let done = client(c).complete(&ask());
    assert!(done.outcome.is_ok(), "{:?}", done.outcome);
    assert_eq!(done.attempts, 2);
    assert_eq!(done.http_status, Some(200));
    // Retry-After: 1 was honoured (a lower bound, not flaky under load).
    assert!(done.latency_ms >= 1_000, "{}", done.latency_ms);
}

#[test]
fn retry_after_ms_header_and_500_then_ok() {
    let server = FakeServer::start(vec![
        FakeResponse::raw(500, "text/plain", "oops").with_header("retry-after-ms", "10"),
        FakeResponse::raw(502, "text/plain", "oops"),
        FakeResponse::openai_text(VERDICT),
    ])
    .expect("fake");
    let done = client(config(server.base_url())).complete(&ask());
    assert!(done.outcome.is_ok());
    assert_eq!(done.attempts, 3);
}

#[test]
fn retry_after_beyond_the_cap_is_not_waited() {
    let server = FakeServer::start(vec![
        FakeResponse::json(429, &json!({"error": {"message": "quota"}}))
            .with_header("Retry-After", "120"),
        FakeResponse::openai_text(VERDICT),
    ])
    .expect("fake");
    let mut c = config(server.base_url());
    c.max_backoff_ms = 2_000;
    let done = client(c).complete(&ask());
    match &done.outcome {
        Outcome::HttpError {
            status: Some(429),
            detail,
        } => assert!(detail.contains("exceeds max_backoff_ms"), "{detail}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(done.attempts, 1);
    assert!(done.latency_ms < 60_000);
}

#[test]
fn retry_that_would_pass_the_deadline_is_not_made() {
    let server = FakeServer::start(vec![
        FakeResponse::raw(503, "text/plain", "busy").with_header("Retry-After", "5"),
        FakeResponse::openai_text(VERDICT),
    ])
    .expect("fake");
    let mut c = config(server.base_url());
    c.max_backoff_ms = 10_000;
    c.timeout_ms = 2_000;
    let done = client(c).complete(&ask());
    match &done.outcome {
        Outcome::HttpError {
            status: Some(503),
            detail,
        } => assert!(detail.contains("would pass timeout_ms"), "{detail}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 1);
}

#[test]
fn http_error_when_the_body_exceeds_the_cap() {
    let big = "x".repeat(4096);
    let server = FakeServer::start(vec![FakeResponse::openai_text(&big)]).expect("fake");
    let mut c = config(server.base_url());
    c.max_response_bytes = 1024;
    let done = client(c).complete(&ask());
    match &done.outcome {
        Outcome::HttpError {
            status: Some(200),
            detail,
        } => assert!(detail.contains("max_response_bytes"), "{detail}"),
        other => panic!("{other:?}"),
    }
}

// ---- accounting and budgets ----

#[test]
fn cost_from_the_price_table_and_unknown_model() {
    let server = FakeServer::start(vec![FakeResponse::openai(
        Some(VERDICT),
        "stop",
        Some((1_000_000, 500_000)),
    )])
    .expect("fake");
    let mut c = config(server.base_url());
    // The server reports "fake-model"; its price is used.
    c.prices.insert(
        "fake-model".into(),
        Price {
            input_per_mtok: 0.5,
            output_per_mtok: 2.0,
        },
    );
    let done = client(c).complete(&ask());
    assert_eq!(done.cost_usd, Some(1.5));

    let server = FakeServer::start(vec![FakeResponse::openai_text(VERDICT)]).expect("fake");
    let mut c = config(server.base_url());
    c.model = "unpriced".into();
    let cl = client(c);
    assert!(
        cl.warnings()
            .iter()
            .any(|w| w.contains("no price for model \"unpriced\""))
    );
    let done = cl.complete(&ask());
    assert!(done.usage.is_some());
    assert_eq!(done.cost_usd, None);
}

#[test]
fn budget_exhausted_makes_no_request() {
    let server =
        FakeServer::start_repeating(FakeResponse::openai(Some(VERDICT), "stop", Some((80, 40))))
            .expect("fake");
    let mut c = config(server.base_url());
    c.budget.per_minute = Some(Limit {
        tokens: Some(100),
        usd: None,
    });
    let cl = client(c);
    assert!(cl.complete(&ask()).outcome.is_ok());
    assert_eq!(server.request_count(), 1);
    let done = cl.complete(&ask());
    assert_eq!(
        done.outcome,
        Outcome::BudgetExhausted {
            window: BudgetWindow::Minute,
            resource: BudgetResource::Tokens,
            limit: 100.0,
            used: 120.0
        }
    );
    assert_eq!(done.attempts, 0);
    assert_eq!(done.http_status, None);
    assert_eq!(
        server.request_count(),
        1,
        "no HTTP request after the budget is spent"
    );
}

#[test]
fn usd_budget_per_day_is_enforced_and_shared_by_clones() {
    let server = FakeServer::start_repeating(FakeResponse::openai(
        Some(VERDICT),
        "stop",
        Some((1_000, 0)),
    ))
    .expect("fake");
    let mut c = config(server.base_url());
    c.prices.insert(
        "fake-model".into(),
        Price {
            input_per_mtok: 1_000.0,
            output_per_mtok: 0.0,
        },
    );
    c.budget.per_day = Some(Limit {
        tokens: None,
        usd: Some(2.0),
    });
    let a = client(c);
    let b = a.clone();
    assert_eq!(a.complete(&ask()).cost_usd, Some(1.0));
    assert_eq!(b.complete(&ask()).cost_usd, Some(1.0));
    let done = a.complete(&ask());
    assert!(matches!(
        done.outcome,
        Outcome::BudgetExhausted {
            window: BudgetWindow::Day,
            resource: BudgetResource::Usd,
            ..
        }
    ));
    assert_eq!(server.request_count(), 2);
}

#[test]
fn every_outcome_kind_serializes_with_its_name() {
    let o = Outcome::HttpError {
        status: Some(503),
        detail: "x".into(),
    };
    let v = serde_json::to_value(&o).expect("serializes");
    assert_eq!(v["kind"], o.kind().name());
    let back: Outcome = serde_json::from_value(v).expect("round trip");
    assert_eq!(back, o);
}

#[test]
fn client_is_send_sync_and_completion_serializes() {
    fn send_sync<T: Send + Sync + Clone + 'static>() {}
    send_sync::<LlmClient>();
    let (_s, done) = one(FakeResponse::openai_text(VERDICT));
    let v = serde_json::to_value(&done).expect("serializes");
    assert_eq!(v["outcome"]["kind"], "ok");
    assert_eq!(v["usage"]["input_tokens"], 10);
    assert_eq!(v["attempts"], 1);
}
