#!/usr/bin/env bash
# Fits the embedded combiner (models/combiner-v1/model.json) for configs/combined.toml: the
# validation data only, each dataset's benign-flag target from issue 38's goals (real chat
# traffic 0.2 % per message, embedded and multilingual hard benign 2 %, the rest 1 %).
#   bash scripts/train/fit_combiner.sh                 # writes models/combiner-v1/model.json
#   RAMPART=target/debug/rampart OUT=/tmp/c bash scripts/train/fit_combiner.sh
# Needs the fetched validation sets (`rampart datasets fetch`) and the generated ones below
# (seeded, standard library only, seconds). About 30 s on 2 cores; deterministic: the same
# inputs give the same model.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
RAMPART=${RAMPART:-target/release/rampart}
OUT=${OUT:-models/combiner-v1}
DATA=${RAMPART_DATA_DIR:-data}
[ -x "$RAMPART" ] || cargo build --release -q -p rampart-cli
"$RAMPART" datasets fetch slabs_train slabs_validation neuralchemy_train neuralchemy_validation \
  sharegpt_first_turns sharegpt_conversations >/dev/null
[ -f "$DATA/derived/embedded_validation.jsonl" ] || python3 -m scripts.data.gen_embedded >/dev/null
[ -f "$DATA/derived/mlgen.validation.jsonl" ] || python3 -m scripts.data.make_multilingual_train >/dev/null
"$RAMPART" train combiner --config configs/combined.toml \
  --dataset slabs_validation neuralchemy_validation sharegpt_first_turns:validation \
    sharegpt_conversations:validation "$DATA/derived/embedded_validation.jsonl" \
    "$DATA/derived/mlgen.validation.jsonl" \
  --default-target 0.01 \
  --target sharegpt_first_turns_validation=0.002 --target sharegpt_conversations_validation=0.002 \
  --target embedded_validation=0.02 --target mlgen.validation=0.02 \
  --out "$OUT" --no-progress
