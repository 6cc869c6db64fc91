//! The store: nodes keyed by chain key, lineage evidence, LRU with TTL.

use crate::chain::{ChainKey, ChainSecret};
use crate::fingerprint::{content_words, hamming, shares_words, simhash};
use crate::risk::{OptionsError, RiskParams, score};
use rampart_core::{Action, Role};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use thiserror::Error;

/// Default capacity, in nodes (one node per known message prefix).
pub const DEFAULT_MAX_ENTRIES: usize = 100_000;
/// Default time to live of a node since it was last seen: one day.
pub const DEFAULT_TTL_SECONDS: u64 = 86_400;
/// Fingerprints of blocked or refused turns kept over all lineages (oldest dropped first).
pub const MAX_RECENT_FINGERPRINTS: usize = 1024;

/// Content-word sets of blocked or refused turns kept over all lineages.
pub const MAX_RECENT_WORD_SETS: usize = 256;
/// Content-word sets of blocked or refused turns kept per lineage.
const MAX_BLOCKED_WORD_SETS: usize = 8;

/// Fingerprints of blocked turns kept per lineage (oldest dropped first).
pub const MAX_BLOCKED_FINGERPRINTS: usize = 32;
/// Conversation-id hints kept per lineage.
pub const MAX_HINTS_PER_LINEAGE: usize = 4;

/// Options of the store (`[conversation]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreOptions {
    /// Most nodes kept; the least recently used go first.
    pub max_entries: usize,
    /// Most nodes one tenant (an API key) may hold; past it, that tenant's least recently
    /// used go first, so one key cannot evict another's state. `None`: `max_entries`.
    pub max_entries_per_tenant: Option<usize>,
    /// Seconds after its last use at which a node counts as absent.
    pub ttl_seconds: u64,
    /// Scoring parameters.
    pub risk: RiskParams,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_entries: DEFAULT_MAX_ENTRIES,
            max_entries_per_tenant: None,
            ttl_seconds: DEFAULT_TTL_SECONDS,
            risk: RiskParams::default(),
        }
    }
}

impl StoreOptions {
    /// A tenant's share: `max_entries_per_tenant`, at most `max_entries`.
    pub fn tenant_quota(&self) -> usize {
        self.max_entries_per_tenant
            .unwrap_or(self.max_entries)
            .min(self.max_entries)
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.max_entries == 0 {
            return Err(OptionsError::MaxEntries(self.max_entries));
        }
        if self.max_entries_per_tenant == Some(0) {
            return Err(OptionsError::MaxEntries(0));
        }
        if self.ttl_seconds == 0 {
            return Err(OptionsError::Ttl(self.ttl_seconds));
        }
        self.risk.validate()
    }
}

/// A source of time in seconds. Injected so tests are deterministic.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Seconds since some fixed epoch; must not go backwards.
    fn now(&self) -> u64;
}

/// The system clock (seconds since the Unix epoch).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }
}

/// A clock set by hand, for tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock at `now`.
    pub fn new(now: u64) -> Self {
        Self(AtomicU64::new(now))
    }
    /// Moves the clock forward by `secs`.
    pub fn advance(&self, secs: u64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// What the other layers said about the newest turn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnVerdict {
    /// Per-turn risk in `[0, 1]` (clamped; NaN is an error).
    pub risk: f32,
    /// The action taken on the turn.
    pub action: Action,
    /// Whether the model refused (from the response side).
    pub refusal: bool,
}

/// Why an observation was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ObserveError {
    /// No messages.
    #[error("a conversation needs at least one message")]
    Empty,
    /// The per-turn risk was NaN.
    #[error("the per-turn risk must be a number, got NaN")]
    NanRisk,
}

/// Counts of a lineage: every branch that grew from the same first non-system message,
/// including branches the client has since pruned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// Turns blocked.
    pub blocks: u32,
    /// Turns sanitized.
    pub sanitizes: u32,
    /// Turns the model refused.
    pub refusals: u32,
    /// Turns within the rephrase distance of a blocked turn of the lineage.
    pub rephrasings_after_block: u32,
}

impl Evidence {
    fn add(&mut self, o: &Evidence) {
        self.blocks += o.blocks;
        self.sanitizes += o.sanitizes;
        self.refusals += o.refusals;
        self.rephrasings_after_block += o.rephrasings_after_block;
    }
}

/// The per-conversation part of a decision. Hashes and numbers only, never text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationState {
    /// Conversation risk in `[0, 1]`.
    pub risk: f32,
    /// Largest per-turn risk on the path.
    pub peak: f32,
    /// Decayed, weighted accumulation of per-turn risks on the path.
    pub accumulated: f32,
    /// Escalation term (rising risk over the last turns).
    pub escalation: f32,
    /// Observed (scored) turns on the path.
    pub turns: u32,
    /// Blocks in the lineage (pruned branches included).
    pub blocks: u32,
    /// Sanitizes in the lineage.
    pub sanitizes: u32,
    /// Refusals in the lineage.
    pub refusals: u32,
    /// Near-identical rephrasings of blocked turns in the lineage.
    pub rephrasings_after_block: u32,
    /// Whether the newest turn is itself a rephrasing of a blocked turn.
    pub rephrasing: bool,
    /// Messages of the longest prefix already known before this call (0: nothing known).
    pub inherited_from_prefix_len: usize,
    /// Whether the conversation-id hint was seen before (on any lineage).
    pub hint_matched: bool,
    /// Evidence attached through the hint from another lineage (already added to the counts).
    pub hint_evidence: Evidence,
}

/// One node as persisted: keys, numbers and fingerprints, never text.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    /// The chain key of the prefix.
    pub key: ChainKey,
    /// The chain key of the prefix one message shorter (`None` for the first message).
    pub parent: Option<ChainKey>,
    /// Messages in the prefix (1-based chain position).
    pub turn: u32,
    /// The per-turn record, if this prefix was observed as a newest turn.
    pub observed: Option<TurnVerdict>,
    /// Seconds (store clock) when the node was created.
    pub created: u64,
    /// Seconds (store clock) when the node was last seen; TTL and LRU order come from it.
    pub last_seen: u64,
    /// The lineage evidence, on anchor nodes only.
    pub lineage: Option<LineageRow>,
}

