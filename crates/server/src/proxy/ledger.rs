//! The answer ledger: every answer the client receives whole (plain, or a completed stream
//! assembled from its deltas) is recorded in the conversation state, so it verifies when
//! the client sends it back.

use super::turns::assistant_turn;
use rampart_conversation::ConversationScanner;
use rampart_core::Role;
use rampart_core::conversation::{ConversationRequest, ToolCall, Turn};
use serde_json::Value;
use std::sync::Arc;

/// Where the answer to a conversation-scanned request is recorded once the client has it
/// whole: the scanner (its ledger and store) and the conversation as the client sent it.
/// The client's messages, not the forwarded ones: the next request carries the client's
/// history (its own texts, forged turns included), and that is what the answer must verify
/// against.
pub(super) struct AnswerLedger {
    pub(super) scanner: Arc<ConversationScanner>,
    pub(super) conversation: Arc<ConversationRequest>,
}

impl AnswerLedger {
    /// Records each choice's message of a plain chat completion, before the client has it
    /// (so its next request verifies on any replica).
    pub(super) async fn record_completion(&self, body: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(body) else {
            return;
        };
        let answers: Vec<Turn> = v
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("message").map(assistant_turn))
            .collect();
        if let Some(task) = self.record_all(answers) {
            let _ = task.await;
        }
    }

    /// Records `answers`: inline in the process's state; with the shared state (blocking
    /// I/O) on the blocking pool, returning the task. A failure there is logged: the
    /// answer will read as forged history when sent back (`HIST_FORGED`, per policy).
    fn record_all(&self, answers: Vec<Turn>) -> Option<tokio::task::JoinHandle<()>> {
        if !self.scanner.is_shared() {
            for a in &answers {
                self.scanner.record_answer(&self.conversation.turns, a);
            }
            return None;
        }
        let (scanner, conversation) = (self.scanner.clone(), self.conversation.clone());
        Some(tokio::task::spawn_blocking(move || {
            for a in &answers {
                if let Err(e) = scanner.try_record_answer(&conversation.turns, a) {
                    tracing::warn!(error = %e, "an answer could not be recorded in the shared conversation state");
                }
            }
        }))
    }
}

/// A streamed chat answer put together from its deltas: per choice, the content and the tool
/// calls (name and arguments appended piece by piece, by call index).
#[derive(Debug, Default)]
pub(super) struct StreamedAnswer {
    choices: std::collections::BTreeMap<u64, (String, std::collections::BTreeMap<u64, ToolCall>)>,
}

impl StreamedAnswer {
    /// Folds one event's data (`[DONE]` and anything not JSON are ignored).
    pub(super) fn push(&mut self, data: &str) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        for c in v
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = c.get("index").and_then(Value::as_u64).unwrap_or(0);
            let Some(delta) = c.get("delta") else {
                continue;
            };
            let (text, calls) = self.choices.entry(index).or_default();
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                text.push_str(t);
            }
            let mut fold = |at: u64, id: Option<&str>, f: &Value| {
                let call = calls.entry(at).or_insert_with(|| ToolCall {
                    id: None,
                    name: String::new(),
                    arguments: String::new(),
                });
                if let Some(id) = id {
                    call.id = Some(id.to_string());
                }
                if let Some(n) = f.get("name").and_then(Value::as_str) {
                    call.name.push_str(n);
                }
                if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                    call.arguments.push_str(a);
                }
            };
            for tc in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let at = tc.get("index").and_then(Value::as_u64).unwrap_or(0);
                if let Some(f) = tc.get("function") {
                    fold(at, tc.get("id").and_then(Value::as_str), f);
                }
            }
            // The legacy single function call: after any tool calls.
            if let Some(f) = delta.get("function_call") {
                fold(u64::MAX, None, f);
            }
        }
    }

    /// Records every choice's assembled message (with the shared state, in the
    /// background: the stream has already reached the client).
    pub(super) fn record(self, ledger: &AnswerLedger) {
        let answers = self
            .choices
            .into_values()
            .map(|(text, calls)| {
                let mut t = Turn::new(Role::Assistant, text);
                t.tool_calls = calls.into_values().collect();
                t
            })
            .collect();
        drop(ledger.record_all(answers));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_answer_is_assembled_from_its_deltas() {
        let mut a = StreamedAnswer::default();
        for data in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"g","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\"a"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"[2]"}}]}}]}"#,
            r#"{"choices":[{"index":1,"delta":{"function_call":{"name":"h","arguments":"{}"}}}]}"#,
            "[DONE]",
        ] {
            a.push(data);
        }
        let (text, calls) = &a.choices[&0];
        assert_eq!(text, "Hello");
        let calls: Vec<(Option<&str>, &str, &str)> = calls
            .values()
            .map(|c| (c.id.as_deref(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [(Some("c1"), "f", "{\"a\":1}"), (Some("c2"), "g", "[2]")]
        );
        let (text, calls) = &a.choices[&1];
        assert!(text.is_empty());
        assert_eq!(
            calls.values().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["h"]
        );
    }
}
