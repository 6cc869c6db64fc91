//! The in-process store: the reference semantics of every [`Op`].

use crate::conv::{F_HINTS, F_SEEN, hex_items, merge_node};
use crate::{
    ApprovalOutcome, ApprovalRecord, ApprovalState, ApprovalStep, ConvRead, ConvRows, ConvWrite,
    Op, Reply, SharedStore, StateError, bucket_step, bucket_ttl_ms,
};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Most keys held; past it the earliest-expiring go first (bounded memory).
const MAX_KEYS: usize = 1_000_000;

#[derive(Debug)]
enum Value {
    Text(String),
    Approval(ApprovalRecord),
    Bucket {
        tokens: f64,
        last_ms: u64,
    },
    /// member → expiry
    Index(HashMap<String, u64>),
    /// A conversation node's fields.
    Hash(HashMap<String, String>),
    /// member → score (a conversation tenant's LRU indexes and ledger).
    Scores(HashMap<String, u64>),
}

#[derive(Debug)]
struct Slot {
    value: Value,
    expires_ms: u64,
}

/// Every [`Op`] in a `Mutex<HashMap>`, with expiry by the wall clock (TTLs) and the
/// callers' clocks (buckets, indexes), as in Redis.
#[derive(Debug, Default)]
pub struct MemoryStore {
    slots: Mutex<HashMap<String, Slot>>,
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn live<'a>(slots: &'a mut HashMap<String, Slot>, key: &str, now: u64) -> Option<&'a mut Slot> {
        if slots.get(key).is_some_and(|s| s.expires_ms <= now) {
            slots.remove(key);
        }
        slots.get_mut(key)
    }

    fn make_room(slots: &mut HashMap<String, Slot>, now: u64) {
        if slots.len() < MAX_KEYS {
            return;
        }
        slots.retain(|_, s| s.expires_ms > now);
        if slots.len() >= MAX_KEYS {
            let mut by_expiry: BTreeSet<(u64, String)> = slots
                .iter()
                .map(|(k, s)| (s.expires_ms, k.clone()))
                .collect();
            while slots.len() >= MAX_KEYS {
                let Some((_, k)) = by_expiry.pop_first() else {
                    break;
                };
                slots.remove(&k);
            }
        }
    }
}