/// The lineage evidence kept on an anchor node.
#[derive(Debug, Clone, PartialEq)]
pub struct LineageRow {
    /// The counts.
    pub evidence: Evidence,
    /// Highest conversation risk reported on any branch.
    pub peak_risk: f32,
    /// SimHash fingerprints of blocked turns, oldest first (at most
    /// [`MAX_BLOCKED_FINGERPRINTS`] are kept).
    pub blocked: Vec<u64>,
    /// Keyed hashes of the conversation-id hints seen, oldest first (at most
    /// [`MAX_HINTS_PER_LINEAGE`] are kept).
    pub hints: Vec<[u8; 32]>,
    /// Keyed 32-bit hashes of the content words of the latest blocked or refused turns,
    /// one set per turn, oldest first (at most 8). Kept by the shared state; the SQLite
    /// persistence does not store them (empty when loaded from it).
    pub words: Vec<Vec<u32>>,
}

/// A conversation-id hint (its keyed hash) and the anchor of the lineage it points to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintRow {
    /// `H(k, 0x03 || id)`.
    pub hint: [u8; 32],
    /// The anchor node of the lineage.
    pub anchor: ChainKey,
}

/// What changed in a [`ConversationStore`] since the previous
/// [`drain_changes`](ConversationStore::drain_changes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreChanges {
    /// A full snapshot: everything persisted before is to be replaced by these rows (the
    /// first drain, or tracking overflowed, or a write failed).
    pub full: bool,
    /// Nodes to insert or replace (with their lineage; a node without one has none).
    pub nodes: Vec<NodeRow>,
    /// Hints to insert or replace.
    pub hints: Vec<HintRow>,
    /// Nodes (and their lineages) to delete: evicted, expired, or not restored.
    pub removed_nodes: Vec<ChainKey>,
    /// Hints to delete.
    pub removed_hints: Vec<[u8; 32]>,
}

impl StoreChanges {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        !self.full
            && self.nodes.is_empty()
            && self.hints.is_empty()
            && self.removed_nodes.is_empty()
            && self.removed_hints.is_empty()
    }
}

/// What a restore did with the rows it was given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreStats {
    /// Rows now held.
    pub restored: usize,
    /// Rows past their TTL, not loaded.
    pub expired: usize,
    /// Rows loaded and then evicted to respect `max_entries` (the least recently seen go).
    pub over_capacity: usize,
    /// Rows not loaded for another reason: the key is already held (the held state wins),
    /// or the row is invalid (a non-finite risk).
    pub skipped: usize,
}

/// What [`ConversationStore::restore`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreRestoreStats {
    /// The node rows.
    pub nodes: RestoreStats,
    /// Hint rows now held.
    pub hints_restored: usize,
    /// Hint rows not loaded: already held, or their lineage is not held (expired, evicted)
    /// or does not list them.
    pub hints_skipped: usize,
}

fn node_row(key: ChainKey, n: &Node) -> NodeRow {
    NodeRow {
        key,
        parent: n.parent,
        turn: n.turn,
        observed: n.observed.map(|t| TurnVerdict {
            risk: t.risk,
            action: t.action,
            refusal: t.refusal,
        }),
        created: n.created,
        last_seen: n.last_seen,
        lineage: n.lineage.as_deref().map(|l| LineageRow {
            evidence: l.evidence,
            peak_risk: l.peak_conversation_risk,
            blocked: l.blocked.clone(),
            hints: l.hints.clone(),
            words: l.blocked_words.clone(),
        }),
    }
}

/// A stored risk back in range; `None` when it is not a number.
fn restored_risk(r: f32) -> Option<f32> {
    r.is_finite().then(|| r.clamp(0.0, 1.0))
}

/// A node rebuilt from a row, bounded like a live one; `None` when the row is invalid.
fn node_from_row(row: NodeRow, tick: u64) -> Option<Node> {
    let observed = match row.observed {
        Some(t) => Some(TurnRecord {
            risk: restored_risk(t.risk)?,
            action: t.action,
            refusal: t.refusal,
        }),
        None => None,
    };
    let lineage = match row.lineage {
        Some(l) => {
            let mut blocked = l.blocked;
            blocked.drain(..blocked.len().saturating_sub(MAX_BLOCKED_FINGERPRINTS));
            let mut hints = l.hints;
            hints.drain(..hints.len().saturating_sub(MAX_HINTS_PER_LINEAGE));
            let mut blocked_words = l.words;
            blocked_words.drain(..blocked_words.len().saturating_sub(MAX_BLOCKED_WORD_SETS));
            Some(Box::new(Lineage {
                evidence: l.evidence,
                peak_conversation_risk: restored_risk(l.peak_risk)?,
                blocked,
                blocked_words,
                hints,
            }))
        }
        None => None,
    };
    Some(Node {
        parent: row.parent,
        turn: row.turn,
        observed,
        created: row.created,
        last_seen: row.last_seen,
        tick,
        lineage,
        persisted: true,
        tenant: 0,
    })
}

#[derive(Debug, Clone, Copy)]
struct TurnRecord {
    risk: f32,
    action: Action,
    refusal: bool,
}

#[derive(Debug, Default)]
struct Lineage {
    evidence: Evidence,
    /// Highest conversation risk reported on any branch: a rewind cannot lower the risk.
    peak_conversation_risk: f32,
    blocked: Vec<u64>,
    /// Content words of the latest blocked or refused turns (not persisted).
    blocked_words: Vec<Vec<u32>>,
    hints: Vec<[u8; 32]>,
}

#[derive(Debug)]
struct Node {
    parent: Option<ChainKey>,
    turn: u32,
    observed: Option<TurnRecord>,
    created: u64,
    last_seen: u64,
    tick: u64,
    lineage: Option<Box<Lineage>>,
    /// Whether the database has a row for this key as of the last drain (so its removal
    /// must be written).
    persisted: bool,
    /// The tenant's tag (0: the default tenant, and rows restored from a database, which
    /// does not record tenants; their keys are still the tenant's own).
    tenant: u64,
}

