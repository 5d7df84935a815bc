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
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kerneljudge.timing.stats import RatioEstimate, estimate_speedup, log_ratios, summarize
from kerneljudge.timing.stopping import StoppingRule
from kerneljudge.verdict import Timing

MAX_CALLS_PER_SAMPLE = 10_000
# A sample may take at most this many times `target_sample_ms` by the parent's clock, whatever the worker
# claims: work that escapes the timed stream (H20, a side stream) reads as microseconds in the worker's
# events, and calls sized from that alone queued minutes of GPU work per request (an H200 batch, 2026-11-30).
SAMPLE_CAP_FACTOR = 1000

# Launch-latency regimes (CUDA). On an idle H200 one event pair around one tiny softmax read 15 us, and
# back-to-back calls 7-11 us each depending on the process (the host issuing calls is the bottleneck);
# behind a GPU-busy precursor the same call read 5.9-6.2 us in every process (docs/timing.md).
BUSY_PRECURSOR = "busy_precursor"  # a GPU sleep before the start event covers the host's issue of the calls
BACK_TO_BACK = "back_to_back"  # calls issued back to back between one event pair; host latency may show
HOST_CLOCK = "host_clock"  # the CPU: the host clock around the calls
SINGLE_CALL = "single_call"  # KernelBench: one event pair per call on an idle GPU
DO_BENCH = "do_bench"  # Triton's triton.testing.do_bench in the worker
CUDA_GRAPH = "cuda_graph"  # each sample's calls captured once in a CUDA graph and replayed, behind a precursor

INTERLEAVED, KERNELBENCH = "interleaved", "kernelbench"  # the methods; the third is DO_BENCH
REGIMES = (BUSY_PRECURSOR, BACK_TO_BACK, CUDA_GRAPH)

# The precursor is 1.5 times the longest issue time seen plus 50 us, at most 20 ms (a candidate whose
# host work needs more is host-bound: its samples say so).
PRECURSOR_FACTOR, PRECURSOR_PAD_MS, MAX_PRECURSOR_MS = 1.5, 0.05, 20.0
CALIBRATION_PRECURSOR_MS = 0.2
# Times the calls per sample are sized again from a probe of many calls, while that at least doubles them.
MAX_RECALIBRATIONS = 2


@dataclass(frozen=True)
class TimeRequest:
    """One timing request to a worker: `samples` samples of `calls` calls each, after `warmup` calls."""

    inputs: Any
    calls: int
    samples: int
    warmup: int
    precursor_ms: float = 0.0  # GPU-busy precursor before each sample's start event (0: none)
    method: str = "events"  # "events", or "do_bench" (one figure: Triton's do_bench with its defaults)
    measured: bool = True  # False for calibration: no output capture, not in the cross-check
    graph: bool = False  # replay a CUDA graph of the sample's calls (captured on the first such request)


class GraphUnsupported(Exception):
    """A side's calls could not be captured in a CUDA graph; the message says why, `side` whose calls."""

    def __init__(self, message: str, side: str | None = None) -> None:
        super().__init__(message)
        self.side = side


@dataclass(frozen=True)
class SampleTimes:
    times_ms: list[float]  # per-call time of each sample (device time on CUDA, host time on the CPU)
    host_ms: list[float] = field(default_factory=list)  # host time to issue each sample's calls
    busy_ms: list[float] = field(default_factory=list)  # how long each sample's precursor lasted on the GPU
    request_ms: float | None = None  # the parent's clock around the worker's round trip, when it took it

    def paced_ms(self) -> float:
        """Time of the request spent on things other than the timed calls' device time: each sample's
        precursor, or the host's issue of its calls where that took longer (the GPU waited for it). A
        host-clock (CPU) worker times the issue itself: nothing of its request paces it."""
        return sum(max(b, h) for b, h in zip(self.busy_ms, self.host_ms, strict=False))


# time_side(request) -> the request's samples
TimeSide = Callable[[TimeRequest], SampleTimes]


