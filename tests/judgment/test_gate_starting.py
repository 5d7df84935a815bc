"""Workers starting are stopped, not waited for (judgment/gate.py): a lane that waits for its workers' hello, or
pauses with its timing pair still starting, keeps no other lane from measuring; the measurement stops those
workers' process trees (SIGSTOP) and continues them once no lane measures; a worker asked anything is never
stopped; a real worker stopped while it starts still starts once continued."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from helpers import TASKS, run_all
from kerneljudge.judgment.gate import OPEN_GATE, LaneGate
from kerneljudge.judgment.stages.workers import fresh, let_others_measure
from kerneljudge.sandbox import ending
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerChannels


class Recorded:
    """A stoppable worker that notes when it was stopped and continued."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name, self.asked = log, name, False

    def stop(self) -> None:
        self.log.append(f"{self.name} stopped")

    def go(self) -> None:
        self.log.append(f"{self.name} continued")


def test_a_lane_waiting_for_its_workers_start_lets_another_measure_and_its_workers_stand_stopped_meanwhile():
    gate, log = LaneGate(["0", "0"]), []
    waiting, measured = threading.Event(), threading.Event()
    workers = [Recorded(log, "reference"), Recorded(log, "candidate")]
    paused = []

    def starter():
        with gate.work():
            with gate.starting(workers) as held:
                waiting.set()
                measured.wait(5)  # its workers' hello comes after the other lane's measurement
                log.append("hello")
            paused.append(held.seconds)
            log.append("works again")

    def measurer():
        waiting.wait(5)
        with gate.measure("0"):
            log.append("measures")
            time.sleep(0.2)
        measured.set()

    run_all(starter, measurer)
    assert log[:3] == ["reference stopped", "candidate stopped", "measures"], log
    assert log.index("reference continued") < log.index("hello") < log.index("works again"), log
    assert gate.stops == 2 and 0.15 < paused[0] < 5, paused  # the measurement's time counts as the lane's waiting


def test_a_worker_that_begins_starting_during_a_measurement_is_stopped_at_once_and_a_working_lane_still_holds_it_back():
    gate, log = LaneGate(["0", "0"]), []
    measuring, registered, working = threading.Event(), threading.Event(), threading.Event()

    def measurer():
        with gate.measure("0"):
            measuring.set()
            registered.wait(5)
            log.append("measured")
        log.append("ended")

    def starter():
        measuring.wait(5)
        with gate.starting([Recorded(log, "late")], holding=False):
            registered.set()
            time.sleep(0.1)

    run_all(measurer, starter)
    assert log == ["late stopped", "measured", "late continued", "ended"], log

    log.clear()

    def worker():  # a lane in a step of real work (a trial): a measurement waits for it
        with gate.work():
            working.set()
            time.sleep(0.3)
            log.append("step done")

    def second():
        working.wait(5)
        with gate.measure("0"):
            log.append("measures")

    run_all(worker, second)
    assert log == ["step done", "measures"], log


def test_a_pause_with_the_timing_pair_still_starting_lends_it_to_the_measurement():
    gate, log = LaneGate(["0", "0"]), []
    asked = threading.Event()
    pair = {"reference": Recorded(log, "timing reference"), "candidate": Recorded(log, "timing candidate")}
    lane = type("Lane", (), {})()
    lane.gate, lane.booting, lane.ahead, lane.stages_s = gate, pair, None, {}

    def trials():
        with gate.work():
            asked.wait(5)
            time.sleep(0.1)  # the measurer is waiting by now
            let_others_measure(lane)
            log.append("next trial")

    def measurer():
        asked.set()
        with gate.measure("0"):
            log.append("measures")
            time.sleep(0.05)

    run_all(trials, measurer)
    assert log[:3] == ["timing reference stopped", "timing candidate stopped", "measures"], log
    assert log[-1] == "next trial" and lane.stages_s["waiting"] > 0, log
    assert OPEN_GATE.let_measure(list(pair.values())) == 0.0


def test_only_workers_asked_nothing_are_lent_to_a_measurement():
    log: list[str] = []
    started, used = Recorded(log, "fresh"), Recorded(log, "loaded")
    used.asked = True  # a Load was sent: task or candidate code may run there, and GPU kernels
    assert fresh([started, used]) == [started]
    ahead = type("Lane", (), {})()
    gate = LaneGate(["0", "0"])
    ahead.gate, ahead.booting, ahead.ahead, ahead.stages_s = gate, {"candidate": started}, object(), {}
    let_others_measure(ahead)  # a pair made ready ahead is its thread's to lend, not the pause's
    assert gate.stops == 0 and not gate._starting


def test_a_process_tree_stopped_shows_stopped_and_runs_on_once_continued(tmp_path):
    script = "import os, sys, time\nchild = os.fork()\nwhile True:\n    time.sleep(0.01)\n"
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not ending.descendants(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        tree = [proc.pid, *ending.descendants(proc.pid)]
        assert len(tree) == 2 and sorted(ending.tree(proc.pid)) == sorted(tree)
        stopped = ending.signal_tree(proc.pid, ending.signal.SIGSTOP)
        assert sorted(stopped) == sorted(tree) and ending.wait_stopped(stopped)
        assert {ending.process_state(pid) for pid in tree} <= {"T", "t"}
        ending.signal_tree(proc.pid, ending.signal.SIGCONT)
        time.sleep(0.1)
        assert not {ending.process_state(pid) for pid in tree} & {"T", "t"}
    finally:
        ending.kill_tree(proc.pid)
        proc.wait(timeout=10)
    assert ending.process_state(proc.pid) is None and ending.wait_stopped([proc.pid], 0.1)


def test_a_real_worker_stopped_while_it_starts_says_hello_once_continued():
    text = (TASKS / "tiny_bias_relu.py").read_text()
    worker = WorkerProcess("reference", "cpu", text, WorkerLimits(step_timeout_s=60), peer=WorkerChannels("c", 2**20))
    try:
        worker.stop()
        assert ending.process_state(worker.proc.pid) in ("T", "t")
        time.sleep(0.5)
        assert not worker.has_answered() and not worker.asked
        worker.go()
        assert worker.receive(timeout_s=120)["type"] == "hello"
    finally:
        worker.close()
