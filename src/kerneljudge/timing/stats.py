"""Robust statistics of raw timing samples; the samples are kept, every figure derives from them."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from kerneljudge.results.verdict import TimingStats


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values, q in [0, 100]."""
    if not sorted_values:
        raise ValueError("percentile of no samples")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples_ms: Sequence[float]) -> TimingStats:
    values = sorted(samples_ms)
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    return TimingStats(
        median_ms=statistics.median(values),
        p95_ms=percentile(values, 95),
        min_ms=values[0],
        max_ms=values[-1],
        mean_ms=mean,
        cv=stdev / mean if mean > 0 else 0.0,
        count=len(values),
        samples_ms=list(samples_ms),
    )


def log_ratios(reference_ms: Sequence[float], candidate_ms: Sequence[float]) -> list[float]:
    """Paired per-block log speedups, ln(reference / candidate); blocks with a non-positive time are dropped."""
    return [math.log(r / c) for r, c in zip(reference_ms, candidate_ms, strict=True) if r > 0 and c > 0]


def bootstrap_medians(values: Sequence[float], rng: random.Random, resamples: int = 2000) -> list[float]:
    """Medians of `resamples` resamples (with replacement) of values, sorted."""
    n = len(values)
    return sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))


@dataclass(frozen=True)
class RatioEstimate:
    """The speedup as exp(median of paired log ratios), with a percentile bootstrap interval."""

    speedup: float
    low: float
    high: float
    level: float
    rse: float  # bootstrap standard error of the median log ratio = relative standard error of the speedup
    blocks: int


def estimate_speedup(
    ratios_log: Sequence[float], rng: random.Random, level: float = 0.95, resamples: int = 2000
) -> RatioEstimate | None:
    if not ratios_log:
        return None
    center = statistics.median(ratios_log)
    if len(ratios_log) == 1:
        return RatioEstimate(math.exp(center), 0.0, math.inf, level, math.inf, 1)
    medians = bootstrap_medians(ratios_log, rng, resamples)
    tail = (1.0 - level) / 2 * 100
    return RatioEstimate(
        speedup=math.exp(center),
        low=math.exp(percentile(medians, tail)),
        high=math.exp(percentile(medians, 100 - tail)),
        level=level,
        rse=statistics.stdev(medians),
        blocks=len(ratios_log),
    )
