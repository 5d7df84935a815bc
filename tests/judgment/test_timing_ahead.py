"""The timing pair made ready ahead (`timing_ahead`, judgment/stages/timing_ahead.py): greeted, loaded, its
pool staged on fresh hidden draws and each side's first call made in a thread while correctness still runs; the
timing stage then starts at the calibration. A judgment that ends before timing stops the thread and keeps the
pair's logs; what the thread raised is raised where timing takes the pair; in a batch no lane measures while it
works; on the GPU it runs only where both pairs fit side by side."""

from __future__ import annotations

import io
import os
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_lanes import RecordingGate

from helpers import CANDIDATES, TASKS
from kerneljudge.config import ConfigError, JudgeConfig
from kerneljudge.judgment.gate import ahead_fits, memory_need, timing_need
from kerneljudge.judgment.pipeline import judge
from kerneljudge.judgment.stages import correctness, hidden_shapes, timing_ahead, timing_pair
from kerneljudge.judgment.stages.failures import CandidateFailed
from kerneljudge.judgment.stages.state import Admission, BuildFacts
from kerneljudge.judgment.stages.timing import pool_sets
from kerneljudge.results.store import Store
from kerneljudge.results.verdict import Failure
from kerneljudge.runs import batch
from kerneljudge.runs.batch import BatchItem, run_batch
from kerneljudge.timing.plan import INTERLEAVED, KERNELBENCH

GIB = 2**30
CONFIG = JudgeConfig(
    device="cpu", policy="practical", timeout_s=60.0, timing_blocks=2, timing_samples=5, timing_ahead=True
)


def test_an_honest_candidate_is_timed_on_a_pair_made_ready_while_correctness_ran(monkeypatch):
    during: list[tuple[str | None, bool, bool]] = []
    real_shapes, real_begin, real_start = hidden_shapes.run, timing_ahead.begin, timing_ahead.start
    began_after, started_after = [], []

    def begin_noting_the_trials(state):  # called as the trials begin: the pair greeted and loaded
        was = state.ahead
        real_begin(state)
        if was is None and state.ahead is not None:
            began_after.append(len(state.checked.trials))

    def start_noting_the_trials(state, trial_sets):  # after each trial of the task's own distribution: the pool staged
        was = state.ahead is not None and state.ahead.going.is_set()
        real_start(state, trial_sets)
        if not was and state.ahead is not None and state.ahead.going.is_set():
            started_after.append(len(state.checked.trials))

    monkeypatch.setattr(timing_ahead, "begin", begin_noting_the_trials)
    monkeypatch.setattr(timing_ahead, "start", start_noting_the_trials)

    def shapes_after_the_pair_is_ready(state):  # the hidden shapes wait for the thread: it ran beside correctness
        state.ahead.thread.join()
        during.append((state.stage, state.ahead.ready is not None, state.ahead.thread.is_alive()))
        real_shapes(state)

    monkeypatch.setattr(hidden_shapes, "run", shapes_after_the_pair_is_ready)
    record = judge(TASKS / "family_bias_relu.py", CANDIDATES / "honest_torch.py", CONFIG)
    assert record.status == "PASS" and record.verified and record.timing.measured, record.failure
    assert during == [("correctness", True, False)]  # staged and warmed before correctness ended
    assert began_after == [0]  # greeted and loaded from the first trial on
    assert started_after == [1] and len(record.correctness.trials) >= 10  # staged beside the trials after the first
    assert record.timing.ahead == {
        "made": True,
        "staged": True,
        "warmed": ["candidate", "reference"],
        "seconds": record.stages_s["ahead"],
    }
    stages = record.stages_s
    assert {"ahead.reference.hello", "ahead.candidate.load", "ahead.reference.stage", "ahead.candidate.warm"} <= set(
        stages
    )
    assert not [key for key in stages if key.startswith("timing.") and key.split(".")[-1] in ("load", "stage", "hello")]
    assert stages["timing.ahead"] <= stages["timing"]  # the stage's wait for the thread, here none left
    assert len(record.correctness.plan["timing_seeds"]) == 3  # the pool: fresh draws no checked worker saw
    assert {"reference", "candidate", "reference_timing", "candidate_timing"} <= set(record.logs)


