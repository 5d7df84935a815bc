"""The parent's clock against the candidate worker's claimed times (H30: a worker that cannot be trusted),
set with the trusted reference worker's overhead; timing/basic.py sums what each side's requests claimed
and what the parent saw (docs/timing.md).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

# A candidate claiming less than this fraction of the time the parent's clock implies is flagged. Set low:
# on an H200 an honest Triton softmax claimed 0.134 of it while only the candidate sent a timed output
# back (since fixed: both sides do); a patched timer claims 0.
CLAIM_FLOOR = 0.1
# ... and only when the gap is more than the overhead's own noise: this much at least (in a CI run on a
# loaded 2-core machine an honest CPU judgment timed with one block of two samples claimed 1.37 ms where
# the parent's clock implied 14.1 ms: one scheduler delay of a request), plus NOISE_SPREADS times the
# spread of the trusted reference's per-request overhead, scaled to the candidate's number of requests.
# The gap is never measured against the requests' whole wall time: on an H200 (judge 0.1.0) a short kernel left on a
# side stream claimed 0.0004 of the time the parent could account for and passed, because its requests were mostly
# overhead and a tenth of their wall time was the bar.
NOISE_MS = 20.0
NOISE_SPREADS = 4.0
MIN_REQUESTS = 2  # per side, for the medians


def clock_check(
    claimed_ms: dict[str, float],
    seen_ms: dict[str, float],
    reference_overheads_ms: list[float] | None = None,
    candidate_overheads_ms: list[float] | None = None,
) -> dict[str, Any]:
    """Set the candidate worker's claimed time against the parent's clock (H30: a worker that cannot be trusted).

    The parent's wall time of a request is the timed calls plus overhead (the request's transfer, warm-up
    calls, synchronisation); the precursors the parent asked for are taken out first. The reference worker
    is trusted: its overhead (seen minus claimed) estimates the candidate's, which gets the same inputs
    through the same path. What is left of the candidate's wall time after that overhead is the timed region
    the parent can account for, which the timed calls must at least roughly have taken. How far the
    reference's per-request overheads spread says how much of a gap overhead alone can make.

    With each side's overhead per request (at least MIN_REQUESTS each), the candidate's requests are set against
    the reference's by their medians (the candidate's lower one), as the speedup sets blocks against each other:
    one request the host was late for (a loaded CI machine: 353 ms in one of an honest candidate's, which then
    claimed 0.098) moves neither; work hidden in fewer than half of the requests moves neither median (with two
    requests, the lower one is the candidate's better request: a cost of robustness the finer KJ-R027 shares).
    """
    overhead = max(0.0, seen_ms["reference"] - claimed_ms["reference"])
    implied = seen_ms["candidate"] - overhead
    claimed = claimed_ms["candidate"]
    if len(reference_overheads_ms or ()) >= MIN_REQUESTS and len(candidate_overheads_ms or ()) >= MIN_REQUESTS:
        # the candidate's lower median: of two requests, the one the host was not late for
        typical, count = statistics.median_low(candidate_overheads_ms or ()), len(candidate_overheads_ms or ())
        implied = claimed + count * (typical - statistics.median(reference_overheads_ms or ()))
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
