//! Judging a conversation record by replaying it as a client and a proxy would have lived
//! it: call by call, through a stateful [`ConversationScanner`] with a fresh state and
//! assistant ledger of its own (so no conversation leaks into another).
//!
//! The walk keeps `sent`, the messages the client holds:
//!
//! - a turn with `rewind: K` first cuts `sent` back to its first `K` messages;
//! - every turn is then pushed onto `sent`;
//! - at each *call end* (a message that is neither an assistant answer nor a system or
//!   developer prompt, followed by an assistant turn, by a turn with `rewind`, or by
//!   nothing: the last message is always judged) `sent` is scanned: that is what the client sent and waited on. A turn with
//!   `rewind` ends the call before it because the client only rewinds after an answer (or a
//!   block) to what it had sent;
//! - an assistant turn that is not `forged` is the model's answer to `sent`: the ledger
//!   records it (so later calls verify it) and a refusal becomes evidence, as the proxy
//!   does. A `forged` one is pushed without recording: the ledger will not know it.
//!
//! A conversation is flagged when any call's decision is not ALLOW.

use rampart_conversation::{
    AssistantLedger, ConversationOptions, ConversationScanner, ConversationStore, LoadOptionsError,
    OptionsError,
};
use rampart_core::conversation::{ConversationRequest, Turn};
use rampart_core::{Action, Decision, Role};
use rampart_datasets::DatasetTurn;
use std::path::Path;
use std::sync::Arc;

/// Key material of a replay's throwaway state and ledger: never persisted, never shared.
const REPLAY_KEY: &[u8] = b"rampart eval conversation replay";

/// One scanned call of a replay.
#[derive(Debug, Clone)]
pub struct ReplayCall {
    /// Index in the record's `turns` of the call's last message.
    pub message: usize,
    /// Messages sent (the length of `sent` when scanned).
    pub sent: usize,
    /// The call's decision (with the conversation part in `decision.conversation`).
    pub decision: Decision,
}

impl ReplayCall {
    /// Whether the call was flagged (any action but ALLOW).
    pub fn flagged(&self) -> bool {
        self.decision.action != Action::Allow
    }
}

/// What replaying one conversation gave.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// The calls scanned, in order (up to the one that failed, if one did).
    pub calls: Vec<ReplayCall>,
    /// A call the scanner refused (over the limits): its message index and why. The replay
    /// stops there; the evaluation counts it as flagged (fail closed).
    pub error: Option<(usize, String)>,
    /// Assistant answers recorded in the ledger.
    pub recorded: usize,
    /// Forged assistant turns pushed without recording.
    pub forged: usize,
    /// Rewinds applied.
    pub rewinds: usize,
}

impl Replay {
    /// The first flagged call: its 1-based number and the call.
    pub fn first_flag(&self) -> Option<(usize, &ReplayCall)> {
        self.calls
            .iter()
            .enumerate()
            .find(|(_, c)| c.flagged())
            .map(|(i, c)| (i + 1, c))
    }
}

/// Whether `turns[i]` ends a call (see the module docs).
pub fn is_call_end(turns: &[DatasetTurn], i: usize) -> bool {
    let Some(t) = turns.get(i) else {
        return false;
    };
    let Some(next) = turns.get(i + 1) else {
        return true; // the message to judge, whatever its role
    };
    let input = !matches!(t.role, Role::Assistant | Role::System | Role::Developer);
    input && (next.role == Role::Assistant || next.rewind.is_some())
}

/// Replays one conversation (see the module docs). `id` is echoed in the decisions.
///
/// `base` holds what is compiled (pipeline, detectors, options); the replay gets a fresh
/// state and ledger of its own from it.
pub fn replay(
    base: &ConversationScanner,
    id: &str,
    turns: &[DatasetTurn],
) -> Result<Replay, OptionsError> {
    let options = base.options();
    let store = Arc::new(ConversationStore::new(options.store.clone(), REPLAY_KEY)?);
    let ledger = Arc::new(AssistantLedger::new(options.ledger.clone(), REPLAY_KEY)?);
    let scanner = base.with_state(store, Some(ledger));
    let mut out = Replay::default();
    let mut sent: Vec<Turn> = Vec::with_capacity(turns.len());
    for (i, t) in turns.iter().enumerate() {
        if let Some(k) = t.rewind {
            sent.truncate(k);
            out.rewinds += 1;
        }
        let turn = t.to_turn();
        if t.role == Role::Assistant {
            if t.forged {
                out.forged += 1;
            } else {
                // The model's words: a reply to a call, or (after a system prompt) an
                // opening the application had the model write. Either way not forged.
                scanner.record_answer(&sent, &turn);
                out.recorded += 1;
            }
        }
        sent.push(turn);
        if is_call_end(turns, i) {
            let req = ConversationRequest {
                id: Some(id.to_string()),
                conversation_id: None,
                turns: sent.clone(),
            };
            match scanner.scan(&req) {
                Ok(o) => out.calls.push(ReplayCall {
                    message: i,
                    sent: sent.len(),
                    decision: o.decision,
                }),
                Err(e) => {
                    out.error = Some((i, e.to_string()));
                    return Ok(out);
                }
            }
        }
    }
    Ok(out)
}

/// Reads conversation options from a TOML file: its `[conversation]` table, in the shape of
/// [`ConversationOptions`] (unknown keys in it are errors; other top-level tables are
/// ignored, so a server configuration file can be given as it is). Checked with
/// [`ConversationOptions::validate`].
pub fn load_options(path: &Path) -> Result<ConversationOptions, crate::EvalError> {
    Ok(ConversationOptions::load(path)?)
}

/// [`load_options`] on a string.
pub fn parse_options(src: &str) -> Result<ConversationOptions, LoadOptionsError> {
    ConversationOptions::from_toml_str(src)
}
