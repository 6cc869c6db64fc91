//! Regression tests for what a security probe found: slow and partial clients holding
//! connections, no connection cap, a reload dropping authentication on a public address, rule
//! packs failing their own examples going live, and unlimited failed authentications.
#![allow(clippy::unwrap_used)]

use crate::server;
use rampart_server::config::{ServerConfig, hash_api_key};
use rampart_server::{Server, ServerOptions};
use serde_json::{Value, json};
use server::{Running, client, error_chain, metrics_text, post, rules_config, spawn, write_config};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const ADMIN_KEY: &str = "admin-secret-key-0001";
const USER_KEY: &str = "user-secret-key-0002";

fn keys_toml() -> String {
    format!(
        "[[auth.keys]]\nid = \"admin\"\nsha256 = \"{}\"\nadmin = true\n\
         [[auth.keys]]\nid = \"user\"\nsha256 = \"{}\"\n",
        hash_api_key(ADMIN_KEY),
        hash_api_key(USER_KEY)
    )
}

/// Writes `src` to `server.toml` in `dir` and serves it on `listen` (port 0).
async fn start_in(dir: tempfile::TempDir, src: &str, listen: &str) -> Running {
    let mut cfg = write_config(dir.path(), src);
    // What `--listen` does: the listener's address does not come from the file.
    cfg.server.listen = listen.into();
    cfg.validate("--listen").unwrap();
    let server = Server::bind(cfg, ServerOptions::rules_only())
        .await
        .unwrap();
    spawn(server, Some(dir))
}

async fn start(server_section: &str) -> Running {
    let src = format!(
        "version = 1\n[server]\n{server_section}\n[pipeline]\npath = {:?}\n",
        rules_config().display().to_string()
    );
    start_in(tempfile::tempdir().unwrap(), &src, "127.0.0.1:0").await
}

