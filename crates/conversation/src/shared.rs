//! Conversation state and the assistant ledger in a shared store (`[state] backend =
//! "redis"`), so that every replica of the service sees the same conversations.
//!
//! Per request: the chain keys of the incoming messages are computed here, the rows on
//! that path (its nodes, the lineage anchor's evidence, the hint, the ledger entries of its
//! assistant turns) are read in one round trip ([`rampart_state::Op::ConvRead`]), the
//! in-memory logic runs unchanged on a scratch store holding just those rows, and what it
//! changed is merged back in one atomic script ([`rampart_state::Op::ConvWrite`]): counts
//! are added as deltas, the peak risk and per-turn records take the maximum, fingerprint
//! and hint lists the bounded union, last use the maximum. Two replicas updating one
//! lineage at once therefore never lose a block (see DESIGN.md, "Shared state"). Keys,
//! numbers and keyed hashes only, never text.

use crate::chain::{ChainKey, ChainSecret};
use crate::ledger::{AssistantLedger, HistoryCheck, LedgerOptions, LedgerRow, entry_hash};
use crate::risk::OptionsError;
use crate::scan::{ConversationError, ConversationOutcome, ConversationScanner, as_messages};
use crate::store::{
    Clock, ConversationState, ConversationStore, Evidence, HintRow, LineageRow, NodeRow,
    ObserveError, StoreOptions, SystemClock, TurnVerdict,
};
use rampart_core::conversation::{ConversationRequest, Turn};
use rampart_core::{Action, Role};
use rampart_state::conv_fields::{
    F_ACTION, F_BLOCKS, F_CREATED, F_HINTS, F_PARENT, F_PEAK, F_PRINTS, F_REFUSAL, F_REFUSALS,
    F_REPHRASINGS, F_RISK, F_SANITIZES, F_SEEN, F_TURN, F_WORDS,
};
use rampart_state::{ConvLineage, ConvNode, ConvRead, ConvWrite, Op, SharedStore, StateError};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Why the shared conversation state could not be used. Callers fail closed: the
/// request is refused, never judged without its conversation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SharedStateError {
    /// The shared store failed (unreachable, timed out, or answered oddly).
    #[error("the shared conversation state failed")]
    State(#[from] StateError),
    /// The observation was refused.
    #[error(transparent)]
    Observe(#[from] ObserveError),
}

impl SharedStateError {
    /// The error and its sources joined by `: `.
    pub fn chain(&self) -> String {
        match self {
            SharedStateError::State(e) => format!("{}: {}", self, e.chain()),
            SharedStateError::Observe(e) => e.to_string(),
        }
    }
}

/// The conversation store and the ledger of every replica, in a [`SharedStore`]. Built
/// once per process, shared; attach it to a scanner with
/// [`ConversationScanner::with_shared`].
pub struct SharedConversations {
    state: Arc<dyn SharedStore>,
    secret: ChainSecret,
    store: StoreOptions,
    ledger: LedgerOptions,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for SharedConversations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedConversations")
            .field("state", &self.state)
            .field("secret", &self.secret)
            .field("store", &self.store)
            .field("ledger", &self.ledger)
            .finish_non_exhaustive()
    }
}

/// What one request loaded: the scratch store and ledger, and the evidence each lineage
/// had when read (the write adds only what changed since).
struct Scratch {
    store: Arc<ConversationStore>,
    ledger: Arc<AssistantLedger>,
    base: HashMap<ChainKey, Evidence>,
    space: String,
}

impl SharedConversations {
    /// The shared state on the system clock. `key_material` must be the same on every
    /// replica (`[conversation] key_env`), or their keys never meet.
    pub fn new(
        state: Arc<dyn SharedStore>,
        key_material: &[u8],
        store: StoreOptions,
        ledger: LedgerOptions,
    ) -> Result<Self, OptionsError> {
        Self::with_clock(state, key_material, store, ledger, Arc::new(SystemClock))
    }

