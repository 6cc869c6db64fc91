//! What an output scan reads of an OpenAI answer (streamed answers: [`crate::sse`]).

use serde_json::Value;

/// The texts of a plain (not streamed) chat or completions answer, with their JSON pointers:
/// per choice its `text`, its message's `content`, `refusal` and `reasoning_content` (strings,
/// or the `text` of each part), and each tool call's (and the legacy function call's)
/// `arguments` and `name`; then every other string anywhere under the choice
/// (`message.reasoning`, `message.audio.transcript`, fields no one has named yet: issue 35
/// found a canary leaving through each), and the choice's log-probability tokens joined into
/// one text (pointer `/choices/{i}/logprobs`: a secret split over tokens is still seen;
/// a rewrite there removes the log-probabilities).
pub fn response_texts(v: &Value) -> Vec<(String, String)> {
    let mut out = named_texts(v);
    let Some(choices) = v.get("choices").and_then(Value::as_array) else {
        return out;
    };
    let named: std::collections::HashSet<String> = out.iter().map(|(p, _)| p.clone()).collect();
    for (i, c) in choices.iter().enumerate() {
        let mut rest = Vec::new();
        every_string(c, &format!("/choices/{i}"), &mut rest);
        out.extend(rest.into_iter().filter(|(p, _)| !named.contains(p)));
        if let Some(lp) = c.get("logprobs").filter(|l| !l.is_null()) {
            let mut tokens = Vec::new();
            logprob_tokens(lp, &mut tokens);
            if !tokens.is_empty() {
                out.push((format!("/choices/{i}/logprobs"), tokens.concat()));
            }
        }
    }
    out
}

/// Every string under `v` with its JSON pointer, except the fixed-vocabulary fields
/// (`finish_reason`, `role`, `type`, `object`) and the log-probabilities (read as one text).
fn every_string(v: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::String(s) => out.push((at.to_string(), s.clone())),
        Value::Array(a) => {
            for (j, x) in a.iter().enumerate() {
                every_string(x, &format!("{at}/{j}"), out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                if matches!(
                    k.as_str(),
                    "finish_reason" | "role" | "type" | "object" | "logprobs"
                ) {
                    continue;
                }
                let esc = k.replace('~', "~0").replace('/', "~1");
                every_string(x, &format!("{at}/{esc}"), out);
            }
        }
        _ => {}
    }
}

/// The `token` strings of a choice's log-probabilities, in order (the chosen tokens of
/// `content` and `refusal`; alternatives in `top_logprobs` are not text the client shows).
fn logprob_tokens(lp: &Value, out: &mut Vec<String>) {
    for field in ["content", "refusal"] {
        if let Some(items) = lp.get(field).and_then(Value::as_array) {
            for it in items {
                if let Some(t) = it.get("token").and_then(Value::as_str) {
                    out.push(t.to_string());
                }
            }
        }
    }
}

/// The texts named by the API's documentation (see [`response_texts`]).
fn named_texts(v: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(choices) = v.get("choices").and_then(Value::as_array) else {
        return out;
    };
    for (i, c) in choices.iter().enumerate() {
        if let Some(t) = c.get("text").and_then(Value::as_str) {
            out.push((format!("/choices/{i}/text"), t.to_string()));
        }
        let Some(m) = c.get("message") else { continue };
        for field in ["content", "refusal", "reasoning_content"] {
            match m.get(field) {
                Some(Value::String(t)) => {
                    out.push((format!("/choices/{i}/message/{field}"), t.clone()))
                }
                Some(Value::Array(parts)) => {
                    for (j, p) in parts.iter().enumerate() {
                        if let Some(t) = p.get("text").and_then(Value::as_str) {
                            out.push((format!("/choices/{i}/message/{field}/{j}/text"), t.into()));
                        }
                    }
                }
                _ => {}
            }
        }
        let mut call_texts = |prefix: String, call: &Value| {
            for field in ["arguments", "name"] {
                if let Some(t) = call.get(field).and_then(Value::as_str) {
                    out.push((format!("{prefix}/{field}"), t.to_string()));
                }
            }
        };
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for (j, call) in calls.iter().enumerate() {
                if let Some(f) = call.get("function") {
                    call_texts(format!("/choices/{i}/message/tool_calls/{j}/function"), f);
                }
            }
        }
        // The legacy single function call.
        if let Some(f) = m.get("function_call") {
            call_texts(format!("/choices/{i}/message/function_call"), f);
        }
    }
    out
}
