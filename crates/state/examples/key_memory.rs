//! Memory Redis spends per key family: writes N entries of each family the service writes
//! (rate-limit and failed-login buckets, approval records with their two index entries,
//! break-glass grants) through [`RedisStore`], and prints Redis's `used_memory` growth per
//! family and per 100,000 entries. Use an empty database (it flushes nothing, but counts
//! only growth).
//!
//! ```text
//! redis-server --port 6390 --save '' --appendonly no &
//! cargo run --release -p rampart-state --example key_memory -- redis://127.0.0.1:6390/0 100000
//! ```

use rampart_state::{Op, RedisConfig, RedisStore, SharedStore};

fn used_memory(url: &str) -> u64 {
    let client = redis::Client::open(url).expect("url");
    let mut con = client.get_connection().expect("connect");
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut con)
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("usage: key_memory REDIS_URL [N]");
    let n: u64 = args.next().map_or(100_000, |v| v.parse().expect("N"));
    let store = RedisStore::open(&RedisConfig {
        url: Some(url.clone()),
        ..RedisConfig::default()
    })
    .expect("store");
    let now = 1_800_000_000_000u64;
    // A typical approval record: a tool call with a path argument (what approvers see).
    let record = r#"{"tool":"delete_file","arguments":{"path":"/srv/app/docs/old-release-notes.md"},"arguments_hash":"0f3c5e9a1b2d4c6e8f0a1b2c3d4e5f60","conversation":"conv-8d1f2a","requested_by":"agent","issued_ms":1800000000000,"expires_ms":1800000600000}"#;
    let grant = r#"{"id":"bg_0123456789abcdef01234567","scope":{"tools":["transfer_funds"],"conversation":"conv-1","caller":null,"override_arguments":false},"granted_by":"ops","created_ms":1800000000000,"expires_ms":1800003600000,"reason":"payroll run stuck","incident":"INC-4242"}"#;
    type Family = (&'static str, Box<dyn Fn(u64) -> Vec<Op>>);
    let families: Vec<Family> = vec![
        (
            "rate-limit bucket (rate:{key id})",
            Box::new(move |i| {
                vec![Op::Bucket {
                    key: format!("rate:key-{i}"),
                    capacity: 200.0,
                    // Slow refill so that no bucket expires during the count (the TTL is
                    // the time to refill; it does not change a bucket's size).
                    per_s: 0.001,
                    take: 1.0,
                    need: 1.0,
                    force: false,
                    now_ms: now,
                }]
            }),
        ),
        (
            "failed-login bucket (authfail:{address})",
            Box::new(move |i| {
                vec![Op::Bucket {
                    key: format!("authfail:10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255),
                    capacity: 10.0,
                    per_s: 0.001,
                    take: 1.0,
                    need: 1.0,
                    force: true,
                    now_ms: now,
                }]
            }),
        ),
        (
            "approval (appr:{id} + appr:idx + appr:req:{requester})",
            Box::new(move |i| {
                let id = format!("{:032x}", u128::from(i) * 0x9e37_79b9_7f4a_7c15);
                vec![
                    Op::IndexAdd {
                        index: "appr:idx".into(),
                        member: id.clone(),
                        expires_ms: now + 600_000,
                        cap: u64::MAX,
                        now_ms: now - 1,
                    },
                    Op::IndexAdd {
                        index: format!("appr:req:{:032x}", i % 100),
                        member: id.clone(),
                        expires_ms: now + 600_000,
                        cap: u64::MAX,
                        now_ms: now - 1,
                    },
                    Op::ApprovalNew {
                        key: format!("appr:{id}"),
                        record: record.into(),
                        requested_by: "agent".into(),
                        ttl_ms: 600_000,
                    },
                ]
            }),
        ),
        (
            "break-glass grant (bg:{id} + bg:idx)",
            Box::new(move |i| {
                let id = format!("bg_{i:024x}");
                vec![
                    Op::IndexAdd {
                        index: "bg:idx".into(),
                        member: id.clone(),
                        expires_ms: now + 3_600_000,
                        cap: u64::MAX,
                        now_ms: now - 1,
                    },
                    Op::PutNew {
                        key: format!("bg:{id}"),
                        value: grant.into(),
                        ttl_ms: 3_600_000,
                    },
                ]
            }),
        ),
    ];
    println!("| key family | entries | used_memory growth | bytes per entry | MiB per 100,000 |");
    println!("|---|---|---|---|---|");
    for (name, ops) in families {
        let before = used_memory(&url);
        for i in 0..n {
            for op in ops(i) {
                store.execute(&op).expect("op");
            }
        }
        let grown = used_memory(&url).saturating_sub(before);
        println!(
            "| {name} | {n} | {grown} B | {:.0} | {:.1} |",
            grown as f64 / n as f64,
            grown as f64 / n as f64 * 100_000.0 / 1_048_576.0
        );
    }
}
