//! The accept loop and what bounds a connection: `server.max_connections` and
//! `server.max_connections_per_client` (beyond either a connection is closed as soon as it is
//! accepted), the TLS handshake and request-head deadline (`server.header_read_timeout_ms`),
//! the keep-alive idle deadline (`server.idle_timeout_ms`) and the request-body deadline
//! (`server.body_read_timeout_ms`, 408). A slow or silent client holds each connection slot
//! for a bounded time, and one client address never holds more than
//! `max_connections_per_client` of them, so it cannot take all of `max_connections`.
//!
//! Each connection is served by hyper (HTTP/1.1 or HTTP/2, as the client speaks) in its own
//! task, next to a watchdog that closes it when the deadline of its current phase passes:
//!
//! - *head*: from the accept (or the first byte after an idle spell) until hyper hands a
//!   complete request head to the service, `header_read_timeout_ms`;
//! - *busy*: requests in flight; no connection deadline (each request body has its own, and
//!   the pipeline and the upstream have theirs);
//! - *idle*: nothing in flight, waiting for the next request's first byte, `idle_timeout_ms`.

use crate::state::AppState;
use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, Response, StatusCode, Version, header};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;

/// The deadlines of one connection (read from the configuration in force when it is
/// accepted).
#[derive(Debug, Clone, Copy)]
struct Deadlines {
    header: Duration,
    idle: Duration,
    body: Duration,
}

impl Deadlines {
    fn from_config(s: &crate::config::ServerSection) -> Deadlines {
        Deadlines {
            header: Duration::from_millis(s.header_read_timeout_ms),
            idle: Duration::from_millis(s.idle_timeout_ms),
            body: Duration::from_millis(s.body_read_timeout_ms),
        }
    }
}

/// Serves `listener` until `shutdown` resolves; then stops accepting, lets every open
/// connection finish its requests in flight, and returns when all are closed. The caller
/// bounds the drain (dropping this future aborts the remaining connections).
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(state.config().server.max_connections));
    let per_client = ClientSlots::new(state.config().server.max_connections_per_client);
    let (stop_tx, stop_rx) = watch::channel(false);
    let shared = Shared {
        app,
        state: state.clone(),
        tls,
        stop: stop_rx,
    };
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let (tcp, peer) = match accepted {
                    Ok(c) => c,
                    Err(e) => {
                        accept_failed(e).await;
                        continue;
                    }
                };
                // Refused at once: no task, no buffer, no handshake for a connection over
                // the cap (a 503 would need a TLS handshake first, the very work the cap
                // bounds). The client sees the connection close and may retry.
                let Some(client_slot) = per_client.try_take(peer.ip()) else {
                    state.metrics().connection_refused();
                    tracing::debug!(%peer, "connection refused: server.max_connections_per_client open from this client");
                    drop(tcp);
                    continue;
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    state.metrics().connection_refused();
                    tracing::debug!(%peer, "connection refused: server.max_connections open");
                    drop(tcp);
                    continue;
                };
                // Responses are written whole (head and body in one write), so Nagle's
                // algorithm could only delay them behind the peer's delayed ACK.
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                }
                let deadlines = Deadlines::from_config(&state.config().server);
                conns.spawn(connection(tcp, peer, shared.clone(), deadlines, (slot, client_slot)));
            }
        }
    }
    drop(listener);
    tracing::info!("shutting down: draining in-flight requests");
    let _ = stop_tx.send(true);
    while conns.join_next().await.is_some() {}
}

