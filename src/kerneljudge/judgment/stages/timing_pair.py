"""The fresh worker pair that timing runs on: booted while the checked pair works, greeted and loaded when
timing starts, started again after a failed graph capture. Its logs are kept as `<role>_timing`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from kerneljudge.judgment.stages.build import load_reference, reference_hello, start_candidate
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.workers import add_seconds, close_beside, close_workers, join_closing, new_pair
from kerneljudge.sandbox import cache_carry


def boot(state: JudgmentState) -> None:
    """Start the timing pair's interpreters now; `start` greets and loads them.

    Importing torch and starting CUDA take most of a worker's start (about 8 s a pair on an H200).
    Started while the checked pair works, that is done before the measurement, and in a batch
    before the lanes' gate holds the others back for it. Until loaded, the pair runs no task or
    candidate code. For a candidate that declares a Triton kernel its worker readies Triton as it starts
    (worker/prepare.py), which its first call in the hold would otherwise do.
    """
    state.booting = new_pair(state, state.build.device or "cpu", prepare_triton=state.readies_triton)


def start(state: JudgmentState, boot_pair: Callable[[], None]) -> None:
    """Replace both workers by fresh ones, loaded the same way, for timing only; `boot_pair` boots a pair
    where none is booting (a second pair, after a failed graph capture).

    The checked pair has been through the correctness trials, and on CUDA the candidate's through a
    kernel trace: on an H200 a traced process launched the same softmax 2-4% slower afterwards even
    with CUPTI torn down (the A/A control read 0.962x and 0.977x), while the reference, never traced,
    did not. A fresh pair times both sides in the same state. Its logs are kept as `<role>_timing`. With
    `timing_carry`, the candidate's compiled kernels go with it (sandbox/cache_carry.py); with `timing_ahead` it
    was greeted and loaded (its pool staged) while correctness ran, and is taken as it is
    (judgment/stages/timing_ahead.py).
    """
    join_closing(state)
    ahead = state.ahead if not state.pair_log.started else None  # a second pair (a failed capture's) starts in line
    carry = {"candidate": partial(carry_caches, state)} if carried(state) else {}
    if carry and not state.booting:  # the carry's destination is started before the checked workspace goes
        boot_pair()
    beside = bool(state.booting) and not carry and closes_beside(state)
    if beside:  # before the wait for a pair made ahead, so that the two overlap
        close_beside(
            state
        )  # its end awaited before the measuring hold (judgment/stages/timing.py), all of it before the record
    loaded = ahead.join(state) if ahead is not None else False
    if not beside:
        began = time.monotonic()
        state.closed_logs.update(close_workers(state, carry))
        add_seconds(state, "timing.checked_pair.close", time.monotonic() - began)  # or a first timing pair
    if not state.booting:  # a second pair, after a failed graph capture
        boot_pair()
    state.workers, state.booting = state.booting, {}
    state.pair_log.started += 1
    if not loaded:  # else greeted and loaded ahead, while correctness ran (judgment/stages/timing_ahead.py)
        reference_hello(state)
        start_candidate(state, load_reference(state))


# The most device memory the closing pair may still hold while the fresh one stages its pool: a sixteenth of the
# GPU's, beside the one reservation the gate made for both pairs (gate.memory_need, the larger of the two).
BESIDE_SHARE = 16


def closes_beside(state: JudgmentState) -> bool:
    """Whether the checked pair may end while the fresh pair is greeted, loaded and staged (the carry needs its
    workspace whole first): on the CPU, or where NVML saw it hold at most a BESIDE_SHARE-th of the GPU, and
    the gate reserved no more than that for the judgment."""
    if state.build.device != "cuda":
        return True
    total = state.build.gpu_memory_bytes
    watches = [worker.gpu_watch for worker in state.workers.values()]
    peaks = [watch.peak_bytes if watch is not None else 0 for watch in watches]
    if not total or not all(peaks) or state.admission.reserved_bytes > total // BESIDE_SHARE:  # 0: NVML did not see it
        return False
    return sum(peaks) <= total // BESIDE_SHARE


def carried(state: JudgmentState) -> bool:
    """Whether the candidate's compiler caches go to its timing worker: asked for (`timing_carry`), and only
    where the timing pool is made of fresh draws no checked worker saw (sandbox/cache_carry.py)."""
    return state.config.timing_carry and bool(state.plan and state.plan.timing_seeds)  # none drawn natively


def carry_caches(state: JudgmentState, checked_root: Path) -> None:
    """Copy the checked candidate worker's caches into the booted timing worker's workspace; what was carried
    goes into the record (`timing.carried_caches`)."""
    began = time.monotonic()
    worker = state.booting["candidate"]
    owner = (worker.uid, worker.policy.gid) if worker.uid is not None else None
    try:
        found = cache_carry.carry(checked_root, worker.workspace.root, owner)
    except OSError as exc:  # what was copied stays: the candidate's own caches, only fewer of them
        found = cache_carry.Carried(dropped=f"{type(exc).__name__}: {exc}"[:300])
    worker.received()
    seconds = round(time.monotonic() - began, 3)
    state.pair_log.carried = found.as_dict() | {"seconds": seconds}
    state.stages_s["timing.candidate.carry"] = seconds
