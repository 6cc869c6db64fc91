//! Approval tokens: a CONFIRM decision hands the client a token bound to the exact call
//! (tool, keyed hash of the canonical arguments, conversation, expiry), MAC'd with a keyed
//! BLAKE3 and good for one use. The client resubmits the call with the token; the book
//! checks it again and refuses a replay, another tool, changed arguments, another
//! conversation, an expired or a tampered token.
//!
//! # A human says yes
//!
//! A token is not redeemable when issued: it is a pending approval
//! ([`ApprovalBook::pending`]) until an approver other than the requester approves it
//! ([`ApprovalBook::approve`]; [`ApprovalBook::deny`] refuses it for good). Before this
//! (issue 35) the caller that made the call got a token it could redeem at once, so CONFIRM
//! meant "ask again", not "a human said yes". Each requester may hold at most its share of
//! the pending approvals ([`ApprovalBook::with_requester_capacity`]), so one key cannot
//! fill the book and turn every other key's CONFIRM into BLOCK.
//!
//! # Restarts and replicas
//!
//! The book is in memory, and so is its record of redeemed tokens. A token accepted after a
//! restart could therefore be replayed, so the book has **no configured-key mode**: its key
//! is random per process ([`ApprovalBook::with_random_key`] in the service), and a restart
//! invalidates every pending token (the client gets CONFIRM again and asks its human again,
//! which costs seconds; a persistent used-set would cost a durable write on every redeem).
//! For the same reason a token is only good on the replica that issued it: deployments with
//! several replicas need sticky routing per conversation for the approval flow.
//!
//! # Memory
//!
//! The book remembers every token it issued until the token expires (that is what makes
//! "single use" and the mismatch diagnostics work), at most [`MAX_OUTSTANDING`] of them.
//! When full it refuses to issue ([`ApprovalError::Full`]) rather than forget an unexpired
//! token, which would reopen it to replay. Expired entries are dropped on every call.

use crate::ToolCall;
use rampart_state::{
    ApprovalOutcome, ApprovalRecord, ApprovalState as StoredState, ApprovalStep, Op, Reply,
    SharedStore, StateError,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

/// Most tokens one book remembers (issued and not yet expired, redeemed or not). At about
/// 200 bytes each, under 15 MiB.
pub const MAX_OUTSTANDING: usize = 65_536;
/// Default time to live of a token: 10 minutes.
pub const DEFAULT_APPROVAL_TTL_MS: u64 = 600_000;
/// Prefix (and version) of every token.
pub const TOKEN_PREFIX: &str = "rat1";
/// Rule id added to a decision that a redeemed approval turned from CONFIRM into ALLOW.
pub const RULE_APPROVED: &str = "APPROVED";

const DOMAIN_MAC: &str = "rampart approval token v1";
const DOMAIN_ARGS: &str = "rampart approval arguments v1";

/// Why a token was refused (or could not be issued).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// Not a token of this format.
    #[error("approval token is malformed")]
    Malformed,
    /// The MAC does not match: tampered, or issued by another process or replica.
    #[error("approval token signature is invalid (tampered, or issued by another process)")]
    BadSignature,
    /// Past its expiry.
    #[error("approval token has expired")]
    Expired,
    /// Already redeemed once.
    #[error("approval token was already used")]
    Replayed,
    /// Issued for another tool.
    #[error("approval token was issued for another tool")]
    ToolMismatch,
    /// Issued for other arguments.
    #[error("approval token was issued for other arguments")]
    ArgumentsMismatch,
    /// Issued for another conversation.
    #[error("approval token was issued for another conversation")]
    ConversationMismatch,
    /// Genuine and for this call, but no approver has approved it yet (not used up).
    #[error("approval {id} is waiting for an approver")]
    NotApproved {
        /// The pending approval.
        id: ApprovalId,
    },
    /// An approver denied it.
    #[error("approval was denied by an approver")]
    Denied,
    /// No pending approval has this id (never issued, or expired).
    #[error("no pending approval has this id (unknown or expired)")]
    Unknown,
    /// The requester tried to approve (or deny) its own call.
    #[error("an approval must come from another key than the one that made the call")]
    SelfApproval,
    /// Already approved or denied.
    #[error("approval was already decided")]
    AlreadyDecided,
    /// The book holds [`MAX_OUTSTANDING`] unexpired tokens (or its configured cap): no new
    /// one is issued until some expire.
    #[error("too many pending approvals ({capacity}); try again when some have expired")]
    Full {
        /// The cap.
        capacity: usize,
    },
    /// The shared state (Redis) could not be read or written: the call is held (fail
    /// closed), never allowed on a token that could not be checked.
    #[error("the shared state is unavailable: {0}")]
    Unavailable(String),
    /// The requester holds its share of the book's tokens.
    #[error(
        "this key holds {capacity} pending approvals, its share; try again when some have expired"
    )]
    RequesterFull {
        /// The share.
        capacity: usize,
    },
}

impl ApprovalError {
    /// A short snake_case name (audit rows, metrics labels).
    pub fn name(&self) -> &'static str {
        match self {
            ApprovalError::Malformed => "malformed",
            ApprovalError::BadSignature => "bad_signature",
            ApprovalError::Expired => "expired",
            ApprovalError::Replayed => "replayed",
            ApprovalError::ToolMismatch => "tool_mismatch",
            ApprovalError::ArgumentsMismatch => "arguments_mismatch",
            ApprovalError::ConversationMismatch => "conversation_mismatch",
            ApprovalError::NotApproved { .. } => "not_approved",
            ApprovalError::Denied => "denied",
            ApprovalError::Unknown => "unknown",
            ApprovalError::SelfApproval => "self_approval",
            ApprovalError::AlreadyDecided => "already_decided",
            ApprovalError::Full { .. } => "full",
            ApprovalError::RequesterFull { .. } => "requester_full",
            ApprovalError::Unavailable(_) => "state_unavailable",
        }
    }
}

