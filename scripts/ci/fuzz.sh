#!/usr/bin/env bash
# Runs every cargo-fuzz target for a short while (default 30 s each).
#   bash scripts/ci/fuzz.sh [SECONDS] [TARGET...]
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail
cd "$(dirname "$0")/../../fuzz"
secs=${1:-30}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
for t in "${targets[@]}"; do
  # New inputs go to corpus/$t (git-ignored); seeds/$t is read as extra, read-only input.
  mkdir -p "corpus/$t"
  seeds=()
  [ -d "seeds/$t" ] && seeds=("seeds/$t")
  echo "== fuzz $t for ${secs}s"
  cargo +nightly fuzz run "$t" "corpus/$t" "${seeds[@]}" -- -max_total_time="$secs" -max_len=65536 2>&1 | tail -3
done
