"""Replays of a trial (the plan's `replay_at`): the candidate's call again on the same inputs, compared with
its first answer; at one trial on CUDA (the plan's `perturbed_at`) again under each perturbation, the GPU
loaded from another stream and another launch order (worker/perturb.py). A difference beyond rounding fails
as `nondeterministic`; one at rounding level is KJ-C001.
"""

from __future__ import annotations

from typing import Any

from kerneljudge.checks.catalog import finding
from kerneljudge.stages.calls import call_candidate, compare
from kerneljudge.stages.failures import CandidateFailed
from kerneljudge.stages.state import JudgmentState
from kerneljudge.stages.timing import l2_flush_bytes
from kerneljudge.verdict import Failure


def perturbations(hello: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The perturbed replays of one trial on CUDA (worker/perturb.py): the GPU loaded by the worker's own
    matrix products on another stream for about three times the call's length, and another launch order (the
    L2 flushed and a 1 ms delay kernel queued ahead of the call)."""
    return [
        {"kind": "gpu_load", "side": 2048, "factor": 3.0},
        {"kind": "launch_order", "flush_bytes": l2_flush_bytes(hello, native=False), "delay_ms": 1.0},
    ]


def replay(state: JudgmentState, index: int, inputs: Any, keep_inputs: bool = False) -> bool:
    """The trial's call again on the same inputs, and at one trial on CUDA (the plan's `perturbed_at`) again under
    each perturbation (`perturbations`); False where its worker could not make them again (the trial is
    run again, shipped)."""
    planned = state.plan.perturbed_at if state.plan is not None else None
    perturbed = perturbations(state.hello) if index == planned else []
    return all(replay_once(state, index, inputs, keep_inputs, p) for p in [None, *perturbed])


def replay_once(
    state: JudgmentState, index: int, inputs: Any, keep_inputs: bool, perturb: dict[str, Any] | None
) -> bool:
    """One replay: a difference beyond rounding fails as `nondeterministic`, one at rounding level is KJ-C001."""
    if not state.draws_random:  # another random state: what differs then is the kernel's own nondeterminism
        state.call_seed = state.source.randrange(2**31 - 1)
    phase = f"replay of trial {index}" + (f" under {perturb['kind']}" if perturb else "")
    again = call_candidate(state, inputs, phase=phase, keep_inputs=keep_inputs, perturb=perturb)
    if again is None:
        return False
    results = compare(state, "trial", again, "replay")
    worst = next((r for r in results if not r["passed"]), None) or max(
        results, key=lambda r: r["metrics"].get("differing_elements", 0)
    )
    entry = {"trial": index, "summary": worst["summary"], **worst["metrics"]}
    if perturb:  # what the worker reports of it: a perturbation it could not set up is said so
        done = again.get("perturbed") if isinstance(again.get("perturbed"), dict) else {}
        entry["perturbation"] = perturb["kind"] if "error" not in done else f"not applied: {done['error']}"[:300]
    replays = (state.replay or {}).get("trials", []) + [entry]
    state.replay = {"trials": replays, "bitwise_identical": all(r["differing_elements"] == 0 for r in replays)}
    if not worst["passed"]:
        raise CandidateFailed(Failure(kind="nondeterministic", phase=phase, summary=worst["summary"]))
    if worst["metrics"].get("differing_elements"):
        state.findings.append(finding("KJ-C001", "info", evidence={"trial": index, **worst["metrics"]}))
    return True
