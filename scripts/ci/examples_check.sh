#!/usr/bin/env bash
# Runs the client examples against a real `rampart serve` and a mock OpenAI-compatible
# upstream, and checks their output:
#   examples/curl.sh            scan, segments, batch, output scan
#   examples/requests_scan.py   Python `requests` → POST /v1/scan
#   examples/openai_client.py   the official `openai` client → the proxy (plain, streamed,
#                               blocked injection)
#   examples/agent/agent_loop.py an agent loop with the `openai` client through the proxy's
#                               tool gate: a payee the user named paid, an injected one held
#
#   bash scripts/ci/examples_check.sh
#   bash scripts/ci/examples_check.sh --setup-only   # only create the venv (CI: in the background)
#
# BIN: the rampart binary (default $CARGO_TARGET_DIR or target: release/rampart, else
# debug/rampart, else it is built with `cargo build -p rampart-cli`). PYTHON: the interpreter for the venv
# (default python3). The venv lives in target/examples-venv (pinned openai and requests
# from PyPI; reused when present). Everything listens on 127.0.0.1 only; both servers are
# stopped on exit. Exit status non-zero on any failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OPENAI_VERSION="3.51.0"
REQUESTS_VERSION="2.34.2"
PYTHON="${PYTHON:-python3}"
# RAMPART_EXAMPLES_VENV: where the venv lives (CI keeps it in its cache, outside the clone).
VENV="${RAMPART_EXAMPLES_VENV:-$ROOT/target/examples-venv}"

SETUP_ONLY=0
case "${1:-}" in
  "") ;;
  --setup-only) SETUP_ONLY=1 ;;
  *) echo "usage: $0 [--setup-only]" >&2; exit 2 ;;
esac

# ---- the binary
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
if [[ $SETUP_ONLY == 1 ]]; then
  :
elif [[ -z "${BIN:-}" ]]; then
  if [[ -x "$TARGET_DIR/release/rampart" ]]; then BIN="$TARGET_DIR/release/rampart"
  elif [[ -x "$TARGET_DIR/debug/rampart" ]]; then BIN="$TARGET_DIR/debug/rampart"
  else
    echo "building rampart (debug)…"
    cargo build -q -p rampart-cli
    BIN="$TARGET_DIR/debug/rampart"
  fi
fi
if [[ $SETUP_ONLY == 0 ]]; then
  [[ -x "$BIN" ]] || { echo "FAIL: no executable rampart binary at $BIN" >&2; exit 1; }
  echo "binary: $BIN"
fi

# ---- the venv (pinned client libraries)
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "
import importlib.metadata as m, sys
sys.exit(0 if m.version('openai') == '$OPENAI_VERSION' and m.version('requests') == '$REQUESTS_VERSION' else 1)
" 2>/dev/null; then
  echo "creating $VENV (openai==$OPENAI_VERSION, requests==$REQUESTS_VERSION)…"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check \
    "openai==$OPENAI_VERSION" "requests==$REQUESTS_VERSION"
fi
PY="$VENV/bin/python"
if [[ $SETUP_ONLY == 1 ]]; then
  echo "venv ready: $VENV"
  exit 0
fi