impl Node {
    /// A lineage anchor holding evidence of a blocked or refused turn: kept through LRU
    /// eviction (up to half a tenant's share) until its TTL, so flooding the store cannot
    /// wipe the evidence a rewound conversation would meet again (issue 35).
    fn pinned(&self) -> bool {
        self.lineage
            .as_ref()
            .is_some_and(|l| l.evidence.blocks > 0 || l.evidence.refusals > 0)
    }
}

/// Where a hint points, and whether the database has a row for the hint.
#[derive(Debug, Clone, Copy)]
struct HintSlot {
    anchor: ChainKey,
    persisted: bool,
}

/// Changes since the last drain. Absent until the first drain or restore, so a store that
/// is never persisted pays nothing.
#[derive(Debug, Default)]
struct Tracker {
    /// Live nodes changed since the last drain (a subset of the live nodes).
    dirty_nodes: HashSet<ChainKey>,
    /// Nodes with a database row removed since the last drain.
    removed_nodes: HashSet<ChainKey>,
    /// Live hints changed since the last drain.
    dirty_hints: HashSet<[u8; 32]>,
    /// Hints with a database row removed since the last drain.
    removed_hints: HashSet<[u8; 32]>,
    /// The sets overflowed (or a write failed): the next drain is a full snapshot.
    full: bool,
    max_removed_nodes: usize,
    max_removed_hints: usize,
}

impl Tracker {
    fn new(max_entries: usize) -> Self {
        Self {
            max_removed_nodes: max_entries,
            max_removed_hints: max_entries.saturating_mul(MAX_HINTS_PER_LINEAGE),
            ..Self::default()
        }
    }

    /// Gives up on incremental tracking until the next drain (which is then full).
    fn overflow(&mut self) {
        self.full = true;
        self.dirty_nodes = HashSet::new();
        self.removed_nodes = HashSet::new();
        self.dirty_hints = HashSet::new();
        self.removed_hints = HashSet::new();
    }

    fn node_changed(&mut self, key: ChainKey) {
        if !self.full {
            self.dirty_nodes.insert(key);
        }
    }

    fn node_removed(&mut self, key: ChainKey, persisted: bool) {
        if self.full {
            return;
        }
        self.dirty_nodes.remove(&key);
        if persisted {
            self.removed_nodes.insert(key);
            if self.removed_nodes.len() > self.max_removed_nodes {
                self.overflow();
            }
        }
    }

    fn hint_changed(&mut self, hint: [u8; 32]) {
        if !self.full {
            self.dirty_hints.insert(hint);
        }
    }

    fn hint_removed(&mut self, hint: [u8; 32], persisted: bool) {
        if self.full {
            return;
        }
        self.dirty_hints.remove(&hint);
        if persisted {
            self.removed_hints.insert(hint);
            if self.removed_hints.len() > self.max_removed_hints {
                self.overflow();
            }
        }
    }

    fn approx_bytes(&self) -> usize {
        use std::mem::size_of;
        (self.dirty_nodes.capacity() + self.removed_nodes.capacity()) * (size_of::<ChainKey>() + 1)
            + (self.dirty_hints.capacity() + self.removed_hints.capacity())
                * (size_of::<[u8; 32]>() + 1)
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// Fingerprints of the latest blocked or refused turns over every lineage (oldest
    /// first): a client that starts a new lineage (a new first message) and repeats a
    /// refused request nearly word for word is still a rephrasing. Not persisted.
    recent: std::collections::VecDeque<u64>,
    /// Content words of the same turns (the last [`MAX_RECENT_WORD_SETS`]).
    recent_words: std::collections::VecDeque<Vec<u32>>,
    nodes: HashMap<ChainKey, Node>,
    lru: BTreeMap<u64, ChainKey>,
    /// Per tenant tag: its nodes in LRU order, and how many of them are pinned.
    tenants: HashMap<u64, TenantLru>,
    hints: HashMap<[u8; 32], HintSlot>,
    next_tick: u64,
    tracker: Option<Tracker>,
}

/// One tenant's nodes, least recently used first.
#[derive(Debug, Default)]
struct TenantLru {
    lru: BTreeMap<u64, ChainKey>,
    pinned: usize,
}

impl Inner {
    fn live(&self, key: &ChainKey, now: u64, ttl: u64) -> Option<&Node> {
        self.nodes
            .get(key)
            .filter(|n| now.saturating_sub(n.last_seen) < ttl)
    }

    fn remove(&mut self, key: &ChainKey) {
        if let Some(node) = self.nodes.remove(key) {
            self.lru.remove(&node.tick);
            if let Some(t) = self.tenants.get_mut(&node.tenant) {
                t.lru.remove(&node.tick);
                if node.pinned() {
                    t.pinned = t.pinned.saturating_sub(1);
                }
                if t.lru.is_empty() {
                    self.tenants.remove(&node.tenant);
                }
            }
            if let Some(t) = &mut self.tracker {
                t.node_removed(*key, node.persisted);
            }
            if let Some(lin) = node.lineage {
                for h in lin.hints {
                    if self.hints.get(&h).map(|s| &s.anchor) == Some(key) {
                        self.remove_hint(&h);
                    }
                }
            }
        }
    }

    fn remove_hint(&mut self, hint: &[u8; 32]) {
        if let Some(slot) = self.hints.remove(hint)
            && let Some(t) = &mut self.tracker
        {
            t.hint_removed(*hint, slot.persisted);
        }
    }

    fn set_hint(&mut self, hint: [u8; 32], anchor: ChainKey) {
        self.hints
            .entry(hint)
            .and_modify(|s| s.anchor = anchor)
            .or_insert(HintSlot {
                anchor,
                persisted: false,
            });
        if let Some(t) = &mut self.tracker {
            t.hint_changed(hint);
        }
    }

    /// The per-tenant LRUs and pinned counts, from the nodes and the global LRU.
    fn rebuild_tenants(&mut self) {
        self.tenants.clear();
        for (tick, key) in &self.lru {
            if let Some(n) = self.nodes.get(key) {
                let t = self.tenants.entry(n.tenant).or_default();
                t.lru.insert(*tick, *key);
                if n.pinned() {
                    t.pinned += 1;
                }
            }
        }
    }

