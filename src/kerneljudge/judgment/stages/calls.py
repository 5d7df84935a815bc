"""One call on each side, as every stage makes them: the reference's trial (its inputs made from a seed, its
outputs and the oracle's kept in its worker, the call seed both sides start from drawn here), the candidate's
call (its runtime evidence read, its outputs' structure checked against the reference's signature), and the
reference worker's comparison of the two by the tolerances chosen for each output's dtype.
"""

from __future__ import annotations

from typing import Any

import torch

from kerneljudge import protocol
from kerneljudge.checks.catalog import finding
from kerneljudge.checks.correctness import Tolerance, tolerance_for
from kerneljudge.checks.outputs import check_received, check_structure, expected_bytes, signature_items
from kerneljudge.checks.runtime import call_findings
from kerneljudge.judgment.stages.build import task_failed
from kerneljudge.judgment.stages.failures import CandidateFailed, JudgeFailed, error_failure
from kerneljudge.judgment.stages.integrity import keep_trace
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.workers import ask, ask_candidate, candidate_step
from kerneljudge.protocol import limits, wire
from kerneljudge.results.verdict import Capability, Failure, Finding


def draws_random_note() -> Finding:
    """KJ-T002: the reference draws random numbers in its forward."""
    return finding(
        "KJ-T002",
        "info",
        "the reference draws random numbers in its forward: both sides' calls start from the same random state, "
        "so a candidate that draws them the same way matches; timed calls' values cannot be checked",
    )


def reference_trial(
    state: JudgmentState, seed: int, oracle: bool, distribution: dict[str, Any], shape: dict[str, Any] | None = None
) -> tuple[Any, dict[str, Any]]:
    """One trial in the reference worker: its inputs go straight to the candidate's inbox, or are made
    again there (`JudgmentState.inputs_made`); its outputs and the oracle's stay in the worker (slot "trial").
    The inputs (their (tree, descriptions), or what the candidate's worker needs to make them: {"made": ...})
    and the distribution."""
    state.calls.call_seed = state.source.randrange(2**31 - 1)  # the random state both sides' calls start from
    trial = protocol.Trial(
        seed=seed,
        call_seed=state.calls.call_seed,
        oracle=oracle,
        variant=distribution,
        slot="trial",
        inputs_to="made" if state.inputs_made(shape) else "candidate",
        on_device=not state.native,  # KernelBench makes inputs on the host: `off` does too
    )
    ran, _ = ask(state, "reference", trial)
    if not isinstance(ran, protocol.TrialRun):
        task_failed(state, ran, f"the reference failed on seed {seed}")
    state.calls.signature = dict(ran.signature)
    state.calls.task_check = ran.task_check
    if ran.draws_random and not state.calls.draws_random:
        state.calls.draws_random = True
        state.add_findings([draws_random_note()])
    values = [item for item in signature_items(state.calls.signature) if "dtype" not in item]
    if values:
        raise JudgeFailed(f"the reference returns a {values[0].get('type')}, not a tensor: nothing to compare")
    if oracle:
        state.calls.oracle_dtype = ran.oracle_dtype
    state.calls.trial_screen = ran.screen
    state.calls.reference_evidence = ran.evidence
    inputs = {"made": ran.made} if ran.made is not None else (ran.inputs, ran.input_tensors)
    return inputs, dict(ran.variant or distribution)


