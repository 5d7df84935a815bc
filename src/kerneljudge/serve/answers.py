"""An answer from a record: the few fields a trainer reads, computed from the record alone (docs/serve.md).

Pure: the same record and reward spec give the same answer, whether the record was judged just now, shared
with a concurrent duplicate, or read back from the store; that is what makes a retry's answer identical.
The reward is the record's own (kerneljudge/results/reward.py, docs/reward.md); the explanation is
`kerneljudge.results.explain.explain`.
"""

from __future__ import annotations

from kerneljudge.api.schema import Answer, AnswerMetrics
from kerneljudge.results.explain import explain
from kerneljudge.results.reward import rewards_for
from kerneljudge.results.verdict import Record


def answer_for(record: Record, record_id: str, request_id: str | None, reward_spec: str) -> Answer:
    reward = record.reward(reward_spec)
    if reward is None:  # a record written before the spec existed: computed from the record now
        reward = next(r for r in rewards_for(record) if r.spec == reward_spec)
    return Answer(
        request_id=request_id,
        reward=reward.value,
        reward_spec=reward_spec,
        valid=record.valid,
        status=record.status,
        failure_kind=record.failure_kind,
        failure_reason=failure_reason(record),
        findings=[f.code for f in record.findings if f.severity in ("error", "warning")],
        metrics=metrics_of(record),
        record_id=record_id,
        explanation=explain(record),
    )


def failure_reason(record: Record) -> str | None:
    """One line on why the candidate is not verified (or why no verdict): None for a PASS."""
    if record.status == "PASS":
        return None
    if record.failure is not None:
        return record.failure.summary.splitlines()[0] if record.failure.summary else record.failure.kind
    worst = "error" if record.status == "FAIL" else "warning"
    finding = next((f for f in record.findings if f.severity == worst), None)
    if finding is not None:
        return f"{finding.code}: {finding.summary}"
    missing = [(name, c) for name, c in record.capabilities.items() if c.required and c.status == "unavailable"]
    if missing:
        name, capability = missing[0]
        return f"{name} unavailable: {capability.detail}" if capability.detail else f"{name} unavailable"
    return None


def metrics_of(record: Record) -> AnswerMetrics:
    timing = record.timing
    trials = record.correctness.trials
    return AnswerMetrics(
        correct=record.correctness.passed,
        trials=len(trials),
        trials_passed=sum(trial.passed for trial in trials),
        timed=timing.measured,
        device=timing.device or record.device,
        speedup=timing.speedup,
        speedup_interval=timing.speedup_interval,
        candidate_ms=timing.candidate.median_ms if timing.candidate else None,
        reference_ms=timing.reference.median_ms if timing.reference else None,
        speedup_vs_compile=timing.speedup_vs_compile,
        duration_s=record.duration_s,
    )
