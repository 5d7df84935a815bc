"""The reference's own replay (task screening, KJ-T003): once per judgment, at the first trial, the reference
worker runs the reference again on that trial's inputs, made anew from its seed, from another random state than
the call seed both sides' calls start from, and sets each output against its first run and the oracle
(worker/reference.py `rerun`, checks/reference_replay.py). An output that moves beyond rounding while the
comparison still passes the moved output shows a task whose reference is random past what the comparison can
see: it cannot verify any candidate (checks/screening.py). What it guarantees and costs: docs/tolerances.md.
"""

from __future__ import annotations

from typing import Any

from kerneljudge import protocol
from kerneljudge.checks.screening import nondeterministic_reference
from kerneljudge.judgment.stages.build import task_failed
from kerneljudge.judgment.stages.calls import tolerance_specs
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.workers import ask

SEED_RANGE = 2**31 - 1  # the call seeds' range (judgment/stages/calls.py)


def other_seed(call_seed: int | None) -> int:
    """A random state other than the trial's: the call seed's neighbour, so that no draw of the judgment's
    source is spent (the plan and every later call seed stay as they were)."""
    return ((call_seed or 0) + 1) % SEED_RANGE


def rerun_reference(state: JudgmentState, seed: int, distribution: dict[str, Any], inputs: Any) -> None:
    """The reference again on trial `seed`'s inputs (under `distribution`, as the trial made them) from another
    random state, its outputs still in the reference worker's slot "trial"; KJ-T003 from the figures. Once per
    judgment, in the hardened modes (`off` runs KernelBench's evaluation, nothing of task screening), on inputs
    the candidate's worker makes again (`inputs`, as judgment/stages/calls.reference_trial returns them): their
    fingerprint is what tells the rerun's inputs identical to the trial's."""
    made = inputs.get("made") if isinstance(inputs, dict) else None
    if state.native or state.calls.reference_rerun is not None or not isinstance(made, dict):
        return
    rerun = protocol.Rerun(
        seed=seed,
        call_seed=other_seed(state.calls.call_seed),
        tolerances=tolerance_specs(state),
        fingerprint=list(made["fingerprint"]),
        variant=distribution,
        slot="trial",
        on_device=True,  # as the trial made them (judgment/stages/calls.reference_trial)
    )
    reran, _ = ask(state, "reference", rerun)
    if not isinstance(reran, protocol.Reran):
        task_failed(state, reran, f"the reference failed on seed {seed} run again")
    # Empty where the inputs made again were not the trial's (nothing to set side by side): once is enough.
    state.calls.reference_rerun = [] if reran.inputs_differ else list(reran.outputs)
    state.add_findings(nondeterministic_reference(state.calls.reference_rerun))
