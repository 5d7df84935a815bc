"""End to end on the CPU: each kind of candidate gets the typed verdict a user expects."""

import pytest

from helpers import CANDIDATES, run_judge, validate_record
from kerneljudge.config import JudgeConfig
from kerneljudge.sources.candidate import load_candidate
from kerneljudge.tasks.load import load_task


def test_honest_candidate_passes_verified(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "honest_torch.py")
    assert record.status == "PASS" and record.verified and record.valid
    trials = record.correctness.trials
    assert [t.kind for t in trials].count("public") == 5 and [t.kind for t in trials].count("hidden") == 5
    assert all(t.passed for t in trials)
    assert len({t.seed for t in trials if t.kind == "hidden"}) == 5
    assert record.correctness.oracle_dtype == "float64"
    assert record.correctness.replay["bitwise_identical"] is True
    assert record.reward("kerneljudge.reward.binary.v1").value == 1.0
    assert record.device == "cpu" and record.capabilities["cuda_runtime"].required is False
    # where correctness's time went, request by request: within the stage, the candidate's calls among them
    spent = {k: v for k, v in record.stages_s.items() if k.startswith("correctness.") and ":" not in k}
    assert spent["correctness.candidate.call"] > 0 and spent["correctness.reference.compare"] > 0
    assert sum(spent.values()) <= record.stages_s["correctness"] + 0.01
    # and within a round trip, its parts as each worker clocked them, none longer than the round trip
    parts = {k: v for k, v in record.stages_s.items() if ":" in k}
    for key in (
        "correctness.reference.trial:reference",
        "correctness.reference.compare:compare",
        "correctness.reference.compare:read",
        "correctness.candidate.call:call",
    ):
        assert key in parts, key
    for key, seconds in parts.items():
        assert 0 <= seconds <= record.stages_s[key.split(":")[0]] + 0.01, key


def test_hidden_seeds_differ_between_runs(tiny_task):
    seeds = [
        {t.seed for t in run_judge(tiny_task, CANDIDATES / "honest_torch.py").correctness.trials if t.kind == "hidden"}
        for _ in range(2)
    ]
    assert not seeds[0] & seeds[1]


@pytest.mark.parametrize(
    "fixture, kind",
    [
        ("wrong_values.py", "tolerance"),
        ("wrong_shape.py", "shape_mismatch"),
        ("wrong_dtype.py", "dtype_mismatch"),
        ("wrong_device.py", "device_mismatch"),
        ("non_finite.py", "non_finite"),
        ("output_not_tensor.py", "output_type"),
        ("output_subclass.py", "output_type"),
        ("racy.py", "nondeterministic"),
        ("syntax_error.py", "compile_error"),
        ("import_error.py", "compile_error"),
        ("raise_in_init.py", "runtime_error"),
        ("raise_in_forward.py", "runtime_error"),
    ],
)
def test_failures_are_typed(tiny_task, fixture, kind):
    record = run_judge(tiny_task, CANDIDATES / fixture)
    assert record.status == "FAIL", record.failure
    assert record.failure.kind == kind, record.failure
    assert not record.verified and record.valid
    assert record.reward("kerneljudge.reward.v1").value == -1.0


def test_model_response_is_extracted(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "response.md")
    assert record.candidate.extracted_from_response
    assert record.status == "PASS"


def test_off_mode_is_kernelbench_native(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "honest_torch.py", mode="off", hidden_trials=0)
    assert record.status == "PASS" and not record.verified
    assert record.correctness.method == "kernelbench_native"
    assert [t.kind for t in record.correctness.trials] == ["public"] * 5
    assert record.correctness.tolerance["float32"]["atol"] == 1e-4


def test_off_mode_fails_wrong_values(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "wrong_values.py", mode="off", hidden_trials=0)
    assert record.status == "FAIL" and record.failure.kind == "tolerance"


