//! Shared state of Rampart's service replicas.
//!
//! The service keeps state that must hold across requests: rate-limit and failed-login
//! buckets, approval tokens (single use), pending approvals, break-glass grants. One
//! process keeps it in memory; several replicas behind a load balancer must share it, or an
//! approval token redeems twice and a rate limit doubles. This crate gives that state one
//! small interface, [`SharedStore`], with two implementations:
//!
//! * [`MemoryStore`]: in the process (tests, and the reference semantics);
//! * [`RedisStore`]: Redis, through a pool of blocking connections with connect and command
//!   timeouts; every operation that reads and writes is one Lua script, so it is atomic
//!   across replicas, and every key carries a TTL in Redis.
//!
//! Operations are data ([`Op`]), so that both stores implement exactly the same set and a
//! test can run the same sequence against both (`tests/tests.rs`). Keys hold identifiers and
//! keyed hashes, never prompt text; see DESIGN.md for the key families and their sizes.
//!
//! ```
//! use rampart_state::{MemoryStore, Op, Reply, SharedStore};
//! let store = MemoryStore::new();
//! let take = Op::Bucket { key: "rate:ci".into(), capacity: 2.0, per_s: 1.0, take: 1.0, need: 1.0, force: false, now_ms: 0 };
//! assert!(matches!(store.execute(&take).unwrap(), Reply::Bucket { allowed: true, .. }));
//! assert!(matches!(store.execute(&take).unwrap(), Reply::Bucket { allowed: true, .. }));
//! assert!(matches!(store.execute(&take).unwrap(), Reply::Bucket { allowed: false, .. }));
//! ```
#![deny(missing_docs)]

mod config;
mod conv;
mod memory;
mod redis_store;

pub use config::{Backend, RedisConfig, StateConfig, StateConfigError};
pub use conv::{ConvLineage, ConvNode, ConvRead, ConvRows, ConvWrite};
/// The field names of a conversation node in the shared store (see DESIGN.md).
pub mod conv_fields {
    pub use crate::conv::{
        F_ACTION, F_BLOCKS, F_CREATED, F_HINTS, F_PARENT, F_PEAK, F_PRINTS, F_REFUSAL, F_REFUSALS,
        F_REPHRASINGS, F_RISK, F_SANITIZES, F_SEEN, F_TURN, F_WORDS, MAX_HINTS, MAX_PRINTS,
        MAX_WORD_SETS,
    };
}
pub use memory::MemoryStore;
pub use redis_store::RedisStore;

use std::sync::Arc;

/// One atomic operation on the shared state.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Checks that the store answers.
    Ping,
    /// A token bucket of `capacity` tokens refilled at `per_s` tokens a second (a new
    /// bucket is full). When it holds at least `need` tokens, `take` are taken and the
    /// reply is allowed; otherwise nothing is taken (or, with `force`, `take` are taken
    /// down to zero) and the reply says how long until `need` are there. `take = 0` peeks.
    Bucket {
        /// The bucket's key.
        key: String,
        /// Most tokens held.
        capacity: f64,
        /// Tokens added a second.
        per_s: f64,
        /// Tokens taken.
        take: f64,
        /// Tokens that must be there.
        need: f64,
        /// Take even when fewer than `need` are there (counting failures).
        force: bool,
        /// The caller's clock, Unix milliseconds (replicas' clocks must agree: NTP).
        now_ms: u64,
    },
    /// Sets `key` to `value` for `ttl_ms` unless it exists; [`Reply::Done`] says whether it
    /// was set.
    PutNew {
        /// The key.
        key: String,
        /// The value (JSON in Rampart's use).
        value: String,
        /// Time to live, milliseconds (at least 1).
        ttl_ms: u64,
    },
    /// The value of `key`, if it exists and has not expired.
    Get {
        /// The key.
        key: String,
    },
    /// Deletes `key`, replying with the value it had.
    Take {
        /// The key.
        key: String,
    },
    /// Creates the pending approval record at `key` unless it exists; [`Reply::Done`] says
    /// whether it was created.
    ApprovalNew {
        /// The record's key.
        key: String,
        /// What approvers are shown (JSON), opaque to the store.
        record: String,
        /// The requester's key id (`""`: anonymous); it may not decide its own approval.
        requested_by: String,
        /// Time to live, milliseconds (at least 1).
        ttl_ms: u64,
    },
    /// The approval record at `key`, if it exists.
    ApprovalGet {
        /// The record's key.
        key: String,
    },
    /// Moves the approval record at `key` through one step of its life, atomically. The
    /// TTL is kept.
    Approval {
        /// The record's key.
        key: String,
        /// The step.
        step: ApprovalStep,
    },
    /// Adds `member` to the sorted index `index` with its expiry, unless the index holds
    /// `cap` unexpired members already (expired ones are dropped first); [`Reply::Done`]
    /// says whether it was added. The index lives until its last member expires.
    IndexAdd {
        /// The index's key.
        index: String,
        /// The member.
        member: String,
        /// The member's expiry, Unix milliseconds.
        expires_ms: u64,
        /// Most unexpired members.
        cap: u64,
        /// The caller's clock, Unix milliseconds.
        now_ms: u64,
    },
    /// Removes `member` from `index`.
    IndexRemove {
        /// The index's key.
        index: String,
        /// The member.
        member: String,
    },
    /// The unexpired members of `index`, earliest expiry first, at most `limit`; expired
    /// ones are dropped.
    IndexLive {
        /// The index's key.
        index: String,
        /// The caller's clock, Unix milliseconds.
        now_ms: u64,
        /// Most members returned.
        limit: u64,
    },
    /// Sets `key` to `value` for `ttl_ms` (replacing any value), records it in the sorted
    /// index `index` by expiry, drops expired members of the index, and deletes the
    /// earliest-expiring keys beyond `cap` (a bounded cache: the judge's verdicts).
    /// [`Reply::Done`]: true.
    CachePut {
        /// The key.
        key: String,
        /// The index of the cache's keys.
        index: String,
        /// The value.
        value: String,
        /// Time to live, milliseconds (at least 1).
        ttl_ms: u64,
        /// Most keys kept (at least 1).
        cap: u64,
        /// The caller's clock, Unix milliseconds.
        now_ms: u64,
    },
    /// Reads the conversation rows a request's path needs, in one round trip.
    ConvRead(ConvRead),
    /// Merges a request's conversation changes in, atomically, and bounds the tenant.
    ConvWrite(ConvWrite),
}

