//! Conversation state in the shared store: one read of the rows a request's path needs,
//! one merging write of what it changed (`rampart-conversation`'s `SharedConversations`
//! drives them).
//!
//! A tenant's conversation space is a key prefix `conv:{tenant}:` under which live:
//!
//! * `n:{64 hex}`: a node (one known message prefix), a hash; anchors of a lineage also
//!   hold its evidence (`l*` fields);
//! * `h:{64 hex}`: a conversation-id hint, a string naming its lineage's anchor;
//! * `lru`, `pin`: the tenant's nodes by last use, plain and pinned anchors (sorted sets);
//! * `ledger`: the assistant ledger's entries by last use (a sorted set; the entry is the
//!   member, there is no other key).
//!
//! Keys and numbers only: chain keys, keyed hashes and SimHash fingerprints, never text.

use crate::{Reply, StateError};
use std::collections::{HashMap, HashSet};

/// Node fields: parent, turn, observed risk / action / refusal, created, last seen.
pub const F_PARENT: &str = "p";
/// The node's message count.
pub const F_TURN: &str = "t";
/// The observed turn's risk (absent: not observed as a newest turn).
pub const F_RISK: &str = "r";
/// The observed turn's action (0 allow, 1 sanitize, 2 block).
pub const F_ACTION: &str = "a";
/// The observed turn's refusal (0 / 1).
pub const F_REFUSAL: &str = "x";
/// Seconds (caller's clock) when first written.
pub const F_CREATED: &str = "c";
/// Seconds (caller's clock) when last seen.
pub const F_SEEN: &str = "s";
/// Lineage: blocks.
pub const F_BLOCKS: &str = "lb";
/// Lineage: sanitizes.
pub const F_SANITIZES: &str = "ls";
/// Lineage: refusals.
pub const F_REFUSALS: &str = "lr";
/// Lineage: rephrasings after a block.
pub const F_REPHRASINGS: &str = "lp";
/// Lineage: peak conversation risk (present on every anchor with a lineage).
pub const F_PEAK: &str = "lk";
/// Lineage: SimHash fingerprints, 16 hex digits each, oldest first.
pub const F_PRINTS: &str = "lf";
/// Lineage: hint hashes, 64 hex digits each, oldest first.
pub const F_HINTS: &str = "lh";

/// Lineage: content-word sets of blocked or refused turns, `;`-separated, each 8 hex
/// digits per word hash, oldest first.
pub const F_WORDS: &str = "lw";

/// Most fingerprints a lineage keeps (as in memory).
pub const MAX_PRINTS: usize = 32;
/// Most hints a lineage keeps (as in memory).
pub const MAX_HINTS: usize = 4;
/// Most content-word sets a lineage keeps (as in memory).
pub const MAX_WORD_SETS: usize = 8;

/// What [`crate::Op::ConvRead`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvRead {
    /// The tenant's space, `conv:{tenant}:`.
    pub space: String,
    /// Node keys (64 hex digits), in order.
    pub nodes: Vec<String>,
    /// A hint (64 hex digits), if any.
    pub hint: Option<String>,
    /// Ledger entries (64 hex digits) whose last use is wanted.
    pub ledger: Vec<String>,
}

/// What a [`ConvRead`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConvRows {
    /// Each node's fields, in the order asked (empty: absent).
    pub nodes: Vec<HashMap<String, String>>,
    /// The anchor the hint names.
    pub hint: Option<String>,
    /// Each ledger entry's last use, seconds (absent: not in the ledger).
    pub ledger: Vec<Option<u64>>,
}

/// A node to merge in.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvNode {
    /// The node's key (64 hex digits).
    pub key: String,
    /// The parent's key (`""`: none).
    pub parent: String,
    /// Messages in the prefix.
    pub turn: u32,
    /// The observed turn: risk (as written by Rust's `f32` display), action code, refusal.
    pub observed: Option<(String, u8, bool)>,
    /// Seconds when created.
    pub created: u64,
    /// Seconds when last seen.
    pub last_seen: u64,
    /// The lineage, on anchors.
    pub lineage: Option<ConvLineage>,
}

