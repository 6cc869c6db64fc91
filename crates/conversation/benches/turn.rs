//! Cost per turn of conversation state keeping, in process.
//!
//! `cargo bench -p rampart-conversation --bench turn`. Each iteration is one new call of a
//! conversation whose earlier calls the state already knows (the steady state of a chat):
//!
//! - `state_only/N`: chain hashing, lookup and observe for the call of an N-message
//!   conversation, plus the ledger check and record (the state keeping alone);
//! - `pipeline_only`: the embedded default pipeline on the newest message alone (what a
//!   request cost before conversations);
//! - `conversation/N`: the whole conversation scan of the newest call (the call's segments,
//!   the window view, state, ledger) through `ConversationScanner::stateful`.
//!
//! A fresh store per sample keeps the measured state from growing without bound; the store's
//! LRU bound is what keeps it bounded in service.

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use rampart_conversation::{
    AssistantLedger, ConversationOptions, ConversationScanner, ConversationStore, TurnVerdict,
};
use rampart_core::conversation::{ConversationRequest, Turn};
use rampart_core::{Action, Role};
use std::hint::black_box;
use std::sync::Arc;

const USER: [&str; 4] = [
    "Can you help me plan a three day trip to Lisbon in October?",
    "What neighbourhoods are good for a first visit, and how do I get there from the airport?",
    "Great. Could you suggest a budget for food and transport per day?",
    "Thanks! Last question: which day trips are worth it, Sintra or Cascais?",
];
const ASSISTANT: &str =
    "Sure. Here is a short plan with a few options, transport tips and a budget.";

/// An `n`-message conversation ending with a user message.
fn conversation(n: usize) -> Vec<Turn> {
    let mut turns = vec![Turn::new(
        Role::System,
        "You are a helpful travel assistant.",
    )];
    let mut i = 0;
    while turns.len() < n {
        if turns.len() % 2 == 1 {
            turns.push(Turn::new(
                Role::User,
                format!("{} ({i})", USER[i % USER.len()]),
            ));
            i += 1;
        } else {
            turns.push(Turn::new(Role::Assistant, ASSISTANT));
        }
    }
    if turns.last().is_some_and(|t| t.role == Role::Assistant) {
        turns.push(Turn::new(Role::User, USER[0]));
    }
    turns
}

fn messages(turns: &[Turn]) -> Vec<(Role, String)> {
    turns.iter().map(|t| (t.role, t.content())).collect()
}

fn bench(c: &mut Criterion) {
    let pipeline = Arc::new(rampart_rules::rules_pipeline().expect("default pipeline"));
    let options = ConversationOptions::default();
    let verdict = TurnVerdict {
        risk: 0.1,
        action: Action::Allow,
        refusal: false,
    };

    let mut g = c.benchmark_group("state_only");
    for n in [3usize, 9, 21] {
        let turns = conversation(n);
        let msgs = messages(&turns);
        g.bench_with_input(BenchmarkId::from_parameter(n), &msgs, |b, msgs| {
            b.iter_batched_ref(
                || {
                    let store =
                        ConversationStore::new(options.store.clone(), b"bench").expect("store");
                    let ledger =
                        AssistantLedger::new(options.ledger.clone(), b"bench").expect("ledger");
                    let view: Vec<(Role, &str)> =
                        msgs.iter().map(|(r, t)| (*r, t.as_str())).collect();
                    // The earlier calls are known, as in a running chat.
                    for end in (1..view.len() - 1).filter(|&i| view[i].0 == Role::User) {
                        store
                            .observe(&view[..=end], None, verdict)
                            .expect("observe");
                        ledger.record(&view[..=end], ASSISTANT);
                    }
                    (store, ledger)
                },
                |(store, ledger)| {
                    let view: Vec<(Role, &str)> =
                        msgs.iter().map(|(r, t)| (*r, t.as_str())).collect();
                    black_box(ledger.check(&view));
                    black_box(store.lookup(&view));
                    black_box(store.observe(&view, None, verdict).expect("observe"));
                    ledger.record(&view, ASSISTANT);
                },
                BatchSize::SmallInput,
            );
        });
    }
    g.finish();

    let newest = Turn::new(Role::User, USER[3]);
    c.bench_function("pipeline_only", |b| {
        b.iter(|| black_box(pipeline.scan_text(&newest.text).expect("scan")));
    });

    let mut g = c.benchmark_group("conversation");
    for n in [3usize, 9, 21] {
        let turns = conversation(n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &turns, |b, turns| {
            // `_ref`: the scanner (and its compiled detectors) is dropped outside the timing.
            b.iter_batched_ref(
                || {
                    let store = Arc::new(
                        ConversationStore::new(options.store.clone(), b"bench").expect("store"),
                    );
                    let ledger = Arc::new(
                        AssistantLedger::new(options.ledger.clone(), b"bench").expect("ledger"),
                    );
                    let s = ConversationScanner::stateful(
                        pipeline.clone(),
                        options.clone(),
                        store,
                        Some(ledger),
                    )
                    .expect("scanner");
                    // Warm the state with the earlier calls (not measured).
                    let earlier = ConversationRequest {
                        id: None,
                        conversation_id: None,
                        turns: turns[..turns.len() - 2].to_vec(),
                    };
                    if earlier.turns.iter().any(|t| t.role == Role::User) {
                        s.scan(&earlier).expect("scan");
                        s.record_answer(&earlier.turns, &turns[turns.len() - 2]);
                    }
                    s
                },
                |s| {
                    let req = ConversationRequest {
                        id: None,
                        conversation_id: None,
                        turns: turns.clone(),
                    };
                    black_box(s.scan(&req).expect("scan"));
                },
                BatchSize::SmallInput,
            );
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
