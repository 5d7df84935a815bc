"""The record's figures of a measurement beyond its statistics (timing/stats.py): the timed calls' own busy
time, against which the timing stage's busy share is read (judgment/stages/record.py), and the timings at several
shapes as one, their speedups' geometric mean (a GPU MODE problem's benchmarks, judgment/stages/timing.py).
"""

from __future__ import annotations

import math
from typing import Any

from kerneljudge.results.verdict import Timing
from kerneljudge.tasks.shapes import plain


def timed_busy_s(timing: Timing, measured: list[str]) -> float | None:
    """The timed calls' own time in seconds, the sides named in `measured` together (not the cached ones):
    each sample's per-call time times the calls in a sample."""
    if not timing.measured:
        return None
    stats = {"candidate": timing.candidate, "reference": timing.reference, "compiled": timing.compiled}
    total_ms = sum(
        sum(found.samples_ms) * timing.calls_per_sample.get(name, 1)
        for name, found in stats.items()
        if found is not None and name in measured
    )
    return round(total_ms / 1e3, 6)


def combined_timing(measured: list[tuple[dict[str, Any], Timing]]) -> Timing:
    """Timings at several shapes as one: the last shape's record, with the speedup (and each end of its
    interval) the geometric mean over the shapes, and every shape's own figures in `shapes`. The interval of
    the mean is not a confidence interval of it: each shape's is, and `shapes` keeps them."""
    last = measured[-1][1].model_copy(deep=True)
    busy = [t.timed_busy_s for _, t in measured if t.timed_busy_s is not None]
    last.timed_busy_s = round(sum(busy), 6) if busy else None
    timed = [t for _, t in measured if t.measured and t.speedup]
    last.shapes = [
        {
            "shape": {name: plain(tree) for name, tree in shape.items()},
            "speedup": t.speedup,
            "interval": t.speedup_interval,
            "candidate_ms": t.candidate.median_ms if t.candidate else None,
            "reference_ms": t.reference.median_ms if t.reference else None,
            "reason": t.reason,
        }
        for shape, t in measured
    ]
    if len(timed) != len(measured):
        last.measured, last.speedup, last.speedup_interval = False, None, None
        last.reason = f"timed at {len(timed)} of {len(measured)} timing shapes"
        return last

    def geomean(values: list[float]) -> float:
        return math.exp(sum(math.log(v) for v in values) / len(values))

    last.speedup = geomean([t.speedup for t in timed])
    intervals = [t.speedup_interval for t in timed]
    if all(intervals):
        last.speedup_interval = [geomean([i[0] for i in intervals]), geomean([i[1] for i in intervals])]
    last.regime = (last.regime or "") + f"; geometric mean over {len(timed)} timing shapes"
    return last