/// A lineage's change, merged so that concurrent writers never lose evidence: counts are
/// added (deltas), the peak is the maximum, fingerprints and hints the union (bounded,
/// oldest dropped first).
#[derive(Debug, Clone, PartialEq)]
pub struct ConvLineage {
    /// Added blocks, sanitizes, refusals, rephrasings.
    pub delta: [u32; 4],
    /// The peak conversation risk seen by the writer.
    pub peak: String,
    /// Fingerprints (16 hex digits each), oldest first.
    pub prints: Vec<String>,
    /// Hints (64 hex digits each), oldest first.
    pub hints: Vec<String>,
    /// Content-word sets (8 hex digits per word, no separator), oldest first.
    pub words: Vec<String>,
}

/// What [`crate::Op::ConvWrite`] merges in.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvWrite {
    /// The tenant's space, `conv:{tenant}:`.
    pub space: String,
    /// The caller's clock, seconds.
    pub now: u64,
    /// Nodes' and hints' time to live since last use, seconds.
    pub ttl_s: u64,
    /// Most nodes the tenant holds.
    pub quota: u64,
    /// Most pinned anchors (evidence of a block or refusal) the tenant holds; they count
    /// against `quota` and are evicted only among themselves.
    pub pin_cap: u64,
    /// Nodes changed.
    pub nodes: Vec<ConvNode>,
    /// Hints set: (hint, anchor), both 64 hex digits.
    pub hints: Vec<(String, String)>,
    /// Ledger entries recorded or verified: (entry, last use).
    pub ledger: Vec<(String, u64)>,
    /// The ledger entries' time to live since last use, seconds.
    pub ledger_ttl_s: u64,
    /// Most ledger entries the tenant holds.
    pub ledger_quota: u64,
}

impl Reply {
    /// The rows of a [`crate::Op::ConvRead`], or a protocol error.
    pub fn conv_rows(self, backend: &'static str) -> Result<ConvRows, StateError> {
        match self {
            Reply::ConvRows(r) => Ok(r),
            other => Err(StateError::Protocol {
                backend,
                detail: format!("{other:?} for a conversation read"),
            }),
        }
    }
}

/// Splits a concatenation of `width`-digit hex items.
pub(crate) fn hex_items(s: &str, width: usize) -> Vec<String> {
    s.as_bytes()
        .chunks(width)
        .filter(|c| c.len() == width)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect()
}

/// Bounded union, oldest first: the held items, then the incoming ones not held; the
/// oldest dropped past `max`. Returns the result and what fell off.
pub(crate) fn union_bounded(
    held: Vec<String>,
    incoming: &[String],
    max: usize,
) -> (Vec<String>, Vec<String>) {
    let mut seen: HashSet<String> = held.iter().cloned().collect();
    let mut out = held;
    for i in incoming {
        if seen.insert(i.clone()) {
            out.push(i.clone());
        }
    }
    let over = out.len().saturating_sub(max);
    let dropped = out.drain(..over).collect();
    (out, dropped)
}