/// The operating system's random generator failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no randomness from the operating system: {0}")]
pub struct RandomError(String);

/// 32 random bytes from the operating system.
pub fn random_key() -> Result<[u8; 32], RandomError> {
    let mut k = [0u8; 32];
    getrandom::fill(&mut k).map_err(|e| RandomError(e.to_string()))?;
    Ok(k)
}

/// The id of an issued approval (32 hex digits), as audit rows name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApprovalId(pub String);

impl std::fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What [`ApprovalBook::issue`] hands out: the token for the client, and the binding for the
/// audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalGrant {
    /// The approval's id.
    pub id: ApprovalId,
    /// The token the client sends back with the call (`rat1.<id>.<expires_ms>.<mac>`).
    pub token: String,
    /// The tool.
    pub tool: String,
    /// Keyed hash of the canonical arguments (hex).
    pub arguments_hash: String,
    /// The conversation it is good for.
    pub conversation: String,
    /// Expiry, Unix milliseconds.
    pub expires_ms: u64,
}

/// The canonical form of a JSON value: object keys sorted, no whitespace, strings exactly
/// as given (not normalized: the tool receives these bytes), numbers as serde_json writes
/// them. The same call gives the same bytes whatever its key order.
pub fn canonical_arguments(v: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_string(s: &str, out: &mut String) {
    // Exactly the value the tool receives: NFKC-equivalent values are different calls (a
    // token issued for one must not redeem the other).
    out.push_str(&serde_json::Value::String(s.to_string()).to_string());
}

fn write_canonical(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            // Sorted by key, so the order never depends on the map's.
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, x)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(x, out);
            }
            out.push('}');
        }
    }
}

/// Keyed BLAKE3 of [`canonical_arguments`], hex.
pub fn arguments_hash(key: &[u8; 32], v: &serde_json::Value) -> String {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(DOMAIN_ARGS.as_bytes());
    h.update(&[0]);
    h.update(canonical_arguments(v).as_bytes());
    h.finalize().to_hex().to_string()
}

/// Keyed hash of each top-level argument's canonical value, by argument name (for the audit:
/// which argument changed between two calls can be seen, the values cannot). Arguments that
/// are not an object hash as one entry named `""`.
pub fn argument_hashes(key: &[u8; 32], arguments: &serde_json::Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    match arguments {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                out.insert(k.clone(), arguments_hash(key, v));
            }
        }
        serde_json::Value::Null => {}
        other => {
            out.insert(String::new(), arguments_hash(key, other));
        }
    }
    out
}

/// Where an approval stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for an approver.
    Pending,
    /// Approved (the token is redeemable once).
    Approved {
        /// The approver's key id.
        by: String,
    },
    /// Denied (the token is never redeemable).
    Denied {
        /// The approver's key id.
        by: String,
    },
}

/// An approval as approvers see it: the call with its arguments (shown to approvers only),
/// who asked, and where it stands. (Not `deny_unknown_fields`: serde does not support it
/// with the flattened state.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The approval's id.
    pub id: ApprovalId,
    /// The tool.
    pub tool: String,
    /// The arguments exactly as the tool will receive them.
    pub arguments: serde_json::Value,
    /// Keyed hash of the canonical arguments.
    pub arguments_hash: String,
    /// The key that made the call (`None`: no authentication configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// Issued, Unix milliseconds.
    pub issued_ms: u64,
    /// Expiry, Unix milliseconds.
    pub expires_ms: u64,
    /// Where it stands.
    #[serde(flatten)]
    pub state: ApprovalState,
}

#[derive(Debug)]
struct Entry {
    tool: String,
    arguments_hash: String,
    arguments: serde_json::Value,
    conversation: String,
    requested_by: Option<String>,
    issued_ms: u64,
    expires_ms: u64,
    state: ApprovalState,
    used: bool,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    by_expiry: BTreeSet<(u64, String)>,
    /// Unexpired entries per requester (`""`: none given).
    per_requester: HashMap<String, usize>,
    counter: u64,
}

impl Inner {
    fn prune(&mut self, now_ms: u64) {
        while let Some((exp, id)) = self.by_expiry.first().cloned() {
            if exp > now_ms {
                break;
            }
            self.by_expiry.pop_first();
            if let Some(e) = self.entries.remove(&id) {
                let who = e.requested_by.unwrap_or_default();
                if let Some(n) = self.per_requester.get_mut(&who) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.per_requester.remove(&who);
                    }
                }
            }
        }
    }
}

/// Issues and redeems approval tokens. `Send + Sync`: share it in an `Arc`.
pub struct ApprovalBook {
    mac_key: [u8; 32],
    args_key: [u8; 32],
    id_key: [u8; 32],
    ttl_ms: u64,
    capacity: usize,
    requester_capacity: usize,
    inner: Mutex<Inner>,
    /// Set: approvals live in the shared state (every replica with the same key reads them).
    shared: Option<Arc<dyn SharedStore>>,
}

