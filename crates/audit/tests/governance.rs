//! The governance audit: append-only, hash-chained; `verify` detects edits, deletions and
//! moved rows.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use rampart_audit::{
    ApprovalEvent, AuditConfig, AuditError, AuditLog, AuditReader, BreakGlassEndEvent,
    BreakGlassUseEvent, ChainKey, GENESIS_HASH, GovernanceEvent, GovernanceFilter, GovernanceKind,
    GovernanceRecord, ToolDecisionEvent, ToolEndpoint, prune, verify,
};
use rampart_tools::{BreakGlassGrant, BreakGlassId, BreakGlassScope, Risk, ToolAction};
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::Path;

const T0: i64 = 1_795_496_400_000;

pub(crate) fn key() -> ChainKey {
    ChainKey::from_material("test chain key")
}

fn decision(i: i64, tool: &str, action: ToolAction) -> GovernanceRecord {
    GovernanceRecord::new(
        T0 + i,
        GovernanceEvent::ToolDecision(ToolDecisionEvent {
            request_id: format!("req-{i}"),
            key_id: Some("team-a".into()),
            endpoint: if i % 2 == 0 {
                ToolEndpoint::Proxy
            } else {
                ToolEndpoint::ToolsCheck
            },
            conversation: Some(format!("conv-{}", i % 2)),
            tool: tool.into(),
            arguments: BTreeMap::from([("path".into(), format!("{i:064x}"))]),
            hash_key_id: "hk1".into(),
            argument_values: Some(serde_json::json!({"path": "/etc/SECRET"})),
            action,
            risk: Some(Risk::High),
            rules: vec!["TOOL_ACTION".into()],
            failed_argument: None,
            approval_id: None,
            breakglass_id: None,
            provenance: Vec::new(),
        }),
    )
}

fn grant() -> BreakGlassGrant {
    BreakGlassGrant {
        id: BreakGlassId("bg_1".into()),
        scope: BreakGlassScope {
            tools: vec!["transfer_funds".into()],
            conversation: None,
            caller: Some("team-a".into()),
            override_arguments: false,
        },
        granted_by: "admin".into(),
        created_ms: T0 as u64,
        expires_ms: T0 as u64 + 60_000,
        reason: "stuck payroll".into(),
        incident: "INC-7".into(),
    }
}

