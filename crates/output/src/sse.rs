//! Server-sent events: an incremental parser for the upstream's byte stream, and the
//! hold-back guard that releases streamed content only after it has been scanned.
//!
//! **Parser.** [`SseParser::push`] takes bytes as they arrive (events split anywhere across
//! TCP chunks) and returns complete events. Lines end in LF, CRLF or CR; a blank line ends an
//! event; `data:` lines are joined with `\n`; `:` lines are comments. Each event keeps its
//! exact raw bytes, so what the guard releases is byte-identical to what the upstream sent.
//!
//! **Guard.** [`StreamGuard`] accumulates the text of each stream (per choice: `content`,
//! `refusal`, `reasoning_content`, each tool call's `name` then `arguments`, the legacy
//! `function_call`'s likewise; the legacy `text`; data that is not JSON is scanned as text
//! too) and holds an event back until at least
//! `holdback` bytes of that text follow it (or the stream ended), and the text up to there
//! has been scanned. It scans only a window: the unverified text plus `holdback` bytes of
//! overlap before it, and only once `step` new bytes have arrived, so the total work is linear
//! in the response length. Any leak at most `holdback` bytes long is therefore seen whole in
//! some window before any byte of it is released, wherever the chunk boundaries fall.

use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The exact bytes of the event, through its terminating blank line.
    pub raw: Bytes,
    /// The `event:` field.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`; `None` when the event had no data line (a comment
    /// or keep-alive).
    pub data: Option<String>,
}

/// Incremental SSE parser.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes not yet consumed (the current, incomplete line and event).
    buf: Vec<u8>,
    /// Start of the current event in `buf`.
    pos: usize,
    /// Scanning position in `buf` (everything before it is complete lines of the current
    /// event).
    scan: usize,
    event: Option<String>,
    data: Option<String>,
}

/// The upstream stream exceeded a bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a server-sent event is larger than {0} bytes")]
pub struct EventTooLarge(pub usize);

/// Largest single event accepted.
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

impl SseParser {
    /// A parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events they complete.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, EventTooLarge> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        loop {
            let rest = &self.buf[self.scan..];
            let Some(nl) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                break;
            };
            let line_end = self.scan + nl;
            let term = if self.buf[line_end] == b'\r' {
                match self.buf.get(line_end + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A CR at the end: wait to see whether LF follows.
                    None => break,
                }
            } else {
                1
            };
            let line = self.buf[self.scan..line_end].to_vec();
            self.scan = line_end + term;
            if line.is_empty() {
                out.push(self.dispatch());
            } else {
                self.field(&line);
            }
        }
        // Drop consumed bytes.
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.scan -= self.pos;
            self.pos = 0;
        }
        if self.buf.len() > MAX_EVENT_BYTES {
            return Err(EventTooLarge(MAX_EVENT_BYTES));
        }
        Ok(out)
    }

    /// Ends the stream: a trailing event without its blank line (or a trailing CR) is
    /// dispatched as it is, so nothing the upstream sent is silently dropped.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if self.scan < self.buf.len() {
            // A final line without terminator (or a lone CR).
            let mut line = self.buf[self.scan..].to_vec();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if !line.is_empty() {
                self.field(&line);
            }
            self.scan = self.buf.len();
        }
        if self.buf.len() > self.pos {
            let ev = self.dispatch();
            self.buf.clear();
            self.pos = 0;
            self.scan = 0;
            return Some(ev);
        }
        None
    }

    fn field(&mut self, line: &[u8]) {
        if line.first() == Some(&b':') {
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match name {
            b"data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(&value);
                }
                None => self.data = Some(value.into_owned()),
            },
            b"event" => self.event = Some(value.into_owned()),
            _ => {}
        }
    }

    fn dispatch(&mut self) -> SseEvent {
        let raw = Bytes::copy_from_slice(&self.buf[self.pos..self.scan]);
        self.pos = self.scan;
        SseEvent {
            raw,
            event: self.event.take(),
            data: self.data.take(),
        }
    }
}

