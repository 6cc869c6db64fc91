#!/usr/bin/env python3
"""Measures the judge's score mode (`mode = "score"`) through `rampart judge --json`: AUC,
TPR at a false-alarm rate, latency and tokens; fits the calibration (Platt scaling of the
reported `score_logit`) and picks the thresholds on VALIDATION rows only, then reports the
test sets with them. Standard library only. Seeded samples.

    python3 -m scripts.judge.score_eval --config CONFIG.toml \\
        --validation data/slabs_validation.jsonl:60 --validation data/neuralchemy_validation.jsonl:60 \\
        --test datasets/attacks_handwritten_v1.jsonl --test datasets/trigger_benign_v1.jsonl:150 \\
        --out target/judge-score.json

FILE[:N] takes a seeded sample of N rows per label (all rows without N). The configuration's
judge layer must be in score mode (the script reads `score_logit` from each report). With
`--compare-structured CONFIG2 --latency-sample N`, the first N validation texts are also
asked in CONFIG2 (structured mode) and the latencies are compared side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path


def load(spec: str, seed: int) -> list[dict]:
    path, _, n = spec.partition(":")
    rows = [json.loads(l) for l in Path(path).read_text(encoding="utf-8").splitlines() if l.strip()]
    rows = [r for r in rows if r.get("label") in ("attack", "benign") and isinstance(r.get("text"), str)]
    if not n:
        return rows
    rng = random.Random(f"{seed}:{path}")
    out = []
    for label in ("attack", "benign"):
        part = [r for r in rows if r["label"] == label]
        rng.shuffle(part)
        out.extend(part[: int(n)])
    return out


def judge(binary: str, config: str, text: str) -> dict:
    t = time.perf_counter()
    p = subprocess.run([binary, "judge", "--config", config, "--json", "-"], input=text.encode("utf-8"),
                       capture_output=True, timeout=120)
    wall = time.perf_counter() - t
    try:
        report = json.loads(p.stdout)
    except json.JSONDecodeError:
        sys.exit(f"rampart judge failed (exit {p.returncode}): {p.stderr.decode(errors='replace')[-500:]}")
    report["_wall_s"] = wall
    return report


def auc(pos: list[float], neg: list[float]) -> float:
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def fit_platt(xs: list[float], ys: list[int]) -> tuple[float, float]:
    """Logistic regression of y on x (Newton's method, a small ridge for stability)."""
    a, b = 1.0, 0.0
    for _ in range(50):
        ga = gb = haa = hab = hbb = 0.0
        for x, y in zip(xs, ys):
            p = 1.0 / (1.0 + math.exp(-(a * x + b)))
            w = p * (1 - p)
            ga += (p - y) * x
            gb += p - y
            haa += w * x * x
            hab += w * x
            hbb += w
        haa += 1e-3
        hbb += 1e-3
        det = haa * hbb - hab * hab
        if det <= 0:
            break
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        a, b = a - da, b - db
        if abs(da) + abs(db) < 1e-9:
            break
    return a, b


def rates(rows: list[tuple[float, int]], threshold: float) -> tuple[float, float]:
    pos = [p for p, y in rows if y == 1]
    neg = [p for p, y in rows if y == 0]
    tpr = sum(p >= threshold for p in pos) / len(pos) if pos else float("nan")
    fpr = sum(p >= threshold for p in neg) / len(neg) if neg else float("nan")
    return tpr, fpr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--validation", action="append", default=[])
    ap.add_argument("--test", action="append", default=[])
    ap.add_argument("--rampart", default="target/release/rampart")
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--target-fpr", type=float, default=0.05,
                    help="false-alarm rate on validation benign rows for the suspicious threshold")
    ap.add_argument("--compare-structured", default=None)
    ap.add_argument("--latency-sample", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("target/judge-score.json"))
    args = ap.parse_args()

    def run(rows: list[dict], name: str) -> list[dict]:
        out = []
        for i, r in enumerate(rows):
            rep = judge(args.rampart, args.config, r["text"])
            out.append({"id": r.get("id"), "label": r["label"], "logit": rep.get("score_logit"),
                        "outcome": rep.get("outcome"), "mode": rep.get("mode"),
                        "latency_ms": rep.get("latency_ms"), "input_tokens": rep.get("input_tokens"),
                        "output_tokens": rep.get("output_tokens")})
            if (i + 1) % 25 == 0:
                print(f"  {name}: {i + 1}/{len(rows)}", file=sys.stderr)
        return out

    val_rows = [r for s in args.validation for r in load(s, args.seed)]
    print(f"validation: {len(val_rows)} rows", file=sys.stderr)
    val = run(val_rows, "validation")
    ok = [v for v in val if v["logit"] is not None]
    xs = [v["logit"] for v in ok]
    ys = [1 if v["label"] == "attack" else 0 for v in ok]
    slope, intercept = fit_platt(xs, ys)
    cal = lambda x: 1.0 / (1.0 + math.exp(-(slope * x + intercept)))  # noqa: E731
    vp = [(cal(v["logit"]), y) for v, y in zip(ok, ys)]
    benign = sorted((p for p, y in vp if y == 0), reverse=True)
    k = max(0, int(math.floor(args.target_fpr * len(benign))))
    suspicious_at = min(0.999, (benign[k] + 1e-6) if benign else 0.5)
    malicious_at = max(suspicious_at, min(0.999, (benign[max(0, int(0.01 * len(benign)))] + 1e-6) if benign else 0.85))
    summary: dict = {
        "config": args.config, "seed": args.seed, "validation": args.validation,
        "calibration": {"slope": slope, "intercept": intercept},
        "thresholds": {"suspicious_at": suspicious_at, "malicious_at": malicious_at,
                       "chosen_for": f"{args.target_fpr:.0%} FPR (suspicious), 1% FPR (malicious) on validation benign rows"},
        "sets": {},
    }

    def report(name: str, res: list[dict]) -> dict:
        good = [r for r in res if r["logit"] is not None]
        pos = [r["logit"] for r in good if r["label"] == "attack"]
        neg = [r["logit"] for r in good if r["label"] == "benign"]
        scored = [(cal(r["logit"]), 1 if r["label"] == "attack" else 0) for r in good]
        tpr_s, fpr_s = rates(scored, suspicious_at)
        tpr_m, fpr_m = rates(scored, malicious_at)
        lat = [r["latency_ms"] for r in res if r["latency_ms"] is not None]
        return {
            "n": len(res), "attacks": sum(r["label"] == "attack" for r in res),
            "failed": len(res) - len(good), "auc": auc(pos, neg),
            "tpr_suspicious": tpr_s, "fpr_suspicious": fpr_s, "tpr_malicious": tpr_m, "fpr_malicious": fpr_m,
            "latency_ms_p50": statistics.median(lat) if lat else None,
            "latency_ms_p95": sorted(lat)[int(0.95 * (len(lat) - 1))] if lat else None,
            "input_tokens_mean": statistics.mean(r["input_tokens"] or 0 for r in res) if res else None,
        }

    summary["sets"]["validation"] = report("validation", val)
    for spec in args.test:
        rows = load(spec, args.seed)
        print(f"test {spec}: {len(rows)} rows", file=sys.stderr)
        summary["sets"][spec] = report(spec, run(rows, spec))
    if args.compare_structured:
        sample = val_rows[: args.latency_sample]
        score_lat = [judge(args.rampart, args.config, r["text"]).get("latency_ms") for r in sample]
        struct_lat = [judge(args.rampart, args.compare_structured, r["text"]).get("latency_ms") for r in sample]
        summary["latency_side_by_side"] = {
            "n": len(sample),
            "score_p50_ms": statistics.median(score_lat), "score_p95_ms": sorted(score_lat)[int(0.95 * (len(sample) - 1))],
            "structured_p50_ms": statistics.median(struct_lat), "structured_p95_ms": sorted(struct_lat)[int(0.95 * (len(sample) - 1))],
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
