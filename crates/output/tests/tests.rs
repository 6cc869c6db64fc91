//! The public API of rampart-output, as an embedding program uses it (no server).

use rampart_core::Action;
use rampart_output::canary::{Canary, CanarySet};
use rampart_output::sse::{SseParser, StreamGuard};
use rampart_output::tool_gate::{GateItem, PendingCall, StreamGate, ToolGate};
use rampart_output::{OutputConfig, OutputContext, OutputScanner, PromptIndex};
use rampart_tools::{Policy, ToolAction};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn built_objects_are_send_and_sync() {
    assert_send_sync::<OutputScanner>();
    assert_send_sync::<ToolGate>();
    assert_send_sync::<CanarySet>();
    assert_send_sync::<PromptIndex>();
}

/// A streamed answer scanned window by window: the canary never reaches the client.
#[test]
fn streamed_canary_is_cut_before_release() {
    let scanner = OutputScanner::build(&rampart_rules::rules_config(), &OutputConfig::default())
        .expect("builds");
    let canary = Canary::generate("rc-").expect("random");
    let ctx = OutputContext {
        canaries: CanarySet::new([&canary]),
        system_prompt: None,
    };
    let mut guard = StreamGuard::new(scanner.config().stream_holdback_bytes);
    let mut scan = |w: &str, _offset: usize| {
        scanner.scan(w, &ctx, None).map(|o| {
            if o.decision.action == Action::Allow {
                Vec::new()
            } else {
                // The whole window is withheld.
                std::iter::once(0..w.len()).collect()
            }
        })
    };
    let text = format!("{} {} and more", "filler ".repeat(40), canary.expose());
    let mut stream = String::new();
    for piece in text.as_bytes().chunks(5) {
        let delta = serde_json::json!({"choices": [{"index": 0, "delta": {"content": String::from_utf8_lossy(piece)}}]});
        stream.push_str(&format!("data: {delta}\n\n"));
    }
    stream.push_str("data: [DONE]\n\n");
    let mut parser = SseParser::new();
    let mut released = Vec::new();
    let mut blocked = false;
    for ev in parser.push(stream.as_bytes()).expect("bounded") {
        match guard.push(ev, &mut scan) {
            Ok(out) => released.extend(out),
            Err(_) => {
                blocked = true;
                break;
            }
        }
    }
    assert!(blocked);
    let sent: Vec<u8> = released.iter().flat_map(|b| b.to_vec()).collect();
    assert!(!String::from_utf8_lossy(&sent).contains(&canary.expose()[..8]));
}

/// A streamed tool call is held until its choice finishes, then released as decided.
#[test]
fn streamed_tool_call_is_held_then_decided() {
    let policy = Policy::from_toml(
        "version = 1\n[[tools]]\nname = \"lookup\"\nrisk = \"low\"\naction = \"allow\"\n",
    )
    .expect("policy");
    let gate = ToolGate::builder(policy).build().expect("random key");
    let mut sg = StreamGate::new();
    let mut parser = SseParser::new();
    let src = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"lookup\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    );
    let mut events = Vec::new();
    for ev in parser.push(src.as_bytes()).expect("bounded") {
        for item in sg.push(ev) {
            match item {
                GateItem::Event(e) => events.push(e),
                GateItem::Complete {
                    choice,
                    calls,
                    overflow,
                    then,
                } => {
                    let verdicts: Vec<_> = calls
                        .iter()
                        .map(|c| gate.decide(PendingCall::new(c.name(), c.arguments()), 0))
                        .collect();
                    assert!(verdicts.iter().all(|v| v.action() == ToolAction::Allow));
                    events.extend(sg.release(choice, &calls, &verdicts, overflow, then));
                }
            }
        }
    }
    let data: Vec<&str> = events.iter().filter_map(|e| e.data.as_deref()).collect();
    assert_eq!(data.len(), 2, "{data:?}");
    assert!(data[0].contains("\"lookup\"") && data[0].contains("tool_decisions"));
    assert!(data[1].contains("\"finish_reason\":\"tool_calls\""));
}
