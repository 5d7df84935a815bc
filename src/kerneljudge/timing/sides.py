"""What passes between the timer (timing/basic.py) and a side, the worker that times one model: a request for
samples, the samples it sends back, a graph it could not capture, and a side timed once and reused by later
timings (cached baselines, docs/batch.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kerneljudge.results.verdict import Timing
from kerneljudge.timing.plan import INTERLEAVED


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
    warming: bool = False  # a call before the measurement only, its times unused (JudgeConfig.timing_warm)
    commit_calls: int = 0  # the outputs a measured request's commit digests: the candidate's calls (0: its own)


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
