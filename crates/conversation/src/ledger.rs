//! Forged-history detection: a ledger of the assistant messages this proxy returned.
//!
//! Clients send the whole conversation on every call, assistant turns included, so a
//! client can put words in the model's mouth ("Sure, here is step 1 …") and ask it to go
//! on. The proxy records a keyed hash of every assistant message it actually returned;
//! an assistant turn in a later request whose hash is not in the ledger was never produced
//! through this proxy (or has expired, or was evicted).

use crate::chain::{ChainKey, ChainSecret};
use crate::risk::OptionsError;
use crate::store::{Clock, RestoreStats, SystemClock};
use rampart_core::Role;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// Finding id reported when a conversation holds assistant turns this proxy never returned.
pub const HIST_FORGED: &str = "HIST_001";
/// Default capacity of the ledger, in recorded assistant messages.
pub const DEFAULT_LEDGER_MAX_ENTRIES: usize = 100_000;
/// Default time to live of a ledger entry since it was last recorded or verified: one day.
pub const DEFAULT_LEDGER_TTL_SECONDS: u64 = 86_400;

/// What to do with a conversation holding forged assistant turns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryPolicy {
    /// Keep the conversation as sent; report the finding.
    #[default]
    Report,
    /// Remove the forged assistant turns before the conversation goes on; report the finding.
    Drop,
    /// Block the request; report the finding.
    Block,
}

/// Options of the assistant ledger (`[conversation.ledger]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LedgerOptions {
    /// Most entries kept; the least recently used go first.
    pub max_entries: usize,
    /// Most entries one tenant (an API key) may hold; past it, that tenant's least recently
    /// used go first, so one key's answers cannot evict another's. `None`: `max_entries`.
    pub max_entries_per_tenant: Option<usize>,
    /// Seconds after its last use at which an entry counts as absent.
    pub ttl_seconds: u64,
    /// What to do with forged assistant turns.
    pub policy: HistoryPolicy,
    /// Bind each entry to the prefix the message answered (default). When false, an
    /// assistant text verifies after any prefix.
    pub bind_to_prefix: bool,
}

impl Default for LedgerOptions {
    fn default() -> Self {
        Self {
            max_entries: DEFAULT_LEDGER_MAX_ENTRIES,
            max_entries_per_tenant: None,
            ttl_seconds: DEFAULT_LEDGER_TTL_SECONDS,
            policy: HistoryPolicy::default(),
            bind_to_prefix: true,
        }
    }
}

impl LedgerOptions {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.max_entries == 0 || self.max_entries_per_tenant == Some(0) {
            return Err(OptionsError::LedgerMaxEntries(0));
        }
        if self.ttl_seconds == 0 {
            return Err(OptionsError::LedgerTtl(self.ttl_seconds));
        }
        Ok(())
    }
}

/// The result of [`AssistantLedger::check`]: indexes into the conversation, never text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryCheck {
    /// Assistant turns that were never returned through this proxy (as far as the ledger
    /// remembers), in order.
    pub forged: Vec<usize>,
    /// Assistant turns found in the ledger, in order.
    pub verified: Vec<usize>,
}

impl HistoryCheck {
    /// Whether any assistant turn is forged.
    pub fn is_forged(&self) -> bool {
        !self.forged.is_empty()
    }
}

/// What a [`HistoryPolicy`] makes of a [`HistoryCheck`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HistoryOutcome {
    /// [`HIST_FORGED`] when any assistant turn is forged, whatever the policy.
    pub finding: Option<&'static str>,
    /// Indexes of the messages to remove before forwarding (policy `drop` only).
    pub drop: Vec<usize>,
    /// Whether the request is to be blocked (policy `block` only).
    pub block: bool,
}

/// Applies `policy` to `check`. Nothing forged: no finding, nothing dropped, no block.
pub fn apply_history_policy(policy: HistoryPolicy, check: &HistoryCheck) -> HistoryOutcome {
    if !check.is_forged() {
        return HistoryOutcome::default();
    }
    HistoryOutcome {
        finding: Some(HIST_FORGED),
        drop: match policy {
            HistoryPolicy::Drop => check.forged.clone(),
            HistoryPolicy::Report | HistoryPolicy::Block => Vec::new(),
        },
        block: policy == HistoryPolicy::Block,
    }
}

/// One ledger entry as persisted: a keyed hash and a time, never text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerRow {
    /// `H(k, 5 || prefix key || H(k, normalized text))`.
    pub hash: [u8; 32],
    /// Seconds (ledger clock) when the entry was last recorded or verified.
    pub last_seen: u64,
}