    /// The shared state on the given clock (seconds; replicas' clocks must agree).
    pub fn with_clock(
        state: Arc<dyn SharedStore>,
        key_material: &[u8],
        store: StoreOptions,
        ledger: LedgerOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, OptionsError> {
        store.validate()?;
        ledger.validate()?;
        Ok(Self {
            state,
            secret: ChainSecret::derive(key_material),
            store,
            ledger,
            clock,
        })
    }

    /// The backend's name (`redis`, `memory`).
    pub fn backend(&self) -> &'static str {
        self.state.backend()
    }

    /// The shared store.
    pub fn state(&self) -> &Arc<dyn SharedStore> {
        &self.state
    }

    /// The key space of a tenant: `conv:{tenant}:` (`conv:{}:` for the default partition).
    /// The braces make a tenant's keys one hash slot in a Redis cluster.
    pub fn space(tenant: Option<&str>) -> String {
        format!("conv:{{{}}}:", tenant.unwrap_or(""))
    }

    /// [`crate::TenantStore::observe`] against the shared state.
    pub fn observe(
        &self,
        tenant: Option<&str>,
        messages: &[(Role, &str)],
        hint: Option<&str>,
        verdict: TurnVerdict,
    ) -> Result<ConversationState, SharedStateError> {
        let scratch = self.load(tenant, messages, hint, Vec::new())?;
        let state = scratch
            .store
            .tenant(tenant)
            .observe(messages, hint, verdict)?;
        self.save(scratch)?;
        Ok(state)
    }

    /// [`crate::TenantStore::lookup`] against the shared state (nothing written).
    pub fn lookup(
        &self,
        tenant: Option<&str>,
        messages: &[(Role, &str)],
    ) -> Result<Option<ConversationState>, SharedStateError> {
        let scratch = self.load(tenant, messages, None, Vec::new())?;
        Ok(scratch.store.tenant(tenant).lookup(messages))
    }

    /// [`AssistantLedger::record_for`] against the shared state.
    pub fn record(
        &self,
        tenant: Option<&str>,
        prefix: &[(Role, &str)],
        assistant_text: &str,
    ) -> Result<(), SharedStateError> {
        let scratch = self.load(tenant, &[], None, Vec::new())?;
        scratch.ledger.record_for(tenant, prefix, assistant_text);
        self.save(scratch)
    }

    /// [`AssistantLedger::check_for`] against the shared state (verified entries are
    /// refreshed there).
    pub fn check(
        &self,
        tenant: Option<&str>,
        conversation: &[(Role, &str)],
    ) -> Result<HistoryCheck, SharedStateError> {
        let entries = self.ledger_entries(tenant, conversation);
        let scratch = self.load(tenant, &[], None, entries)?;
        let check = scratch.ledger.check_for(tenant, conversation);
        self.save(scratch)?;
        Ok(check)
    }

    /// Scans with `scanner` (its pipeline, options and tenant) over the shared state.
    pub(crate) fn scan(
        &self,
        scanner: &ConversationScanner,
        req: &ConversationRequest,
    ) -> Result<ConversationOutcome, ConversationError> {
        let contents: Vec<String> = req.turns.iter().map(Turn::content).collect();
        let msgs = as_messages(&req.turns, &contents);
        let tenant = scanner.tenant();
        let entries = if scanner.ledger().is_some() {
            self.ledger_entries(tenant, &msgs)
        } else {
            Vec::new()
        };
        let scratch = self
            .load(tenant, &msgs, req.conversation_id.as_deref(), entries)
            .map_err(shared_error)?;
        let ledger = scanner.ledger().map(|_| scratch.ledger.clone());
        let outcome = scanner
            .with_state(scratch.store.clone(), ledger)
            .scan(req)?;
        // Not written, not decided: a decision whose state could not be kept is refused.
        self.save(scratch).map_err(shared_error)?;
        Ok(outcome)
    }

