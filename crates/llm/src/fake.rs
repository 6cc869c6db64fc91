//! A scripted HTTP/1.1 server on `127.0.0.1` for tests: it answers each request with the next
//! canned [`FakeResponse`] (status, headers, body, optional delay) and records what it got, so
//! every [`crate::Outcome`] can be produced deterministically. Std-only and always compiled so
//! that other crates' tests (the judge layer's) can use it.
//!
//! One connection carries one request (`Connection: close`). When the script runs out the
//! server answers 500 with `{"error": {"message": "fake server: no scripted response left"}}`.
//!
//! ```
//! use rampart_llm::fake::{FakeResponse, FakeServer};
//! let server = FakeServer::start(vec![FakeResponse::openai_text("hi")]).unwrap();
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! assert_eq!(server.request_count(), 0);
//! ```

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// Largest request body the fake accepts (larger requests are cut off).
const MAX_REQUEST_BODY: usize = 8 << 20;

/// One canned response.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeResponse {
    /// HTTP status code.
    pub status: u16,
    /// Headers besides `Content-Length` and `Connection`.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
    /// Wait before answering (after the request was read).
    pub delay: Duration,
}

impl FakeResponse {
    /// A response with a JSON body.
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        FakeResponse {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
            delay: Duration::ZERO,
        }
    }

    /// A response with a raw body and content type.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        FakeResponse {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// An OpenAI chat completion of one token (`finish_reason: length`, usage 10/1) whose
    /// first token's candidates are `top` (token, log-probability), most likely first, as
    /// OpenAI, vLLM and llama.cpp return them for `logprobs: true, top_logprobs: N`.
    pub fn openai_logprobs(top: &[(&str, f64)]) -> Self {
        let first = top.first().map_or("", |t| t.0);
        let candidates: Vec<serde_json::Value> = top
            .iter()
            .map(|(t, lp)| serde_json::json!({"token": t, "logprob": lp, "bytes": t.as_bytes()}))
            .collect();
        Self::json(
            200,
            &serde_json::json!({
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": "fake-model",
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": first},
                    "logprobs": {"content": [{
                        "token": first,
                        "logprob": top.first().map_or(0.0, |t| t.1),
                        "top_logprobs": candidates
                    }]},
                    "finish_reason": "length"
                }],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
            }),
        )
    }

    /// An OpenAI chat completion with `content`, `finish_reason: stop` and usage 10/5.
    pub fn openai_text(content: &str) -> Self {
        Self::openai(Some(content), "stop", Some((10, 5)))
    }

    /// An OpenAI chat completion; `content: None` sends `null`, `usage: None` omits usage.
    pub fn openai(content: Option<&str>, finish_reason: &str, usage: Option<(u64, u64)>) -> Self {
        let mut body = serde_json::json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": "fake-model",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason
            }]
        });
        if let Some((p, c)) = usage {
            body["usage"] = serde_json::json!({
                "prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c
            });
        }
        Self::json(200, &body)
    }

    /// An Anthropic message with one text block, `stop_reason` and usage 12/7.
    pub fn anthropic_text(text: &str, stop_reason: &str) -> Self {
        Self::json(
            200,
            &serde_json::json!({
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": "fake-claude",
                "content": [{"type": "text", "text": text}],
                "stop_reason": stop_reason,
                "usage": {"input_tokens": 12, "output_tokens": 7}
            }),
        )
    }

    /// Add a header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Wait before answering.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// Method, e.g. `POST`.
    pub method: String,
    /// Path and query, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers, names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<FakeResponse>,
    repeat: Option<FakeResponse>,
    requests: Vec<RecordedRequest>,
    in_flight: usize,
    max_in_flight: usize,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The running fake; it stops accepting when dropped.
#[derive(Debug)]
pub struct FakeServer {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    accept: Option<thread::JoinHandle<()>>,
}

impl FakeServer {
    /// Serve `responses` in order, one per request.
    pub fn start(responses: Vec<FakeResponse>) -> std::io::Result<Self> {
        Self::spawn(responses.into(), None)
    }

    /// Serve `response` to every request.
    pub fn start_repeating(response: FakeResponse) -> std::io::Result<Self> {
        Self::spawn(VecDeque::new(), Some(response))
    }

    fn spawn(
        script: VecDeque<FakeResponse>,
        repeat: Option<FakeResponse>,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        {
            let mut st = shared.lock();
            st.script = script;
            st.repeat = repeat;
        }
        let sh = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name("fake-llm-accept".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if sh.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = conn else { continue };
                    let sh2 = Arc::clone(&sh);
                    // A failed spawn drops the connection; the client sees an HTTP error.
                    let _ = thread::Builder::new()
                        .name("fake-llm-conn".into())
                        .spawn(move || handle(stream, &sh2));
                }
            })?;
        Ok(FakeServer {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// A base URL ending in `/v1`, for an [`crate::LlmConfig`].
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Number of requests received so far.
    pub fn request_count(&self) -> usize {
        self.shared.lock().requests.len()
    }

    /// Most requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.shared.lock().max_in_flight
    }

    /// Block until at least `n` requests have arrived or `timeout` passed; whether they did.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        while st.requests.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// A base URL on which nothing listens (a port bound and released), for "server down".
    pub fn down_url() -> std::io::Result<String> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let addr = l.local_addr()?;
        drop(l);
        Ok(format!("http://{addr}/v1"))
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn handle(stream: TcpStream, shared: &Shared) {
    let Some(req) = read_request(&stream) else {
        return;
    };
    let resp = {
        let mut st = shared.lock();
        st.requests.push(req);
        st.in_flight += 1;
        st.max_in_flight = st.max_in_flight.max(st.in_flight);
        let next = st.script.pop_front().or_else(|| st.repeat.clone());
        shared.changed.notify_all();
        next.unwrap_or_else(|| {
            FakeResponse::json(
                500,
                &serde_json::json!({"error": {"message": "fake server: no scripted response left"}}),
            )
        })
    };
    if !resp.delay.is_zero() {
        thread::sleep(resp.delay);
    }
    // Counted out before the answer is written: the client releases its concurrency slot only
    // after reading it, so a request counted here never overlaps its successor spuriously.
    {
        let mut st = shared.lock();
        st.in_flight = st.in_flight.saturating_sub(1);
    }
    let _ = write_response(&stream, &resp);
    let _ = stream.shutdown(Shutdown::Write);
}

fn read_request(stream: &TcpStream) -> Option<RecordedRequest> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    let mut content_length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            let n = n.trim().to_ascii_lowercase();
            let v = v.trim().to_string();
            if n == "content-length" {
                content_length = v.parse().unwrap_or(0);
            }
            headers.push((n, v));
        }
    }
    let mut body = vec![0u8; content_length.min(MAX_REQUEST_BODY)];
    reader.read_exact(&mut body).ok()?;
    Some(RecordedRequest {
        method,
        path,
        headers,
        body,
    })
}

fn write_response(mut stream: &TcpStream, resp: &FakeResponse) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", resp.status, reason(resp.status));
    for (n, v) in &resp.headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        resp.body.len()
    ));
    stream.write_all(head.as_bytes())?;
    stream.write_all(&resp.body)?;
    stream.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
