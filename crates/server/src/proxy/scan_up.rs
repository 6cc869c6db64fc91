//! Step 2, the request scan: the pipeline (or, with `[conversation]`, the conversation
//! scanner) decides on the request, and the decision is recorded before anything is
//! forwarded.

use super::ledger::AnswerLedger;
use super::reply::blocked_response;
use super::rewrite::{apply_sanitized, drop_messages, sanitize_groups, sanitize_messages};
use super::turns::conversation_turns;
use super::wire::{ParsedRequest, Slot};
use super::{EP_CHAT, EP_CHAT_DEFINITIONS, Kind};
use crate::state::{AppState, Caller, ServiceError};
use axum::response::Response;
use rampart_conversation::{ConversationReport, ConversationScanner};
use rampart_core::conversation::{ConversationRequest, Turn};
use rampart_core::{Action, Decision, Role, ScanRequest, Segment};
use rampart_output::tool_gate::{SegmentPlace, flagged_conversation, tool_result_score};
use rampart_tools::SharedConversation;
use rampart_tools::provenance::Part;
use serde_json::Value;
use std::sync::Arc;

/// What the request scan decided.
pub(super) enum Upward {
    /// Forward the (possibly sanitized) body; the request's action, where the answer is
    /// to be recorded (conversation state), the highest injection score of its tool
    /// results (tool policies' flow rules), and the conversation as the client sent it with
    /// the spans the scan flagged (argument provenance; only when tools are enforced).
    Forward(
        Action,
        Option<AnswerLedger>,
        Option<f32>,
        Option<SharedConversation>,
    ),
    /// The request is blocked: this answer, the upstream sees nothing.
    Blocked(Response),
}

/// Step 2: the pipeline decides on the request; the decision is recorded before anything is
/// forwarded. SANITIZE rewrites the body in place.
pub(super) async fn scan_up(
    state: &AppState,
    caller: &Caller,
    kind: Kind,
    request: &mut ParsedRequest,
) -> Result<Upward, ServiceError> {
    let mut segments = std::mem::take(&mut request.extracted.segments);
    if segments.is_empty() {
        // Nothing textual (e.g. images only): the decision is still made and recorded.
        segments.push(Segment::new(Role::User, ""));
    }
    let outcome = state.scan(ScanRequest::segments(segments)).await?;
    // Before SANITIZE rewrites anything: the flagged spans are spans of these texts, and a
    // value the model saw in a removed span is still not the user's.
    let provenance = wants_provenance(state).then(|| {
        let places: Vec<SegmentPlace> = request.extracted.slots.iter().map(place_of).collect();
        provenance_of(&request.body, &outcome.decision, &places)
    });
    let mut piece_blocked = None;
    if outcome.decision.action == Action::Sanitize {
        apply_sanitized(&mut request.body, &request.extracted.slots, &outcome);
        piece_blocked =
            sanitize_groups(state, &mut request.body, &request.extracted.slots, &outcome).await?;
    }
    let mut decision = outcome.decision;
    if let Some(reason) = piece_blocked {
        decision.action = Action::Block;
        decision.reasons.push(reason);
    }
    state.record(caller, kind.endpoint(), &decision).await?;
    Ok(match decision.action {
        Action::Block => Upward::Blocked(blocked_response(&decision, caller, false)),
        action => Upward::Forward(
            action,
            None,
            tool_result_score(&decision),
            provenance.flatten(),
        ),
    })
}

/// Whether the answer's tool calls will be decided here (so provenance is needed).
fn wants_provenance(state: &AppState) -> bool {
    state.tools().is_some_and(|g| g.config().enforce_proxy)
}

/// Where a stateless scan's segment lives.
fn place_of(slot: &super::wire::Slot) -> SegmentPlace {
    use super::wire::Slot;
    match slot {
        Slot::Content(i) => SegmentPlace::Piece(*i, Part::Content),
        Slot::Part(i, j) => SegmentPlace::Piece(*i, Part::Part(*j)),
        Slot::ToolArgs(i, j) => SegmentPlace::Piece(*i, Part::ToolCall(*j)),
        Slot::FunctionArgs(i) => SegmentPlace::Piece(*i, Part::ToolCall(0)),
        _ => SegmentPlace::Elsewhere,
    }
}

/// The request's conversation with the scan's flagged spans; `None` when it cannot be read
/// for provenance (too large): every provenance requirement then fails closed.
fn provenance_of(
    body: &Value,
    decision: &Decision,
    places: &[SegmentPlace],
) -> Option<SharedConversation> {
    let messages = body.get("messages")?;
    flagged_conversation(messages, decision, places)
        .ok()
        .map(|c| SharedConversation(Arc::new(c)))
}

