//! Audit writer cost: appends `--records N` records (shaped like the service's: a request id,
//! a keyed hash, two layer timings, a finding on one record in ten) from `--concurrency K`
//! tasks that each wait for their commit before appending the next (as request handlers
//! do), and prints the writer thread's CPU time per record and the mean group-commit size.
//!
//! ```text
//! cargo run --release -p rampart-audit --example writer_bench -- --records 100000 --concurrency 64
//! ```

use rampart_audit::{AuditConfig, AuditFinding, AuditLog, AuditRecord, now_ms};
use std::time::Instant;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time of this process's thread named `name` (Linux `schedstat`), ns.
fn thread_cpu_ns(name: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .filter_map(|e| {
            std::fs::read_to_string(e.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        })
        .sum()
}

fn record(i: usize) -> AuditRecord {
    let blocked = i.is_multiple_of(10);
    AuditRecord {
        time_ms: now_ms(),
        request_id: format!(
            "req-{:x}-{:x}-{i:x}",
            0x1878_0000_0000_0000u64 + i as u64,
            4242
        ),
        key_id: None,
        endpoint: "/v1/scan".into(),
        input_hash: format!("{:064x}", (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        hash_key_id: "k-0123456789abcdef".into(),
        action: if blocked {
            rampart_core::Action::Block
        } else {
            rampart_core::Action::Allow
        },
        risk: if blocked {
            rampart_core::RiskClass::HighRisk
        } else {
            rampart_core::RiskClass::LowRisk
        },
        policy_version: "rules-1".into(),
        findings: if blocked {
            vec![AuditFinding {
                rule_id: "CTRL_001".into(),
                category: "control_phrase".into(),
                strength: rampart_core::Strength::Strong,
                layer: "rules".into(),
            }]
        } else {
            Vec::new()
        },
        layer_timings_us: [("normalize".to_string(), 9), ("rules".to_string(), 6)].into(),
        elapsed_us: 15,
        degraded: false,
        judge: None,
        relational: None,
    }
}

fn main() {
    let records = arg("--records", 100_000);
    let concurrency = arg("--concurrency", 64).max(1);
    let dir = tempfile::tempdir().expect("tempdir");
    let log = AuditLog::open(AuditConfig::at(dir.path().join("audit.db"))).expect("open");
    let writer = log.writer();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let cpu0 = thread_cpu_ns("rampart-audit-w");
    let started = Instant::now();
    rt.block_on(async {
        let per = records / concurrency;
        let tasks: Vec<_> = (0..concurrency)
            .map(|t| {
                let w = writer.clone();
                tokio::spawn(async move {
                    for i in 0..per {
                        w.append(record(t * per + i)).await.expect("append");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("task");
        }
    });
    let wall = started.elapsed();
    let cpu = thread_cpu_ns("rampart-audit-w") - cpu0;
    let stats = log.shutdown().expect("shutdown");
    let n = stats.committed.max(1);
    println!(
        "records {} concurrency {concurrency}: writer CPU {:.2} µs/record, mean batch {:.1}, {:.0} records/s",
        stats.committed,
        cpu as f64 / 1e3 / n as f64,
        stats.committed as f64 / stats.batches.max(1) as f64,
        stats.committed as f64 / wall.as_secs_f64(),
    );
}
