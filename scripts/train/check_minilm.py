#!/usr/bin/env python3
"""Checks a set-up model directory (`rampart models setup` output) against the logits that
scripts/train/train_minilm.py recorded with PyTorch in models/NAME/reference.json (NAME: the model
directory's own name, e.g. minilm-injection-v3).

    /work/pyenv/bin/python -m scripts.train.check_minilm data/models/minilm-injection-v3

Loads the directory with transformers (AutoModelForSequenceClassification: config.json +
model.safetensors) and its tokenizer.json with `tokenizers`, scores the reference prompts,
prints the largest absolute logit difference and exits 1 when it is over 1e-4 or the token
ids differ.
"""

import argparse
import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForSequenceClassification

from scripts.common import REPO


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--reference", type=Path, default=None,
                    help="default: models/NAME/reference.json, NAME the model_dir's name")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_num_threads(2)
    reference = args.reference or REPO / "models" / args.model_dir.name / "reference.json"
    ref = json.loads(reference.read_text())
    tok = Tokenizer.from_file(str(args.model_dir / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    model = AutoModelForSequenceClassification.from_pretrained(args.model_dir)
    model.eval()
    labels = model.config.id2label
    assert labels[1] == "INJECTION" and labels[0] == "BENIGN", labels
    worst = 0.0
    ok = True
    with torch.no_grad():
        for p in ref["prompts"]:
            ids = tok.encode(p["text"]).ids
            if ids != p["input_ids"]:
                print(f"token ids differ for {p['text']!r}")
                ok = False
            x = torch.tensor([ids])
            logits = model(input_ids=x, attention_mask=torch.ones_like(x)).logits[0]
            prob = float(torch.softmax(logits, -1)[1])
            d = max(abs(float(a) - b) for a, b in zip(logits, p["logits"]))
            worst = max(worst, d)
            print(f"P(INJECTION)={prob:.6f} (reference {p['p_injection']:.6f}) "
                  f"max|dlogit|={d:.2e}  {p['text'][:70]!r}")
    print(f"max abs logit difference: {worst:.3e} (tolerance {args.tolerance:g})")
    return 0 if ok and worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
