//! A throwaway PostgreSQL cluster for the ignored `postgres::` tests (also used by
//! rampart-cli's tests through `#[path]`): `initdb` into a temporary directory, `postgres`
//! on a free loopback port with its socket in that directory, stopped and deleted on drop.
//!
//! The binaries come from `$RAMPART_TEST_PG_BIN`, else the newest
//! `/usr/lib/postgresql/*/bin` (Debian's `postgresql` package, which `.ci/run` installs).
//! PostgreSQL refuses to run as root: as root (CI, the dev machine) the cluster runs as the
//! `postgres` user through `setpriv`, which execs (so killing the child kills the server).
//! Trust authentication on loopback; the superuser is `rampart`, the database `postgres`.

#![allow(dead_code)] // each test binary uses a part
#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running cluster, stopped (fast shutdown) and deleted on drop.
pub struct PgCluster {
    child: Child,
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// The loopback port.
    pub port: u16,
    /// `postgres://rampart@127.0.0.1:PORT/postgres`.
    pub url: String,
}

fn bin_dir() -> PathBuf {
    if let Some(b) = std::env::var_os("RAMPART_TEST_PG_BIN") {
        return PathBuf::from(b);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, b)| b)
        .expect("PostgreSQL server binaries are needed (Debian: apt-get install postgresql)")
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `bin/name args…`, as the `postgres` user when we are root.
fn command(bin: &Path, name: &str) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=postgres",
            "--regid=postgres",
            "--init-groups",
            "--",
        ]);
        c.arg(bin.join(name));
        c
    } else {
        Command::new(bin.join(name))
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl PgCluster {
    /// Starts a fresh cluster (a few seconds).
    pub fn start() -> PgCluster {
        let bin = bin_dir();
        let dir = tempfile::tempdir().unwrap();
        if is_root() {
            let st = Command::new("chown")
                .arg("postgres:")
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(st.success(), "chown postgres: the postgres user is needed");
        }
        let data = dir.path().join("data");
        let out = command(&bin, "initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "rampart", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A port picked free may be taken by the time the server binds it: try a few.
        for _ in 0..5 {
            let port = free_port();
            let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
            let mut child = command(&bin, "postgres")
                .arg("-D")
                .arg(&data)
                .arg("-k")
                .arg(dir.path())
                .args(["-p", &port.to_string()])
                .args(["-c", "listen_addresses=127.0.0.1"])
                .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
                .args(["-c", "max_connections=200", "-c", "shared_buffers=32MB"])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // exited: the port, most likely
                }
                let ready = Command::new(bin.join("pg_isready"))
                    .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
                    .status()
                    .is_ok_and(|s| s.success());
                if ready {
                    return PgCluster {
                        child,
                        dir,
                        bin,
                        port,
                        url: format!("postgres://rampart@127.0.0.1:{port}/postgres"),
                    };
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
        panic!("postgres did not start; its log:\n{log}");
    }

    /// The URL of database `db` in this cluster.
    pub fn url_for(&self, db: &str) -> String {
        format!("postgres://rampart@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs SQL as the superuser with `psql` (on `db`), returning its output (unaligned,
    /// tuples only); panics on failure.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-d", &self.url_for(db), "-c", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// [`PgCluster::psql`] that may fail: the error output when it does.
    pub fn psql_err(&self, db: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-d", &self.url_for(db), "-c", sql])
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    /// The server's data directory's parent (holds its log, `server.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // Fast shutdown (SIGINT), then SIGKILL if it lingers.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
