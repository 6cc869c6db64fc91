//! Step 6 for a streamed answer: the upstream's events go through the tool gate and the
//! hold-back guard on a task ([`Relay`]) and reach the client through a channel; a leak cuts
//! the stream with an error event.

use super::Kind;
use super::handler::{AnswerContext, OutputCheck};
use super::ledger::{AnswerLedger, StreamedAnswer};
use super::reply::{blocked_error, with_headers};
use crate::state::{AppState, Caller};
use crate::tool_gate::ProxyTools;
use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use rampart_core::{Action, Decision, InputError};
use rampart_output::sse::{SseEvent, SseParser, StreamGuard, data_event};
use rampart_output::tool_gate::StreamGate;
use rampart_output::{OutputContext, OutputScanner};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// Step 6 (streamed): events go through the hold-back guard on a task ([`Relay`]); the
/// client gets them through a channel.
pub(super) fn stream_response(
    state: Arc<AppState>,
    caller: Caller,
    upstream: reqwest::Response,
    idle: Duration,
    answer: AnswerContext,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(32);
    let relay = Relay {
        state,
        caller: caller.clone(),
        kind: answer.kind,
        upstream,
        idle,
        tx,
        answers: answer.answers.map(|a| (a, StreamedAnswer::default())),
        tools: answer.tools.map(|t| (t, StreamGate::new())),
    };
    tokio::spawn(relay.run(answer.output));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<Bytes, Infallible>(b), rx))
    });
    let mut r = Response::new(Body::from_stream(stream));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    with_headers(r, answer.action, &caller)
}

/// The error event for a stream that broke off or went idle.
fn stream_error(message: String, code: &str) -> Value {
    json!({"error": {"message": message, "type": "api_error", "param": null, "code": code}})
}

/// How a guarded stream ended.
enum StreamEnd {
    /// The client went away: nothing more to send or record.
    ClientGone,
    /// The scan found a leak (or failed): the stream is cut.
    Blocked,
    /// Everything the upstream sent was released; the error event to end with, when the
    /// upstream broke off, went idle or sent an oversized event.
    Released(Option<Value>),
}

/// What the upstream sent next.
enum Chunk {
    Data(Bytes),
    /// The stream ended.
    End,
    /// Nothing within `proxy.stream_idle_timeout_ms`.
    Idle,
    /// The connection broke off.
    Broken,
}

/// One streamed answer on its way from the upstream to the client.
struct Relay {
    state: Arc<AppState>,
    caller: Caller,
    kind: Kind,
    upstream: reqwest::Response,
    idle: Duration,
    tx: tokio::sync::mpsc::Sender<Bytes>,
    /// Where the answer is recorded once the stream completed, and the answer assembled
    /// from the deltas so far (conversation state).
    answers: Option<(AnswerLedger, StreamedAnswer)>,
    /// Tool governance: the calls' context and the gate holding tool-call deltas back
    /// until each call is complete and decided.
    tools: Option<(ProxyTools, StreamGate)>,
}

impl Relay {
    /// Feeds the answer assembler with what the upstream sent.
    fn assemble(&mut self, ev: &SseEvent) {
        if let (Some((_, answer)), Some(data)) = (&mut self.answers, &ev.data) {
            answer.push(data);
        }
    }

    /// The stream completed and the client has all of it: the answer is recorded.
    fn completed(&mut self) {
        if let Some((ledger, answer)) = self.answers.take() {
            answer.record(&ledger);
        }
    }

    async fn run(self, output: OutputCheck) {
        match output.scanner {
            None => self.pass_through().await,
            Some(scanner) => self.guarded(scanner, output.ctx).await,
        }
    }

