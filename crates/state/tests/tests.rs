//! The same sequences against the in-process store and a real `redis-server` (the
//! `redis::` tests are ignored by default: `.ci/run` installs Redis and runs them with
//! `cargo test -p rampart-state -- --ignored`).

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use rampart_state::{
    ApprovalOutcome, ApprovalState, ApprovalStep, MemoryStore, Op, RedisConfig, RedisStore, Reply,
    SharedStore, StateError,
};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn bucket(key: &str, take: f64, need: f64, force: bool, now: u64) -> Op {
    Op::Bucket {
        key: key.into(),
        capacity: 3.0,
        per_s: 1.0,
        take,
        need,
        force,
        now_ms: now,
    }
}

fn allowed(s: &dyn SharedStore, op: &Op) -> (bool, u64) {
    match s.execute(op).unwrap() {
        Reply::Bucket {
            allowed,
            retry_after_ms,
            ..
        } => (allowed, retry_after_ms),
        other => panic!("{other:?}"),
    }
}

/// Buckets: a new bucket is full, takes stop at empty, refill by the callers' clock, peeks
/// take nothing, forced takes count failures down to zero.
fn buckets(s: &dyn SharedStore) {
    let t = 1_000_000;
    for _ in 0..3 {
        assert!(allowed(s, &bucket("b", 1.0, 1.0, false, t)).0);
    }
    let (ok, retry) = allowed(s, &bucket("b", 1.0, 1.0, false, t));
    assert!(!ok);
    assert_eq!(retry, 1000);
    assert!(
        allowed(s, &bucket("b", 1.0, 1.0, false, t + 1000)).0,
        "refilled one"
    );
    assert!(
        !allowed(s, &bucket("b", 0.0, 1.0, false, t + 1000)).0,
        "peek sees it used"
    );
    // Forced: failures count even with nothing left, and never below zero.
    for _ in 0..5 {
        allowed(s, &bucket("f", 1.0, 1.0, true, t));
    }
    let (ok, retry) = allowed(s, &bucket("f", 0.0, 1.0, false, t));
    assert!(!ok);
    assert_eq!(retry, 1000, "zero tokens, not negative");
}

fn new_approval(s: &dyn SharedStore, key: &str, who: &str) -> bool {
    s.execute(&Op::ApprovalNew {
        key: key.into(),
        record: r#"{"tool":"send_email","arguments":{"to":[],"x":{}}}"#.into(),
        requested_by: who.into(),
        ttl_ms: 60_000,
    })
    .unwrap()
        == Reply::Done(true)
}

fn step(s: &dyn SharedStore, key: &str, step: ApprovalStep) -> ApprovalOutcome {
    match s
        .execute(&Op::Approval {
            key: key.into(),
            step,
        })
        .unwrap()
    {
        Reply::Approval(o) => o,
        other => panic!("{other:?}"),
    }
}

