//! The tool-call gate over model answers: every `tool_calls` entry (and legacy
//! `function_call`) of an OpenAI chat answer is decided by a tool policy before the client
//! (or the agent runtime) acts on it.
//!
//! * **One decision** ([`ToolGate::decide`]): the arguments are parsed (bounded size and
//!   depth; malformed arguments BLOCK, fail closed); the policy decides; a CONFIRM is turned
//!   into ALLOW by an approval token issued for exactly this call (tool, canonical
//!   arguments, binding; single use, TTL); a CONFIRM or BLOCK is turned into ALLOW by an
//!   active break-glass grant whose scope covers the call (not over failed arguments unless
//!   the grant says `override_arguments`, never over malformed ones); a CONFIRM left gets a
//!   fresh approval token, pending until an approver other than the caller approves it
//!   ([`ToolGate::approvals`]); a resubmission with a token still pending is answered with
//!   the same pending approval, not a new one.
//! * **Plain answers** ([`PlainAnswer`]): an allowed call stays; a blocked or confirmed call
//!   is removed from `tool_calls` and named in the message's `refusal` (and `content` when
//!   the model sent none): tool and rules, never argument values. When no call is left,
//!   `finish_reason` `tool_calls` / `function_call` becomes `stop`. The answer gains a
//!   top-level extension object `rampart.tool_decisions[]` (OpenAI client libraries keep
//!   unknown fields): per call its decision, the arguments' hash and, for CONFIRM, the
//!   approval token with its expiry and the held call (name and arguments) for a human to
//!   look at.
//! * **Streamed answers** ([`StreamGate`]): tool-call deltas are taken out of the events
//!   and held (never forwarded) until the choice's `finish_reason` (or `[DONE]`, or the end
//!   of the stream) says the calls are complete; then each is decided, and one event
//!   carries the allowed calls whole, the refusal, and `rampart.tool_decisions`. Content
//!   deltas flow as before.
//! * **Context** ([`conversation_of`], [`tools_called`], [`tool_result_score`]): what a chat
//!   request tells the policy about the conversation so far.
//!
//! Deciding is separate from rewriting: [`PlainAnswer::calls`] and [`GateItem::Complete`]
//! hand out the calls, the caller decides them (and may audit each decision, failing closed
//! with [`ToolVerdict::fail_closed`]), and [`PlainAnswer::apply`] / [`StreamGate::release`]
//! write the verdicts into the answer.

mod call;
mod context;
mod plain;
mod released;
mod stream;
mod verdict;

pub use call::HeldCall;
pub use context::{
    CallConversation, SegmentPlace, conversation_of, conversation_segments, flagged_conversation,
    tool_result_score, tools_called, untrusted_segments,
};
pub use plain::{PlainAnswer, PlainGateError};
pub use released::{MAX_CONVERSATIONS, MAX_TOOLS_PER_CONVERSATION, ReleasedCalls, TTL_MS};
pub use stream::{GateItem, MAX_CALLS_PER_CHOICE, StreamGate};
pub use verdict::{
    ApprovalRefusal, PendingCall, RULE_FAIL_CLOSED, ToolVerdict, approval_json, arguments_of,
    binding,
};

use rampart_tools::{
    ApprovalBook, ArgumentsError, BreakGlassBook, BreakGlassGrant, CallContext, GrantError,
    GrantRequest, Policy, RandomError, ToolAction, ToolCall, ToolDecision,
};
use serde_json::Value;
use verdict::arguments_check_name;

/// A compiled tool policy with its pending approvals and active break-glass grants. Built
/// once ([`ToolGate::builder`]); every method takes `&self` (the books lock inside), and it
/// is `Send + Sync`, so one gate serves every request.
#[derive(Debug)]
pub struct ToolGate {
    policy: Policy,
    approvals: ApprovalBook,
    breakglass: BreakGlassBook,
    released: ReleasedCalls,
}

/// Options of a [`ToolGate`]; [`ToolGateBuilder::build`] makes it.
#[derive(Debug)]
pub struct ToolGateBuilder {
    policy: Policy,
    approval_ttl_s: u64,
    max_pending_approvals: usize,
    max_pending_approvals_per_key: usize,
    breakglass_max_ttl_s: u64,
    max_conversations_per_key: usize,
    shared: Option<(std::sync::Arc<dyn rampart_state::SharedStore>, [u8; 32])>,
}

impl ToolGateBuilder {
    /// Keeps approvals and break-glass grants in `store`, shared by every replica built with
    /// the same `key` (the approval tokens' key): a token issued on one replica is approved
    /// and redeemed, once, on any; a grant is in force on all. Default: in this process,
    /// with a random key.
    pub fn shared_state(
        mut self,
        store: std::sync::Arc<dyn rampart_state::SharedStore>,
        key: [u8; 32],
    ) -> Self {
        self.shared = Some((store, key));
        self
    }

