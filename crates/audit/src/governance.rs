//! The governance audit: one append-only, hash-chained table of tool decisions, approvals
//! (issued, redeemed, refused) and break-glass grants (granted, used, revoked, expired).
//!
//! * **Append-only**: SQLite triggers refuse `UPDATE` and `DELETE` on the table; retention
//!   (`retention_days`, `rampart audit prune`) never touches it, so the chain is never cut
//!   by housekeeping.
//! * **Hash chain**: row `n` stores `hash = BLAKE3-keyed(key, "rampart governance row v1" ‖
//!   every column of the row ‖ hash of row n-1)` (row 1 chains to 64 zeros), and the id of
//!   the key ([`ChainKey::id`]). The writer thread assigns `seq` (1, 2, 3, … without gaps)
//!   and reads the previous hash inside the inserting transaction, so two processes writing
//!   one file still form one chain.
//! * **[`verify`]** walks the chain and names the first row that was edited (its hash does
//!   not match), deleted (a gap in `seq`, or a `prev_hash` that is not the previous row's
//!   hash) or moved (the same). It **cannot** detect a truncated tail (the last rows
//!   deleted by someone who can write the file and drop the triggers): record
//!   [`VerifyReport::head`] elsewhere (a ticket, a log shipper) and compare. Without the key
//!   anyone can recompute the chain after an edit; with a public key ([`ChainKey::public`],
//!   no key configured) verification only catches accidental or naive edits.
//! * **Key**: from the environment variable the audit configuration names
//!   (`chain_key_env`, default `RAMPART_HASH_KEY`, the service's input-hash key; derived
//!   with its own context, so the two keys differ). A log whose last row was chained with
//!   another key is refused at open: changing the key means starting a new audit file.

use crate::{AuditError, schema};
use rampart_tools::{BreakGlassGrant, Risk, ToolAction};
use rusqlite::types::Value;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The default environment variable of the chain key.
pub const DEFAULT_CHAIN_KEY_ENV: &str = "RAMPART_HASH_KEY";
/// `prev_hash` of the first row.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Key id of the public key (no key configured).
pub const PUBLIC_KEY_ID: &str = "public";

const ROW_DOMAIN: &str = "rampart governance row v1";
const KEY_CONTEXT: &str = "rampart governance chain v1";

/// The key of the hash chain.
#[derive(Clone)]
pub struct ChainKey {
    key: [u8; 32],
    id: String,
}

impl std::fmt::Debug for ChainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ChainKey {
    /// The key derived from secret material (any string).
    pub fn from_material(material: &str) -> Self {
        let key = blake3::derive_key(KEY_CONTEXT, material.as_bytes());
        let id = blake3::hash(&key).to_hex()[..8].to_string();
        Self { key, id }
    }

    /// The well-known key used when none is configured: the chain still catches accidental
    /// and naive edits, not someone who recomputes it.
    pub fn public() -> Self {
        Self {
            key: blake3::derive_key(KEY_CONTEXT, b""),
            id: PUBLIC_KEY_ID.into(),
        }
    }

    /// The key from the environment variable `var`; unset or empty: [`ChainKey::public`].
    pub fn from_env(var: &str) -> Self {
        match std::env::var(var) {
            Ok(m) if !m.is_empty() => Self::from_material(&m),
            _ => Self::public(),
        }
    }

    /// The key's id (first 8 hex digits of its hash, or `public`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether this is the public key.
    pub fn is_public(&self) -> bool {
        self.id == PUBLIC_KEY_ID
    }

    /// The hasher of argument values and conversation ids for rows chained with this key
    /// (a key derived from it, with its id).
    pub fn hasher(&self) -> GovernanceHasher {
        GovernanceHasher {
            key: blake3::derive_key(VALUES_CONTEXT, &self.key),
            id: self.id.clone(),
        }
    }
}

const VALUES_CONTEXT: &str = "rampart governance values v1";

/// Keyed hashes of what governance rows must not store in clear: argument values and
/// conversation ids. Get it from [`AuditWriter::hasher`](crate::AuditWriter::hasher) so the
/// hashes are made with the log's key (its id is the rows' `hash_key_id`).
#[derive(Clone)]
pub struct GovernanceHasher {
    key: [u8; 32],
    id: String,
}

