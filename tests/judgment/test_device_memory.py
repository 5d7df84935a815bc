"""Running short of device memory, set against the judge's own need (judgment/stages/device_memory.py), and the judge's
poisoning of the memory a candidate's output is placed in (worker/candidate.py), which never fails the candidate.

The figures are KernelBench level 1's 6 GiB elementwise problems (`22_Tanh`, `27_SELU_`, `32_HardTanh`), the
reference submitted as its own candidate, on an H100 80GB (2026-12-05): FAIL by 0.3.4, out of memory in the
judge's poisoning at a hidden trial and in the fresh timing pair.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from helpers import CANDIDATES, hello_frame
from kerneljudge.judgment.gate import GIB
from kerneljudge.judgment.stages import device_memory
from kerneljudge.judgment.stages.failures import CandidateFailed, JudgeFailed, TaskUnsupported
from kerneljudge.judgment.stages.results import TimingRun
from kerneljudge.judgment.stages.state import Admission, BuildFacts
from kerneljudge.results.verdict import Failure, Timing
from kerneljudge.runs.backends.lane import short_of_memory
from kerneljudge.worker.candidate import CandidateWorker

H100 = 79 * GIB
H200 = 140 * GIB
ELEMENTWISE_6_GIB = {"input_bytes": 6 * GIB, "output_bytes": 6 * GIB, "activation_bytes": 6 * GIB, "parameter_bytes": 0}
SMALL = {"input_bytes": GIB // 4, "output_bytes": GIB // 4, "activation_bytes": GIB // 4, "parameter_bytes": 0}
SHORT = (
    "OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB. GPU 0 has a total capacity of 79.18 GiB of "
    "which 7.33 GiB is free."
)


def judgment(footprint, total, device="cuda"):
    build = BuildFacts(device=device, hello=hello_frame(gpu_memory_bytes=total))
    return SimpleNamespace(build=build, admission=Admission(footprint=footprint, pool_sets=2))


def short_at(phase, summary=SHORT, kind="runtime_error"):
    return Failure(kind=kind, phase=phase, summary=summary, traceback="Traceback ... poison")


def test_running_short_where_the_judgment_outgrew_the_gpu_is_the_judges_error():
    kept = device_memory.judged(judgment(ELEMENTWISE_6_GIB, H100), short_at("trial 6"))
    assert kept.kind == "judge_error" and kept.phase == "judge"
    assert kept.summary.startswith("the judgment does not fit this GPU") and "79 GiB" in kept.summary
    assert "trial 6" in kept.summary and "\n" not in kept.summary
    # It ran alone already (its need is more than the GPU): a batch does not judge it again alone
    assert not short_of_memory(SimpleNamespace(capabilities={}, failure=kept))
    assert short_of_memory(SimpleNamespace(capabilities={}, failure=short_at("trial 6")))


@pytest.mark.parametrize(
    "footprint, total, failure",
    [
        (ELEMENTWISE_6_GIB, H200, short_at("trial 6")),  # the judgment fits: the candidate allocated too much
        (SMALL, H100, short_at("trial 2")),
        (ELEMENTWISE_6_GIB, H100, short_at("trial 6", "tolerance: 3 of 8 elements", "tolerance")),  # not short
        (None, H100, short_at("trial 6")),  # nothing known of the task's footprint
    ],
)
def test_any_other_failure_stays_the_candidates(footprint, total, failure):
    assert device_memory.judged(judgment(footprint, total), failure) is failure


def test_a_timing_pair_that_outgrew_the_gpu_leaves_the_timing_unmeasured_and_the_verdict_as_it_is():
    result = TimingRun(Timing(measured=True))
    with device_memory.untimed_where_beyond(judgment(ELEMENTWISE_6_GIB, H100), result):
        raise CandidateFailed(short_at("timing"))
    assert result.timing.measured is False and "timing pair" in result.timing.reason
    assert "79 GiB" in result.timing.reason


@pytest.mark.parametrize("footprint, total", [(ELEMENTWISE_6_GIB, H200 * 2), (SMALL, H100)])
def test_a_timing_pair_that_fits_and_runs_short_is_the_candidates_failure(footprint, total):
    with pytest.raises(CandidateFailed):
        with device_memory.untimed_where_beyond(judgment(footprint, total), TimingRun()):
            raise CandidateFailed(short_at("timing"))


class ShortDevice:
    """A torch whose device holds `room` bytes at once: `full` of more raises its out-of-memory, as CUDA's does."""

    class OutOfMemoryError(RuntimeError):
        pass

    def __init__(self, room):
        self.room, self.asked, self.emptied = room, [], 0

    def full(self, shape, value, device=None):
        nbytes = shape[0] * 4
        self.asked.append(nbytes)
        if nbytes > self.room:
            raise self.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {nbytes} bytes")
        return object()


