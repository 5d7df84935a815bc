"""A working lane lets a waiting measurement go first between two correctness steps (gate.let_measure), but
not while its own timing pair is still starting: the pair's imports would load the CPU under that measurement."""

from __future__ import annotations

import time
from types import SimpleNamespace

from helpers import TASKS
from kerneljudge.judgment.stages.workers import let_others_measure
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerChannels


class CountingGate:
    def __init__(self, pause: float) -> None:
        self.pause, self.asked = pause, 0

    def let_measure(self) -> float:
        self.asked += 1
        return self.pause


class Worker:
    def __init__(self, started: bool) -> None:
        self.started = started

    def has_answered(self) -> bool:
        return self.started


def state(
    booting: dict[str, Worker], pause: float = 0.5, spares: object = None, ahead: object = None
) -> SimpleNamespace:
    return SimpleNamespace(
        gate=CountingGate(pause), booting=booting, spares=spares, ahead=ahead, stages_s={"waiting": 1.0}
    )


def test_a_lane_lets_a_measurement_go_first_and_counts_the_pause_as_waiting():
    lane = state({})
    let_others_measure(lane)
    assert lane.gate.asked == 1 and lane.stages_s["waiting"] == 1.5
    started = state({"reference": Worker(True), "candidate": Worker(True)})
    let_others_measure(started)
    assert started.gate.asked == 1


def test_not_while_its_timing_pair_is_still_starting():
    lane = state({"reference": Worker(True), "candidate": Worker(False)})
    let_others_measure(lane)
    assert lane.gate.asked == 0 and lane.stages_s["waiting"] == 1.0


def test_a_pair_made_ready_ahead_does_not_hold_the_measurement_back():
    """Its thread read the pair's hellos (has_answered is then false) and works under a hold of its own
    (judgment/stages/timing_ahead.py), which a measuring lane waits for anyway: the lane lets it go first as usual."""
    lane = state({"reference": Worker(False), "candidate": Worker(False)}, ahead=object())
    let_others_measure(lane)
    assert lane.gate.asked == 1


def test_not_while_a_spare_pair_is_still_starting():
    lane = state({}, spares=SimpleNamespace(starting=lambda: True))
    let_others_measure(lane)
    assert lane.gate.asked == 0
    lane = state({}, spares=SimpleNamespace(starting=lambda: False))
    let_others_measure(lane)
    assert lane.gate.asked == 1


def test_a_real_worker_has_answered_once_it_said_hello_and_not_after_it_was_read():
    text = (TASKS / "tiny_bias_relu.py").read_text()
    worker = WorkerProcess("reference", "cpu", text, WorkerLimits(step_timeout_s=60), peer=WorkerChannels("c", 2**20))
    try:
        deadline = time.monotonic() + 120
        while not worker.has_answered() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.has_answered()
        assert worker.receive(timeout_s=10)["type"] == "hello"
        assert not worker.has_answered()  # started and idle: nothing more until it is asked
    finally:
        worker.close()