    /// Starts tracking if it was off: everything already held counts as changed.
    fn ensure_tracker(&mut self, max_entries: usize) {
        let Inner {
            nodes,
            hints,
            tracker,
            ..
        } = self;
        tracker.get_or_insert_with(|| {
            let mut t = Tracker::new(max_entries);
            t.dirty_nodes.extend(nodes.keys().copied());
            t.dirty_hints.extend(hints.keys().copied());
            t
        });
    }

    fn sweep(&mut self, now: u64, ttl: u64) {
        while let Some((_, key)) = self.lru.first_key_value() {
            let key = *key;
            if self.live(&key, now, ttl).is_some() {
                break;
            }
            self.remove(&key);
        }
    }

    /// Evicts least recently used nodes until at most `max` are held. Pinned anchors are
    /// moved to the back instead while their tenant holds at most `pin_cap` of them.
    fn evict_to(&mut self, max: usize, pin_cap: usize, now: u64) {
        let mut spared = 0usize;
        while self.nodes.len() > max {
            let Some((_, key)) = self.lru.first_key_value().map(|(t, k)| (*t, *k)) else {
                break;
            };
            if !self.spare(&key, pin_cap, now, &mut spared) {
                self.remove(&key);
            }
        }
    }

    /// Evicts `tenant`'s least recently used nodes until it holds at most `quota`.
    fn evict_tenant_to(&mut self, tenant: u64, quota: usize, pin_cap: usize, now: u64) {
        let mut spared = 0usize;
        loop {
            let Some(t) = self.tenants.get(&tenant) else {
                return;
            };
            if t.lru.len() <= quota {
                return;
            }
            let Some(key) = t.lru.first_key_value().map(|(_, k)| *k) else {
                return;
            };
            if !self.spare(&key, pin_cap, now, &mut spared) {
                self.remove(&key);
            }
        }
    }

    /// Whether the eviction candidate `key` is spared: a pinned anchor of a tenant within
    /// its cap of pinned nodes is moved to the back of the LRU (at most once per node per
    /// eviction run: `spared` counts, and a run never spares more than the nodes held).
    fn spare(&mut self, key: &ChainKey, pin_cap: usize, now: u64, spared: &mut usize) -> bool {
        let Some(node) = self.nodes.get(key) else {
            return false;
        };
        let within_cap = self
            .tenants
            .get(&node.tenant)
            .is_some_and(|t| t.pinned <= pin_cap);
        if !node.pinned() || !within_cap || *spared >= self.nodes.len() {
            return false;
        }
        *spared += 1;
        let (parent, turn, last_seen, tenant) =
            (node.parent, node.turn, node.last_seen, node.tenant);
        self.touch(*key, parent, turn, last_seen.min(now), tenant);
        true
    }

    fn touch(&mut self, key: ChainKey, parent: Option<ChainKey>, turn: u32, now: u64, tenant: u64) {
        let tick = self.next_tick;
        self.next_tick += 1;
        let node = self.nodes.entry(key).or_insert(Node {
            parent,
            turn,
            observed: None,
            created: now,
            last_seen: now,
            tick,
            lineage: None,
            persisted: false,
            tenant,
        });
        let old = node.tick;
        self.lru.remove(&old);
        node.tick = tick;
        node.last_seen = node.last_seen.max(now);
        let node_tenant = node.tenant;
        self.lru.insert(tick, key);
        let t = self.tenants.entry(node_tenant).or_default();
        t.lru.remove(&old);
        t.lru.insert(tick, key);
        if let Some(t) = &mut self.tracker {
            t.node_changed(key);
        }
    }
}

impl Inner {
    /// Touches every prefix of `chain` (chain positions `1..`), ancestors last so that
    /// leaves are evicted before the prefixes they grow from, and records the verdict on the
    /// last (the highest of the verdicts when the turn was seen before).
    fn record_turn(
        &mut self,
        chain: &[ChainKey],
        now: u64,
        turn_risk: f32,
        verdict: TurnVerdict,
        tenant: u64,
    ) {
        let n = chain.len() - 1;
        for i in (1..=n).rev() {
            let parent = (i > 1).then(|| chain[i - 1]);
            self.touch(chain[i], parent, i as u32, now, tenant);
        }
        if let Some(node) = self.nodes.get_mut(&chain[n]) {
            node.observed = Some(match node.observed {
                Some(prev) => TurnRecord {
                    risk: prev.risk.max(turn_risk),
                    action: prev.action.max(verdict.action),
                    refusal: prev.refusal || verdict.refusal,
                },
                None => TurnRecord {
                    risk: turn_risk,
                    action: verdict.action,
                    refusal: verdict.refusal,
                },
            });
        }
    }

    /// Evidence from another lineage, through the hint: whether the hint was known, and the
    /// evidence of the live lineage it pointed at (if not this one). The hint then points
    /// at `anchor`.
    fn hint_evidence(
        &mut self,
        hint: Option<[u8; 32]>,
        anchor: ChainKey,
        now: u64,
        ttl: u64,
    ) -> (bool, Evidence) {
        let mut hint_matched = false;
        let mut hint_evidence = Evidence::default();
        if let Some(h) = hint {
            if let Some(other) = self.hints.get(&h).map(|s| s.anchor) {
                hint_matched = true;
                if other != anchor
                    && let Some(l) = self.live(&other, now, ttl).and_then(|x| x.lineage.as_ref())
                {
                    hint_evidence = l.evidence;
                }
            }
            self.set_hint(h, anchor);
        }
        (hint_matched, hint_evidence)
    }

