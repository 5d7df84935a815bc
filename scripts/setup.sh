#!/usr/bin/env bash
# Creates .venv and installs kerneljudge with its test extras, and Triton where it installs.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
quiet() { "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; return "${PIPESTATUS[0]}"; }

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# torch first and pinned: on the project's machines this release is a CPU build on local disk.
quiet .venv/bin/python -m pip install -q torch==2.13.0
if ! quiet .venv/bin/python -m pip install -q -e '.[dev,triton]'; then
  echo "setup: Triton did not install here; continuing without it (Triton candidates will fail to import)" >&2
  quiet .venv/bin/python -m pip install -q -e '.[dev]'
fi
.venv/bin/python -c "import kerneljudge, torch, numpy, pydantic, rich, jsonschema, pytest, xdist, matplotlib"