    /// Records an answer returned for `sent` (the ledger, and a refusal as evidence).
    pub(crate) fn record_answer(
        &self,
        scanner: &ConversationScanner,
        sent: &[Turn],
        answer: &Turn,
    ) -> Result<(), ConversationError> {
        let contents: Vec<String> = sent.iter().map(Turn::content).collect();
        let msgs = as_messages(sent, &contents);
        // The path is needed only when the answer is a refusal (lineage evidence).
        let path: &[(Role, &str)] = if scanner.is_refusal(answer) {
            &msgs
        } else {
            &[]
        };
        let scratch = self
            .load(scanner.tenant(), path, None, Vec::new())
            .map_err(shared_error)?;
        let ledger = scanner.ledger().map(|_| scratch.ledger.clone());
        scanner
            .with_state(scratch.store.clone(), ledger)
            .record_answer(sent, answer);
        self.save(scratch).map_err(shared_error)
    }

    /// The ledger entries of the assistant turns in `conversation`'s history (all but the
    /// last message), as [`AssistantLedger::check_for`] looks them up.
    fn ledger_entries(&self, tenant: Option<&str>, conversation: &[(Role, &str)]) -> Vec<[u8; 32]> {
        let Some(n) = conversation.len().checked_sub(1) else {
            return Vec::new();
        };
        let history = &conversation[..n];
        if !history.iter().any(|(r, _)| *r == Role::Assistant) {
            return Vec::new();
        }
        let (secret, _) = self.secret.partition(tenant);
        let chain = secret.chain(history);
        history
            .iter()
            .enumerate()
            .filter(|(_, (r, _))| *r == Role::Assistant)
            .map(|(i, (_, text))| entry_hash(self.ledger.bind_to_prefix, &secret, &chain[i], text))
            .collect()
    }

    /// Reads the rows of `messages`' path (and the hint's lineage, and `entries`) into a
    /// scratch store and ledger.
    fn load(
        &self,
        tenant: Option<&str>,
        messages: &[(Role, &str)],
        hint: Option<&str>,
        entries: Vec<[u8; 32]>,
    ) -> Result<Scratch, SharedStateError> {
        let space = Self::space(tenant);
        let (secret, _) = self.secret.partition(tenant);
        let keys: Vec<ChainKey> = secret.chain(messages).split_off(1);
        let hint_hash = hint.map(|h| secret.hint(h));
        let store = Arc::new(ConversationStore::with_secret(
            self.store.clone(),
            self.secret.clone(),
            self.clock.clone(),
        ));
        let ledger = Arc::new(AssistantLedger::with_secret(
            self.ledger.clone(),
            self.secret.clone(),
            self.clock.clone(),
        ));
        let mut base = HashMap::new();
        let mut nodes = Vec::new();
        let mut hints = Vec::new();
        let mut ledger_rows = Vec::new();
        if !keys.is_empty() || hint_hash.is_some() || !entries.is_empty() {
            let read = ConvRead {
                space: space.clone(),
                nodes: keys.iter().map(|k| hex(&k.0)).collect(),
                hint: hint_hash.map(|h| hex(&h)),
                ledger: entries.iter().map(|e| hex(e)).collect(),
            };
            let rows = self
                .state
                .execute(&Op::ConvRead(read))?
                .conv_rows(self.state.backend())?;
            for (key, fields) in keys.iter().zip(&rows.nodes) {
                if let Some(row) = node_row(*key, fields) {
                    nodes.push(row);
                }
            }
            if let (Some(h), Some(anchor)) = (hint_hash, rows.hint.as_deref().and_then(unhex)) {
                let anchor = ChainKey(anchor);
                hints.push(HintRow { hint: h, anchor });
                if !keys.contains(&anchor) {
                    // The hint names another lineage: its anchor, for the evidence it lends.
                    let read = ConvRead {
                        space: space.clone(),
                        nodes: vec![hex(&anchor.0)],
                        hint: None,
                        ledger: Vec::new(),
                    };
                    let more = self
                        .state
                        .execute(&Op::ConvRead(read))?
                        .conv_rows(self.state.backend())?;
                    if let Some(row) = more.nodes.first().and_then(|f| node_row(anchor, f)) {
                        nodes.push(row);
                    }
                }
            }
            for (hash, seen) in entries.iter().zip(&rows.ledger) {
                if let Some(last_seen) = seen {
                    ledger_rows.push(LedgerRow {
                        hash: *hash,
                        last_seen: *last_seen,
                    });
                }
            }
        }
        for row in &nodes {
            if let Some(l) = &row.lineage {
                base.insert(row.key, l.evidence);
            }
        }
        // Restoring starts change tracking: only what the request changes is drained.
        store.restore(nodes, hints);
        ledger.restore(ledger_rows);
        Ok(Scratch {
            store,
            ledger,
            base,
            space,
        })
    }