    /// Counts the turn in the lineage at `anchor` (touched before): rephrasing, action,
    /// refusal; keeps the fingerprints of a blocked or refused turn; adds the hint; raises
    /// the lineage's peak to the `conversation_risk`. `d` is the rephrase distance.
    fn update_lineage(
        &mut self,
        anchor: ChainKey,
        print: &TurnPrint,
        verdict: TurnVerdict,
        hint: Option<[u8; 32]>,
        conversation_risk: f32,
        d: u32,
    ) -> LineageUpdate {
        let Inner {
            recent,
            recent_words,
            nodes,
            tenants,
            ..
        } = self;
        let node = nodes
            .get_mut(&anchor)
            .expect("the anchor was touched above");
        let was_pinned = node.pinned();
        let node_tenant = node.tenant;
        let lin = node.lineage.get_or_insert_with(Box::default);
        let rephrasing = print.matches(&lin.blocked, &lin.blocked_words, d)
            || recent.iter().any(|b| hamming(*b, print.simhash) <= d)
            || recent_words.iter().any(|w| shares_words(w, &print.words));
        if rephrasing {
            lin.evidence.rephrasings_after_block += 1;
        }
        match verdict.action {
            Action::Block => lin.evidence.blocks += 1,
            Action::Sanitize => lin.evidence.sanitizes += 1,
            Action::Allow => {}
        }
        if verdict.refusal {
            lin.evidence.refusals += 1;
        }
        if verdict.action == Action::Block || verdict.refusal {
            remember_fingerprint(lin, recent, recent_words, print);
        }
        let mut dropped_hint = None;
        if let Some(h) = hint
            && !lin.hints.contains(&h)
        {
            if lin.hints.len() == MAX_HINTS_PER_LINEAGE {
                dropped_hint = Some(lin.hints.remove(0));
            }
            lin.hints.push(h);
        }
        let risk = conversation_risk.max(lin.peak_conversation_risk);
        lin.peak_conversation_risk = risk;
        let evidence = lin.evidence;
        if !was_pinned && node.pinned() {
            tenants.entry(node_tenant).or_default().pinned += 1;
        }
        LineageUpdate {
            evidence,
            risk,
            rephrasing,
            dropped_hint,
        }
    }
}

/// What counting a turn in its lineage gave.
struct LineageUpdate {
    /// The lineage's counts after the turn.
    evidence: Evidence,
    /// The conversation risk: the lineage's peak.
    risk: f32,
    /// Whether the turn rephrases a blocked or refused one.
    rephrasing: bool,
    /// A hint the lineage let go of to make room (it may still point here).
    dropped_hint: Option<[u8; 32]>,
}

/// Server-side conversation state. Built once, shared (`Send + Sync`), one interior mutex.
pub struct ConversationStore {
    options: StoreOptions,
    secret: ChainSecret,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
}

impl fmt::Debug for ConversationStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConversationStore")
            .field("options", &self.options)
            .field("secret", &self.secret)
            .field("clock", &self.clock)
            .field("inner", &*self.lock())
            .finish()
    }
}

/// One tenant's partition of a [`ConversationStore`] ([`ConversationStore::tenant`]).
#[derive(Debug)]
pub struct TenantStore<'s> {
    store: &'s ConversationStore,
    secret: ChainSecret,
    tag: u64,
}