impl std::fmt::Debug for GovernanceHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GovernanceHasher")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl GovernanceHasher {
    /// A keyed hash per top-level argument (`rampart_tools::argument_hashes`).
    pub fn arguments(&self, arguments: &serde_json::Value) -> BTreeMap<String, String> {
        rampart_tools::argument_hashes(&self.key, arguments)
    }

    /// The keyed hash of a conversation id (hex).
    pub fn conversation(&self, conversation: &str) -> String {
        let mut h = blake3::Hasher::new_keyed(&self.key);
        h.update(b"conversation\0");
        h.update(conversation.as_bytes());
        h.finalize().to_hex().to_string()
    }

    /// The key's id.
    pub fn key_id(&self) -> &str {
        &self.id
    }
}

/// Which endpoint decided a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolEndpoint {
    /// `POST /v1/tools/check`.
    ToolsCheck,
    /// The proxy, enforcing a model's tool call.
    Proxy,
}

impl ToolEndpoint {
    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            ToolEndpoint::ToolsCheck => "tools_check",
            ToolEndpoint::Proxy => "proxy",
        }
    }
}

/// One tool decision as logged. Never argument values unless the audit configuration sets
/// `tool_argument_values = true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDecisionEvent {
    /// The service's request id.
    pub request_id: String,
    /// The caller's API key id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Where it was decided.
    pub endpoint: ToolEndpoint,
    /// Keyed hash of the conversation key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The tool, as called.
    pub tool: String,
    /// Keyed hash of each argument's canonical value, by name
    /// (`rampart_tools::argument_hashes`).
    #[serde(default)]
    pub arguments: BTreeMap<String, String>,
    /// Which key made the argument and conversation hashes.
    pub hash_key_id: String,
    /// The arguments themselves: only kept when the configuration says so (the writer drops
    /// them otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_values: Option<serde_json::Value>,
    /// The final action.
    pub action: ToolAction,
    /// The tool's risk (`None`: not in the policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<Risk>,
    /// The rules that decided.
    #[serde(default)]
    pub rules: Vec<String>,
    /// The argument that failed, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_argument: Option<String>,
    /// The approval redeemed for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// The break-glass grant that applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakglass_id: Option<String>,
    /// Where the argument values a provenance requirement concerned came from (argument
    /// pointer, kind, origin with message, span and score; never the value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<rampart_tools::ProvenanceCheck>,
}

/// Who asked, where, in which conversation: what [`ToolDecisionEvent::new`] needs besides
/// the call and the decision.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallOrigin<'a> {
    /// The service's request id.
    pub request_id: &'a str,
    /// The caller's API key id.
    pub key_id: Option<&'a str>,
    /// Where it was decided.
    pub endpoint: ToolEndpoint,
    /// The conversation id, in clear (it is hashed).
    pub conversation: Option<&'a str>,
}

impl ToolDecisionEvent {
    /// The row of `decision` on `call`: argument values and the conversation id hashed with
    /// `hasher`; the values themselves ride along in `argument_values` and the writer drops
    /// them unless the log is configured with `tool_argument_values = true`.
    pub fn new(
        call: &rampart_tools::ToolCall,
        decision: &rampart_tools::ToolDecision,
        origin: ToolCallOrigin<'_>,
        hasher: &GovernanceHasher,
    ) -> Self {
        ToolDecisionEvent {
            request_id: origin.request_id.to_string(),
            key_id: origin.key_id.map(str::to_string),
            endpoint: origin.endpoint,
            conversation: origin.conversation.map(|c| hasher.conversation(c)),
            tool: call.tool.clone(),
            arguments: hasher.arguments(&call.arguments),
            hash_key_id: hasher.key_id().to_string(),
            argument_values: Some(call.arguments.clone()),
            action: decision.action,
            risk: decision.risk,
            rules: decision.rules.clone(),
            failed_argument: decision.failed_argument.clone(),
            approval_id: decision.approval_id.as_ref().map(|a| a.0.clone()),
            breakglass_id: decision.breakglass_id.as_ref().map(|b| b.0.clone()),
            provenance: decision.provenance.clone(),
        }
    }
}

