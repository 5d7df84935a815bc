"""The timing stage: the regime (CUDA graphs, a busy precursor, the host clock), the L2 flush before every
sample, the fallback to a fresh pair without graphs when a capture fails (with the unjoined-stream finding
a failed capture can show), the timing shapes' geometric mean, and the findings read from the measurement:
the drains a candidate's end event missed, the claimed-versus-observed clock check (KJ-R050), and the timed
median set against the kernel trace. The timed requests themselves are in timed_calls.py, the interleaved
blocks and statistics in timing/.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from kerneljudge import protocol
from kerneljudge.checks.catalog import finding
from kerneljudge.checks.trace import timed_versus_traced, unjoined_capture
from kerneljudge.judgment.stages import device_memory
from kerneljudge.judgment.stages.build import build_candidate, load_reference
from kerneljudge.judgment.stages.failures import CandidateFailed
from kerneljudge.judgment.stages.results import TimingRun
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.timed_calls import check_deferred, make_ready, time_side
from kerneljudge.judgment.stages.timed_rechecks import recheck_graph, recheck_last
from kerneljudge.judgment.stages.untimed_work import NOISE_SHARE, bound_check, untimed_findings
from kerneljudge.judgment.stages.workers import at_gate, closing_ended, join_closing
from kerneljudge.results.verdict import Timing
from kerneljudge.tasks.shapes import describe_shape
from kerneljudge.timing import drain
from kerneljudge.timing.basic import run_interleaved
from kerneljudge.timing.clocks import NvmlClockMonitor
from kerneljudge.timing.figures import combined_timing, timed_busy_s
from kerneljudge.timing.plan import (
    BUSY_PRECURSOR,
    CUDA_GRAPH,
    DO_BENCH,
    HOST_CLOCK,
    INTERLEAVED,
    KERNELBENCH,
    TimingPlan,
)
from kerneljudge.timing.sides import CachedSide, GraphUnsupported, TimeSide

# KernelBench flushes 256 MB; otherwise at least twice the device's L2 (a 32 MiB write did not evict an
# H200's 60 MiB L2, 64 MiB and more did: docs/gpu-machine.md), never under 64 MiB.
KERNELBENCH_FLUSH_BYTES = 256 * 2**20
MIN_FLUSH_BYTES = 64 * 2**20


def l2_flush_bytes(hello: protocol.Hello | None, native: bool) -> int:
    """The bytes written to flush the L2 before a sample: KernelBench's 256 MB natively, else twice the device's L2."""
    if native:
        return KERNELBENCH_FLUSH_BYTES
    l2 = (hello.l2_cache_bytes or 0) if hello is not None else 0
    return max(MIN_FLUSH_BYTES, 2 * l2)


def run(
    state: JudgmentState, fresh_pair: Callable[[], None], trial_sets: list[dict[str, Any]], result: TimingRun
) -> None:
    """Time at the public shape, or at each of the task's timing shapes (TIMING_SHAPES: a GPU MODE
    problem's benchmarks), reporting their geometric mean as the leaderboard ranks, into `result` (filled as it
    goes: a failure part-way leaves what was set then). `fresh_pair` replaces the workers by a fresh timing pair
    (after a failed graph capture); `trial_sets` are the correctness trials' sets the pool may make again
    (results.CorrectnessRun.timing_sets, `pool_sets`). A timing pair that outgrew the GPU and ran short of memory
    leaves the timing unmeasured (judgment/stages/device_memory.py)."""
    with device_memory.untimed_where_beyond(state, result):
        shapes = list(state.build.family.timing) if state.build.family is not None and not state.native else []
        if not shapes:
            timed(state, result, None, state.config.timing_budget_s, fresh_pair, trial_sets)
            return
        measured: list[tuple[dict[str, Any], Timing]] = []
        fallback = None
        for shape in shapes:
            state.progress(f"timing at {describe_shape(shape)}")
            if not timed(state, result, shape, state.config.timing_budget_s / len(shapes), fresh_pair, trial_sets):
                return  # a failed capture's finding failed it (enforce): no shape is timed after it
            fallback = fallback or result.timing.graph_fallback
            measured.append((shape, result.timing))
        result.timing = combined_timing(measured)
        result.timing.graph_fallback = fallback


def timed(
    state: JudgmentState,
    result: TimingRun,
    shape: dict[str, Any] | None,
    budget_s: float,
    fresh_pair: Callable[[], None],
    trial_sets: list[dict[str, Any]],
) -> bool:
    """One measurement in the configured regime, or behind a busy precursor in a fresh pair when a CUDA
    graph cannot be captured (or could not at an earlier timing shape); False where the capture showed unjoined
    work and enforce fails the candidate on it (nothing more is timed)."""
    regime = BUSY_PRECURSOR if result.timing.graph_fallback else state.config.timing_regime
    try:
        measure(state, result, regime, shape, budget_s, trial_sets=trial_sets)
    except GraphUnsupported as exc:
        unjoined = unjoined_capture(str(exc)) if exc.side == "candidate" else None
        if unjoined is not None and not state.native:
            state.add_findings([unjoined])
            # enforce: FAIL already; timed again behind a precursor, 1-11 s held (H200)
            if result.fails_closed(state.findings, state.config):
                return False
        # A failed capture can leave a worker's CUDA state unusable: a fresh pair times without graphs.
        state.progress("no CUDA graph; timing again in a fresh worker pair behind a busy precursor")
        with at_gate(state, measuring=False):
            fresh_pair()
        measure(state, result, BUSY_PRECURSOR, shape, budget_s, trial_sets=trial_sets)
        result.timing.graph_fallback = str(exc)
    return True


@dataclass
class Prepared:
    """A measurement made ready beside the other lanes: the pool staged, the sides' requests, the cached ones."""

    method: str
    sides: dict[str, TimeSide]
    cached: dict[str, CachedSide]
    pool: list[list[None]]
    flush_bytes: int
    graphs: set[tuple[str, int]]
    l2_reset: dict[str, bool | None]
    compile_error: str | None
    monitor: NvmlClockMonitor | None = None  # opened here, outside the hold: NVML's start is not a sample
    monitor_error: str | None = None