/// What changed in an [`AssistantLedger`] since the previous
/// [`drain_changes`](AssistantLedger::drain_changes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerChanges {
    /// A full snapshot: everything persisted before is to be replaced by these rows.
    pub full: bool,
    /// Entries to insert or replace.
    pub entries: Vec<LedgerRow>,
    /// Entries to delete: evicted, expired, or not restored.
    pub removed: Vec<[u8; 32]>,
}

impl LedgerChanges {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        !self.full && self.entries.is_empty() && self.removed.is_empty()
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    last_seen: u64,
    tick: u64,
    /// Whether the database has a row for this hash as of the last drain.
    persisted: bool,
    /// The tenant's tag (0: the default tenant, and rows restored from a database).
    tenant: u64,
}

/// Changes since the last drain; absent until the first drain or restore.
#[derive(Debug, Default)]
struct Tracker {
    /// Live entries changed since the last drain.
    dirty: HashSet<[u8; 32]>,
    /// Entries with a database row removed since the last drain.
    removed: HashSet<[u8; 32]>,
    /// The removed set overflowed (or a write failed): the next drain is a full snapshot.
    full: bool,
    max_removed: usize,
}

impl Tracker {
    fn new(max_entries: usize) -> Self {
        Self {
            max_removed: max_entries,
            ..Self::default()
        }
    }

    fn overflow(&mut self) {
        self.full = true;
        self.dirty = HashSet::new();
        self.removed = HashSet::new();
    }

    fn changed(&mut self, h: [u8; 32]) {
        if !self.full {
            self.dirty.insert(h);
        }
    }

    fn removed(&mut self, h: [u8; 32], persisted: bool) {
        if self.full {
            return;
        }
        self.dirty.remove(&h);
        if persisted {
            self.removed.insert(h);
            if self.removed.len() > self.max_removed {
                self.overflow();
            }
        }
    }
}

#[derive(Default)]
struct Inner {
    entries: HashMap<[u8; 32], Entry>,
    lru: BTreeMap<u64, [u8; 32]>,
    /// Per tenant tag, its entries in LRU order.
    tenants: HashMap<u64, BTreeMap<u64, [u8; 32]>>,
    next_tick: u64,
    tracker: Option<Tracker>,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inner")
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl Inner {
    fn live(&self, h: &[u8; 32], now: u64, ttl: u64) -> bool {
        self.entries
            .get(h)
            .is_some_and(|e| now.saturating_sub(e.last_seen) < ttl)
    }

    fn sweep(&mut self, now: u64, ttl: u64) {
        while let Some((_, h)) = self.lru.first_key_value() {
            let h = *h;
            if self.live(&h, now, ttl) {
                break;
            }
            self.remove(&h);
        }
    }

    fn remove(&mut self, h: &[u8; 32]) {
        if let Some(e) = self.entries.remove(h) {
            self.lru.remove(&e.tick);
            if let Some(t) = self.tenants.get_mut(&e.tenant) {
                t.remove(&e.tick);
                if t.is_empty() {
                    self.tenants.remove(&e.tenant);
                }
            }
            if let Some(t) = &mut self.tracker {
                t.removed(*h, e.persisted);
            }
        }
    }

    fn touch(&mut self, h: [u8; 32], now: u64, tenant: u64) {
        let tick = self.next_tick;
        self.next_tick += 1;
        let e = self.entries.entry(h).or_insert(Entry {
            last_seen: now,
            tick,
            persisted: false,
            tenant,
        });
        let old = e.tick;
        self.lru.remove(&old);
        e.tick = tick;
        e.last_seen = now;
        let t = self.tenants.entry(e.tenant).or_default();
        t.remove(&old);
        t.insert(tick, h);
        self.lru.insert(tick, h);
        if let Some(t) = &mut self.tracker {
            t.changed(h);
        }
    }

    /// Evicts `tenant`'s least recently used entries until it holds at most `quota`.
    fn evict_tenant_to(&mut self, tenant: u64, quota: usize) {
        while let Some(h) = self
            .tenants
            .get(&tenant)
            .filter(|t| t.len() > quota)
            .and_then(|t| t.first_key_value().map(|(_, h)| *h))
        {
            self.remove(&h);
        }
    }

    /// The per-tenant LRUs, from the entries and the global LRU (after a restore).
    fn rebuild_tenants(&mut self) {
        self.tenants.clear();
        for (tick, h) in &self.lru {
            if let Some(e) = self.entries.get(h) {
                self.tenants.entry(e.tenant).or_default().insert(*tick, *h);
            }
        }
    }

    fn evict_to(&mut self, max: usize) {
        while self.entries.len() > max {
            let Some((_, h)) = self.lru.first_key_value() else {
                break;
            };
            let h = *h;
            self.remove(&h);
        }
    }
}

/// The entry of an assistant message answering the prefix `prefix_key` (bound) or any
/// prefix (unbound).
pub(crate) fn entry_hash(
    bind_to_prefix: bool,
    secret: &ChainSecret,
    prefix_key: &ChainKey,
    text: &str,
) -> [u8; 32] {
    let bound = if bind_to_prefix {
        *prefix_key
    } else {
        ChainKey([0; 32])
    };
    secret.ledger_hash(&bound, text)
}

/// The ledger of assistant messages returned through this proxy. Built once, shared
/// (`Send + Sync`), one interior mutex. Holds keyed hashes only, never text.
pub struct AssistantLedger {
    options: LedgerOptions,
    secret: ChainSecret,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
}

impl fmt::Debug for AssistantLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AssistantLedger")
            .field("options", &self.options)
            .field("secret", &self.secret)
            .field("clock", &self.clock)
            .field("inner", &*self.lock())
            .finish()
    }
}

