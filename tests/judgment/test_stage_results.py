"""The stages' typed results (judgment/stages/results.py): what each stage returns or fills for given inputs, with
fake workers and states, and how the record (judgment/stages/record.py) reads them, writing into neither. No process,
no GPU."""

import copy
import random
from types import SimpleNamespace

import pytest
from test_stages_record import state_of

from kerneljudge.checks.catalog import finding
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment import sanitizer as sanitize
from kerneljudge.judgment.stages import correctness, integrity, native, sanitizer, timing
from kerneljudge.judgment.stages.failures import CandidateFailed, JudgeFailed
from kerneljudge.judgment.stages.record import assemble
from kerneljudge.judgment.stages.results import (
    CorrectnessRun,
    Replays,
    SanitizerRun,
    StageResults,
    TimingRun,
    TraceReading,
    voiding_codes,
)
from kerneljudge.judgment.stages.state import BuildFacts, CallFacts, Checked, TraceLog
from kerneljudge.results.verdict import Capability, Failure, Timing, TimingStats

AVAILABLE = Capability(status="available", required=False, detail="found")


def findings_state(**fields):
    """A fake state whose findings are gathered as `JudgmentState.add_findings` would, without the per-code merge."""
    state = SimpleNamespace(findings=[], capabilities={}, closed_logs={}, progress=lambda stage: None, **fields)
    state.add_findings = state.findings.extend
    return state


# compute-sanitizer's stage: a SanitizerRun, and the state left as it was


def test_a_sanitizer_that_does_not_run_returns_the_decided_capability_only():
    decided = sanitize.Decision(run=False, reason="no CUDA of its own", capability=AVAILABLE)
    state = findings_state()
    assert sanitizer.run(state, decided) == SanitizerRun(AVAILABLE)
    assert state.capabilities == {} and state.findings == [] and state.closed_logs == {}


def test_a_sanitizer_whose_reference_cannot_load_returns_a_degraded_capability(monkeypatch):
    def load_reference(state, shape):
        raise JudgeFailed("the reference does not load at that shape")

    monkeypatch.setattr(sanitizer, "load_reference", load_reference)
    monkeypatch.setattr(sanitizer, "inputs_text", lambda state, shape: "task")
    channels = SimpleNamespace(access=SimpleNamespace(put=lambda slot, value: value))
    state = findings_state(
        build=BuildFacts(),
        checked=Checked(),
        workers={"candidate": SimpleNamespace(channels=channels)},
        config=JudgeConfig(),
    )
    decided = sanitize.Decision(run=True, reason="auto", capability=AVAILABLE, path="/bin/compute-sanitizer")
    ran = sanitizer.run(state, decided)
    assert ran.capability.status == "degraded" and "does not load" in ran.capability.detail
    assert ran.record is None and ran.findings == () and ran.failure is None


def test_a_sanitizer_run_returns_its_record_findings_failure_and_logs(monkeypatch):
    race = finding("KJ-R040", "error", "racecheck: a hazard in the candidate's kernel")
    failed = Failure(kind="race", phase="compute-sanitizer", summary="racecheck reports a hazard")
    concluded = Capability(status="available", required=False, detail="ran")
    monkeypatch.setattr(sanitizer, "load_reference", lambda state, shape: "init")
    monkeypatch.setattr(sanitizer, "inputs_text", lambda state, shape: "task")
    monkeypatch.setattr(sanitize, "starter", lambda *args: None)
    monkeypatch.setattr(sanitize, "run_tools", lambda *args: ([], {"racecheck": "worker"}))
    monkeypatch.setattr(sanitize, "kept_log", lambda worker, cap: f"{worker} log")
    monkeypatch.setattr(sanitize, "conclude", lambda *args: ([race], {"path": "p"}, failed, concluded))
    channels = SimpleNamespace(access=SimpleNamespace(put=lambda slot, value: value))
    state = findings_state(
        build=BuildFacts(device="cuda"),
        checked=Checked(),
        workers={"candidate": SimpleNamespace(channels=channels)},
        config=JudgeConfig(),
        candidate=SimpleNamespace(text="source"),
        limits=None,
        sandbox=None,
        gpu=None,
    )
    decided = sanitize.Decision(run=True, reason="auto", capability=AVAILABLE, path="/bin/cs", tools=("racecheck",))
    ran = sanitizer.run(state, decided)
    assert ran.capability == concluded and ran.findings == (race,) and ran.failure == failed
    assert ran.record["path"] == "p" and ran.record["tools_run"] == ["racecheck"] and ran.record["shape"] is None
    assert list(ran.logs) == ["candidate_racecheck"]
    assert state.findings == [] and state.capabilities == {} and state.closed_logs == {}  # the stage wrote nothing
    with pytest.raises(CandidateFailed) as raised:  # filed by the correctness stage, whose failure it is
        correctness.file_sanitizer_run(state, ran)
    assert raised.value.failure == failed
    assert state.findings == [race] and state.capabilities["compute_sanitizer"] == concluded
    assert list(state.closed_logs) == ["candidate_racecheck"]


