"""The correctness stage: the hidden plan drawn once from the judgment's source (plan.py), its trials run in
order (the canary that reuses storage, the traced calls, the replays), the reference's own replay at the first
(reference_replay.py), each trial's outputs compared with the oracle and recorded (trials.py), the screen for
degenerate outputs, then the hidden shapes and compute-sanitizer; with `timing_ahead`, the timing pair is made
ready beside them from the first trial that passed (judgment/stages/timing_ahead.py). The first miss fails the
candidate. `off`, KernelBench's own evaluation, takes its own path (native.py). The stage fills the result it is given
(results.CorrectnessRun), so that the replays and the sanitizer's run before a failure reach the record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kerneljudge.checks.screening import degenerate_outputs
from kerneljudge.judgment import hidden_plan
from kerneljudge.judgment import sanitizer as sanitize
from kerneljudge.judgment.gate import POOL_SETS
from kerneljudge.judgment.stages import hidden_shapes, native, sanitizer, timing_ahead
from kerneljudge.judgment.stages.calls import call_candidate, reference_trial
from kerneljudge.judgment.stages.failures import CandidateFailed
from kerneljudge.judgment.stages.reference_replay import rerun_reference
from kerneljudge.judgment.stages.replays import replay
from kerneljudge.judgment.stages.results import CorrectnessRun, Replays, SanitizerRun
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.trials import check_trial
from kerneljudge.judgment.stages.workers import let_others_measure


def run(
    state: JudgmentState, sanitizer_decision: Callable[[], sanitize.Decision], result: CorrectnessRun
) -> CorrectnessRun:
    """Draw the plan and run its trials; then the hidden shapes and compute-sanitizer; `result` filled as they go.
    (`off` is KernelBench's own evaluation: judgment/stages/native.py.)"""
    if state.native:
        return native.run_correctness(state, result)
    config = state.config
    state.plan = hidden_plan.draw(
        config.public_seed,
        config.public_trials,
        config.hidden_trials,
        config.shape_trials,
        False,
        state.build.device == "cuda",
        state.source,
        # the timing pool: fresh draws (judgment/stages/timing.pool_sets)
        timing_sets=POOL_SETS if config.timing else 0,
    )
    plan, screens = state.plan, []
    timing_ahead.begin(state)  # where asked: the timing pair greeted and loaded beside the trials
    for index, trial in enumerate(plan.trials):
        let_others_measure(state)  # a lane waiting to measure waits for one trial of this one, not for all
        kind, seed = trial.kind, trial.seed
        state.progress(f"correctness trial {index + 1}/{len(plan.trials)} ({kind})")
        call = {
            "phase": f"trial {index}",
            "reuse": index == plan.canary_at,
            "trace": index in plan.trace_at,
            "keep_inputs": index + 1 == plan.canary_at,
        }
        replayed = result.replays if index in plan.replay_at else None
        distribution = run_trial(state, index, kind, seed, trial.distribution, call, replayed)
        if state.calls.trial_screen is not None:
            screens.append(state.calls.trial_screen)
        if distribution.get("kind") == "standard" or "rejected" in distribution:
            result.timing_sets = (result.timing_sets + [{"seed": seed, "variant": distribution}])[-POOL_SETS:]
            # where asked, once: the pair's pool staged beside the trials that follow
            timing_ahead.start(state, result.timing_sets)
    state.add_findings(degenerate_outputs(screens))
    hidden_shapes.run(state)
    decided = sanitizer_decision()
    state.capabilities["compute_sanitizer"] = decided.capability  # as decided, should its run end in an error
    result.sanitizer = sanitizer.run(state, decided)
    file_sanitizer_run(state, result.sanitizer)
    result.passed = True
    return result


def file_sanitizer_run(state: JudgmentState, ran: SanitizerRun) -> None:
    """compute-sanitizer's run among the judgment's capabilities, findings and logs; its failure the candidate's."""
    state.closed_logs.update(ran.logs)
    state.capabilities["compute_sanitizer"] = ran.capability
    state.add_findings(list(ran.findings))
    if ran.failure is not None:
        raise CandidateFailed(ran.failure)


def run_trial(
    state: JudgmentState,
    index: int,
    kind: str,
    seed: int,
    distribution: dict[str, Any],
    call: dict[str, Any],
    replayed: Replays | None,
) -> dict[str, Any]:
    """One trial: the reference's run, the candidate's call, the comparison, and the replay where one is
    due (`replayed`: the judgment's replays, which it adds to); the distribution the inputs had. Run again, its
    inputs shipped, where the candidate's worker could not make them as the reference did, at the call or at the
    replay (`call_candidate`: None)."""
    while True:  # twice at most: once shipped, call_candidate always answers
        inputs, used = reference_trial(state, seed, oracle=True, distribution=distribution)
        rerun_reference(state, seed, used, inputs)  # once per judgment, at the first trial: is the task itself random?
        cand = call_candidate(state, inputs, **call)
        if cand is None:
            continue
        check_trial(state, index, kind, seed, cand, used, keep=replayed is not None)
        if replayed is None or replay(state, replayed, index, inputs, keep_inputs=call["keep_inputs"]):
            return used
        state.checked.trials.pop()  # its record is the second run's
