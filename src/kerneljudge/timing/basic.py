"""Interleaved block timing of candidate and reference, each in its own worker.

Each side is first calibrated (how many calls fill one sample of the target
length; on CUDA, how long the host takes to issue them), then blocks alternate
the sides in a random order until the stopping rule is satisfied; the speedup is
exp(median of the paired per-block log ratios of medians) with a bootstrap
interval, never a ratio of two unrelated means. A torch.compile'd reference, when
asked for, is a third side of every block. The parent times every request with
its own clock, so a worker's reported figures can be set against what the parent
saw, and reads the device's clocks around every block, so blocks timed while the
GPU was throttled are left out of the estimate. Two compatibility methods
reproduce published timers: KernelBench's (one call per event pair, 100 trials,
mean; `--mode off`) and Triton's `do_bench`.

The methods, regimes and plan are in timing/plan.py; the requests to a side and its samples in
timing/sides.py; the calls per sample and the precursor in timing/calibration.py; the parent-clock
cross-check in timing/crosscheck.py; the clock monitor in timing/clocks.py.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from kerneljudge.results.verdict import Timing
from kerneljudge.timing.calibration import (
    CALIBRATION_PRECURSOR_MS,
    MAX_CALLS_PER_SAMPLE,
    MAX_RECALIBRATIONS,
    calls_for,
    calls_within,
    precursor_for,
)
from kerneljudge.timing.clocks import ClockMonitor, clock_summary
from kerneljudge.timing.crosscheck import clock_check
from kerneljudge.timing.plan import (
    BUSY_PRECURSOR,
    CUDA_GRAPH,
    DO_BENCH,
    HOST_CLOCK,
    INTERLEAVED,
    KERNELBENCH,
    REGIME_TEXT,
    REGIMES,
    SINGLE_CALL,
    TimingPlan,
)
from kerneljudge.timing.sides import CachedSide, SampleTimes, TimeRequest, TimeSide
from kerneljudge.timing.stats import RatioEstimate, estimate_speedup, log_ratios, summarize


class _Session:
    """The bookkeeping of one timing run: samples per side, the parent's clock, the cross-check sums."""

    def __init__(self, sides: dict[str, TimeSide], clock: Callable[[], float], untimed: Sequence[str] = ()) -> None:
        self.sides = sides
        self.clock = clock
        names = [*sides, *untimed]  # untimed: sides whose figures come from a cache
        self.samples: dict[str, list[float]] = {name: [] for name in names}
        self.host_ms: dict[str, list[float]] = {name: [] for name in names}
        self.observed_ms = {name: 0.0 for name in names}
        # Measured requests only (not calibration): what the worker claims its timed calls took in all, and
        # what the parent's clock saw for the whole round trip less what paced it (SampleTimes.paced_ms).
        self.claimed_ms = {name: 0.0 for name in names}
        self.seen_ms = {name: 0.0 for name in names}
        self.overheads_ms: dict[str, list[float]] = {name: [] for name in names}  # seen less claimed, per request
        self.last_ms = 0.0  # the parent's clock around the latest request

    def time(self, name: str, request: TimeRequest) -> SampleTimes:
        start = self.clock()
        result = self.sides[name](request)
        elapsed = (self.clock() - start) * 1e3 if result.request_ms is None else result.request_ms
        self.last_ms = elapsed
        self.observed_ms[name] += elapsed
        if request.measured:
            claimed, seen = sum(result.times_ms) * request.calls, max(0.0, elapsed - result.paced_ms())
            self.claimed_ms[name] += claimed
            self.seen_ms[name] += seen
            self.overheads_ms[name].append(seen - claimed)
            self.samples[name].extend(result.times_ms)
            self.host_ms[name].extend(h / request.calls for h in result.host_ms)
        return result


SIDES = ("reference", "candidate")  # the overheads per request the clock check sets against each other


