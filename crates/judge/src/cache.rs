//! The verdict cache: SQLite (WAL), content-addressed, with a TTL and a row cap; or, for
//! replicas, the shared state ([`SharedCache`]: Redis with `[state] backend = "redis"`).
//!
//! An entry holds what a report needs to replay the verdict: the verdict with its already
//! redacted explanation and evidence (spans, no quotes), when it was made, and the original
//! call's tokens and cost. It never holds input text; the key is a keyed hash. Only ok
//! verdicts are stored, never failures.

use crate::options::CacheOptions;
use crate::report::JudgeVerdict;
use rusqlite::{Connection, OptionalExtension, params};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// Why the cache could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The file or its directory could not be created or opened.
    #[error("judge cache {path}: {message}")]
    Open {
        /// The path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A query failed.
    #[error("judge cache: {0}")]
    Sql(#[from] rusqlite::Error),
    /// A stored verdict does not decode.
    #[error("judge cache: stored verdict does not decode: {0}")]
    Decode(String),
    /// The shared state failed (Redis down, a timeout).
    #[error("judge cache (shared): {0}")]
    Shared(String),
}

/// Where verdicts are cached: the SQLite [`Cache`] (one file per process, the default) or
/// the [`SharedCache`] (the service's shared state, one cache for every replica). Keys are
/// keyed hashes ([`hash_key`]); entries hold the redacted verdict, never input text.
pub trait VerdictCache: Send + Sync + std::fmt::Debug {
    /// The live entry for `key`, counting a hit or a miss.
    fn get(&self, key: &str) -> Result<Option<Entry>, CacheError>;
    /// Stores an ok verdict under `key` (replacing an older one).
    fn put(&self, key: &str, entry: &Entry) -> Result<(), CacheError>;
    /// Hit, miss and store counts since the cache was opened.
    fn stats(&self) -> CacheStats;
}

/// The key of the keyed hash that names entries, from the options' `key_env` (the same
/// material gives the same key: replicas sharing a cache must share it).
pub fn hash_key(opts: &CacheOptions) -> [u8; 32] {
    let material = std::env::var(&opts.key_env)
        .ok()
        .filter(|k| !k.is_empty())
        .unwrap_or_default();
    blake3::derive_key("rampart judge cache v1", material.as_bytes())
}

/// A cached verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The verdict (redacted).
    pub verdict: JudgeVerdict,
    /// Unix seconds when it was made.
    pub created_at: u64,
    /// The original call's input tokens.
    pub input_tokens: u64,
    /// The original call's output tokens.
    pub output_tokens: u64,
    /// The original call's cost.
    pub cost_usd: Option<f64>,
    /// Score mode: the calibrated P(attack) the verdict was made from (a hit gives it back
    /// as the layer's score, so whatever reads the judge's score, such as a combine layer,
    /// reads the same on a replay). `None` for a structured verdict and for entries stored
    /// before this was kept.
    pub score: Option<f32>,
    /// Score mode: the uncalibrated log-odds of the answer token.
    pub score_logit: Option<f32>,
}

/// Hit and miss counters since the layer was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found a live entry.
    pub hits: u64,
    /// Lookups that found none (in replay mode too).
    pub misses: u64,
    /// Verdicts stored.
    pub stores: u64,
    /// Reads or writes that failed (a failed read counts as a miss too).
    pub errors: u64,
}

/// How often (in stores) the row cap is enforced.
const CAP_EVERY: u64 = 64;