    /// Merges what the request changed into the shared state.
    fn save(&self, scratch: Scratch) -> Result<(), SharedStateError> {
        let changes = scratch.store.drain_changes();
        let ledger = scratch.ledger.drain_changes();
        if changes.nodes.is_empty() && changes.hints.is_empty() && ledger.entries.is_empty() {
            return Ok(());
        }
        let nodes = changes
            .nodes
            .iter()
            .map(|n| conv_node(n, scratch.base.get(&n.key)))
            .collect();
        let quota = self.store.tenant_quota() as u64;
        let ledger_quota = self
            .ledger
            .max_entries_per_tenant
            .unwrap_or(self.ledger.max_entries)
            .min(self.ledger.max_entries) as u64;
        let write = ConvWrite {
            space: scratch.space,
            now: self.clock.now(),
            ttl_s: self.store.ttl_seconds,
            quota,
            pin_cap: quota / 2,
            nodes,
            hints: changes
                .hints
                .iter()
                .map(|h| (hex(&h.hint), hex(&h.anchor.0)))
                .collect(),
            ledger: ledger
                .entries
                .iter()
                .map(|e| (hex(&e.hash), e.last_seen))
                .collect(),
            ledger_ttl_s: self.ledger.ttl_seconds,
            ledger_quota,
        };
        self.state.execute(&Op::ConvWrite(write))?;
        Ok(())
    }
}

fn shared_error(e: SharedStateError) -> ConversationError {
    match e {
        SharedStateError::Observe(o) => ConversationError::Observe(o),
        other => ConversationError::SharedState(other.chain()),
    }
}

/// A node to merge: its row, the lineage's counts as the delta since `base`.
fn conv_node(n: &NodeRow, base: Option<&Evidence>) -> ConvNode {
    let b = base.copied().unwrap_or_default();
    ConvNode {
        key: hex(&n.key.0),
        parent: n.parent.map(|p| hex(&p.0)).unwrap_or_default(),
        turn: n.turn,
        observed: n
            .observed
            .map(|t| (t.risk.to_string(), action_code(t.action), t.refusal)),
        created: n.created,
        last_seen: n.last_seen,
        lineage: n.lineage.as_ref().map(|l| ConvLineage {
            delta: [
                l.evidence.blocks.saturating_sub(b.blocks),
                l.evidence.sanitizes.saturating_sub(b.sanitizes),
                l.evidence.refusals.saturating_sub(b.refusals),
                l.evidence
                    .rephrasings_after_block
                    .saturating_sub(b.rephrasings_after_block),
            ],
            peak: l.peak_risk.to_string(),
            prints: l.blocked.iter().map(|p| format!("{p:016x}")).collect(),
            hints: l.hints.iter().map(|h| hex(h)).collect(),
            words: l
                .words
                .iter()
                .map(|w| w.iter().map(|x| format!("{x:08x}")).collect())
                .collect(),
        }),
    }
}