/// Approvals: no self-approval, decided once, redeemed once, denied never; the record
/// comes back byte for byte (empty arrays and objects too).
fn approvals(s: &dyn SharedStore) {
    assert!(new_approval(s, "a1", "agent"));
    assert!(!new_approval(s, "a1", "agent"), "created once");
    assert_eq!(
        step(s, "a1", ApprovalStep::Redeem),
        ApprovalOutcome::NotApproved
    );
    assert_eq!(
        step(s, "a1", ApprovalStep::Approve { by: "agent".into() }),
        ApprovalOutcome::SelfApproval
    );
    assert_eq!(
        step(s, "a1", ApprovalStep::Approve { by: String::new() }),
        ApprovalOutcome::SelfApproval
    );
    let ApprovalOutcome::Done(rec) = step(
        s,
        "a1",
        ApprovalStep::Approve {
            by: "oncall".into(),
        },
    ) else {
        panic!("not approved")
    };
    assert_eq!(rec.state, ApprovalState::Approved);
    assert_eq!(rec.by, "oncall");
    assert_eq!(
        rec.record,
        r#"{"tool":"send_email","arguments":{"to":[],"x":{}}}"#
    );
    assert_eq!(
        step(s, "a1", ApprovalStep::Deny { by: "other".into() }),
        ApprovalOutcome::AlreadyDecided
    );
    assert!(matches!(step(s, "a1", ApprovalStep::Redeem), ApprovalOutcome::Done(r) if r.used));
    assert_eq!(step(s, "a1", ApprovalStep::Redeem), ApprovalOutcome::Used);
    assert!(new_approval(s, "a2", ""));
    assert!(matches!(
        step(
            s,
            "a2",
            ApprovalStep::Deny {
                by: "oncall".into()
            }
        ),
        ApprovalOutcome::Done(_)
    ));
    assert_eq!(step(s, "a2", ApprovalStep::Redeem), ApprovalOutcome::Denied);
    assert!(new_approval(s, "a3", "agent"));
    assert!(matches!(
        step(
            s,
            "a3",
            ApprovalStep::ForceDeny {
                by: "rampart".into()
            }
        ),
        ApprovalOutcome::Done(_)
    ));
    assert_eq!(step(s, "a3", ApprovalStep::Redeem), ApprovalOutcome::Denied);
    assert_eq!(
        step(s, "nope", ApprovalStep::Redeem),
        ApprovalOutcome::Unknown
    );
    match s.execute(&Op::ApprovalGet { key: "a2".into() }).unwrap() {
        Reply::Record(Some(r)) => assert_eq!(r.state, ApprovalState::Denied),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.execute(&Op::ApprovalGet { key: "nope".into() }).unwrap(),
        Reply::Record(None)
    );
}

/// Values and indexes: put once, take once, capped indexes drop expired members.
fn values_and_indexes(s: &dyn SharedStore) {
    let put = |k: &str, v: &str| {
        s.execute(&Op::PutNew {
            key: k.into(),
            value: v.into(),
            ttl_ms: 60_000,
        })
        .unwrap()
    };
    assert_eq!(put("g1", "one"), Reply::Done(true));
    assert_eq!(put("g1", "two"), Reply::Done(false));
    assert_eq!(
        s.execute(&Op::Get { key: "g1".into() }).unwrap(),
        Reply::Value(Some("one".into()))
    );
    assert_eq!(
        s.execute(&Op::Take { key: "g1".into() }).unwrap(),
        Reply::Value(Some("one".into()))
    );
    assert_eq!(
        s.execute(&Op::Take { key: "g1".into() }).unwrap(),
        Reply::Value(None)
    );
    let now = now_ms();
    let add = |m: &str, exp: u64| {
        s.execute(&Op::IndexAdd {
            index: "idx".into(),
            member: m.into(),
            expires_ms: exp,
            cap: 2,
            now_ms: now,
        })
        .unwrap()
    };
    assert_eq!(add("old", now - 1), Reply::Done(true));
    assert_eq!(add("m2", now + 50_000), Reply::Done(true));
    assert_eq!(
        add("m1", now + 40_000),
        Reply::Done(true),
        "the expired one made room"
    );
    assert_eq!(add("m3", now + 60_000), Reply::Done(false), "capped at 2");
    assert_eq!(
        add("m1", now + 45_000),
        Reply::Done(true),
        "a member is updated"
    );
    let live = s
        .execute(&Op::IndexLive {
            index: "idx".into(),
            now_ms: now,
            limit: 10,
        })
        .unwrap();
    assert_eq!(live, Reply::Members(vec!["m1".into(), "m2".into()]));
    assert_eq!(
        s.execute(&Op::IndexRemove {
            index: "idx".into(),
            member: "m1".into()
        })
        .unwrap(),
        Reply::Done(true)
    );
    assert!(s.ping().is_ok());
}

#[test]
fn memory_store_semantics() {
    let s = MemoryStore::new();
    buckets(&s);
    approvals(&s);
    values_and_indexes(&s);
    cache_puts(&s);
}

