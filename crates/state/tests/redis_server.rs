//! A throwaway `redis-server` for the ignored `redis::` and `replicas::` tests: a free
//! loopback port, no persistence, stopped on drop. One file shared by the crates whose tests
//! need one (`#[path = "…/crates/state/tests/redis_server.rs"] mod redis_server;`), as
//! `crates/audit/tests/pg_cluster.rs` is for PostgreSQL.

#![allow(dead_code)] // each including test binary uses part of it

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` on a free loopback port, stopped on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its URL (database 0).
    pub url: String,
}

impl RedisServer {
    /// Starts one; panics with what to install when `redis-server` is missing.
    pub fn start() -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is needed (Debian: apt-get install redis-server)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        RedisServer {
            child,
            port,
            url: format!("redis://127.0.0.1:{port}/0"),
        }
    }

    /// `redis-cli -p PORT ARGS…`, its trimmed standard output.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