/// Whether the server closed `s` within `within`: a read returns end-of-file or a reset.
/// (Nothing is ever sent to these sockets, so any data is also a failure.)
fn closed_by_server(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

/// A request head cut short, as a client that stalls sends it.
const PARTIAL_HEAD: &[u8] = b"POST /v1/scan HTTP/1.1\r\nHost: rampart\r\nContent-Type: app";

/// Regression: a client sending one header byte per second, or a partial request, kept its
/// connection open forever. Now the header deadline closes them, and meanwhile a normal
/// client is answered at once.
#[tokio::test]
async fn slow_and_partial_clients_are_cut_off_while_others_are_served() {
    let s = start("header_read_timeout_ms = 1500\nidle_timeout_ms = 60000").await;
    let addr = s.addr;
    // Blocking sockets on their own threads: four partial heads, four slow ones.
    let held = std::thread::spawn(move || {
        let started = Instant::now();
        let mut partial: Vec<TcpStream> = (0..4)
            .map(|_| {
                let mut t = TcpStream::connect(addr).unwrap();
                t.write_all(PARTIAL_HEAD).unwrap();
                t
            })
            .collect();
        let slow: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut t = TcpStream::connect(addr).unwrap();
                    let started = Instant::now();
                    // One header byte per second, until the server hangs up (or 20 s).
                    for b in PARTIAL_HEAD.iter().cycle().take(20) {
                        if t.write_all(&[*b]).is_err()
                            || closed_by_server(&mut t, Duration::from_secs(1))
                        {
                            return Some(started.elapsed());
                        }
                    }
                    None
                })
            })
            .collect();
        let partial_closed: Vec<bool> = partial
            .iter_mut()
            .map(|t| closed_by_server(t, Duration::from_secs(15)))
            .collect();
        let partial_took = started.elapsed();
        let slow_closed: Vec<Option<Duration>> =
            slow.into_iter().map(|h| h.join().unwrap()).collect();
        (partial_closed, partial_took, slow_closed)
    });
    // While they hold their sockets, a normal client gets its answer (the bound is generous:
    // the point is that it does not wait for the slow ones).
    let c = client();
    let t = Instant::now();
    let (st, v) = post(
        &c,
        &s.url("/v1/scan"),
        None,
        &json!({"text": "hello there"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    let (partial_closed, partial_took, slow_closed) =
        tokio::task::spawn_blocking(move || held.join().unwrap())
            .await
            .unwrap();
    assert!(
        partial_closed.iter().all(|&c| c),
        "partial requests must be closed by the header deadline: {partial_closed:?}"
    );
    assert!(partial_took < Duration::from_secs(15), "{partial_took:?}");
    for took in &slow_closed {
        // Cut off by the 1.5 s header deadline although a byte arrives every second.
        let took = took.expect("a one-byte-per-second client must be cut off");
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
    s.stop().await;
}

/// Regression: there was no connection cap. Over `server.max_connections`, a new connection
/// is closed at once while the held ones exist; once one closes, new clients are served.
#[tokio::test]
async fn over_the_connection_cap_new_connections_are_refused_at_once() {
    let s = start("max_connections = 4\nheader_read_timeout_ms = 60000").await;
    let addr = s.addr;
    let c = client();
    let outcome = tokio::task::spawn_blocking(move || {
        // Connected before the next one, so accepted (in order) before it.
        let mut held: Vec<TcpStream> = (0..4)
            .map(|_| {
                let mut t = TcpStream::connect(addr).unwrap();
                t.write_all(PARTIAL_HEAD).unwrap();
                t
            })
            .collect();
        let mut extra = TcpStream::connect(addr).unwrap();
        let t = Instant::now();
        let refused = closed_by_server(&mut extra, Duration::from_secs(10));
        let refused_in = t.elapsed();
        // The held ones are still open (the header deadline is a minute away).
        let still_open = !closed_by_server(&mut held[0], Duration::from_millis(200));
        drop(held.pop());
        (refused, refused_in, still_open, held)
    })
    .await
    .unwrap();
    let (refused, refused_in, still_open, held) = outcome;
    assert!(refused, "a connection over the cap must be closed at once");
    assert!(refused_in < Duration::from_secs(5), "{refused_in:?}");
    assert!(still_open);
    // A slot is free again once the server has seen the close: poll for it (bounded).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.get(s.url("/healthz")).send().await {
            Ok(r) if r.status() == 200 => break,
            _ if Instant::now() < deadline => tokio::task::yield_now().await,
            other => panic!("no slot freed: {other:?}"),
        }
    }
    drop(held);
    let m = metrics_text(&c, &s).await;
    assert!(m.contains("rampart_connections_refused_total"), "{m}");
    s.stop().await;
}

/// Review finding: one client address holding partial requests could take every slot of
/// `server.max_connections`, so the cap only moved the denial of service. Past
/// `server.max_connections_per_client` its new connections are closed at once, while another
/// address is still served.
#[tokio::test]
async fn one_client_cannot_take_every_connection_slot() {
    let s = start(
        "max_connections = 64\nmax_connections_per_client = 3\nheader_read_timeout_ms = 60000",
    )
    .await;
    let addr = s.addr;
    let (refused, held) = tokio::task::spawn_blocking(move || {
        let held: Vec<TcpStream> = (0..3)
            .map(|_| {
                let mut t = TcpStream::connect(addr).unwrap();
                t.write_all(PARTIAL_HEAD).unwrap();
                t
            })
            .collect();
        let mut extra = TcpStream::connect(addr).unwrap();
        (closed_by_server(&mut extra, Duration::from_secs(10)), held)
    })
    .await
    .unwrap();
    assert!(
        refused,
        "a fourth connection from one address must be closed at once"
    );
    // Another address still gets its answer while the first one holds its three.
    let other = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let r = other.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    // Once the first address closes one, it may open one again (bounded poll: the server
    // frees the slot when it sees the close).
    drop(held);
    let c = client();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.get(s.url("/healthz")).send().await {
            Ok(r) if r.status() == 200 => break,
            _ if Instant::now() < deadline => tokio::task::yield_now().await,
            other => panic!("no slot freed: {other:?}"),
        }
    }
    s.stop().await;
}

/// Regression: a body trickled (or never finished) held the request forever. Past
/// `server.body_read_timeout_ms` it is answered 408 and the connection closed.
#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_gets_408() {
    let s = start("body_read_timeout_ms = 1000").await;
    let addr = s.addr;
    let resp = tokio::task::spawn_blocking(move || {
        let mut t = TcpStream::connect(addr).unwrap();
        t.write_all(
            b"POST /v1/scan HTTP/1.1\r\nHost: rampart\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{\"text\": \"hel",
        )
        .unwrap();
        t.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut out = Vec::new();
        let _ = t.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    })
    .await
    .unwrap();
    assert!(resp.starts_with("HTTP/1.1 408"), "{resp}");
    assert!(resp.contains("request_timeout"), "{resp}");
    s.stop().await;
}

/// Regression: an idle keep-alive connection stayed open forever. It is closed after
/// `server.idle_timeout_ms`, independently of the (longer) header deadline.
#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let s = start("idle_timeout_ms = 500\nheader_read_timeout_ms = 60000").await;
    let addr = s.addr;
    let (first, closed) = tokio::task::spawn_blocking(move || {
        let mut t = TcpStream::connect(addr).unwrap();
        t.write_all(b"GET /healthz HTTP/1.1\r\nHost: rampart\r\n\r\n")
            .unwrap();
        t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 1024];
        let n = t.read(&mut buf).unwrap();
        let first = String::from_utf8_lossy(&buf[..n]).into_owned();
        (first, closed_by_server(&mut t, Duration::from_secs(10)))
    })
    .await
    .unwrap();
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(closed, "an idle keep-alive connection must be closed");
    s.stop().await;
}

