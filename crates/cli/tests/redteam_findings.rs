//! `rampart redteam findings`: the committed red-team report is exactly what the command
//! makes from the committed matrix and decisions (the report cannot drift from its inputs),
//! and a blind spot without a decision fails the command, naming it.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn rampart(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_committed_report_is_what_the_command_makes_from_the_committed_inputs() {
    let root = repo();
    let out = tempfile::tempdir().unwrap();
    let md = out.path().join("Adversarial_Testing_Report.md");
    let svg = out.path().join("defense_in_depth.svg");
    let o = rampart(
        &[
            "redteam",
            "findings",
            "--matrix",
            "docs/reports/coverage_matrix.json",
            "--baseline",
            "docs/reports/coverage_matrix_baseline.json",
            "--decisions",
            "docs/reports/redteam_decisions.toml",
            "--out-md",
            md.to_str().unwrap(),
            "--out-svg",
            svg.to_str().unwrap(),
        ],
        &root,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (made, committed) in [
        (md, "docs/reports/Adversarial_Testing_Report.md"),
        (svg, "docs/reports/defense_in_depth.svg"),
    ] {
        let made = std::fs::read_to_string(made).unwrap();
        let committed = std::fs::read_to_string(root.join(committed)).unwrap();
        assert!(
            made == committed,
            "{committed} is out of date: regenerate it with the command at its top"
        );
    }
}

#[test]
fn an_undecided_blind_spot_fails_and_is_named() {
    let root = repo();
    let dir = tempfile::tempdir().unwrap();
    let decisions =
        std::fs::read_to_string(root.join("docs/reports/redteam_decisions.toml")).unwrap();
    // Drop every decision: every blind spot of the committed matrix is then undecided.
    let head = decisions.split("[[decision]]").next().unwrap();
    let path = dir.path().join("decisions.toml");
    std::fs::write(&path, head).unwrap();
    let md = dir.path().join("r.md");
    let o = rampart(
        &[
            "redteam",
            "findings",
            "--decisions",
            path.to_str().unwrap(),
            "--out-md",
            md.to_str().unwrap(),
            "--out-svg",
            dir.path().join("r.svg").to_str().unwrap(),
        ],
        &root,
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("without a decision") && err.contains("(tpr)"),
        "{err}"
    );
    assert!(!md.exists(), "nothing is written when the report fails");
    // A decisions file that is not valid TOML of the schema is refused with the reason.
    std::fs::write(&path, "version = 1\n[target]\npipeline = \"fused\"\n").unwrap();
    let o = rampart(
        &[
            "redteam",
            "findings",
            "--decisions",
            path.to_str().unwrap(),
            "--out-md",
            md.to_str().unwrap(),
            "--out-svg",
            dir.path().join("r.svg").to_str().unwrap(),
        ],
        &root,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing field"));
}
