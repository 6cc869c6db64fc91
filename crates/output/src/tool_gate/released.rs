//! What the gate itself let through, per conversation: the tools it released and the highest
//! injection score it saw, so rate limits and flow rules count what the server saw, not what
//! the client reports (issue 35: 45 `http_get` calls under a limit of 40 were all allowed
//! unless the client sent its own `tools_called`). Client-supplied context only adds to it.
//!
//! Keyed by the call's binding (API key and conversation id): a call without a conversation
//! id counts in one conversation per key, the strict reading. Bounded: at most
//! [`MAX_CONVERSATIONS`] conversations (each key at most its share), [`MAX_TOOLS_PER_CONVERSATION`]
//! tools each, forgotten after [`TTL_MS`] without a call; a key over its share forgets its
//! own least recently used conversation, never another key's.

use rampart_tools::CallContext;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// Conversations remembered at once.
pub const MAX_CONVERSATIONS: usize = 100_000;
/// Tools remembered per conversation (a rate limit above this never binds).
pub const MAX_TOOLS_PER_CONVERSATION: usize = 10_000;
/// A conversation is forgotten this long after its last call (one day).
pub const TTL_MS: u64 = 86_400_000;

#[derive(Debug, Default)]
struct Conversation {
    tools: Vec<String>,
    max_score: Option<f32>,
    last_ms: u64,
    tick: u64,
    key: String,
}

#[derive(Debug, Default)]
struct Inner {
    by_binding: HashMap<String, Conversation>,
    lru: BTreeMap<u64, String>,
    per_key: HashMap<String, BTreeMap<u64, String>>,
    next_tick: u64,
}

impl Inner {
    fn remove(&mut self, binding: &str) {
        if let Some(c) = self.by_binding.remove(binding) {
            self.lru.remove(&c.tick);
            if let Some(k) = self.per_key.get_mut(&c.key) {
                k.remove(&c.tick);
                if k.is_empty() {
                    self.per_key.remove(&c.key);
                }
            }
        }
    }
}

/// The released calls of every conversation. `Send + Sync`.
#[derive(Debug)]
pub struct ReleasedCalls {
    per_key: usize,
    inner: Mutex<Inner>,
}