def run_interleaved(
    sides: dict[str, TimeSide],
    inputs: Sequence[Any],
    plan: TimingPlan,
    device: str,
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.perf_counter,
    monitor: ClockMonitor | None = None,
    cached: dict[str, CachedSide] | None = None,
    hold: Callable[[], None] | None = None,
) -> Timing:
    """Time `candidate` and `reference` (and `compiled`, when present: the reference under torch.compile)
    and return the timing section of a record.

    A side in `cached` (interleaved method only) is not timed: its cached block figures stand in for its
    blocks, in turn, and the record says where they came from (`reference_source`). `hold` is called once
    every side's first calibration request is answered (a fresh worker's first call, where a JIT compiles,
    which only sizes the samples) and before anything else: the caller pauses the other lanes there
    (judgment/stages/timing.py)."""
    rng = rng or random.Random()
    cached = cached or {}
    hold = hold or (lambda: None)
    session = _Session(sides, clock, untimed=list(cached))
    if plan.method in (KERNELBENCH, DO_BENCH):
        hold()
    if plan.method == KERNELBENCH:
        return _single_figure(session, plan, device, TimeRequest(inputs[0], 1, plan.native_trials, 3))
    if plan.method == DO_BENCH:
        return _single_figure(session, plan, device, TimeRequest(inputs[0], 1, 1, 0, method="do_bench"))
    regime = plan.regime if device == "cuda" else HOST_CLOCK
    if regime not in (*REGIMES, HOST_CLOCK):
        raise ValueError(f"unknown timing regime {regime!r}")
    busy = regime in (BUSY_PRECURSOR, CUDA_GRAPH)  # a graph's launch is issued behind a precursor too
    graph = regime == CUDA_GRAPH
    calls: dict[str, int] = {name: entry.calls for name, entry in cached.items()}
    precursor = {name: 0.0 for name in sides} | {name: entry.precursor_ms for name, entry in cached.items()}
    for name in sides:
        calibration = TimeRequest(
            inputs[0], 1, 3, plan.warmup, CALIBRATION_PRECURSOR_MS if busy else 0.0, measured=False
        )
        first = session.time(name, calibration)
        made = calibration.warmup + calibration.samples * calibration.calls
        calls[name] = min(
            calls_for(statistics.median(first.times_ms), plan.target_sample_ms),
            calls_within(session.last_ms, first.paced_ms(), made, plan.target_sample_ms),
            1 if plan.one_call else MAX_CALLS_PER_SAMPLE,
        )
    hold()  # each worker still sees its requests in the same order: first, probes, blocks
    for name in sides:
        if busy:  # how long the host takes to issue one sample's calls (with a graph: capture it first)
            probe = session.time(name, TimeRequest(inputs[0], calls[name], 2, 0, measured=False, graph=graph))
            for _ in range(MAX_RECALIBRATIONS):
                # A single call behind the short calibration precursor can read the host's issue of it (the
                # GPU waits), not its device time: a 2 us Triton kernel read 250 us on an H200, and samples of
                # 4 calls (8 us) gave speedups that moved 20% between fresh runs. A sample of many calls
                # (replayed, with a graph) shows the device time: size the samples again from it.
                refined = min(
                    calls_for(statistics.median(probe.times_ms), plan.target_sample_ms),
                    calls_within(session.last_ms, probe.paced_ms(), 2 * calls[name], plan.target_sample_ms),
                )
                if refined < 2 * calls[name] or plan.one_call:
                    break
                calls[name] = refined
                probe = session.time(name, TimeRequest(inputs[0], calls[name], 2, 0, measured=False, graph=graph))
            precursor[name] = precursor_for(probe.host_ms)
    rule = plan.rule(device)
    began = clock()
    medians: dict[str, list[float]] = {name: [] for name in [*sides, *cached]}
    host_bound = {name: 0 for name in sides}
    for name, entry in cached.items():  # its statistics are the cached ones; the cross-check its overhead
        session.samples[name] = list(entry.samples_ms)
    throttled: list[int] = []
    reasons: set[str] = set()
    snapshots: list[dict[str, Any]] = []
    block = 0

    def kept() -> list[int]:
        """The blocks the estimate uses: every one timed on unthrottled clocks (all of them, if none was)."""
        return [b for b in range(block) if b not in throttled] or list(range(block))

    def ratios_against(baseline: str) -> list[float]:
        used = kept()
        return log_ratios([medians[baseline][b] for b in used], [medians["candidate"][b] for b in used])

    commit_calls = calls.get("candidate", 0)
    while True:
        block_inputs = inputs[block % len(inputs)]
        order = list(sides)
        rng.shuffle(order)
        # A block's clocks are read from the end of the block before (nothing runs between the two), so each
        # boundary costs one NVML snapshot (3.6 ms on the H200: docs/batch.md) instead of two.
        before = (snapshots[-1] if snapshots else monitor.snapshot()) if monitor else {}
        for name in order:
            # Every side's commit digests as many outputs as the candidate's sample holds
            # (judgment/stages/untimed_work.py).
            request = TimeRequest(
                block_inputs, calls[name], plan.samples, 1, precursor[name], graph=graph, commit_calls=commit_calls
            )
            result = session.time(name, request)
            medians[name].append(statistics.median(result.times_ms))
            if busy:
                late = [h for h in result.host_ms if h > precursor[name]]
                if late:  # the GPU may have waited for the host: lengthen the precursor for the next blocks
                    host_bound[name] += len(late)
                    precursor[name] = max(precursor[name], precursor_for(late))
        for name, entry in cached.items():
            medians[name].append(entry.block_medians[block % len(entry.block_medians)])
            session.seen_ms[name] += entry.overhead_ms_per_block
            session.overheads_ms[name].append(entry.overhead_ms_per_block)
        if monitor:
            after = monitor.snapshot()
            snapshots.append(after)
            found = monitor.throttled(before, after)
            if found:
                throttled.append(block)
                reasons.update(found)
        block += 1
        stop_reason = rule.decide(ratios_against("reference"), clock() - began, rng, blocks=block)
        if stop_reason is not None:
            break
    estimate = estimate_speedup(ratios_against("reference"), rng)
    timing = _timing(session, plan, device, INTERLEAVED, regime, calls, estimate, stop_reason)
    pairs = zip(medians["reference"], medians["candidate"], strict=True)
    timing.block_ratios = [r / c if c > 0 else 0.0 for r, c in pairs]
    if busy:
        timing.precursor_ms = {name: round(v, 4) for name, v in precursor.items()}
        timing.host_bound_samples = host_bound
    timing.host_ms_per_call = {
        name: statistics.median(v) for name, v in session.host_ms.items() if v and name in ("candidate", "reference")
    }
    timing.clocks = clock_summary(monitor, snapshots, throttled, reasons, dropped=len(kept()) < block)
    reference = cached.get("reference")
    timing.reference_source = reference.source if reference else "paired"
    if "compiled" in sides or "compiled" in cached:
        timing.compiled = summarize(session.samples["compiled"])
        vs_compile = estimate_speedup(ratios_against("compiled"), rng)
        if vs_compile is not None:
            timing.speedup_vs_compile = vs_compile.speedup
            timing.speedup_vs_compile_interval = bounded(vs_compile)
    return timing


