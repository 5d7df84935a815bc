"""The device-wide bracket of a timed sample: no timing reports less device time than every stream took.

A CUDA event pair times the stream it is recorded on. A call that forks work onto another stream and
returns without making its own stream wait for it (H20) leaves that work outside the pair: on an H200
(judge 0.1.0) a 70 us Triton softmax on a side stream read as 0.3 us a call, a 460x speedup. Timed in a CUDA
graph it cannot hide (a capture with unjoined work fails: checks/trace.py, `unjoined_capture`); timed
without one, the worker drains each sample, waiting for the whole device after the sample's end event and
recording an event after that, and measures once what draining an idle device takes (worker/timing/timer.py).
Here, in the parent, what a sample's drain took beyond the idle floor and a slack for the host's wake-up
is work the end event did not cover: it is added to the sample's time, and where most samples had some,
the call left work behind (KJ-R024). The figures come from the candidate's own process like every
timing figure; a worker that lies about them is the parent-clock cross-check's to catch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from kerneljudge.checks.catalog import finding
from kerneljudge.results.verdict import Finding

# A drain may take this much longer than the idle floor without counting: the host's wake-up from the wait
# and the next record vary by tens of microseconds.
DRAIN_SLACK_MS = 0.05
# Work left behind in at least this share of a side's samples is an escape, not a slow wake-up now and then.
LEFT_BEHIND_SHARE = 0.5
# ... where what a sample left behind is more than this share of the sample's own (event-timed) time. An escape
# leaves most of its work outside the events, so its events read a fraction of what the drain waits for (issue
# 19's: 0.03 ms against 7 ms); an honest sample of 8.6 ms left 0.04 ms beyond the slack in 28 and 30 of 50
# samples on an H100 (KernelBench's 46_Average_Pooling_3D, reference against itself, 2026-12-05: KJ-R024 read
# as an escape). The work left is added to every sample's time whatever its share (`covered`).
MATERIAL_SHARE = 0.05


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def left_behind(drain_ms: Sequence[float], floor_ms: float) -> list[float]:
    """Per sample, the device time its drain took beyond the idle floor and the slack (0 where none)."""
    return [max(0.0, d - floor_ms - DRAIN_SLACK_MS) for d in drain_ms]


def covered(times_ms: Sequence[float], calls: int, leftover_ms: Sequence[float]) -> list[float]:
    """Per-call times of samples whose end event missed `leftover_ms` of device work: that work added."""
    return [t + left / max(1, calls) for t, left in zip(times_ms, leftover_ms, strict=True)]


def drain_finding(leftover_ms: Sequence[float], sample_ms: Sequence[float]) -> Finding | None:
    """KJ-R024 when work outlived the end event in most of the candidate's drained samples, by more than a
    `MATERIAL_SHARE` of what each sample's events timed (`sample_ms`, all its calls)."""
    if not leftover_ms:
        return None
    late = [x for x, timed in zip(leftover_ms, sample_ms, strict=True) if x > 0 and x > MATERIAL_SHARE * timed]
    if len(late) < LEFT_BEHIND_SHARE * len(leftover_ms):
        return None
    return finding(
        "KJ-R024",
        "error",
        f"in {len(late)} of {len(leftover_ms)} timed samples the device still ran the call's work after the "
        "call's stream had finished: work left on another stream, outside the timed events",
        {
            "source": "timing_drain",
            "samples_with_work_left": len(late),
            "samples": len(leftover_ms),
            "median_left_ms": round(statistics.median(late), 4),
        },
    )
