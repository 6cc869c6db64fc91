//! The differential suite of issue 35: hostile paths, URLs and addresses (a curated corpus
//! of known tricks and proptest-generated ones) are checked by Rampart's predicates and
//! read by the programs that act on them: Python's `os.path`, `urllib` and `email`, Node's
//! `path` and `URL`, and curl (through a local proxy that records where it would connect).
//! For every value Rampart ALLOWs, no reader may reach outside the policy.
//!
//! Python 3, Node and curl must be installed (`.ci/run` installs Node and curl). To run
//! without Node or curl, name them in `RAMPART_DIFFERENTIAL_SKIP=node,curl`: the test then
//! says what it left out.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use rampart_tools::{Policy, ToolAction, ToolCall};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

const POLICY: &str = r#"
version = 1
[[tools]]
name = "read_file"
risk = "low"
action = "allow"
args.path = { path_under = ["/workspace"] }
[[tools]]
name = "http_get"
risk = "medium"
action = "allow"
args.url = { url_host_in = ["docs.rs", "example.com"] }
[[tools]]
name = "send_email"
risk = "high"
action = "allow"
args.to = { email_domain_in = ["example.com"] }
"#;

const ROOT: &str = "/workspace";
const HOSTS: [&str; 2] = ["docs.rs", "example.com"];
const DOMAIN: &str = "example.com";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Path,
    Url,
    Email,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Path => "path",
            Kind::Url => "url",
            Kind::Email => "email",
        }
    }

    fn call(self, v: &str) -> ToolCall {
        match self {
            Kind::Path => ToolCall::new("read_file", json!({ "path": v })),
            Kind::Url => ToolCall::new("http_get", json!({ "url": v })),
            Kind::Email => ToolCall::new("send_email", json!({ "to": v })),
        }
    }

    /// Whether a reader's reading stays inside the policy.
    fn inside(self, reading: &str) -> bool {
        match self {
            Kind::Path => reading == ROOT || reading.starts_with("/workspace/"),
            Kind::Url => {
                let h = reading.to_ascii_lowercase();
                let h = h.strip_suffix('.').unwrap_or(&h);
                HOSTS.contains(&h)
            }
            // An empty address sends nothing; anything else needs the allowed domain.
            Kind::Email => {
                reading.is_empty()
                    || reading
                        .rsplit_once('@')
                        .is_some_and(|(_, d)| d.eq_ignore_ascii_case(DOMAIN))
            }
        }
    }
}

/// The curated corpus: one `kind<TAB>value` per line, `\n`, `\r`, `\t`, `\\` and `\uXXXX`
/// escaped as in JSON.
fn corpus() -> Vec<(Kind, String)> {
    let text = include_str!("readers/corpus.tsv");
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (kind, value) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("corpus.tsv:{}: no tab", n + 1));
        let kind = match kind {
            "path" => Kind::Path,
            "url" => Kind::Url,
            "email" => Kind::Email,
            other => panic!("corpus.tsv:{}: unknown kind {other}", n + 1),
        };
        let value: String = serde_json::from_str(&format!("\"{value}\""))
            .unwrap_or_else(|e| panic!("corpus.tsv:{}: {e}", n + 1));
        out.push((kind, value));
    }
    out
}

fn pieces(list: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(list), 0..7).prop_map(|v| v.concat())
}

const PATH_PIECES: &[&str] = &[
    "/",
    "//",
    "a",
    "b",
    "etc",
    "passwd",
    "workspace",
    ".",
    "..",
    "...",
    "%2f",
    "%2F",
    "%2e",
    "%252e",
    "%",
    "\\",
    "\u{2215}",
    "\u{FF0F}",
    "\u{FF0E}",
    "\u{2024}",
    "\u{0}",
    "\n",
    " ",
    "~",
    ".git",
    "é",
    "e\u{301}",
    ":",
    "%00",
];
const URL_PIECES: &[&str] = &[
    "docs.rs",
    "example.com",
    "evil.com",
    "127.0.0.1",
    "@",
    ":",
    ":80",
    "/",
    "//",
    "\\",
    "?",
    "#",
    ".",
    "%2f",
    "%40",
    "%2e",
    " ",
    "\t",
    "\n",
    "[",
    "]",
    "::1",
    "\u{FF0E}",
    "\u{3002}",
    "user",
    "x",
    "{",
    "}",
    ",",
    "ｄｏｃｓ",
    "xn--",
    "-",
];
const EMAIL_PIECES: &[&str] = &[
    "a",
    "boss",
    "x",
    "@",
    "example.com",
    "evil.com",
    " ",
    ",",
    ";",
    "<",
    ">",
    "(",
    ")",
    "\"",
    "\\",
    "\n",
    "\r\n",
    ":",
    ".",
    "Bcc: ",
    "%",
    "!",
    "[",
    "]",
    "\u{FF20}",
    "\u{FE64}",
    "'",
];

