"""One trial's outputs judged and recorded: the reference worker's comparison of each output (by the oracle,
or natively in `off`), precision forensics, the task's own check where it has one (it decides; a
disagreement with the oracle is KJ-C002), the trial's record, and the candidate's failure at its first miss.
Used by the correctness trials and the hidden-shape trials alike.
"""

from __future__ import annotations

from typing import Any

from kerneljudge import protocol
from kerneljudge.checks.catalog import finding
from kerneljudge.checks.outputs import signature_items
from kerneljudge.checks.precision import precision_finding
from kerneljudge.judgment.stages.calls import compare
from kerneljudge.judgment.stages.failures import CandidateFailed
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.results.verdict import Failure, Finding, TrialRecord
from kerneljudge.tasks.shapes import describe_shape, plain


def task_check_disagrees(where: str, task_check: dict[str, Any], oracle_summary: str, oracle_passed: bool) -> Finding:
    """The task's own check and the float64 oracle disagree on one trial (the task's check decides)."""
    verdict = "passed" if task_check["passed"] else "failed"
    oracle = "passed" if oracle_passed else f"did not pass ({oracle_summary})"
    return finding(
        "KJ-C002",
        "info",
        f"{where}: the task's own check {verdict}, the oracle comparison {oracle}",
        {"task_check": task_check, "oracle": oracle_summary, "oracle_passed": oracle_passed},
    )


def check_trial(
    state: JudgmentState,
    index: int,
    kind: str,
    seed: int,
    cand: protocol.Output,
    distribution: dict[str, Any] | None,
    shape: dict[str, Any] | None = None,
    keep: bool = False,
    native: bool = False,
) -> None:
    """Compare one trial's outputs with the oracle (or, `native`, by KernelBench's check: judgment/stages/native.py),
    record it, fail on the first miss."""
    where = f"{kind} trial {index}" + (f" at {describe_shape(shape)}" if shape else "")
    outputs, failure_kind, summary = [], None, "passed"
    results = compare(state, "trial", cand, "native" if native else "oracle", keep=keep)
    for i, (result, item) in enumerate(zip(results, signature_items(state.calls.signature), strict=True)):
        metrics = dict(result.get("metrics") or {})
        forensic = None if native or state.calls.task_check else precision_finding(metrics, item["dtype"], where)
        if forensic is not None:
            state.add_findings([forensic])
        outputs.append({"index": i, "passed": result["passed"], "summary": result["summary"], **metrics})
        if result["passed"] is False and failure_kind is None:
            failure_kind, summary = result["failure_kind"], result["summary"]
    task_check = state.calls.last_task_check if state.calls.task_check else None
    if task_check is not None:  # the task's own check decides; the oracle's figures stay in the record
        uncompared = [r["summary"] for r in results if r["passed"] is None]
        oracle_passed = failure_kind is None and not uncompared
        oracle_summary = summary if failure_kind is not None else (uncompared or ["passed"])[0]
        if task_check["passed"] != oracle_passed and len(uncompared) < len(results):  # else nothing compared
            state.add_findings([task_check_disagrees(where, task_check, oracle_summary, oracle_passed)])
        failure_kind = None if task_check["passed"] else "tolerance"
        summary = "passed" if task_check["passed"] else f"the task's own check: {task_check['message']}"
    state.checked.trials.append(
        TrialRecord(
            index=index,
            kind=kind,  # type: ignore[arg-type]
            seed=seed,
            passed=failure_kind is None,
            failure_kind=failure_kind,  # type: ignore[arg-type]
            summary=summary,
            outputs=outputs,
            distribution=distribution,
            shape={name: plain(tree) for name, tree in shape.items()} if shape else None,
            task_check=task_check,
        )
    )
    if failure_kind is not None:
        raise CandidateFailed(
            Failure(kind=failure_kind, phase=f"correctness ({where})", summary=summary)  # type: ignore[arg-type]
        )
    if shape is not None:
        state.checked.shapes.append(shape)
