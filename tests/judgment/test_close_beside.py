"""The checked pair closed beside the fresh timing pair's start (judgment/stages/workers.close_beside): it
ends while the fresh pair is greeted, loaded and staged, is gone before the measuring hold, and its logs
still reach the record; where it may hold much device memory, or the carry needs its workspace, it is
closed first, as before."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from helpers import CANDIDATES, hello_frame
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.gate import LaneGate
from kerneljudge.judgment.pipeline import judge
from kerneljudge.judgment.stages import timing_pair, workers
from kerneljudge.judgment.stages.state import Admission, BuildFacts
from kerneljudge.sandbox.workspace import Workspace

GIB = 2**30


def test_the_checked_pair_ends_beside_the_fresh_pairs_start_and_is_gone_before_the_hold(tiny_task, monkeypatch):
    closing, at_hold = [], []

    def beside(state):
        closing.append(dict(state.workers))  # the checked pair, as it is handed to the thread
        real_beside(state)

    real_beside = workers.close_beside
    monkeypatch.setattr(timing_pair, "close_beside", beside)

    class NotingGate(LaneGate):
        def measure(self, gpu=None):  # as the hold begins: is any process of the checked pair left?
            at_hold.append([worker.proc.poll() is None for pair in closing for worker in pair.values()])
            return super().measure(gpu)

    config = JudgeConfig(device="cpu", policy="practical", timeout_s=60.0, timing_blocks=2, timing_samples=5)
    record = judge(tiny_task, CANDIDATES / "honest_torch.py", config, gate=NotingGate())
    assert record.status == "PASS" and record.timing.measured, record.failure
    assert len(closing) == 1 and sorted(closing[0]) == ["candidate", "reference"]
    assert at_hold and at_hold[0] == [False, False]  # both had ended before the first sample
    assert {"reference", "candidate", "reference_timing", "candidate_timing"} <= set(record.logs)
    assert record.stages_s["timing.checked_pair.close:beside"] > 0  # the close's own time, in its thread
    assert record.stages_s["timing.checked_pair.close"] < record.stages_s["timing"]  # the wait for it


def test_the_hold_waits_for_the_pairs_processes_not_for_the_removal_of_their_workspaces(tiny_task, monkeypatch):
    removed, held = [], []
    hold_began = threading.Event()
    real_remove = Workspace.remove

    def slow_remove(self):  # the checked pair's workspaces, removed in the closing thread, take a while
        if threading.current_thread().name == "kj-close-pair":
            # Until the hold has begun (a hold that waited for the removal would begin 30 s late, after it), and a
            # second more: on a loaded machine the fresh pair's start can outlast any fixed sleep.
            hold_began.wait(30.0)
            time.sleep(1.0)
            removed.append(time.monotonic())
        real_remove(self)

    monkeypatch.setattr(Workspace, "remove", slow_remove)

    class NotingGate(LaneGate):
        def measure(self, gpu=None):
            held.append(time.monotonic())
            hold_began.set()
            return super().measure(gpu)

    config = JudgeConfig(device="cpu", policy="practical", timeout_s=60.0, timing_blocks=2, timing_samples=5)
    record = judge(tiny_task, CANDIDATES / "honest_torch.py", config, gate=NotingGate())
    assert record.status == "PASS" and record.timing.measured, record.failure
    assert len(removed) == 2 and held and held[0] < removed[-1]  # measured while the removal went on
    assert {"reference", "candidate"} <= set(record.logs)  # its logs still filed
    stages = record.stages_s
    assert stages["timing.checked_pair.close:ended"] + 1.5 < stages["timing.checked_pair.close:beside"]


def test_with_the_carry_the_checked_pair_is_closed_first(tiny_task, monkeypatch):
    monkeypatch.setattr(timing_pair, "close_beside", lambda state: (_ for _ in ()).throw(AssertionError("beside")))
    config = JudgeConfig(
        device="cpu", policy="practical", timeout_s=60.0, timing_blocks=2, timing_samples=5, timing_carry=True
    )
    record = judge(tiny_task, CANDIDATES / "honest_torch.py", config)
    assert record.status == "PASS" and record.timing.measured, record.failure
    assert "timing.checked_pair.close:beside" not in record.stages_s
    assert record.stages_s["timing.checked_pair.close"] > 0 and "candidate" in record.logs


def state_on_gpu(peaks, reserved=0, total=144 * GIB):
    """A judgment's state as `closes_beside` reads it: a CUDA device, its size, the pair's NVML peaks."""
    pair = {
        role: SimpleNamespace(gpu_watch=None if peak is None else SimpleNamespace(peak_bytes=peak))
        for role, peak in zip(("reference", "candidate"), peaks, strict=True)
    }
    build = BuildFacts(device="cuda", hello=hello_frame(gpu_memory_bytes=total))
    return SimpleNamespace(build=build, workers=pair, admission=Admission(reserved_bytes=reserved))


def test_only_a_pair_that_held_little_device_memory_is_closed_beside():
    assert timing_pair.closes_beside(state_on_gpu([2 * GIB, 3 * GIB]))  # the built-in suite's sizes
    assert not timing_pair.closes_beside(state_on_gpu([6 * GIB, 4 * GIB]))  # over a sixteenth of 144 GiB
    assert not timing_pair.closes_beside(state_on_gpu([2 * GIB, 0]))  # NVML did not see one: unknown
    assert not timing_pair.closes_beside(state_on_gpu([2 * GIB, None]))  # no watch at all
    assert not timing_pair.closes_beside(state_on_gpu([GIB, GIB], reserved=40 * GIB))  # the gate knew better
    assert not timing_pair.closes_beside(state_on_gpu([GIB, GIB], total=0))
    assert timing_pair.closes_beside(SimpleNamespace(build=BuildFacts(device="cpu")))


def test_a_close_that_fails_is_raised_before_any_sample(tiny_task, monkeypatch):
    from kerneljudge.sandbox.process import WorkerProcess

    measured = []
    real_end = WorkerProcess.end

    def failing_end(self):  # the checked pair's end fails in its closing thread
        real_end(self)
        if threading.current_thread().name == "kj-close-pair":
            raise RuntimeError("the pair's end failed")

    monkeypatch.setattr(WorkerProcess, "end", failing_end)

    class NotingGate(LaneGate):
        def measure(self, gpu=None):
            measured.append(True)
            return super().measure(gpu)

    config = JudgeConfig(device="cpu", policy="practical", timeout_s=60.0, timing_blocks=2, timing_samples=5)
    record = judge(tiny_task, CANDIDATES / "honest_torch.py", config, gate=NotingGate())
    assert record.status == "ERROR" and "the pair's end failed" in record.failure.summary
    assert not measured  # no sample was taken
