//! The server side of the integration tests: start the real server on a loopback port, talk
//! to it with reqwest, stop it.
//!
#![allow(dead_code, clippy::unwrap_used)]

use rampart_core::Registry;
use rampart_server::config::ServerConfig;
use rampart_server::{AppState, Server, ServerOptions};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// The repository's rules-only pipeline configuration.
pub fn rules_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/rules.toml")
}

/// Writes `src` to `server.toml` in `dir` and loads it.
pub fn write_config(dir: &Path, src: &str) -> ServerConfig {
    let path = dir.join("server.toml");
    std::fs::write(&path, src).unwrap();
    ServerConfig::from_path(&path).unwrap()
}

/// A running server: its loopback address, base URL and state, and the handle to stop it.
pub struct Running {
    /// The loopback address of the listener (also when it listens on all addresses).
    pub addr: SocketAddr,
    /// `http://` or `https://` and `addr`.
    pub base: String,
    pub state: Arc<AppState>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), rampart_server::ServerError>>,
    dir: Option<tempfile::TempDir>,
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The directory the server's configuration was written to.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("started with a directory").path()
    }

    /// Stops the server and checks that it ran to a clean end.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.task.await.unwrap().unwrap();
    }
}

/// Binds and runs a server on a free loopback port with configuration `src` (written to
/// `dir`), the layer kinds of `registry` and the rules-only default pipeline.
pub async fn start_in(dir: tempfile::TempDir, src: &str, registry: Registry) -> Running {
    let mut cfg = write_config(dir.path(), src);
    cfg.server.listen = "127.0.0.1:0".into();
    let opts = ServerOptions {
        registry: Arc::new(registry),
        default_pipeline: rampart_rules::rules_config(),
        reload_on_sighup: false,
    };
    spawn(Server::bind(cfg, opts).await.unwrap(), Some(dir))
}

/// Runs a bound `server` until [`Running::stop`] or until the `Running` is dropped; `dir`
/// (the configuration's directory) is kept as long.
pub fn spawn(server: Server, dir: Option<tempfile::TempDir>) -> Running {
    let scheme = if server.is_tls() { "https" } else { "http" };
    let addr = SocketAddr::from(([127, 0, 0, 1], server.local_addr().port()));
    let state = server.state();
    let (tx, rx) = oneshot::channel();
    let task = tokio::spawn(server.run(async move {
        let _ = rx.await;
    }));
    Running {
        addr,
        base: format!("{scheme}://{addr}"),
        state,
        stop: Some(tx),
        task,
        dir,
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// The `/metrics` page as text.
pub async fn metrics_text(c: &reqwest::Client, s: &Running) -> String {
    c.get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// POSTs `body` as JSON, with `key` as the bearer token; the status and the body (as JSON,
/// or as a JSON string where it is not JSON).
pub async fn post(c: &reqwest::Client, url: &str, key: Option<&str>, body: &Value) -> (u16, Value) {
    let mut r = c.post(url).json(body);
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// An error and its sources joined with `: `, as the CLI prints it (anyhow's `{:#}`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}
