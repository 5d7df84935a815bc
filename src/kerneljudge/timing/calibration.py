"""A side's calibration before its blocks (timing/basic.py): how many calls fill one sample of the target
length, within what the parent's clock allows, and how long a GPU-busy precursor must last to cover the
host's issue of a sample's calls (docs/timing.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MAX_CALLS_PER_SAMPLE = 10_000
# A sample may take at most this many times `target_sample_ms` by the parent's clock, whatever the worker
# claims: work that escapes the timed stream (H20, a side stream) reads as microseconds in the worker's
# events, and calls sized from that alone queued minutes of GPU work per request (an H200 batch, 2026-11-30).
SAMPLE_CAP_FACTOR = 1000

# The precursor is 1.5 times the longest issue time seen plus 50 us, at most 20 ms (a candidate whose
# host work needs more is host-bound: its samples say so).
PRECURSOR_FACTOR, PRECURSOR_PAD_MS, MAX_PRECURSOR_MS = 1.5, 0.05, 20.0
CALIBRATION_PRECURSOR_MS = 0.2
# Times the calls per sample are sized again from a probe of many calls, while that at least doubles them.
MAX_RECALIBRATIONS = 2


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