impl ReleasedCalls {
    /// A ledger where each API key holds at most `per_key` conversations (and all together
    /// at most [`MAX_CONVERSATIONS`]).
    pub fn new(per_key: usize) -> Self {
        Self {
            per_key: per_key.clamp(1, MAX_CONVERSATIONS),
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The context a decision reads: what the client sent, plus every tool released in the
    /// conversation (appended, so counts only grow) and the higher of the two injection
    /// scores.
    pub fn merged(&self, binding: &str, mut ctx: CallContext, now_ms: u64) -> CallContext {
        let inner = self.lock();
        if let Some(c) = inner
            .by_binding
            .get(binding)
            .filter(|c| now_ms.saturating_sub(c.last_ms) < TTL_MS)
        {
            // The server's record is the floor: the client's list counts only where it
            // reports more calls of a tool than the server released.
            let mut counts: HashMap<&str, usize> = HashMap::new();
            for t in &ctx.tools_called {
                *counts.entry(t.as_str()).or_default() += 1;
            }
            let mut extra = Vec::new();
            let mut seen: HashMap<&str, usize> = HashMap::new();
            for t in &c.tools {
                let n = seen.entry(t.as_str()).or_default();
                *n += 1;
                if *n > counts.get(t.as_str()).copied().unwrap_or(0) {
                    extra.push(t.clone());
                }
            }
            ctx.tools_called.extend(extra);
            ctx.max_injection_score = match (ctx.max_injection_score, c.max_score) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        ctx
    }

    /// Records what the server saw in a conversation: the injection score of its tool
    /// results (the proxy scans them), raising the conversation's highest.
    pub fn note_score(&self, key: &str, binding: &str, score: f32, now_ms: u64) {
        if !score.is_finite() {
            return;
        }
        self.with(key, binding, now_ms, |c| {
            c.max_score = Some(c.max_score.map_or(score, |s| s.max(score)));
        });
    }

    /// Records a call the server released (ALLOW) in a conversation.
    pub fn note_released(&self, key: &str, binding: &str, tool: &str, now_ms: u64) {
        self.with(key, binding, now_ms, |c| {
            if c.tools.len() < MAX_TOOLS_PER_CONVERSATION {
                c.tools.push(tool.to_string());
            }
        });
    }

    fn with(&self, key: &str, binding: &str, now_ms: u64, f: impl FnOnce(&mut Conversation)) {
        let mut inner = self.lock();
        // Expired conversations leave from the front of the LRU.
        while let Some((_, b)) = inner.lru.first_key_value() {
            let b = b.clone();
            let expired = inner
                .by_binding
                .get(&b)
                .is_none_or(|c| now_ms.saturating_sub(c.last_ms) >= TTL_MS);
            if !expired {
                break;
            }
            inner.remove(&b);
        }
        let tick = inner.next_tick;
        inner.next_tick += 1;
        let old_tick = inner.by_binding.get(binding).map(|c| c.tick);
        if let Some(t) = old_tick {
            inner.lru.remove(&t);
            if let Some(k) = inner.per_key.get_mut(key) {
                k.remove(&t);
            }
        }
        let c = inner
            .by_binding
            .entry(binding.to_string())
            .or_insert_with(|| Conversation {
                key: key.to_string(),
                ..Conversation::default()
            });
        c.tick = tick;
        c.last_ms = now_ms;
        f(c);
        inner.lru.insert(tick, binding.to_string());
        inner
            .per_key
            .entry(key.to_string())
            .or_default()
            .insert(tick, binding.to_string());
        // Over the key's share: its own least recently used conversation goes.
        while inner
            .per_key
            .get(key)
            .is_some_and(|k| k.len() > self.per_key)
        {
            let Some(b) = inner
                .per_key
                .get(key)
                .and_then(|k| k.first_key_value().map(|(_, b)| b.clone()))
            else {
                break;
            };
            inner.remove(&b);
        }
        while inner.by_binding.len() > MAX_CONVERSATIONS {
            let Some(b) = inner.lru.first_key_value().map(|(_, b)| b.clone()) else {
                break;
            };
            inner.remove(&b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_record_is_a_floor_the_client_can_only_raise() {
        let r = ReleasedCalls::new(10);
        for _ in 0..3 {
            r.note_released("k", "k/c", "http_get", 1);
        }
        r.note_score("k", "k/c", 0.7, 1);
        // The client reports nothing: the server's three calls and score count.
        let ctx = r.merged("k/c", CallContext::default(), 2);
        assert_eq!(ctx.tools_called.len(), 3);
        assert_eq!(ctx.max_injection_score, Some(0.7));
        // The client reports more: its count stands.
        let client = CallContext {
            tools_called: vec!["http_get".into(); 5],
            max_injection_score: Some(0.9),
            ..CallContext::default()
        };
        let ctx = r.merged("k/c", client, 2);
        assert_eq!(ctx.tools_called.len(), 5);
        assert_eq!(ctx.max_injection_score, Some(0.9));
        // Another conversation, or past the TTL: nothing known.
        assert!(
            r.merged("k/d", CallContext::default(), 2)
                .tools_called
                .is_empty()
        );
        assert!(
            r.merged("k/c", CallContext::default(), 2 + TTL_MS)
                .tools_called
                .is_empty()
        );
    }

    #[test]
    fn a_key_over_its_share_forgets_only_its_own_conversations() {
        let r = ReleasedCalls::new(2);
        r.note_released("victim", "victim/c", "t", 1);
        for i in 0..10 {
            r.note_released("greedy", &format!("greedy/{i}"), "t", 2 + i);
        }
        assert_eq!(
            r.merged("victim/c", CallContext::default(), 20)
                .tools_called
                .len(),
            1
        );
        assert_eq!(
            r.merged("greedy/0", CallContext::default(), 20)
                .tools_called
                .len(),
            0
        );
        assert_eq!(
            r.merged("greedy/9", CallContext::default(), 20)
                .tools_called
                .len(),
            1
        );
    }
}