fn num(s: Option<&String>) -> f64 {
    s.and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

/// Merges `n` into the node's fields (the Lua script does the same); returns whether
/// the node is now a pinned anchor and the hints its lineage let go of.
pub(crate) fn merge_node(f: &mut HashMap<String, String>, n: &ConvNode) -> (bool, Vec<String>) {
    if !n.parent.is_empty() {
        f.entry(F_PARENT.into()).or_insert_with(|| n.parent.clone());
    }
    f.insert(F_TURN.into(), n.turn.to_string());
    let created = match f.get(F_CREATED).and_then(|c| c.parse::<u64>().ok()) {
        Some(c) => c.min(n.created),
        None => n.created,
    };
    let seen = match f.get(F_SEEN).and_then(|c| c.parse::<u64>().ok()) {
        Some(c) => c.max(n.last_seen),
        None => n.last_seen,
    };
    f.insert(F_CREATED.into(), created.to_string());
    f.insert(F_SEEN.into(), seen.to_string());
    if let Some((risk, action, refusal)) = &n.observed {
        let held = f.get(F_RISK).cloned();
        if held.as_ref().is_none_or(|h| num(Some(h)) < num(Some(risk))) {
            f.insert(F_RISK.into(), risk.clone());
        }
        let a = (num(f.get(F_ACTION)) as u8).max(*action);
        f.insert(F_ACTION.into(), a.to_string());
        let x = num(f.get(F_REFUSAL)) as u8 | u8::from(*refusal);
        f.insert(F_REFUSAL.into(), x.to_string());
    }
    let mut dropped = Vec::new();
    if let Some(l) = &n.lineage {
        for (field, d) in [F_BLOCKS, F_SANITIZES, F_REFUSALS, F_REPHRASINGS]
            .into_iter()
            .zip(l.delta)
        {
            let v = num(f.get(field)) as u64 + u64::from(d);
            f.insert(field.into(), v.to_string());
        }
        let held = f.get(F_PEAK).cloned();
        if held
            .as_ref()
            .is_none_or(|h| num(Some(h)) < num(Some(&l.peak)))
        {
            f.insert(F_PEAK.into(), l.peak.clone());
        }
        let prints = hex_items(f.get(F_PRINTS).map_or("", String::as_str), 16);
        let (prints, _) = union_bounded(prints, &l.prints, MAX_PRINTS);
        f.insert(F_PRINTS.into(), prints.concat());
        let hints = hex_items(f.get(F_HINTS).map_or("", String::as_str), 64);
        let (hints, gone) = union_bounded(hints, &l.hints, MAX_HINTS);
        f.insert(F_HINTS.into(), hints.concat());
        dropped = gone;
        let words = f
            .get(F_WORDS)
            .map(|w| {
                w.split(';')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let (words, _) = union_bounded(words, &l.words, MAX_WORD_SETS);
        f.insert(F_WORDS.into(), words.join(";"));
    }
    let pinned = num(f.get(F_BLOCKS)) > 0.0 || num(f.get(F_REFUSALS)) > 0.0;
    (pinned, dropped)
}

/// One line per node for the Lua script: fields joined by `|` (none holds one).
pub(crate) fn node_arg(n: &ConvNode) -> String {
    let (risk, action, refusal) = match &n.observed {
        Some((r, a, x)) => (r.clone(), a.to_string(), if *x { "1" } else { "0" }.into()),
        None => (String::new(), String::new(), String::new()),
    };
    let lineage = match &n.lineage {
        Some(l) => format!(
            "1|{}|{}|{}|{}|{}|{}|{}|{}",
            l.delta[0],
            l.delta[1],
            l.delta[2],
            l.delta[3],
            l.peak,
            l.prints.concat(),
            l.hints.concat(),
            l.words.join(";")
        ),
        None => "0|||||||||".into(),
    };
    format!(
        "{}|{}|{}|{}|{}|{}|{}|{}|{}",
        n.key, n.parent, n.turn, risk, action, refusal, n.created, n.last_seen, lineage
    )
}

/// [`crate::Op::ConvWrite`] in Redis: merges every node (as `merge_node`), sets the hints,
/// records the ledger entries, then bounds the tenant: entries past their TTL leave the
/// indexes, pinned anchors past `pin_cap` and nodes past `quota` are evicted oldest
/// first (with the hints their lineage lists), ledger entries past their quota likewise.
/// KEYS[1] is the tenant's space; every key used is under it (one hash slot in a cluster:
/// the tenant is in braces).
pub(crate) const CONV_WRITE_LUA: &str = r#"
local base = KEYS[1]
local now = tonumber(ARGV[1]); local ttl = tonumber(ARGV[2])
local quota = tonumber(ARGV[3]); local pincap = tonumber(ARGV[4])
local nn = tonumber(ARGV[5]); local nh = tonumber(ARGV[6]); local ne = tonumber(ARGV[7])
local lttl = tonumber(ARGV[8]); local lquota = tonumber(ARGV[9])
local lru = base .. 'lru'; local pin = base .. 'pin'; local led = base .. 'ledger'
local function split(s) local t = {} for f in (s .. '|'):gmatch('([^|]*)|') do t[#t + 1] = f end return t end
local function items(s, w) local t = {} for i = 1, #s - w + 1, w do t[#t + 1] = s:sub(i, i + w - 1) end return t end
local function sets(s) local t = {} for w in s:gmatch('[^;]+') do t[#t + 1] = w end return t end
local function union(held, incoming, max)
  local seen = {}
  for _, v in ipairs(held) do seen[v] = true end
  for _, v in ipairs(incoming) do if not seen[v] then held[#held + 1] = v; seen[v] = true end end
  local dropped = {}
  while #held > max do dropped[#dropped + 1] = table.remove(held, 1) end
  return held, dropped
end
local function drop_hint(h, anchor)
  local hk = base .. 'h:' .. h
  if redis.call('GET', hk) == anchor then redis.call('DEL', hk) end
end
local function evict(member)
  local nk = base .. 'n:' .. member
  local hs = redis.call('HGET', nk, 'lh')
  if hs then for _, h in ipairs(items(hs, 64)) do drop_hint(h, member) end end
  redis.call('DEL', nk)
end
local i = 10
for _ = 1, nn do
  local f = split(ARGV[i]); i = i + 1
  local key = f[1]; local nk = base .. 'n:' .. key
  local cur = redis.call('HMGET', nk, 'c', 's', 'r', 'a', 'x', 'lk', 'lf', 'lh', 'lw')
  if f[2] ~= '' then redis.call('HSETNX', nk, 'p', f[2]) end
  local created = tonumber(f[7]); if cur[1] then created = math.min(created, tonumber(cur[1])) end
  local seen = tonumber(f[8]); if cur[2] then seen = math.max(seen, tonumber(cur[2])) end
  redis.call('HSET', nk, 't', f[3], 'c', string.format('%d', created), 's', string.format('%d', seen))
  if f[4] ~= '' then
    if (not cur[3]) or tonumber(cur[3]) < tonumber(f[4]) then redis.call('HSET', nk, 'r', f[4]) end
    local a = tonumber(f[5]); if cur[4] then a = math.max(a, tonumber(cur[4])) end
    local x = tonumber(f[6]); if cur[5] then x = math.max(x, tonumber(cur[5])) end
    redis.call('HSET', nk, 'a', string.format('%d', a), 'x', string.format('%d', x))
  end
  local pinned = false
  if f[9] == '1' then
    redis.call('HINCRBY', nk, 'lb', f[10]); redis.call('HINCRBY', nk, 'ls', f[11])
    redis.call('HINCRBY', nk, 'lr', f[12]); redis.call('HINCRBY', nk, 'lp', f[13])
    if (not cur[6]) or tonumber(cur[6]) < tonumber(f[14]) then redis.call('HSET', nk, 'lk', f[14]) end
    local prints = union(items(cur[7] or '', 16), items(f[15], 16), 32)
    redis.call('HSET', nk, 'lf', table.concat(prints))
    local hints, gone = union(items(cur[8] or '', 64), items(f[16], 64), 4)
    redis.call('HSET', nk, 'lh', table.concat(hints))
    for _, h in ipairs(gone) do drop_hint(h, key) end
    local words = union(sets(cur[9] or ''), sets(f[17]), 8)
    redis.call('HSET', nk, 'lw', table.concat(words, ';'))
  end
  local ev = redis.call('HMGET', nk, 'lb', 'lr')
  pinned = (tonumber(ev[1] or '0') > 0) or (tonumber(ev[2] or '0') > 0)
  redis.call('EXPIRE', nk, ttl)
  if pinned then
    redis.call('ZREM', lru, key); redis.call('ZADD', pin, seen, key)
  else
    redis.call('ZADD', lru, seen, key)
  end
end
for _ = 1, nh do
  redis.call('SET', base .. 'h:' .. ARGV[i], ARGV[i + 1], 'EX', ttl); i = i + 2
end
for _ = 1, ne do
  redis.call('ZADD', led, 'GT', ARGV[i + 1], ARGV[i]); i = i + 2
end
if nn > 0 then
  redis.call('ZREMRANGEBYSCORE', lru, '-inf', now - ttl)
  redis.call('ZREMRANGEBYSCORE', pin, '-inf', now - ttl)
  local pins = redis.call('ZCARD', pin)
  if pins > pincap then
    local v = redis.call('ZPOPMIN', pin, pins - pincap)
    for j = 1, #v, 2 do evict(v[j]) end
    pins = pincap
  end
  local over = redis.call('ZCARD', lru) - math.max(quota - pins, 0)
  if over > 0 then
    local v = redis.call('ZPOPMIN', lru, over)
    for j = 1, #v, 2 do evict(v[j]) end
  end
  redis.call('EXPIRE', lru, ttl); redis.call('EXPIRE', pin, ttl)
end
if ne > 0 then
  redis.call('ZREMRANGEBYSCORE', led, '-inf', now - lttl)
  local over = redis.call('ZCARD', led) - lquota
  if over > 0 then redis.call('ZPOPMIN', led, over) end
  redis.call('EXPIRE', led, lttl)
end
return 1
"#;