def test_missing_gpu_is_unsupported(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "honest_torch.py", device="cuda")
    if record.environment.get("cuda_available"):
        pytest.skip("this machine has a GPU")
    assert record.status == "UNSUPPORTED"
    assert record.capabilities["cuda_runtime"].required and record.capabilities["cuda_runtime"].status == "unavailable"
    assert record.reward("kerneljudge.reward.v1").value is None


def test_broken_task_is_a_judge_error_not_a_candidate_failure(tmp_path):
    task = tmp_path / "broken.py"
    task.write_text(
        "import torch\nclass Model(torch.nn.Module):\n"
        "    def __init__(self, width):\n        super().__init__()\n"
        "    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    raise ValueError('no inputs')\ndef get_init_inputs():\n    return [33]\n"
    )
    record = run_judge(task, CANDIDATES / "honest_torch.py")
    assert record.status == "ERROR" and not record.valid and record.failure.kind == "judge_error"
    assert all(r.value is None for r in record.rewards)


def test_parent_never_imports_the_candidate(tiny_task):
    import os
    import sys

    before = {name for name in sys.modules if name.startswith("kj_")}  # other tests in this process load some
    record = run_judge(tiny_task, CANDIDATES / "import_marker.py")
    log = record.logs["candidate"]
    importer = int(log.stdout_tail.split("IMPORTED_BY ")[1].split()[0])
    assert importer != os.getpid()
    # The file it wrote stayed in its workspace, and the workspace's manifest shows it.
    assert "importer_pid" in log.workspace_changes["created"]
    assert record.status == "SUSPICIOUS" and not record.verified  # it writes a file: KJ-S040, recorded in audit
    assert "KJ-S040" in {f.code for f in record.findings}
    assert {name for name in sys.modules if name.startswith("kj_")} == before


def test_timing_is_recorded_with_its_regime(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "honest_torch.py", timing=True, timing_blocks=2, timing_samples=3)
    t = record.timing
    assert t.measured and t.device == "cpu" and "not a GPU speedup" in t.regime
    assert t.candidate.count == 6 and t.reference.count == 6 and len(t.block_ratios) == 2
    assert t.speedup > 0 and t.parent_observed_ms["candidate"] > 0
    assert record.reward("kerneljudge.reward.v1").value is not None
    # Timing ran in a fresh worker pair, after the checked one had closed: both pairs' logs are kept.
    assert set(record.logs) == {"reference", "candidate", "reference_timing", "candidate_timing"}
    assert t.launch_regime == "host_clock" and t.clocks == {"monitor": None}


def test_a_proven_failure_outranks_a_missing_capability():
    from kerneljudge.results.verdict import Capability, Failure, decide_status

    missing = {"profiler_trace": Capability(status="unavailable", required=True, detail="no trace")}
    failure = Failure(kind="tolerance", phase="correctness (hidden trial 6)", summary="wrong")
    assert decide_status(failure, [], missing) == "FAIL"
    assert decide_status(None, [], missing) == "UNSUPPORTED"
    assert decide_status(Failure(kind="judge_error", phase="judge", summary="bug"), [], missing) == "ERROR"


def judged_watching_the_timing_pair(task, candidate, monkeypatch):
    """Judge with timing; return the record, the pair booted for timing with the stages seen before its
    boot, and the workers the timing ran on."""
    from kerneljudge.judgment.pipeline import Judgment

    stages: list[str] = []
    booted: list[tuple[list, list[str]]] = []
    timed: list[list] = []
    boot, start = Judgment._boot_timing_pair, Judgment._start_timing_pair

    def spy_boot(self):
        boot(self)
        booted.append((list(self.booting.values()), list(stages)))

    def spy_start(self):
        start(self)
        timed.append(list(self.workers.values()))

    monkeypatch.setattr(Judgment, "_boot_timing_pair", spy_boot)
    monkeypatch.setattr(Judgment, "_start_timing_pair", spy_start)
    config = JudgeConfig(device="cpu", policy="practical", timeout_s=60.0, timing_blocks=2, timing_samples=3)
    record = Judgment(load_task(task), load_candidate(candidate), config, stages.append).run()
    validate_record(record)
    return record, booted, timed


