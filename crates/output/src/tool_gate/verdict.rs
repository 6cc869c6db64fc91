//! One call to decide ([`PendingCall`]) and its outcome ([`ToolVerdict`]), with the JSON a
//! client sees of it (never argument values).

use rampart_core::timefmt::{Precision, UtcTime};
use rampart_tools::{ApprovalGrant, ArgumentsError, CallContext, ToolAction, ToolDecision};
use serde_json::{Value, json};

/// Rule id of a call blocked because its decision could not be audited or a token could
/// not be issued (fail closed).
pub const RULE_FAIL_CLOSED: &str = "TOOL_FAIL_CLOSED";

/// One call to decide.
#[derive(Debug)]
pub struct PendingCall<'a> {
    /// The tool's name as the model sent it (matched as written).
    pub tool: &'a str,
    /// The parsed arguments, or why they could not be ([`arguments_of`]).
    pub arguments: Result<Value, ArgumentsError>,
    /// The client's conversation id (break-glass scope).
    pub conversation: Option<&'a str>,
    /// What an approval token is bound to (the caller's key and the conversation,
    /// [`binding`]).
    pub binding: String,
    /// The API key's id (break-glass scope `caller`).
    pub caller_key: Option<&'a str>,
    /// What the policy's context conditions and flow rules read.
    pub context: CallContext,
    /// Approval tokens presented with the call.
    pub tokens: &'a [String],
}

impl<'a> PendingCall<'a> {
    /// A call with no conversation, caller, context or approval token (the fields are
    /// public: set those that are known).
    pub fn new(tool: &'a str, arguments: Result<Value, ArgumentsError>) -> Self {
        PendingCall {
            tool,
            arguments,
            conversation: None,
            binding: binding(None, None),
            caller_key: None,
            context: CallContext::default(),
            tokens: &[],
        }
    }
}

/// The outcome of one call.
#[derive(Debug, Clone)]
pub struct ToolVerdict {
    /// The tool's name as the model sent it.
    pub tool: String,
    /// The policy's decision, after approvals and break-glass grants.
    pub decision: ToolDecision,
    /// Keyed hash of the canonical arguments, as approval tokens bind it (empty when they
    /// could not be parsed).
    pub arguments_hash: String,
    /// The parsed arguments (for the audit log when values are configured, and to show a
    /// held call); `None` when malformed.
    pub arguments: Option<Value>,
    /// The approval token issued for a CONFIRM (or the pending one the call came with).
    pub approval: Option<ApprovalGrant>,
    /// `approval` is one the call came with, still waiting for an approver (not newly
    /// issued).
    pub approval_pending: bool,
    /// Why a presented token was refused (the last refusal).
    pub approval_error: Option<ApprovalRefusal>,
    /// What the policy decided before a break-glass grant overrode it.
    pub overridden: Option<ToolAction>,
    /// The expiry of the approval token redeemed (audit).
    pub redeemed_expires_ms: u64,
    /// What approval tokens of this call are bound to.
    pub binding: String,
    /// The client's conversation id (audit rows hash it).
    pub conversation: Option<String>,
}

/// A refused approval token: the reason's name (audit) and message (answer).
#[derive(Debug, Clone)]
pub struct ApprovalRefusal {
    /// The reason's stable name.
    pub name: &'static str,
    /// The reason, for the client.
    pub message: String,
}

impl ToolVerdict {
    /// The decided action.
    pub fn action(&self) -> ToolAction {
        self.decision.action
    }

    /// The answer's JSON (no argument values).
    pub fn answer(&self, id: Option<&str>) -> Value {
        let d = &self.decision;
        let mut v = json!({
            "id": id,
            "tool": self.tool,
            "action": d.action.name(),
            "risk": d.risk.map(|r| r.name()),
            "rules": d.rules,
            "failed_argument": d.failed_argument,
            "failed_check": d.failed_check,
            "reasons": d.reasons,
            "arguments_hash": self.arguments_hash,
        });
        if let Value::Object(m) = &mut v {
            if let Some(a) = &self.approval {
                m.insert("approval".into(), approval_json(a));
            }
            if let Some(a) = &d.approval_id {
                m.insert("approval_id".into(), json!(a));
            }
            if let Some(b) = &d.breakglass_id {
                m.insert("breakglass_id".into(), json!(b));
            }
            if let Some(e) = &self.approval_error {
                m.insert("approval_error".into(), json!(e.message));
            }
            if !d.provenance.is_empty() {
                m.insert("provenance".into(), json!(d.provenance));
            }
        }
        v
    }

    /// Turns the verdict into a BLOCK (fail closed), with a reason.
    pub fn fail_closed(&mut self, why: &str) {
        self.decision.action = ToolAction::Block;
        self.decision.rules.push(RULE_FAIL_CLOSED.into());
        self.decision.reasons.push(why.to_string());
        self.approval = None;
    }
}

/// An issued approval as the client sees it: id, token, state (`pending`: an approver
/// other than the caller must approve it before the token redeems) and expiry (RFC 3339
/// and epoch milliseconds).
pub fn approval_json(a: &ApprovalGrant) -> Value {
    let ms = i64::try_from(a.expires_ms).unwrap_or(i64::MAX);
    json!({
        "id": a.id,
        "token": a.token,
        "state": "pending",
        "expires_at": UtcTime::from_unix_ms(ms)
            .map_or_else(|| ms.to_string(), |t| t.to_rfc3339(Precision::Millis)),
        "expires_at_ms": a.expires_ms,
    })
}

/// The `failed_check` of arguments that could not be parsed.
pub(crate) fn arguments_check_name(e: &ArgumentsError) -> &'static str {
    match e {
        ArgumentsError::TooLarge { .. } => "too_large",
        ArgumentsError::TooDeep { .. } => "too_deep",
        ArgumentsError::NotJson(_) => "not_json",
        ArgumentsError::NotAnObject => "not_object",
    }
}

/// What an approval token is bound to: the API key and the conversation.
pub fn binding(key_id: Option<&str>, conversation: Option<&str>) -> String {
    format!(
        "{}\u{1f}{}",
        key_id.unwrap_or("-"),
        conversation.unwrap_or("")
    )
}

/// Arguments given as a JSON object or as a string holding JSON (parsed with its size and
/// depth bounded); a value that is not an object is refused. The policy check bounds the
/// size and depth of an object given as such.
pub fn arguments_of(v: &Value) -> Result<Value, ArgumentsError> {
    match v {
        Value::String(s) => rampart_tools::parse_arguments(s),
        Value::Null => Ok(Value::Object(Default::default())),
        Value::Object(_) => Ok(v.clone()),
        _ => Err(ArgumentsError::NotAnObject),
    }
}
