//! Helpers the test modules share: the binary under test, run with arguments and stdin.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The `rampart` binary, with a fixed hash key.
pub fn rampart() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rampart"));
    c.env("RAMPART_HASH_KEY", "test-key");
    c
}

/// Runs `rampart ARGS`, writing `stdin` (when given) to its standard input.
pub fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = rampart();
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn rampart");
    {
        let mut sin = child.stdin.take().expect("piped stdin");
        if let Some(data) = stdin {
            // Ignore EPIPE: rampart may refuse to read past its limit.
            let _ = sin.write_all(data);
        }
    }
    child.wait_with_output().expect("rampart's output")
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `rampart ARGS` (in `cwd` when given) isolated from the environment: a fixed hash key,
/// no data directory, judge URL or ONNX Runtime library from the caller, no stdin.
pub fn isolated(args: &[&str], cwd: Option<&Path>) -> Output {
    let mut cmd = rampart();
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    cmd.env_remove("RAMPART_DATA_DIR")
        .env_remove("RAMPART_JUDGE_URL")
        .env_remove("ORT_DYLIB_PATH")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("spawn rampart")
}

/// The `layer` of each entry of `v["layers"]` (a decision's layers, a relational report's).
pub fn layer_names(v: &serde_json::Value) -> Vec<&str> {
    v["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .map(|l| l["layer"].as_str().expect("a layer name"))
        .collect()
}

/// Starts `rampart serve --config CONFIG` on a free loopback port, its standard error to
/// `stderr` and `RUST_LOG=log`, and waits for its first line: the child and the address it
/// listens on (`127.0.0.1:PORT`).
pub fn serve(config: &Path, stderr: Stdio, log: &str) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .env_remove("RAMPART_CONFIG")
        .env_remove("RAMPART_LISTEN")
        .env_remove("RAMPART_AUDIT_PATH")
        .env("RUST_LOG", log)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn rampart serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("rampart serve's first line");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, addr)
}
