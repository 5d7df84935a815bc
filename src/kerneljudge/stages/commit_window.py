"""The commit's time on the parent's clock (H03 by H21, H30): each side's time from the parent's `commit` to its
`committed`, per call digested, set against the other's.

The commit (worker/sample_commit.py) makes an output mended after the parent names the checked call fail its
digests. A candidate whose code still runs in its worker after a sample (the seal blinded, `seal_state_forger`)
can instead do the checked sample's work when the `commit` comes, before the digests: every call's, since the call
is not yet named, in time that no event of the worker's covers. That time is on the parent's clock: the commit of
an honest candidate digests outputs alike the reference's, and the reference's commit bounds what it may take
(`window_check`), to which the candidate's own claimed time per call (what a call's work is, by its own account)
is added; more is work done where it is not timed (KJ-R027). What a candidate can still hide there is about its
claimed time per call, plus its share of the reference's commit: docs/attacks.md (H03) says what is left.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from kerneljudge.checks.catalog import finding
from kerneljudge.verdict import Finding

# The least untimed work per call that counts, whatever the claims (ms).
FLOOR_MS = 0.002
# ... beyond the noise allowance: this many standard errors of the reference's median commit.
NOISE_SPREADS = 4.0
MIN_COMMITS = 3  # per side, for a check at all


def window_check(windows: dict[str, list[tuple[float, int]]], claimed_per_call_ms: float | None) -> dict[str, Any]:
    """Each side's median commit (ms, and the calls it digested) and whether the candidate's is longer than an
    honest one could be (`suspicious`).

    A commit is some fixed time F (the round trip, the frames) and a time d per call's output digested, alike for
    both sides, whose outputs are alike. The parent sees neither part, only each side's whole commit; but the
    reference's commit R = F + n_ref d bounds both (F <= R, d <= R / n_ref), so an honest candidate's commit of
    n calls is at most R (1 + n / n_ref). The candidate's may exceed that by its claimed time per call for each of
    its n calls (at least FLOOR_MS), and by the noise of R; more is work done where no event of its worker's is."""
    candidate, reference = windows.get("candidate", []), windows.get("reference", [])
    figures: dict[str, Any] = {"candidate_commits": len(candidate), "reference_commits": len(reference)}
    if len(candidate) < MIN_COMMITS or len(reference) < MIN_COMMITS or claimed_per_call_ms is None:
        return {**figures, "suspicious": False}
    seen, calls = statistics.median(w for w, _ in candidate), statistics.median(n for _, n in candidate)
    bound, bound_calls = statistics.median(w for w, _ in reference), statistics.median(n for _, n in reference)
    spread = statistics.pstdev([w for w, _ in reference])
    error = 1.2533 * spread / math.sqrt(len(reference))  # a median's standard error, as a mean's x sqrt(pi/2)
    honest = bound * (1 + calls / max(1, bound_calls))
    allowed = honest + calls * max(FLOOR_MS, claimed_per_call_ms) + NOISE_SPREADS * error * (1 + calls / bound_calls)
    return {
        **figures,
        "candidate_ms": round(seen, 4),
        "candidate_calls": calls,
        "reference_ms": round(bound, 4),
        "reference_calls": bound_calls,
        "candidate_claimed_ms_per_call": round(claimed_per_call_ms, 4),
        "allowed_ms": round(allowed, 4),
        "suspicious": seen > allowed,
    }


def window_findings(check: dict[str, Any]) -> list[Finding]:
    if not check.get("suspicious"):
        return []
    summary = (
        f"the candidate's worker took {check['candidate_ms']:.3g} ms to commit to the outputs of a checked sample of "
        f"{check['candidate_calls']:g} calls, where the reference's took {check['reference_ms']:.3g} ms for "
        f"{check['reference_calls']:g} and its calls claim {check['candidate_claimed_ms_per_call']:.3g} ms each: "
        f"work done where no timer sees it"
    )
    return [finding("KJ-R027", "error", summary, check)]