fn cache_put(key: &str, value: &str, ttl_ms: u64, cap: u64) -> Op {
    Op::CachePut {
        key: key.into(),
        index: "ci".into(),
        value: value.into(),
        ttl_ms,
        cap,
        now_ms: now_ms(),
    }
}

fn get(s: &dyn SharedStore, key: &str) -> Option<String> {
    match s.execute(&Op::Get { key: key.into() }).unwrap() {
        Reply::Value(v) => v,
        other => panic!("{other:?}"),
    }
}

/// Cache puts: a value replaces the older one, beyond the cap the earliest-expiring key
/// goes, and a key expires with its TTL.
fn cache_puts(s: &dyn SharedStore) {
    assert_eq!(
        s.execute(&cache_put("c1", "a", 60_000, 2)).unwrap(),
        Reply::Done(true)
    );
    s.execute(&cache_put("c1", "b", 60_000, 2)).unwrap();
    assert_eq!(get(s, "c1").as_deref(), Some("b"));
    s.execute(&cache_put("c2", "c", 60_001, 2)).unwrap();
    s.execute(&cache_put("c3", "d", 60_002, 2)).unwrap();
    assert_eq!(get(s, "c1"), None, "beyond the cap the earliest goes");
    assert_eq!(get(s, "c2").as_deref(), Some("c"));
    assert_eq!(get(s, "c3").as_deref(), Some("d"));
    s.execute(&cache_put("c4", "e", 50, 10)).unwrap();
    assert_eq!(get(s, "c4").as_deref(), Some("e"));
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(get(s, "c4"), None, "expired");
}

mod redis_server;
use redis_server::RedisServer;

fn redis_store(url: &str, prefix: &str) -> RedisStore {
    RedisStore::open(&RedisConfig {
        url: Some(url.into()),
        key_prefix: prefix.into(),
        ..RedisConfig::default()
    })
    .unwrap()
}

mod redis {
    use super::*;

    #[test]
    #[ignore = "needs redis-server: run by .ci/run"]
    fn redis_store_has_the_memory_stores_semantics() {
        let server = RedisServer::start();
        let s = redis_store(&server.url, "t1:");
        buckets(&s);
        approvals(&s);
        values_and_indexes(&s);
        cache_puts(&s);
        // Another prefix is another namespace.
        let other = redis_store(&server.url, "t2:");
        assert_eq!(
            other
                .execute(&Op::ApprovalGet { key: "a1".into() })
                .unwrap(),
            Reply::Record(None)
        );
    }

    #[test]
    #[ignore = "needs redis-server: run by .ci/run"]
    fn a_token_redeems_once_across_many_threads_and_connections() {
        let server = RedisServer::start();
        let stores: Vec<RedisStore> = (0..4).map(|_| redis_store(&server.url, "race:")).collect();
        assert!(new_approval(&stores[0], "t", "agent"));
        assert!(matches!(
            step(
                &stores[1],
                "t",
                ApprovalStep::Approve {
                    by: "oncall".into()
                }
            ),
            ApprovalOutcome::Done(_)
        ));
        let wins: usize = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..32)
                .map(|i| {
                    let s = &stores[i % stores.len()];
                    sc.spawn(move || {
                        matches!(step(s, "t", ApprovalStep::Redeem), ApprovalOutcome::Done(_))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| usize::from(h.join().unwrap()))
                .sum()
        });
        assert_eq!(wins, 1);
    }

    #[test]
    #[ignore = "needs redis-server: run by .ci/run"]
    fn an_unreachable_redis_is_an_error_within_the_timeout() {
        let server = RedisServer::start();
        let url = server.url.clone();
        drop(server);
        let s = RedisStore::open(&RedisConfig {
            url: Some(url),
            connect_timeout_ms: 200,
            ..RedisConfig::default()
        })
        .unwrap();
        let t = Instant::now();
        let e = s.ping().unwrap_err();
        assert!(matches!(e, StateError::Unavailable { .. }), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    }
}
