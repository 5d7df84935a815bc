"""compute-sanitizer's hook-up in a judgment: whether it runs (sanitize.decide), and where it does, one call
of the candidate under each tool in a sandboxed worker of its own at the smallest shape it was right at
(sanitize.py runs the tools and reads their reports; docs/sanitizer.md). Reports in the candidate's own
kernels are findings; racecheck's, memcheck's and synccheck's fail it (`race`, `memory_error`). The stage returns
what it found (results.SanitizerRun); the correctness stage files it and fails the candidate on its failure.
"""

from __future__ import annotations

import time
from typing import Any

from kerneljudge import protocol
from kerneljudge.judgment import sanitizer as sanitize
from kerneljudge.judgment.stages.build import inputs_text, load_reference
from kerneljudge.judgment.stages.calls import reference_trial
from kerneljudge.judgment.stages.failures import JudgeFailed, TaskUnsupported
from kerneljudge.judgment.stages.results import SanitizerRun
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.results.verdict import Capability
from kerneljudge.tasks.shapes import describe_shape, plain


def decision(state: JudgmentState) -> sanitize.Decision:
    """Whether compute-sanitizer runs for this judgment, and the capability that says so."""
    path = sanitize.sanitizer_path() if state.build.device == "cuda" else None
    return sanitize.decide(state.config, state.build.device, state.build.declared_kernels, state.candidate.text, path)


def run(state: JudgmentState, decided: sanitize.Decision) -> SanitizerRun:
    """One call of the candidate under each compute-sanitizer tool, each in a sandboxed worker of its own,
    at the smallest shape it was right at (sanitize.py, docs/sanitizer.md): reports in its own kernels are
    findings, and racecheck's, memcheck's and synccheck's are a failure (`race`, `memory_error`). Where the tools
    do not run, the capability `decided` says why."""
    path = decided.path
    if not decided.run or path is None:
        return SanitizerRun(decided.capability)
    shape = sanitize.smallest_shape(state.build.family, state.checked.shapes)
    where = describe_shape(shape) if shape else "the public shape"
    state.progress(f"compute-sanitizer: one call at {where} under {', '.join(decided.tools)}")
    began, channels = time.monotonic(), state.workers["candidate"].channels
    load = protocol.Load(seed=state.config.public_seed, task=inputs_text(state, shape))
    try:
        init_placed = channels.access.put("candidate_in", load_reference(state, shape))
    except (JudgeFailed, TaskUnsupported) as exc:  # it ran there before: the tools are not run, and say why
        return SanitizerRun(Capability(status="degraded", required=False, detail=str(exc)))

    def make_inputs() -> tuple[protocol.Call, Any]:
        inputs, _ = reference_trial(state, state.source.randrange(2**32 - 1), False, {"kind": "standard"}, shape)
        made = inputs.get("made") if isinstance(inputs, dict) else None
        return protocol.Call(made=made, call_seed=state.calls.call_seed), ([], {}) if made is not None else inputs

    timeout_s = state.config.sanitizer_timeout_s
    checked = state.workers["candidate"]
    start = sanitize.starter(
        path,
        state.candidate.text,
        state.limits,
        state.sandbox,
        state.gpu,
        channels,
        timeout_s,
        checked,
        state.build.device,
    )
    runs, workers = sanitize.run_tools(start, load, init_placed, make_inputs, timeout_s, decided.tools)
    cap = state.config.log_cap_bytes
    logs = {f"candidate_{t}": sanitize.kept_log(w, cap) for t, w in workers.items()}
    declared = {str(d["name"]) for d in state.build.declared_kernels if d.get("kind") in ("triton", "cuda")}
    found, kept, failure, capability = sanitize.conclude(runs, declared, state.config.policy, path, where)
    record = {
        **kept,
        "reason": decided.reason,
        "tools_run": list(decided.tools),
        "shape": {name: plain(tree) for name, tree in shape.items()} if shape else None,
        "seconds": round(time.monotonic() - began, 3),
    }
    return SanitizerRun(capability, record, tuple(found), failure, logs)
