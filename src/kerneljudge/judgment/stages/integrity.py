"""Integrity evidence read at the end of a judgment: the kernel traces kept from the traced calls (the plan's
`trace_at`), analysed against the kernels the candidate declares (checks/trace.py: among them the stream
check, KJ-R024, a kernel on another stream still running after the call) into findings, and the
`profiler_trace` capability they make. Findings from every other stage are gathered by
`JudgmentState.add_findings`, one per code; the record turns error-severity ones into a failure. The traces are
kept as the trials run (`keep_trace`, from the candidate's calls) and read once into a `results.TraceReading`.
"""

from __future__ import annotations

from typing import Any

from kerneljudge.checks.catalog import finding
from kerneljudge.checks.kernel_names import claims_torch_namespaces
from kerneljudge.checks.trace import MalformedTrace, analyse, read_call
from kerneljudge.judgment.stages.results import TraceReading
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.results.verdict import Capability


def keep_trace(state: JudgmentState, evidence: Any, phase: str) -> None:
    """Keep a traced call's kernel trace, or why it could not be read."""
    try:
        state.trace_log.calls.append(read_call(evidence.get("trace") if isinstance(evidence, dict) else None, phase))
    except MalformedTrace as exc:
        state.trace_log.problems.append(f"{phase}: {exc}")


def judge_traces(state: JudgmentState) -> TraceReading | None:
    """Read the traced calls (none are on the CPU or natively): their summary and findings, and the capability; a
    trace that was asked for and not read makes the capability unavailable."""
    if state.build.device != "cuda" or state.native:
        return None
    declared = {d["name"] for d in state.build.declared_kernels if d.get("kind") in ("triton", "cuda")}
    summary, found = None, []
    if state.trace_log.calls:
        by_name = not claims_torch_namespaces(state.candidate.text)  # a source can name kernels like torch's
        summary, found = analyse(state.trace_log.calls, declared, state.config.policy, by_name)
    problems = state.trace_log.problems
    if problems:
        found = [*found, finding("KJ-R030", "warning", f"kernel trace: {problems[0]}", {"problems": problems})]
    asked = len(state.trace_log.calls) + len(problems)
    capability = Capability(
        status="available" if asked and not problems else "unavailable",
        required=True,
        detail=(
            f"{len(state.trace_log.calls)} call(s) traced at random hidden trials"
            if asked and not problems
            else ("; ".join(problems)[:500] if problems else "no call was traced")
        ),
    )
    return TraceReading(summary, tuple(found), capability)
