//! Memory and request cost of conversation state in Redis (`[state] backend = "redis"`).
//!
//! Writes N conversations through `SharedConversations` (each: a system prompt and a first
//! user message observed, one answer recorded in the ledger, a conversation id; every 10th
//! blocked, so its lineage holds a fingerprint and a word set), prints Redis's
//! `used_memory` growth per conversation and per 100,000, then times `observe` of a
//! growing six-message conversation against the in-process store and against Redis.
//! Use an empty database; needs `redis-cli` for `INFO memory`.
//!
//! ```text
//! redis-server --port 6391 --save '' --appendonly no &
//! cargo run --release -p rampart-conversation --example redis_conversations -- redis://127.0.0.1:6391/0 100000
//! ```

use rampart_conversation::{
    ConversationStore, LedgerOptions, SharedConversations, StoreOptions, TurnVerdict,
};
use rampart_core::{Action, Role};
use rampart_state::{RedisConfig, RedisStore, SharedStore};
use std::sync::Arc;
use std::time::Instant;

fn used_memory(url: &str) -> u64 {
    let out = std::process::Command::new("redis-cli")
        .args(["-u", url, "INFO", "memory"])
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .expect("usage: redis_conversations REDIS_URL [N]");
    let n: u64 = args.next().map_or(100_000, |v| v.parse().expect("N"));
    let state: Arc<dyn SharedStore> = Arc::new(
        RedisStore::open(&RedisConfig {
            url: Some(url.clone()),
            ..RedisConfig::default()
        })
        .expect("store"),
    );
    let options = StoreOptions {
        max_entries: 10_000_000,
        ..StoreOptions::default()
    };
    let ledger = LedgerOptions {
        max_entries: 10_000_000,
        ..LedgerOptions::default()
    };
    let key = b"measurement key";
    let shared = SharedConversations::new(state, key, options.clone(), ledger).expect("shared");
    let sys = "You are a helpful assistant for a gardening shop.";
    let allow = TurnVerdict {
        risk: 0.1,
        action: Action::Allow,
        refusal: false,
    };
    let block = TurnVerdict {
        risk: 0.95,
        action: Action::Block,
        refusal: false,
    };
    let before = used_memory(&url);
    for i in 0..n {
        let first = format!("conversation {i}: how do I plan a small vegetable garden?");
        let m = [(Role::System, sys), (Role::User, first.as_str())];
        let verdict = if i % 10 == 0 { block } else { allow };
        let id = format!("conv-{i}");
        shared
            .observe(Some("agent"), &m, Some(&id), verdict)
            .expect("observe");
        shared
            .record(Some("agent"), &m, "Start with lettuce, beans and tomatoes.")
            .expect("record");
    }
    let grown = used_memory(&url).saturating_sub(before);
    println!(
        "{n} conversations (2 nodes, 1 hint, 1 ledger entry each; 1 in 10 blocked): {} bytes each, {:.1} MiB per 100,000",
        grown / n,
        grown as f64 / n as f64 * 100_000.0 / 1_048_576.0
    );

    // Request cost: one observe per call of a growing conversation, memory vs Redis.
    let local = ConversationStore::new(options, key).expect("local");
    let texts: Vec<String> = (0..6)
        .map(|t| format!("turn {t} of a conversation"))
        .collect();
    for (name, run) in [
        (
            "memory",
            Box::new(|m: &[(Role, &str)]| {
                local
                    .tenant(Some("agent"))
                    .observe(m, None, allow)
                    .map(drop)
                    .expect("observe")
            }) as Box<dyn Fn(&[(Role, &str)])>,
        ),
        (
            "redis",
            Box::new(|m: &[(Role, &str)]| {
                shared
                    .observe(Some("bench"), m, None, allow)
                    .map(drop)
                    .expect("observe")
            }),
        ),
    ] {
        let mut lat = Vec::new();
        let started = Instant::now();
        for c in 0..3_000 {
            let first = format!("bench conversation {c}");
            let mut m: Vec<(Role, &str)> = vec![(Role::System, sys), (Role::User, &first)];
            for t in &texts {
                m.push((Role::Assistant, "ok"));
                m.push((Role::User, t));
                let s = Instant::now();
                run(&m);
                lat.push(s.elapsed().as_secs_f64() * 1e6);
            }
        }
        let total = started.elapsed().as_secs_f64();
        let calls = lat.len();
        println!(
            "{name}: {calls} observes (2 to 14 messages), {:.0} per second on one thread, p50 {:.0} µs, p99 {:.0} µs",
            calls as f64 / total,
            percentile(&mut lat, 0.5),
            percentile(&mut lat, 0.99)
        );
    }
}
