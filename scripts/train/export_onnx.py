#!/usr/bin/env python3
"""Exports a model directory's safetensors weights to ONNX, for Rampart's ONNX Runtime backend.

    python -m scripts.train.export_onnx data/models/minilm-injection-v3

writes MODEL_DIR/model.onnx (the exporter of scripts/data/make_transformer_fixtures.py: opset 17,
dynamic batch and sequence axes, inputs input_ids + attention_mask, output logits). When the
`onnxruntime` Python package is installed it also compares the export's logits with PyTorch's
(exit 1 above 1e-4). Use it from a layer with `format = "onnx"`
(with both files present, `auto` keeps the safetensors) and the ONNX Runtime library
(`rampart models onnxruntime`).

Needs PyTorch, transformers and onnx (scripts/train/requirements.txt).
"""
import argparse
import os
import sys

import torch
from transformers import AutoModelForSequenceClassification

from scripts.data.make_transformer_fixtures import export_onnx


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("--out", help="output file (default: MODEL_DIR/model.onnx)")
    args = ap.parse_args()
    out = args.out or os.path.join(args.model_dir, "model.onnx")
    model = AutoModelForSequenceClassification.from_pretrained(
        args.model_dir, attn_implementation="eager").eval()
    export_onnx(model, out)
    print(f"wrote {out} ({os.path.getsize(out) / 1e6:.1f} MB)")
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return 0
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 102]])
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        ref = model(input_ids=ids, attention_mask=mask).logits.numpy()
    sess = onnxruntime.InferenceSession(out)
    got = sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
    diff = float(abs(ref - got).max())
    print(f"ONNX Runtime vs PyTorch: max |logit diff| {diff:.2e}")
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