impl AssistantLedger {
    /// A ledger on the system clock.
    pub fn new(options: LedgerOptions, key_material: &[u8]) -> Result<Self, OptionsError> {
        Self::with_clock(options, key_material, Arc::new(SystemClock))
    }

    /// A ledger on the given clock. Use the same key material as the store so both agree
    /// on chain keys.
    pub fn with_clock(
        options: LedgerOptions,
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

    /// The options.
    pub fn options(&self) -> &LedgerOptions {
        &self.options
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Entries held (live or not yet swept).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn entry_hash(&self, secret: &ChainSecret, prefix_key: &ChainKey, text: &str) -> [u8; 32] {
        entry_hash(self.options.bind_to_prefix, secret, prefix_key, text)
    }

    /// A ledger under an already derived secret (options validated by the caller): the
    /// shared state's per-request scratch ledgers.
    pub(crate) fn with_secret(
        options: LedgerOptions,
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

    /// Records an assistant message this proxy returned, as the answer to `prefix` (the
    /// messages it was sent, in order). Stores one keyed hash, never text.
    pub fn record(&self, prefix: &[(Role, &str)], assistant_text: &str) {
        self.record_for(None, prefix, assistant_text);
    }

    /// [`record`](Self::record) in the partition of `tenant` (an API key id): the hash is
    /// keyed by the tenant's secret, and the tenant holds at most its share of the ledger.
    pub fn record_for(&self, tenant: Option<&str>, prefix: &[(Role, &str)], assistant_text: &str) {
        let (secret, tag) = self.secret.partition(tenant);
        let prefix_key = secret
            .chain(prefix)
            .last()
            .copied()
            .unwrap_or_else(|| secret.root());
        let h = self.entry_hash(&secret, &prefix_key, assistant_text);
        let now = self.clock.now();
        let quota = self
            .options
            .max_entries_per_tenant
            .unwrap_or(self.options.max_entries)
            .min(self.options.max_entries);
        let mut inner = self.lock();
        inner.sweep(now, self.options.ttl_seconds);
        inner.touch(h, now, tag);
        inner.evict_tenant_to(tag, quota);
        inner.evict_to(self.options.max_entries);
    }

    /// Checks every assistant turn of `conversation` but the last message (the new input).
    /// Verified entries are refreshed (their TTL and LRU position), so a conversation that
    /// goes on keeps its history verifiable.
    pub fn check(&self, conversation: &[(Role, &str)]) -> HistoryCheck {
        self.check_for(None, conversation)
    }

    /// [`check`](Self::check) in the partition of `tenant`: an answer recorded for another
    /// tenant does not verify.
    pub fn check_for(&self, tenant: Option<&str>, conversation: &[(Role, &str)]) -> HistoryCheck {
        let mut out = HistoryCheck::default();
        let Some(history_len) = conversation.len().checked_sub(1) else {
            return out;
        };
        let history = &conversation[..history_len];
        if !history.iter().any(|(r, _)| *r == Role::Assistant) {
            return out;
        }
        let (secret, tag) = self.secret.partition(tenant);
        let chain = secret.chain(history);
        let ttl = self.options.ttl_seconds;
        let now = self.clock.now();
        let mut inner = self.lock();
        inner.sweep(now, ttl);
        for (i, (role, text)) in history.iter().enumerate() {
            if *role != Role::Assistant {
                continue;
            }
            // chain[i] names the messages before i: the prefix this turn answered.
            let h = self.entry_hash(&secret, &chain[i], text);
            if inner.live(&h, now, ttl) {
                inner.touch(h, now, tag);
                out.verified.push(i);
            } else {
                out.forged.push(i);
            }
        }
        out
    }

    /// Takes the changes since the previous call, for persistence: entries recorded or
    /// refreshed, and the hashes of those removed since they were last drained. The first
    /// drain (tracking starts there or at [`restore`](Self::restore)), the drain after the
    /// removed set overflowed (more than `max_entries`) and the drain after a failed write
    /// are full snapshots.
    pub fn drain_changes(&self) -> LedgerChanges {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let previous = inner
            .tracker
            .replace(Tracker::new(self.options.max_entries));
        match previous {
            Some(t) if !t.full => {
                let mut entries = Vec::with_capacity(t.dirty.len());
                for hash in t.dirty {
                    if let Some(e) = inner.entries.get_mut(&hash) {
                        e.persisted = true;
                        entries.push(LedgerRow {
                            hash,
                            last_seen: e.last_seen,
                        });
                    }
                }
                LedgerChanges {
                    full: false,
                    entries,
                    removed: t
                        .removed
                        .into_iter()
                        .filter(|h| !inner.entries.contains_key(h))
                        .collect(),
                }
            }
            _ => LedgerChanges {
                full: true,
                entries: inner
                    .entries
                    .iter_mut()
                    .map(|(hash, e)| {
                        e.persisted = true;
                        LedgerRow {
                            hash: *hash,
                            last_seen: e.last_seen,
                        }
                    })
                    .collect(),
                removed: Vec::new(),
            },
        }
    }

    /// Makes the next [`drain_changes`](Self::drain_changes) a full snapshot.
    pub(crate) fn require_full_resync(&self) {
        if let Some(t) = self.lock().tracker.as_mut() {
            t.overflow();
        }
    }

    /// Loads persisted entries back (at startup, with the key material and
    /// `bind_to_prefix` they were made with). Entries past the TTL are not loaded; the LRU
    /// order follows `last_seen`, restored entries rank older than anything already held,
    /// and `max_entries` is enforced by evicting the least recently seen. Rows not loaded
    /// are reported as removed by the next [`drain_changes`](Self::drain_changes).
    pub fn restore(&self, rows: Vec<LedgerRow>) -> RestoreStats {
        let ttl = self.options.ttl_seconds;
        let max = self.options.max_entries;
        let now = self.clock.now();
        let mut rows = rows;
        rows.sort_by(|a, b| a.last_seen.cmp(&b.last_seen).then(a.hash.cmp(&b.hash)));
        let mut stats = RestoreStats::default();
        let mut guard = self.lock();
        let inner = &mut *guard;
        let Inner {
            entries, tracker, ..
        } = inner;
        tracker.get_or_insert_with(|| {
            let mut t = Tracker::new(max);
            t.dirty.extend(entries.keys().copied());
            t
        });

        let offset = rows.len() as u64;
        let held: Vec<[u8; 32]> = std::mem::take(&mut inner.lru).into_values().collect();
        for (i, h) in held.into_iter().enumerate() {
            let tick = offset + i as u64;
            if let Some(e) = inner.entries.get_mut(&h) {
                e.tick = tick;
            }
            inner.lru.insert(tick, h);
        }
        inner.next_tick = offset + inner.lru.len() as u64;

        let mut restored = Vec::new();
        for (tick, row) in (0u64..).zip(rows) {
            if let Some(e) = inner.entries.get_mut(&row.hash) {
                e.persisted = true;
                if let Some(t) = &mut inner.tracker {
                    t.changed(row.hash);
                }
                stats.skipped += 1;
                continue;
            }
            if now.saturating_sub(row.last_seen) >= ttl {
                stats.expired += 1;
                if let Some(t) = &mut inner.tracker {
                    t.removed(row.hash, true);
                }
                continue;
            }
            inner.entries.insert(
                row.hash,
                Entry {
                    last_seen: row.last_seen,
                    tick,
                    persisted: true,
                    tenant: 0,
                },
            );
            inner.lru.insert(tick, row.hash);
            restored.push(row.hash);
        }
        inner.rebuild_tenants();
        inner.evict_to(max);
        stats.restored = restored
            .iter()
            .filter(|h| inner.entries.contains_key(*h))
            .count();
        stats.over_capacity = restored.len() - stats.restored;
        stats
    }

    /// Every entry held, sorted by hash (for comparing a ledger with its database in tests).
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> Vec<LedgerRow> {
        let mut rows: Vec<LedgerRow> = self
            .lock()
            .entries
            .iter()
            .map(|(hash, e)| LedgerRow {
                hash: *hash,
                last_seen: e.last_seen,
            })
            .collect();
        rows.sort_by_key(|r| r.hash);
        rows
    }
}