    /// Conversations whose released calls one API key may have remembered at once
    /// ([`ReleasedCalls`]). Default 10000.
    pub fn max_conversations_per_key(mut self, n: usize) -> Self {
        self.max_conversations_per_key = n;
        self
    }

    /// Most approval tokens one API key may hold pending at once. Default 1000.
    pub fn max_pending_approvals_per_key(mut self, n: usize) -> Self {
        self.max_pending_approvals_per_key = n;
        self
    }

    /// Seconds an approval token is valid. Default 600.
    pub fn approval_ttl_s(mut self, seconds: u64) -> Self {
        self.approval_ttl_s = seconds;
        self
    }

    /// Most approval tokens pending at once (issued, not used, not expired). Default 10000.
    pub fn max_pending_approvals(mut self, n: usize) -> Self {
        self.max_pending_approvals = n;
        self
    }

    /// Longest TTL a break-glass grant may ask for, seconds. Default 3600.
    pub fn breakglass_max_ttl_s(mut self, seconds: u64) -> Self {
        self.breakglass_max_ttl_s = seconds;
        self
    }

    /// The gate, with a fresh random key for its approval tokens.
    pub fn build(self) -> Result<ToolGate, RandomError> {
        let ttl_ms = self.approval_ttl_s.saturating_mul(1000);
        let mut breakglass = BreakGlassBook::new(self.breakglass_max_ttl_s);
        let approvals = match self.shared {
            Some((store, key)) => {
                breakglass = breakglass.with_shared_state(store.clone());
                ApprovalBook::new(key, ttl_ms).with_shared_state(store)
            }
            None => ApprovalBook::with_random_key(ttl_ms)?,
        }
        .with_capacity(self.max_pending_approvals)
        .with_requester_capacity(self.max_pending_approvals_per_key);
        Ok(ToolGate {
            policy: self.policy,
            approvals,
            breakglass,
            released: ReleasedCalls::new(self.max_conversations_per_key),
        })
    }
}

impl ToolGate {
    /// A builder for a gate over `policy`.
    pub fn builder(policy: Policy) -> ToolGateBuilder {
        ToolGateBuilder {
            policy,
            approval_ttl_s: 600,
            max_pending_approvals: 10_000,
            max_pending_approvals_per_key: 1_000,
            breakglass_max_ttl_s: 3600,
            max_conversations_per_key: 10_000,
            shared: None,
        }
    }

    /// Records the injection score the server saw in a conversation's tool results (the
    /// proxy's scan), so flow rules read it whatever the client reports later.
    pub fn note_injection_score(
        &self,
        caller_key: Option<&str>,
        binding: &str,
        score: f32,
        now_ms: u64,
    ) {
        self.released
            .note_score(caller_key.unwrap_or("-"), binding, score, now_ms);
    }

    /// The approvals: pending ones for approvers to list, approve or deny.
    pub fn approvals(&self) -> &ApprovalBook {
        &self.approvals
    }

    /// Decides one call at `now_ms` (Unix milliseconds): policy, approval tokens,
    /// break-glass, then a fresh token for a CONFIRM left (see the module documentation).
    pub fn decide(&self, call: PendingCall<'_>, now_ms: u64) -> ToolVerdict {
        // As the model sent it: the policy refuses a name with surrounding space rather
        // than match a tool the agent framework might not trim to.
        let tool = call.tool.to_string();
        // The server's record of the conversation is the floor of the context: rate limits
        // and flow rules count what it released and saw, client context only adds.
        let mut ctx = self.released.merged(&call.binding, call.context, now_ms);
        ctx.now_ms = Some(now_ms);
        let (decision, arguments) = self.check(&tool, call.arguments, &ctx);
        let arguments_hash = arguments
            .as_ref()
            .map(|a| self.approvals.arguments_hash(a))
            .unwrap_or_default();
        let mut v = ToolVerdict {
            tool,
            decision,
            arguments_hash,
            arguments,
            approval: None,
            approval_pending: false,
            approval_error: None,
            overridden: None,
            redeemed_expires_ms: 0,
            binding: call.binding,
            conversation: call.conversation.map(str::to_string),
        };
        self.redeem(&mut v, call.tokens, now_ms);
        let before = v.decision.action;
        // Arguments that could not be parsed stay blocked whatever the grant: a call
        // released to the client must at least be a well-formed call.
        if v.arguments.is_some()
            && self
                .breakglass
                .apply(
                    &mut v.decision,
                    &v.tool,
                    call.conversation,
                    call.caller_key,
                    now_ms,
                )
                .is_some()
        {
            v.overridden = Some(before);
        }
        self.issue(&mut v, call.caller_key, now_ms);
        if v.decision.action == ToolAction::Allow {
            self.released.note_released(
                call.caller_key.unwrap_or("-"),
                &v.binding,
                &v.tool,
                now_ms,
            );
        }
        v
    }