/// Regression: started with keys and `--listen 0.0.0.0:PORT`, a reload of a file without
/// keys (whose own `listen` is loopback) was accepted, and requests without a key got 200.
#[tokio::test]
async fn reload_cannot_drop_keys_on_a_public_listener() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!(
        "version = 1\n[server]\nlisten = \"127.0.0.1:0\"\n[pipeline]\npath = {:?}\n{}",
        rules_config().display().to_string(),
        keys_toml()
    );
    let s = start_in(dir, &src, "0.0.0.0:0").await;
    let c = client();
    let body = json!({"text": "hello there"});
    let (st, _) = post(&c, &s.url("/v1/scan"), None, &body).await;
    assert_eq!(st, 401);
    // The keys go from the file; its own listen is loopback, so the file alone is valid.
    let open = format!(
        "version = 1\n[server]\nlisten = \"127.0.0.1:0\"\n[pipeline]\npath = {:?}\n",
        rules_config().display().to_string()
    );
    std::fs::write(s.dir().join("server.toml"), &open).unwrap();
    ServerConfig::parse(&open, "server.toml").unwrap();
    let (st, v) = post(&c, &s.url("/admin/reload"), Some(ADMIN_KEY), &json!({})).await;
    assert_eq!(st, 422, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("without authentication"), "{msg}");
    // The old configuration keeps serving: still no entry without a key.
    let (st, _) = post(&c, &s.url("/v1/scan"), None, &body).await;
    assert_eq!(st, 401);
    let (st, _) = post(&c, &s.url("/v1/scan"), Some(USER_KEY), &body).await;
    assert_eq!(st, 200);
    s.stop().await;
}

const EMPTY_PACK: &str = "schema_version = 1\n[pack]\nname = \"extra\"\nversion = \"0\"\n";

/// A rule whose pattern has a typo: its own `must_match` example does not match.
const TYPO_PACK: &str = r#"schema_version = 1
[pack]
name = "extra"
version = "1"
[[rules]]
id = "CTRL_950"
kind = "literal"
patterns = ["zebra protocl seven"]
strength = "strong"
severity = "high_risk"
rationale = "a typo in the pattern"
must_match = ["use the zebra protocol seven"]
must_not_match = ["a zebra at the zoo"]
"#;