/// An accept error: the per-connection ones (reset before accept) are ignored; the others
/// (out of file descriptors) pause accepting briefly instead of spinning.
async fn accept_failed(e: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// What every connection holds a copy of.
#[derive(Clone)]
struct Shared {
    app: Router,
    state: Arc<AppState>,
    tls: Option<TlsAcceptor>,
    /// Turns true when the server shuts down.
    stop: watch::Receiver<bool>,
}

/// Open connections per client address (see [`crate::auth::client_key`]): at most `limit`
/// each. The map holds only addresses with a connection open, so it is bounded by
/// `server.max_connections` plus the connections refused at this moment.
#[derive(Debug, Clone)]
struct ClientSlots {
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
    limit: usize,
}

impl ClientSlots {
    fn new(limit: usize) -> ClientSlots {
        ClientSlots {
            open: Arc::new(Mutex::new(HashMap::new())),
            limit,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for a connection from `ip`, or `None` when that client has `limit` open.
    fn try_take(&self, ip: IpAddr) -> Option<ClientSlot> {
        let key = crate::auth::client_key(ip);
        let mut open = self.lock();
        let n = open.entry(key).or_insert(0);
        if *n >= self.limit {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            slots: self.clone(),
            key,
        })
    }
}

/// One connection's place under `server.max_connections_per_client`, given back on drop.
#[derive(Debug)]
struct ClientSlot {
    slots: ClientSlots,
    key: IpAddr,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.slots.lock();
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// One connection: the TLS handshake (bounded by the head deadline), then hyper under the
/// watchdog. `_slots` are its places under `server.max_connections` and
/// `server.max_connections_per_client`, given back on return.
async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    shared: Shared,
    deadlines: Deadlines,
    _slots: (OwnedSemaphorePermit, ClientSlot),
) {
    match shared.tls.clone() {
        None => serve_io(tcp, peer, shared, deadlines).await,
        Some(acc) => match tokio::time::timeout(deadlines.header, acc.accept(tcp)).await {
            Ok(Ok(io)) => serve_io(io, peer, shared, deadlines).await,
            Ok(Err(e)) => tracing::debug!(error = %e, %peer, "TLS handshake failed"),
            Err(_) => {
                shared.state.metrics().connection_timed_out("tls");
                tracing::debug!(%peer, "TLS handshake timed out");
            }
        },
    }
}

async fn serve_io<I>(io: I, peer: SocketAddr, shared: Shared, deadlines: Deadlines)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Shared {
        app,
        state,
        mut stop,
        ..
    } = shared;
    let phase = Arc::new(PhaseWatch::new(deadlines));
    let io = TokioIo::new(Watched {
        inner: io,
        phase: phase.clone(),
    });
    let svc = {
        let phase = phase.clone();
        let state = state.clone();
        tower::service_fn(move |req: Request<Incoming>| {
            handle(
                req,
                peer,
                app.clone(),
                state.clone(),
                phase.clone(),
                deadlines.body,
            )
        })
    };
    let svc = hyper_util::service::TowerToHyperService::new(svc);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // The deadlines are the watchdog's (hyper's own header timeout would also count the idle
    // wait between requests, and needs a timer this builder does not have).
    builder.http1().header_read_timeout(None);
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    let mut draining = *stop.borrow();
    if draining {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let wake = phase.next_check(Instant::now());
        tokio::select! {
            res = conn.as_mut() => {
                if let Err(e) = res {
                    tracing::debug!(error = %e, %peer, "connection ended with an error");
                }
                return;
            }
            changed = stop.changed(), if !draining => {
                draining = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
            () = tokio::time::sleep_until(wake) => {
                if let Some(reason) = phase.expired(Instant::now()) {
                    state.metrics().connection_timed_out(reason);
                    tracing::debug!(%peer, reason, "closing the connection: deadline passed");
                    return;
                }
            }
        }
    }
}

/// One request: the peer address as [`ConnectInfo`], the body under its deadline, and the
/// connection kept busy until the response body is done.
async fn handle(
    mut req: Request<Incoming>,
    peer: SocketAddr,
    app: Router,
    state: Arc<AppState>,
    phase: Arc<PhaseWatch>,
    body_deadline: Duration,
) -> Result<Response<axum::body::Body>, Infallible> {
    let ticket = InFlight::start(phase);
    let late = Arc::new(AtomicBool::new(false));
    let http1 = req.version() <= Version::HTTP_11;
    req.extensions_mut().insert(ConnectInfo(peer));
    let req = req.map(|body| DeadlineBody {
        inner: body,
        deadline: Instant::now() + body_deadline,
        sleep: None,
        late: late.clone(),
    });
    let resp = match tower::ServiceExt::oneshot(app, req).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let resp = if late.load(Ordering::Relaxed) {
        state.metrics().connection_timed_out("body");
        body_timeout_response(http1)
    } else {
        resp
    };
    Ok(resp.map(|inner| {
        axum::body::Body::new(TicketBody {
            inner,
            _ticket: ticket,
        })
    }))
}

/// 408 in the service's error shape; on HTTP/1 the connection is closed after it (what is
/// left of the body is not worth reading).
fn body_timeout_response(http1: bool) -> Response<axum::body::Body> {
    let body = serde_json::json!({"error": {
        "message": "the request body did not arrive within server.body_read_timeout_ms",
        "type": "invalid_request_error",
        "code": "request_timeout",
    }});
    let mut resp = Response::new(axum::body::Body::from(body.to_string()));
    *resp.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if http1 {
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// Where a connection is, and so which deadline applies.
#[derive(Debug, Clone, Copy)]
enum Phase {
    Head { deadline: Instant },
    Busy { in_flight: usize },
    Idle { deadline: Instant },
}

#[derive(Debug)]
struct PhaseWatch {
    phase: Mutex<Phase>,
    /// Set while idle, so that reads check the phase without the lock otherwise.
    idle: AtomicBool,
    deadlines: Deadlines,
}

impl PhaseWatch {
    fn new(deadlines: Deadlines) -> PhaseWatch {
        PhaseWatch {
            phase: Mutex::new(Phase::Head {
                deadline: Instant::now() + deadlines.header,
            }),
            idle: AtomicBool::new(false),
            deadlines,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When the watchdog should look again: the current deadline, but never later than one
    /// period (the shorter of the header and idle timeouts) from `now`. Phase changes then
    /// need no wake-up: a deadline set after this check is at least one period away from
    /// it (a head's starts at its first byte, an idle spell's at its last response), so the
    /// next check comes no later than that deadline.
    fn next_check(&self, now: Instant) -> Instant {
        let period = now + self.deadlines.header.min(self.deadlines.idle);
        match *self.lock() {
            Phase::Head { deadline } | Phase::Idle { deadline } => deadline.min(period),
            Phase::Busy { .. } => period,
        }
    }

    /// Which deadline passed, if one did.
    fn expired(&self, now: Instant) -> Option<&'static str> {
        match *self.lock() {
            Phase::Head { deadline } if deadline <= now => Some("header"),
            Phase::Idle { deadline } if deadline <= now => Some("idle"),
            _ => None,
        }
    }

    /// Bytes arrived: an idle connection starts reading a request head.
    fn on_read(&self) {
        if !self.idle.load(Ordering::Relaxed) {
            return;
        }
        let mut p = self.lock();
        if let Phase::Idle { .. } = *p {
            *p = Phase::Head {
                deadline: Instant::now() + self.deadlines.header,
            };
            self.idle.store(false, Ordering::Relaxed);
        }
    }

    fn request_started(&self) {
        let mut p = self.lock();
        *p = match *p {
            Phase::Busy { in_flight } => Phase::Busy {
                in_flight: in_flight + 1,
            },
            Phase::Head { .. } | Phase::Idle { .. } => Phase::Busy { in_flight: 1 },
        };
        self.idle.store(false, Ordering::Relaxed);
    }

    fn request_finished(&self) {
        let mut p = self.lock();
        if let Phase::Busy { in_flight } = *p {
            if in_flight > 1 {
                *p = Phase::Busy {
                    in_flight: in_flight - 1,
                };
            } else {
                *p = Phase::Idle {
                    deadline: Instant::now() + self.deadlines.idle,
                };
                self.idle.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// A request in flight on its connection, from its head until its response body is done
/// (or dropped).
struct InFlight(Arc<PhaseWatch>);

impl InFlight {
    fn start(phase: Arc<PhaseWatch>) -> InFlight {
        phase.request_started();
        InFlight(phase)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// A response body that keeps its request counted in flight until it is done.
struct TicketBody {
    inner: axum::body::Body,
    _ticket: InFlight,
}

impl HttpBody for TicketBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Why a request body stopped.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    /// The connection failed.
    #[error("cannot read the request body")]
    Read(#[source] hyper::Error),
    /// `server.body_read_timeout_ms` passed.
    #[error("the request body did not arrive within server.body_read_timeout_ms")]
    Deadline,
}

/// A request body that fails once its deadline passes (and marks the request late, for the
/// 408). The timer is armed only when the body is not already there.
struct DeadlineBody {
    inner: Incoming,
    deadline: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    late: Arc<AtomicBool>,
}

impl HttpBody for DeadlineBody {
    type Data = bytes::Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|r| r.map_err(BodyError::Read)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            this.late.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(BodyError::Deadline)));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The connection's stream, telling the watchdog when bytes arrive.
struct Watched<I> {
    inner: I,
    phase: Arc<PhaseWatch>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.phase.on_read();
        }
        res
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn watch() -> PhaseWatch {
        PhaseWatch::new(Deadlines {
            header: 10 * S,
            idle: 30 * S,
            body: 30 * S,
        })
    }

    #[test]
    fn each_phase_has_its_deadline() {
        let p = watch();
        let t0 = Instant::now();
        assert_eq!(p.expired(t0), None);
        assert_eq!(p.expired(t0 + 11 * S), Some("header"), "the first head");
        p.request_started();
        assert_eq!(p.expired(t0 + 3600 * S), None, "busy: no deadline");
        p.on_read();
        assert_eq!(
            p.expired(t0 + 3600 * S),
            None,
            "reads while busy change nothing"
        );
        p.request_started();
        p.request_finished();
        assert_eq!(
            p.expired(t0 + 3600 * S),
            None,
            "one request still in flight"
        );
        p.request_finished();
        let idle = Instant::now();
        assert_eq!(p.expired(idle + 29 * S), None);
        assert_eq!(p.expired(idle + 31 * S), Some("idle"));
        p.on_read();
        let head = Instant::now();
        assert_eq!(p.expired(head + 9 * S), None);
        assert_eq!(p.expired(head + 11 * S), Some("header"), "a later head");
    }

    #[test]
    fn the_watchdog_looks_at_least_once_a_period() {
        let p = watch();
        let now = Instant::now();
        assert!(p.next_check(now) <= now + 10 * S);
        p.request_started();
        assert_eq!(p.next_check(now), now + 10 * S, "busy: one period");
        p.request_finished();
        assert!(p.next_check(now) <= now + 10 * S);
    }
}