@dataclass(frozen=True)
class CachedSide:
    """A side timed once and reused by later timings (cached baselines): what its blocks gave.

    `block_medians` stand in for the side's block figures, in turn; `samples_ms` for its statistics;
    `overhead_ms_per_block` (its requests' parent-clock time beyond the claimed calls) for the
    cross-check, which needs a trusted side's overhead. Only a timing in `launch_regime` may use it.
    """

    block_medians: list[float]
    samples_ms: list[float]
    calls: int
    precursor_ms: float
    overhead_ms_per_block: float
    launch_regime: str
    source: str

    @classmethod
    def from_timing(cls, timing: Timing, side: str, samples_per_block: int, source: str) -> CachedSide | None:
        """The `side` ("reference" or "compiled") of an interleaved timing; None where it was not measured."""
        stats = timing.reference if side == "reference" else timing.compiled
        if not timing.measured or timing.method != INTERLEAVED or stats is None or not timing.block_ratios:
            return None
        samples = list(stats.samples_ms)
        starts = range(0, len(samples), samples_per_block)
        medians = [statistics.median(samples[i : i + samples_per_block]) for i in starts]
        overhead = float((timing.clock_check or {}).get("reference_overhead_ms") or 0.0) / len(medians)
        return cls(
            block_medians=medians,
            samples_ms=samples,
            calls=int(timing.calls_per_sample.get(side, timing.calls_per_sample.get("reference", 1))),
            precursor_ms=float(timing.precursor_ms.get(side, 0.0)),
            overhead_ms_per_block=overhead,
            launch_regime=str(timing.launch_regime),
            source=source,
        )


class ClockMonitor(Protocol):
    """Reads the device's clock state; `throttled` names what slowed the clocks between two readings."""

    name: str

    def snapshot(self) -> dict[str, Any]: ...

    def throttled(self, before: dict[str, Any], after: dict[str, Any]) -> list[str]: ...


@dataclass(frozen=True)
class TimingPlan:
    blocks: int = 5  # the minimum; the stopping rule may take more on CUDA
    samples: int = 10
    warmup: int = 2
    target_sample_ms: float = 1.0
    method: str = INTERLEAVED
    regime: str = CUDA_GRAPH  # on CUDA; the CPU always uses the host clock
    native_trials: int = 100
    max_blocks: int = 40
    target_rse: float = 0.005
    budget_s: float = 60.0

    def rule(self, device: str) -> StoppingRule:
        # On the CPU the figure is not a GPU speedup: the minimum number of blocks is enough.
        most = max(self.blocks, self.max_blocks) if device == "cuda" else self.blocks
        return StoppingRule(target_rse=self.target_rse, min_blocks=self.blocks, max_blocks=most, budget_s=self.budget_s)


def calls_for(estimate_ms: float, target_ms: float) -> int:
    if estimate_ms <= 0:
        return MAX_CALLS_PER_SAMPLE
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(target_ms / estimate_ms)))


def calls_within(elapsed_ms: float, paced_ms: float, calls_made: int, target_ms: float) -> int:
    """The most calls per sample that the parent's clock allows: `calls_made` calls took at most
    `elapsed_ms` less what paced them, so a sample of that many stays within SAMPLE_CAP_FACTOR x target."""
    per_call = max(0.0, elapsed_ms - paced_ms) / max(1, calls_made)
    if per_call <= 0:
        return MAX_CALLS_PER_SAMPLE
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.floor(SAMPLE_CAP_FACTOR * target_ms / per_call)))


def precursor_for(host_ms: Sequence[float]) -> float:
    return min(MAX_PRECURSOR_MS, PRECURSOR_FACTOR * max(host_ms, default=0.0) + PRECURSOR_PAD_MS)


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


def run_interleaved(
    sides: dict[str, TimeSide],
    inputs: Sequence[Any],
    plan: TimingPlan,
    device: str,
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.perf_counter,
    monitor: ClockMonitor | None = None,
    cached: dict[str, CachedSide] | None = None,
) -> Timing:
    """Time `candidate` and `reference` (and `compiled`, when present: the reference under torch.compile)
    and return the timing section of a record.

    A side in `cached` (interleaved method only) is not timed: its cached block figures stand in for its
    blocks, in turn, and the record says where they came from (`reference_source`)."""
    rng = rng or random.Random()
    cached = cached or {}
    session = _Session(sides, clock, untimed=list(cached))
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
        )
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
                if refined < 2 * calls[name]:
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

    while True:
        block_inputs = inputs[block % len(inputs)]
        order = list(sides)
        rng.shuffle(order)
        before = monitor.snapshot() if monitor else {}
        for name in order:
            request = TimeRequest(block_inputs, calls[name], plan.samples, 1, precursor[name], graph=graph)
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
        clock_check=clock_check(session.claimed_ms, session.seen_ms, session.overheads_ms.get("reference"))
        if method == INTERLEAVED
        else None,
    )