/// Regression: `POST /admin/reload` (and start-up) accepted a pack that fails its own
/// examples, which `rampart rules test` rejects.
#[tokio::test]
async fn a_pack_failing_its_examples_is_refused_at_reload_and_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("extra.toml"), EMPTY_PACK).unwrap();
    let src = format!(
        "version = 1\n[pipeline]\npath = {:?}\npacks = [\"extra.toml\"]\n{}",
        rules_config().display().to_string(),
        keys_toml()
    );
    let s = start_in(dir, &src, "127.0.0.1:0").await;
    let c = client();
    std::fs::write(s.dir().join("extra.toml"), TYPO_PACK).unwrap();
    let (st, v) = post(&c, &s.url("/admin/reload"), Some(ADMIN_KEY), &json!({})).await;
    assert_eq!(st, 422, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("CTRL_950"), "{msg}");
    assert!(msg.contains("use the zebra protocol seven"), "{msg}");
    let (st, v) = post(
        &c,
        &s.url("/v1/scan"),
        Some(USER_KEY),
        &json!({"text": "hi"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");

    // Start-up refuses it too.
    let cfg = ServerConfig::from_path(&s.dir().join("server.toml")).unwrap();
    let err = Server::bind(cfg, ServerOptions::rules_only())
        .await
        .unwrap_err();
    let chain = error_chain(&err);
    assert!(chain.contains("CTRL_950"), "{chain}");
    s.stop().await;
}

/// Regression: 300 wrong keys in a row were never limited. Failed authentications are
/// limited per client address (429 with Retry-After); other addresses are unaffected.
#[tokio::test]
async fn failed_authentications_are_limited_per_client_address() {
    let src = format!(
        "version = 1\n[pipeline]\npath = {:?}\n{}",
        rules_config().display().to_string(),
        keys_toml()
    );
    let s = start_in(tempfile::tempdir().unwrap(), &src, "127.0.0.1:0").await;
    let c = client();
    let body = json!({"text": "hello there"});
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for i in 0..300 {
        let resp = c
            .post(s.url("/v1/scan"))
            .bearer_auth(format!("wrong-key-{i}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        if resp.status() == 429 {
            retry_after = resp.headers().get("retry-after").cloned();
            let v: Value = resp.json().await.unwrap();
            assert_eq!(v["error"]["code"], "too_many_failed_authentications", "{v}");
            statuses.push(429);
            continue;
        }
        statuses.push(resp.status().as_u16());
    }
    let first_429 = statuses.iter().position(|&s| s == 429);
    assert!(first_429.is_some(), "300 wrong keys were never limited");
    assert!(first_429.unwrap() <= 10, "{statuses:?}");
    assert!(statuses[first_429.unwrap()..].iter().all(|&s| s == 429));
    let secs: u64 = retry_after.unwrap().to_str().unwrap().parse().unwrap();
    assert!(secs >= 1);
    // The limited address is refused even with a valid key (guessing must not pay off)…
    let (st, _) = post(&c, &s.url("/v1/scan"), Some(USER_KEY), &body).await;
    assert_eq!(st, 429);
    // … while a valid key from another address is served.
    let other = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let (st, v) = post(&other, &s.url("/v1/scan"), Some(USER_KEY), &body).await;
    assert_eq!(st, 200, "{v}");
    s.stop().await;
}

/// A TLS client that never finishes its handshake is cut off by the header deadline (the
/// handshake was bounded by a fixed 10 s; it now follows `server.header_read_timeout_ms`).
#[tokio::test]
async fn tls_handshakes_are_bounded_by_the_header_deadline() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.path().join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    let src = format!(
        "version = 1\n[server]\nheader_read_timeout_ms = 500\n\
         [tls]\ncert = \"cert.pem\"\nkey = \"key.pem\"\n[pipeline]\npath = {:?}\n",
        rules_config().display().to_string()
    );
    let s = start_in(dir, &src, "127.0.0.1:0").await;
    let addr = s.addr;
    let (closed, took) = tokio::task::spawn_blocking(move || {
        let mut t = TcpStream::connect(addr).unwrap();
        // The first bytes of a ClientHello record, then nothing.
        t.write_all(&[0x16, 0x03, 0x01]).unwrap();
        let started = Instant::now();
        (
            closed_by_server(&mut t, Duration::from_secs(20)),
            started.elapsed(),
        )
    })
    .await
    .unwrap();
    assert!(closed, "a stalled TLS handshake must be cut off");
    assert!(took < Duration::from_secs(8), "{took:?}");
    s.stop().await;
}

/// HTTP/2 (prior knowledge) is served through the same loop, several requests on one
/// connection.
#[tokio::test]
async fn http2_requests_are_served() {
    let s = start("").await;
    let c = reqwest::Client::builder()
        .http2_prior_knowledge()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    for _ in 0..3 {
        let r = c.get(s.url("/healthz")).send().await.unwrap();
        assert_eq!(r.version(), reqwest::Version::HTTP_2);
        assert_eq!(r.status(), 200);
    }
    let (st, v) = post(
        &c,
        &s.url("/v1/scan"),
        None,
        &json!({"text": "hello there"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    s.stop().await;
}

/// Issue 35 (15): the audit database was created mode 0644, and `/metrics` and
/// `/openapi.json` answered without a key when keys were configured. Files are now created
/// 0600; the operations pages need a key unless `[auth] open_operations` opens them
/// (default: loopback clients only).
#[tokio::test]
async fn regression_operations_pages_and_files_are_not_open_to_everyone() {
    let get = |s: &Running, path: &str, key: Option<&str>| {
        let mut r = client().get(s.url(path));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        r.send()
    };
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.db");
    let src = format!(
        "version = 1\n[pipeline]\npath = {:?}\n[audit]\npath = {:?}\n{}[auth]\nopen_operations = \"never\"\n",
        rules_config().display().to_string(),
        audit.display().to_string(),
        keys_toml()
    );
    let s = start_in(dir, &src, "127.0.0.1:0").await;
    for path in ["/metrics", "/openapi.json"] {
        assert_eq!(
            get(&s, path, None).await.unwrap().status().as_u16(),
            401,
            "{path}"
        );
        assert_eq!(
            get(&s, path, Some(USER_KEY))
                .await
                .unwrap()
                .status()
                .as_u16(),
            200,
            "{path}"
        );
        assert_eq!(
            get(&s, path, Some("wrong"))
                .await
                .unwrap()
                .status()
                .as_u16(),
            401,
            "{path}"
        );
    }
    assert_eq!(
        get(&s, "/healthz", None).await.unwrap().status().as_u16(),
        200
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&audit).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "audit.db mode {mode:o}");
    }
    // The default: loopback clients read them without a key.
    let dir = tempfile::tempdir().unwrap();
    let src = format!(
        "version = 1\n[pipeline]\npath = {:?}\n{}",
        rules_config().display().to_string(),
        keys_toml()
    );
    let s = start_in(dir, &src, "127.0.0.1:0").await;
    assert_eq!(
        get(&s, "/metrics", None).await.unwrap().status().as_u16(),
        200
    );
}