def poisoner(room):
    worker = object.__new__(CandidateWorker)  # the poisoning alone, without a process around it
    worker.torch, worker.device = ShortDevice(room), "cuda"
    worker.release_cached = lambda: setattr(worker.torch, "emptied", worker.torch.emptied + 1)
    return worker


def test_the_poisoning_fills_what_it_is_asked_and_no_more():
    worker = poisoner(room=64 * GIB)
    assert worker.poison(12 * GIB) == 12 * GIB
    assert worker.torch.asked == [12 * GIB] and worker.torch.emptied == 0  # exactly, not an element more


def test_the_poisoning_falls_back_to_one_output_and_then_to_none_never_failing_the_call():
    half = poisoner(room=8 * GIB)
    assert half.poison(12 * GIB) == 6 * GIB
    assert half.torch.asked == [12 * GIB, 12 * GIB, 6 * GIB] and half.torch.emptied == 2  # the cache freed first
    none = poisoner(room=GIB)
    assert none.poison(12 * GIB) == 0


def test_another_error_while_poisoning_is_not_swallowed():
    worker = poisoner(room=64 * GIB)
    worker.torch.full = lambda *args, **kwargs: (_ for _ in ()).throw(RuntimeError("CUDA error: an illegal access"))
    with pytest.raises(RuntimeError, match="illegal"):
        worker.poison(GIB)


@pytest.mark.parametrize(
    "raised",
    [
        JudgeFailed("the reference failed while timed: CUDA out of memory. Tried to allocate 6.00 GiB"),
        TaskUnsupported("the reference does not fit the cuda's free memory (CUDA out of memory. Tried to allocate)"),
    ],
)
def test_the_reference_timing_worker_running_short_where_the_pair_outgrew_the_gpu_leaves_the_timing_unmeasured(
    raised,
):
    result = TimingRun(Timing(measured=True))
    with device_memory.untimed_where_beyond(judgment(ELEMENTWISE_6_GIB, H100), result):
        raise raised
    assert result.timing.measured is False and "timing pair" in result.timing.reason
    with pytest.raises(type(raised)):  # where the timing pair fits, the reference's failure is what it was
        with device_memory.untimed_where_beyond(judgment(SMALL, H100), TimingRun()):
            raise raised


def judged_running_short(monkeypatch, tiny_task, footprint, total):
    """A Judgment whose pipeline runs short of memory at a hidden trial, in the candidate's worker, on a GPU of
    `total` bytes, for a task of `footprint`; the record."""
    from kerneljudge.config import JudgeConfig
    from kerneljudge.judgment.pipeline import Judgment
    from kerneljudge.sources.candidate import load_candidate
    from kerneljudge.tasks.load import load_task

    def pipeline(self):
        self.build.device, self.build.hello, self.admission.footprint = (
            "cuda",
            hello_frame(gpu_memory_bytes=total),
            footprint,
        )
        raise CandidateFailed(short_at("trial 6"))

    monkeypatch.setattr(Judgment, "_pipeline", pipeline)
    config = JudgeConfig(device="cpu", timing=False)
    return Judgment(load_task(tiny_task), load_candidate(CANDIDATES / "honest_torch.py"), config).run()


def test_a_judgment_that_outgrew_the_gpu_and_ran_short_is_an_error_not_the_candidates_fail(monkeypatch, tiny_task):
    record = judged_running_short(monkeypatch, tiny_task, ELEMENTWISE_6_GIB, H100)
    assert record.status == "ERROR" and record.failure.kind == "judge_error", record.failure
    assert record.failure.summary.startswith("the judgment does not fit this GPU")
    assert "about 102 GiB" in record.failure.summary and "79 GiB" in record.failure.summary


def test_a_judgment_that_fits_the_gpu_and_ran_short_is_the_candidates_fail(monkeypatch, tiny_task):
    record = judged_running_short(monkeypatch, tiny_task, ELEMENTWISE_6_GIB, H200)
    assert record.status == "FAIL" and record.failure.kind == "runtime_error" and record.failure.phase == "trial 6"