/// A node row from its fields; `None` when absent or not readable (a damaged row counts
/// as absent, never a panic).
fn node_row(key: ChainKey, f: &HashMap<String, String>) -> Option<NodeRow> {
    if f.is_empty() {
        return None;
    }
    let get = |k: &str| f.get(k).map(String::as_str);
    let int = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
    let parent = match get(F_PARENT) {
        Some(p) => Some(ChainKey(unhex(p)?)),
        None => None,
    };
    let observed = match get(F_RISK) {
        Some(r) => Some(TurnVerdict {
            risk: r.parse().ok()?,
            action: action_from_code(int(F_ACTION)?)?,
            refusal: int(F_REFUSAL)? != 0,
        }),
        None => None,
    };
    let lineage = match get(F_PEAK) {
        Some(peak) => {
            let count = |k: &str| int(k).map_or(0, |v| u32::try_from(v).unwrap_or(u32::MAX));
            let blocked = hex_chunks(get(F_PRINTS).unwrap_or(""), 16)
                .map(|c| u64::from_str_radix(c, 16).ok())
                .collect::<Option<Vec<u64>>>()?;
            let hints = hex_chunks(get(F_HINTS).unwrap_or(""), 64)
                .map(unhex)
                .collect::<Option<Vec<[u8; 32]>>>()?;
            let words = get(F_WORDS)
                .unwrap_or("")
                .split(';')
                .filter(|s| !s.is_empty())
                .map(|set| {
                    hex_chunks(set, 8)
                        .map(|c| u32::from_str_radix(c, 16).ok())
                        .collect::<Option<Vec<u32>>>()
                })
                .collect::<Option<Vec<Vec<u32>>>>()?;
            Some(LineageRow {
                evidence: Evidence {
                    blocks: count(F_BLOCKS),
                    sanitizes: count(F_SANITIZES),
                    refusals: count(F_REFUSALS),
                    rephrasings_after_block: count(F_REPHRASINGS),
                },
                peak_risk: peak.parse().ok()?,
                blocked,
                hints,
                words,
            })
        }
        None => None,
    };
    Some(NodeRow {
        key,
        parent,
        turn: u32::try_from(int(F_TURN)?).ok()?,
        observed,
        created: int(F_CREATED)?,
        last_seen: int(F_SEEN)?,
        lineage,
    })
}

fn hex_chunks(s: &str, width: usize) -> impl Iterator<Item = &str> {
    (0..s.len() / width).filter_map(move |i| s.get(i * width..(i + 1) * width))
}

fn action_code(a: Action) -> u8 {
    match a {
        Action::Allow => 0,
        Action::Sanitize => 1,
        Action::Block => 2,
    }
}

fn action_from_code(c: u64) -> Option<Action> {
    match c {
        0 => Some(Action::Allow),
        1 => Some(Action::Sanitize),
        2 => Some(Action::Block),
        _ => None,
    }
}

/// Lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// 32 bytes from 64 hex digits.
fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_bad_rows_read_as_absent() {
        let k = [0xabu8; 32];
        assert_eq!(unhex(&hex(&k)), Some(k));
        assert_eq!(unhex("zz"), None);
        let mut f = HashMap::new();
        f.insert(F_TURN.to_string(), "x".to_string());
        assert!(node_row(ChainKey(k), &f).is_none());
        f.insert(F_TURN.to_string(), "1".to_string());
        f.insert(F_CREATED.to_string(), "5".to_string());
        f.insert(F_SEEN.to_string(), "6".to_string());
        f.insert(F_RISK.to_string(), "0.5".to_string());
        f.insert(F_ACTION.to_string(), "9".to_string());
        f.insert(F_REFUSAL.to_string(), "0".to_string());
        assert!(node_row(ChainKey(k), &f).is_none(), "unknown action");
        f.insert(F_ACTION.to_string(), "2".to_string());
        let row = node_row(ChainKey(k), &f).expect("row");
        assert_eq!(row.observed.map(|t| t.action), Some(Action::Block));
    }
}