impl SharedStore for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn execute(&self, op: &Op) -> Result<Reply, StateError> {
        let now = wall_ms();
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        Ok(match op {
            Op::Ping => Reply::Pong,
            Op::Bucket {
                key,
                capacity,
                per_s,
                take,
                need,
                force,
                now_ms,
            } => {
                let state = match Self::live(&mut slots, key, now) {
                    Some(Slot {
                        value: Value::Bucket { tokens, last_ms },
                        ..
                    }) => Some((*tokens, *last_ms)),
                    _ => None,
                };
                let (reply, tokens, last_ms) =
                    bucket_step(state, *capacity, *per_s, *take, *need, *force, *now_ms);
                Self::make_room(&mut slots, now);
                slots.insert(
                    key.clone(),
                    Slot {
                        value: Value::Bucket { tokens, last_ms },
                        expires_ms: now + bucket_ttl_ms(tokens, *capacity, *per_s),
                    },
                );
                reply
            }
            Op::PutNew { key, value, ttl_ms } => {
                if Self::live(&mut slots, key, now).is_some() {
                    Reply::Done(false)
                } else {
                    Self::make_room(&mut slots, now);
                    slots.insert(
                        key.clone(),
                        Slot {
                            value: Value::Text(value.clone()),
                            expires_ms: now + (*ttl_ms).max(1),
                        },
                    );
                    Reply::Done(true)
                }
            }
            Op::Get { key } => Reply::Value(match Self::live(&mut slots, key, now) {
                Some(Slot {
                    value: Value::Text(t),
                    ..
                }) => Some(t.clone()),
                _ => None,
            }),
            Op::Take { key } => {
                let v = match Self::live(&mut slots, key, now) {
                    Some(Slot {
                        value: Value::Text(t),
                        ..
                    }) => Some(t.clone()),
                    _ => None,
                };
                slots.remove(key);
                Reply::Value(v)
            }
            Op::ApprovalNew {
                key,
                record,
                requested_by,
                ttl_ms,
            } => {
                if Self::live(&mut slots, key, now).is_some() {
                    Reply::Done(false)
                } else {
                    Self::make_room(&mut slots, now);
                    let rec = ApprovalRecord {
                        record: record.clone(),
                        requested_by: requested_by.clone(),
                        state: ApprovalState::Pending,
                        by: String::new(),
                        used: false,
                    };
                    slots.insert(
                        key.clone(),
                        Slot {
                            value: Value::Approval(rec),
                            expires_ms: now + (*ttl_ms).max(1),
                        },
                    );
                    Reply::Done(true)
                }
            }
            Op::ApprovalGet { key } => Reply::Record(match Self::live(&mut slots, key, now) {
                Some(Slot {
                    value: Value::Approval(rec),
                    ..
                }) => Some(rec.clone()),
                _ => None,
            }),
            Op::Approval { key, step } => Reply::Approval(match Self::live(&mut slots, key, now) {
                Some(Slot {
                    value: Value::Approval(rec),
                    ..
                }) => approval_step(rec, step),
                _ => ApprovalOutcome::Unknown,
            }),
            Op::IndexAdd {
                index,
                member,
                expires_ms,
                cap,
                now_ms,
            } => {
                if Self::live(&mut slots, index, now).is_none() {
                    Self::make_room(&mut slots, now);
                    slots.insert(
                        index.clone(),
                        Slot {
                            value: Value::Index(HashMap::new()),
                            expires_ms: u64::MAX,
                        },
                    );
                }
                let Some(Slot {
                    value: Value::Index(members),
                    expires_ms: slot_exp,
                }) = slots.get_mut(index)
                else {
                    return Err(StateError::Protocol {
                        backend: "memory",
                        detail: format!("{index} is not an index"),
                    });
                };
                members.retain(|_, e| *e > *now_ms);
                let added = if members.contains_key(member) || (members.len() as u64) < *cap {
                    members.insert(member.clone(), *expires_ms);
                    true
                } else {
                    false
                };
                *slot_exp = members.values().copied().max().unwrap_or(now).max(now + 1);
                Reply::Done(added)
            }
            Op::IndexRemove { index, member } => {
                Reply::Done(match Self::live(&mut slots, index, now) {
                    Some(Slot {
                        value: Value::Index(members),
                        ..
                    }) => members.remove(member).is_some(),
                    _ => false,
                })
            }
            Op::IndexLive {
                index,
                now_ms,
                limit,
            } => Reply::Members(match Self::live(&mut slots, index, now) {
                Some(Slot {
                    value: Value::Index(members),
                    ..
                }) => {
                    members.retain(|_, e| *e > *now_ms);
                    let mut v: Vec<(u64, String)> =
                        members.iter().map(|(m, e)| (*e, m.clone())).collect();
                    v.sort();
                    v.into_iter()
                        .take(*limit as usize)
                        .map(|(_, m)| m)
                        .collect()
                }
                _ => Vec::new(),
            }),
            Op::CachePut {
                key,
                index,
                value,
                ttl_ms,
                cap,
                now_ms,
            } => {
                let ttl = (*ttl_ms).max(1);
                Self::make_room(&mut slots, now);
                slots.insert(
                    key.clone(),
                    Slot {
                        value: Value::Text(value.clone()),
                        expires_ms: now + ttl,
                    },
                );
                if !matches!(
                    Self::live(&mut slots, index, now),
                    Some(Slot {
                        value: Value::Index(_),
                        ..
                    })
                ) {
                    slots.insert(
                        index.clone(),
                        Slot {
                            value: Value::Index(HashMap::new()),
                            expires_ms: u64::MAX,
                        },
                    );
                }
                let mut evicted = Vec::new();
                if let Some(Slot {
                    value: Value::Index(members),
                    expires_ms: slot_exp,
                }) = slots.get_mut(index)
                {
                    members.retain(|_, e| *e > *now_ms);
                    members.insert(key.clone(), now_ms + ttl);
                    let over = members.len().saturating_sub((*cap).max(1) as usize);
                    if over > 0 {
                        let mut by_expiry: Vec<(u64, String)> =
                            members.iter().map(|(m, e)| (*e, m.clone())).collect();
                        by_expiry.sort();
                        for (_, m) in by_expiry.into_iter().take(over) {
                            members.remove(&m);
                            evicted.push(m);
                        }
                    }
                    *slot_exp = now + ttl;
                }
                for m in evicted {
                    slots.remove(&m);
                }
                Reply::Done(true)
            }
            Op::ConvRead(r) => Reply::ConvRows(conv_read(&mut slots, r, now)),
            Op::ConvWrite(w) => {
                conv_write(&mut slots, w, now);
                Reply::Done(true)
            }
        })
    }
}

