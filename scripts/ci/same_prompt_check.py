#!/usr/bin/env python3
"""Checks that the scripts' "same prompt" agrees with Rampart's leakage key on the shared cases.

    python3 -m scripts.ci.same_prompt_check

Reads crates/datasets/testdata/same_prompt.jsonl (one case a line: `a` and `b`, each a text or
a record, `same`, `why`), which the Rust tests of rampart-datasets also check, and asks
scripts/common.py whether `a` and `b` are the same prompt: their normalized keys equal, the
key of a record being that of its text (`record_text`). It also checks that the near-duplicate
index finds every pair that is the same. Exit status 1 on any disagreement.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scripts.common import REPO, NearDupIndex, norm_key, norm_keys, read_jsonl, record_text

CASES = REPO / "crates" / "datasets" / "testdata" / "same_prompt.jsonl"


def text_of(v: str | dict) -> str:
    return v if isinstance(v, str) else record_text(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=Path, default=CASES, help="the shared cases")
    args = ap.parse_args()
    cases = read_jsonl(args.cases)
    norm_keys(text_of(c[k]) for c in cases for k in ("a", "b"))
    failed = 0
    for n, c in enumerate(cases, 1):
        a, b = text_of(c["a"]), text_of(c["b"])
        same = norm_key(a) == norm_key(b)
        problem = None
        if same != c["same"]:
            problem = f"same={same}, expected {c['same']}: keys {norm_key(a)!r} and {norm_key(b)!r}"
        elif same and a.strip() and not NearDupIndex([a]).is_near_dup(b):
            problem = "the same prompt but not a near-duplicate"
        if problem:
            failed += 1
            print(f"line {n} ({c['why']}): {problem}", file=sys.stderr)
    where = args.cases.relative_to(REPO) if args.cases.is_relative_to(REPO) else args.cases
    print(f"same prompt ({where}): {len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