impl std::fmt::Debug for ApprovalBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalBook")
            .field("ttl_ms", &self.ttl_ms)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl ApprovalBook {
    /// A book keyed by `key` (tests; the service uses [`ApprovalBook::with_random_key`]),
    /// tokens living `ttl_ms` (at least 1).
    pub fn new(key: [u8; 32], ttl_ms: u64) -> Self {
        Self {
            mac_key: blake3::derive_key("rampart approval mac v1", &key),
            args_key: blake3::derive_key("rampart approval arguments v1", &key),
            id_key: blake3::derive_key("rampart approval id v1", &key),
            ttl_ms: ttl_ms.max(1),
            capacity: MAX_OUTSTANDING,
            requester_capacity: MAX_OUTSTANDING,
            inner: Mutex::new(Inner::default()),
            shared: None,
        }
    }

    /// Keeps the approvals in `store`, shared by every replica built with the same key
    /// ([`ApprovalBook::new`]): a token issued on one replica is approved and redeemed on any
    /// other, once. Without it, the book is in this process (see the module documentation).
    pub fn with_shared_state(mut self, store: Arc<dyn SharedStore>) -> Self {
        self.shared = Some(store);
        self
    }

    /// A book with a random per-process key: its tokens die with the process.
    pub fn with_random_key(ttl_ms: u64) -> Result<Self, RandomError> {
        Ok(Self::new(random_key()?, ttl_ms))
    }

    /// Lowers the cap on remembered tokens (at most [`MAX_OUTSTANDING`], at least 1).
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.clamp(1, MAX_OUTSTANDING);
        self
    }

    /// Lowers each requester's share of the remembered tokens (at least 1; by default the
    /// whole book).
    pub fn with_requester_capacity(mut self, capacity: usize) -> Self {
        self.requester_capacity = capacity.clamp(1, MAX_OUTSTANDING);
        self
    }

    /// The tokens' time to live, milliseconds.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Keyed hash of the call's canonical arguments, as bound into tokens.
    pub fn arguments_hash(&self, arguments: &serde_json::Value) -> String {
        arguments_hash(&self.args_key, arguments)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn mac(
        &self,
        id: &str,
        expires_ms: u64,
        tool: &str,
        args_hash: &str,
        conv: &str,
    ) -> blake3::Hash {
        let mut h = blake3::Hasher::new_keyed(&self.mac_key);
        h.update(DOMAIN_MAC.as_bytes());
        for part in [id, tool, args_hash, conv] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        h.update(&expires_ms.to_le_bytes());
        h.finalize()
    }

    /// Issues a token for `call` in `conversation` made by `requested_by` (an API key id;
    /// `None` when the caller is anonymous), expiring `ttl_ms` after `now_ms`. The approval
    /// is pending: the token redeems only once another key has approved it.
    pub fn issue(
        &self,
        call: &ToolCall,
        conversation: &str,
        requested_by: Option<&str>,
        now_ms: u64,
    ) -> Result<ApprovalGrant, ApprovalError> {
        if let Some(store) = &self.shared {
            return self.issue_shared(store.as_ref(), call, conversation, requested_by, now_ms);
        }
        let tool = call.tool.clone();
        let arguments_hash = self.arguments_hash(&call.arguments);
        let expires_ms = now_ms.saturating_add(self.ttl_ms);
        let mut inner = self.lock();
        inner.prune(now_ms);
        if inner.entries.len() >= self.capacity {
            return Err(ApprovalError::Full {
                capacity: self.capacity,
            });
        }
        let who = requested_by.unwrap_or_default().to_string();
        let held = inner.per_requester.get(&who).copied().unwrap_or(0);
        if held >= self.requester_capacity {
            return Err(ApprovalError::RequesterFull {
                capacity: self.requester_capacity,
            });
        }
        *inner.per_requester.entry(who).or_default() += 1;
        inner.counter += 1;
        let mut h = blake3::Hasher::new_keyed(&self.id_key);
        h.update(&inner.counter.to_le_bytes());
        let id = h.finalize().to_hex()[..32].to_string();
        let mac = self.mac(&id, expires_ms, &tool, &arguments_hash, conversation);
        let token = format!("{TOKEN_PREFIX}.{id}.{expires_ms}.{}", mac.to_hex());
        inner.entries.insert(
            id.clone(),
            Entry {
                tool: tool.clone(),
                arguments_hash: arguments_hash.clone(),
                arguments: call.arguments.clone(),
                conversation: conversation.to_string(),
                requested_by: requested_by.map(str::to_string),
                issued_ms: now_ms,
                expires_ms,
                state: ApprovalState::Pending,
                used: false,
            },
        );
        inner.by_expiry.insert((expires_ms, id.clone()));
        Ok(ApprovalGrant {
            id: ApprovalId(id),
            token,
            tool,
            arguments_hash,
            conversation: conversation.to_string(),
            expires_ms,
        })
    }

    /// Redeems `token` for `call` in `conversation`: the approval's id if the token was
    /// issued by this book for exactly this call, an approver approved it, it has not
    /// expired and was not used before (it is used now). Still pending:
    /// [`ApprovalError::NotApproved`] (not used up).
    pub fn redeem(
        &self,
        token: &str,
        call: &ToolCall,
        conversation: &str,
        now_ms: u64,
    ) -> Result<ApprovalId, ApprovalError> {
        let (id, expires_ms, mac) = parse_token(token)?;
        let tool = call.tool.as_str();
        let arguments_hash = self.arguments_hash(&call.arguments);
        // `blake3::Hash` compares in constant time.
        let genuine_for_call = self.mac(id, expires_ms, tool, &arguments_hash, conversation) == mac;
        if let Some(store) = &self.shared {
            let binding = Binding {
                id,
                expires_ms,
                tool,
                arguments_hash: &arguments_hash,
                mac,
            };
            return self.redeem_shared(store.as_ref(), &binding, genuine_for_call, now_ms);
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        if !genuine_for_call {
            // Genuine but for another call? Say which part differs (the first of tool,
            // arguments, conversation), else it is forged or tampered.
            if let Some(e) = inner.entries.get(id)
                && e.expires_ms == expires_ms
                && self.mac(id, expires_ms, &e.tool, &e.arguments_hash, &e.conversation) == mac
            {
                return Err(if e.tool != tool {
                    ApprovalError::ToolMismatch
                } else if e.arguments_hash != arguments_hash {
                    ApprovalError::ArgumentsMismatch
                } else {
                    ApprovalError::ConversationMismatch
                });
            }
            return Err(ApprovalError::BadSignature);
        }
        if now_ms >= expires_ms {
            return Err(ApprovalError::Expired);
        }
        match inner.entries.get_mut(id) {
            Some(e) if !e.used => match e.state {
                ApprovalState::Pending => Err(ApprovalError::NotApproved {
                    id: ApprovalId(id.to_string()),
                }),
                ApprovalState::Denied { .. } => Err(ApprovalError::Denied),
                ApprovalState::Approved { .. } => {
                    e.used = true;
                    Ok(ApprovalId(id.to_string()))
                }
            },
            // Used, or (impossible while the book keeps every unexpired token) forgotten:
            // refuse either way.
            _ => Err(ApprovalError::Replayed),
        }
    }

    /// The approvals waiting for an approver (unexpired, undecided), oldest first.
    pub fn pending(&self, now_ms: u64) -> Result<Vec<PendingApproval>, ApprovalError> {
        if let Some(store) = &self.shared {
            let mut out = Vec::new();
            for id in self.shared_ids(store.as_ref(), now_ms)? {
                if let Some(p) = self.get_shared(store.as_ref(), &id)?
                    && p.state == ApprovalState::Pending
                {
                    out.push(p);
                }
            }
            out.sort_by(|a, b| (a.issued_ms, &a.id).cmp(&(b.issued_ms, &b.id)));
            return Ok(out);
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        let mut out: Vec<PendingApproval> = inner
            .entries
            .iter()
            .filter(|(_, e)| e.state == ApprovalState::Pending)
            .map(|(id, e)| view(id, e))
            .collect();
        out.sort_by(|a, b| (a.issued_ms, &a.id).cmp(&(b.issued_ms, &b.id)));
        Ok(out)
    }

    /// One approval by id, whatever its state (unexpired).
    pub fn get(&self, id: &str, now_ms: u64) -> Result<Option<PendingApproval>, ApprovalError> {
        if let Some(store) = &self.shared {
            return self.get_shared(store.as_ref(), id);
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        Ok(inner.entries.get(id).map(|e| view(id, e)))
    }

    /// `approver` approves the pending approval `id`: its token becomes redeemable once.
    /// Refused for the requester itself, an unknown or expired id, or one already decided.
    pub fn approve(
        &self,
        id: &str,
        approver: &str,
        now_ms: u64,
    ) -> Result<PendingApproval, ApprovalError> {
        self.decide(id, approver, now_ms, true)
    }

    /// `approver` denies the pending approval `id`: its token never redeems.
    pub fn deny(
        &self,
        id: &str,
        approver: &str,
        now_ms: u64,
    ) -> Result<PendingApproval, ApprovalError> {
        self.decide(id, approver, now_ms, false)
    }

    /// Turns an approval whose approval could not be recorded back into a denial (the
    /// service fails closed: an unaudited approval must not stay in force).
    pub fn deny_after_failure(&self, id: &str, now_ms: u64) -> Result<(), ApprovalError> {
        if let Some(store) = &self.shared {
            let step = ApprovalStep::ForceDeny {
                by: "rampart (the approval could not be audited)".into(),
            };
            return match shared_step(store.as_ref(), id, step)? {
                ApprovalOutcome::Done(_) => Ok(()),
                _ => Err(ApprovalError::Unknown),
            };
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        let e = inner.entries.get_mut(id).ok_or(ApprovalError::Unknown)?;
        e.state = ApprovalState::Denied {
            by: "rampart (the approval could not be audited)".into(),
        };
        Ok(())
    }

    fn decide(
        &self,
        id: &str,
        approver: &str,
        now_ms: u64,
        approve: bool,
    ) -> Result<PendingApproval, ApprovalError> {
        if let Some(store) = &self.shared {
            let by = approver.to_string();
            let step = if approve {
                ApprovalStep::Approve { by }
            } else {
                ApprovalStep::Deny { by }
            };
            return match shared_step(store.as_ref(), id, step)? {
                ApprovalOutcome::Done(rec) => shared_view(id, &rec),
                ApprovalOutcome::SelfApproval => Err(ApprovalError::SelfApproval),
                ApprovalOutcome::AlreadyDecided => Err(ApprovalError::AlreadyDecided),
                _ => Err(ApprovalError::Unknown),
            };
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        let e = inner.entries.get_mut(id).ok_or(ApprovalError::Unknown)?;
        if approver.is_empty() || e.requested_by.as_deref() == Some(approver) {
            return Err(ApprovalError::SelfApproval);
        }
        if e.state != ApprovalState::Pending {
            return Err(ApprovalError::AlreadyDecided);
        }
        let by = approver.to_string();
        e.state = if approve {
            ApprovalState::Approved { by }
        } else {
            ApprovalState::Denied { by }
        };
        Ok(view(id, e))
    }

    /// How many tokens the book remembers now (after dropping the expired ones).
    pub fn outstanding(&self, now_ms: u64) -> Result<usize, ApprovalError> {
        if let Some(store) = &self.shared {
            return Ok(self.shared_ids(store.as_ref(), now_ms)?.len());
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        Ok(inner.entries.len())
    }
}

/// What a token binds, as read from it and the call (for the shared-state redeem).
struct Binding<'a> {
    id: &'a str,
    expires_ms: u64,
    tool: &'a str,
    arguments_hash: &'a str,
    mac: blake3::Hash,
}

/// An approval as kept in the shared state (the store sees it as opaque JSON; its state,
/// decider and use are the store's own fields, changed atomically).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SharedRecord {
    tool: String,
    arguments: serde_json::Value,
    arguments_hash: String,
    conversation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    requested_by: Option<String>,
    issued_ms: u64,
    expires_ms: u64,
}

/// Key of an approval record, of the index of unexpired approvals, and of a requester's.
fn approval_key(id: &str) -> String {
    format!("appr:{id}")
}
const APPROVAL_INDEX: &str = "appr:idx";
fn requester_index(who: &str) -> String {
    // Key ids are configured names, but bounded here all the same.
    format!("appr:req:{}", &blake3::hash(who.as_bytes()).to_hex()[..32])
}

fn unavailable(e: StateError) -> ApprovalError {
    ApprovalError::Unavailable(e.chain())
}

fn run(store: &dyn SharedStore, op: Op) -> Result<Reply, ApprovalError> {
    store.execute(&op).map_err(unavailable)
}

fn protocol(reply: &Reply) -> ApprovalError {
    ApprovalError::Unavailable(format!("unexpected reply from the shared state: {reply:?}"))
}

fn shared_step(
    store: &dyn SharedStore,
    id: &str,
    step: ApprovalStep,
) -> Result<ApprovalOutcome, ApprovalError> {
    match run(
        store,
        Op::Approval {
            key: approval_key(id),
            step,
        },
    )? {
        Reply::Approval(o) => Ok(o),
        other => Err(protocol(&other)),
    }
}

fn shared_view(id: &str, rec: &ApprovalRecord) -> Result<PendingApproval, ApprovalError> {
    let r: SharedRecord = serde_json::from_str(&rec.record).map_err(|e| {
        ApprovalError::Unavailable(format!("an approval record does not read: {e}"))
    })?;
    let by = rec.by.clone();
    Ok(PendingApproval {
        id: ApprovalId(id.to_string()),
        tool: r.tool,
        arguments: r.arguments,
        arguments_hash: r.arguments_hash,
        requested_by: r.requested_by,
        issued_ms: r.issued_ms,
        expires_ms: r.expires_ms,
        state: match rec.state {
            StoredState::Pending => ApprovalState::Pending,
            StoredState::Approved => ApprovalState::Approved { by },
            StoredState::Denied => ApprovalState::Denied { by },
        },
    })
}

impl ApprovalBook {
    /// [`ApprovalBook::issue`] in the shared state: a random id (replicas share no
    /// counter), the requester's share and the book's cap counted in two capped indexes,
    /// then the pending record, all with the token's expiry.
    fn issue_shared(
        &self,
        store: &dyn SharedStore,
        call: &ToolCall,
        conversation: &str,
        requested_by: Option<&str>,
        now_ms: u64,
    ) -> Result<ApprovalGrant, ApprovalError> {
        let tool = call.tool.clone();
        let arguments_hash = self.arguments_hash(&call.arguments);
        let expires_ms = now_ms.saturating_add(self.ttl_ms);
        let nonce = random_key().map_err(|e| ApprovalError::Unavailable(e.to_string()))?;
        let mut h = blake3::Hasher::new_keyed(&self.id_key);
        h.update(&nonce);
        let id = h.finalize().to_hex()[..32].to_string();
        let who = requested_by.unwrap_or_default();
        let add = |index: String, cap: usize| {
            run(
                store,
                Op::IndexAdd {
                    index,
                    member: id.clone(),
                    expires_ms,
                    cap: cap as u64,
                    now_ms,
                },
            )
            .and_then(|r| match r {
                Reply::Done(b) => Ok(b),
                other => Err(protocol(&other)),
            })
        };
        if !add(APPROVAL_INDEX.to_string(), self.capacity)? {
            return Err(ApprovalError::Full {
                capacity: self.capacity,
            });
        }
        let remove_from_book = || {
            let _ = store.execute(&Op::IndexRemove {
                index: APPROVAL_INDEX.into(),
                member: id.clone(),
            });
        };
        match add(requester_index(who), self.requester_capacity) {
            Ok(true) => {}
            Ok(false) => {
                remove_from_book();
                return Err(ApprovalError::RequesterFull {
                    capacity: self.requester_capacity,
                });
            }
            Err(e) => {
                remove_from_book();
                return Err(e);
            }
        }
        let record = SharedRecord {
            tool: tool.clone(),
            arguments: call.arguments.clone(),
            arguments_hash: arguments_hash.clone(),
            conversation: conversation.to_string(),
            requested_by: requested_by.map(str::to_string),
            issued_ms: now_ms,
            expires_ms,
        };
        let record = serde_json::to_string(&record)
            .map_err(|e| ApprovalError::Unavailable(format!("cannot write the record: {e}")))?;
        match run(
            store,
            Op::ApprovalNew {
                key: approval_key(&id),
                record,
                requested_by: who.to_string(),
                ttl_ms: self.ttl_ms,
            },
        )? {
            Reply::Done(true) => {}
            other => {
                remove_from_book();
                return Err(protocol(&other));
            }
        }
        let mac = self.mac(&id, expires_ms, &tool, &arguments_hash, conversation);
        let token = format!("{TOKEN_PREFIX}.{id}.{expires_ms}.{}", mac.to_hex());
        Ok(ApprovalGrant {
            id: ApprovalId(id),
            token,
            tool,
            arguments_hash,
            conversation: conversation.to_string(),
            expires_ms,
        })
    }

    /// [`ApprovalBook::redeem`] in the shared state: the same checks in the same order,
    /// the single use decided by the store in one atomic step.
    fn redeem_shared(
        &self,
        store: &dyn SharedStore,
        b: &Binding<'_>,
        genuine_for_call: bool,
        now_ms: u64,
    ) -> Result<ApprovalId, ApprovalError> {
        if !genuine_for_call {
            // Genuine but for another call? Say which part differs, as the in-process book.
            if let Some(e) = self.record_shared(store, b.id)?
                && e.expires_ms == b.expires_ms
                && self.mac(
                    b.id,
                    e.expires_ms,
                    &e.tool,
                    &e.arguments_hash,
                    &e.conversation,
                ) == b.mac
            {
                return Err(if e.tool != b.tool {
                    ApprovalError::ToolMismatch
                } else if e.arguments_hash != b.arguments_hash {
                    ApprovalError::ArgumentsMismatch
                } else {
                    ApprovalError::ConversationMismatch
                });
            }
            return Err(ApprovalError::BadSignature);
        }
        if now_ms >= b.expires_ms {
            return Err(ApprovalError::Expired);
        }
        match shared_step(store, b.id, ApprovalStep::Redeem)? {
            ApprovalOutcome::Done(_) => Ok(ApprovalId(b.id.to_string())),
            ApprovalOutcome::NotApproved => Err(ApprovalError::NotApproved {
                id: ApprovalId(b.id.to_string()),
            }),
            ApprovalOutcome::Denied => Err(ApprovalError::Denied),
            // Used, or gone from the store (expired, or the store lost it): refuse either way.
            _ => Err(ApprovalError::Replayed),
        }
    }

    fn record_shared(
        &self,
        store: &dyn SharedStore,
        id: &str,
    ) -> Result<Option<SharedRecord>, ApprovalError> {
        match run(
            store,
            Op::ApprovalGet {
                key: approval_key(id),
            },
        )? {
            Reply::Record(Some(rec)) => serde_json::from_str(&rec.record).map(Some).map_err(|e| {
                ApprovalError::Unavailable(format!("an approval record does not read: {e}"))
            }),
            Reply::Record(None) => Ok(None),
            other => Err(protocol(&other)),
        }
    }

    fn get_shared(
        &self,
        store: &dyn SharedStore,
        id: &str,
    ) -> Result<Option<PendingApproval>, ApprovalError> {
        match run(
            store,
            Op::ApprovalGet {
                key: approval_key(id),
            },
        )? {
            Reply::Record(Some(rec)) => shared_view(id, &rec).map(Some),
            Reply::Record(None) => Ok(None),
            other => Err(protocol(&other)),
        }
    }

    fn shared_ids(
        &self,
        store: &dyn SharedStore,
        now_ms: u64,
    ) -> Result<Vec<String>, ApprovalError> {
        match run(
            store,
            Op::IndexLive {
                index: APPROVAL_INDEX.into(),
                now_ms,
                limit: self.capacity as u64,
            },
        )? {
            Reply::Members(m) => Ok(m),
            other => Err(protocol(&other)),
        }
    }
}

fn view(id: &str, e: &Entry) -> PendingApproval {
    PendingApproval {
        id: ApprovalId(id.to_string()),
        tool: e.tool.clone(),
        arguments: e.arguments.clone(),
        arguments_hash: e.arguments_hash.clone(),
        requested_by: e.requested_by.clone(),
        issued_ms: e.issued_ms,
        expires_ms: e.expires_ms,
        state: e.state.clone(),
    }
}

fn parse_token(token: &str) -> Result<(&str, u64, blake3::Hash), ApprovalError> {
    let mut parts = token.trim().split('.');
    let (Some(prefix), Some(id), Some(exp), Some(mac), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(ApprovalError::Malformed);
    };
    if prefix != TOKEN_PREFIX
        || id.len() != 32
        || !id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        || exp.is_empty()
        || exp.len() > 20
        || !exp.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(ApprovalError::Malformed);
    }
    let expires_ms: u64 = exp.parse().map_err(|_| ApprovalError::Malformed)?;
    let mac = blake3::Hash::from_hex(mac).map_err(|_| ApprovalError::Malformed)?;
    Ok((id, expires_ms, mac))
}

/// Applies a redeemed approval to a decision: CONFIRM becomes ALLOW (rule [`RULE_APPROVED`],
/// `approval_id` set). BLOCK stays BLOCK: an approval never overrides a block. Returns
/// whether the decision changed.
pub fn apply_approval(decision: &mut crate::ToolDecision, id: &ApprovalId) -> bool {
    if decision.action != crate::ToolAction::Confirm {
        return false;
    }
    decision.action = crate::ToolAction::Allow;
    decision.rules.push(RULE_APPROVED.into());
    decision
        .reasons
        .push(format!("approved by a human (approval {id})"));
    decision.approval_id = Some(id.clone());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T0: u64 = 1_700_000_000_000;

    fn book() -> ApprovalBook {
        ApprovalBook::new([7u8; 32], 60_000)
    }

    /// Issued for the key `agent` and approved by the key `human`.
    fn approved(
        b: &ApprovalBook,
        call: &ToolCall,
        conversation: &str,
        now_ms: u64,
    ) -> Result<ApprovalGrant, ApprovalError> {
        let g = b.issue(call, conversation, Some("agent"), now_ms)?;
        b.approve(&g.id.0, "human", now_ms)?;
        Ok(g)
    }

    /// Issue 35 (4): the caller that made the call redeemed its own token at once.
    #[test]
    fn regression_a_token_redeems_only_after_another_key_approved_it() {
        let b = book();
        let g = b.issue(&call(), "c", Some("agent"), T0).unwrap();
        let pending = b.pending(T0).unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].id, g.id);
        assert_eq!(pending[0].requested_by.as_deref(), Some("agent"));
        assert_eq!(pending[0].arguments, call().arguments);
        assert_eq!(
            b.redeem(&g.token, &call(), "c", T0 + 1),
            Err(ApprovalError::NotApproved { id: g.id.clone() })
        );
        assert_eq!(
            b.approve(&g.id.0, "agent", T0 + 1),
            Err(ApprovalError::SelfApproval)
        );
        assert_eq!(
            b.approve(&g.id.0, "", T0 + 1),
            Err(ApprovalError::SelfApproval)
        );
        assert_eq!(
            b.approve("0".repeat(32).as_str(), "human", T0 + 1),
            Err(ApprovalError::Unknown)
        );
        let v = b.approve(&g.id.0, "human", T0 + 2).unwrap();
        assert_eq!(v.state, ApprovalState::Approved { by: "human".into() });
        assert!(b.pending(T0 + 2).unwrap().is_empty());
        assert_eq!(
            b.approve(&g.id.0, "other", T0 + 2),
            Err(ApprovalError::AlreadyDecided)
        );
        assert_eq!(b.redeem(&g.token, &call(), "c", T0 + 3), Ok(g.id.clone()));
        assert_eq!(
            b.redeem(&g.token, &call(), "c", T0 + 4),
            Err(ApprovalError::Replayed)
        );
        // Denied: never redeemable.
        let d = b.issue(&call(), "c", Some("agent"), T0).unwrap();
        b.deny(&d.id.0, "human", T0 + 1).unwrap();
        assert_eq!(
            b.redeem(&d.token, &call(), "c", T0 + 2),
            Err(ApprovalError::Denied)
        );
    }

    /// Issue 35 (10): one key filled the book and every other key's CONFIRM became BLOCK.
    #[test]
    fn regression_one_requester_cannot_fill_the_book() {
        let b = book().with_capacity(10).with_requester_capacity(3);
        for i in 0..3 {
            b.issue(&call(), "c", Some("greedy"), T0 + i).unwrap();
        }
        assert_eq!(
            b.issue(&call(), "c", Some("greedy"), T0 + 3),
            Err(ApprovalError::RequesterFull { capacity: 3 })
        );
        assert!(b.issue(&call(), "c", Some("polite"), T0 + 3).is_ok());
        // Expiry gives the share back.
        assert!(b.issue(&call(), "c", Some("greedy"), T0 + 60_001).is_ok());
    }

    fn call() -> ToolCall {
        ToolCall::new(
            "delete_file",
            json!({"path": "/srv/app/docs/a.md", "force": true}),
        )
    }

    #[test]
    fn a_token_is_good_once_for_its_call() {
        let b = book();
        let g = approved(&b, &call(), "conv-1", T0).unwrap();
        assert_eq!(
            b.redeem(&g.token, &call(), "conv-1", T0 + 1),
            Ok(g.id.clone())
        );
        assert_eq!(
            b.redeem(&g.token, &call(), "conv-1", T0 + 2),
            Err(ApprovalError::Replayed)
        );
    }

    #[test]
    fn a_token_for_changed_arguments_is_refused() {
        let b = book();
        let g = approved(&b, &call(), "conv-1", T0).unwrap();
        let changed = ToolCall::new("delete_file", json!({"path": "/etc/passwd", "force": true}));
        assert_eq!(
            b.redeem(&g.token, &changed, "conv-1", T0 + 1),
            Err(ApprovalError::ArgumentsMismatch)
        );
        // The refused attempt did not use it up.
        assert!(b.redeem(&g.token, &call(), "conv-1", T0 + 1).is_ok());
    }

    #[test]
    fn a_token_for_another_tool_or_conversation_is_refused() {
        let b = book();
        let g = approved(&b, &call(), "conv-1", T0).unwrap();
        let other = ToolCall::new("send_email", call().arguments);
        assert_eq!(
            b.redeem(&g.token, &other, "conv-1", T0 + 1),
            Err(ApprovalError::ToolMismatch)
        );
        assert_eq!(
            b.redeem(&g.token, &call(), "conv-2", T0 + 1),
            Err(ApprovalError::ConversationMismatch)
        );
    }

    #[test]
    fn an_expired_token_is_refused() {
        let b = book();
        let g = approved(&b, &call(), "conv-1", T0).unwrap();
        assert_eq!(g.expires_ms, T0 + 60_000);
        assert_eq!(
            b.redeem(&g.token, &call(), "conv-1", T0 + 60_000),
            Err(ApprovalError::Expired)
        );
    }

    #[test]
    fn a_tampered_token_is_refused() {
        let b = book();
        let g = approved(&b, &call(), "conv-1", T0).unwrap();
        // A later expiry.
        let parts: Vec<&str> = g.token.split('.').collect();
        let later = format!("{}.{}.{}.{}", parts[0], parts[1], T0 + 9_999_999, parts[3]);
        assert_eq!(
            b.redeem(&later, &call(), "conv-1", T0 + 1),
            Err(ApprovalError::BadSignature)
        );
        // One flipped digit of the MAC.
        let mut mac: Vec<u8> = parts[3].bytes().collect();
        mac[0] = if mac[0] == b'0' { b'1' } else { b'0' };
        let flipped = format!(
            "{}.{}.{}.{}",
            parts[0],
            parts[1],
            parts[2],
            String::from_utf8(mac).unwrap()
        );
        assert_eq!(
            b.redeem(&flipped, &call(), "conv-1", T0 + 1),
            Err(ApprovalError::BadSignature)
        );
        // Another book's (another process's) token.
        let other = ApprovalBook::new([8u8; 32], 60_000);
        let g2 = approved(&other, &call(), "conv-1", T0).unwrap();
        assert_eq!(
            b.redeem(&g2.token, &call(), "conv-1", T0 + 1),
            Err(ApprovalError::BadSignature)
        );
        for bad in [
            "",
            "rat1",
            "rat1.x.1.y",
            "rat2.00.1.00",
            &format!("{}.", g.token),
        ] {
            assert_eq!(
                b.redeem(bad, &call(), "conv-1", T0 + 1),
                Err(ApprovalError::Malformed),
                "{bad}"
            );
        }
        // The genuine one still works.
        assert!(b.redeem(&g.token, &call(), "conv-1", T0 + 1).is_ok());
    }

    #[test]
    fn argument_key_order_does_not_matter_and_unicode_form_does() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b": [1, {"y": 2, "x": "file"}], "a": "z"}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str(r#"{"a":"z","b":[1,{"x":"file","y":2}]}"#).unwrap();
        assert_eq!(
            canonical_arguments(&a),
            r#"{"a":"z","b":[1,{"x":"file","y":2}]}"#
        );
        assert_eq!(canonical_arguments(&a), canonical_arguments(&b));
        let bk = book();
        let g = approved(&bk, &ToolCall::new("t", a), "c", T0).unwrap();
        assert!(
            bk.redeem(&g.token, &ToolCall::new("t", b), "c", T0 + 1)
                .is_ok()
        );
    }

    /// Issue 35 (14): a token issued for `file` redeemed the call with `ｆｉｌｅ` (the
    /// canonical form was NFKC-normalized); the tool receives other bytes.
    #[test]
    fn regression_nfkc_equivalent_arguments_do_not_share_a_token() {
        let plain = serde_json::json!({"x": "file"});
        let wide = serde_json::json!({"x": "ｆｉｌｅ"});
        assert_ne!(canonical_arguments(&plain), canonical_arguments(&wide));
        let bk = book();
        let g = approved(&bk, &ToolCall::new("t", plain), "c", T0).unwrap();
        assert!(
            bk.redeem(&g.token, &ToolCall::new("t", wide), "c", T0 + 1)
                .is_err()
        );
    }

    #[test]
    fn a_full_book_refuses_to_issue_until_tokens_expire() {
        let b = book().with_capacity(2);
        approved(&b, &call(), "c", T0).unwrap();
        let g = approved(&b, &call(), "c", T0 + 1).unwrap();
        // Redeemed tokens are still remembered (a replay must be caught).
        b.redeem(&g.token, &call(), "c", T0 + 2).unwrap();
        assert_eq!(
            approved(&b, &call(), "c", T0 + 3),
            Err(ApprovalError::Full { capacity: 2 })
        );
        assert_eq!(
            b.redeem(&g.token, &call(), "c", T0 + 3),
            Err(ApprovalError::Replayed)
        );
        // Once the first two expire there is room again.
        assert!(approved(&b, &call(), "c", T0 + 60_001).is_ok());
        assert_eq!(b.outstanding(T0 + 60_001).unwrap(), 1);
    }

    #[test]
    fn argument_hashes_are_per_argument_and_keyed() {
        let h1 = argument_hashes(&[1; 32], &json!({"to": "a@example.com", "body": "hi"}));
        let h2 = argument_hashes(&[1; 32], &json!({"to": "b@example.com", "body": "hi"}));
        let h3 = argument_hashes(&[2; 32], &json!({"to": "a@example.com", "body": "hi"}));
        assert_eq!(h1.len(), 2);
        assert_eq!(h1["body"], h2["body"]);
        assert_ne!(h1["to"], h2["to"]);
        assert_ne!(h1["to"], h3["to"]);
        assert!(!h1.values().any(|v| v.contains("example")));
    }

    #[test]
    fn a_token_redeemed_from_many_threads_at_once_is_good_once() {
        let b = std::sync::Arc::new(book());
        let g = approved(&b, &call(), "conv-1", T0).unwrap();
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (b, token) = (std::sync::Arc::clone(&b), g.token.clone());
                std::thread::spawn(move || b.redeem(&token, &call(), "conv-1", T0 + 1))
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        assert!(
            results
                .iter()
                .all(|r| r.is_ok() || *r == Err(ApprovalError::Replayed))
        );
    }

    #[test]
    fn the_book_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<ApprovalBook>();
    }
}
