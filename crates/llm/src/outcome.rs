//! What one call produced. Every failure is a distinct [`Outcome`] variant, never an error a
//! caller could default into a verdict.

use serde::{Deserialize, Serialize};

/// Token counts from the response's `usage` fields (OpenAI `prompt_tokens` /
/// `completion_tokens`, Anthropic `input_tokens` / `output_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub input_tokens: u64,
    /// Completion (output) tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Input + output.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// The budget window that was spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetWindow {
    /// The last 60 seconds (sliding).
    Minute,
    /// The current UTC day.
    Day,
}

impl BudgetWindow {
    /// `per-minute` or `per-day`, as messages name it.
    pub fn name(self) -> &'static str {
        match self {
            BudgetWindow::Minute => "per-minute",
            BudgetWindow::Day => "per-day",
        }
    }
}

/// What a budget limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetResource {
    /// Input + output tokens.
    Tokens,
    /// US dollars.
    Usd,
}

impl BudgetResource {
    /// `token` or `USD`, as messages name it.
    pub fn name(self) -> &'static str {
        match self {
            BudgetResource::Tokens => "token",
            BudgetResource::Usd => "USD",
        }
    }
}

/// The result of one [`crate::LlmClient::complete`] call.
///
/// Texts in `detail` and `reason` never contain the model's reply or the prompt (at most
/// lengths, schema property names, and for HTTP errors up to 200 characters of the server's own
/// error message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The model answered. With a schema, `value` is the JSON object that passed the schema
    /// check; without one, `value` is the reply as a JSON string.
    Ok {
        /// The parsed object (schema asked) or the text as a JSON string.
        value: serde_json::Value,
        /// The raw reply content.
        text: String,
        /// Whether the JSON needed extraction repair (fences and surrounding prose do not
        /// count; trailing commas, smart or single quotes, an unclosed object do).
        repaired: bool,
    },
    /// The model declined: an OpenAI `message.refusal`, `finish_reason: content_filter`,
    /// Anthropic `stop_reason: refusal`, or (when a schema was asked) a reply with no JSON
    /// object that opens with a refusal phrase.
    Refused {
        /// Which signal said so (not the model's text).
        reason: String,
    },
    /// Content was present but no JSON object matching the schema could be recovered.
    Unparseable {
        /// What was wrong (lengths and schema paths only).
        detail: String,
    },
    /// The reply had no content.
    Empty,
    /// The reply hit the output-token limit (`finish_reason: length`, `stop_reason:
    /// max_tokens`), whether or not some JSON parses.
    Truncated,
    /// The deadline (`timeout_ms`) passed: waiting for a concurrency slot, connecting, or
    /// waiting for the reply. Timeouts are not retried.
    Timeout,
    /// No chat completion came back: connection refused, DNS failure, a non-2xx status
    /// (after retries on 429/5xx), a body over the size cap, or a 2xx body that is not a chat
    /// completion of the configured protocol (HTML, the wrong JSON shape) with its status.
    HttpError {
        /// The last HTTP status, `None` when no response arrived.
        status: Option<u16>,
        /// What happened.
        detail: String,
    },
    /// A budget was spent before the call; no request was made.
    BudgetExhausted {
        /// Which window.
        window: BudgetWindow,
        /// What it counts.
        resource: BudgetResource,
        /// The configured limit.
        limit: f64,
        /// The amount used in the window.
        used: f64,
    },
}

/// The variant of an [`Outcome`], without its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// [`Outcome::Ok`].
    Ok,
    /// [`Outcome::Refused`].
    Refused,
    /// [`Outcome::Unparseable`].
    Unparseable,
    /// [`Outcome::Empty`].
    Empty,
    /// [`Outcome::Truncated`].
    Truncated,
    /// [`Outcome::Timeout`].
    Timeout,
    /// [`Outcome::HttpError`].
    HttpError,
    /// [`Outcome::BudgetExhausted`].
    BudgetExhausted,
}

impl OutcomeKind {
    /// Every kind, in declaration order.
    pub const ALL: [OutcomeKind; 8] = [
        OutcomeKind::Ok,
        OutcomeKind::Refused,
        OutcomeKind::Unparseable,
        OutcomeKind::Empty,
        OutcomeKind::Truncated,
        OutcomeKind::Timeout,
        OutcomeKind::HttpError,
        OutcomeKind::BudgetExhausted,
    ];

    /// The snake_case name (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            OutcomeKind::Ok => "ok",
            OutcomeKind::Refused => "refused",
            OutcomeKind::Unparseable => "unparseable",
            OutcomeKind::Empty => "empty",
            OutcomeKind::Truncated => "truncated",
            OutcomeKind::Timeout => "timeout",
            OutcomeKind::HttpError => "http_error",
            OutcomeKind::BudgetExhausted => "budget_exhausted",
        }
    }
}

impl std::fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Outcome {
    /// The variant without its data.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Ok { .. } => OutcomeKind::Ok,
            Outcome::Refused { .. } => OutcomeKind::Refused,
            Outcome::Unparseable { .. } => OutcomeKind::Unparseable,
            Outcome::Empty => OutcomeKind::Empty,
            Outcome::Truncated => OutcomeKind::Truncated,
            Outcome::Timeout => OutcomeKind::Timeout,
            Outcome::HttpError { .. } => OutcomeKind::HttpError,
            Outcome::BudgetExhausted { .. } => OutcomeKind::BudgetExhausted,
        }
    }

    /// Whether the model answered ([`Outcome::Ok`]).
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok { .. })
    }

    /// The answer's value when [`Outcome::Ok`].
    pub fn value(&self) -> Option<&serde_json::Value> {
        match self {
            Outcome::Ok { value, .. } => Some(value),
            _ => None,
        }
    }
}

/// Everything known about one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// What happened.
    pub outcome: Outcome,
    /// Tokens, when a 2xx response reported them (also for refused, truncated and unparseable
    /// replies: they were paid for).
    pub usage: Option<Usage>,
    /// Cost in USD from the price table; `None` when usage or the model's price is unknown
    /// (see [`crate::LlmClient::warnings`]).
    pub cost_usd: Option<f64>,
    /// Wall time of the whole call (slot wait, attempts, backoffs), in milliseconds.
    pub latency_ms: u64,
    /// HTTP requests made (0 when the budget or the slot wait stopped the call).
    pub attempts: u32,
    /// The model the server reported, if any.
    pub model: Option<String>,
    /// The last HTTP status received, if any.
    pub http_status: Option<u16>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_serializes_tagged_snake_case() {
        let o = Outcome::BudgetExhausted {
            window: BudgetWindow::Day,
            resource: BudgetResource::Usd,
            limit: 1.0,
            used: 1.5,
        };
        let j = serde_json::to_value(&o).expect("serializes");
        assert_eq!(j["kind"], "budget_exhausted");
        assert_eq!(j["window"], "day");
        assert_eq!(j["resource"], "usd");
        assert_eq!(
            serde_json::to_value(Outcome::Timeout).expect("serializes"),
            serde_json::json!({"kind": "timeout"})
        );
        for k in OutcomeKind::ALL {
            assert_eq!(
                serde_json::to_value(k).expect("serializes"),
                serde_json::Value::String(k.name().into())
            );
        }
    }
}