def test_the_timing_pair_boots_while_the_checked_pair_works(tiny_task, monkeypatch):
    record, booted, timed = judged_watching_the_timing_pair(tiny_task, CANDIDATES / "honest_torch.py", monkeypatch)
    assert record.status == "PASS" and record.timing.measured
    # The timed calls' own time, both sides, and what part of the timing stage it was (the latency benchmark's figure).
    timing = record.timing
    calls = timing.calls_per_sample
    own_s = sum(
        sum(s.samples_ms) * calls[n] for n, s in (("candidate", timing.candidate), ("reference", timing.reference))
    )
    assert timing.timed_busy_s == pytest.approx(own_s / 1e3, rel=1e-4) and timing.timed_busy_s > 0
    assert timing.busy_fraction == pytest.approx(timing.timed_busy_s / record.stages_s["timing"], abs=1e-4)
    assert 0 < timing.busy_fraction < 1
    # Where the rest of the stage went, round trip by round trip: the fresh pair's start and load, both
    # sides' calibrating and measured requests, the checks of kept outputs and the last-call rechecks.
    # (`timing.held` spans some of these round trips, and a close beside runs in a thread: neither is one)
    spent = {k: v for k, v in record.stages_s.items() if k.startswith("timing.") and ":" not in k}
    assert spent.pop("timing.held") > 0
    for side in ("reference", "candidate"):
        for op in ("hello", "load", "calibrate", "time"):
            assert f"timing.{side}.{op}" in spent, (side, op, sorted(spent))
    assert spent["timing.candidate.time"] > 0 and spent["timing.candidate.calibrate"] > 0
    assert spent["timing.candidate.recheck"] > 0 and spent["timing.candidate.captured"] > 0
    assert sum(spent.values()) <= record.stages_s["timing"] + 0.01
    ((workers, seen),) = booted
    # Booted once the candidate was built, before its first correctness trial; timed on exactly that pair.
    assert seen[-1].startswith("building the candidate") and not any("correctness" in s for s in seen)
    assert [w.role for w in workers] == ["reference", "candidate"]
    assert timed == [workers]
    assert all(w.proc.poll() is not None for w in workers)


def test_a_candidate_that_fails_its_checks_leaves_no_timing_worker(tiny_task, monkeypatch):
    record, booted, timed = judged_watching_the_timing_pair(tiny_task, CANDIDATES / "wrong_values.py", monkeypatch)
    assert record.status == "FAIL" and not record.timing.measured and timed == []
    ((workers, _),) = booted
    assert all(w.proc.poll() is not None for w in workers)  # closed with the judgment, not left running
    assert set(record.logs) == {"reference", "candidate"}  # the unused pair ran nothing worth a log


def test_enforce_does_not_time_a_candidate_its_findings_already_fail(tiny_task):
    # Correct values, computed in the input's storage (KJ-R023): FAIL in enforce before any figure, so
    # no device time is spent on it. Audit goes on to time it (where its timed calls, on inputs it has
    # changed, fail the timed-output check).
    enforced = run_judge(tiny_task, CANDIDATES / "mutate_inputs.py", mode="enforce", timing=True, timing_blocks=2)
    assert enforced.status == "FAIL" and enforced.correctness.passed and not enforced.timing.measured
    assert enforced.timing.reason == "not timed: enforce fails the candidate on KJ-R023"
    assert set(enforced.logs) == {"reference", "candidate"}
    audited = run_judge(tiny_task, CANDIDATES / "mutate_inputs.py", mode="audit", timing=True, timing_blocks=2)
    assert audited.status == "FAIL" and audited.failure.phase == "timing"
