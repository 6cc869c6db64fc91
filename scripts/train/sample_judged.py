"""A stratified, seeded sample of validation sets for fitting a combiner that reads the judge.

The judge is asked about a minority of records (the linear layer's unsure band, rules that
need judgement, conversation conditions), and each call costs seconds on a local model. So:
every record the judge is NOT asked about is kept (it costs nothing), and of the records it
IS asked about, a seeded 1-in-k sample is kept, each written k times (importance weight k),
so that the fitting rows and the benign rates the operating points are chosen on keep the
validation data's proportions. Which records the judge is asked about comes from a replayed
evaluation of the same configuration with an empty judge cache and the judge's fail mode
open (`rampart eval --judge-cache-only`: the triggers fire, no model is called; open, so a
replay miss does not block and change the conversation triggers).

Copies get ids `{id}~w{n}` chosen so that `rampart train combiner`'s split (FNV-1a parity of
the id) puts every copy in its original's half: a record never fits the trees and chooses the
operating points at once.

    python3 -m scripts.train.sample_judged --log-dir DIR --run RUN_ID --out OUT_DIR \
        --seed 41 --set NAME=FILE:K ...

NAME is the dataset name in the eval logs (e.g. sharegpt_first_turns_validation), FILE the
JSONL it was read from (all its records: a hash part is selected by the ids in the log), K
the sampling factor. Writes OUT_DIR/NAME.jsonl and OUT_DIR/sample.json (what was kept).
Standard library only.
"""

import argparse
import json
import random
from pathlib import Path


def fnv1a(s: str) -> int:
    h = 0xCBF29CE484222325
    for b in s.encode():
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def copy_id(rid: str, n: int) -> str:
    """An id for copy n of `rid` with the same FNV-1a parity (the same half)."""
    want = fnv1a(rid) % 2
    for salt in range(1000):
        cid = f"{rid}~w{n}" + (f".{salt}" if salt else "")
        if fnv1a(cid) % 2 == want:
            return cid
    raise SystemExit(f"no copy id for {rid}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log-dir", required=True, type=Path)
    ap.add_argument("--run", required=True, help="eval run id (eval_YYYYMMDD_HHMMSS)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--set", action="append", required=True, metavar="NAME=FILE:K")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    summary = {"seed": a.seed, "run": a.run, "sets": {}}
    for spec in a.set:
        name, rest = spec.split("=", 1)
        file, k = rest.rsplit(":", 1)
        k = int(k)
        judged, seen = set(), []
        with open(a.log_dir / f"{a.run}_{name}.jsonl") as f:
            for line in f:
                r = json.loads(line)
                if "prompt_id" not in r:
                    continue
                seen.append(r["prompt_id"])
                if (r.get("judge") or {}).get("called"):
                    judged.add(r["prompt_id"])
        keep = set(seen)
        records = {}
        with open(file) as f:
            for line in f:
                r = json.loads(line)
                if r["id"] in keep:
                    records[r["id"]] = r
        rng = random.Random(f"{a.seed}:{name}")
        asked = sorted(judged)
        chosen = set(rng.sample(asked, round(len(asked) / k))) if asked else set()
        written = 0
        with open(a.out / f"{name}.jsonl", "w") as out:
            for rid in seen:
                r = records[rid]
                if rid not in judged:
                    out.write(json.dumps(r, ensure_ascii=False) + "\n")
                    written += 1
                elif rid in chosen:
                    for n in range(k):
                        c = dict(r)
                        if n:
                            c["id"] = copy_id(rid, n)
                        out.write(json.dumps(c, ensure_ascii=False) + "\n")
                        written += 1
        summary["sets"][name] = {
            "file": file,
            "records": len(seen),
            "judged": len(asked),
            "k": k,
            "judged_kept": len(chosen),
            "judged_kept_attacks": sum(
                1 for i in chosen if records[i].get("label", "benign") != "benign"
            ),
            "rows_written": written,
        }
        print(name, summary["sets"][name])
    (a.out / "sample.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
