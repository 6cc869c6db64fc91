//! `rampart lint` end to end: exit statuses, the three formats, the configuration file, the
//! tool policy, and this repository's own Python code linting clean.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::path::{Path, PathBuf};
use std::process::Output;

fn rampart(args: &[&str], cwd: Option<&Path>) -> Output {
    crate::common::isolated(args, cwd)
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const APP: &str = concat!(
    "import json\n",
    "from flask import Flask, request\n",
    "from openai import OpenAI\n",
    "app = Flask(__name__)\n",
    "TOOLS = [{'type': 'function', 'function': {'name': 'send_email', 'parameters': {}}}]\n",
    "@app.post('/ask')\n",
    "def ask():\n",
    "    q = request.json['q']\n",
    "    r = OpenAI().chat.completions.create(model='m', messages=[{'role': 'user', 'content': q}], tools=TOOLS)\n",
    "    return r.choices[0].message.content\n",
);

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("app.py"), APP).unwrap();
    dir
}

#[test]
fn findings_fail_the_run_and_name_the_path_and_the_fix() {
    let dir = project();
    let o = rampart(&["lint", "."], Some(dir.path()));
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("app.py:9:"), "{out}");
    assert!(out.contains("RL001 error [unguarded-model-input]"), "{out}");
    assert!(out.contains("source line 8"), "{out}");
    assert!(out.contains("fix: "), "{out}");
    assert!(out.contains("RL005 warning"), "{out}");
    // --fail-on error still fails (RL001 is an error); never does not.
    let o = rampart(&["lint", "--fail-on", "never", "."], Some(dir.path()));
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn json_and_sarif_reports_carry_the_findings() {
    let dir = project();
    let o = rampart(
        &["lint", "--format", "json", "--fail-on", "never", "app.py"],
        Some(dir.path()),
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["files"], 1);
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(
        rules.contains(&"RL001") && rules.contains(&"RL005"),
        "{rules:?}"
    );
    let sarif = dir.path().join("out.sarif");
    let o = rampart(
        &[
            "lint",
            "--format",
            "sarif",
            "--output",
            sarif.to_str().unwrap(),
            ".",
        ],
        Some(dir.path()),
    );
    assert_eq!(o.status.code(), Some(4));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
    assert_eq!(s["version"], "2.1.0");
    assert!(!s["runs"][0]["results"].as_array().unwrap().is_empty());
}

#[test]
fn the_tool_policy_governs_rl005_and_the_config_file_disables_rules() {
    let dir = project();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "version = 1\ndefault = \"block\"\n\n[[tools]]\nname = \"send_email\"\nrisk = \"high\"\naction = \"confirm\"\n",
    )
    .unwrap();
    let cfg = dir.path().join("lint.toml");
    std::fs::write(
        &cfg,
        "[lint]\ntool_policy = \"policy.toml\"\ndisable = [\"RL001\"]\n",
    )
    .unwrap();
    let o = rampart(
        &["lint", "--config", cfg.to_str().unwrap(), "."],
        Some(dir.path()),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // A configuration with an unknown key is an error that names it.
    std::fs::write(&cfg, "[lint]\ndisabel = [\"RL001\"]\n").unwrap();
    let o = rampart(
        &["lint", "--config", cfg.to_str().unwrap(), "."],
        Some(dir.path()),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("disabel"));
    // A policy that does not read is an error, not an empty tool list.
    std::fs::write(&policy, "version = 1\n[[tools]]\nnam = \"x\"\n").unwrap();
    let o = rampart(
        &["lint", "--tool-policy", policy.to_str().unwrap(), "."],
        Some(dir.path()),
    );
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn pyproject_configures_the_linter() {
    let dir = project();
    std::fs::write(
        dir.path().join("pyproject.toml"),
        "[project]\nname = \"x\"\n\n[tool.ruff]\nline-length = 100\n\n[tool.rampart.lint]\ndisable = [\"RL001\", \"RL005\"]\n",
    )
    .unwrap();
    let o = rampart(&["lint", "."], Some(dir.path()));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn a_missing_path_is_an_error() {
    let o = rampart(&["lint", "/nonexistent/app.py"], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such file"));
}

#[test]
fn this_repositorys_python_lints_clean() {
    // The must of issue 39: Rampart's own examples, scripts and package, with the
    // repository's lint.toml (its exclusions say why), have no unexplained finding.
    let root = repo_root();
    let o = rampart(
        &[
            "lint",
            "--config",
            "lint.toml",
            "examples",
            "scripts",
            "python",
        ],
        Some(&root),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_rules_doc_is_printed() {
    let o = rampart(&["lint", "--rules-doc"], None);
    assert_eq!(o.status.code(), Some(0));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.starts_with("# `rampart lint` rules"));
    let have = std::fs::read_to_string(repo_root().join("docs/LINTER_RULES.md")).unwrap();
    assert_eq!(md, have);
}
