#!/usr/bin/env bash
# Creates .venv and installs kerneljudge with its test and Triton extras (CPU torch where a local build exists).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# torch first and pinned: on the project's machines this release is a CPU build on local disk.
.venv/bin/python -m pip install -q torch==2.13.0 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q -e '.[dev,triton]' 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import kerneljudge, torch, pydantic, safetensors, rich, jsonschema, pytest" \
  || { echo "setup: the installation is incomplete (see pip's messages above)" >&2; exit 1; }
