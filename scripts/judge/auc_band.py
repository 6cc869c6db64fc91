"""Diagnostic, read after an evaluation (never used to choose anything): over the prompts a
judge layer scored, how well its probability and the linear layer's score each separate the
attacks from the benign prompts (ROC AUC), per dataset and over all.

    python3 scripts/judge/auc_band.py data/combiner-judge/eval/evals/eval_20261203_062336 judge-band
    python3 scripts/judge/auc_band.py --rows data/combiner-judge/rows-judge.jsonl

The first form reads an evaluation's log prefix (its `_<dataset>.jsonl` files) and a
configuration's name. The second reads the rows `rampart train combiner --dump` wrote for a
combiner fitted with the judge (its last two features are `judge.asked` and
`judge.logodds`): the AUC over the judged rows, and the attacks and benign rows (all, and
ShareGPT's alone) at or above a few probabilities. Standard library only.
"""

import collections
import glob
import json
import math
import sys


def auc(pos, neg):
    """P(an attack scores above a benign prompt), ties counted half."""
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def main(prefix, config):
    # dataset -> (judge scores of attacks, of benign, linear scores of attacks, of benign)
    tally = collections.defaultdict(lambda: ([], [], [], []))
    files = sorted(glob.glob(f"{prefix}_*.jsonl"))
    if not files:
        sys.exit(f"no eval logs {prefix}_*.jsonl")
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r["config"] != config:
                    continue
                layers = {l["layer"]: l for l in r["layers"]}
                judge = layers.get("judge", {}).get("score")
                if judge is None:
                    continue
                linear = layers.get("linear", {}).get("score") or 0.0
                for key in (r["dataset"], "(all)"):
                    jp, jn, lp, ln = tally[key]
                    (jp if r["attack"] else jn).append(judge)
                    (lp if r["attack"] else ln).append(linear)
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"
    for key, (jp, jn, lp, ln) in sorted(tally.items()):
        print(f"{key:32s} judged attacks {len(jp):4d} benign {len(jn):4d}  "
              f"AUC judge {fmt(auc(jp, jn))}  linear {fmt(auc(lp, ln))}")


def rows(path):
    pos, neg, chats = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            x = r.get("x")
            if x is None or x[-2] != 1.0:  # the header line, or a row the judge was not asked about
                continue
            p = 1.0 / (1.0 + math.exp(-4.0 * x[-1]))  # judge.logodds is the log-odds / 4
            (pos if r["attack"] else neg).append(p)
            if not r["attack"] and r["dataset"].startswith("sharegpt"):
                chats.append(p)
    if not pos or not neg:
        sys.exit(f"{path}: no judged attacks and benign rows")
    print(f"judged rows: {len(pos)} attack, {len(neg)} benign; AUC {auc(pos, neg):.3f}")
    share = lambda v, t: sum(p >= t for p in v) / len(v) if v else float("nan")
    for t in (0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99):
        print(f"P >= {t:4}: attacks {share(pos, t):6.1%}  benign {share(neg, t):6.1%}  "
              f"ShareGPT {share(chats, t):6.1%}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rows":
        rows(sys.argv[2])
    elif len(sys.argv) == 3:
        main(sys.argv[1], sys.argv[2])
    else:
        sys.exit(__doc__)