/// Encodes one `data:` event (for events Rampart writes itself).
pub fn data_event(data: &str) -> Bytes {
    let mut s = String::with_capacity(data.len() + 8);
    for line in data.split('\n') {
        s.push_str("data: ");
        s.push_str(line);
        s.push('\n');
    }
    s.push('\n');
    Bytes::from(s)
}

/// The stream must be cut: the scan found a leak (or could not run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// Which text stream (e.g. `0/content`).
    pub stream: String,
    /// Span of the first blocking finding, in that stream's text.
    pub span: Range<usize>,
}

/// Scans one window of text, which starts at the given offset of its stream's text; returns
/// the spans (window-relative) of blocking findings. `Err` means the scan failed; the guard
/// blocks (fail closed).
pub type ScanWindow<'a, E> = dyn FnMut(&str, usize) -> Result<Vec<Range<usize>>, E> + 'a;

#[derive(Debug, Default)]
struct TextStream {
    /// Text from `base` on.
    buf: String,
    /// Offset of `buf[0]` in the stream's text.
    base: usize,
    /// Everything before this offset has been scanned with enough text after it.
    verified: usize,
}

impl TextStream {
    fn received(&self) -> usize {
        self.base + self.buf.len()
    }
}

#[derive(Debug)]
struct Pending {
    raw: Bytes,
    /// For each text stream the event extends, the offset its text ends at.
    ends: Vec<(String, usize)>,
}

/// Holds streamed events back until their text is scanned (see the module docs).
#[derive(Debug)]
pub struct StreamGuard {
    holdback: usize,
    step: usize,
    streams: BTreeMap<String, TextStream>,
    queue: VecDeque<Pending>,
    bytes_scanned: usize,
}

impl StreamGuard {
    /// A guard that releases text only when `holdback` bytes follow it.
    pub fn new(holdback: usize) -> Self {
        let holdback = holdback.max(1);
        Self {
            holdback,
            step: (holdback / 2).max(64),
            streams: BTreeMap::new(),
            queue: VecDeque::new(),
            bytes_scanned: 0,
        }
    }

    /// Total bytes passed to the scan function (stays linear in the text).
    #[cfg(test)]
    pub fn bytes_scanned(&self) -> usize {
        self.bytes_scanned
    }

    /// Takes one upstream event; returns the raw bytes that may now be sent to the client.
    pub fn push<E>(
        &mut self,
        ev: SseEvent,
        scan: &mut ScanWindow<'_, E>,
    ) -> Result<Vec<Bytes>, Blocked> {
        let done = ev.data.as_deref().map(str::trim) == Some("[DONE]");
        let mut ends = Vec::new();
        if !done && let Some(data) = &ev.data {
            for (key, text) in texts(data) {
                if text.is_empty() {
                    continue;
                }
                let s = self.streams.entry(key.clone()).or_default();
                s.buf.push_str(&text);
                ends.push((key, s.received()));
            }
        }
        self.queue.push_back(Pending { raw: ev.raw, ends });
        if done {
            self.verify_all(scan)?;
        } else {
            let keys: Vec<String> = self.streams.keys().cloned().collect();
            for key in keys {
                let ready = self
                    .streams
                    .get(&key)
                    .is_some_and(|s| s.received() >= s.verified + self.holdback + self.step);
                if ready {
                    self.verify(&key, false, scan)?;
                }
            }
        }
        Ok(self.release())
    }

    /// The upstream stream ended: scans what is left and releases everything.
    pub fn finish<E>(&mut self, scan: &mut ScanWindow<'_, E>) -> Result<Vec<Bytes>, Blocked> {
        self.verify_all(scan)?;
        Ok(self.release())
    }

    fn verify_all<E>(&mut self, scan: &mut ScanWindow<'_, E>) -> Result<(), Blocked> {
        let keys: Vec<String> = self.streams.keys().cloned().collect();
        for key in keys {
            self.verify(&key, true, scan)?;
        }
        Ok(())
    }

