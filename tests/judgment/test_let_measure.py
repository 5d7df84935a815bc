"""A working lane lets a waiting measurement go first between two correctness steps (gate.let_measure), its own
timing pair, if still starting, lent to the measurement to stop (gate.LaneGate.starting): the pair's imports would
load the CPU under that measurement."""

from __future__ import annotations

import time
from types import SimpleNamespace

from helpers import TASKS
from kerneljudge.judgment.stages.workers import let_others_measure
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerChannels


class CountingGate:
    def __init__(self, pause: float) -> None:
        self.pause, self.lent = pause, []

    def let_measure(self, starting=()) -> float:
        self.lent.append(list(starting))
        return self.pause


class Worker:
    def __init__(self, asked: bool) -> None:
        self.asked = asked


def state(booting: dict[str, Worker], pause: float = 0.5, ahead: object = None) -> SimpleNamespace:
    return SimpleNamespace(gate=CountingGate(pause), booting=booting, ahead=ahead, stages_s={"waiting": 1.0})


def test_a_lane_lets_a_measurement_go_first_and_counts_the_pause_as_waiting():
    lane = state({})
    let_others_measure(lane)
    assert lane.gate.lent == [[]] and lane.stages_s["waiting"] == 1.5


def test_its_timing_pair_still_starting_is_lent_to_the_measurement_to_stop():
    pair = {"reference": Worker(False), "candidate": Worker(False)}
    lane = state(pair)
    let_others_measure(lane)
    assert lane.gate.lent == [list(pair.values())] and lane.stages_s["waiting"] == 1.5


def test_a_pair_made_ready_ahead_is_its_threads_to_lend():
    """Its thread greets and loads it (judgment/stages/timing_ahead.py), under a hold of its own and a `starting`
    block of its own while it waits for the hellos: the pause lends nothing."""
    lane = state({"reference": Worker(False), "candidate": Worker(False)}, ahead=object())
    let_others_measure(lane)
    assert lane.gate.lent == [[]]


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