/// An approval issued or redeemed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalEvent {
    /// The approval's id.
    pub approval_id: String,
    /// The request that issued or redeemed it.
    pub request_id: String,
    /// The caller's API key id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Keyed hash of the conversation key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The tool.
    pub tool: String,
    /// Keyed hash of the canonical arguments the token is bound to.
    pub arguments_hash: String,
    /// The token's expiry, Unix milliseconds.
    pub expires_ms: u64,
}

/// A token refused at redemption.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRefusedEvent {
    /// The request.
    pub request_id: String,
    /// The caller's API key id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Keyed hash of the conversation key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The tool of the resubmitted call.
    pub tool: String,
    /// Why (`replayed`, `arguments_mismatch`, … : `rampart_tools::ApprovalError::name`).
    pub reason: String,
}

/// A break-glass grant used by a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakGlassUseEvent {
    /// The grant.
    pub breakglass_id: String,
    /// The request.
    pub request_id: String,
    /// The caller's API key id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Keyed hash of the conversation key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The tool.
    pub tool: String,
    /// What the policy had decided before the override.
    pub overridden: ToolAction,
}

/// A break-glass grant that ended: revoked (by an admin key) or expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakGlassEndEvent {
    /// The grant.
    pub breakglass_id: String,
    /// The admin key id that revoked it (`None` for an expiry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// An approver approved or denied a pending approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDecisionEvent {
    /// The approval.
    pub approval_id: String,
    /// The request of the approver.
    pub request_id: String,
    /// The approver's API key id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The key that made the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// The tool.
    pub tool: String,
    /// Keyed hash of the canonical arguments approved or denied.
    pub arguments_hash: String,
}

/// One governance event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GovernanceEvent {
    /// A tool call was decided.
    ToolDecision(ToolDecisionEvent),
    /// A CONFIRM handed out an approval token.
    ApprovalIssued(ApprovalEvent),
    /// A token was redeemed.
    ApprovalRedeemed(ApprovalEvent),
    /// A token was refused.
    ApprovalRefused(ApprovalRefusedEvent),
    /// An approver approved a pending approval.
    ApprovalApproved(ApprovalDecisionEvent),
    /// An approver denied a pending approval.
    ApprovalDenied(ApprovalDecisionEvent),
    /// An admin granted a break-glass override.
    BreakglassGranted(BreakGlassGrant),
    /// A call was allowed by a break-glass grant.
    BreakglassUsed(BreakGlassUseEvent),
    /// An admin revoked a grant.
    BreakglassRevoked(BreakGlassEndEvent),
    /// A grant expired.
    BreakglassExpired(BreakGlassEndEvent),
}

/// The kinds of [`GovernanceEvent`] (filters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GovernanceKind {
    /// [`GovernanceEvent::ToolDecision`].
    ToolDecision,
    /// [`GovernanceEvent::ApprovalIssued`].
    ApprovalIssued,
    /// [`GovernanceEvent::ApprovalRedeemed`].
    ApprovalRedeemed,
    /// [`GovernanceEvent::ApprovalRefused`].
    ApprovalRefused,
    /// [`GovernanceEvent::ApprovalApproved`].
    ApprovalApproved,
    /// [`GovernanceEvent::ApprovalDenied`].
    ApprovalDenied,
    /// [`GovernanceEvent::BreakglassGranted`].
    BreakglassGranted,
    /// [`GovernanceEvent::BreakglassUsed`].
    BreakglassUsed,
    /// [`GovernanceEvent::BreakglassRevoked`].
    BreakglassRevoked,
    /// [`GovernanceEvent::BreakglassExpired`].
    BreakglassExpired,
}

impl GovernanceKind {
    /// The snake_case name (the `kind` column).
    pub fn name(self) -> &'static str {
        match self {
            GovernanceKind::ToolDecision => "tool_decision",
            GovernanceKind::ApprovalIssued => "approval_issued",
            GovernanceKind::ApprovalRedeemed => "approval_redeemed",
            GovernanceKind::ApprovalRefused => "approval_refused",
            GovernanceKind::ApprovalApproved => "approval_approved",
            GovernanceKind::ApprovalDenied => "approval_denied",
            GovernanceKind::BreakglassGranted => "breakglass_granted",
            GovernanceKind::BreakglassUsed => "breakglass_used",
            GovernanceKind::BreakglassRevoked => "breakglass_revoked",
            GovernanceKind::BreakglassExpired => "breakglass_expired",
        }
    }
}

