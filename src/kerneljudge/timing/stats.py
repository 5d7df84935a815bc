"""Robust statistics of raw timing samples; the samples are kept, every figure derives from them."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from kerneljudge.verdict import TimingStats


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
