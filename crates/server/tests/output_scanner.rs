//! The output scanner is built with the pipeline, at start-up and on reload: a rule pack that
//! breaks afterwards cannot fail a request, and one that is broken is refused where the
//! configuration is loaded.
#![allow(clippy::unwrap_used)]

use crate::{server, upstream};
use rampart_server::config::ServerConfig;
use rampart_server::{Server, ServerOptions};
use serde_json::{Value, json};
use server::{Running, client, error_chain, post, spawn};
use std::path::Path;
use upstream::{MockConfig, MockUpstream, Reply};

/// A pack with one credential rule, so the output scanner loads it.
const CRED_PACK: &str = r#"schema_version = 1
[pack]
name = "test-output"
version = "1"
[[rules]]
id = "CRED_900"
kind = "literal"
patterns = ["zebra-secret-0042"]
strength = "strong"
severity = "high_risk"
rationale = "test credential"
must_match = ["token zebra-secret-0042"]
must_not_match = ["a zebra at the zoo"]
"#;

const LEAK: &str = "Here you go: zebra-secret-0042, keep it safe.";

fn write_config(dir: &Path, upstream: Option<&MockUpstream>) -> ServerConfig {
    std::fs::write(dir.join("extra.toml"), CRED_PACK).unwrap();
    let mut src = String::from(
        "version = 1\n[server]\nlisten = \"127.0.0.1:0\"\n[pipeline]\npacks = [\"extra.toml\"]\n",
    );
    if let Some(up) = upstream {
        src.push_str(&format!(
            "[proxy]\nupstream_url = {:?}\nupstream_api_key_env = \"RAMPART_TEST_SURELY_UNSET_KEY\"\n",
            up.base_url()
        ));
    }
    server::write_config(dir, &src)
}

async fn start(cfg: ServerConfig) -> Result<Running, rampart_server::ServerError> {
    Ok(spawn(
        Server::bind(cfg, ServerOptions::rules_only()).await?,
        None,
    ))
}

/// `POST /v1/scan/output` of [`LEAK`].
async fn scan_leak(s: &Running) -> (u16, Value) {
    post(
        &client(),
        &s.url("/v1/scan/output"),
        None,
        &json!({"text": LEAK}),
    )
    .await
}

fn rule_ids(decision: &Value) -> Vec<String> {
    decision["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["rule_id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The scanner's packs were read at start-up: breaking a pack file afterwards changes
/// nothing until a reload, which refuses it; the old configuration keeps serving.
#[tokio::test]
async fn output_scanner_does_not_reread_packs_at_request_time() {
    let dir = tempfile::tempdir().unwrap();
    let up = MockUpstream::start(MockConfig {
        reply: Reply::Text(LEAK.into()),
        ..Default::default()
    })
    .await;
    let s = start(write_config(dir.path(), Some(&up))).await.unwrap();
    // Broken before the first output scan (the old code built the scanner then).
    std::fs::write(dir.path().join("extra.toml"), "this is not a rule pack").unwrap();

    let (st, v) = scan_leak(&s).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["action"], "BLOCK", "{v}");
    assert!(rule_ids(&v).contains(&"CRED_900".to_string()), "{v}");

    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "the token?"}]});
    let (st, v) = post(&client(), &s.url("/v1/chat/completions"), None, &chat).await;
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["code"], "rampart_output_blocked", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("CRED_900"),
        "{v}"
    );

    // A reload reads the broken pack and is refused; the old scanner keeps serving.
    let err = s.state.reload().await.unwrap_err();
    assert!(err.to_string().contains("extra.toml"), "{err}");
    let (st, v) = scan_leak(&s).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["action"], "BLOCK", "{v}");

    // Once the pack is good again, a reload takes it.
    std::fs::write(dir.path().join("extra.toml"), CRED_PACK).unwrap();
    s.state.reload().await.unwrap();
    let (st, v) = scan_leak(&s).await;
    assert_eq!((st, v["action"].as_str()), (200, Some("BLOCK")), "{v}");
}

#[tokio::test]
async fn unreadable_pack_fails_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), None);
    std::fs::remove_file(dir.path().join("extra.toml")).unwrap();
    let err = start(cfg)
        .await
        .err()
        .expect("start-up refuses a missing pack");
    // The path is in the error's source chain (the server's errors are typed and chained).
    let chain = error_chain(&err);
    assert!(chain.contains("extra.toml"), "{chain}");
}

/// Issue 35 (7): the output scan read `content`, `refusal` and `reasoning_content` only; a
/// secret left the proxy through `message.reasoning`, `audio.transcript` and the
/// log-probability tokens (split over tokens), plain and streamed.
#[tokio::test]
async fn regression_every_text_field_of_an_answer_is_scanned() {
    let tokens: Vec<Value> = ["zebra", "-secret", "-0042"]
        .iter()
        .map(|t| json!({"token": t, "logprob": -0.1}))
        .collect();
    let message = |extra: Value| {
        let mut m = json!({"role": "assistant", "content": "Nothing to see."});
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        m
    };
    let plain = [
        json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": message(json!({"reasoning": LEAK}))}]}),
        json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": message(json!({"audio": {"id": "a1", "transcript": LEAK}}))}]}),
        json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": message(json!({})), "logprobs": {"content": tokens}}]}),
    ];
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    for answer in plain {
        let dir = tempfile::tempdir().unwrap();
        let up = MockUpstream::start(MockConfig {
            reply: Reply::Raw {
                content_type: "application/json".into(),
                body: answer.to_string(),
            },
            ..Default::default()
        })
        .await;
        let s = start(write_config(dir.path(), Some(&up))).await.unwrap();
        let (st, v) = post(&client(), &s.url("/v1/chat/completions"), None, &chat).await;
        assert!(!v.to_string().contains("zebra-secret-0042"), "{st} {v}");
        assert!(
            !v.to_string().contains("\"-secret\""),
            "the tokens are gone or withheld: {v}"
        );
    }
    // Streamed: a reasoning delta.
    let event = json!({"id": "c", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"reasoning": LEAK}, "finish_reason": null}]});
    let body = format!("data: {event}\n\ndata: [DONE]\n\n");
    let dir = tempfile::tempdir().unwrap();
    let up = MockUpstream::start(MockConfig {
        reply: Reply::Raw {
            content_type: "text/event-stream".into(),
            body,
        },
        ..Default::default()
    })
    .await;
    let s = start(write_config(dir.path(), Some(&up))).await.unwrap();
    let mut streamed = chat.clone();
    streamed["stream"] = json!(true);
    let r = client()
        .post(s.url("/v1/chat/completions"))
        .json(&streamed)
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert!(!text.contains("zebra-secret-0042"), "{text}");
}