/// Step 2 with conversation state (`[conversation]`, chat): the messages are one
/// conversation, scanned by the stateful scanner (the newest call's per-turn decision plus
/// the conversation part: risk over the lineage, rewinds, forged assistant turns). The
/// definitions and message names, which are not turns, are scanned as before on their own
/// (recorded under `/v1/chat/completions#definitions`). SANITIZE rewrites each sanitized
/// segment's message (`segment_messages` maps them): a message of one text in place, a
/// message of several texts piece by piece ([`super::rewrite::rescan_pieces`]). Forged assistant turns
/// under policy `drop` are removed from what is forwarded.
pub(super) async fn scan_up_conversation(
    state: &AppState,
    caller: &Caller,
    scanner: Arc<ConversationScanner>,
    request: &mut ParsedRequest,
    hint: Option<String>,
) -> Result<Upward, ServiceError> {
    let conversation = Arc::new(ConversationRequest {
        id: None,
        conversation_id: hint,
        turns: conversation_turns(&request.body),
    });
    let outcome = state
        .scan_conversation(scanner.clone(), conversation.clone())
        .await?;
    let mut decision = outcome.decision;
    let map = decision
        .reports
        .find::<ConversationReport>()
        .map(|c| c.segment_messages)
        .unwrap_or_default();
    let provenance = wants_provenance(state).then(|| {
        let places: Vec<SegmentPlace> = map.iter().map(|i| SegmentPlace::Message(*i)).collect();
        provenance_of(&request.body, &decision, &places)
    });
    if decision.action == Action::Sanitize
        && let Some(reason) =
            sanitize_messages(state, &mut request.body, &map, outcome.sanitized).await?
    {
        decision.action = Action::Block;
        decision.reasons.push(reason);
    }
    if decision.action != Action::Block {
        scan_unreplayed(state, &mut request.body, &conversation.turns, &mut decision).await?;
    }
    state.record(caller, EP_CHAT, &decision).await?;
    if decision.action == Action::Block {
        return Ok(Upward::Blocked(blocked_response(&decision, caller, false)));
    }
    let extras = scan_definitions(state, caller, request).await?;
    let extras_action = match extras {
        Some(d) if d.action == Action::Block => {
            return Ok(Upward::Blocked(blocked_response(&d, caller, false)));
        }
        Some(d) => d.action,
        None => Action::Allow,
    };
    drop_messages(&mut request.body, &outcome.drop_messages);
    Ok(Upward::Forward(
        decision.action.max(extras_action),
        Some(AnswerLedger {
            scanner,
            conversation,
        }),
        tool_result_score(&decision),
        provenance.flatten(),
    ))
}

/// The history the conversation scan left unscanned: calls the state had not seen, beyond
/// `max_replay` (a long history sent for the first time, e.g. fabricated). The model reads
/// it all, so its input messages (and forged assistant turns) are scanned here as plain
/// segments, and the stricter action wins: BLOCK blocks, SANITIZE rewrites them.
async fn scan_unreplayed(
    state: &AppState,
    body: &mut Value,
    turns: &[Turn],
    decision: &mut Decision,
) -> Result<(), ServiceError> {
    let Some(c) = decision
        .reports
        .find::<ConversationReport>()
        .filter(|c| c.unscanned > 0)
    else {
        return Ok(());
    };
    let Some(first) = c.scanned.first().map(|t| t.message) else {
        return Ok(());
    };
    let forged = c
        .history
        .as_ref()
        .map(|h| h.forged.clone())
        .unwrap_or_default();
    let mut segments = Vec::new();
    let mut map = Vec::new();
    for (i, t) in turns.iter().enumerate().take(first) {
        let input = !matches!(t.role, Role::Assistant | Role::System | Role::Developer);
        if (input || forged.contains(&i)) && !t.content().is_empty() {
            let mut seg = Segment::new(t.role, t.content());
            if t.role == Role::Assistant {
                seg.trust = Some(rampart_core::Trust::Untrusted);
            }
            segments.push(seg);
            map.push(i);
        }
    }
    if segments.is_empty() {
        return Ok(());
    }
    let outcome = state.scan(ScanRequest::segments(segments)).await?;
    let what = format!("the history before message {first}, beyond the replay bound");
    let rules = || {
        let mut ids: Vec<&str> = outcome
            .decision
            .findings
            .iter()
            .filter(|f| f.counted)
            .map(|f| f.rule_id.as_str())
            .collect();
        ids.dedup();
        ids.join(", ")
    };
    match outcome.decision.action {
        Action::Allow => {}
        Action::Block => {
            decision.action = Action::Block;
            decision
                .reasons
                .push(format!("{what} is BLOCK on its own ({})", rules()));
        }
        Action::Sanitize => {
            decision
                .reasons
                .push(format!("{what} is SANITIZE ({})", rules()));
            decision.action = decision.action.max(Action::Sanitize);
            if let Some(reason) =
                sanitize_messages(state, body, &map, outcome.sanitized.clone()).await?
            {
                decision.action = Action::Block;
                decision.reasons.push(reason);
            }
        }
    }
    Ok(())
}

/// The definitions and message names of a conversation-scanned chat request (the group
/// segments [`extract_chat`] made), scanned and recorded on their own as the plain path
/// scans them; `None` when there are none.
async fn scan_definitions(
    state: &AppState,
    caller: &Caller,
    request: &mut ParsedRequest,
) -> Result<Option<Decision>, ServiceError> {
    let mut segments = Vec::new();
    let mut slots = Vec::new();
    for (seg, slot) in request
        .extracted
        .segments
        .iter()
        .zip(&request.extracted.slots)
    {
        if matches!(slot, Slot::Group(_)) {
            segments.push(seg.clone());
            slots.push(slot.clone());
        }
    }
    if segments.is_empty() {
        return Ok(None);
    }
    let outcome = state.scan(ScanRequest::segments(segments)).await?;
    let mut decision = outcome.decision.clone();
    if decision.action == Action::Sanitize
        && let Some(reason) = sanitize_groups(state, &mut request.body, &slots, &outcome).await?
    {
        decision.action = Action::Block;
        decision.reasons.push(reason);
    }
    state.record(caller, EP_CHAT_DEFINITIONS, &decision).await?;
    Ok(Some(decision))
}