def test_staging_beside_a_hidden_shape_leaves_that_shapes_signature_alone(monkeypatch):
    """A hidden-shape trial sets the outputs' signature to its shape's, then checks the candidate's output against
    it; the thread stages the pool at the public shape in between (made to, here). Its staging's signature stays
    its own (timing_ahead.pair_view), so the hidden shape is checked against its shape, the pool against the public
    shape."""
    shape_set, staged, seen = threading.Event(), threading.Event(), []
    real_trial, real_ready = hidden_shapes.reference_trial, timing_ahead.make_ready

    def trial_then_wait_for_the_staging(state, *args, **kwargs):
        answer = real_trial(state, *args, **kwargs)
        if not shape_set.is_set():  # the first hidden shape: its signature is set, its output not yet checked
            seen.append(dict(state.calls.signature))
            shape_set.set()
            assert staged.wait(60)
            seen.append(dict(state.calls.signature))
        return answer

    def ready_inside_the_first_shape(view, *args, **kwargs):
        assert shape_set.wait(60)
        try:
            return real_ready(view, *args, **kwargs)
        finally:
            staged.set()

    monkeypatch.setattr(hidden_shapes, "reference_trial", trial_then_wait_for_the_staging)
    monkeypatch.setattr(timing_ahead, "make_ready", ready_inside_the_first_shape)
    record = judge(TASKS / "family_bias_relu.py", CANDIDATES / "honest_torch.py", CONFIG)
    assert record.status == "PASS" and record.verified and record.timing.measured, record.failure
    assert record.timing.ahead["staged"] and record.timing.timed_outputs_checked > 0
    assert len(seen) == 2 and seen[0] == seen[1]  # the shape's signature, untouched by the staging beside it


def test_a_candidate_failing_after_the_trials_stops_the_thread_and_the_pairs_logs_are_kept(monkeypatch):
    pairs, waiting = [], threading.Event()

    def waits_for_ever(view, *args, **kwargs):  # the thread waits on its worker for an answer that never comes
        pairs.append(dict(view.workers))
        waiting.set()
        view.workers["candidate"].receive(timeout_s=600)

    real_shapes = hidden_shapes.run

    def shapes_once_it_waits(state):
        assert waiting.wait(60)
        real_shapes(state)

    monkeypatch.setattr(timing_ahead, "make_ready", waits_for_ever)
    monkeypatch.setattr(hidden_shapes, "run", shapes_once_it_waits)
    record = judge(TASKS / "family_listed.py", CANDIDATES / "public_shape_only.py", CONFIG)
    assert record.status == "FAIL" and "at SHAPE=(" in record.failure.summary, record.failure
    assert not record.timing.measured and record.duration_s < 120  # the thread's wait was cut, not waited out
    [pair] = pairs
    assert all(worker.proc.poll() is not None for worker in pair.values())  # none left running
    assert {"reference_timing", "candidate_timing"} <= set(record.logs)  # candidate code ran there
    assert record.timing.ahead == {"made": True, "staged": False, "warmed": [], "seconds": record.stages_s["ahead"]}


