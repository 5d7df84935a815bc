"""KernelBench's own evaluation, `--mode off`, as its own path: what it does and what it leaves out.

KernelBench's `eval_kernel_against_ref` runs its public trials (seeds drawn from 42, as its harness draws
them), the task's inputs made on the host, each output checked by `torch.allclose` against the reference at
atol = rtol = 1e-2, and times the candidate by its own method. This path does the same and nothing more: no
hidden trials, no float64 oracle, no replays or canary, no kernel traces, no hidden shapes, no
compute-sanitizer, no timing shapes, and no `verified` (a native PASS means "correct by KernelBench's
check", never that the judge vouches for it). The stages they share ask `state.native` (judgment/stages/state.py),
never the mode.
"""

from __future__ import annotations

from kerneljudge.checks.screening import degenerate_outputs
from kerneljudge.judgment import hidden_plan
from kerneljudge.judgment.gate import POOL_SETS
from kerneljudge.judgment.stages.calls import call_candidate, reference_trial
from kerneljudge.judgment.stages.results import CorrectnessRun
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.trials import check_trial

STANDARD = {"kind": "standard"}


def run_correctness(state: JudgmentState, result: CorrectnessRun) -> CorrectnessRun:
    """KernelBench's public trials, in its order, each compared natively; the first miss fails the candidate
    (`result` says whether all passed and keeps the trials' sets for the timing pool: nothing is replayed or
    sanitized here)."""
    config = state.config
    state.plan = hidden_plan.draw(config.public_seed, config.public_trials, 0, 0, True, False, state.source)
    screens = []
    for index, trial in enumerate(state.plan.trials):
        state.progress(f"correctness trial {index + 1}/{len(state.plan.trials)} (public, KernelBench's check)")
        while True:  # twice at most: once shipped, call_candidate always answers
            inputs, _ = reference_trial(state, trial.seed, oracle=False, distribution=STANDARD)
            cand = call_candidate(state, inputs, phase=f"trial {index}", reuse=False, trace=False, keep_inputs=False)
            if cand is not None:
                break
        check_trial(state, index, trial.kind, trial.seed, cand, None, native=True)
        if state.calls.trial_screen is not None:
            screens.append(state.calls.trial_screen)
        result.timing_sets = (result.timing_sets + [{"seed": trial.seed, "variant": STANDARD}])[-POOL_SETS:]
    state.add_findings(degenerate_outputs(screens))
    result.passed = True
    return result
