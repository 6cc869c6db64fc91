#!/usr/bin/env bash
# The Python package (python/): a wheel built from the checkout with maturin, installed into
# a venv, its pytest suite run against the Rust CLI's decisions, and its types checked with
# mypy --strict.
#
#   bash scripts/ci/python_check.sh               # build, install, test, type-check
#   bash scripts/ci/python_check.sh --setup-only  # only create the venv (CI: in the background)
#
# RAMPART_PYTHON_VENV: where the venv lives (default target/python-venv; CI keeps it in its
# cache). BIN: the CLI the decisions are compared with (default target/debug/rampart).
# PROFILE: the cargo profile of the wheel (default dev: CI reuses the debug build; a user's
# `pip install ./python` builds release).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
MATURIN_VERSION="1.9.6"
PYTEST_VERSION="8.4.2"
MYPY_VERSION="1.18.2"
OPENAI_VERSION="3.51.0"   # as scripts/ci/examples_check.sh
LANGCHAIN_CORE_VERSION="1.8.3"
ANTHROPIC_VERSION="2.16.0"
FASTAPI_VERSION="0.165.0"
PYTHON="${PYTHON:-python3}"
VENV="${RAMPART_PYTHON_VENV:-$ROOT/target/python-venv}"
PROFILE="${PROFILE:-dev}"

if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "
import importlib.metadata as m, sys
want = {'maturin': '$MATURIN_VERSION', 'pytest': '$PYTEST_VERSION', 'mypy': '$MYPY_VERSION', 'openai': '$OPENAI_VERSION', 'langchain-core': '$LANGCHAIN_CORE_VERSION', 'anthropic': '$ANTHROPIC_VERSION', 'fastapi': '$FASTAPI_VERSION'}
sys.exit(0 if all(m.version(k) == v for k, v in want.items()) else 1)
" 2>/dev/null; then
  echo "creating $VENV (maturin==$MATURIN_VERSION, pytest==$PYTEST_VERSION, mypy==$MYPY_VERSION, openai==$OPENAI_VERSION, langchain-core==$LANGCHAIN_CORE_VERSION, anthropic==$ANTHROPIC_VERSION, fastapi==$FASTAPI_VERSION)…"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check \
    "maturin==$MATURIN_VERSION" "pytest==$PYTEST_VERSION" "mypy==$MYPY_VERSION" "openai==$OPENAI_VERSION" \
    "langchain-core==$LANGCHAIN_CORE_VERSION" "anthropic==$ANTHROPIC_VERSION" \
    "fastapi==$FASTAPI_VERSION"
fi
case "${1:-}" in
  --setup-only) echo "venv ready: $VENV"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--setup-only]" >&2; exit 2 ;;
esac

WHEELS="$ROOT/target/wheels"
rm -rf "$WHEELS"
"$VENV/bin/maturin" build --profile "$PROFILE" -m python/Cargo.toml -o "$WHEELS" --locked
"$VENV/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$WHEELS"/rampart_firewall-*.whl
# From outside the checkout: the installed wheel is what is imported, not python/rampart.
BIN="$(cd "$ROOT" && realpath "${BIN:-target/debug/rampart}")"
(cd "$ROOT/target" && RUST_BACKTRACE=0 RAMPART_BIN="$BIN" \
  "$VENV/bin/python" -m pytest -q "$ROOT/python/tests")
"$VENV/bin/mypy" --strict "$ROOT/python/rampart" "$ROOT/python/tests/typing_check.py"
echo "python_check: the wheel, its tests and its types passed"
