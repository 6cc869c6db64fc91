#!/usr/bin/env bash
# Downloads the real-code samples `rampart lint` was measured on (docs/lint.md, "Measured"):
# wheels and sdists from PyPI at the versions recorded there, unpacked under
# data/lint-corpus/<sample>/src, then lints each sample and prints what it found (label the
# findings by hand: the figures in docs/lint.md are hand-labelled).
#   bash scripts/lint/real_code.sh [--bin target/release/rampart]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=target/release/rampart
[ "${1:-}" = "--bin" ] && BIN=$2
declare -A SAMPLES=(
  [development]="shell-gpt==1.4.5 gpt-engineer==0.3.1 llm==0.19 chainlit==2.0.0 open-interpreter==0.4.3 aider-chat==0.72.1 gptme==0.25.0 crewai==0.95.0 khoj==1.33.2"
  [heldout]="pandasai==3.0.0 vanna==2.0.2 gpt-researcher==0.15.1 langroid==0.69.16 phidata==2.7.10 marvin==3.2.7 embedchain==0.1.128 mem0ai==2.2.1 mentat==1.0.19 txtai==9.14.0"
  [fresh]="agno==3.1.10 smolagents==1.26.0 camel-ai==0.2.90 letta==0.34.12 griptape==1.13.0 swarms==16.0.3 dspy==3.4.1 autogen-agentchat==0.7.5"
  [third]="pydantic-ai-slim==2.68.0 langgraph==1.2.24 openai-agents==0.24.0 haystack-ai==3.4.1 semantic-kernel==1.45.0 llama-index-core==0.14.25"
)
for sample in development heldout fresh third; do
  dir=data/lint-corpus/$sample
  mkdir -p "$dir/dl" "$dir/src"
  for p in ${SAMPLES[$sample]}; do
    pip download --no-deps -q -d "$dir/dl" "$p"
  done
  for f in "$dir"/dl/*; do
    case "$f" in
      *.whl) n=$(basename "$f" .whl); [ -d "$dir/src/$n" ] || python3 -m zipfile -e "$f" "$dir/src/$n" ;;
      *.tar.gz) tar -xzf "$f" -C "$dir/src" ;;
    esac
  done
  echo "== $sample"
  "$BIN" lint --fail-on never "$dir/src" | tail -1
done