pub(crate) fn records() -> Vec<GovernanceRecord> {
    vec![
        decision(1, "read_file", ToolAction::Allow),
        GovernanceRecord::new(T0 + 2, GovernanceEvent::BreakglassGranted(grant())),
        decision(3, "delete_file", ToolAction::Confirm),
        GovernanceRecord::new(
            T0 + 4,
            GovernanceEvent::ApprovalIssued(ApprovalEvent {
                approval_id: "a1".into(),
                request_id: "req-3".into(),
                key_id: Some("team-a".into()),
                conversation: Some("conv-1".into()),
                tool: "delete_file".into(),
                arguments_hash: "ab".repeat(32),
                expires_ms: T0 as u64 + 600_000,
            }),
        ),
        GovernanceRecord::new(
            T0 + 5,
            GovernanceEvent::BreakglassUsed(BreakGlassUseEvent {
                breakglass_id: "bg_1".into(),
                request_id: "req-5".into(),
                key_id: Some("team-a".into()),
                conversation: None,
                tool: "transfer_funds".into(),
                overridden: ToolAction::Block,
            }),
        ),
        decision(6, "transfer_funds", ToolAction::Block),
        GovernanceRecord::new(
            T0 + 7,
            GovernanceEvent::BreakglassRevoked(BreakGlassEndEvent {
                breakglass_id: "bg_1".into(),
                by: Some("admin".into()),
            }),
        ),
    ]
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn write(path: &Path, cfg: AuditConfig, recs: Vec<GovernanceRecord>) -> Vec<i64> {
    let log = AuditLog::open_with_chain_key(cfg, key()).unwrap();
    let w = log.writer();
    let seqs = rt().block_on(async move {
        let mut out = Vec::new();
        for r in recs {
            out.push(w.append_governance(r).await.unwrap());
        }
        out
    });
    log.shutdown().unwrap();
    let _ = path;
    seqs
}

/// A log with the seven records, written in two sessions (the chain continues across a
/// reopen).
fn chained_log(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("audit.db");
    let mut recs = records();
    let tail = recs.split_off(4);
    assert_eq!(write(&path, AuditConfig::at(&path), recs), [1, 2, 3, 4]);
    assert_eq!(write(&path, AuditConfig::at(&path), tail), [5, 6, 7]);
    path
}

/// An editor connection with the append-only triggers dropped (what an attacker with write
/// access to the file can do).
fn tamper(path: &Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch("DROP TRIGGER governance_no_update; DROP TRIGGER governance_no_delete;")
        .unwrap();
    c
}

#[test]
fn an_untouched_chain_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    let r = verify(&path, &key()).unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.rows, 7);
    assert_eq!(r.first_bad, None);
    assert_eq!(r.head.as_ref().map(|h| h.0), Some(7));
    assert!(r.triggers_present);
    assert_eq!(r.key_id, key().id());
    // The rows read back as written (argument values dropped: the option is off).
    let rows = AuditReader::open(&path)
        .unwrap()
        .query_governance(&GovernanceFilter::default())
        .unwrap();
    assert_eq!(rows.len(), 7);
    assert_eq!(rows.last().unwrap().hash, r.head.unwrap().1);
    let mut expected = records();
    for e in &mut expected {
        if let GovernanceEvent::ToolDecision(d) = &mut e.event {
            d.argument_values = None;
        }
    }
    let got: Vec<_> = rows
        .iter()
        .map(|s| GovernanceRecord::new(s.time_ms, s.event.clone()))
        .collect();
    assert_eq!(got, expected);
    // An empty chain verifies too.
    let empty = dir.path().join("empty.db");
    drop(AuditLog::open_with_chain_key(AuditConfig::at(&empty), key()).unwrap());
    let r = verify(&empty, &key()).unwrap();
    assert!(r.ok && r.rows == 0 && r.head.is_none());
}

#[test]
fn an_edited_audit_row_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    let c = tamper(&path);
    // Turn the BLOCK of row 6 into an ALLOW, in the column and the body alike.
    c.execute(
        "UPDATE governance SET action = 'ALLOW', body_json = replace(body_json, '\"block\"', '\"allow\"') WHERE seq = 6",
        [],
    )
    .unwrap();
    drop(c);
    let r = verify(&path, &key()).unwrap();
    assert!(!r.ok);
    let (seq, why) = r.first_bad.unwrap();
    assert_eq!(seq, 6);
    assert!(why.contains("edited"), "{why}");
    assert!(!r.triggers_present);
    assert_eq!(r.rows, 7);
}

#[test]
fn an_edited_index_column_alone_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    tamper(&path)
        .execute("UPDATE governance SET tool = 'read_file' WHERE seq = 3", [])
        .unwrap();
    assert_eq!(verify(&path, &key()).unwrap().first_bad.unwrap().0, 3);
}

#[test]
fn a_deleted_row_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    tamper(&path)
        .execute("DELETE FROM governance WHERE seq = 4", [])
        .unwrap();
    let r = verify(&path, &key()).unwrap();
    let (seq, why) = r.first_bad.unwrap();
    assert_eq!(seq, 5);
    assert!(why.contains("missing"), "{why}");
}

#[test]
fn a_deleted_and_renumbered_row_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    let c = tamper(&path);
    c.execute("DELETE FROM governance WHERE seq = 4", [])
        .unwrap();
    c.execute("UPDATE governance SET seq = seq - 1 WHERE seq > 4", [])
        .unwrap();
    drop(c);
    let (seq, why) = verify(&path, &key()).unwrap().first_bad.unwrap();
    assert_eq!(seq, 4);
    assert!(why.contains("prev_hash"), "{why}");
}

#[test]
fn a_reordered_row_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    let c = tamper(&path);
    c.execute_batch(
        "UPDATE governance SET seq = 100 WHERE seq = 2;
         UPDATE governance SET seq = 2 WHERE seq = 3;
         UPDATE governance SET seq = 3 WHERE seq = 100;",
    )
    .unwrap();
    drop(c);
    let (seq, _) = verify(&path, &key()).unwrap().first_bad.unwrap();
    assert_eq!(seq, 2);
}

