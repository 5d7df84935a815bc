"""Integrity evidence read at the end of a judgment: the kernel traces kept from the traced calls (the plan's
`trace_at`), analysed against the kernels the candidate declares (checks/trace.py: among them the stream
check, KJ-R024, a kernel on another stream still running after the call) into findings, and the
`profiler_trace` capability they make. Findings from every other stage are gathered by
`JudgmentState.add_findings`, one per code; the record turns error-severity ones into a failure.
"""

from __future__ import annotations

from typing import Any

from kerneljudge.checks.catalog import finding
from kerneljudge.checks.kernel_names import claims_torch_namespaces
from kerneljudge.checks.trace import MalformedTrace, analyse, read_call
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.results.verdict import Capability


def keep_trace(state: JudgmentState, evidence: Any, phase: str) -> None:
    """Keep a traced call's kernel trace, or why it could not be read."""
    try:
        state.traced_calls.append(read_call(evidence.get("trace") if isinstance(evidence, dict) else None, phase))
    except MalformedTrace as exc:
        state.trace_problems.append(f"{phase}: {exc}")


def judge_traces(state: JudgmentState) -> None:
    """Read the traced calls; a trace that was asked for and not read makes the capability unavailable."""
    if state.device != "cuda" or state.native:
        return
    declared = {d["name"] for d in state.declared_kernels if d.get("kind") in ("triton", "cuda")}
    if state.traced_calls:
        by_name = not claims_torch_namespaces(state.candidate.text)  # a source can name kernels like torch's
        state.trace_summary, found = analyse(state.traced_calls, declared, state.config.policy, by_name)
        state.add_findings(found)
    if state.trace_problems:
        problems = {"problems": state.trace_problems}
        state.add_findings([finding("KJ-R030", "warning", f"kernel trace: {state.trace_problems[0]}", problems)])
    asked = len(state.traced_calls) + len(state.trace_problems)
    state.capabilities["profiler_trace"] = Capability(
        status="available" if asked and not state.trace_problems else "unavailable",
        required=True,
        detail=(
            f"{len(state.traced_calls)} call(s) traced at random hidden trials"
            if asked and not state.trace_problems
            else ("; ".join(state.trace_problems)[:500] if state.trace_problems else "no call was traced")
        ),
    )
