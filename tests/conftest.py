"""Fixtures, and the rule that tests marked `gpu` are skipped where no CUDA device is visible."""

import sys
from pathlib import Path

import pytest

from helpers import TASKS

# The tests are grouped by the package they test (tests/judgment/, tests/worker/, ...); a few share a helper
# with another wing's module by name (test_lanes.RecordingGate, test_runtime_evidence.CLEAN), so every wing's
# folder is importable, as tests/ itself is.
for _wing in sorted(Path(__file__).parent.iterdir()):
    if _wing.is_dir() and _wing.name not in ("fixtures", "__pycache__") and str(_wing) not in sys.path:
        sys.path.append(str(_wing))


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device visible")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def tiny_task() -> Path:
    return TASKS / "tiny_bias_relu.py"