def bounded(estimate: RatioEstimate | None) -> list[float] | None:
    """The interval as the record keeps it: none where one block leaves it unbounded (JSON has no infinity)."""
    if estimate is None or not math.isfinite(estimate.high):
        return None
    return [estimate.low, estimate.high]


def _single_figure(session: _Session, plan: TimingPlan, device: str, request: TimeRequest) -> Timing:
    """A compatibility method: one request per side, speedup = ratio of the sides' means."""
    for name in ("candidate", "reference"):
        session.time(name, request)
    means = {name: statistics.fmean(session.samples[name]) for name in ("candidate", "reference")}
    speedup = means["reference"] / means["candidate"] if means["candidate"] > 0 else None
    regime = DO_BENCH if request.method == "do_bench" else SINGLE_CALL if device == "cuda" else HOST_CLOCK
    method = plan.method
    timing = _timing(session, plan, device, method, regime, {"candidate": 1, "reference": 1}, None, "native_trials")
    timing.speedup = speedup
    return timing


def _timing(
    session: _Session,
    plan: TimingPlan,
    device: str,
    method: str,
    regime: str,
    calls: dict[str, int],
    estimate: RatioEstimate | None,
    stop_reason: str,
) -> Timing:
    return Timing(
        measured=True,
        device=device,
        method=method,
        launch_regime=regime,
        regime=REGIME_TEXT[regime],
        calls_per_sample={k: v for k, v in calls.items() if k in ("candidate", "reference")},
        candidate=summarize(session.samples["candidate"]),
        reference=summarize(session.samples["reference"]),
        speedup=estimate.speedup if estimate is not None else None,
        speedup_interval=bounded(estimate),
        interval_level=estimate.level if estimate is not None else None,
        speedup_rse=estimate.rse if estimate is not None and math.isfinite(estimate.rse) else None,
        stop_reason=stop_reason,
        parent_observed_ms={k: round(v, 3) for k, v in session.observed_ms.items()},
        clock_check=clock_check(session.claimed_ms, session.seen_ms, *map(session.overheads_ms.get, SIDES))
        if method == INTERLEAVED
        else None,
    )
