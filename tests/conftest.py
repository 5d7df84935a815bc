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


# The test files that took longest on the 2-core CI machine (a clean clone's `.ci/run`, 2026-12-08, judge 0.3.21;
# seconds summed over their steps), run first. pytest-xdist's `loadfile` gives each test process a whole file at a
# time, in collection order (`--no-loadscope-reorder` in pyproject.toml: its own reordering counts tests, not
# seconds); started last, a long file ran alone at the end while the other process idled, some 150 s of the run.
LONGEST_FIRST = (
    "suite/test_suite.py",  # 392 s
    "redteam/test_redteam_audit.py",  # 209 s
    "runs/test_chaos.py",  # 183 s
    "runs/test_ray_backend.py",  # 152 s
    "sandbox/test_sandbox_faults.py",  # 136 s
    "judgment/test_judgment_latency.py",  # 132 s
    "cli/test_examples.py",  # 128 s
    "judgment/test_timing_ahead.py",  # 124 s
    "tasks/test_gpumode.py",  # 123 s
    "judgment/test_judge_verdicts.py",  # 112 s
    "judgment/test_spare_pairs.py",  # 111 s
    "worker/test_runtime_evidence.py",  # 103 s
    "serve/test_serve_load.py",  # 101 s
    "runs/test_lanes.py",  # 80 s
    "judgment/test_group.py",  # 79 s
    "judgment/test_faults.py",  # 78 s
    "redteam/test_redteam_enforce.py",  # 78 s
    "tasks/test_tasklint.py",  # 66 s
    "judgment/test_sanitizer.py",  # 65 s
    "tasks/test_shapes.py",  # 52 s
    "sandbox/test_bytecode_cache.py",  # 51 s
    "timing/test_config_and_timing.py",  # 50 s
    "tasks/test_task_kinds.py",  # 50 s
    "sandbox/test_workspace_hostile.py",  # 49 s
    "sandbox/test_cache_carry.py",  # 46 s
)


def longest_first(items: list) -> None:
    """`items` reordered in place: the files of LONGEST_FIRST first, in its order; each file's own tests, and the
    files it does not name, in the order they were collected."""
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0].removeprefix("tests/"), len(rank)))


def pytest_collection_modifyitems(config, items):
    longest_first(items)
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
