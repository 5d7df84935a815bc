"""Property-based: each reference Triton candidate of the built-in suite matches the float64 oracle within the
judge's per-dtype tolerance at shapes, dtypes and input magnitudes that hypothesis draws, not only at the
suite's fixed shapes. Each operation runs in a process of its own under the Triton interpreter
(tests/suite_properties.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kerneljudge import suite

pytest.importorskip("triton")
pytest.importorskip("hypothesis")


@pytest.mark.parametrize("op", suite.OPS)
def test_each_candidate_matches_the_oracle_at_drawn_shapes_dtypes_and_magnitudes(op):
    script = Path(__file__).parents[1] / "suite_properties.py"
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, str(script), op], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no counterexample" in done.stdout
