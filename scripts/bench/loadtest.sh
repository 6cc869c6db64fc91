#!/usr/bin/env bash
# Load test of `rampart serve` (loopback only, bounded): builds the load generator
# (crates/server/examples/loadtest.rs) in release and runs it with the settings of
# docs/service.md ("Load test"):
# 512 generated ~1 KB prompts (fixed seed, 10 % with an injection), per pipeline
# (deterministic = configs/rules.toml, default = rules + linear) 10 s in-process on 2 threads,
# then 10 s over HTTP with 64 keep-alive connections against the real server (request logs
# formatted as `rampart serve` does), once with the audit log on and once off, then 10 s
# against the baseline, a bare axum server answering a fixed JSON body of the decisions'
# mean size; each after 1 s of warm-up. It reports Rampart's HTTP rate as a fraction of the
# baseline's (target: >= 0.50 with the audit log on). The client is a minimal HTTP/1.1 one
# (prebuilt requests, one in flight per connection, no pipelining), the same for every
# HTTP phase; the run also prints CPU µs per request by thread (server workers, audit
# writer, client) and the mean audit group-commit size.
#
#   bash scripts/bench/loadtest.sh                     # the run of docs/service.md
#   bash scripts/bench/loadtest.sh --duration 5 --pipeline deterministic --json out.json
#   bash scripts/bench/loadtest.sh --audit on          # skip the audit-off run
#   bash scripts/bench/loadtest.sh --conversation-turns 8 --pipeline deterministic
#       # conversations of 8 user turns, one request per turn with its history, to /v1/scan:
#       # the newest turn as text alone, as stateless `turns`, and with [conversation]
#
# Extra arguments are passed on (they override the defaults; see the example's --help).
# The run fails on any HTTP error, decision mismatch or missing audit record (the targets
# are reported, not enforced).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cargo build --release -q -p rampart-server --example loadtest
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
exec "$TARGET_DIR/release/examples/loadtest" \
  --duration 10 --warmup 1 --connections 64 --threads 2 --pipeline both "$@"