/// Proptest-generated values: a prefix that looks right and pieces from each kind's
/// alphabet of tricks (seeded: the same values every run).
fn generated(per_kind: u32) -> Vec<(Kind, String)> {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let mut out = Vec::new();
    let path = (
        prop::sample::select(&["/workspace", "/workspace/", "/", ""][..]),
        pieces(PATH_PIECES),
    )
        .prop_map(|(p, rest)| format!("{p}{rest}"));
    // Half the values put nothing before an allowed host, so enough of them pass for the
    // readers to have something to disagree with.
    let url = (
        prop::sample::select(
            &[
                "http://",
                "https://",
                "HTTP://",
                "http:/",
                "http:\\\\",
                "//",
            ][..],
        ),
        prop::option::weighted(0.5, pieces(URL_PIECES)),
        prop::sample::select(&["docs.rs", "example.com", "DOCS.RS", "docs.rs."][..]),
        pieces(URL_PIECES),
    )
        .prop_map(|(p, before, host, rest)| {
            format!("{p}{}{host}{rest}", before.unwrap_or_default())
        });
    let mailbox = (
        prop::option::weighted(0.5, pieces(EMAIL_PIECES)),
        prop::sample::select(&["a", "boss", "x.y", "a+b", "Ann <ann", "\"q\""][..]),
        prop::sample::select(&["example.com", "EXAMPLE.com", "example.com>", "evil.com"][..]),
        prop::option::weighted(0.5, pieces(EMAIL_PIECES)),
    )
        .prop_map(|(pre, local, domain, post)| {
            format!(
                "{}{local}@{domain}{}",
                pre.unwrap_or_default(),
                post.unwrap_or_default()
            )
        });
    let email = prop::collection::vec(mailbox, 1..3).prop_map(|v| v.join(", "));
    for _ in 0..per_kind {
        for (kind, s) in [
            (Kind::Path, path.new_tree(&mut runner).map(|t| t.current())),
            (Kind::Url, url.new_tree(&mut runner).map(|t| t.current())),
            (
                Kind::Email,
                email.new_tree(&mut runner).map(|t| t.current()),
            ),
        ] {
            out.push((kind, s.unwrap_or_else(|e| panic!("generator: {e}"))));
        }
    }
    out
}

/// Runs a reader over the values (JSON lines in, JSON lines out); readings by value index
/// and reader name.
fn read_with(
    program: &str,
    args: &[&str],
    items: &[(Kind, String, bool)],
) -> BTreeMap<(usize, String), Vec<String>> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{program}` ({e}): the differential suite needs it \
                 (or RAMPART_DIFFERENTIAL_SKIP naming it)"
            )
        });
    let mut input = String::new();
    for (i, (kind, v, allowed)) in items.iter().enumerate() {
        input.push_str(
            &json!({"i": i, "kind": kind.name(), "value": v, "curl": allowed}).to_string(),
        );
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    writer
        .join()
        .unwrap_or_else(|_| panic!("writer thread"))
        .unwrap_or_else(|e| panic!("{program} stdin: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        out.status
    );
    let mut readings = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let i = v["i"].as_u64().unwrap_or_else(|| panic!("{line}")) as usize;
        let reader = v["reader"].as_str().unwrap_or_default().to_string();
        let r = v["readings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        readings.insert((i, reader), r);
    }
    readings
}

#[test]
fn no_reader_reaches_outside_what_rampart_allowed() {
    let policy = Policy::from_toml(POLICY).unwrap_or_else(|e| panic!("{e}"));
    let ctx = rampart_tools::CallContext::default();
    let mut values = corpus();
    values.extend(generated(700));
    let items: Vec<(Kind, String, bool)> = values
        .into_iter()
        .map(|(k, v)| {
            let allowed = policy.check(&k.call(&v), &ctx).action == ToolAction::Allow;
            (k, v, allowed)
        })
        .collect();

    let skip = std::env::var("RAMPART_DIFFERENTIAL_SKIP").unwrap_or_default();
    let skipped = |name: &str| skip.split(',').any(|s| s.trim() == name);
    let script = |f: &str| format!("{}/tests/readers/{f}", env!("CARGO_MANIFEST_DIR"));
    let py = script("readers.py");
    let mut py_args = vec![py.as_str()];
    if !skipped("curl") {
        py_args.push("--curl");
    }
    let mut readings = read_with("python3", &py_args, &items);
    if !skipped("node") {
        readings.extend(read_with("node", &[script("readers.js").as_str()], &items));
    }
    for r in ["node", "curl"].iter().filter(|r| skipped(r)) {
        eprintln!("differential: {r} left out (RAMPART_DIFFERENTIAL_SKIP)");
    }

    // Every value was read, and every kind has values Rampart allows (else the suite
    // compares nothing).
    let mut per_kind: BTreeMap<Kind, (usize, usize)> = BTreeMap::new();
    for (k, _, allowed) in &items {
        let e = per_kind.entry(*k).or_default();
        e.0 += 1;
        e.1 += usize::from(*allowed);
    }
    for (k, (n, allowed)) in &per_kind {
        eprintln!("differential: {}: {n} values, {allowed} allowed", k.name());
        assert!(
            *allowed >= 20,
            "{}: only {allowed} allowed values",
            k.name()
        );
    }
    let mut escapes = Vec::new();
    let mut compared = 0usize;
    let mut by_reader: BTreeMap<&str, usize> = BTreeMap::new();
    for ((i, reader), rs) in &readings {
        let (kind, value, allowed) = &items[*i];
        if !allowed {
            continue;
        }
        compared += 1;
        *by_reader.entry(reader).or_default() += rs.len();
        for r in rs {
            if !kind.inside(r) {
                escapes.push(format!("{} {value:?}: {reader} reads {r:?}", kind.name()));
            }
        }
    }
    eprintln!(
        "differential: {compared} readings of allowed values compared; by reader: {by_reader:?}"
    );
    // Every reader read something Rampart allowed (a reader that silently reads nothing,
    // such as curl failing to reach the proxy, would make the suite pass vacuously).
    for (reader, n) in &by_reader {
        assert!(*n > 0, "{reader} gave no reading of any allowed value");
    }
    assert!(
        escapes.is_empty(),
        "Rampart ALLOWed values a reader takes outside the policy:\n{}",
        escapes.join("\n")
    );
}
