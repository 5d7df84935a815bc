"""Batch lanes: one judgment at a time per lane, side by side; no lane measures while another works."""

from __future__ import annotations

import contextlib
import io
import re
import threading
import time

import pytest

from helpers import CANDIDATES, probes, run_judge
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.results.store import Store
from kerneljudge.runs import batch
from kerneljudge.runs.backends import lane, machine
from kerneljudge.runs.backends.machine import lanes_for
from kerneljudge.runs.batch import BatchItem, LaneGate, run_batch


def test_a_lane_that_measures_waits_for_work_in_flight_and_holds_back_new_work():
    gate, log, lock = LaneGate(), [], threading.Lock()
    working, measuring = threading.Event(), threading.Event()

    def note(what):
        with lock:
            log.append(what)

    def first_lane():
        with gate.work():
            note("A works")
            working.set()
            time.sleep(0.3)
            note("A done")

    def second_lane():
        working.wait()
        with gate.measure():
            measuring.set()
            note("B measures")
            time.sleep(0.3)
            note("B done")

    def third_lane():
        measuring.wait()  # B is measuring (or was): C's work must come after B's measurement
        with gate.work():
            note("C works")

    threads = [threading.Thread(target=f) for f in (first_lane, second_lane, third_lane)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert log == ["A works", "A done", "B measures", "B done", "C works"]


def test_lanes_of_different_gpus_measure_at_once_and_lanes_of_one_gpu_take_turns():
    gate, lock = LaneGate(), threading.Lock()
    inside: list[str | None] = []
    most: dict[str, int] = {}  # the most measurements in flight at once, per pairing
    start = threading.Barrier(2)

    def measure(gpu, pairing):
        start.wait()
        with gate.measure(gpu):
            with lock:
                inside.append(gpu)
                most[pairing] = max(most.get(pairing, 0), len(inside))
            time.sleep(0.3)
            with lock:
                inside.remove(gpu)

    for pairing, gpus in (("different", ("0", "1")), ("same", ("1", "1"))):
        threads = [threading.Thread(target=measure, args=(gpu, pairing)) for gpu in gpus]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
        start.reset()
    assert most == {"different": 2, "same": 1}


def test_lanes_are_gpus_or_cpu_jobs_and_a_bad_choice_is_one_line(monkeypatch):
    assert lanes_for("cpu", None, 3) == [None, None, None]
    monkeypatch.setattr(machine, "visible_gpus", lambda: ["0", "1", "2"])
    assert lanes_for("cuda", "all", 1) == ["0", "1", "2"]
    assert lanes_for("auto", "2,0,2", 1) == ["2", "0"]
    assert lanes_for("cuda", "0,2", 3) == ["0", "2"] * 3  # --jobs: lanes per GPU, alternating
    assert lanes_for("cuda", None, 2) == [None, None]  # no --gpus: on the inherited device
    assert lanes_for("cuda", None, 1) == [None]  # no --gpus: one lane with the inherited view
    with pytest.raises(UsageError, match=r"--gpus 0,5: 5 not among the visible GPUs \['0', '1', '2'\]"):
        lanes_for("cuda", "0,5", 1)
    with pytest.raises(UsageError, match="no GPU is visible here \\(--device cpu\\)"):
        lanes_for("cpu", "0", 1)
    with pytest.raises(UsageError, match="--jobs must be at least 1"):
        lanes_for("cpu", None, 0)
    monkeypatch.undo()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5")
    assert machine.visible_gpus() == ["3", "5"]


def test_a_lanes_workers_see_only_its_gpu(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "print_visible_devices.py", device="auto", gpu="7")
    assert record.status == "PASS", record.failure
    assert probes(record, "CUDA_VISIBLE_DEVICES='7'"), record.logs["candidate"].stdout_tail


class RecordingGate(LaneGate):
    """A LaneGate that logs when each lane holds it, to check that no measurement overlapped anything."""

    def __init__(self):
        super().__init__()
        self.spans: list[tuple[str, float, float]] = []
        self.began: dict[tuple[int, str], float] = {}  # (thread, kind): when its current span began

    def _span(self, kind, context):
        outer, key = self, (threading.get_ident(), kind)

        class Span:  # a lane's work may be split by `let_measure`; work beside may overlap more of its own
            def __enter__(self):
                context.__enter__()
                self.began = time.monotonic()
                if kind == "work":
                    outer.began[key] = self.began

            def __exit__(self, *exc):
                began = outer.began.pop(key) if kind == "work" else self.began
                outer.spans.append((kind, began, time.monotonic()))
                return context.__exit__(*exc)

        return Span()

    def let_measure(self, starting=()):  # a pause inside work ends its span; the work after it is a span of its own
        key, paused_at = (threading.get_ident(), "work"), time.monotonic()
        paused = super().let_measure(starting)
        if paused:
            self.spans.append(("work", self.began[key], paused_at))
            self.began[key] = time.monotonic()
        return paused

    @contextlib.contextmanager
    def starting(self, workers, holding=True):  # a wait for workers' start lends the hold: its own span ends there
        key = (threading.get_ident(), "work")
        if holding and key in self.began:
            self.spans.append(("work", self.began[key], time.monotonic()))
        with super().starting(workers, holding) as paused:
            yield paused
        if holding and key in self.began:
            self.began[key] = time.monotonic()

    def work(self):
        return self._span("work", super().work())

    def work_beside(self):  # a pair closing in a thread while its lane goes on (judgment/stages/workers.close_beside)
        return self._span("work beside", super().work_beside())

    def measure(self, gpu=None):
        return self._span("measure", super().measure(gpu))


def test_two_cpu_lanes_judge_every_item_once_and_never_measure_while_the_other_works(tmp_path, tiny_task, monkeypatch):
    gates: list[RecordingGate] = []
    monkeypatch.setattr(batch, "LaneGate", lambda *args, **kw: gates.append(RecordingGate()) or gates[-1])
    names = ["honest_torch.py", "import_marker.py", "print_visible_devices.py"]
    items = [BatchItem(tiny_task, CANDIDATES / name) for name in names]
    config = JudgeConfig(device="cpu", policy="practical", timeout_s=60.0, timing_blocks=2, timing_samples=5)
    store = tmp_path / "results.db"
    log = io.StringIO()
    counts = run_batch(items, config, store, progress=False, lanes=[None, None], log=log)
    assert counts.judged == 3 and counts.passed + counts.suspicious == 3, counts  # import_marker writes a file
    lines = log.getvalue().splitlines()  # each judgment's stages, timed, as they started: where the time went
    assert sum(line.split(" ", 1)[1].startswith("done: ") for line in lines) == 3
    for name in names:
        stages = [line for line in lines if f"/{name.removesuffix('.py')}: " in line]
        assert any("correctness trial 10/10" in line for line in stages), stages
        assert all(re.fullmatch(r"\d\d:\d\d:\d\d lane \d: .+", line) for line in stages), stages
    with Store(store) as s:
        assert sorted(r.candidate.name for r in s) == sorted(n.removesuffix(".py") for n in names)
    [gate] = gates
    measures = [span for span in gate.spans if span[0] == "measure"]
    # Each judgment works (build, correctness, the timing pair's start), works again to stage the timing pool,
    # measures (calibration and samples only), then works to check the kept outputs: the gate is held to
    # measure only while samples are taken (judgment/stages/timing.py).
    # (more work spans where a lane let the other measure between two of its trials: gate.let_measure)
    assert len(measures) == 3 and len(gate.spans) >= 12
    assert sum(span[0] == "work beside" for span in gate.spans) == 3  # each checked pair closed beside
    for kind, began, ended in measures:
        overlapping = [s for s in gate.spans if s[1:] != (began, ended) and s[1] < ended and began < s[2]]
        assert not overlapping, (kind, began, ended, overlapping)
    again = run_batch(items, config, store, progress=False, lanes=[None, None])
    assert again.skipped == 3 and again.judged == 0


def test_cached_baselines_time_each_tasks_reference_once_and_share_it(tmp_path, tiny_task, monkeypatch):
    caches: list[batch.BaselineCache] = []
    real = batch.BaselineCache
    monkeypatch.setattr(batch, "BaselineCache", lambda config: caches.append(real(config)) or caches[-1])
    names = ["honest_torch.py", "print_visible_devices.py"]
    items = [BatchItem(tiny_task, CANDIDATES / name) for name in names]
    config = JudgeConfig(
        device="cpu", policy="practical", timeout_s=60.0, timing_blocks=2, timing_samples=5, timing_baseline="cached"
    )
    store = tmp_path / "results.db"
    counts = run_batch(items, config, store, progress=False, lanes=[None, None])
    if counts.passed != 2:  # say which record failed and why (a timed judgment on a loaded machine)
        with Store(store) as s:
            failed = [(r.candidate.name, r.status, r.failure, [f.code for f in r.findings]) for r in s]
        raise AssertionError(f"{counts}: {failed}")
    assert counts.judged == 2
    [cache] = caches
    [reference] = cache.measured  # one A/A judgment for the one task and device, though both lanes needed it
    assert reference.correctness.passed and reference.timing.reference_source == "paired"
    with Store(store) as s:
        records = list(s)
    assert sorted(r.candidate.name for r in records) == ["honest_torch", "print_visible_devices"]  # not the A/A
    for record in records:
        assert record.config["timing_baseline"] == "cached" and record.timing.speedup > 0
        assert record.timing.reference_source.startswith("cached: the reference timed once on this device")
        assert record.timing.reference.samples_ms == reference.timing.reference.samples_ms
        assert "reference" not in record.timing.parent_observed_ms or not record.timing.parent_observed_ms["reference"]


def test_cached_baselines_need_the_interleaved_timer(capsys, tmp_path):
    from kerneljudge.cli import main
    from kerneljudge.config import ConfigError

    with pytest.raises(ConfigError, match="cached baselines need the interleaved timer; .* kernelbench \\(mode off\\)"):
        JudgeConfig(mode="off", timing_baseline="cached")
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("")
    store = tmp_path / "results.db"
    assert main(["batch", str(manifest), "--store", str(store), "--mode", "off", "--cached-baselines"]) == 1
    err = capsys.readouterr().err.strip()
    assert "cached baselines need the interleaved timer" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("others_need", [2**30, 0], ids=["reserving", "reserving-nothing"])
def test_a_judgment_run_alone_waits_for_the_gpu_to_empty_and_keeps_others_out(others_need):
    # Judgments that reserve nothing (GPU MODE's, whose inputs the task makes on the device) hold the GPU too:
    # a retry that waited only for reservations ran short of memory again beside them on an H200.
    gate, total, events = LaneGate(["0", "0", "0"]), 100 * 2**30, []
    first_in, alone_in = threading.Event(), threading.Event()

    def small(name, entered=None, hold=0.3):
        with gate.work(), gate.admit("0", others_need, total):
            events.append(f"{name} in")
            if entered is not None:
                entered.set()
            time.sleep(hold)
            events.append(f"{name} out")

    def alone():
        first_in.wait()
        with gate.work(), lane.Alone(gate).admit("0", 0, total):  # even a judgment of no known need
            events.append("alone in")
            alone_in.set()
            time.sleep(0.3)
            events.append("alone out")

    threads = [threading.Thread(target=small, args=("first", first_in)), threading.Thread(target=alone)]
    for thread in threads:
        thread.start()
    alone_in.wait(timeout=10)
    late = threading.Thread(target=small, args=("late",))
    late.start()
    for thread in [*threads, late]:
        thread.join(timeout=10)
    assert events == ["first in", "first out", "alone in", "alone out", "late in", "late out"]


def test_two_judgments_run_alone_one_after_the_other():
    gate, total, events = LaneGate(["0", "0"]), 100 * 2**30, []

    def alone(name):
        with gate.work(), lane.Alone(gate).admit("0", 0, total):
            events.append(f"{name} in")
            time.sleep(0.2)
            events.append(f"{name} out")

    threads = [threading.Thread(target=alone, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(events) == 4 and events[0][0] == events[1][0] and events[2][0] == events[3][0]


def test_a_judgment_short_of_memory_is_judged_again_at_once_alone(tmp_path, tiny_task, monkeypatch):
    from helpers import make_record
    from kerneljudge.judgment import pipeline
    from kerneljudge.results.verdict import Failure

    calls, big = [], "print_visible_devices"

    def judge(task, candidate, config, progress, gpu, gate, baselines=None, spares=None):
        calls.append((candidate.name, type(gate).__name__))
        if candidate.name == big and not isinstance(gate, lane.Alone):
            oom = Failure(kind="runtime_error", phase="call", summary="OutOfMemoryError: CUDA out of memory.")
            return make_record(candidate.name, status="FAIL", failure=oom)
        return make_record(candidate.name)

    monkeypatch.setattr(pipeline, "judge", judge)
    items = [BatchItem(tiny_task, CANDIDATES / f"{name}.py") for name in ("honest_torch", big)]
    log = io.StringIO()
    counts = run_batch(items, JudgeConfig(device="cpu"), tmp_path / "s.db", progress=False, lanes=[None, None], log=log)
    assert counts.judged == 2 and counts.passed == 2
    assert sorted(calls) == [("honest_torch", "LaneGate"), (big, "Alone"), (big, "LaneGate")]
    assert f"{big}: short of memory (OutOfMemoryError: CUDA out of memory.); judged again, alone" in log.getvalue()


def test_the_gate_is_held_to_measure_only_while_samples_are_taken(tiny_task, monkeypatch):
    """Staging the timing pool, each side's first calibration request and checking the kept outputs run beside
    the other lanes; only the rest of the calibration and the interleaved samples hold every other lane back
    (the gate held for the samples alone)."""
    from kerneljudge.judgment.pipeline import judge
    from kerneljudge.judgment.stages import timed_calls
    from kerneljudge.judgment.stages import timing as timing_stage
    from kerneljudge.judgment.stages.timed_calls import time_op

    class FlagGate(LaneGate):
        measuring = False

        def measure(self, gpu=None):
            context = super().measure(gpu)
            gate = self

            class Held:
                def __enter__(self):
                    context.__enter__()
                    gate.measuring = True

                def __exit__(self, *exc):
                    gate.measuring = False
                    return context.__exit__(*exc)

            return Held()

    gate, seen, requests = FlagGate(), [], []
    for name in ("make_ready", "run_interleaved", "recheck_last", "recheck_graph"):
        real = getattr(timing_stage, name)

        def noted(*args, _name=name, _real=real, **kwargs):
            seen.append((_name, gate.measuring))
            return _real(*args, **kwargs)

        monkeypatch.setattr(timing_stage, name, noted)
    real_side = timing_stage.time_side

    def side_noted(*args, **kwargs):  # each timing request: its kind, and whether the others were paused
        side = real_side(*args, **kwargs)

        def timed(request):
            requests.append((time_op(request), gate.measuring))
            return side(request)

        return timed

    monkeypatch.setattr(timing_stage, "time_side", side_noted)
    monkeypatch.setattr(timed_calls, "time_side", side_noted)  # the first calls' (make_ready)
    config = JudgeConfig(device="cpu", policy="practical", timeout_s=60.0, timing_blocks=2, timing_samples=5)
    record = judge(tiny_task, CANDIDATES / "honest_torch.py", config, gate=gate)
    assert record.status == "PASS" and record.timing.measured, record.failure
    # run_interleaved starts beside the other lanes (its first calibration requests) and pauses them itself
    assert seen == [("make_ready", False), ("run_interleaved", False), ("recheck_last", False)], seen
    assert {op for op, _ in requests} == {"calibrate", "time"}, requests
    # Each side's first calibration request (a fresh worker's first call: a JIT's compile) beside the other
    # lanes; every request after them with the others paused.
    assert requests[:2] == [("calibrate", False), ("calibrate", False)], requests
    assert all(held for _, held in requests[2:]) and len(requests) > 2, requests
    assert record.stages_s["timing.held"] > 0

    # With timing_warm each side's first call comes before the hold, beside the other lanes; the rest as before.
    requests.clear()
    record = judge(tiny_task, CANDIDATES / "honest_torch.py", config.with_(timing_warm=True), gate=gate)
    assert record.status == "PASS" and record.timing.measured, record.failure
    assert requests[:4] == [("warm", False), ("warm", False), ("calibrate", False), ("calibrate", False)], requests
    assert all(held for _, held in requests[4:]) and len(requests) > 4, requests
    assert {"timing.candidate.warm", "timing.reference.warm"} <= set(record.stages_s), record.stages_s

    # With timing_ahead the pool is staged and the first calls made in a thread while correctness still runs
    # (judgment/stages/timing_ahead.py), beside the other lanes; the timing stage starts at the calibration.
    requests.clear()
    seen.clear()
    record = judge(tiny_task, CANDIDATES / "honest_torch.py", config.with_(timing_ahead=True), gate=gate)
    assert record.status == "PASS" and record.timing.measured, record.failure
    assert seen == [("run_interleaved", False), ("recheck_last", False)], seen  # nothing staged in the stage
    assert requests[:4] == [("warm", False), ("warm", False), ("calibrate", False), ("calibrate", False)], requests
    assert all(held for _, held in requests[4:]) and len(requests) > 4, requests
    assert {"ahead.candidate.warm", "ahead.reference.warm", "ahead.reference.stage"} <= set(record.stages_s)
    assert not {"timing.candidate.warm", "timing.reference.stage", "timing.candidate.load"} & set(record.stages_s)