/// The columns a row is indexed and filtered by, taken from its event.
#[derive(Debug, Default)]
pub(crate) struct Columns {
    pub request_id: Option<String>,
    pub key_id: Option<String>,
    pub endpoint: Option<String>,
    pub conversation: Option<String>,
    pub tool: Option<String>,
    pub action: Option<String>,
    pub approval_id: Option<String>,
    pub breakglass_id: Option<String>,
}

impl GovernanceEvent {
    /// Its kind.
    pub fn kind(&self) -> GovernanceKind {
        match self {
            GovernanceEvent::ToolDecision(_) => GovernanceKind::ToolDecision,
            GovernanceEvent::ApprovalIssued(_) => GovernanceKind::ApprovalIssued,
            GovernanceEvent::ApprovalRedeemed(_) => GovernanceKind::ApprovalRedeemed,
            GovernanceEvent::ApprovalRefused(_) => GovernanceKind::ApprovalRefused,
            GovernanceEvent::ApprovalApproved(_) => GovernanceKind::ApprovalApproved,
            GovernanceEvent::ApprovalDenied(_) => GovernanceKind::ApprovalDenied,
            GovernanceEvent::BreakglassGranted(_) => GovernanceKind::BreakglassGranted,
            GovernanceEvent::BreakglassUsed(_) => GovernanceKind::BreakglassUsed,
            GovernanceEvent::BreakglassRevoked(_) => GovernanceKind::BreakglassRevoked,
            GovernanceEvent::BreakglassExpired(_) => GovernanceKind::BreakglassExpired,
        }
    }

    pub(crate) fn columns(&self) -> Columns {
        match self {
            GovernanceEvent::ToolDecision(e) => Columns {
                request_id: Some(e.request_id.clone()),
                key_id: e.key_id.clone(),
                endpoint: Some(e.endpoint.name().into()),
                conversation: e.conversation.clone(),
                tool: Some(e.tool.clone()),
                action: Some(e.action.name().into()),
                approval_id: e.approval_id.clone(),
                breakglass_id: e.breakglass_id.clone(),
            },
            GovernanceEvent::ApprovalIssued(e) | GovernanceEvent::ApprovalRedeemed(e) => Columns {
                request_id: Some(e.request_id.clone()),
                key_id: e.key_id.clone(),
                conversation: e.conversation.clone(),
                tool: Some(e.tool.clone()),
                approval_id: Some(e.approval_id.clone()),
                ..Columns::default()
            },
            GovernanceEvent::ApprovalRefused(e) => Columns {
                request_id: Some(e.request_id.clone()),
                key_id: e.key_id.clone(),
                conversation: e.conversation.clone(),
                tool: Some(e.tool.clone()),
                ..Columns::default()
            },
            GovernanceEvent::ApprovalApproved(e) | GovernanceEvent::ApprovalDenied(e) => Columns {
                request_id: Some(e.request_id.clone()),
                key_id: e.by.clone(),
                tool: Some(e.tool.clone()),
                approval_id: Some(e.approval_id.clone()),
                ..Columns::default()
            },
            // The scope's conversation is the id in clear (what the grant matches): it stays
            // in the body, out of the column that holds conversation hashes.
            GovernanceEvent::BreakglassGranted(g) => Columns {
                key_id: Some(g.granted_by.clone()),
                breakglass_id: Some(g.id.0.clone()),
                ..Columns::default()
            },
            GovernanceEvent::BreakglassUsed(e) => Columns {
                request_id: Some(e.request_id.clone()),
                key_id: e.key_id.clone(),
                conversation: e.conversation.clone(),
                tool: Some(e.tool.clone()),
                action: Some(ToolAction::Allow.name().into()),
                breakglass_id: Some(e.breakglass_id.clone()),
                ..Columns::default()
            },
            GovernanceEvent::BreakglassRevoked(e) | GovernanceEvent::BreakglassExpired(e) => {
                Columns {
                    key_id: e.by.clone(),
                    breakglass_id: Some(e.breakglass_id.clone()),
                    ..Columns::default()
                }
            }
        }
    }
}