def measure(
    state: JudgmentState,
    result: TimingRun,
    regime: str,
    shape: dict[str, Any] | None = None,
    budget_s: float | None = None,
    trial_sets: list[dict[str, Any]] | None = None,
) -> None:
    """Stage the pool and make the sides ready beside the other lanes, time them with every other lane
    paused, then check the kept outputs and read the findings beside the other lanes again: the gate is
    held for the samples and their calibration, not for the staging, the checks or each side's
    first calibration request, where a fresh worker's JIT compiles the kernel on its first call and whose
    figures only size the samples (the probes after it size them again, in the hold). `result.timing` is this
    measurement's, or why it did not measure."""
    with at_gate(state, measuring=False):
        prepared = prepare(state, result, regime, shape, trial_sets or [])
    if prepared is None:
        return
    held_since: list[float] = []
    with ExitStack() as gate:
        gate.enter_context(at_gate(state, measuring=False))

        def hold() -> None:  # from working beside the other lanes to measuring with them paused
            closing_ended(state)  # the checked pair, closed beside the fresh pair's start, is gone
            gate.close()
            gate.enter_context(at_gate(state, measuring=True))
            held_since.append(time.monotonic())

        try:
            state.progress("timing candidate and reference")
            take(state, result, prepared, regime, budget_s, hold)
        finally:  # how long every other lane was held back: `stages_s["timing.held"]`
            if held_since:
                held = state.stages_s.get("timing.held", 0.0) + time.monotonic() - held_since[0]
                state.stages_s["timing.held"] = round(held, 3)
    with at_gate(state, measuring=False):
        read(state, result, prepared)
        join_closing(state)  # its logs filed and its workspaces removed, beside the hold