# ---- temp dir, cleanup
WORK="$(mktemp -d "${TMPDIR:-/tmp}/rampart-examples.XXXXXX")"
MOCK_PID=""
SERVE_PID=""
cleanup() {
  local rc=$?
  [[ -n "$SERVE_PID" ]] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null || true
  [[ -n "$MOCK_PID" ]] && kill "$MOCK_PID" 2>/dev/null && wait "$MOCK_PID" 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then
    echo "--- rampart serve log (last 30 lines)" >&2
    tail -n 30 "$WORK/serve.log" 2>/dev/null >&2 || true
  fi
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT INT TERM

fail() { echo "FAIL: $*" >&2; exit 1; }

wait_for_file() { # FILE SECONDS
  for _ in $(seq 1 $(( $2 * 10 ))); do
    [[ -s "$1" ]] && return 0
    sleep 0.1
  done
  return 1
}

# ---- the mock upstream
"$PY" -m scripts.ci.mock_openai_upstream --port 0 --port-file "$WORK/mock.port" \
  --log "$WORK/upstream.jsonl" >"$WORK/mock.log" 2>&1 &
MOCK_PID=$!
wait_for_file "$WORK/mock.port" 10 || fail "the mock upstream did not start"
MOCK_PORT="$(cat "$WORK/mock.port")"
echo "mock upstream: 127.0.0.1:$MOCK_PORT"

# ---- rampart serve (default pipeline, audit log on, no keys: loopback only)
PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
cat >"$WORK/server.toml" <<EOF
version = 1

[server]
listen = "127.0.0.1:$PORT"

[audit]
path = "audit.db"

[proxy]
upstream_url = "http://127.0.0.1:$MOCK_PORT/v1"
timeout_ms = 10000
EOF
"$BIN" config check --server "$WORK/server.toml" || fail "rampart config check --server rejected the config"
OPENAI_API_KEY="" "$BIN" serve --config "$WORK/server.toml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVE_PID=$!
export RAMPART_URL="http://127.0.0.1:$PORT"
ready=""
for _ in $(seq 1 150); do
  if curl -sf --max-time 2 "$RAMPART_URL/readyz" >/dev/null 2>&1; then ready=1; break; fi
  kill -0 "$SERVE_PID" 2>/dev/null || fail "rampart serve exited"
  sleep 0.1
done
[[ -n "$ready" ]] || fail "rampart serve was not ready within 15 s"
echo "rampart: $RAMPART_URL"

expect() { # FILE PATTERN DESCRIPTION
  grep -Eq -- "$2" "$1" || { echo "--- output of the example:" >&2; cat "$1" >&2; fail "$3 (no match for /$2/)"; }
}

# ---- 1. curl
echo "== examples/curl.sh"
bash examples/curl.sh >"$WORK/curl.out" 2>&1 || { cat "$WORK/curl.out" >&2; fail "examples/curl.sh exited non-zero"; }
expect "$WORK/curl.out" '"action":"BLOCK"' "curl: the injection is blocked"
expect "$WORK/curl.out" '"results":\[' "curl: the batch answers results"
expect "$WORK/curl.out" '"errors":0' "curl: the batch has no errors"
[[ "$(grep -c '^HTTP 200$' "$WORK/curl.out")" == 4 ]] || { cat "$WORK/curl.out" >&2; fail "curl: four calls answered 200"; }
# The output scan: the canary leak is found and the response blocked.
tail -n 2 "$WORK/curl.out" | grep -q '"action":"BLOCK"' || { cat "$WORK/curl.out" >&2; fail "curl: the leaking response is blocked"; }
echo "ok"

# ---- 2. requests
echo "== examples/requests_scan.py"
"$PY" examples/requests_scan.py >"$WORK/requests.out" 2>&1 || { cat "$WORK/requests.out" >&2; fail "examples/requests_scan.py exited non-zero"; }
expect "$WORK/requests.out" '^prompt 0: action=ALLOW' "requests: the benign prompt is allowed"
expect "$WORK/requests.out" '^prompt 1: action=BLOCK' "requests: the injection is blocked"
expect "$WORK/requests.out" '^  finding [A-Z]+_[0-9]+' "requests: findings are printed"
expect "$WORK/requests.out" '^conversation: action=(BLOCK|SANITIZE)' "requests: the tool-message injection is caught"
cat "$WORK/requests.out"

# ---- 3. openai
echo "== examples/openai_client.py"
before=0
[[ -f "$WORK/upstream.jsonl" ]] && before="$(wc -l <"$WORK/upstream.jsonl")"
RAMPART_API_KEY=unused "$PY" examples/openai_client.py >"$WORK/openai.out" 2>&1 || { cat "$WORK/openai.out" >&2; fail "examples/openai_client.py exited non-zero"; }
expect "$WORK/openai.out" "^plain: 'Hello from the mock upstream" "openai: the plain completion comes from the upstream"
expect "$WORK/openai.out" "^streamed: 'Hello from the mock upstream.*\([0-9]+ chunks\)" "openai: the streamed completion comes through"
expect "$WORK/openai.out" '^injection: blocked, HTTP 400, code=rampart_blocked' "openai: the injection is blocked with rampart_blocked"
after="$(wc -l <"$WORK/upstream.jsonl")"
[[ $(( after - before )) -eq 2 ]] || fail "openai: the upstream got $(( after - before )) requests, expected 2 (the blocked one must not be forwarded)"
grep -q 'reveal your system prompt' "$WORK/upstream.jsonl" && fail "openai: the blocked prompt reached the upstream"
cat "$WORK/openai.out"

# ---- 4. an agent loop through the proxy's tool gate (argument provenance)
echo "== examples/agent/agent_loop.py"
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
AGENT_MOCK_PORT="$(free_port)"
"$PY" examples/agent/mock_agent_model.py "$AGENT_MOCK_PORT" >"$WORK/agent_mock.log" 2>&1 &
AGENT_MOCK_PID=$!
AGENT_PORT="$(free_port)"
cat >"$WORK/agent.toml" <<TOML
version = 1

[server]
listen = "127.0.0.1:$AGENT_PORT"

[proxy]
upstream_url = "http://127.0.0.1:$AGENT_MOCK_PORT/v1"
timeout_ms = 10000

[tools]
policy = "$ROOT/examples/agent/policy.toml"
TOML
OPENAI_API_KEY="" "$BIN" serve --config "$WORK/agent.toml" >"$WORK/agent_serve.out" 2>"$WORK/agent_serve.log" &
AGENT_SERVE_PID=$!
stop_agent() { kill "$AGENT_SERVE_PID" "$AGENT_MOCK_PID" 2>/dev/null; wait "$AGENT_SERVE_PID" "$AGENT_MOCK_PID" 2>/dev/null || true; }
ready=""
for _ in $(seq 1 150); do
  if curl -sf --max-time 2 "http://127.0.0.1:$AGENT_PORT/readyz" >/dev/null 2>&1; then ready=1; break; fi
  sleep 0.1
done
[[ -n "$ready" ]] || { stop_agent; cat "$WORK/agent_serve.log" >&2; fail "the agent example's rampart serve was not ready"; }
agent_rc=0
RAMPART_URL="http://127.0.0.1:$AGENT_PORT" "$PY" examples/agent/agent_loop.py >"$WORK/agent.out" 2>&1 || agent_rc=$?
stop_agent
[[ $agent_rc == 0 ]] || { cat "$WORK/agent.out" >&2; fail "examples/agent/agent_loop.py exited non-zero"; }
expect "$WORK/agent.out" '^  rampart: send_money ALLOW TOOL_ACTION /iban untrusted \(message 3\)' "agent: the bill's own IBAN, vouched for by the file the user named, is paid"
expect "$WORK/agent.out" '^  tool send_money: paid 84.2 EUR' "agent: the payment ran"
expect "$WORK/agent.out" '^  rampart: send_money (CONFIRM|BLOCK) TOOL_ACTION\+TOOL_PROVENANCE /iban untrusted \(message 3\)' "agent: the calendar note's IBAN is held"
if grep -q 'paid 900' "$WORK/agent.out"; then fail "agent: the injected payment ran"; fi
cat "$WORK/agent.out"

# ---- the audit log saw the calls (stop the server first: it flushes on shutdown)
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; SERVE_PID=""
n="$("$BIN" audit query --db "$WORK/audit.db" --json --limit 0 2>/dev/null | wc -l || true)"
echo "audit records: $n"
[[ "$n" -ge 10 ]] || fail "expected at least 10 audit records, got $n"

echo "examples_check: all examples passed"