FAILS_LATER = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(width))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.clamp_min(x + self.bias, 0.0) * (1.0 if self.calls <= 6 else 0.5)
"""


def test_a_candidate_failing_a_later_trial_stops_the_thread_started_at_the_first(monkeypatch, tmp_path):
    """The thread stages once the first trial passed: a trial that fails after it ends the judgment at once,
    the thread's wait on its worker cut, and the pair's logs kept."""
    pairs, waiting = [], threading.Event()

    def waits_for_ever(view, *args, **kwargs):
        pairs.append(dict(view.workers))
        waiting.set()
        view.workers["candidate"].receive(timeout_s=600)

    real_trial = correctness.run_trial

    def trial_once_the_thread_waits(state, index, *args):  # the trials after the first run beside the thread
        assert index == 0 or waiting.wait(60)
        return real_trial(state, index, *args)

    monkeypatch.setattr(timing_ahead, "make_ready", waits_for_ever)
    monkeypatch.setattr(correctness, "run_trial", trial_once_the_thread_waits)
    candidate = tmp_path / "fails_later.py"
    candidate.write_text(FAILS_LATER)
    record = judge(TASKS / "tiny_bias_relu.py", candidate, CONFIG)
    assert waiting.is_set() and record.status == "FAIL" and record.failure.kind == "tolerance", record.failure
    assert 2 <= len(record.correctness.trials) < 10 and record.duration_s < 120  # failed in the trials, not waited
    [pair] = pairs
    assert all(worker.proc.poll() is not None for worker in pair.values())
    assert {"reference_timing", "candidate_timing"} <= set(record.logs)
    assert record.timing.ahead == {"made": True, "staged": False, "warmed": [], "seconds": record.stages_s["ahead"]}


def test_a_candidate_failing_its_first_trial_ends_the_thread_waiting_loaded_for_a_trial_that_never_passed():
    """The pair is greeted and loaded as the trials begin; a candidate whose first trial fails never says go: the
    thread, loaded and waiting, is stopped with the judgment (no wait left to a timeout), its pair closed."""
    record = judge(TASKS / "tiny_bias_relu.py", CANDIDATES / "wrong_values.py", CONFIG)
    assert record.status == "FAIL" and record.failure.phase == "correctness (public trial 0)", record.failure
    assert record.duration_s < 60 and not record.timing.measured
    assert {"reference_timing", "candidate_timing"} <= set(record.logs)  # its timing pair started, and was closed
    ahead = record.timing.ahead  # loaded or still loading when the trial failed (stopped by killing its workers)
    assert ahead["staged"] is False and ahead["warmed"] == [] and ahead["seconds"] == record.stages_s["ahead"]


def test_a_memo_the_checked_worker_writes_beside_the_timing_worker_answers_no_timed_call():
    """Without the sandbox both candidate workers reach the host's /tmp, and ahead they run at once: the checked
    worker's memo of the trials is there while the timing worker is timed. The pool is made of fresh draws
    (recorded in the plan), so no timed call finds its answer there. The next judgment's checked worker, called
    on the same public inputs, finds the first one's answers: the memo works across workers. A judgment without
    ahead, whose timing worker starts after the checked one ended, finds none either."""
    memo = Path(f"/tmp/kj-shared-memo-{os.getuid()}")
    shutil.rmtree(memo, ignore_errors=True)
    try:
        record = judge(TASKS / "tiny_bias_relu.py", CANDIDATES / "memo_shared_tmp.py", CONFIG.with_(sandbox="off"))
        assert record.timing.measured and record.timing.ahead["staged"], record.failure
        assert any(memo.iterdir())  # the memo was kept where both workers reach it
        assert "memo hit from another worker" not in record.logs["candidate_timing"].stderr_tail
        fresh = record.correctness.plan["timing_seeds"]
        assert len(fresh) == 3 and not set(fresh) & {trial.seed for trial in record.correctness.trials}
        # Without ahead, the timing worker starts once the checked one is gone; the memo stays in /tmp and the
        # pool is made of fresh draws all the same (since 0.3.4: before, of the trials' inputs, and this fixture
        # served the timing worker 2,143 answers in one CPU judgment).
        again = judge(TASKS / "tiny_bias_relu.py", CANDIDATES / "memo_shared_tmp.py", CONFIG.with_(sandbox="off"))
        assert "memo hit from another worker" in again.logs["candidate"].stderr_tail
        plain = judge(
            TASKS / "tiny_bias_relu.py",
            CANDIDATES / "memo_shared_tmp.py",
            CONFIG.with_(sandbox="off", timing_ahead=False),
        )
        assert plain.timing.measured and plain.timing.ahead is None
        assert "memo hit from another worker" not in plain.logs["candidate_timing"].stderr_tail
    finally:
        shutil.rmtree(memo, ignore_errors=True)


def test_what_the_thread_raised_is_the_verdict_once_timing_takes_the_pair(monkeypatch):
    def broken(view, *args, **kwargs):
        assert view.stage == "ahead"  # its round trips count under `ahead`, not under correctness
        raise CandidateFailed(Failure(kind="crash", phase="timing", summary="the timing worker broke"))

    monkeypatch.setattr(timing_ahead, "make_ready", broken)
    record = judge(TASKS / "tiny_bias_relu.py", CANDIDATES / "honest_torch.py", CONFIG)
    assert record.correctness.passed  # the failure is raised where timing joins the thread, not before
    assert record.status == "FAIL" and record.failure.summary == "the timing worker broke"
    assert "timing.ahead" in record.stages_s


def test_two_lanes_never_measure_while_a_pair_is_made_ready_beside(tmp_path, tiny_task, monkeypatch):
    gates: list[RecordingGate] = []
    monkeypatch.setattr(batch, "LaneGate", lambda *args, **kw: gates.append(RecordingGate()) or gates[-1])
    names = ["honest_torch.py", "import_marker.py", "print_visible_devices.py"]
    items = [BatchItem(tiny_task, CANDIDATES / name) for name in names]
    counts = run_batch(items, CONFIG, tmp_path / "results.db", progress=False, lanes=[None, None], log=io.StringIO())
    assert counts.judged == 3 and counts.passed + counts.suspicious == 3, counts  # import_marker writes a file
    [gate] = gates
    measures = [span for span in gate.spans if span[0] == "measure"]
    assert len(measures) == 3
    # Each judgment: its pair loaded, its pool staged (a hold again, after waiting for a trial holding none), closed
    assert sum(span[0] == "work beside" for span in gate.spans) == 9
    for _, began, ended in measures:
        overlapping = [s for s in gate.spans if s[1:] != (began, ended) and s[1] < ended and began < s[2]]
        assert not overlapping, (began, ended, overlapping)


def test_both_pairs_side_by_side_must_fit_a_quarter_of_the_gpu():
    mib = 2**20
    suite = {"input_bytes": 256 * mib, "output_bytes": 128 * mib, "activation_bytes": 128 * mib, "parameter_bytes": 0}
    sizes = (0, suite["input_bytes"], suite["output_bytes"], suite["output_bytes"])
    beside = memory_need(suite, True, beside=True)
    assert beside == memory_need(suite, False) + timing_need(sizes) > memory_need(suite, True)
    assert ahead_fits(suite, 144 * GIB)  # the built-in suite's sizes on an H200
    large = {"input_bytes": 16 * GIB, "output_bytes": 16 * GIB}  # KernelBench level 1's largest
    assert not ahead_fits(large, 144 * GIB)
    assert not ahead_fits(None, 144 * GIB) and not ahead_fits(suite, 0)  # unknown: loaded after, as before
    state = SimpleNamespace(
        readies_ahead=True,
        findings=[],
        config=JudgeConfig(),
        booting={"reference": None},
        ahead=None,
        build=BuildFacts(device="cuda"),
        admission=Admission(ahead_fits=False),
    )
    timing_ahead.start(state, [])
    assert state.ahead is None
    assert timing_ahead.described(state) == {
        "made": False,
        "why_not": "the task's footprint does not show both pairs fitting a quarter of the GPU side by side",
    }


def test_ahead_and_the_carry_are_refused_together():
    with pytest.raises(ConfigError, match="timing_ahead and timing_carry"):
        JudgeConfig(timing_ahead=True, timing_carry=True)


def test_with_cached_baselines_only_the_candidates_side_is_made_ready(tmp_path, tiny_task):
    """A batch's cached baselines stand for the reference's side (docs/batch.md): the pair made ready ahead
    stages its pool and makes the candidate's first call only, and the reference's figures are the cache's."""
    config = CONFIG.with_(timing_baseline="cached")
    items = [BatchItem(tiny_task, CANDIDATES / name) for name in ("honest_torch.py", "print_visible_devices.py")]
    counts = run_batch(items, config, tmp_path / "results.db", progress=False, lanes=[None], log=io.StringIO())
    assert counts.judged == 2 and counts.passed == 2, counts
    with Store(tmp_path / "results.db") as store:
        records = list(store)
    for record in records:
        assert record.verified and record.timing.reference_source.startswith("cached"), record.timing
        assert record.timing.ahead["staged"] and record.timing.ahead["warmed"] == ["candidate"]