def prepare(
    state: JudgmentState,
    result: TimingRun,
    regime: str,
    shape: dict[str, Any] | None,
    trial_sets: list[dict[str, Any]],
) -> Prepared | None:
    """Build the models at the timing shape (where one is given), stage the pool, compile the reference under
    torch.compile where asked; None (and the record's timing says why) where this method cannot time. A pair
    made ready ahead, while correctness ran (judgment/stages/timing_ahead.py), is taken as it is."""
    config = state.config
    method = config.resolved_timing_method()
    if method == DO_BENCH and state.build.device != "cuda":
        result.timing = Timing(measured=False, reason="Triton's do_bench times CUDA devices only")
        return None
    flush_bytes = flush_of(state, method)
    cached = cached_sides(state, method, regime)
    ready = state.ahead.take() if state.ahead is not None and shape is None else None
    if ready is not None:  # staged ahead: the public shape's signature again, after the hidden shapes' (beside)
        state.calls.signature = dict(ready.signature)
    else:
        if shape is not None:  # both models built at the timing shape, timed on fresh hidden inputs of it
            build_candidate(state, load_reference(state, shape), shape)
        sets = pool_sets(state, method, shape, trial_sets)
        ready = make_ready(state, sets, shape, method, flush_bytes, set(cached), config.timing_warm)
    graphs: set[tuple[str, int]] = set()
    l2_reset: dict[str, bool | None] = {}
    sides = {
        name: time_side(state, name, name == "compiled", method, flush_bytes, graphs, l2_reset) for name in ready.sides
    }
    pool = [[None] * len(ready.sets)]  # the sets stay in the workers (`stage`); requests name them by position
    prepared = Prepared(method, sides, cached, pool, flush_bytes, graphs, l2_reset, ready.compile_error)
    if state.build.device == "cuda" and method == INTERLEAVED:
        prepared.monitor, prepared.monitor_error = NvmlClockMonitor.open(
            state.build.hello.gpu_uuid if state.build.hello else None
        )
    return prepared


def flush_of(state: JudgmentState, method: str) -> int:
    """The bytes written to flush the L2 before each sample (`l2_flush_bytes`), 0 with a warm cache."""
    return l2_flush_bytes(state.build.hello, method == KERNELBENCH) if state.config.timing_l2_flush else 0


def cached_sides(state: JudgmentState, method: str, regime: str) -> dict[str, CachedSide]:
    """The sides whose figures come from cached baselines, not timed here: the interleaved method's, where they
    were timed in the regime this measurement times in (the host clock's on the CPU)."""
    timed_regime = regime if state.build.device == "cuda" else HOST_CLOCK
    return {
        name: entry
        for name, entry in state.baselines.items()
        if method == INTERLEAVED and entry.launch_regime == timed_regime
    }


