"""The timing pair made ready ahead (`JudgeConfig.timing_ahead`): while correctness still runs its trials, hidden
shapes and the sanitizer, a thread greets and loads the fresh timing pair, stages its pool and makes each side's first
call, so that the timing stage is the samples and their checks (on an H200, 2026-12-04, judge 0.3.3, the pair's load,
the pool's staging and the candidate's first call, where Triton compiles, were 1.0-1.3 s of a 1.3-1.6 s stage).

What it changes for the candidate, and why that is safe (docs/batch.md, "Timing ahead"):
- Its timing worker is loaded while its checked worker still runs. Each is confined on its own (docs/security.md:
  no network, a private /tmp, its own uid and PID namespace), and the pool is made of fresh hidden draws
  (`HiddenPlan.timing_seeds`, as in every hardened judgment since 0.3.4), so that nothing the checked worker
  saw or kept answers a timed call, whatever could pass between them. The checked pair is gone before the first
  sample, as before.
- Each side's first call is made before the calibration, as with `timing_warm`.

The thread starts as the trials begin (`begin`) and greets and loads the pair, which needs no trial; it stages the
pool and makes the first calls once the first trial of the task's own distribution has passed (`start`: the pool is
known from the plan, the outputs' signature at the public shape from that trial). On the H200 a thread started
after the last trial (0.9-1.2 s long) outlasted what followed, and the stage waited 0.3-0.7 s for it; on an H100 one
started after the first trial spent 1.3-1.9 s greeting and loading, and the stage waited 0.8-1.8 s (2026-12-05). It
works under the lane gate's `work_beside` hold, taken by the stage that starts it, while it loads and again while it
stages: no other lane measures meanwhile; loaded and waiting for a trial, it holds nothing. Its round
trips count in `stages_s` under `ahead.*`, its own wall time in `ahead`, and the timing stage's wait for it in
`timing.ahead`. On the GPU it runs only where the two pairs' estimated device memory, side by side, is at most
an `AHEAD_SHARE`-th of the GPU (gate.ahead_fits); a batch then reserves both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kerneljudge.judgment.stages.build import load_reference, reference_hello, start_candidate
from kerneljudge.judgment.stages.results import voiding_codes
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.timed_calls import Ready, make_ready
from kerneljudge.judgment.stages.timing import cached_sides, flush_of, pool_sets
from kerneljudge.judgment.stages.workers import add_seconds, closed, work_beside
from kerneljudge.results.verdict import WorkerLog


class Overlay:
    """An object seen through some attributes of its own: those in `own` are read and set here, every other is the
    object's own."""

    def __init__(self, target: Any, **own: Any) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_own", own)

    def __getattr__(self, name: str) -> Any:
        own = object.__getattribute__(self, "_own")
        return own[name] if name in own else getattr(object.__getattribute__(self, "_target"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        own = object.__getattribute__(self, "_own")
        if name in own:
            own[name] = value
        else:
            setattr(object.__getattribute__(self, "_target"), name, value)


def pair_view(state: JudgmentState, pair: dict[str, Any]) -> Any:
    """The judgment's state as the thread that readies the timing pair sees it: the booting pair as its workers,
    its round trips counted under `ahead`, and the outputs' signature at the public shape as a passed trial left it
    (the hidden shapes, beside, set theirs); every other attribute read and set is the judgment's own."""
    calls = Overlay(state.calls, signature=dict(state.calls.signature))
    return Overlay(state, workers=pair, stage="ahead", calls=calls)


class TimingAhead:
    """The thread that readies the timing pair, and what it made: `ready` once the pool is staged (None where
    only the loads were made ahead: a task with timing shapes builds and stages at each of them)."""

    def __init__(self, state: JudgmentState) -> None:
        self.pair = state.booting
        self.view: Any = pair_view(state, self.pair)
        self.ready: Ready | None = None
        self.loaded = False
        self.failed: list[Exception] = []  # raised again where it is joined, as the same steps in line would raise
        self.seconds = 0.0
        self.thread: threading.Thread | None = None
        self.taken = False
        # Set by `go` once a trial has passed (with the pool's plan, or None: the loads only), or by `join` and
        # `stop`: the thread, loaded, waits for it before it stages.
        self.going = threading.Event()
        self.plan: tuple[Any, ...] | None = None

    def run(self, state: JudgmentState, release: Callable[[], None]) -> None:
        """Greet and load the pair, then release the lane's hold and wait for `go`; with a plan (`plan_of`), stage
        its pool and make each side's first call, holding the lane's work again (no other lane measures)."""
        began = time.monotonic()
        try:
            reference_hello(self.view)
            start_candidate(self.view, load_reference(self.view))
            self.loaded = True
            release()  # loaded and idle: other lanes may measure between the trials again
            self.going.wait()
            if self.plan is not None:
                with state.gate.work_beside():
                    self.ready = make_ready(self.view, *self.plan, warm=True)
        except Exception as exc:
            self.failed.append(exc)
        self.seconds = time.monotonic() - began

    def go(self, signature: dict[str, Any], plan: tuple[Any, ...] | None) -> None:
        """A trial of the task's own distribution has passed: its outputs' signature, and the pool to stage."""
        if not self.going.is_set():
            self.view.calls.signature = signature
            self.plan = plan
            self.going.set()

    def join(self, state: JudgmentState) -> bool:
        """Wait for the thread (the wait counts in `stages_s["timing.ahead"]`) and raise what it raised; whether
        the pair was loaded (its pool staged where `ready` says so)."""
        began = time.monotonic()
        self.going.set()  # where no trial said go (none of the task's own distribution passed): the loads only
        if self.thread is not None:
            self.thread.join()
        add_seconds(state, "timing.ahead", time.monotonic() - began)
        if self.failed:
            raise self.failed[0]
        return self.loaded

    def take(self) -> Ready | None:
        """The pool staged ahead, for the first measurement only (a pair started after a failed graph capture
        stages its own)."""
        ready, self.taken = (None if self.taken else self.ready), True
        return ready

    def stop(self, state: JudgmentState) -> None:
        """As the judgment ends: where it ends before timing, the thread ended by killing its workers, so that a
        request it is waiting on fails at once (the pair is closed with the others, its logs kept); the
        thread's own seconds into `stages_s["ahead"]`."""
        if self.thread is not None and self.thread.is_alive():
            for worker in self.pair.values():
                worker.kill()
            self.going.set()  # a thread loaded and waiting for a trial that never came
            self.thread.join()
        state.stages_s["ahead"] = round(self.seconds, 3)


def begin(state: JudgmentState) -> None:
    """Start greeting and loading the booting timing pair in a thread, where asked and where it fits (on the GPU:
    `state.admission.ahead_fits`, from the task's footprint), as the trials begin: the loads need no trial (on an
    H100 the thread, started after the first trial, spent 1.3-1.9 s greeting and loading and the timing stage waited
    0.8-1.8 s for it, 2026-12-05). Its pool is staged once a trial has passed (`start`)."""
    if not state.readies_ahead or not state.booting or state.ahead is not None:
        return
    if voiding_codes(state.findings, state.config):
        return  # the verdict is FAIL already and nothing will be timed (results.TimingRun.fails_closed)
    if state.build.device == "cuda" and not state.admission.ahead_fits:  # the record's `timing.ahead` says why
        return
    ahead = state.ahead = TimingAhead(state)
    # Counted as this lane's work while the pair loads (and again while it stages): no other lane measures.
    ahead.thread = work_beside(state, lambda release: ahead.run(state, release), "kj-timing-ahead")


def start(state: JudgmentState, trial_sets: list[dict[str, Any]]) -> None:
    """After each trial of the task's own distribution that passed (the correctness stage, with the trials' sets
    kept so far: results.CorrectnessRun.timing_sets), done at the first:
    the thread `begin` started stages the pool and makes each side's first call, with the outputs' signature at
    the public shape as that trial left it (the hidden shapes, beside, set theirs), where the verdict is not FAIL
    already; a task with timing shapes builds and stages at each of them in the stage (the loads only)."""
    ahead = state.ahead
    if ahead is None or ahead.going.is_set() or voiding_codes(state.findings, state.config):
        return
    shapes = state.build.family is not None and state.build.family.timing
    ahead.go(dict(state.calls.signature), None if shapes else plan_of(state, trial_sets))


def end(state: JudgmentState) -> dict[str, WorkerLog]:
    """Where the judgment ends with its timing pair still booting: the thread stopped, and the pair it loaded
    closed with its logs (`<role>_timing`: candidate code ran there)."""
    ahead = state.ahead
    if ahead is None:
        return {}
    ahead.stop(state)
    if not state.booting:
        return {}
    pair, state.booting = state.booting, {}
    return closed(state, pair, 1, {})


def plan_of(
    state: JudgmentState, trial_sets: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], None, str, int, set[str]]:
    """What `make_ready` is given ahead: the pool's sets, no timing shape, the method, the L2 flush's bytes and the
    sides cached baselines stand for, in the configured regime (a failed graph capture later times again in a
    pair started then)."""
    method = state.config.resolved_timing_method()
    cached = set(cached_sides(state, method, state.config.timing_regime))
    return pool_sets(state, method, None, trial_sets), None, method, flush_of(state, method), cached


def described(state: JudgmentState) -> dict[str, Any] | None:
    """The record's `timing.ahead`: what was made ready ahead and in how long, or why nothing was."""
    if not state.readies_ahead:
        return None
    ahead = state.ahead
    if ahead is None:
        if state.build.device == "cuda" and not state.admission.ahead_fits:
            why = "the task's footprint does not show both pairs fitting a quarter of the GPU side by side"
        else:
            why = "the judgment ended before a trial had passed, or failed closed on one"
        return {"made": False, "why_not": why}
    ready = ahead.ready
    return {
        "made": ahead.loaded,
        "staged": ready is not None,
        "warmed": list(ready.warmed) if ready is not None else [],
        "seconds": round(ahead.seconds, 3),
    }
