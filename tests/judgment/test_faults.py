"""Crashes, hangs, floods and oversized outputs end in a typed verdict; the judge goes on."""

import time

import pytest

from helpers import CANDIDATES, run_judge


@pytest.mark.parametrize(
    "fixture, kind",
    [
        ("segfault.py", "crash"),
        ("abort.py", "crash"),
        ("exit_early.py", "crash"),
        ("huge_output.py", "shape_mismatch"),
    ],
)
def test_fault_is_typed(tiny_task, fixture, kind):
    record = run_judge(tiny_task, CANDIDATES / fixture)
    assert record.status == "FAIL" and record.failure.kind == kind, record.failure
    assert record.valid


@pytest.mark.parametrize("fixture", ["hang_host.py", "hang_import.py"])
def test_hang_times_out_within_the_limit(tiny_task, fixture):
    started = time.monotonic()
    record = run_judge(tiny_task, CANDIDATES / fixture, timeout_s=5.0)
    assert record.status == "FAIL" and record.failure.kind == "timeout"
    assert time.monotonic() - started < 60


def test_flood_is_capped_and_the_answer_still_counts(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "flood.py", log_cap_bytes=32 * 1024)
    assert record.status == "PASS"
    log = record.logs["candidate"]
    assert log.stdout_bytes > 10_000_000 and log.stderr_bytes > 10_000_000 and log.truncated
    assert len(log.stdout_tail) < 40 * 1024 and len(log.stderr_tail) < 40 * 1024


def test_judge_carries_on_after_a_crash(tiny_task):
    first = run_judge(tiny_task, CANDIDATES / "segfault.py")
    second = run_judge(tiny_task, CANDIDATES / "honest_torch.py")
    assert (first.status, second.status) == ("FAIL", "PASS")
