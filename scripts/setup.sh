#!/usr/bin/env bash
# Creates .venv and installs kerneljudge with its test extras, and Triton where it installs.
# Each step says what it does as it starts (the first run takes about 90 s on the 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
quiet() { "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; return "${PIPESTATUS[0]}"; }
step() { echo "setup: $*" >&2; }

if [ -x .venv/bin/python ]; then
  step "using the existing .venv"
else
  step "creating .venv with $PYTHON"
  "$PYTHON" -m venv .venv
fi
# torch first and pinned: on the project's machines this release is a CPU build on local disk.
step "installing torch 2.13.0 (the longest step on a first run)"
quiet .venv/bin/python -m pip install -q torch==2.13.0
# contract: the trainers' releases tests/contract/ runs the adapters in (verl, TRL, verifiers; docs/adapters.md).
step "installing kerneljudge (editable) with its dev, contract and Triton extras"
if ! quiet .venv/bin/python -m pip install -q -e '.[dev,contract,triton]'; then
  echo "setup: Triton did not install here; continuing without it (Triton candidates will fail to import)" >&2
  step "installing kerneljudge (editable) with its dev and contract extras"
  quiet .venv/bin/python -m pip install -q -e '.[dev,contract]'
fi
step "checking that the package and its dependencies import"
.venv/bin/python -c "import kerneljudge, torch, numpy, pydantic, rich, jsonschema, pytest, xdist, matplotlib"
step "done: .venv/bin/kerneljudge --help lists the commands"