# The replays: filled as they run, the record's `correctness.replay`


def test_replays_make_the_record_as_the_stage_filled_them():
    replays = Replays()
    assert replays.as_record() is None  # nothing replayed, nothing drawn
    replays.trials.append({"trial": 2, "differing_elements": 0})
    replays.bitwise_identical = True
    replays.perturbations = [{"kind": "gpu_load"}]
    assert replays.as_record() == {
        "trials": [{"trial": 2, "differing_elements": 0}],
        "bitwise_identical": True,
        "perturbations": [{"kind": "gpu_load"}],
    }
    replays.skipped, replays.perturbed_s = ["sm_hold"], 31.5
    assert replays.as_record()["perturbations_skipped"] == ["sm_hold"] and replays.as_record()["perturbed_s"] == 31.5


# The correctness stage's result: KernelBench's native path fills `passed`, and nothing replayed or sanitized


def test_the_native_path_fills_passed_and_leaves_replays_and_the_sanitizer_empty(monkeypatch):
    checked = []
    monkeypatch.setattr(native, "reference_trial", lambda state, seed, oracle, distribution: ("inputs", None))
    monkeypatch.setattr(native, "call_candidate", lambda state, inputs, **call: {"type": "output"})
    monkeypatch.setattr(native, "check_trial", lambda state, index, *args, **kw: checked.append(index))
    config = JudgeConfig(device="cpu", mode="off", public_trials=3)
    state = findings_state(config=config, source=random.Random(0), calls=CallFacts(), plan=None)
    result = native.run_correctness(state, CorrectnessRun())
    assert result.passed and checked == [0, 1, 2]
    assert result.replays.as_record() is None and result.sanitizer is None
    assert [s["seed"] for s in result.timing_sets] == [t.seed for t in state.plan.trials]  # the pool's, natively


def test_a_failed_trial_leaves_the_correctness_result_not_passed(monkeypatch):
    def check_trial(state, index, *args, **kw):
        raise CandidateFailed(Failure(kind="tolerance", phase="correctness", summary="off by one"))

    monkeypatch.setattr(native, "reference_trial", lambda state, seed, oracle, distribution: ("inputs", None))
    monkeypatch.setattr(native, "call_candidate", lambda state, inputs, **call: {"type": "output"})
    monkeypatch.setattr(native, "check_trial", check_trial)
    state = findings_state(config=JudgeConfig(device="cpu", mode="off"), source=random.Random(0), trial_screen=None)
    result = CorrectnessRun()
    with pytest.raises(CandidateFailed):
        native.run_correctness(state, result)
    assert not result.passed


# The kernel traces read at the end: a TraceReading, or None where none are read


def test_the_traces_are_read_on_cuda_only_and_an_unread_one_makes_the_capability_unavailable():
    config = JudgeConfig()
    fields = {"candidate": SimpleNamespace(text=""), "config": config}
    on_cpu, on_cuda = BuildFacts(device="cpu"), BuildFacts(device="cuda")
    assert integrity.judge_traces(SimpleNamespace(build=on_cpu, native=False, trace_log=TraceLog(), **fields)) is None
    assert integrity.judge_traces(SimpleNamespace(build=on_cuda, native=True, trace_log=TraceLog(), **fields)) is None
    unread = SimpleNamespace(build=on_cuda, native=False, trace_log=TraceLog(problems=["trial 3: no events"]), **fields)
    reading = integrity.judge_traces(unread)
    assert reading.summary is None and reading.capability.status == "unavailable"
    assert [f.code for f in reading.findings] == ["KJ-R030"] and "trial 3" in reading.capability.detail
    none = integrity.judge_traces(SimpleNamespace(build=on_cuda, native=False, trace_log=TraceLog(), **fields))
    assert none.findings == () and none.capability.detail == "no call was traced"


# The record composed from the results


def test_the_record_reads_the_stages_results(tiny_task):
    results = StageResults()
    results.correctness.passed = True
    results.correctness.replays.trials.append({"trial": 0, "differing_elements": 0})
    results.correctness.replays.bitwise_identical = True
    results.correctness.sanitizer = SanitizerRun(AVAILABLE, {"path": "p", "seconds": 1.0})
    results.traces = TraceReading({"calls_traced": [1]}, (), AVAILABLE)
    record = assemble(state_of(tiny_task), results, {}, 0.5, "2024-01-01T00:00:00+00:00", {})
    assert record.correctness.passed and record.correctness.replay["bitwise_identical"] is True
    assert record.correctness.sanitizer == {"path": "p", "seconds": 1.0}
    assert record.kernel_trace == {"calls_traced": [1]}
    empty = assemble(state_of(tiny_task), StageResults(), {}, 0.5, "2024-01-01T00:00:00+00:00", {})
    assert not empty.correctness.passed and empty.correctness.replay is None and empty.correctness.sanitizer is None
    assert empty.kernel_trace is None


