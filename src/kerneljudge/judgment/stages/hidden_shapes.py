"""The hidden-shape trials: one trial at each of a few shapes of the task's family, drawn by the hidden plan,
both models built again for it. A family the task declares is the task's word (a failure there is the
candidate's); one derived from its size globals (worker/correctness/derived.py, at values the plan draws:
tasks/size_classes.py) is the judge's reading, where the reference failing skips the shape, and a candidate
that raises where the reference built and ran fails `shape_refused` (checks/refusals.py).
"""

from __future__ import annotations

from typing import Any

from kerneljudge import protocol
from kerneljudge.checks.refusals import refusal_failure, refusal_finding, refused
from kerneljudge.judgment.stages.build import build_candidate, load_reference
from kerneljudge.judgment.stages.calls import call_candidate, reference_trial
from kerneljudge.judgment.stages.failures import CandidateFailed, JudgeFailed, TaskUnsupported
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.trials import check_trial
from kerneljudge.judgment.stages.workers import ask, let_others_measure
from kerneljudge.results.verdict import Capability
from kerneljudge.tasks.shapes import MalformedFamily, describe_shape, read_family


def run(state: JudgmentState) -> None:
    """One trial at each of a few hidden shapes of the task's family, both models built again for it.

    A kernel that only handles the public shape (its width baked in, a tail it never masks) fails here.
    The shapes are drawn now, in the parent; the candidate learns one only from its new init inputs
    and the inputs it is called with.
    """
    count = state.config.shape_trials
    why_none = derive_family(state) if state.build.family is None and count else ""
    if state.build.family is None or count == 0:
        state.capabilities["hidden_shapes"] = Capability(
            status="unavailable",
            required=False,
            detail="no hidden shapes asked for (shape_trials = 0)" if state.build.family is not None else why_none,
        )
        return
    shapes = state.plan.shapes(state.build.family, count)
    refusals: list[dict[str, str]] = []
    skipped: list[str] = []
    try:
        for number, shape in enumerate(shapes):
            let_others_measure(state)
            index, label, seed = len(state.checked.trials), describe_shape(shape), state.plan.shape_seed(number)
            state.progress(f"correctness at a hidden shape ({label})")
            if state.build.family.derived:
                derived_shape_trial(state, index, shape, seed, refusals, skipped)
                continue
            build_candidate(state, load_reference(state, shape), shape)
            inputs, _ = reference_trial(state, seed, oracle=True, distribution={"kind": "standard"}, shape=shape)
            cand = call_candidate(state, inputs, phase=f"shape trial {index} at {label}")
            check_trial(state, index, "shape", seed, cand, {"kind": "standard"}, shape)
    finally:  # a wrong answer after a refusal fails as such, the refusals kept as evidence
        if refusals:
            state.add_findings([refusal_finding(refusals)])
        state.capabilities["hidden_shapes"] = Capability(
            status="available" if len(shapes) > len(skipped) else "unavailable",
            required=False,
            detail=state.build.family.trials_detail(len(shapes), len(refusals), skipped),
        )
    if refusals:  # every drawn shape tried first, so that the failure names each one refused
        raise CandidateFailed(refusal_failure(refusals))


def derive_family(state: JudgmentState) -> str:
    """A family derived from the task's size globals (worker/correctness/derived.py), asked of the reference worker for
    a task that declares none; why there is none, where there is none. The judge's own reading of the
    task: where it cannot be had, the task is judged at its public shape, as before."""
    state.progress("deriving a shape family from the task's size globals")
    derived: protocol.Answer | None = None
    # The values tried are drawn now, by size class, and recorded in the plan; where the reference worker
    # named no integers, it tries its own fixed ones.
    proposals = state.plan.propose_sizes(state.build.size_integers) if state.build.size_integers else None
    try:
        derived, _ = ask(state, "reference", protocol.Derive(proposals=proposals))
        state.build.family = read_family(derived.family) if isinstance(derived, protocol.Derived) else None
    except (JudgeFailed, MalformedFamily):
        state.build.family = None
    if state.build.family is not None and not state.build.family.derived:
        state.build.family = None
    if isinstance(derived, protocol.Derived) and derived.declared:
        return "the task declares that it has no shape but the public one (SHAPE_FAMILY = [])"
    return (
        "the task declares no shape family (SHAPE_FAMILY or get_shape_family()) and none could be derived "
        "from its size globals: correct at its public shape only"
    )


def derived_shape_trial(
    state: JudgmentState,
    index: int,
    shape: dict[str, Any],
    seed: int,
    refusals: list[dict[str, str]],
    skipped: list[str],
) -> None:
    """One trial at a shape derived from the task's size globals (worker/correctness/derived.py): the judge's reading
    of the task, not the task's word. Where the reference itself fails there, the shape is skipped; where
    it builds and runs, a candidate that raises is a refusal (checks/refusals.py), collected in `refusals`
    for the stage's `shape_refused` failure; a wrong answer fails at once."""
    label = describe_shape(shape)
    try:
        init_inputs = load_reference(state, shape)
    except (JudgeFailed, TaskUnsupported) as exc:
        skipped.append(f"{label}: {str(exc)[:300]}")
        return
    refusal: CandidateFailed | None = None
    try:
        build_candidate(state, init_inputs, shape)
    except CandidateFailed as exc:
        if not refused(exc.failure):
            raise
        refusal = exc
    try:  # the reference runs here too (its family was tried on the meta device), or the shape is skipped
        inputs, _ = reference_trial(state, seed, oracle=True, distribution={"kind": "standard"}, shape=shape)
    except (JudgeFailed, TaskUnsupported) as exc:
        skipped.append(f"{label}: {str(exc)[:300]}")
        return
    try:
        if refusal is not None:
            raise refusal
        cand = call_candidate(state, inputs, phase=f"shape trial {index} at {label}")
    except CandidateFailed as exc:
        if not refused(exc.failure):
            raise
        refusals.append({"shape": label, "phase": exc.failure.phase, "error": exc.failure.summary[:500]})
        return
    check_trial(state, index, "shape", seed, cand, {"kind": "standard"}, shape)
