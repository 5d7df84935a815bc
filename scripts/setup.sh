#!/usr/bin/env bash
# Creates .venv and installs kerneljudge with its test extras, and Triton where it installs. Safe to run again:
# an existing .venv is kept and pip installs only what is missing.
# Each step says what it does as it starts; a long install says it is still going every SETUP_TICK_S seconds
# (default 15) on stderr, and the last line gives the whole run's duration (a first run downloads torch, the
# longest step, and the extras' few hundred MB).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TICK="${SETUP_TICK_S:-15}"
quiet() { "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; return "${PIPESTATUS[0]}"; }
step() { echo "setup: $*" >&2; }
# ticking WHAT CMD...: runs CMD, saying "still WHAT (N s)" every $TICK seconds until it ends; CMD's status.
ticking() {
  local what=$1 rc=0 ticker
  shift
  # The ticker's sleep holds no stream of ours: when the ticker is killed, no orphan keeps a caller's pipe open.
  (n=0; while sleep "$TICK" </dev/null >/dev/null 2>&1; do n=$((n + TICK)); step "still $what ($n s)"; done) &
  ticker=$!
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  return "$rc"
}

if [ -x .venv/bin/python ]; then
  step "using the existing .venv"
else
  step "creating .venv with $PYTHON"
  "$PYTHON" -m venv .venv
fi
# torch first and pinned: on the project's machines this release is a CPU build on local disk.
step "installing torch 2.13.0 (the longest step on a first run: a download of several hundred MB)"
ticking "installing torch" quiet .venv/bin/python -m pip install -q torch==2.13.0
# contract: the trainers' releases tests/contract/ runs the adapters in (verl, TRL, verifiers; docs/adapters.md).
step "installing kerneljudge (editable) with its dev, contract and Triton extras"
if ! ticking "installing kerneljudge's extras" quiet .venv/bin/python -m pip install -q -e '.[dev,contract,triton]'; then
  echo "setup: Triton did not install here; continuing without it (Triton candidates will fail to import)" >&2
  step "installing kerneljudge (editable) with its dev and contract extras"
  ticking "installing kerneljudge's extras" quiet .venv/bin/python -m pip install -q -e '.[dev,contract]'
fi
step "checking that the package and its dependencies import"
.venv/bin/python -c "import kerneljudge, torch, numpy, pydantic, rich, jsonschema, pytest, xdist, matplotlib"
step "done in ${SECONDS} s: .venv/bin/kerneljudge --help lists the commands"