def call_candidate(
    state: JudgmentState,
    inputs: Any,
    phase: str,
    reuse: bool = False,
    trace: bool = False,
    keep_inputs: bool = False,
    perturb: dict[str, Any] | None = None,
) -> protocol.Output | None:
    """One candidate call on the inputs the reference wrote to its inbox or that its worker makes again
    ({"made": ...}), or, for a canary, on the previous storage; maybe traced. Its answer, whose outputs
    lie in its outbox, checked against the signature; None when its worker could not make the inputs
    (they are shipped from then on: the trial must be run again)."""
    size = expected_bytes(state.calls.signature)
    worker = state.workers["candidate"]
    made = inputs.get("made") if isinstance(inputs, dict) else None
    call = protocol.Call(
        made=made,
        reuse_inputs=reuse,
        poison_bytes=2 * size,
        reread_s=state.config.reread_delay_s,
        trace=trace,
        call_seed=state.calls.call_seed,
        keep_inputs=keep_inputs,  # the next call is the canary: it reuses these inputs' storage
        perturb=perturb,  # a perturbed replay's conditions (worker/correctness/perturb.py)
    )
    placed = ([], {}) if made is not None else inputs
    output, _ = ask_candidate(state, call, phase, placed=placed, fetch=(), max_bytes=2 * size + (1 << 20))
    if isinstance(output, protocol.Error):
        raise CandidateFailed(error_failure(output, phase))
    if isinstance(output, protocol.InputsDiffer) and made is not None:
        state.inputs = {**state.inputs, "shipped": phase, "why": output.detail[:500]}
        return None
    # (an `inputs_differ` for inputs it was not asked to make: no evidence, and no output described, below)
    called = output if isinstance(output, protocol.Output) else None
    note_poisoning(state, called.poisoned_bytes if called else None, call.poison_bytes, phase)
    evidence = called.evidence if called else None
    if not state.native:
        state.add_findings(
            call_findings(
                evidence,
                state.calls.reference_evidence,
                phase,
                state.config.policy,
                state.build.inputs_writable,
                busy_read=perturb is None or perturb.get("kind") not in limits.HOST_BUSY_KINDS,
            )
        )
    if trace:
        keep_trace(state, evidence, phase)
    problem = check_structure(
        output, state.calls.signature, state.build.device or "cpu", exact=not state.calls.task_check
    )
    if problem is None and called is not None:
        problem = check_received(called, called.unreadable)
    if problem is None:
        candidate_step(lambda: worker.described(output, ["values"], 2 * size + (1 << 20)), phase=phase)
    if problem is not None:
        raise CandidateFailed(Failure(kind=problem.kind, phase=phase, summary=problem.summary))  # type: ignore[arg-type]
    assert called is not None  # (an answer that describes no output has its problem above)
    return called


def note_poisoning(state: JudgmentState, poisoned: Any, asked: int, phase: str) -> None:
    """Where the candidate's worker poisoned less memory before a call than asked (the device could not hold it:
    worker/candidate.py `poison`), the record's capability `poisoned_memory` says so, at the first such call. The
    figure is the worker's word, like the poisoning itself (in the candidate's process): a note, no verdict rests
    on it."""
    if isinstance(poisoned, bool) or not isinstance(poisoned, int) or not 0 <= poisoned < asked:
        return
    state.capabilities.setdefault(
        "poisoned_memory",
        Capability(
            status="degraded",
            required=False,
            detail=f"{poisoned / 2**30:.2f} of {asked / 2**30:.2f} GiB poisoned before the call of {phase}: what the "
            "device's memory held (an output left unwritten there shows what the memory held before, not NaN)",
        ),
    )


def tolerances(state: JudgmentState, native: bool = False) -> list[Tolerance]:
    """The tolerance of each output, by its dtype (docs/tolerances.md), recorded as it is chosen."""
    chosen = []
    for item in signature_items(state.calls.signature):
        tol = tolerance_for(getattr(torch, item["dtype"]), native=native)
        state.calls.tolerances[item["dtype"]] = {
            "name": tol.name,
            "atol": tol.atol,
            "rtol": tol.rtol,
            "ref_error_factor": tol.ref_error_factor,
        }
        chosen.append(tol)
    return chosen


def tolerance_specs(state: JudgmentState, native: bool = False) -> list[dict[str, Any]]:
    """The tolerances of `tolerances` as a comparison request carries them."""
    return [
        {"atol": t.atol, "rtol": t.rtol, "ref_error_factor": t.ref_error_factor, "name": t.name}
        for t in tolerances(state, native=native)
    ]


def compare(state: JudgmentState, slot: str, cand: protocol.Described, method: str, keep: bool = False) -> list:
    """The reference worker's comparison of the candidate's outputs (`cand`, its answer: the outputs lie in its
    outbox, under `values` for a call, `captured` for a kept or rechecked one) with slot `slot`; a list of results,
    one per output."""
    request = protocol.Compare(
        slot=slot,
        method=method,
        keep=keep,
        task_check=state.calls.task_check,
        container=state.calls.signature.get("container", "Tensor"),
        tolerances=tolerance_specs(state, native=method == "native"),
    )
    names = wire.tensor_names(cand.tree)
    placed = (cand.tree, {n: (cand.tensors or {})[n] for n in names})
    compared, _ = ask(state, "reference", request, placed=placed)
    if not isinstance(compared, protocol.Compared):
        said = f"{compared.exc_type}: {compared.message}" if isinstance(compared, protocol.Failed) else compared.kind
        raise JudgeFailed(f"the reference worker could not compare the outputs: {said}")
    state.calls.last_task_check = compared.task_check
    state.calls.last_digests = compared.digests
    return list(compared.results)
