"""Perturbed replays on a GPU: a global-memory race between programs that an idle GPU hides fails a replay under
the worker's perturbations of scheduling, an honest Triton kernel passes every one of them with what the worker
made recorded, and under strict its Triton-only kernels are sanitized by memcheck and synccheck.

Skipped without CUDA (the `gpu` marker). Run: `pytest tests/gpu/test_gpu_perturb.py -m gpu`.
"""

import os
from pathlib import Path

import pytest

from helpers import CANDIDATES, TASKS, run_judge
from kerneljudge.judgment.sanitizer import TRITON_TOOLS, sanitizer_path
from kerneljudge.worker.correctness.perturb import KINDS

pytestmark = pytest.mark.gpu


def keep(record, name):
    directory = os.environ.get("KJ_RECORD_DIR")
    if directory:
        Path(directory, f"test-perturb-{name}.json").write_text(record.to_json())
    return record


def judged(task, candidate, name):
    settings = {"device": "cuda", "mode": "enforce", "policy": "strict", "timeout_s": 300.0}
    return keep(run_judge(TASKS / task, CANDIDATES / candidate, **settings), name)


def test_a_split_row_sum_that_reads_partials_unordered_fails_a_perturbed_replay():
    record = judged("row_sum.py", "split_row_race.py", "split-row-race")
    replay = record.correctness.replay or {}
    assert record.status == "FAIL" and record.failure.kind == "nondeterministic", (record.failure, replay)
    assert " under " in record.failure.phase, record.failure  # not the plain replays: a perturbed one
    plain = [t for t in replay["trials"] if "perturbation" not in t]
    assert plain and all(t["differing_elements"] == 0 for t in plain), plain  # right and the same when idle
    assert all(t.passed for t in record.correctness.trials), record.correctness.trials


def test_an_honest_triton_kernel_passes_every_perturbation_and_is_sanitized_under_strict():
    record = judged("bias_relu.py", "honest_triton.py", "honest-triton")
    replay = record.correctness.replay
    assert record.status == "PASS" and record.verified, (record.failure, [f.code for f in record.findings], replay)
    assert sorted(p["kind"] for p in replay["perturbations"]) == sorted(KINDS)
    perturbed = [t for t in replay["trials"] if "perturbation" in t]
    assert [t["perturbation"] for t in perturbed] == [p["kind"] for p in replay["perturbations"]], perturbed
    assert all(t["conditions"] for t in perturbed), perturbed
    if sanitizer_path() is not None:
        sanitized = record.correctness.sanitizer
        assert sanitized["tools_run"] == list(TRITON_TOOLS) and sanitized["reason"].startswith("Triton kernels")
        assert {t["status"] for t in sanitized["tools"].values()} == {"clean"}, sanitized