fn conv_read(slots: &mut HashMap<String, Slot>, r: &ConvRead, now: u64) -> ConvRows {
    let nodes = r
        .nodes
        .iter()
        .map(
            |k| match MemoryStore::live(slots, &format!("{}n:{k}", r.space), now) {
                Some(Slot {
                    value: Value::Hash(f),
                    ..
                }) => f.clone(),
                _ => HashMap::new(),
            },
        )
        .collect();
    let hint = r.hint.as_ref().and_then(|h| {
        match MemoryStore::live(slots, &format!("{}h:{h}", r.space), now) {
            Some(Slot {
                value: Value::Text(t),
                ..
            }) => Some(t.clone()),
            _ => None,
        }
    });
    let ledger = match MemoryStore::live(slots, &format!("{}ledger", r.space), now) {
        Some(Slot {
            value: Value::Scores(m),
            ..
        }) => r.ledger.iter().map(|e| m.get(e).copied()).collect(),
        _ => vec![None; r.ledger.len()],
    };
    ConvRows {
        nodes,
        hint,
        ledger,
    }
}

/// The scores at `key` (created empty), its expiry set to `expires`.
fn scores<'a>(
    slots: &'a mut HashMap<String, Slot>,
    key: &str,
    now: u64,
    expires: u64,
) -> &'a mut HashMap<String, u64> {
    if !matches!(
        MemoryStore::live(slots, key, now),
        Some(Slot {
            value: Value::Scores(_),
            ..
        })
    ) {
        slots.insert(
            key.to_string(),
            Slot {
                value: Value::Scores(HashMap::new()),
                expires_ms: expires,
            },
        );
    }
    match slots.get_mut(key) {
        Some(Slot {
            value: Value::Scores(m),
            expires_ms,
        }) => {
            *expires_ms = expires;
            m
        }
        // Inserted just above.
        _ => unreachable!("a scores slot was inserted"),
    }
}

/// Removes the `n` lowest-scored members (ties by member, as Redis orders them).
fn pop_min(m: &mut HashMap<String, u64>, n: usize) -> Vec<String> {
    let mut v: Vec<(u64, String)> = m.iter().map(|(k, s)| (*s, k.clone())).collect();
    v.sort();
    v.into_iter()
        .take(n)
        .map(|(_, k)| {
            m.remove(&k);
            k
        })
        .collect()
}

fn drop_hint(slots: &mut HashMap<String, Slot>, space: &str, hint: &str, anchor: &str, now: u64) {
    let key = format!("{space}h:{hint}");
    let points_here = matches!(
        MemoryStore::live(slots, &key, now),
        Some(Slot { value: Value::Text(t), .. }) if t == anchor
    );
    if points_here {
        slots.remove(&key);
    }
}

fn evict(slots: &mut HashMap<String, Slot>, space: &str, member: &str, now: u64) {
    let key = format!("{space}n:{member}");
    if let Some(Slot {
        value: Value::Hash(f),
        ..
    }) = slots.remove(&key)
    {
        for h in hex_items(f.get(F_HINTS).map_or("", String::as_str), 64) {
            drop_hint(slots, space, &h, member, now);
        }
    }
}

