"""The Python binding's cost: per-call overhead over the Rust scan, batch throughput, and
scaling with Python threads (the GIL is released during scans).

    pip install ./python            # a release wheel
    python3 -m scripts.bench.bench_python [--prompts N] [--rounds R]

Overhead per call = the wall time of `Firewall.scan(text)` in Python minus the pipeline's
own time for that scan (the decision's `elapsed_us`, measured inside Rust): what the binding
adds (argument conversion, releasing and taking back the GIL, the decision's JSON). Prompts:
the built-in Clean_Benign_Corpus_v1 and Handwritten_Attacks_v1 texts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import rampart

ROOT = Path(__file__).resolve().parents[2]


def prompts(n: int) -> list[str]:
    out: list[str] = []
    for name in ("clean_benign_v1.jsonl", "attacks_handwritten_v1.jsonl"):
        for line in (ROOT / "datasets" / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                if "text" in r:
                    out.append(r["text"])
    return (out * (n // len(out) + 1))[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    fw = rampart.Firewall()
    texts = prompts(a.prompts)
    for t in texts[:200]:
        fw.scan(t)  # warm up
    overheads, walls = [], []
    for _ in range(a.rounds):
        for t in texts:
            t0 = time.perf_counter_ns()
            d = fw.scan(t)
            wall = (time.perf_counter_ns() - t0) / 1000
            inner = d.to_dict()["elapsed_us"]
            walls.append(wall)
            overheads.append(wall - inner)
    print(f"rampart {rampart.__version__}, {len(texts)} prompts x {a.rounds} rounds, mean {statistics.mean(len(t) for t in texts):.0f} B")
    print(f"per call: wall median {statistics.median(walls):.1f} us; binding overhead median {statistics.median(overheads):.1f} us, "
          f"mean {statistics.mean(overheads):.1f} us (target <= 10 us)")
    t0 = time.perf_counter()
    fw.scan_batch(texts)
    dt = time.perf_counter() - t0
    print(f"scan_batch: {len(texts) / dt:,.0f} prompts/s (one thread)")
    for threads in (1, 2, 4):
        chunks = [texts[i::threads] for i in range(threads)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(lambda c: [fw.scan(t) for t in c], chunks))
        dt = time.perf_counter() - t0
        print(f"{threads} Python thread(s) calling scan: {len(texts) / dt:,.0f} prompts/s")


if __name__ == "__main__":
    main()