    /// Scans the window of stream `key` and advances its verified offset (to the end when
    /// `to_end`, else to `holdback` bytes before the end).
    fn verify<E>(
        &mut self,
        key: &str,
        to_end: bool,
        scan: &mut ScanWindow<'_, E>,
    ) -> Result<(), Blocked> {
        let holdback = self.holdback;
        let Some(s) = self.streams.get_mut(key) else {
            return Ok(());
        };
        let received = s.received();
        let target = if to_end {
            received
        } else {
            received.saturating_sub(holdback)
        };
        if target <= s.verified {
            return Ok(());
        }
        // Window: `holdback` (+ a small margin, so a match of at most `holdback` bytes that
        // touches unverified text never starts at the window's edge) before `verified`.
        let want = s.verified.saturating_sub(holdback + 16).max(s.base);
        let mut rel = want - s.base;
        while !s.buf.is_char_boundary(rel) {
            rel -= 1;
        }
        let window_start = s.base + rel;
        let window = &s.buf[rel..];
        self.bytes_scanned += window.len();
        let spans = scan(window, window_start).map_err(|_| Blocked {
            stream: key.to_string(),
            span: s.verified..received,
        })?;
        if let Some(span) = spans
            .into_iter()
            .map(|r| window_start + r.start..window_start + r.end)
            .filter(|r| r.end > s.verified)
            .min_by_key(|r| r.start)
        {
            return Err(Blocked {
                stream: key.to_string(),
                span,
            });
        }
        s.verified = target.max(s.verified);
        // Keep only what the next window needs.
        let keep_from = s.verified.saturating_sub(holdback + 16);
        if keep_from > s.base + 4096 {
            let mut cut = keep_from - s.base;
            while !s.buf.is_char_boundary(cut) {
                cut -= 1;
            }
            s.buf.drain(..cut);
            s.base += cut;
        }
        Ok(())
    }

    fn release(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(front) = self.queue.front() {
            let safe = front
                .ends
                .iter()
                .all(|(k, end)| self.streams.get(k).is_some_and(|s| *end <= s.verified));
            if !safe {
                break;
            }
            if let Some(p) = self.queue.pop_front() {
                out.push(p.raw);
            }
        }
        out
    }
}

/// The scannable texts of one event's data: `(stream key, text)`.
fn texts(data: &str) -> Vec<(String, String)> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
        // Not JSON: scan it as it is (fail safe: nothing reaches the client unscanned).
        return vec![("raw".into(), data.to_string())];
    };
    let mut out = Vec::new();
    let Some(choices) = v.get("choices").and_then(|c| c.as_array()) else {
        return out;
    };
    for (pos, c) in choices.iter().enumerate() {
        let idx = c
            .get("index")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(pos as u64);
        // The chosen tokens of the log-probabilities: one stream per choice, so a secret
        // split over tokens and events is still seen.
        if let Some(lp) = c.get("logprobs") {
            let mut tokens = String::new();
            for field in ["content", "refusal"] {
                for it in lp
                    .get(field)
                    .and_then(|x| x.as_array())
                    .into_iter()
                    .flatten()
                {
                    if let Some(t) = it.get("token").and_then(|t| t.as_str()) {
                        tokens.push_str(t);
                    }
                }
            }
            if !tokens.is_empty() {
                out.push((format!("{idx}/logprobs"), tokens));
            }
        }
        let mut put = |field: &str, v: Option<&serde_json::Value>| {
            if let Some(t) = v.and_then(|t| t.as_str()) {
                out.push((format!("{idx}/{field}"), t.to_string()));
            }
        };
        put("text", c.get("text"));
        if let Some(d) = c.get("delta") {
            put("content", d.get("content"));
            put("refusal", d.get("refusal"));
            put("reasoning_content", d.get("reasoning_content"));
            // Every other string of the delta (`reasoning`, `audio.transcript`, fields not
            // named yet), each its own stream.
            if let Some(m) = d.as_object() {
                for (k, x) in m {
                    if matches!(
                        k.as_str(),
                        "content"
                            | "refusal"
                            | "reasoning_content"
                            | "tool_calls"
                            | "function_call"
                            | "role"
                            | "type"
                    ) {
                        continue;
                    }
                    other_strings(x, &format!("{idx}/delta/{k}"), &mut out);
                }
            }
            if let Some(calls) = d.get("tool_calls").and_then(|t| t.as_array()) {
                for (tpos, call) in calls.iter().enumerate() {
                    let ti = call
                        .get("index")
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(tpos as u64);
                    call_texts(format!("{idx}/tool/{ti}"), call.get("function"), &mut out);
                }
            }
            // The legacy single function call.
            call_texts(
                format!("{idx}/function_call"),
                d.get("function_call"),
                &mut out,
            );
        }
    }
    out
}

