"""What running short of device memory says, set against the judge's own need (gate.py's memory rule).

A candidate that allocates more than the device holds fails (`runtime_error`), but a judgment can also run short
because the judge itself needs more than the GPU has: the float64 oracle, the kept inputs and outputs, the poisoned
memory, the timing pool. On an H100 80GB (2026-12-05) KernelBench's 6 GiB elementwise problems, the reference
submitted as its own candidate, ran short in the candidate's worker at a hidden trial and in the fresh timing pair,
and were FAIL; by the rule their checked pair needs about 102 GiB and their timing pair 142. Where the rule's need
at that stage is more than the GPU's usable memory, an out-of-memory says nothing about the candidate: in the
trials it is the judge's error (an invalid record that punishes nobody), and in the timing stage the timing is not
measured and the verdict of the trials stands (docs/batch.md, "Short of memory on a smaller GPU").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kerneljudge.judgment.gate import USABLE, footprint_sizes, memory_need, timing_need
from kerneljudge.judgment.stages.failures import CandidateFailed, JudgeFailed, TaskUnsupported
from kerneljudge.judgment.stages.results import TimingRun
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.results.verdict import Failure, Timing

# How running out of memory reads in a failure's summary: torch's allocator, and cuBLAS failing to make its handle
# (a worker starting beside lanes that hold the device's memory, on an H200: CUBLAS_STATUS_ALLOC_FAILED).
OUT_OF_MEMORY = ("out of memory", "outofmemoryerror", "cublas_status_alloc_failed")
GIB = 2**30
# How such a judgment's failure begins: a need larger than the GPU was admitted alone (gate.LaneGate.admit), so a
# batch does not judge it again alone (runs/backends/lane.short_of_memory).
DOES_NOT_FIT = "the judgment does not fit this GPU"


def ran_short(failure: Failure | None) -> bool:
    """Whether a failure is an out-of-memory (of the device or the host)."""
    return (
        failure is not None
        and failure.kind in ("runtime_error", "crash", "judge_error")
        and any(sign in failure.summary.lower() for sign in OUT_OF_MEMORY)
    )


def beyond_the_gpu(state: JudgmentState, timing: bool) -> str | None:
    """Where the judge's own rule needs more of the GPU than it holds at this stage (the trials' pair, or with
    `timing` the timing pair), the one line that says so; None where it fits or nothing is known."""
    total = state.build.gpu_memory_bytes
    sizes = footprint_sizes(state.admission.footprint)
    if state.build.device != "cuda" or not total or sizes is None:
        return None
    need = timing_need(sizes, state.admission.pool_sets) if timing else memory_need(state.admission.footprint)
    if need <= USABLE * total:
        return None
    pair = "the timing pair's workers" if timing else "the two workers"
    return (
        f"{DOES_NOT_FIT}: by the judge's memory rule {pair} hold up to about {need / GIB:.0f} GiB, more than its "
        f"{total / GIB:.0f} GiB, so running short of memory says nothing about the candidate"
    )


def judged(state: JudgmentState, failure: Failure) -> Failure:
    """A candidate's failure as the record keeps it: an out-of-memory in the trials where the judgment does not
    fit the GPU is the judge's error; any other failure is the candidate's."""
    why = beyond_the_gpu(state, timing=False) if ran_short(failure) else None
    if why is None:
        return failure
    summary = f"{why} ({failure.phase}: {failure.summary[:300]})"
    return Failure(kind="judge_error", phase="judge", summary=summary, traceback=failure.traceback)


@contextmanager
def untimed_where_beyond(state: JudgmentState, result: TimingRun) -> Iterator[None]:
    """Around the timing stage: an out-of-memory of a timing pair that does not fit the GPU, in the candidate's
    worker or the reference's (which fails the judge while timed, or reads as a reference that does not fit the
    device while it stages the pool), leaves the timing stage's `result` unmeasured, with the reason, and the
    trials' verdict as it is."""
    try:
        yield
    except (CandidateFailed, JudgeFailed, TaskUnsupported) as exc:
        failure = (
            exc.failure
            if isinstance(exc, CandidateFailed)
            else Failure(kind="judge_error", phase="timing", summary=str(exc))
        )
        why = beyond_the_gpu(state, timing=True) if ran_short(failure) else None
        if why is None:
            raise
        result.timing = Timing(measured=False, reason=f"{why} ({failure.summary[:300]})")