/// One governance row to append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GovernanceRecord {
    /// When, Unix milliseconds.
    pub time_ms: i64,
    /// What happened.
    pub event: GovernanceEvent,
}

impl GovernanceRecord {
    /// A record of `event` at `time_ms`.
    pub fn new(time_ms: i64, event: GovernanceEvent) -> Self {
        Self { time_ms, event }
    }
}

/// A governance row read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredGovernance {
    /// Its position in the chain (1, 2, 3, …).
    pub seq: i64,
    /// When, Unix milliseconds.
    pub time_ms: i64,
    /// What happened.
    pub event: GovernanceEvent,
    /// Its chain hash.
    pub hash: String,
}

/// Which governance rows to read; set fields are combined with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GovernanceFilter {
    /// At or after (Unix ms).
    pub since_ms: Option<i64>,
    /// Strictly before (Unix ms).
    pub until_ms: Option<i64>,
    /// Only these kinds (empty: all).
    pub kinds: Vec<GovernanceKind>,
    /// Only this tool.
    pub tool: Option<String>,
    /// Only this action (tool decisions, break-glass uses).
    pub action: Option<ToolAction>,
    /// Only this conversation (its keyed hash, as stored).
    pub conversation: Option<String>,
    /// Only this request id.
    pub request_id: Option<String>,
    /// Only this API key id.
    pub key_id: Option<String>,
    /// Only rows naming this approval id.
    pub approval_id: Option<String>,
    /// Only rows naming this break-glass id.
    pub breakglass_id: Option<String>,
    /// At most this many rows.
    pub limit: Option<usize>,
    /// Newest first (default oldest first).
    pub newest_first: bool,
}

impl GovernanceFilter {
    pub(crate) fn select_sql(&self) -> Result<(String, Vec<Value>), AuditError> {
        if let (Some(s), Some(u)) = (self.since_ms, self.until_ms)
            && s > u
        {
            return Err(AuditError::Filter(format!(
                "invalid filter: since ({}) is after until ({})",
                crate::format_time_ms(s),
                crate::format_time_ms(u)
            )));
        }
        let mut clauses: Vec<String> = Vec::new();
        let mut values: Vec<Value> = Vec::new();
        let mut eq = |col: &str, v: &Option<String>| {
            if let Some(v) = v {
                clauses.push(format!("{col} = ?"));
                values.push(Value::Text(v.clone()));
            }
        };
        eq("tool", &self.tool);
        eq("conversation", &self.conversation);
        eq("request_id", &self.request_id);
        eq("key_id", &self.key_id);
        eq("approval_id", &self.approval_id);
        eq("breakglass_id", &self.breakglass_id);
        eq("action", &self.action.map(|a| a.name().to_string()));
        if let Some(s) = self.since_ms {
            clauses.push("time_ms >= ?".into());
            values.push(Value::Integer(s));
        }
        if let Some(u) = self.until_ms {
            clauses.push("time_ms < ?".into());
            values.push(Value::Integer(u));
        }
        if !self.kinds.is_empty() {
            let marks = vec!["?"; self.kinds.len()].join(", ");
            clauses.push(format!("kind IN ({marks})"));
            values.extend(self.kinds.iter().map(|k| Value::Text(k.name().into())));
        }
        let where_sql = if clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", clauses.join(" AND "))
        };
        let order = if self.newest_first { "DESC" } else { "ASC" };
        let mut sql = format!(
            "SELECT seq, time_ms, body_json, hash FROM governance{where_sql} ORDER BY seq {order}"
        );
        if let Some(l) = self.limit {
            sql.push_str(" LIMIT ?");
            values.push(Value::Integer(i64::try_from(l).unwrap_or(i64::MAX)));
        }
        Ok((sql, values))
    }
}

/// A row's stored fields, in hashing order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub seq: i64,
    pub time_ms: i64,
    pub kind: String,
    pub cols: [Option<String>; 8],
    pub body_json: String,
    pub hash_key_id: String,
    pub prev_hash: String,
}

