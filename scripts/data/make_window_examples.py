#!/usr/bin/env python3
"""Window-level training rows for the linear classifier, from the embedded-injection material.

At run time the linear layer scores every untrusted segment whole AND in windows of one to
three sentences (rampart_core::LocalizeConfig); the maximum decides. A model trained on whole
prompts only has never seen a lone sentence of an invoice or of a web page, and flags some of
them ("Summarize this output." scored 0.91). This script turns the generated training material
(scripts/data/gen_embedded.py) into rows of the shape the model meets at run time:

  * attack rows: each payload alone (the exact injected text, from the `.spans.jsonl` sidecar),
    and the payload with the sentence before or after it;
  * benign rows: sentence windows (1-3 sentences, like the run-time windows, at most 512 bytes)
    of every benign carrier, of the parts of attack carriers that do not overlap the payload,
    and the user requests that go with the carriers; at most PER_RECORD per record (seeded
    choice) so that long carriers do not swamp the set;
  * the benign prompts of slabs, neuralchemy and the ShareGPT first turns (training part:
    first byte of SHA-256(id) mod 10 in 0..5; validation 6..7), whole and in up to PER_RECORD
    windows, and their attacks of at most 512 bytes whole (validation rows from the
    `_validation` splits).

Sentences are cut with a regular expression (ends of sentences and lines) that approximates the
Unicode sentence boundaries used at run time; the windows need not match byte for byte.

    python3 -m scripts.data.gen_embedded               # writes data/derived/embedded_{train,validation}.jsonl
    python3 -m scripts.data.make_window_examples       # writes data/derived/embedded_windows.{train,validation}.jsonl

Deterministic (seed 16). Standard library only. Reads the training and validation parts only,
never the committed test set (datasets/embedded_injections_v1.jsonl).
"""
import argparse
import hashlib
import json
import random
import re
import sys
from pathlib import Path

from scripts.common import default_data_dir, fetched_path, read_jsonl, sharegpt_part

SEED = 16
PER_RECORD = 6
MAX_SENTENCES = 3
MAX_BYTES = 512
MIN_CHARS = 12

SENT = re.compile(r"[^\n.!?]*(?:[.!?]+[\"')\]]*\s*|\n+|$)")


def sentences(text):
    """(start, end) of each sentence-like unit, in order."""
    out = []
    for m in SENT.finditer(text):
        if m.end() > m.start():
            out.append((m.start(), m.end()))
    return out


def windows(text):
    units = sentences(text)
    out = []
    for i in range(len(units)):
        for k in range(MAX_SENTENCES):
            if i + k >= len(units):
                break
            a, b = units[i][0], units[i + k][1]
            if len(text[a:b].encode()) > MAX_BYTES:
                break
            w = text[a:b].strip()
            if len(re.sub(r"\s", "", w)) >= MIN_CHARS:
                start = a + (len(text[a:b]) - len(text[a:b].lstrip()))
                out.append((start, start + len(w)))
    return sorted(set(out))


def build(part, data_dir, rng):
    recs = read_jsonl(data_dir / f"embedded_{part}.jsonl")
    spans = {s["id"]: s for s in read_jsonl(data_dir / f"embedded_{part}.spans.jsonl")}
    rows = []
    seen = set()

    def add(text, label, rid, kind):
        text = text.strip()
        key = (text, label)
        if not text or key in seen:
            return
        seen.add(key)
        h = hashlib.sha256(f"{rid}/{kind}/{text}".encode()).hexdigest()[:12]
        rows.append({"id": f"win-{part}-{h}", "text": text, "label": label,
                     "category": kind, "source": "rampart-embedded-windows", "split": part})

    for r in recs:
        sp = spans.get(r["id"]) if r["label"] == "attack" else None
        for si, seg in enumerate(r["segments"]):
            text = seg["text"]
            if seg["role"] == "user" and len(text) < 200:
                add(text, "benign", r["id"], "request")
                continue
            ws = windows(text)
            if sp is not None and sp["segment"] == si:
                a, b = sp["start"], sp["end"]
                add(sp["text"], "attack", r["id"], "payload")
                units = sentences(text)
                before = [u for u in units if u[1] <= a and text[u[0]:u[1]].strip()]
                after = [u for u in units if u[0] >= b and text[u[0]:u[1]].strip()]
                if before:
                    add(text[before[-1][0]:b], "attack", r["id"], "payload+before")
                if after:
                    add(text[a:after[0][1]], "attack", r["id"], "payload+after")
                ws = [w for w in ws if w[1] <= a or w[0] >= b]
            rng.shuffle(ws)
            for w in ws[:PER_RECORD]:
                add(text[w[0]:w[1]], "benign", r["id"], "carrier_window")
    return rows


PROMPT_SETS = {
    "train": ["slabs_train", "neuralchemy_train", "sharegpt_first_turns:train"],
    "validation": ["slabs_validation", "neuralchemy_validation", "sharegpt_first_turns:validation"],
}


def prompt_rows(part, fetched, rng):
    """Windows of the benign prompts of the training (validation) sets, and their short
    attacks whole: what a lone sentence of ordinary traffic and a lone injection look like."""
    rows, seen = [], set()
    for spec in PROMPT_SETS[part]:
        name, _, want = spec.partition(":")
        for r in read_jsonl(fetched_path(fetched, name)):
            if want and sharegpt_part(r["id"]) != want:
                continue
            text = r.get("text") or "\n".join(s["text"] for s in r["segments"])
            if r["label"] == "attack":
                picks = [(0, len(text))] if len(text.encode()) <= MAX_BYTES else []
            else:
                ws = windows(text)
                rng.shuffle(ws)
                picks = ws[:PER_RECORD] + [(0, len(text))]
            for a, b in picks:
                t = text[a:b].strip()
                if not t or (t, r["label"]) in seen:
                    continue
                seen.add((t, r["label"]))
                h = hashlib.sha256(f"{r['id']}/{a}/{b}".encode()).hexdigest()[:12]
                rows.append({"id": f"winp-{part}-{h}", "text": t, "label": r["label"],
                             "category": "prompt_window", "source": "rampart-embedded-windows",
                             "split": part})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=default_data_dir() / "derived")
    ap.add_argument("--fetched", type=Path, default=default_data_dir(),
                    help="directory of `rampart datasets fetch` (default $RAMPART_DATA_DIR or ./data)")
    args = ap.parse_args()
    for part in ("train", "validation"):
        try:
            rows = build(part, args.data_dir, random.Random(f"{SEED}/{part}"))
            rows += prompt_rows(part, args.fetched, random.Random(f"{SEED}/{part}/prompts"))
        except FileNotFoundError as e:
            sys.exit(f"error: {e.filename} is missing: run `python3 -m scripts.data.gen_embedded` first")
        out = args.data_dir / f"embedded_windows.{part}.jsonl"
        with open(out, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        n_att = sum(r["label"] == "attack" for r in rows)
        print(f"{out}: {len(rows)} rows ({n_att} attack, {len(rows) - n_att} benign)", file=sys.stderr)


if __name__ == "__main__":
    main()