/// A step of an approval record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalStep {
    /// `by` approves: refused for the requester itself or a decided record.
    Approve {
        /// The approver's key id.
        by: String,
    },
    /// `by` denies: refused for the requester itself or a decided record.
    Deny {
        /// The approver's key id.
        by: String,
    },
    /// Denied whatever its state (an approval that could not be audited).
    ForceDeny {
        /// Who or what denies.
        by: String,
    },
    /// Redeems an approved record once.
    Redeem,
}

/// Where an approval stands in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalState {
    /// Waiting for an approver.
    Pending,
    /// Approved: redeemable once.
    Approved,
    /// Denied: never redeemable.
    Denied,
}

impl ApprovalState {
    /// The state's name.
    pub fn name(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(ApprovalState::Pending),
            "approved" => Some(ApprovalState::Approved),
            "denied" => Some(ApprovalState::Denied),
            _ => None,
        }
    }
}

/// An approval record as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    /// What approvers are shown (JSON), as given to [`Op::ApprovalNew`].
    pub record: String,
    /// The requester's key id (`""`: anonymous).
    pub requested_by: String,
    /// Where it stands.
    pub state: ApprovalState,
    /// Who decided (`""`: nobody yet).
    pub by: String,
    /// Whether it was redeemed.
    pub used: bool,
}

/// What an approval step found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// Done; the record after the step.
    Done(ApprovalRecord),
    /// No such record (never issued, or expired).
    Unknown,
    /// The approver is the requester (or empty).
    SelfApproval,
    /// Already approved or denied.
    AlreadyDecided,
    /// Redeem: still pending.
    NotApproved,
    /// Redeem: denied.
    Denied,
    /// Redeem: redeemed before.
    Used,
}

/// The reply to an [`Op`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// [`Op::Ping`].
    Pong,
    /// [`Op::Bucket`].
    Bucket {
        /// Whether `need` tokens were there.
        allowed: bool,
        /// Tokens left.
        tokens: f64,
        /// Milliseconds until `need` tokens are there (0 when allowed).
        retry_after_ms: u64,
    },
    /// [`Op::PutNew`], [`Op::ApprovalNew`], [`Op::IndexAdd`], [`Op::IndexRemove`]: whether
    /// it changed anything; [`Op::ConvWrite`], [`Op::CachePut`]: true.
    Done(bool),
    /// [`Op::Get`], [`Op::Take`]: the value.
    Value(Option<String>),
    /// [`Op::Approval`].
    Approval(ApprovalOutcome),
    /// [`Op::ApprovalGet`].
    Record(Option<ApprovalRecord>),
    /// [`Op::IndexLive`].
    Members(Vec<String>),
    /// [`Op::ConvRead`].
    ConvRows(ConvRows),
}