/// [`Op::ConvWrite`] as `CONV_WRITE_LUA` does it.
fn conv_write(slots: &mut HashMap<String, Slot>, w: &ConvWrite, now: u64) {
    let ttl_ms = w.ttl_s.saturating_mul(1000).max(1);
    let (lru, pin, led) = (
        format!("{}lru", w.space),
        format!("{}pin", w.space),
        format!("{}ledger", w.space),
    );
    for n in &w.nodes {
        let key = format!("{}n:{}", w.space, n.key);
        let mut fields = match MemoryStore::live(slots, &key, now) {
            Some(Slot {
                value: Value::Hash(f),
                ..
            }) => std::mem::take(f),
            _ => HashMap::new(),
        };
        let (pinned, dropped) = merge_node(&mut fields, n);
        let seen = fields
            .get(F_SEEN)
            .and_then(|s| s.parse().ok())
            .unwrap_or(n.last_seen);
        MemoryStore::make_room(slots, now);
        slots.insert(
            key,
            Slot {
                value: Value::Hash(fields),
                expires_ms: now + ttl_ms,
            },
        );
        for h in dropped {
            drop_hint(slots, &w.space, &h, &n.key, now);
        }
        if pinned {
            scores(slots, &lru, now, now + ttl_ms).remove(&n.key);
            scores(slots, &pin, now, now + ttl_ms).insert(n.key.clone(), seen);
        } else {
            scores(slots, &lru, now, now + ttl_ms).insert(n.key.clone(), seen);
        }
    }
    for (hint, anchor) in &w.hints {
        MemoryStore::make_room(slots, now);
        slots.insert(
            format!("{}h:{hint}", w.space),
            Slot {
                value: Value::Text(anchor.clone()),
                expires_ms: now + ttl_ms,
            },
        );
    }
    let lttl_ms = w.ledger_ttl_s.saturating_mul(1000).max(1);
    if !w.ledger.is_empty() {
        let m = scores(slots, &led, now, now + lttl_ms);
        for (e, seen) in &w.ledger {
            let s = m.entry(e.clone()).or_insert(*seen);
            *s = (*s).max(*seen);
        }
    }
    if !w.nodes.is_empty() {
        let cutoff = w.now.saturating_sub(w.ttl_s);
        let mut victims = Vec::new();
        let pins = {
            let p = scores(slots, &pin, now, now + ttl_ms);
            p.retain(|_, s| *s > cutoff);
            let over = p.len().saturating_sub(w.pin_cap as usize);
            victims.extend(pop_min(p, over));
            p.len()
        };
        {
            let l = scores(slots, &lru, now, now + ttl_ms);
            l.retain(|_, s| *s > cutoff);
            let room = (w.quota as usize).saturating_sub(pins);
            let over = l.len().saturating_sub(room);
            victims.extend(pop_min(l, over));
        }
        for v in victims {
            evict(slots, &w.space, &v, now);
        }
    }
    if !w.ledger.is_empty() {
        let cutoff = w.now.saturating_sub(w.ledger_ttl_s);
        let m = scores(slots, &led, now, now + lttl_ms);
        m.retain(|_, s| *s > cutoff);
        let over = m.len().saturating_sub(w.ledger_quota as usize);
        pop_min(m, over);
    }
}

/// One step of an approval record: the outcome, the record changed in place when done.
/// The Redis store's Lua script does the same (redis_store.rs, `APPROVAL_LUA`).
pub(crate) fn approval_step(rec: &mut ApprovalRecord, step: &ApprovalStep) -> ApprovalOutcome {
    match step {
        ApprovalStep::Approve { by } | ApprovalStep::Deny { by } => {
            if by.is_empty() || *by == rec.requested_by {
                return ApprovalOutcome::SelfApproval;
            }
            if rec.state != ApprovalState::Pending {
                return ApprovalOutcome::AlreadyDecided;
            }
            rec.state = if matches!(step, ApprovalStep::Approve { .. }) {
                ApprovalState::Approved
            } else {
                ApprovalState::Denied
            };
            rec.by = by.clone();
        }
        ApprovalStep::ForceDeny { by } => {
            rec.state = ApprovalState::Denied;
            rec.by = by.clone();
        }
        ApprovalStep::Redeem => {
            if rec.used {
                return ApprovalOutcome::Used;
            }
            match rec.state {
                ApprovalState::Pending => return ApprovalOutcome::NotApproved,
                ApprovalState::Denied => return ApprovalOutcome::Denied,
                ApprovalState::Approved => rec.used = true,
            }
        }
    }
    ApprovalOutcome::Done(rec.clone())
}