/// An open cache.
#[derive(Debug)]
pub struct Cache {
    conn: Mutex<Connection>,
    key: [u8; 32],
    ttl_s: u64,
    max_rows: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    stores: AtomicU64,
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn as_i64(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

impl Cache {
    /// Opens (creating when needed) the cache the options describe, and deletes expired
    /// entries.
    pub fn open(opts: &CacheOptions) -> Result<Cache, CacheError> {
        let file = opts.resolved_path();
        let path = file.display().to_string();
        let open_err = |message: String| CacheError::Open {
            path: path.clone(),
            message,
        };
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| open_err(e.to_string()))?;
        }
        rampart_core::private_file::create_private(&file).map_err(|e| open_err(e.to_string()))?;
        let conn = Connection::open(&file).map_err(|e| open_err(e.to_string()))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // WAL lets several processes (an eval and a server) read while one writes.
        let _mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS verdicts (
                key TEXT PRIMARY KEY,
                verdict TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                input_tokens INTEGER NOT NULL,
                output_tokens INTEGER NOT NULL,
                cost_usd REAL
            );
            CREATE INDEX IF NOT EXISTS verdicts_created ON verdicts(created_at);",
        )?;
        // Score mode's probability and logit, added after the first release: a file made
        // before gets the two columns (its rows read as having no score).
        let has_score: bool = conn.query_row(
            "SELECT count(*) FROM pragma_table_info('verdicts') WHERE name = 'score'",
            [],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )?;
        if !has_score {
            conn.execute_batch(
                "ALTER TABLE verdicts ADD COLUMN score REAL;
                 ALTER TABLE verdicts ADD COLUMN score_logit REAL;",
            )?;
        }
        let cache = Cache {
            conn: Mutex::new(conn),
            key: hash_key(opts),
            ttl_s: opts.ttl_s,
            max_rows: opts.max_rows.max(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            stores: AtomicU64::new(0),
        };
        cache.evict()?;
        Ok(cache)
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A keyed hasher for cache keys.
    pub fn hasher(&self) -> blake3::Hasher {
        blake3::Hasher::new_keyed(&self.key)
    }

    /// Deletes expired entries and the oldest beyond the row cap.
    pub fn evict(&self) -> Result<(), CacheError> {
        let conn = self.conn();
        let cutoff = now_s().saturating_sub(self.ttl_s);
        conn.execute(
            "DELETE FROM verdicts WHERE created_at < ?1",
            params![as_i64(cutoff)],
        )?;
        let n: i64 = conn.query_row("SELECT count(*) FROM verdicts", [], |r| r.get(0))?;
        let over = n - as_i64(self.max_rows);
        if over > 0 {
            conn.execute(
                "DELETE FROM verdicts WHERE key IN \
                 (SELECT key FROM verdicts ORDER BY created_at ASC LIMIT ?1)",
                params![over],
            )?;
        }
        Ok(())
    }

    /// The live entry for `key`, counting a hit or a miss.
    pub fn get(&self, key: &str) -> Result<Option<Entry>, CacheError> {
        let cutoff = now_s().saturating_sub(self.ttl_s);
        let row = self
            .conn()
            .query_row(
                "SELECT verdict, created_at, input_tokens, output_tokens, cost_usd, score, \
                 score_logit FROM verdicts WHERE key = ?1 AND created_at >= ?2",
                params![key, as_i64(cutoff)],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, Option<f64>>(4)?,
                        r.get::<_, Option<f64>>(5)?,
                        r.get::<_, Option<f64>>(6)?,
                    ))
                },
            )
            .optional()?;
        let Some((verdict, created, inp, out, cost, score, logit)) = row else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        };
        let verdict: JudgeVerdict =
            serde_json::from_str(&verdict).map_err(|e| CacheError::Decode(e.to_string()))?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Ok(Some(Entry {
            verdict,
            created_at: u64::try_from(created).unwrap_or(0),
            input_tokens: u64::try_from(inp).unwrap_or(0),
            output_tokens: u64::try_from(out).unwrap_or(0),
            cost_usd: cost,
            score: score.map(|s| s as f32),
            score_logit: logit.map(|s| s as f32),
        }))
    }

    /// Stores an ok verdict under `key` (replacing an older one).
    pub fn put(&self, key: &str, entry: &Entry) -> Result<(), CacheError> {
        let verdict =
            serde_json::to_string(&entry.verdict).map_err(|e| CacheError::Decode(e.to_string()))?;
        self.conn().execute(
            "INSERT OR REPLACE INTO verdicts \
             (key, verdict, created_at, input_tokens, output_tokens, cost_usd, score, \
             score_logit) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                key,
                verdict,
                as_i64(entry.created_at),
                as_i64(entry.input_tokens),
                as_i64(entry.output_tokens),
                entry.cost_usd,
                entry.score.map(f64::from),
                entry.score_logit.map(f64::from)
            ],
        )?;
        let n = self.stores.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(CAP_EVERY) {
            self.evict()?;
        }
        Ok(())
    }

    /// Hit, miss and store counts since the cache was opened.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            stores: self.stores.load(Ordering::Relaxed),
            errors: 0,
        }
    }

    /// Number of entries stored (live or not yet evicted).
    pub fn len(&self) -> Result<u64, CacheError> {
        let n: i64 = self
            .conn()
            .query_row("SELECT count(*) FROM verdicts", [], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Whether no entry is stored.
    pub fn is_empty(&self) -> Result<bool, CacheError> {
        Ok(self.len()? == 0)
    }

    /// A timestamp for a new entry.
    pub fn now() -> u64 {
        now_s()
    }
}

impl VerdictCache for Cache {
    fn get(&self, key: &str) -> Result<Option<Entry>, CacheError> {
        Cache::get(self, key)
    }
    fn put(&self, key: &str, entry: &Entry) -> Result<(), CacheError> {
        Cache::put(self, key, entry)
    }
    fn stats(&self) -> CacheStats {
        Cache::stats(self)
    }
}

/// The key family of the shared cache's entries (under the state's key prefix):
/// `jc:{64 hex digits}`.
pub const SHARED_KEY_PREFIX: &str = "jc:";
/// The sorted set of the shared cache's keys by expiry, that bounds it to `max_rows`.
pub const SHARED_INDEX_KEY: &str = "jc_index";

/// The verdict cache in the service's shared state ([`rampart_state::SharedStore`]): with
/// `[state] backend = "redis"` every replica reads and writes one cache. An entry is one
/// string key `jc:{key}` holding the entry as compact JSON (the redacted verdict, its time
/// and usage), set with the cache's TTL in Redis (`PX`); a sorted set `jc_index` of the
/// keys by expiry bounds the cache to `max_rows` entries per deployment (the
/// earliest-expiring go first).
///
/// The cache is an optimisation, not a security decision: a read that fails is a miss
/// (the judge is asked) and a write that fails is counted ([`CacheStats::errors`]); the
/// request's decision never waits on it. This is the deliberate exception to failing closed.
#[derive(Debug)]
pub struct SharedCache {
    store: std::sync::Arc<dyn rampart_state::SharedStore>,
    ttl_ms: u64,
    max_rows: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    stores: AtomicU64,
    errors: AtomicU64,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct SharedEntry {
    v: JudgeVerdict,
    t: u64,
    i: u64,
    o: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    c: Option<f64>,
    /// Score mode's probability and logit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    s: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    l: Option<f32>,
}

impl SharedCache {
    /// A cache in `store` with the TTL and cap of `opts` (its path and mode are not used
    /// here: the layer keeps the mode).
    pub fn new(store: std::sync::Arc<dyn rampart_state::SharedStore>, opts: &CacheOptions) -> Self {
        SharedCache {
            store,
            ttl_ms: opts.ttl_s.saturating_mul(1000).max(1),
            max_rows: opts.max_rows.max(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            stores: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// The store's key of an entry.
    pub fn store_key(key: &str) -> String {
        format!("{SHARED_KEY_PREFIX}{key}")
    }

    fn failed(&self, e: impl std::fmt::Display) -> CacheError {
        self.errors.fetch_add(1, Ordering::Relaxed);
        CacheError::Shared(e.to_string())
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl VerdictCache for SharedCache {
    fn get(&self, key: &str) -> Result<Option<Entry>, CacheError> {
        let op = rampart_state::Op::Get {
            key: Self::store_key(key),
        };
        let got = self
            .store
            .execute(&op)
            .map_err(|e| e.chain())
            .and_then(|r| r.value(self.store.backend(), &op).map_err(|e| e.chain()));
        let value = match got {
            Ok(v) => v,
            Err(e) => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                return Err(self.failed(e));
            }
        };
        let Some(value) = value else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        };
        let e: SharedEntry = match serde_json::from_str(&value) {
            Ok(e) => e,
            Err(err) => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                self.errors.fetch_add(1, Ordering::Relaxed);
                return Err(CacheError::Decode(err.to_string()));
            }
        };
        self.hits.fetch_add(1, Ordering::Relaxed);
        Ok(Some(Entry {
            verdict: e.v,
            created_at: e.t,
            input_tokens: e.i,
            output_tokens: e.o,
            cost_usd: e.c,
            score: e.s,
            score_logit: e.l,
        }))
    }

    fn put(&self, key: &str, entry: &Entry) -> Result<(), CacheError> {
        let value = serde_json::to_string(&SharedEntry {
            v: entry.verdict.clone(),
            t: entry.created_at,
            i: entry.input_tokens,
            o: entry.output_tokens,
            c: entry.cost_usd,
            s: entry.score,
            l: entry.score_logit,
        })
        .map_err(|e| CacheError::Decode(e.to_string()))?;
        let op = rampart_state::Op::CachePut {
            key: Self::store_key(key),
            index: SHARED_INDEX_KEY.into(),
            value,
            ttl_ms: self.ttl_ms,
            cap: self.max_rows,
            now_ms: now_ms(),
        };
        self.store
            .execute(&op)
            .map_err(|e| self.failed(e.chain()))?;
        self.stores.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            stores: self.stores.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::report::IntentLabel;

    fn entry(created_at: u64) -> Entry {
        Entry {
            verdict: JudgeVerdict {
                intent_label: IntentLabel::Suspicious,
                confidence: 0.7,
                explanation: "role-play framing".into(),
                evidence: vec![],
            },
            created_at,
            input_tokens: 120,
            output_tokens: 30,
            cost_usd: Some(0.001),
            score: Some(0.7),
            score_logit: Some(0.25),
        }
    }

    #[test]
    fn round_trip_counts_hits_and_misses() {
        let dir = tempfile::tempdir().unwrap();
        let c = Cache::open(&CacheOptions::at(dir.path().join("sub/c.sqlite"))).unwrap();
        assert_eq!(c.get("k").unwrap(), None);
        c.put("k", &entry(Cache::now())).unwrap();
        let got = c.get("k").unwrap().unwrap();
        assert_eq!(got.verdict.explanation, "role-play framing");
        assert_eq!((got.input_tokens, got.output_tokens), (120, 30));
        assert_eq!(
            c.stats(),
            CacheStats {
                hits: 1,
                misses: 1,
                stores: 1,
                errors: 0
            }
        );
    }

    #[test]
    fn expired_entries_are_misses_and_evicted_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = CacheOptions::at(dir.path().join("c.sqlite"));
        opts.ttl_s = 60;
        let c = Cache::open(&opts).unwrap();
        c.put("old", &entry(Cache::now() - 3600)).unwrap();
        c.put("new", &entry(Cache::now())).unwrap();
        assert_eq!(c.get("old").unwrap(), None);
        drop(c);
        let c = Cache::open(&opts).unwrap();
        assert_eq!(c.len().unwrap(), 1);
        assert!(c.get("new").unwrap().is_some());
    }

    #[test]
    fn a_relative_path_is_resolved_against_dir_env() {
        let mut o = CacheOptions::at("judge.sqlite");
        assert_eq!(o.resolved_path(), std::path::PathBuf::from("judge.sqlite"));
        o.dir_env = Some("RAMPART_TEST_JUDGE_DIR_SURELY_UNSET".into());
        assert_eq!(
            o.resolved_path(),
            std::path::PathBuf::from("data/judge.sqlite")
        );
        o.path = "/abs/judge.sqlite".into();
        assert_eq!(
            o.resolved_path(),
            std::path::PathBuf::from("/abs/judge.sqlite")
        );
    }

    #[test]
    fn row_cap_drops_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = CacheOptions::at(dir.path().join("c.sqlite"));
        opts.max_rows = 3;
        let c = Cache::open(&opts).unwrap();
        let t = Cache::now();
        for i in 0..5u64 {
            c.put(&format!("k{i}"), &entry(t - 10 + i)).unwrap();
        }
        c.evict().unwrap();
        assert_eq!(c.len().unwrap(), 3);
        assert!(c.get("k0").unwrap().is_none());
        assert!(c.get("k4").unwrap().is_some());
    }

    #[test]
    fn shared_across_threads() {
        let dir = tempfile::tempdir().unwrap();
        let c = std::sync::Arc::new(
            Cache::open(&CacheOptions::at(dir.path().join("c.sqlite"))).unwrap(),
        );
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for j in 0..10 {
                        let k = format!("{i}-{j}");
                        c.put(&k, &entry(Cache::now())).unwrap();
                        assert!(c.get(&k).unwrap().is_some());
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(c.len().unwrap(), 40);
    }
}