impl Row {
    pub(crate) fn from_record(
        seq: i64,
        rec: &GovernanceRecord,
        keep_values: bool,
        key: &ChainKey,
        prev_hash: &str,
    ) -> Result<Row, serde_json::Error> {
        let mut event = rec.event.clone();
        if let GovernanceEvent::ToolDecision(e) = &mut event
            && !keep_values
        {
            e.argument_values = None;
        }
        let c = event.columns();
        Ok(Row {
            seq,
            time_ms: rec.time_ms,
            kind: event.kind().name().into(),
            cols: [
                c.request_id,
                c.key_id,
                c.endpoint,
                c.conversation,
                c.tool,
                c.action,
                c.approval_id,
                c.breakglass_id,
            ],
            body_json: serde_json::to_string(&event)?,
            hash_key_id: key.id().to_string(),
            prev_hash: prev_hash.to_string(),
        })
    }

    /// The row's chain hash under `key`.
    pub(crate) fn hash(&self, key: &ChainKey) -> String {
        fn text(h: &mut blake3::Hasher, s: Option<&str>) {
            match s {
                None => {
                    h.update(&[0]);
                }
                Some(s) => {
                    h.update(&[1]);
                    h.update(&(s.len() as u64).to_le_bytes());
                    h.update(s.as_bytes());
                }
            }
        }
        let mut h = blake3::Hasher::new_keyed(&key.key);
        h.update(ROW_DOMAIN.as_bytes());
        h.update(&self.seq.to_le_bytes());
        h.update(&self.time_ms.to_le_bytes());
        text(&mut h, Some(&self.kind));
        for c in &self.cols {
            text(&mut h, c.as_deref());
        }
        text(&mut h, Some(&self.body_json));
        text(&mut h, Some(&self.hash_key_id));
        text(&mut h, Some(&self.prev_hash));
        h.finalize().to_hex().to_string()
    }
}

pub(crate) const INSERT_SQL: &str = "INSERT INTO governance (seq, time_ms, kind, request_id, \
    key_id, endpoint, conversation, tool, action, approval_id, breakglass_id, body_json, \
    hash_key_id, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, \
    ?13, ?14, ?15)";

pub(crate) const SELECT_ROW: &str = "SELECT seq, time_ms, kind, request_id, key_id, endpoint, \
    conversation, tool, action, approval_id, breakglass_id, body_json, hash_key_id, \
    prev_hash, hash FROM governance";

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(Row, String)> {
    Ok((
        Row {
            seq: r.get(0)?,
            time_ms: r.get(1)?,
            kind: r.get(2)?,
            cols: [
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
                r.get(10)?,
            ],
            body_json: r.get(11)?,
            hash_key_id: r.get(12)?,
            prev_hash: r.get(13)?,
        },
        r.get(14)?,
    ))
}

