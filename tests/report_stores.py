"""Synthetic stores for the report's tests: judged-looking records of mixed verdicts, timed or not."""

from __future__ import annotations

import hashlib

from helpers import make_record
from kerneljudge.results.verdict import Finding, Identity, Record

WARNING = Finding(code="KJ-R051", detector="timing", severity="warning", summary="timed less than traced")
# (status, failure kind, correct) in turn: nine, so that each of the four tasks meets every verdict; an item's
# speedup and paired blocks follow from its index
VERDICTS = (
    ("PASS", None, True),
    ("FAIL", "tolerance", False),
    ("PASS", None, True),
    ("SUSPICIOUS", None, True),
    ("FAIL", "runtime_error", False),
    ("UNSUPPORTED", None, False),
    ("FAIL", "integrity_violation", True),
    ("ERROR", "judge_error", False),
    ("FAIL", "timeout", False),
)


def task_identity(index: int) -> Identity:
    """Tasks in turn: a KernelBench level-1 and a level-2 problem, a built-in task and one named with HTML in it."""
    names = ("19_ReLU", "1_Conv2D_ReLU_BiasAdd", "softmax_fp32", "odd<task>&name")
    paths = ("KernelBench/level1/19_ReLU.py", "KernelBench/level2/1_Conv2D_ReLU_BiasAdd.py", "builtin:softmax_fp32")
    name = names[index % len(names)]
    path = paths[index % len(names)] if index % len(names) < len(paths) else f"tasks/{name}.py"
    return Identity(sha256=hashlib.sha256(name.encode()).hexdigest(), name=name, path=path)


def mixed_record(index: int, timed: bool) -> Record:
    """The index-th item of a mixed store: its task from task_identity, its verdict from VERDICTS."""
    status, kind, correct = VERDICTS[index % len(VERDICTS)]
    speedup = 0.6 + 0.15 * (index % 11) if timed and correct else None
    record = make_record(
        f"sample_{index}" if index % 5 else f"candidate <{index}>",
        status=status,
        speedup=speedup,
        task=task_identity(index),
        failure_kind=kind,
        findings=[WARNING] if status == "SUSPICIOUS" else [],
    )
    record.correctness.passed = correct
    if speedup is not None:
        record.timing.block_ratios = [speedup * (1 + 0.02 * ((b * 7 + index) % 5 - 2)) for b in range(8)]
        record.timing.speedup_interval = [speedup * 0.96, speedup * 1.04]
    return record


def mixed_store(size: int, timed: bool) -> list[Record]:
    return [mixed_record(i, timed) for i in range(size)]