    /// The policy's decision, and the arguments when they could be parsed.
    fn check(
        &self,
        tool: &str,
        arguments: Result<Value, ArgumentsError>,
        ctx: &CallContext,
    ) -> (ToolDecision, Option<Value>) {
        match arguments {
            Ok(args) => {
                let c = ToolCall::new(tool.to_string(), args);
                (self.policy.check(&c, ctx), Some(c.arguments))
            }
            Err(e) => {
                // Non-object arguments block before any predicate: the answer still gets
                // the tool's risk, with the parser's reason.
                let mut d = self
                    .policy
                    .check(&ToolCall::new(tool.to_string(), Value::Bool(false)), ctx);
                d.action = ToolAction::Block;
                if !d
                    .rules
                    .iter()
                    .any(|r| r == rampart_tools::RULE_ARGUMENTS_SHAPE)
                {
                    d.rules.push(rampart_tools::RULE_ARGUMENTS_SHAPE.into());
                }
                d.reasons.retain(|r| !r.contains("not a JSON object"));
                d.failed_check = Some(arguments_check_name(&e).into());
                d.reasons.push(e.to_string());
                (d, None)
            }
        }
    }

    /// A CONFIRM with a presented token issued for this call becomes ALLOW (the token is
    /// used up); a token presented for a BLOCK is refused.
    fn redeem(&self, v: &mut ToolVerdict, tokens: &[String], now_ms: u64) {
        if let Some(args) = &v.arguments
            && v.decision.action == ToolAction::Confirm
        {
            let c = ToolCall::new(v.tool.clone(), args.clone());
            for t in tokens {
                match self.approvals.redeem(t, &c, &v.binding, now_ms) {
                    Ok(id) => {
                        rampart_tools::apply_approval(&mut v.decision, &id);
                        // A redeemed token is genuine: its third part is its expiry.
                        v.redeemed_expires_ms = t
                            .split('.')
                            .nth(2)
                            .and_then(|x| x.parse().ok())
                            .unwrap_or_default();
                        v.approval_error = None;
                        break;
                    }
                    // Genuine, for this call, and waiting for an approver: answered with
                    // the same pending approval (no new token).
                    Err(rampart_tools::ApprovalError::NotApproved { id }) => {
                        let expires_ms = t
                            .split('.')
                            .nth(2)
                            .and_then(|x| x.parse().ok())
                            .unwrap_or_default();
                        v.approval = Some(rampart_tools::ApprovalGrant {
                            id: id.clone(),
                            token: t.clone(),
                            tool: v.tool.clone(),
                            arguments_hash: v.arguments_hash.clone(),
                            conversation: v.binding.clone(),
                            expires_ms,
                        });
                        v.approval_pending = true;
                        v.approval_error = Some(ApprovalRefusal {
                            name: "not_approved",
                            message: format!("approval {id} is waiting for an approver"),
                        });
                        break;
                    }
                    // Tokens for other calls of the same answer are expected: the last
                    // refusal is reported.
                    Err(e) => {
                        v.approval_error = Some(ApprovalRefusal {
                            name: e.name(),
                            message: e.to_string(),
                        })
                    }
                }
            }
        } else if !tokens.is_empty() && v.decision.action == ToolAction::Block {
            v.approval_error = Some(ApprovalRefusal {
                name: "blocked",
                message: "an approval never overrides BLOCK".into(),
            });
        }
    }

    /// A CONFIRM left gets a fresh approval token, pending until an approver other than
    /// `requester` approves it (no token: BLOCK, fail closed), unless the call came with
    /// one still pending.
    fn issue(&self, v: &mut ToolVerdict, requester: Option<&str>, now_ms: u64) {
        if v.approval_pending {
            return;
        }
        if let Some(args) = &v.arguments
            && v.decision.action == ToolAction::Confirm
        {
            match self.approvals.issue(
                &ToolCall::new(v.tool.clone(), args.clone()),
                &v.binding,
                requester,
                now_ms,
            ) {
                Ok(a) => v.approval = Some(a),
                Err(e) => v.fail_closed(&format!("cannot issue an approval token: {e}")),
            }
        }
    }

    /// Grants a scoped override (break-glass) `by` someone.
    pub fn grant(
        &self,
        req: GrantRequest,
        by: &str,
        now_ms: u64,
    ) -> Result<BreakGlassGrant, GrantError> {
        self.breakglass.grant(req, by, now_ms)
    }

    /// The break-glass grants in force.
    pub fn active_grants(&self, now_ms: u64) -> Result<Vec<BreakGlassGrant>, GrantError> {
        self.breakglass.active(now_ms)
    }

    /// Revokes a grant; the revoked grant, `None` when no active grant has that id.
    pub fn revoke(&self, id: &str, now_ms: u64) -> Result<Option<BreakGlassGrant>, GrantError> {
        self.breakglass.revoke(id, now_ms)
    }

    /// Grants that expired since the last call (each once), for the audit.
    pub fn take_expired(&self, now_ms: u64) -> Vec<BreakGlassGrant> {
        self.breakglass.take_expired(now_ms)
    }
}
