//! Rampart's checks of model answers, usable without a server (an agent framework, a
//! language binding, the proxy of `rampart-server`): the output scanner (leaked secrets,
//! canary tokens, the system prompt repeated verbatim), canaries to plant, the parser and
//! hold-back guard for streamed answers, and the tool-call gate that decides a model's tool
//! calls by a policy before anything acts on them.
//!
//! Everything is built once and then shared: [`OutputScanner`] and [`tool_gate::ToolGate`]
//! are immutable (`&self` methods), `Send + Sync`.
//!
//! ```
//! use rampart_core::Action;
//! use rampart_output::canary::{Canary, CanarySet};
//! use rampart_output::tool_gate::{PendingCall, PlainAnswer, ToolGate};
//! use rampart_output::{OutputConfig, OutputContext, OutputScanner};
//! use rampart_tools::{Policy, ToolAction};
//! use serde_json::{Value, json};
//!
//! // Scan a model answer: a leaked credential blocks it.
//! let scanner = OutputScanner::build(&rampart_rules::rules_config(), &OutputConfig::default())?;
//! let out = scanner.scan("Sure, the key is AKIAIOSFODNN7EXAMPLE.", &OutputContext::default(), None)?;
//! assert_eq!(out.decision.action, Action::Block);
//! assert_eq!(out.decision.findings[0].rule_id, "CRED_003");
//!
//! // A canary planted in the system prompt is found even spaced out.
//! let canary = Canary::generate("rc-")?;
//! let ctx = OutputContext { canaries: CanarySet::new([&canary]), system_prompt: None };
//! let spaced: String = canary.expose().chars().flat_map(|c| [c, ' ']).collect();
//! assert_eq!(scanner.scan(&spaced, &ctx, None)?.decision.action, Action::Block);
//!
//! // Gate the tool calls of an answer: the call outside the allowed directory is taken out.
//! let policy = Policy::from_toml(r#"
//! version = 1
//! [[tools]]
//! name = "read_file"
//! risk = "low"
//! action = "allow"
//! args.path = { path_under = ["/srv/docs"] }
//! "#)?;
//! let gate = ToolGate::builder(policy).build()?;
//! let answer = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
//!     "role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
//!     "function": {"name": "read_file", "arguments": "{\"path\": \"/etc/passwd\"}"}}]}}]});
//! let plain = PlainAnswer::parse(&serde_json::to_vec(&answer)?)?.expect("a tool call");
//! let now_ms = 1_700_000_000_000;
//! let verdicts: Vec<_> = plain
//!     .calls()
//!     .map(|c| gate.decide(PendingCall::new(c.name(), c.arguments()), now_ms))
//!     .collect();
//! let (gated, strictest) = plain.apply(&verdicts)?;
//! assert_eq!(strictest, ToolAction::Block);
//! let gated: Value = serde_json::from_slice(&gated)?;
//! assert_eq!(gated["choices"][0]["finish_reason"], "stop");
//! assert!(gated["choices"][0]["message"].get("tool_calls").is_none());
//! assert_eq!(gated["rampart"]["tool_decisions"][0]["failed_argument"], "path");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod answer;
pub mod canary;
mod prompt_index;
mod scanner;
pub mod sse;
pub mod tool_gate;

pub use prompt_index::PromptIndex;
pub use scanner::{
    CANARY_LEAK_ID, OutputConfig, OutputConfigError, OutputContext, OutputError, OutputOutcome,
    OutputScanner, SYSTEM_PROMPT_LEAK_ID,
};