/// Every string under `v`, each keyed by its path below `at`.
fn other_strings(v: &serde_json::Value, at: &str, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::String(t) => out.push((at.to_string(), t.clone())),
        serde_json::Value::Array(a) => {
            for (j, x) in a.iter().enumerate() {
                other_strings(x, &format!("{at}/{j}"), out);
            }
        }
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                other_strings(x, &format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
}

/// A function call's name and arguments, as one text stream: the name (sent once, first)
/// then the arguments. A stream of its own would hold every later event back until the end,
/// since a name never grows to `holdback` bytes.
fn call_texts(key: String, call: Option<&serde_json::Value>, out: &mut Vec<(String, String)>) {
    for field in ["name", "arguments"] {
        if let Some(t) = call.and_then(|c| c.get(field)).and_then(|t| t.as_str()) {
            out.push((key.clone(), t.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chat_event(text: &str) -> String {
        let v = serde_json::json!({
            "id": "c1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]
        });
        format!("data: {v}\n\n")
    }

    fn stream_of(pieces: &[&str]) -> String {
        let mut s = String::from(": hello\n\n");
        s.push_str(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\r\n\r\n",
        );
        for p in pieces {
            s.push_str(&chat_event(p));
        }
        s.push_str("event: note\ndata: {\"a\":1}\ndata: {\"b\":2}\r\r");
        s.push_str("data: [DONE]\n\n");
        s
    }

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.push(c).expect("bounded"));
        }
        out.extend(p.finish());
        out
    }

    #[test]
    fn parses_fields_comments_and_line_endings() {
        let s = stream_of(&["Hello", " world"]);
        let evs = parse_all(&[s.as_bytes()]);
        assert_eq!(evs.len(), 6);
        assert_eq!(evs[0].data, None);
        assert_eq!(evs[5].data.as_deref(), Some("[DONE]"));
        assert_eq!(evs[4].event.as_deref(), Some("note"));
        assert_eq!(evs[4].data.as_deref(), Some("{\"a\":1}\n{\"b\":2}"));
        let joined: Vec<u8> = evs.iter().flat_map(|e| e.raw.to_vec()).collect();
        assert_eq!(joined, s.as_bytes());
    }

    #[test]
    fn trailing_event_without_blank_line_is_kept() {
        let evs = parse_all(&[b"data: x\n\ndata: y"]);
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[1].data.as_deref(), Some("y"));
    }

    proptest! {
        #[test]
        fn any_split_yields_same_events(
            pieces in proptest::collection::vec("[a-zé \\n]{0,12}", 0..8),
            cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let s = stream_of(&refs);
            let bytes = s.as_bytes();
            let whole = parse_all(&[bytes]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut prev = 0;
            for c in cuts {
                chunks.push(&bytes[prev..c]);
                prev = c;
            }
            chunks.push(&bytes[prev..]);
            prop_assert_eq!(parse_all(&chunks), whole);
        }
    }

    /// Runs the guard over `pieces` as content events, with a scan that blocks on `needle`.
    fn guard_run(pieces: &[String], needle: &str, holdback: usize) -> (Vec<u8>, bool, usize) {
        let mut s = String::new();
        for p in pieces {
            s.push_str(&chat_event(p));
        }
        s.push_str("data: [DONE]\n\n");
        let mut g = StreamGuard::new(holdback);
        let mut scan = |w: &str, _: usize| -> Result<Vec<Range<usize>>, String> {
            Ok(w.match_indices(needle)
                .map(|(i, m)| i..i + m.len())
                .collect())
        };
        let mut released = Vec::new();
        let mut blocked = false;
        let mut p = SseParser::new();
        'outer: for chunk in s.as_bytes().chunks(7) {
            for ev in p.push(chunk).expect("bounded") {
                match g.push(ev, &mut scan) {
                    Ok(out) => out.iter().for_each(|b| released.extend_from_slice(b)),
                    Err(_) => {
                        blocked = true;
                        break 'outer;
                    }
                }
            }
        }
        if !blocked {
            match g.finish(&mut scan) {
                Ok(out) => out.iter().for_each(|b| released.extend_from_slice(b)),
                Err(_) => blocked = true,
            }
        }
        (released, blocked, g.bytes_scanned())
    }

    fn released_text(raw: &[u8]) -> String {
        let mut p = SseParser::new();
        let mut text = String::new();
        for ev in p.push(raw).expect("bounded") {
            if let Some(d) = ev.data {
                for (_, t) in texts(&d) {
                    text.push_str(&t);
                }
            }
        }
        text
    }

    const CANARY: &str = "rc-0f1e2d3c4b5a69788796a5b4c3d2e1f0";

    #[test]
    fn canary_split_over_chunks_is_never_released() {
        let filler = "lorem ipsum dolor sit amet ".repeat(20);
        for parts in [1usize, 2, 3, 5, 35] {
            let mut pieces: Vec<String> = filler
                .as_bytes()
                .chunks(9)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect();
            let size = CANARY.len().div_ceil(parts);
            pieces.extend(
                CANARY
                    .as_bytes()
                    .chunks(size)
                    .map(|c| String::from_utf8_lossy(c).into_owned()),
            );
            pieces.extend(
                filler
                    .as_bytes()
                    .chunks(5)
                    .map(|c| String::from_utf8_lossy(c).into_owned()),
            );
            let (released, blocked, _) = guard_run(&pieces, CANARY, 64);
            assert!(blocked, "{parts}");
            let text = released_text(&released);
            // Not even a prefix of the canary got out.
            assert!(!text.contains("rc-0f1e"), "{parts}: {text}");
            assert!(text.starts_with("lorem"), "released the clean prefix");
        }
    }

    proptest! {
        #[test]
        fn canary_anywhere_any_split_is_caught(
            before in "[a-z ]{0,300}",
            after in "[a-z ]{0,300}",
            sizes in proptest::collection::vec(1usize..20, 1..40),
        ) {
            let full = format!("{before}{CANARY}{after}");
            let mut pieces = Vec::new();
            let mut at = 0;
            let mut i = 0;
            while at < full.len() {
                let n = sizes[i % sizes.len()].min(full.len() - at);
                pieces.push(full[at..at + n].to_string());
                at += n;
                i += 1;
            }
            let (released, blocked, _) = guard_run(&pieces, CANARY, 48);
            prop_assert!(blocked);
            let text = released_text(&released);
            prop_assert!(!text.contains(&CANARY[..4]) || before.contains(&CANARY[..4]));
            prop_assert!(text.len() <= before.len());
        }
    }

    #[test]
    fn clean_stream_passes_byte_identical_and_scans_linearly() {
        let body = "The quick brown fox jumps over the lazy dog. ".repeat(200);
        let pieces: Vec<String> = body
            .as_bytes()
            .chunks(4)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        let (released, blocked, scanned) = guard_run(&pieces, CANARY, 256);
        assert!(!blocked);
        let mut expected = String::new();
        for p in &pieces {
            expected.push_str(&chat_event(p));
        }
        expected.push_str("data: [DONE]\n\n");
        assert_eq!(released, expected.as_bytes());
        // Window overlap is bounded: at most a small multiple of the text.
        assert!(scanned <= body.len() * 6, "{scanned} for {}", body.len());
    }

    /// A streamed call: the name first, then the arguments in 4-byte pieces.
    fn call_stream(legacy: bool, name: &str, arguments: &str) -> Vec<u8> {
        let delta = |call: serde_json::Value| {
            if legacy {
                serde_json::json!({"function_call": call})
            } else {
                serde_json::json!({"tool_calls": [{"index": 0, "function": call}]})
            }
        };
        let event = |d: serde_json::Value| {
            let v = serde_json::json!({"choices": [{"index": 0, "delta": d}]});
            format!("data: {v}\n\n")
        };
        let mut s = event(delta(serde_json::json!({"name": name, "arguments": ""})));
        for piece in arguments.as_bytes().chunks(4) {
            let piece = String::from_utf8_lossy(piece);
            s.push_str(&event(delta(serde_json::json!({"arguments": piece}))));
        }
        s.push_str("data: [DONE]\n\n");
        s.into_bytes()
    }

    #[test]
    fn call_names_are_scanned_and_do_not_hold_the_stream_back() {
        let arguments = format!("{{\"note\": \"{}\"}}", "harmless words ".repeat(40));
        for legacy in [false, true] {
            let mut scan = |w: &str, _: usize| -> Result<Vec<Range<usize>>, String> {
                Ok(w.match_indices(CANARY)
                    .map(|(i, m)| i..i + m.len())
                    .collect())
            };
            // A canary as the name is caught.
            let mut g = StreamGuard::new(64);
            let mut p = SseParser::new();
            let mut blocked = false;
            for ev in p
                .push(&call_stream(legacy, CANARY, &arguments))
                .expect("bounded")
            {
                blocked |= g.push(ev, &mut scan).is_err();
            }
            assert!(blocked || g.finish(&mut scan).is_err(), "legacy {legacy}");
            // A clean call is released as it streams, not only at its end (`[DONE]`).
            let mut g = StreamGuard::new(64);
            let mut p = SseParser::new();
            let mut released_early = 0;
            for ev in p
                .push(&call_stream(legacy, "configure", &arguments))
                .expect("bounded")
            {
                let done = ev.data.as_deref() == Some("[DONE]");
                let released = g.push(ev, &mut scan).expect("clean").len();
                if !done {
                    released_early += released;
                }
            }
            assert!(released_early > 10, "legacy {legacy}: {released_early}");
        }
    }

    #[test]
    fn non_json_data_is_scanned_too() {
        let mut g = StreamGuard::new(32);
        let mut scan = |w: &str, _: usize| -> Result<Vec<Range<usize>>, String> {
            Ok(w.match_indices("SECRET")
                .map(|(i, m)| i..i + m.len())
                .collect())
        };
        let mut p = SseParser::new();
        let evs = p.push(b"data: the SECRET is out\n\n").expect("bounded");
        let mut blocked = false;
        for ev in evs {
            if g.push(ev, &mut scan).is_err() {
                blocked = true;
            }
        }
        assert!(blocked || g.finish(&mut scan).is_err());
    }

    #[test]
    fn failing_scan_blocks() {
        let mut g = StreamGuard::new(16);
        let mut scan =
            |_: &str, _: usize| -> Result<Vec<Range<usize>>, String> { Err("boom".into()) };
        let mut p = SseParser::new();
        let mut evs = p.push(chat_event("hello").as_bytes()).expect("bounded");
        let ev = evs.remove(0);
        assert!(
            g.push(ev, &mut scan)
                .expect("held, not scanned yet")
                .is_empty()
        );
        assert!(g.finish(&mut scan).is_err());
    }
}