# The timing stage's result: filled as it runs, the record's `timing` as the stage left it


def stats_of(median_ms):
    return TimingStats(
        median_ms=median_ms,
        p95_ms=median_ms,
        min_ms=median_ms,
        max_ms=median_ms,
        mean_ms=median_ms,
        cv=0.0,
        count=1,
        samples_ms=[median_ms],
    )


def test_a_timing_run_is_not_reached_until_the_stage_fills_it_and_fails_closed_only_in_enforce():
    run = TimingRun()
    assert not run.timing.measured and run.timing.reason == "not reached"
    warned = [finding("KJ-R022", "warning", "outputs share storage")]
    failing = [*warned, finding("KJ-R050", "error", "claimed times"), finding("KJ-R023", "error", "a stream")]
    assert voiding_codes(failing, JudgeConfig(mode="enforce")) == ["KJ-R023", "KJ-R050"]
    assert voiding_codes(failing, JudgeConfig(mode="audit")) == [] and voiding_codes(warned, JudgeConfig()) == []
    assert not run.fails_closed(failing, JudgeConfig(mode="audit")) and run.timing.reason == "not reached"
    assert not run.fails_closed(warned, JudgeConfig(mode="enforce")) and run.timing.reason == "not reached"
    assert run.fails_closed(failing, JudgeConfig(mode="enforce"))
    assert not run.timing.measured
    assert run.timing.reason == "not timed: enforce fails the candidate on KJ-R023, KJ-R050"


def test_the_timing_stage_fills_its_result_with_why_a_method_cannot_time(tiny_task):
    state = state_of(tiny_task)
    state.config, state.build.device = JudgeConfig(device="cpu", timing_method="do_bench"), "cpu"
    result = TimingRun()
    timing.run(state, lambda: None, [], result)
    assert result.timing == Timing(measured=False, reason="Triton's do_bench times CUDA devices only")
    assert not hasattr(state, "timing")  # the stage's result is its own, not the state's


def test_the_timing_stage_fills_each_timing_shapes_measurement_and_their_geometric_mean(tiny_task, monkeypatch):
    shapes = [{"n": 8}, {"n": 16}]
    state = state_of(tiny_task)
    state.build.family = SimpleNamespace(timing=shapes)
    medians = iter([(1.0, 2.0), (1.0, 8.0)])

    def measure(state, result, regime, shape=None, budget_s=None, trial_sets=None):
        candidate, reference = next(medians)
        result.timing = Timing(
            measured=True,
            speedup=reference / candidate,
            candidate=stats_of(candidate),
            reference=stats_of(reference),
            graph_fallback="no capture" if shape == shapes[1] else None,
        )

    monkeypatch.setattr(timing, "measure", measure)
    result = TimingRun()
    timing.run(state, lambda: None, [], result)
    assert result.timing.measured and result.timing.speedup == pytest.approx(4.0)  # the mean of 2x and 8x
    assert [s["shape"] for s in result.timing.shapes] == shapes and result.timing.graph_fallback == "no capture"


def test_the_record_adds_to_the_stages_timing_in_a_copy_and_leaves_state_and_results_unchanged(tiny_task):
    state = state_of(tiny_task)
    state.config = JudgeConfig(device="cpu", timing_ahead=True)
    state.calls.oracle_dtype = "float32"
    state.findings.append(finding("KJ-R050", "error", "claimed times the parent's clock does not support"))
    state.pair_log.carried = {"files": 2, "seconds": 0.1}
    state.stages_s["timing"] = 4.0
    results = StageResults()
    results.correctness.passed = True
    results.correctness.replays.trials.append({"trial": 0, "differing_elements": 0})
    results.timing.timing = Timing(measured=True, speedup=2.0, candidate=stats_of(1.0), timed_busy_s=1.0)
    results.traces = TraceReading({"calls_traced": [1]}, (), AVAILABLE)
    state_before, results_before = repr(state), copy.deepcopy(results)
    record = assemble(state, results, {}, 0.5, "2024-01-01T00:00:00+00:00", {})
    assert record.timing.busy_fraction == 0.25 and record.timing.carried_caches == {"files": 2, "seconds": 0.1}
    assert record.timing.ahead == {
        "made": False,
        "why_not": "the judgment ended before a trial had passed, or failed closed on one",
    }
    assert record.timing.speedup == 2.0 and record.timing is not results.timing.timing
    assert repr(state) == state_before and results == results_before
    assert results.timing.timing.busy_fraction is None and results.timing.timing.ahead is None
    again = assemble(state, results, {}, 0.5, "2024-01-01T00:00:00+00:00", {})
    assert again.model_dump() == record.model_dump()