    /// Sends bytes to the client; `false` when it went away.
    async fn send_all(&self, out: Vec<Bytes>) -> bool {
        for b in out {
            if self.tx.send(b).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Passes one upstream event through the tool gate (when on): the events that may go
    /// on towards the client (none while a tool call is held).
    async fn gated(&mut self, ev: SseEvent) -> Vec<SseEvent> {
        let Some((tools, gate)) = &mut self.tools else {
            return vec![ev];
        };
        let mut out = Vec::new();
        for item in gate.push(ev) {
            out.extend(
                crate::tool_gate::release_item(&self.state, &self.caller, tools, gate, item).await,
            );
        }
        out
    }

    /// The upstream stream ended: the tool calls still held are decided and released.
    async fn gated_finish(&mut self) -> Vec<SseEvent> {
        let Some((tools, gate)) = &mut self.tools else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in gate.finish() {
            out.extend(
                crate::tool_gate::release_item(&self.state, &self.caller, tools, gate, item).await,
            );
        }
        out
    }

    /// Sends gated events (recording them in the answer); `false` when the client went away.
    async fn send_events(&mut self, events: Vec<SseEvent>) -> bool {
        for ev in events {
            self.assemble(&ev);
            if self.tx.send(ev.raw).await.is_err() {
                return false;
            }
        }
        true
    }

    /// The upstream's next chunk, waiting at most the idle timeout.
    async fn next_chunk(&mut self) -> Chunk {
        match tokio::time::timeout(self.idle, self.upstream.chunk()).await {
            Err(_) => Chunk::Idle,
            Ok(Err(_)) => Chunk::Broken,
            Ok(Ok(None)) => Chunk::End,
            Ok(Ok(Some(c))) => Chunk::Data(c),
        }
    }

    /// Passes events through the tool gate one by one and sends what it lets through;
    /// `false` when the client went away.
    async fn send_gated(&mut self, events: Vec<SseEvent>) -> bool {
        for ev in events {
            let out = self.gated(ev).await;
            if !self.send_events(out).await {
                return false;
            }
        }
        true
    }

    /// Nothing to look for: the stream goes through as it comes (parsed only when the
    /// answer is to be recorded or its tool calls gated; gated, events are sent one by one
    /// once the gate lets them through).
    async fn pass_through(mut self) {
        let gating = self.tools.is_some();
        let mut parser = (self.answers.is_some() || gating).then(SseParser::new);
        loop {
            let c = match self.next_chunk().await {
                Chunk::Data(c) => c,
                Chunk::End => return self.pass_through_end(parser, gating).await,
                Chunk::Idle | Chunk::Broken => {
                    let err = stream_error(
                        "the upstream stream broke off or went idle".into(),
                        "upstream_error",
                    );
                    let _ = self.tx.send(data_event(&err.to_string())).await;
                    return;
                }
            };
            if let Some(p) = &mut parser {
                match p.push(&c) {
                    Ok(events) if gating => {
                        if !self.send_gated(events).await {
                            return;
                        }
                        continue;
                    }
                    Ok(events) => events.iter().for_each(|ev| self.assemble(ev)),
                    // Unparseable and gated: held calls are never released.
                    Err(e) if gating => {
                        let err = stream_error(e.to_string(), "upstream_error");
                        let _ = self.tx.send(data_event(&err.to_string())).await;
                        return;
                    }
                    // Unparseable: the answer cannot be known, so it is not recorded.
                    Err(_) => {
                        parser = None;
                        self.answers = None;
                    }
                }
            }
            if self.tx.send(c).await.is_err() {
                return;
            }
        }
    }

    /// The upstream stream of [`Relay::pass_through`] ended: the last event, and the tool
    /// calls still held, go out; the answer is recorded.
    async fn pass_through_end(mut self, mut parser: Option<SseParser>, gating: bool) {
        let tail = parser.as_mut().and_then(SseParser::finish);
        if gating {
            let mut out = Vec::new();
            if let Some(ev) = tail {
                out.extend(self.gated(ev).await);
            }
            out.extend(self.gated_finish().await);
            if !self.send_events(out).await {
                return;
            }
        } else if let Some(ev) = tail {
            self.assemble(&ev);
        }
        self.completed();
    }

    /// The guarded stream: relay, then record the response decision and end the stream.
    async fn guarded(mut self, scanner: Arc<OutputScanner>, ctx: OutputContext) {
        let holdback = scanner
            .config()
            .stream_holdback_bytes
            .max(ctx.canaries.max_reach() + 8);
        let mut guard = StreamGuard::new(holdback);
        let mut windows = WindowScan {
            scanner,
            ctx,
            blocking: None,
            last_allowed: None,
        };
        match self.relay_events(&mut guard, &mut windows).await {
            StreamEnd::ClientGone => {}
            StreamEnd::Blocked => self.end_blocked(windows.blocking).await,
            StreamEnd::Released(error) => {
                if error.is_none() {
                    self.completed();
                }
                self.end_released(windows.last_allowed, error).await
            }
        }
    }

    /// Reads the upstream's events and releases what the guard lets through, until the
    /// stream ends, breaks off, is blocked, or the client goes away.
    async fn relay_events(
        &mut self,
        guard: &mut StreamGuard,
        windows: &mut WindowScan,
    ) -> StreamEnd {
        let mut scan = |w: &str, offset: usize| windows.scan(w, offset);
        let mut parser = SseParser::new();
        let ended_with_error = loop {
            let chunk = match self.next_chunk().await {
                Chunk::Idle => {
                    break Some(stream_error(
                        format!(
                            "the upstream stream was idle for more than {} ms",
                            self.idle.as_millis()
                        ),
                        "timeout",
                    ));
                }
                Chunk::Broken => {
                    break Some(stream_error(
                        "the upstream stream broke off".into(),
                        "upstream_error",
                    ));
                }
                Chunk::End => break None,
                Chunk::Data(c) => c,
            };
            let events = match parser.push(&chunk) {
                Ok(e) => e,
                Err(e) => break Some(stream_error(e.to_string(), "upstream_error")),
            };
            for upstream_ev in events {
                let gated = self.gated(upstream_ev).await;
                if let Some(end) = self.guard_and_send(gated, guard, &mut scan).await {
                    return end;
                }
            }
        };
        // Held tool calls are released only when the stream ended normally: one that broke
        // off may have cut their arguments.
        let mut tail = Vec::new();
        if let Some(ev) = parser.finish() {
            tail.extend(self.gated(ev).await);
        }
        if ended_with_error.is_none() {
            tail.extend(self.gated_finish().await);
        }
        if let Some(end) = self.guard_and_send(tail, guard, &mut scan).await {
            return end;
        }
        let Ok(out) = guard.finish(&mut scan) else {
            return StreamEnd::Blocked;
        };
        if !self.send_all(out).await {
            return StreamEnd::ClientGone;
        }
        StreamEnd::Released(ended_with_error)
    }

    /// Records gated events in the answer and passes them through the guard, sending what
    /// it releases; how the stream ended when it was blocked or the client went away.
    async fn guard_and_send<F>(
        &mut self,
        events: Vec<SseEvent>,
        guard: &mut StreamGuard,
        scan: &mut F,
    ) -> Option<StreamEnd>
    where
        F: FnMut(&str, usize) -> Result<Vec<Range<usize>>, InputError> + Send,
    {
        for ev in events {
            self.assemble(&ev);
            let Ok(out) = guard.push(ev, scan) else {
                return Some(StreamEnd::Blocked);
            };
            if !self.send_all(out).await {
                return Some(StreamEnd::ClientGone);
            }
        }
        None
    }

    /// A cut stream: the blocking decision is recorded, the client gets an error event and
    /// `[DONE]`.
    async fn end_blocked(self, blocking: Option<Decision>) {
        let body = match &blocking {
            Some(d) => {
                if let Err(e) = self
                    .state
                    .record(&self.caller, self.kind.response_endpoint(), d)
                    .await
                {
                    tracing::error!(request_id = %self.caller.request_id, error = %e, "recording a blocked stream failed");
                }
                blocked_error(d, &self.caller.request_id, true)
            }
            None => json!({"error": {
                "message": "Response blocked by Rampart: the response scan failed (fail closed)",
                "type": "api_error", "param": null, "code": "rampart_output_blocked"}}),
        };
        let _ = self.tx.send(data_event(&body.to_string())).await;
        let _ = self.tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
    }

    /// A stream released whole: its last allowing decision is recorded; an upstream failure
    /// ends it with an error event.
    async fn end_released(self, last_allowed: Option<Decision>, error: Option<Value>) {
        if let Some(d) = &last_allowed
            && let Err(e) = self
                .state
                .record(&self.caller, self.kind.response_endpoint(), d)
                .await
        {
            tracing::error!(request_id = %self.caller.request_id, error = %e, "recording an allowed stream failed");
        }
        if let Some(err) = error {
            let _ = self.tx.send(data_event(&err.to_string())).await;
        }
    }
}

/// The scan the stream guard runs on each window, keeping the decisions the audit log needs.
struct WindowScan {
    scanner: Arc<OutputScanner>,
    ctx: OutputContext,
    /// The decision of the latest scan, when it found something.
    blocking: Option<Decision>,
    /// The decision of the latest scan that allowed its window: what the audit log gets for
    /// a stream that ends allowed (its input hash covers that last window).
    last_allowed: Option<Decision>,
}

impl WindowScan {
    /// Scans window `w` (at `offset` in its stream's text); the window-relative spans that
    /// must not be released.
    fn scan(&mut self, w: &str, offset: usize) -> Result<Vec<Range<usize>>, InputError> {
        self.blocking = None;
        let o = self.scanner.scan(w, &self.ctx, None)?;
        if o.decision.action == Action::Allow {
            self.last_allowed = Some(o.decision);
            return Ok(Vec::new());
        }
        let mut spans: Vec<_> = o
            .decision
            .findings
            .iter()
            .filter(|f| f.counted)
            .map(|f| f.span.start..f.span.end)
            .collect();
        if spans.is_empty() {
            // Not ALLOW without a counted finding: a layer failed and the fail mode said
            // BLOCK. The whole window is suspect.
            spans.push(0..w.len());
        }
        let mut d = o.decision;
        for f in &mut d.findings {
            f.span.start += offset;
            f.span.end += offset;
        }
        // Streams cannot be edited after the fact: SANITIZE cuts like BLOCK.
        d.action = Action::Block;
        self.blocking = Some(d);
        Ok(spans)
    }
}
