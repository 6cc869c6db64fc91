#!/usr/bin/env bash
# Fits a combiner that reads the judge (issue 41 item 4) and, beside it, one without the judge
# on the same rows, then evaluates both with the default, combiner-v1 and the judge on the
# unsure band (scripts/judge/judge-band-v2.toml). Validation data only, the recipe of
# scripts/train/fit_combiner.sh, with a stratified sample because every judge call costs
# seconds (scripts/train/sample_judged.py): every record the judge is not asked about, and a
# seeded 1-in-k of those it is asked about, each kept k times.
#
#   RAMPART_JUDGE_CTX=8192 bash scripts/judge/judge_server.sh start --model qwen15 --port 8091
#   bash scripts/train/fit_combiner_judge.sh            # OUT=data/combiner-judge
#
# Measured 2026-12-03 (2 shared cores): about 700 judge calls to fit (70 min; the ShareGPT
# conversations were cut to the first CONV_ROWS=628 rows of their sample when the budget ran
# out) and about 1,600 more to evaluate. Every verdict of that run is committed
# (docs/reports/judge-combiner/judge-cache.sqlite: verdicts, probabilities and token counts
# under keyed hashes, no text), and a fresh OUT starts from it, so a rerun with the same
# RAMPART_HASH_KEY replays everything without a model server: ~90 s, the same model and the
# same figures (docs/reports/judge-combiner/*_summary.md). A changed prompt, model or
# calibration misses the cache and asks the server. SEED_CACHE=0 starts from an empty cache.
set -euo pipefail
cd "$(dirname "$0")/../.."
RAMPART=${RAMPART:-target/release/rampart}
OUT=${OUT:-data/combiner-judge}
DATA=${RAMPART_DATA_DIR:-data}
CONV_ROWS=${CONV_ROWS:-628}
export RAMPART_HASH_KEY=${RAMPART_HASH_KEY:-rampart-judge-comb-2026-12-03}
export RAMPART_JUDGE_URL=${RAMPART_JUDGE_URL:-http://127.0.0.1:8091/v1}
export RAMPART_JUDGE_MODEL=${RAMPART_JUDGE_MODEL:-qwen2.5-coder-1.5b-instruct}
[ -x "$RAMPART" ] || cargo build --release -q -p rampart-cli
"$RAMPART" datasets fetch slabs_validation neuralchemy_validation sharegpt_first_turns \
  sharegpt_conversations >/dev/null
[ -f "$DATA/derived/embedded_validation.jsonl" ] || python3 -m scripts.data.gen_embedded >/dev/null
[ -f "$DATA/derived/mlgen.validation.jsonl" ] || python3 -m scripts.data.make_multilingual_train >/dev/null
mkdir -p "$OUT/count" "$OUT/train" "$OUT/sets"
SEED=docs/reports/judge-combiner/judge-cache.sqlite
if [ "${SEED_CACHE:-1}" = 1 ] && [ ! -e "$OUT/judge-cache-combined.sqlite" ]; then
  cp "$SEED" "$OUT/judge-cache-combined.sqlite"
  echo "judge cache: starting from $SEED" >&2
fi
CFG=scripts/train/combined-judge.toml
# Variants: recording (for fitting), and for counting: the judge's fail mode open, so a
# replay miss neither blocks nor changes the conversation triggers.
sed -e 's#^model = "data/combiner-judge/model.json"#mode = "record"#' -e 's/^layer_timeout_ms = .*/layer_timeout_ms = 310000/' \
  -e 's/^timeout_ms = 90000/timeout_ms = 300000/' "$CFG" >"$OUT/record.toml"
sed -e 's/^fail_mode = "closed"$/fail_mode = "open"/' "$OUT/record.toml" >"$OUT/count/open.toml"
VAL=(--dataset slabs_validation --dataset neuralchemy_validation
  --dataset sharegpt_first_turns:validation --dataset sharegpt_conversations:validation
  --dataset "$DATA/derived/embedded_validation.jsonl" --dataset "$DATA/derived/mlgen.validation.jsonl")

# 1. Which records the judge is asked about: a replay with an empty cache (no model call).
RAMPART_DATA_DIR="$OUT/count" "$RAMPART" eval --no-progress --judge-cache-only --data-dir "$DATA" \
  --threads 2 --config c="$OUT/count/open.toml" "${VAL[@]}" --out-dir "$OUT/count" >/dev/null
RUN=$(basename "$(ls "$OUT"/count/evals/*_summary.md | tail -1)" _summary.md)

# 2. The stratified sample (seed 41; k per dataset).
python3 -m scripts.train.sample_judged --log-dir "$OUT/count/evals" --run "$RUN" --out "$OUT/train" \
  --seed 41 --set slabs_validation="$DATA/slabs_validation.jsonl:2" \
  --set neuralchemy_validation="$DATA/neuralchemy_validation.jsonl:2" \
  --set sharegpt_first_turns_validation="$DATA/sharegpt_first_turns.jsonl:4" \
  --set sharegpt_conversations_validation="$DATA/sharegpt_conversations.jsonl:6" \
  --set embedded_validation="$DATA/derived/embedded_validation.jsonl:3" \
  --set mlgen.validation="$DATA/derived/mlgen.validation.jsonl:2"
T="$OUT/train"
mkdir -p "$T/conv"
head -n "$CONV_ROWS" "$T/sharegpt_conversations_validation.jsonl" >"$T/conv/sharegpt_conversations_validation.jsonl"
SETS=(--dataset "$T/slabs_validation.jsonl" "$T/neuralchemy_validation.jsonl" "$T/mlgen.validation.jsonl"
  "$T/embedded_validation.jsonl" "$T/sharegpt_first_turns_validation.jsonl"
  "$T/conv/sharegpt_conversations_validation.jsonl")
TARGETS=(--default-target 0.01 --target sharegpt_first_turns_validation=0.002
  --target sharegpt_conversations_validation=0.002 --target embedded_validation=0.02
  --target mlgen.validation=0.02)

# 3. Fit with the judge (live calls, one at a time: the server has one slot), and without it.
RAMPART_DATA_DIR="$OUT" RAYON_NUM_THREADS=1 "$RAMPART" train combiner --config "$OUT/record.toml" \
  "${SETS[@]}" "${TARGETS[@]}" --out "$OUT" --dump "$OUT/rows-judge.jsonl" --no-progress
RAMPART_DATA_DIR="$OUT" "$RAMPART" train combiner --config configs/combined.toml \
  "${SETS[@]}" "${TARGETS[@]}" --out "$OUT/nojudge" --dump "$OUT/rows-nojudge.jsonl" --no-progress

# 4. Evaluate: the built-in sets, 400 of Embedded_Injections_v1's 1,185 (seed 41), Conversations_v1.
python3 - "$OUT/sets/Embedded_Injections_v1_s400.jsonl" <<'PY'
import random, sys
rows = open("datasets/embedded_injections_v1.jsonl").readlines()
keep = sorted(random.Random(41).sample(range(len(rows)), 400))
open(sys.argv[1], "w").writelines(rows[i] for i in keep)
PY
PRICE='prices = { "qwen2.5-coder-1.5b-instruct" = { input_per_mtok = 0.15, output_per_mtok = 0.6 } }'
for f in scripts/judge/judge-band-v2.toml "$CFG"; do
  sed -e 's/^layer_timeout_ms = .*/layer_timeout_ms = 310000/' -e 's/^timeout_ms = 90000/timeout_ms = 300000/' \
    -e "s#^structured = \"json_schema\"#structured = \"json_schema\"\n$PRICE#" \
    -e "s#^model = \"data/combiner-judge/model.json\"#model = \"$OUT/model.json\"#" "$f" \
    >"$OUT/eval-$(basename "$f")"
done
sed -e "s#^inputs = \[\"linear\"\]#inputs = [\"linear\"]\nmodel = \"$OUT/nojudge/model.json\"#" \
  configs/combined.toml >"$OUT/eval-c0.toml"
CONFIGS=(--config default=configs/rules+linear.toml --config combined=configs/combined.toml
  --config c0="$OUT/eval-c0.toml" --config judge-band="$OUT/eval-judge-band-v2.toml"
  --config combined-judge="$OUT/eval-combined-judge.toml")
RAMPART_DATA_DIR="$OUT" "$RAMPART" eval --no-progress --threads 1 --data-dir "$DATA" "${CONFIGS[@]}" \
  --dataset Clean_Benign_Corpus_v1 --dataset Trigger_Benign_v1 --dataset Handwritten_Attacks_v1 \
  --dataset Multilingual_Attacks_v1 --dataset "$OUT/sets/Embedded_Injections_v1_s400.jsonl" \
  --out-dir "$OUT/eval"
RAMPART_DATA_DIR="$OUT" "$RAMPART" eval --no-progress --threads 1 --data-dir "$DATA" "${CONFIGS[@]}" \
  --dataset Conversations_v1 --out-dir "$OUT/eval"