impl TenantStore<'_> {
    /// Records the newest (last) message of `messages` with its verdict and returns the
    /// conversation state. `hint` is a client-sent conversation id: stored as a keyed hash,
    /// used only to attach evidence, never as a key.
    pub fn observe(
        &self,
        messages: &[(Role, &str)],
        hint: Option<&str>,
        verdict: TurnVerdict,
    ) -> Result<ConversationState, ObserveError> {
        let Some((_, last_text)) = messages.last() else {
            return Err(ObserveError::Empty);
        };
        if verdict.risk.is_nan() {
            return Err(ObserveError::NanRisk);
        }
        let turn_risk = verdict.risk.clamp(0.0, 1.0);
        let chain = self.secret.chain(messages);
        let n = messages.len();
        let a = anchor_index(messages);
        let print = TurnPrint::of(&self.secret, last_text);
        let hint_hash = hint.map(|h| self.secret.hint(h));
        let ttl = self.store.options.ttl_seconds;
        let now = self.store.clock.now();

        let mut inner = self.store.lock();
        inner.sweep(now, ttl);
        let known = (1..=n)
            .rev()
            .find(|&i| inner.live(&chain[i], now, ttl).is_some())
            .unwrap_or(0);
        inner.record_turn(&chain, now, turn_risk, verdict, self.tag);
        let risks: Vec<f32> = (1..=n)
            .filter_map(|i| inner.nodes.get(&chain[i]).and_then(|x| x.observed))
            .map(|t| t.risk)
            .collect();
        let terms = score(&self.store.options.risk, &risks);

        let anchor = chain[a];
        let (hint_matched, hint_evidence) = inner.hint_evidence(hint_hash, anchor, now, ttl);
        let d = self.store.options.risk.rephrase_distance;
        let lineage = inner.update_lineage(anchor, &print, verdict, hint_hash, terms.risk, d);
        if let Some(h) = lineage.dropped_hint
            && inner.hints.get(&h).map(|s| s.anchor) == Some(anchor)
        {
            inner.remove_hint(&h);
        }
        let quota = self.store.options.tenant_quota();
        inner.evict_tenant_to(self.tag, quota, quota / 2, now);
        inner.evict_to(self.store.options.max_entries, quota / 2, now);

        let mut total = lineage.evidence;
        total.add(&hint_evidence);
        Ok(ConversationState {
            risk: lineage.risk,
            peak: terms.peak,
            accumulated: terms.accumulated,
            escalation: terms.escalation,
            turns: risks.len() as u32,
            blocks: total.blocks,
            sanitizes: total.sanitizes,
            refusals: total.refusals,
            rephrasings_after_block: total.rephrasings_after_block,
            rephrasing: lineage.rephrasing,
            inherited_from_prefix_len: known,
            hint_matched,
            hint_evidence,
        })
    }

    /// The state of the longest known prefix of `messages`, read-only (nothing recorded or
    /// refreshed). `None` when no prefix is known. `rephrasing` says whether the last
    /// message would count as a rephrasing of a blocked turn.
    pub fn lookup(&self, messages: &[(Role, &str)]) -> Option<ConversationState> {
        let (_, last_text) = messages.last()?;
        let chain = self.secret.chain(messages);
        let n = messages.len();
        let a = anchor_index(messages);
        let ttl = self.store.options.ttl_seconds;
        let now = self.store.clock.now();
        let inner = self.store.lock();
        let known = (1..=n)
            .rev()
            .find(|&i| inner.live(&chain[i], now, ttl).is_some())?;
        let risks: Vec<f32> = (1..=known)
            .filter_map(|i| inner.live(&chain[i], now, ttl).and_then(|x| x.observed))
            .map(|t| t.risk)
            .collect();
        let terms = score(&self.store.options.risk, &risks);
        let lin = inner
            .live(&chain[a], now, ttl)
            .and_then(|x| x.lineage.as_deref());
        let evidence = lin.map(|l| l.evidence).unwrap_or_default();
        let print = TurnPrint::of(&self.secret, last_text);
        let d = self.store.options.risk.rephrase_distance;
        Some(ConversationState {
            risk: terms
                .risk
                .max(lin.map_or(0.0, |l| l.peak_conversation_risk)),
            peak: terms.peak,
            accumulated: terms.accumulated,
            escalation: terms.escalation,
            turns: risks.len() as u32,
            blocks: evidence.blocks,
            sanitizes: evidence.sanitizes,
            refusals: evidence.refusals,
            rephrasings_after_block: evidence.rephrasings_after_block,
            rephrasing: lin.is_some_and(|l| print.matches(&l.blocked, &l.blocked_words, d))
                || print.matches_recent(&inner, d),
            inherited_from_prefix_len: known,
            hint_matched: false,
            hint_evidence: Evidence::default(),
        })
    }

    /// Records that the model refused the last message of `messages` (the prefix it was
    /// answering). Idempotent: a refusal already noted on that prefix is not counted again,
    /// so a history re-sent on every call does not inflate the count. `false` when the prefix
    /// is unknown (never observed, expired or evicted).
    pub fn note_refusal(&self, messages: &[(Role, &str)]) -> bool {
        let n = messages.len();
        if n == 0 {
            return false;
        }
        let chain = self.secret.chain(messages);
        let a = anchor_index(messages);
        let ttl = self.store.options.ttl_seconds;
        let now = self.store.clock.now();
        let mut inner = self.store.lock();
        if inner.live(&chain[n], now, ttl).is_none() {
            return false;
        }
        let Some(node) = inner.nodes.get_mut(&chain[n]) else {
            return false;
        };
        let fresh = match &mut node.observed {
            Some(t) if t.refusal => false,
            Some(t) => {
                t.refusal = true;
                true
            }
            None => false,
        };
        if !fresh {
            return false;
        }
        // The refused turn is remembered like a blocked one: a near-identical retry is a
        // rephrasing (Crescendo rewinds after a refusal as much as after a BLOCK).
        let print = TurnPrint::of(&self.secret, messages[n - 1].1);
        let inner_ref = &mut *inner;
        let recent = &mut inner_ref.recent;
        let recent_words = &mut inner_ref.recent_words;
        if let Some(anchor) = inner_ref.nodes.get_mut(&chain[a])
            && anchor.lineage.is_some()
        {
            let was_pinned = anchor.pinned();
            if let Some(lin) = anchor.lineage.as_deref_mut() {
                lin.evidence.refusals += 1;
                remember_fingerprint(lin, recent, recent_words, &print);
            }
            if !was_pinned && anchor.pinned() {
                inner_ref.tenants.entry(anchor.tenant).or_default().pinned += 1;
            }
        }
        // Both rows changed: the persisted copy must learn it.
        if let Some(t) = &mut inner.tracker {
            t.node_changed(chain[n]);
            t.node_changed(chain[a]);
        }
        true
    }

    /// Whether `text` is a near-identical rephrasing of a turn blocked or refused in any
    /// lineage lately (the store-wide ring; nothing recorded).
    pub fn rephrases_recent(&self, text: &str) -> bool {
        let print = TurnPrint::of(&self.secret, text);
        let d = self.store.options.risk.rephrase_distance;
        print.matches_recent(&self.store.lock(), d)
    }

    /// Per-turn risks of the observed prefixes of `messages`, oldest first (the known part of
    /// the path only; nothing recorded or refreshed).
    pub fn path_risks(&self, messages: &[(Role, &str)]) -> Vec<f32> {
        let chain = self.secret.chain(messages);
        let ttl = self.store.options.ttl_seconds;
        let now = self.store.clock.now();
        let inner = self.store.lock();
        (1..chain.len())
            .filter_map(|i| inner.live(&chain[i], now, ttl).and_then(|x| x.observed))
            .map(|t| t.risk)
            .collect()
    }
}

/// A turn's two fingerprints: the SimHash and the content words.
struct TurnPrint {
    simhash: u64,
    words: Vec<u32>,
}

impl TurnPrint {
    fn of(secret: &ChainSecret, text: &str) -> Self {
        Self {
            simhash: simhash(secret, text),
            words: content_words(secret, text),
        }
    }

    /// Near-identical (SimHash within `d` bits) or sharing most content words.
    fn matches(&self, simhashes: &[u64], words: &[Vec<u32>], d: u32) -> bool {
        simhashes.iter().any(|b| hamming(*b, self.simhash) <= d)
            || words.iter().any(|w| shares_words(w, &self.words))
    }

    fn matches_recent(&self, inner: &Inner, d: u32) -> bool {
        inner.recent.iter().any(|b| hamming(*b, self.simhash) <= d)
            || inner
                .recent_words
                .iter()
                .any(|w| shares_words(w, &self.words))
    }
}

/// Keeps a blocked or refused turn's fingerprints in its lineage and in the store-wide rings.
fn remember_fingerprint(
    lin: &mut Lineage,
    recent: &mut std::collections::VecDeque<u64>,
    recent_words: &mut std::collections::VecDeque<Vec<u32>>,
    print: &TurnPrint,
) {
    if lin.blocked.len() == MAX_BLOCKED_FINGERPRINTS {
        lin.blocked.remove(0);
    }
    lin.blocked.push(print.simhash);
    if lin.blocked_words.len() == MAX_BLOCKED_WORD_SETS {
        lin.blocked_words.remove(0);
    }
    lin.blocked_words.push(print.words.clone());
    if recent.len() == MAX_RECENT_FINGERPRINTS {
        recent.pop_front();
    }
    recent.push_back(print.simhash);
    if recent_words.len() == MAX_RECENT_WORD_SETS {
        recent_words.pop_front();
    }
    recent_words.push_back(print.words.clone());
}