#[test]
fn the_table_refuses_update_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    let c = Connection::open(&path).unwrap();
    for sql in [
        "UPDATE governance SET action = 'ALLOW' WHERE seq = 6",
        "DELETE FROM governance WHERE seq = 7",
    ] {
        let e = c.execute(sql, []).unwrap_err().to_string();
        assert!(e.contains("append-only"), "{sql}: {e}");
    }
    drop(c);
    assert!(verify(&path, &key()).unwrap().ok);
}

#[test]
fn another_key_does_not_verify_and_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    let other = ChainKey::from_material("another key");
    let r = verify(&path, &other).unwrap();
    let (seq, why) = r.first_bad.unwrap();
    assert_eq!(seq, 1);
    assert!(why.contains("key id"), "{why}");
    let e = AuditLog::open_with_chain_key(AuditConfig::at(&path), other).unwrap_err();
    assert!(matches!(e, AuditError::ChainKey { seq: 7, .. }), "{e}");
    assert!(e.to_string().contains("start a new audit file"), "{e}");
}

#[test]
fn prune_never_breaks_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    assert_eq!(prune(&path, i64::MAX).unwrap(), 0);
    let r = verify(&path, &key()).unwrap();
    assert!(r.ok && r.rows == 7, "{r:?}");
}

#[test]
fn argument_values_are_kept_only_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let cfg = AuditConfig {
        tool_argument_values: true,
        ..AuditConfig::at(&path)
    };
    write(
        &path,
        cfg,
        vec![decision(1, "read_file", ToolAction::Allow)],
    );
    let rows = AuditReader::open(&path)
        .unwrap()
        .query_governance(&GovernanceFilter::default())
        .unwrap();
    let GovernanceEvent::ToolDecision(d) = &rows[0].event else {
        panic!("{rows:?}")
    };
    assert_eq!(
        d.argument_values,
        Some(serde_json::json!({"path": "/etc/SECRET"}))
    );
    // Off (the default): no value anywhere in the file.
    let path2 = dir.path().join("audit2.db");
    write(
        &path2,
        AuditConfig::at(&path2),
        vec![decision(1, "read_file", ToolAction::Allow)],
    );
    let c = Connection::open(&path2).unwrap();
    let body: String = c
        .query_row("SELECT body_json FROM governance", [], |r| r.get(0))
        .unwrap();
    assert!(!body.contains("SECRET"), "{body}");
}

#[test]
fn governance_filters() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    let reader = AuditReader::open(&path).unwrap();
    let q = |f: GovernanceFilter| -> Vec<i64> {
        reader
            .query_governance(&f)
            .unwrap()
            .iter()
            .map(|r| r.seq)
            .collect()
    };
    assert_eq!(
        q(GovernanceFilter {
            kinds: vec![GovernanceKind::ToolDecision],
            ..Default::default()
        }),
        [1, 3, 6]
    );
    assert_eq!(
        q(GovernanceFilter {
            tool: Some("transfer_funds".into()),
            ..Default::default()
        }),
        [5, 6]
    );
    assert_eq!(
        q(GovernanceFilter {
            action: Some(ToolAction::Block),
            ..Default::default()
        }),
        [6]
    );
    assert_eq!(
        q(GovernanceFilter {
            conversation: Some("conv-1".into()),
            ..Default::default()
        }),
        [1, 3, 4]
    );
    assert_eq!(
        q(GovernanceFilter {
            request_id: Some("req-3".into()),
            ..Default::default()
        }),
        [3, 4]
    );
    assert_eq!(
        q(GovernanceFilter {
            breakglass_id: Some("bg_1".into()),
            newest_first: true,
            ..Default::default()
        }),
        [7, 5, 2]
    );
    assert_eq!(
        q(GovernanceFilter {
            since_ms: Some(T0 + 3),
            until_ms: Some(T0 + 6),
            limit: Some(2),
            ..Default::default()
        }),
        [3, 4]
    );
    assert!(
        reader
            .query_governance(&GovernanceFilter {
                since_ms: Some(2),
                until_ms: Some(1),
                ..Default::default()
            })
            .is_err()
    );
}