/// The chain's head: `(seq, hash, key id)` of the last row, if any.
pub(crate) fn head(conn: &rusqlite::Connection) -> rusqlite::Result<Option<(i64, String, String)>> {
    use rusqlite::OptionalExtension;
    conn.query_row(
        "SELECT seq, hash, hash_key_id FROM governance ORDER BY seq DESC LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .optional()
}

/// Refuses a log whose chain was written under another key.
pub(crate) fn check_head_key(
    conn: &rusqlite::Connection,
    path: &Path,
    key: &ChainKey,
) -> Result<(), AuditError> {
    check_head(head(conn).map_err(AuditError::sqlite(path))?, path, key)
}

/// Refuses a chain whose head (`(seq, hash, key id)`) was written under another key.
pub(crate) fn check_head(
    head: Option<(i64, String, String)>,
    path: &Path,
    key: &ChainKey,
) -> Result<(), AuditError> {
    if let Some((seq, _, found)) = head
        && found != key.id()
    {
        return Err(AuditError::ChainKey {
            path: path.to_path_buf(),
            seq,
            found,
            expected: key.id().to_string(),
        });
    }
    Ok(())
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Rows read.
    pub rows: u64,
    /// Whether the whole chain verified.
    pub ok: bool,
    /// The first bad row: its `seq` and why.
    pub first_bad: Option<(i64, String)>,
    /// The last row's `seq` and hash: record it elsewhere to detect a truncated tail later.
    pub head: Option<(i64, String)>,
    /// The id of the key verified with.
    pub key_id: String,
    /// Whether the append-only triggers are in place (a missing trigger means someone
    /// dropped it: the rows may still verify, but look closer).
    pub triggers_present: bool,
}

/// Walks the governance chain of the log at `path` with `key`, oldest first, and reports
/// the first row that does not verify.
pub fn verify(path: &Path, key: &ChainKey) -> Result<VerifyReport, AuditError> {
    let conn = schema::open_reader(path)?;
    verify_conn(&conn, path, key)
}

/// [`verify`] of a SQLite file or a PostgreSQL database.
pub fn verify_source(
    source: &crate::AuditSource,
    key: &ChainKey,
) -> Result<VerifyReport, AuditError> {
    match source {
        crate::AuditSource::Sqlite(path) => verify(path, key),
        crate::AuditSource::Postgres(pg) => crate::pg::PgConn::open_reader(pg)?.verify(key),
    }
}

fn verify_conn(
    conn: &rusqlite::Connection,
    path: &Path,
    key: &ChainKey,
) -> Result<VerifyReport, AuditError> {
    let sq = |source| AuditError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let triggers: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name IN \
             ('governance_no_update', 'governance_no_delete')",
            [],
            |r| r.get(0),
        )
        .map_err(&sq)?;
    let mut stmt = conn
        .prepare(&format!("{SELECT_ROW} ORDER BY seq ASC"))
        .map_err(&sq)?;
    let mut rows = stmt.query([]).map_err(&sq)?;
    let rows = std::iter::from_fn(|| match rows.next() {
        Ok(Some(r)) => Some(read_row(r).map_err(&sq)),
        Ok(None) => None,
        Err(e) => Some(Err(sq(e))),
    });
    verify_rows(rows, key, triggers == 2)
}

/// Walks the chain's rows (`(row, stored hash)`, oldest first): the report of [`verify`],
/// for either backend.
pub(crate) fn verify_rows(
    rows: impl Iterator<Item = Result<(Row, String), AuditError>>,
    key: &ChainKey,
    triggers_present: bool,
) -> Result<VerifyReport, AuditError> {
    let mut n = 0u64;
    let mut prev_seq = 0i64;
    let mut prev_hash = GENESIS_HASH.to_string();
    let mut first_bad: Option<(i64, String)> = None;
    let mut head = None;
    for r in rows {
        let (row, stored) = r?;
        n += 1;
        if first_bad.is_none() {
            let why = if row.seq != prev_seq + 1 {
                Some(if row.seq == prev_seq + 2 {
                    format!("row {} before it is missing (deleted)", prev_seq + 1)
                } else if row.seq > prev_seq {
                    format!(
                        "rows {} to {} before it are missing (deleted)",
                        prev_seq + 1,
                        row.seq - 1
                    )
                } else {
                    format!("its seq does not follow row {prev_seq}")
                })
            } else if row.prev_hash != prev_hash {
                Some(
                    "its prev_hash is not the previous row's hash (a row was deleted, \
                     replaced or moved)"
                        .to_string(),
                )
            } else if row.hash_key_id != key.id() {
                Some(format!(
                    "chained with key id {}, verifying with key id {}",
                    row.hash_key_id,
                    key.id()
                ))
            } else if row.hash(key) != stored {
                Some("its hash does not match its contents (the row was edited)".to_string())
            } else {
                None
            };
            if let Some(why) = why {
                first_bad = Some((row.seq, why));
            }
        }
        prev_seq = row.seq;
        prev_hash = stored.clone();
        head = Some((row.seq, stored));
    }
    Ok(VerifyReport {
        rows: n,
        ok: first_bad.is_none(),
        first_bad,
        head,
        key_id: key.id().to_string(),
        triggers_present,
    })
}

/// Decodes a stored row for a query.
pub(crate) fn decode(
    path: &Path,
    seq: i64,
    time_ms: i64,
    body: &str,
    hash: String,
) -> Result<StoredGovernance, AuditError> {
    let event = serde_json::from_str(body).map_err(|e| AuditError::Corrupt {
        path: path.to_path_buf(),
        id: seq,
        message: e.to_string(),
    })?;
    Ok(StoredGovernance {
        seq,
        time_ms,
        event,
        hash,
    })
}
