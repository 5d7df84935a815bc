"""The record's assembly (judgment/stages/record.py) is a pure function of a judgment's state: no process, no GPU."""

import copy
import random

from helpers import CANDIDATES, validate_record
from kerneljudge.checks.catalog import finding
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.gate import OPEN_GATE
from kerneljudge.judgment.stages.record import assemble
from kerneljudge.judgment.stages.results import StageResults, TimingRun
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.sources.candidate import load_candidate
from kerneljudge.tasks.load import load_task


def state_of(tiny_task) -> JudgmentState:
    return JudgmentState(
        task=load_task(tiny_task),
        candidate=load_candidate(CANDIDATES / "honest_torch.py"),
        config=JudgeConfig(device="cpu"),
        progress=lambda stage: None,
        gpu=None,
        gate=OPEN_GATE,
        baselines={},
        source=random.Random(0),
    )


def test_error_findings_fail_the_record_and_the_state_is_left_as_it_was(tiny_task):
    state = state_of(tiny_task)
    state.calls.oracle_dtype = "float32"
    state.findings.append(finding("KJ-R050", "error", "claimed times the parent's clock does not support"))
    before = (copy.deepcopy(state.capabilities), state.failure, copy.deepcopy(state.findings))
    record = assemble(state, StageResults(), {}, 1.23456, "2024-01-01T00:00:00+00:00", {"python": "3"})
    validate_record(record)
    assert record.status == "FAIL" and record.failure_kind == "integrity_violation"
    assert record.capabilities["float64_oracle"].status == "degraded"
    assert record.duration_s == 1.235 and record.created_at == "2024-01-01T00:00:00+00:00"
    assert (state.capabilities, state.failure, state.findings) == before


def test_the_same_state_assembles_the_same_record(tiny_task):
    state = state_of(tiny_task)
    first, second = (assemble(state, StageResults(), {}, 0.5, "2024-01-01T00:00:00+00:00", {}) for _ in range(2))
    assert first.model_dump() == second.model_dump()


def test_a_capture_that_shows_unjoined_work_fails_closed_in_enforce_and_is_timed_again_in_audit(tiny_task, monkeypatch):
    """judgment/stages/timing.py: a CUDA graph capture of the candidate's calls that fails on unjoined work raises
    KJ-R024; in enforce the verdict is FAIL already, so nothing more is timed (no fresh pair, no precursor regime) and
    the record says why; audit times it again behind a busy precursor, as before."""
    from kerneljudge.judgment.stages import timing
    from kerneljudge.timing.sides import GraphUnsupported

    for mode in ("enforce", "audit"):
        state = state_of(tiny_task)
        state.config = JudgeConfig(device="cpu", mode=mode)
        regimes, fresh = [], []

        def measure(state, result, regime, shape=None, budget_s=None, trial_sets=None, regimes=regimes):
            regimes.append(regime)
            if len(regimes) == 1:
                raise GraphUnsupported(
                    "the candidate side: CUDA error: capturing stream has unjoined work", "candidate"
                )

        monkeypatch.setattr(timing, "measure", measure)
        result = TimingRun()
        timing.run(state, lambda fresh=fresh: fresh.append(True), [], result)
        assert [f.code for f in state.findings] == ["KJ-R024"], mode
        if mode == "enforce":
            assert regimes == [state.config.timing_regime] and fresh == []
            assert not result.timing.measured
            assert result.timing.reason == "not timed: enforce fails the candidate on KJ-R024"
        else:
            assert regimes == [state.config.timing_regime, timing.BUSY_PRECURSOR] and fresh == [True]
            assert result.timing.graph_fallback.endswith("unjoined work")