#[test]
fn the_first_row_chains_to_genesis() {
    let dir = tempfile::tempdir().unwrap();
    let path = chained_log(&dir);
    let c = Connection::open(&path).unwrap();
    let (prev, kid): (String, String) = c
        .query_row(
            "SELECT prev_hash, hash_key_id FROM governance WHERE seq = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(prev, GENESIS_HASH);
    assert_eq!(kid, key().id());
}

#[test]
fn concurrent_appends_form_one_chain_with_decisions_in_the_same_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::open_with_chain_key(AuditConfig::at(&path), key()).unwrap();
    let w = log.writer();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut seqs: Vec<i64> = rt.block_on(async move {
        let mut tasks = Vec::new();
        for i in 0..200i64 {
            let w = w.clone();
            tasks.push(tokio::spawn(async move {
                if i % 3 == 0 {
                    // A scan decision between governance rows: not part of the chain.
                    let r = rampart_audit::AuditRecord {
                        time_ms: T0,
                        request_id: format!("scan-{i}"),
                        key_id: None,
                        endpoint: "scan".into(),
                        input_hash: "h".into(),
                        hash_key_id: "k".into(),
                        action: rampart_core::Action::Allow,
                        risk: rampart_core::RiskClass::LowRisk,
                        policy_version: "1".into(),
                        findings: vec![],
                        layer_timings_us: BTreeMap::new(),
                        elapsed_us: 1,
                        degraded: false,
                        judge: None,
                        relational: None,
                    };
                    w.append(r).await.unwrap();
                    None
                } else {
                    Some(
                        w.append_governance(decision(i, "read_file", ToolAction::Allow))
                            .await
                            .unwrap(),
                    )
                }
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            if let Some(s) = t.await.unwrap() {
                out.push(s);
            }
        }
        out
    });
    assert_eq!(log.shutdown().unwrap().committed, 200);
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=133).collect::<Vec<i64>>());
    let r = verify(&path, &key()).unwrap();
    assert!(r.ok && r.rows == 133, "{r:?}");
}

#[test]
fn a_tool_decision_row_from_a_policy_decision_keeps_no_values() {
    use rampart_audit::ToolCallOrigin;
    use rampart_tools::{CallContext, Policy, ToolCall};
    let policy = Policy::from_toml(
        "version = 1\n[[tools]]\nname = \"read_file\"\nrisk = \"low\"\naction = \"allow\"\n\
         args.path = { path_under = [\"/srv/app/docs\"] }\n",
    )
    .unwrap();
    let call = ToolCall::new(
        "read_file",
        serde_json::json!({"path": "/srv/app/docs/../../etc/SECRET"}),
    );
    let decision = policy.check(&call, &CallContext::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::open_with_chain_key(AuditConfig::at(&path), key()).unwrap();
    let w = log.writer();
    let origin = ToolCallOrigin {
        request_id: "req-1",
        key_id: Some("team-a"),
        endpoint: ToolEndpoint::Proxy,
        conversation: Some("conversation-SECRET"),
    };
    let event = ToolDecisionEvent::new(&call, &decision, origin, w.hasher());
    assert_eq!(event.hash_key_id, key().id());
    assert_eq!(event.failed_argument.as_deref(), Some("path"));
    assert_eq!(event.action, ToolAction::Block);
    // Same key, same value, same hash; the conversation hashed.
    let again = ToolDecisionEvent::new(&call, &decision, origin, w.hasher());
    assert_eq!(event.arguments, again.arguments);
    assert_eq!(
        event.conversation.as_deref(),
        Some(w.hasher().conversation("conversation-SECRET").as_str())
    );
    rt().block_on(w.append_governance(GovernanceRecord::new(
        T0,
        GovernanceEvent::ToolDecision(event),
    )))
    .unwrap();
    log.shutdown().unwrap();
    let c = Connection::open(&path).unwrap();
    let dump: String = c
        .query_row(
            "SELECT group_concat(coalesce(conversation, '') || body_json) FROM governance",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!dump.contains("SECRET"), "{dump}");
    assert!(dump.contains("\"failed_argument\":\"path\""), "{dump}");
}