def pool_sets(
    state: JudgmentState, method: str, shape: dict[str, Any] | None, trial_sets: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The input sets of the timing pool, one for a single figure: fresh hidden draws (`HiddenPlan.timing_seeds`)
    of the task's own distribution, which no checked worker saw, so that nothing a checked worker kept, in a
    folder another worker reaches (a `/tmp` shared where the sandbox's private one is missing), a compiler cache
    carried (sandbox/cache_carry.py) or a worker running beside (judgment/stages/timing_ahead.py), answers a timed call
    (H26; since 0.3.4); at a timing shape fresh draws of it; natively (`off`, no hidden draws) the last trials'
    own inputs, as KernelBench times them. (The pool was always of the task's own distribution: only trials of
    it, or of a hidden one the task rejected and that fell back to it, are kept in `trial_sets`; so the
    pool is known from the plan alone, before the trials end, which timing ahead needs.)"""
    single = method != INTERLEAVED  # one set: one figure (natively the first trial's, as KernelBench times it)
    count = 1 if single else state.admission.pool_sets
    kept = trial_sets[:1] if single else trial_sets[-count:]
    if shape is not None:
        return [{"seed": state.source.randrange(2**32 - 1), "variant": {"kind": "standard"}} for _ in kept]
    if state.plan is not None and state.plan.timing_seeds:  # as many as kept: hardened, five trials of it at least
        return [{"seed": seed, "variant": {"kind": "standard"}} for seed in state.plan.timing_seeds[:count]]
    return kept


def shares_outputs(state: JudgmentState) -> bool:
    """Whether the candidate's checked calls returned outputs in the previous output's storage (KJ-R022, recorded
    under the practical policy: torch.compile's CUDA graphs, GPU MODE's pmpp sort solution): timed, a later call
    of a sample would overwrite an earlier one's output before the parent named it, so it is timed one call a
    sample, and the reference alike (`TimingPlan.one_call`)."""
    return any(f.code == "KJ-R022" for f in state.findings)


def take(
    state: JudgmentState,
    result: TimingRun,
    prepared: Prepared,
    regime: str,
    budget_s: float | None,
    hold: Callable[[], None],
) -> None:
    """The samples: calibration and the interleaved blocks (timing/basic.py), with the clocks watched; `hold`
    pauses the other lanes once the first calibration requests are answered."""
    config, method = state.config, prepared.method
    plan = TimingPlan(
        blocks=config.timing_blocks,
        samples=config.timing_samples,
        target_sample_ms=config.timing_target_ms,
        method=method,
        regime=regime,
        max_blocks=config.timing_max_blocks,
        target_rse=config.timing_target_rse,
        budget_s=budget_s if budget_s is not None else config.timing_budget_s,
        one_call=shares_outputs(state),
    )
    state.timed.drain_left, state.timed.drain_timed_ms, state.timed.deferred_checks, state.timed.untimed_spans = (
        [],
        [],
        [],
        {},
    )
    result.timing = run_interleaved(
        prepared.sides,
        prepared.pool,
        plan,
        state.build.device or "cpu",
        monitor=prepared.monitor,
        cached=prepared.cached,
        hold=hold,
    )
    result.timing.timed_busy_s = timed_busy_s(result.timing, measured=list(prepared.sides))


def read(state: JudgmentState, result: TimingRun, prepared: Prepared) -> None:
    """After the samples: the kept outputs checked, the plain calls that check more, and the findings the
    measurement shows; `result.timing` completed with what they found."""
    method, pool = prepared.method, prepared.pool
    try:
        check_deferred(state)  # what the measured requests kept, checked here rather than in the hold
    except CandidateFailed:  # samples of calls that answered wrong are no figure of the candidate's
        result.timing = Timing(measured=False, reason="a timed call's kept output failed its check")
        raise
    timing = result.timing
    left_behind = drain.drain_finding(state.timed.drain_left, state.timed.drain_timed_ms)
    if left_behind is not None:
        state.add_findings([left_behind])
    if method == INTERLEAVED and state.baselines and not prepared.cached:
        regimes = sorted({entry.launch_regime for entry in state.baselines.values()})
        timing.reference_source = f"paired: the cached reference was timed in another regime ({regimes[0]})"
    if timing.launch_regime == CUDA_GRAPH and not state.native:
        before = state.timed.checks
        for role, calls in sorted(prepared.graphs):
            if role == "candidate":
                recheck_graph(state, calls, len(pool[0]))
        timing.graph_rechecks = state.timed.checks - before
    elif method == INTERLEAVED and not state.native and timing.measured:
        recheck_last(state, int(timing.calls_per_sample.get("candidate", 1)), len(pool[0]))
    timing.timed_outputs_checked = state.timed.checks
    timing.kept_calls = list(state.timed.kept_calls)
    timing.compile_error = prepared.compile_error
    if prepared.monitor_error and timing.clocks is not None:
        timing.clocks["error"] = prepared.monitor_error
    if state.build.device == "cuda":
        timing.l2_flush_bytes = prepared.flush_bytes
        timing.persisting_l2_reset = prepared.l2_reset
        flushed = f"; {prepared.flush_bytes / 2**20:.0f} MiB L2 flush before every sample"
        timing.regime = (timing.regime or "") + (flushed if prepared.flush_bytes else "; warm L2")
    if method == INTERLEAVED and timing.candidate is not None:
        # The kernel traces are read once the workers have closed (judgment/stages/integrity.judge_traces, after
        # this stage), so no summary of them is known here yet: the check finds nothing, as it always has.
        timing.trace_check, found = timed_versus_traced(None, timing.candidate.median_ms)
        state.add_findings(found)
    if method == INTERLEAVED and not state.native and timing.candidate is not None:
        claimed, spans = timing.candidate.median_ms, state.timed.untimed_spans
        # Both commits digest the candidate's outputs' number, so the two are matched (judgment/stages/untimed_work.py).
        share = NOISE_SHARE["cuda" if state.build.device == "cuda" else "cpu"]
        timing.untimed_work = {
            span: bound_check(
                {role: spans.get(role, {}).get(span, []) for role in spans}, claimed, span == "commit", share
            )
            for span in ("commit", "requests")
        }
        state.add_findings(untimed_findings(timing.untimed_work))
    check = timing.clock_check or {}
    if check.get("suspicious") and not state.native:
        state.add_findings(
            [
                finding(
                    "KJ-R050",
                    "error",
                    f"the candidate worker claimed {check['candidate_claimed_ms']:.3g} ms of timed calls where "
                    f"the parent's clock implies about {check['candidate_implied_ms']:.3g} ms",
                    check,
                )
            ]
        )