/// Why a shared-state operation failed. Callers fail closed: a decision that needs the
/// shared state is not made without it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// No connection could be had within the connect timeout (Redis down or unreachable,
    /// or every pooled connection busy).
    #[error("the shared state ({backend}) is unreachable")]
    Unavailable {
        /// The backend's name.
        backend: &'static str,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The store answered with an error, or timed out mid-command.
    #[error("the shared state ({backend}) failed a command")]
    Command {
        /// The backend's name.
        backend: &'static str,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The store answered something this build cannot read.
    #[error("the shared state ({backend}) answered in an unexpected shape: {detail}")]
    Protocol {
        /// The backend's name.
        backend: &'static str,
        /// What was wrong.
        detail: String,
    },
}

impl StateError {
    /// The error and its sources joined by `: ` (one line for logs and error messages).
    pub fn chain(&self) -> String {
        let mut msg = self.to_string();
        let mut src = std::error::Error::source(self);
        while let Some(s) = src {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            src = s.source();
        }
        msg
    }
}

/// The shared state behind the service's stores. `Send + Sync`; share it in an `Arc`.
pub trait SharedStore: Send + Sync + std::fmt::Debug {
    /// Runs one atomic operation.
    fn execute(&self, op: &Op) -> Result<Reply, StateError>;

    /// The backend's name (`memory`, `redis`), for metrics, logs and readiness.
    fn backend(&self) -> &'static str;

    /// Runs several operations in one round trip where the store can (each is atomic on
    /// its own; together they are not a transaction), replying in order.
    fn execute_many(&self, ops: &[Op]) -> Result<Vec<Reply>, StateError> {
        ops.iter().map(|op| self.execute(op)).collect()
    }

    /// Checks that the store answers (readiness).
    fn ping(&self) -> Result<(), StateError> {
        self.execute(&Op::Ping).map(drop)
    }
}

/// Builds the store a configuration names: `None` for the in-process default (the service
/// keeps its own in-memory stores), a connected [`RedisStore`] for Redis.
pub fn open(config: &StateConfig) -> Result<Option<Arc<dyn SharedStore>>, StateConfigError> {
    match config.backend {
        Backend::Memory => Ok(None),
        Backend::Redis => {
            let redis = config.redis.clone().unwrap_or_default();
            Ok(Some(Arc::new(RedisStore::open(&redis)?)))
        }
    }
}

/// The protocol error of a reply that is not the one an operation gives.
pub(crate) fn unexpected(backend: &'static str, op: &Op, reply: &Reply) -> StateError {
    StateError::Protocol {
        backend,
        detail: format!("{reply:?} for {op:?}"),
    }
}

impl Reply {
    /// The `Done` flag, or a protocol error naming `op`.
    pub fn done(self, backend: &'static str, op: &Op) -> Result<bool, StateError> {
        match self {
            Reply::Done(b) => Ok(b),
            other => Err(unexpected(backend, op, &other)),
        }
    }

    /// The value, or a protocol error naming `op`.
    pub fn value(self, backend: &'static str, op: &Op) -> Result<Option<String>, StateError> {
        match self {
            Reply::Value(v) => Ok(v),
            other => Err(unexpected(backend, op, &other)),
        }
    }

    /// The members, or a protocol error naming `op`.
    pub fn members(self, backend: &'static str, op: &Op) -> Result<Vec<String>, StateError> {
        match self {
            Reply::Members(v) => Ok(v),
            other => Err(unexpected(backend, op, &other)),
        }
    }
}

/// The state after a bucket operation (shared by both stores): tokens refilled from
/// `(tokens, last_ms)` to `now_ms`, then the take. Returns the reply and the new state.
pub(crate) fn bucket_step(
    state: Option<(f64, u64)>,
    capacity: f64,
    per_s: f64,
    take: f64,
    need: f64,
    force: bool,
    now_ms: u64,
) -> (Reply, f64, u64) {
    let (tokens, last) = state.unwrap_or((capacity, now_ms));
    let elapsed_s = now_ms.saturating_sub(last) as f64 / 1000.0;
    let mut tokens = (tokens + elapsed_s * per_s).min(capacity);
    let allowed = tokens >= need;
    if allowed || force {
        tokens = (tokens - take).max(0.0);
    }
    let retry_after_ms = if allowed || per_s <= 0.0 {
        0
    } else {
        (((need - tokens).max(0.0) / per_s) * 1000.0).ceil() as u64
    };
    (
        Reply::Bucket {
            allowed,
            tokens,
            retry_after_ms,
        },
        tokens,
        now_ms.max(last),
    )
}

/// Milliseconds until a bucket holding `tokens` is full again (its TTL: a full bucket is
/// the same as none).
pub(crate) fn bucket_ttl_ms(tokens: f64, capacity: f64, per_s: f64) -> u64 {
    if per_s <= 0.0 {
        return 86_400_000;
    }
    ((((capacity - tokens).max(0.0) / per_s) * 1000.0).ceil() as u64).max(1)
}