/// Index (1-based, in chain positions) of the lineage anchor: the prefix ending with the
/// first message that is not a system or developer prompt (all of them if there is none).
fn anchor_index(messages: &[(Role, &str)]) -> usize {
    messages
        .iter()
        .position(|(r, _)| !matches!(r, Role::System | Role::Developer))
        .map_or(messages.len(), |p| p + 1)
}

impl ConversationStore {
    /// A store on the system clock.
    pub fn new(options: StoreOptions, key_material: &[u8]) -> Result<Self, OptionsError> {
        Self::with_clock(options, key_material, Arc::new(SystemClock))
    }

    /// A store on the given clock.
    pub fn with_clock(
        options: StoreOptions,
        key_material: &[u8],
        clock: Arc<dyn Clock>,
    ) -> Result<Self, OptionsError> {
        options.validate()?;
        Ok(Self {
            options,
            secret: ChainSecret::derive(key_material),
            clock,
            inner: Mutex::new(Inner::default()),
        })
    }

    /// A store under an already derived secret (options validated by the caller): the
    /// shared state's per-request scratch stores.
    pub(crate) fn with_secret(
        options: StoreOptions,
        secret: ChainSecret,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            options,
            secret,
            clock,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The options.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The chain secret (for computing keys outside the store).
    pub fn secret(&self) -> &ChainSecret {
        &self.secret
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves counts, never broken invariants that matter
        // for safety: keep serving.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Nodes held (live or not yet swept).
    pub fn len(&self) -> usize {
        self.lock().nodes.len()
    }

    /// Whether no node is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A rough estimate of the heap bytes held (tables by capacity, lineage boxes).
    pub fn approx_bytes(&self) -> usize {
        use std::mem::size_of;
        let inner = self.lock();
        let nodes = inner.nodes.capacity() * (size_of::<(ChainKey, Node)>() + 1);
        // A B-tree leaf holds up to 11 entries; count ~1.5x entries for slack and internals.
        let lru = inner.lru.len() * size_of::<(u64, ChainKey)>() * 3 / 2;
        let hints = inner.hints.capacity() * (size_of::<([u8; 32], HintSlot)>() + 1);
        let lineages: usize = inner
            .nodes
            .values()
            .filter_map(|n| n.lineage.as_ref())
            .map(|l| {
                size_of::<Lineage>()
                    + l.blocked.capacity() * 8
                    + l.blocked_words
                        .iter()
                        .map(|w| 24 + w.capacity() * 4)
                        .sum::<usize>()
                    + l.hints.capacity() * 32
            })
            .sum();
        let tracker = inner.tracker.as_ref().map_or(0, Tracker::approx_bytes);
        nodes + lru + hints + lineages + tracker
    }

    /// The partition of `tenant` (an API key id; `None`: the default one). Chain keys,
    /// hints and fingerprints are derived from a per-tenant secret, so tenants never see
    /// each other's conversations, and each holds at most
    /// [`StoreOptions::tenant_quota`] nodes.
    pub fn tenant(&self, tenant: Option<&str>) -> TenantStore<'_> {
        let (secret, tag) = self.secret.partition(tenant);
        TenantStore {
            store: self,
            secret,
            tag,
        }
    }

    /// [`TenantStore::observe`] in the default partition.
    pub fn observe(
        &self,
        messages: &[(Role, &str)],
        hint: Option<&str>,
        verdict: TurnVerdict,
    ) -> Result<ConversationState, ObserveError> {
        self.tenant(None).observe(messages, hint, verdict)
    }

    /// [`TenantStore::lookup`] in the default partition.
    pub fn lookup(&self, messages: &[(Role, &str)]) -> Option<ConversationState> {
        self.tenant(None).lookup(messages)
    }

    /// [`TenantStore::note_refusal`] in the default partition.
    pub fn note_refusal(&self, messages: &[(Role, &str)]) -> bool {
        self.tenant(None).note_refusal(messages)
    }

    /// [`TenantStore::rephrases_recent`] in the default partition.
    pub fn rephrases_recent(&self, text: &str) -> bool {
        self.tenant(None).rephrases_recent(text)
    }

    /// [`TenantStore::path_risks`] in the default partition.
    pub fn path_risks(&self, messages: &[(Role, &str)]) -> Vec<f32> {
        self.tenant(None).path_risks(messages)
    }

    /// Nodes held by the partition of `tenant`.
    pub fn tenant_len(&self, tenant: Option<&str>) -> usize {
        let tag = self.tenant(tenant).tag;
        self.lock().tenants.get(&tag).map_or(0, |t| t.lru.len())
    }

    /// The parent and turn index recorded for a chain key (for inspection and tests).
    pub fn node_info(&self, key: &ChainKey) -> Option<(Option<ChainKey>, u32, u64)> {
        self.lock()
            .nodes
            .get(key)
            .map(|n| (n.parent, n.turn, n.created))
    }

    /// Takes the changes since the previous call, for persistence: nodes (with their
    /// lineages) and hints created or changed, and the keys of those removed since they were
    /// last drained. Rows hold keys, numbers and fingerprints, never text.
    ///
    /// Tracking starts with the first drain (or [`restore`](Self::restore)); that first
    /// drain is a full snapshot (`full`), as is the drain after tracking overflowed (more
    /// removals pending than `max_entries`) or after a failed write. Between drains the
    /// tracked keys are at most the nodes held plus the rows removed since the last drain.
    pub fn drain_changes(&self) -> StoreChanges {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let previous = inner
            .tracker
            .replace(Tracker::new(self.options.max_entries));
        match previous {
            Some(t) if !t.full => {
                let mut nodes = Vec::with_capacity(t.dirty_nodes.len());
                for key in t.dirty_nodes {
                    if let Some(n) = inner.nodes.get_mut(&key) {
                        n.persisted = true;
                        nodes.push(node_row(key, n));
                    }
                }
                let mut hints = Vec::with_capacity(t.dirty_hints.len());
                for hint in t.dirty_hints {
                    if let Some(slot) = inner.hints.get_mut(&hint) {
                        slot.persisted = true;
                        hints.push(HintRow {
                            hint,
                            anchor: slot.anchor,
                        });
                    }
                }
                StoreChanges {
                    full: false,
                    nodes,
                    hints,
                    removed_nodes: t
                        .removed_nodes
                        .into_iter()
                        .filter(|k| !inner.nodes.contains_key(k))
                        .collect(),
                    removed_hints: t
                        .removed_hints
                        .into_iter()
                        .filter(|h| !inner.hints.contains_key(h))
                        .collect(),
                }
            }
            _ => StoreChanges {
                full: true,
                nodes: inner
                    .nodes
                    .iter_mut()
                    .map(|(key, n)| {
                        n.persisted = true;
                        node_row(*key, n)
                    })
                    .collect(),
                hints: inner
                    .hints
                    .iter_mut()
                    .map(|(hint, slot)| {
                        slot.persisted = true;
                        HintRow {
                            hint: *hint,
                            anchor: slot.anchor,
                        }
                    })
                    .collect(),
                removed_nodes: Vec::new(),
                removed_hints: Vec::new(),
            },
        }
    }

    /// Makes the next [`drain_changes`](Self::drain_changes) a full snapshot (after a failed
    /// write, the database no longer matches what was drained).
    pub(crate) fn require_full_resync(&self) {
        if let Some(t) = self.lock().tracker.as_mut() {
            t.overflow();
        }
    }

    /// Loads persisted rows back (at startup, into a fresh store, with the key material the
    /// rows were made with). Rows past the TTL are not loaded; the LRU order follows
    /// `last_seen` (ancestors after their descendants on ties, as `observe` leaves them);
    /// restored rows rank older than anything already held, and `max_entries` is enforced
    /// by evicting the least recently seen. A key already held keeps its held state. Hints
    /// are loaded only with their lineage.
    ///
    /// The rows are taken to be what the database holds: rows not loaded are reported as
    /// removed by the next [`drain_changes`](Self::drain_changes), loaded ones are not
    /// written back until they change.
    pub fn restore(&self, nodes: Vec<NodeRow>, hints: Vec<HintRow>) -> StoreRestoreStats {
        let ttl = self.options.ttl_seconds;
        let max = self.options.max_entries;
        let now = self.clock.now();
        let mut rows = nodes;
        rows.sort_by(|a, b| {
            a.last_seen
                .cmp(&b.last_seen)
                .then(b.turn.cmp(&a.turn))
                .then(a.key.cmp(&b.key))
        });
        let mut stats = StoreRestoreStats::default();
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.ensure_tracker(max);

        // Restored rows take ticks 0..rows.len(); the nodes already held move after them.
        let offset = rows.len() as u64;
        let held: Vec<ChainKey> = std::mem::take(&mut inner.lru).into_values().collect();
        for (i, key) in held.into_iter().enumerate() {
            let tick = offset + i as u64;
            if let Some(n) = inner.nodes.get_mut(&key) {
                n.tick = tick;
            }
            inner.lru.insert(tick, key);
        }
        inner.next_tick = offset + inner.lru.len() as u64;

        let mut restored = Vec::new();
        for (tick, row) in (0u64..).zip(rows) {
            let key = row.key;
            if let Some(n) = inner.nodes.get_mut(&key) {
                // The database has a row for this key: the held state overwrites it.
                n.persisted = true;
                if let Some(t) = &mut inner.tracker {
                    t.node_changed(key);
                }
                stats.nodes.skipped += 1;
                continue;
            }
            if now.saturating_sub(row.last_seen) >= ttl {
                stats.nodes.expired += 1;
                if let Some(t) = &mut inner.tracker {
                    t.node_removed(key, true);
                }
                continue;
            }
            let Some(node) = node_from_row(row, tick) else {
                stats.nodes.skipped += 1;
                if let Some(t) = &mut inner.tracker {
                    t.node_removed(key, true);
                }
                continue;
            };
            inner.nodes.insert(key, node);
            inner.lru.insert(tick, key);
            restored.push(key);
        }
        inner.rebuild_tenants();
        let quota = self.options.tenant_quota();
        inner.evict_to(max, quota / 2, now);
        stats.nodes.restored = restored
            .iter()
            .filter(|k| inner.nodes.contains_key(k))
            .count();
        stats.nodes.over_capacity = restored.len() - stats.nodes.restored;

        for row in hints {
            if let Some(slot) = inner.hints.get_mut(&row.hint) {
                slot.persisted = true;
                if let Some(t) = &mut inner.tracker {
                    t.hint_changed(row.hint);
                }
                stats.hints_skipped += 1;
                continue;
            }
            let listed = inner
                .nodes
                .get(&row.anchor)
                .and_then(|n| n.lineage.as_ref())
                .is_some_and(|l| l.hints.contains(&row.hint));
            if listed {
                inner.hints.insert(
                    row.hint,
                    HintSlot {
                        anchor: row.anchor,
                        persisted: true,
                    },
                );
                stats.hints_restored += 1;
            } else {
                stats.hints_skipped += 1;
                if let Some(t) = &mut inner.tracker {
                    t.hint_removed(row.hint, true);
                }
            }
        }
        stats
    }

    /// Every row held, sorted by key (for comparing a store with its database in tests).
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> (Vec<NodeRow>, Vec<HintRow>) {
        let inner = self.lock();
        // As the database holds them: without word sets (the shared state keeps those).
        let mut nodes: Vec<NodeRow> = inner
            .nodes
            .iter()
            .map(|(k, n)| {
                let mut row = node_row(*k, n);
                if let Some(l) = &mut row.lineage {
                    l.words.clear();
                }
                row
            })
            .collect();
        nodes.sort_by_key(|r| r.key);
        let mut hints: Vec<HintRow> = inner
            .hints
            .iter()
            .map(|(h, s)| HintRow {
                hint: *h,
                anchor: s.anchor,
            })
            .collect();
        hints.sort_by_key(|r| r.hint);
        (nodes, hints)
    }
}
