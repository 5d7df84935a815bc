"""Fixtures, and the rule that tests marked `gpu` are skipped where no CUDA device is visible."""

from pathlib import Path

import pytest

from helpers import TASKS


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