def test_the_pool_is_known_from_the_plan_before_the_trials_end():
    """The pool's sets are fresh draws (the plan's timing seeds) of the task's own distribution, as many as the
    memory allows, whatever trials were kept so far: a hidden distribution the task rejected fell back to its own
    (worker/correctness/trials.py), so the pool the thread stages after the first trial is the one it would stage
    after all."""
    plan = SimpleNamespace(timing_seeds=[11, 12, 13])
    one = [{"seed": 1, "variant": {"kind": "standard"}}]
    rejected = {"kind": "heavy_tail", "rejected": "the reference's output is not finite on these inputs"}
    every = [{"seed": 4, "variant": {"kind": "standard"}}, {"seed": 7, "variant": rejected}]
    three = SimpleNamespace(admission=Admission(pool_sets=3), plan=plan)
    two = SimpleNamespace(admission=Admission(pool_sets=2), plan=plan)
    standard = {"kind": "standard"}
    assert pool_sets(three, INTERLEAVED, None, one) == [{"seed": s, "variant": standard} for s in (11, 12, 13)]
    assert pool_sets(two, INTERLEAVED, None, every) == [{"seed": s, "variant": standard} for s in (11, 12)]
    assert pool_sets(two, KERNELBENCH, None, every) == [{"seed": 11, "variant": standard}]  # one set: one figure
    native = SimpleNamespace(admission=Admission(pool_sets=2), plan=SimpleNamespace(timing_seeds=[]))
    assert pool_sets(native, INTERLEAVED, None, every) == every  # `off`: the trials' own inputs


def test_the_checked_pair_closes_while_timing_waits_for_a_pair_still_being_made_ready(monkeypatch):
    events: list[str] = []
    real_join, real_beside = timing_ahead.TimingAhead.join, timing_pair.close_beside

    def slow_join(self, state):  # the thread outlasted correctness: timing waits for it
        events.append("waiting for the pair made ahead")
        joined = real_join(self, state)
        events.append("the pair made ahead taken")
        return joined

    def beside(state):
        events.append("the checked pair's close begun")
        real_beside(state)

    monkeypatch.setattr(timing_ahead.TimingAhead, "join", slow_join)
    monkeypatch.setattr(timing_pair, "close_beside", beside)
    record = judge(TASKS / "family_bias_relu.py", CANDIDATES / "honest_torch.py", CONFIG)
    assert record.status == "PASS" and record.timing.measured, record.failure
    assert events == [
        "the checked pair's close begun",
        "waiting for the pair made ahead",
        "the pair made ahead taken",
    ]
    assert {"reference", "candidate", "reference_timing", "candidate_timing"} <= set(record.logs)