REGIME_TEXT = {
    BUSY_PRECURSOR: "CUDA events around each sample's calls, behind a GPU-busy precursor that covers the host's "
    "issue of the calls (device time; launch latency hidden)",
    BACK_TO_BACK: "CUDA events around each sample's calls issued back to back (host launch cost shows where "
    "the host is slower than the GPU)",
    CUDA_GRAPH: "CUDA events around one replay of a CUDA graph of each sample's calls, behind a GPU-busy precursor "
    "(device time; launch latency hidden; every replay on other inputs than the capture's)",
    HOST_CLOCK: "host clock around each sample's calls (CPU: not a GPU speedup)",
    SINGLE_CALL: "one CUDA event pair per call on an idle GPU (KernelBench's: includes launch latency)",
    DO_BENCH: "Triton's do_bench in each worker (its own repetitions and cache clearing)",
}


def clock_summary(
    monitor: ClockMonitor | None,
    snapshots: list[dict[str, Any]],
    throttled: list[int],
    reasons: set[str],
    dropped: bool,
) -> dict[str, Any]:
    if monitor is None:
        return {"monitor": None}
    sm = [s["sm_mhz"] for s in snapshots if isinstance(s.get("sm_mhz"), (int, float))]
    return {
        "monitor": monitor.name,
        "sm_mhz_min": min(sm, default=None),
        "sm_mhz_max": max(sm, default=None),
        "throttled_blocks": throttled,
        "reasons": sorted(reasons),
        # Throttled blocks are left out of the estimate, unless every block was throttled.
        "throttled_dropped": dropped,
    }


# A candidate claiming less than this fraction of the time the parent's clock implies is flagged. Set low:
# on an H200 an honest Triton softmax claimed 0.134 of it while only the candidate sent a timed output
# back (since fixed: both sides do); a patched timer claims 0.
CLAIM_FLOOR = 0.1
# ... and only when the gap is more than the overhead's own noise: this much at least (in a CI run on a
# loaded 2-core machine an honest CPU judgment timed with one block of two samples claimed 1.37 ms where
# the parent's clock implied 14.1 ms: one scheduler delay of a request), plus NOISE_SPREADS times the
# spread of the trusted reference's per-request overhead, scaled to the candidate's number of requests.
# The gap is never measured against the requests' whole wall time: on an H200 a short kernel left on a
# side stream claimed 0.0004 of the time the parent could account for and passed, because its requests
# were mostly overhead and a tenth of their wall time was the bar (issue 19).
NOISE_MS = 20.0
NOISE_SPREADS = 4.0


def clock_check(
    claimed_ms: dict[str, float], seen_ms: dict[str, float], reference_overheads_ms: list[float] | None = None
) -> dict[str, Any]:
    """Set the candidate worker's claimed time against the parent's clock (H30: a worker that cannot be trusted).

    The parent's wall time of a request is the timed calls plus overhead (the request's transfer, warm-up
    calls, synchronisation); the precursors the parent asked for are taken out first. The reference worker
    is trusted: its overhead (seen minus claimed) estimates the candidate's, which gets the same inputs
    through the same path. What is left of the candidate's wall time after that overhead is the timed region
    the parent can account for, which the timed calls must at least roughly have taken. How far the
    reference's per-request overheads spread says how much of a gap overhead alone can make.
    """
    overhead = max(0.0, seen_ms["reference"] - claimed_ms["reference"])
    implied = seen_ms["candidate"] - overhead
    claimed = claimed_ms["candidate"]
    spread = (
        statistics.pstdev(reference_overheads_ms) if reference_overheads_ms and len(reference_overheads_ms) > 1 else 0.0
    )
    requests = max(1, len(reference_overheads_ms or ()))
    noise = NOISE_MS + NOISE_SPREADS * spread * math.sqrt(requests)
    suspicious = implied - claimed > noise and claimed < CLAIM_FLOOR * implied
    return {
        "candidate_claimed_ms": round(claimed, 3),
        "candidate_parent_ms": round(seen_ms["candidate"], 3),
        "reference_overhead_ms": round(overhead, 3),
        "candidate_implied_ms": round(implied, 3),
        "claimed_fraction": round(claimed / implied, 4) if implied > 0 else None,
        "overhead_noise_ms": round(noise, 3),
        "suspicious": suspicious,
    }
