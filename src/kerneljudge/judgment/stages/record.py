"""The record of a judgment, assembled from its state and its stages' results (judgment/stages/results.py): a pure
function, no I/O (the caller reads the clock and the environment's fingerprint and passes them in), that writes into
neither (what it adds to the timing stage's timing goes into a copy). The float64 oracle's capability, the failure
that error-severity findings amount to, the status (verdict.decide_status) and the rewards are derived here, as are
the findings on what the workers left in their workspaces (checks/workspace.py), known only once they closed.
"""

from __future__ import annotations

from typing import Any

from kerneljudge import __version__
from kerneljudge.checks import workspace
from kerneljudge.judgment.stages import timing_ahead
from kerneljudge.judgment.stages.failures import integrity_failure
from kerneljudge.judgment.stages.results import StageResults
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.results.reward import rewards_for
from kerneljudge.results.verdict import (
    Capability,
    Correctness,
    Identity,
    Record,
    Timing,
    WorkerLog,
    WorkerPairs,
    decide_status,
)


def assemble(
    state: JudgmentState,
    results: StageResults,
    logs: dict[str, WorkerLog],
    duration_s: float,
    created_at: str,
    environment: dict[str, Any],
) -> Record:
    """The judgment's record, from its state, its stages' results, its workers' logs, its duration, the time it is
    made at and the environment's fingerprint."""
    capabilities = dict(state.capabilities)
    if state.calls.oracle_dtype is not None:
        degraded = state.calls.oracle_dtype != "float64"
        capabilities["float64_oracle"] = Capability(
            status="degraded" if degraded else "available",
            required=False,
            detail="an op lacks float64: oracle ran in float32 with TF32 off"
            if degraded
            else "reference re-run in float64",
        )
    findings = [*state.findings, *workspace.past_bounds(logs)]  # what the workers left, known once they closed
    failure = state.failure
    if failure is None and any(f.severity == "error" for f in findings):
        failure = integrity_failure(findings, "integrity", "integrity rules broken")
    status = decide_status(failure, findings, capabilities)
    sanitized = results.correctness.sanitizer
    worst = max(
        (o for t in state.checked.trials for o in t.outputs), default=None, key=lambda o: o.get("max_abs_error", 0.0)
    )
    correctness = Correctness(
        checked=bool(
            state.checked.trials
        ),  # at least one trial compared: a worker that died at its first call checked none
        passed=results.correctness.passed,
        method="kernelbench_native" if state.native else "oracle",
        oracle_dtype=state.calls.oracle_dtype,
        tolerance=state.calls.tolerances,
        trials=state.checked.trials,
        replay=results.correctness.replays.as_record(),
        worst=worst,
        shape_family=state.build.family.summary() if state.build.family is not None else None,
        inputs=state.inputs,
        sanitizer=sanitized.record if sanitized is not None else None,
        plan=state.plan.as_record() if state.plan is not None else None,
    )
    timing = timing_of(state, results.timing.timing)
    record = Record(
        kerneljudge_version=__version__,
        created_at=created_at,
        task=Identity(sha256=state.task.sha256, name=state.task.name, path=state.task.path),
        candidate=Identity(
            sha256=state.candidate.sha256,
            name=state.candidate.name,
            path=state.candidate.path,
            extracted_from_response=state.candidate.extracted_from_response,
        ),
        config=state.config.to_dict(),
        device=state.build.device,
        status=status,
        verified=status == "PASS" and not state.native,
        valid=status != "ERROR",
        failure_kind=failure.kind if failure else None,
        failure=failure,
        findings=findings,
        capabilities=capabilities,
        preflight={"declared_kernels": state.build.declared_kernels},
        kernel_trace=results.traces.summary if results.traces is not None else None,
        correctness=correctness,
        timing=timing,
        environment=environment,
        logs=logs,
        workers=WorkerPairs(checked=state.pair_log.checked_from, timing=state.pair_log.timing_from),
        duration_s=round(duration_s, 3),
        stages_s=state.stages_s,
    )
    record.rewards = rewards_for(record)
    return record


def timing_of(state: JudgmentState, staged: Timing) -> Timing:
    """The record's timing: the timing stage's (`staged`, left as it is), with what the rest of the judgment knows
    of it: the caches carried to its pair, the pair made ready ahead, and the share of the stage's wall time the
    device spent on the timed calls."""
    timing_wall_s = state.stages_s.get("timing")
    busy_fraction = staged.busy_fraction
    if staged.timed_busy_s is not None and timing_wall_s:
        busy_fraction = round(min(1.0, staged.timed_busy_s / timing_wall_s), 4)
    described = {"carried_caches": state.pair_log.carried, "ahead": timing_ahead.described(state)}
    return staged.model_copy(update={**described, "busy_fraction": busy_fraction})
