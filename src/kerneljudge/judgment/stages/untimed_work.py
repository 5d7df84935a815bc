"""Untimed work on the parent's clock (H03 by H21, H30): what each side's worker took beyond the time its calls
claim, set against the trusted reference's.

The commit (worker/seal/commit.py) makes an output mended after the parent names the checked call fail its
digests, so a candidate whose code still runs in its worker after a sample (the seal blinded, the red team's
`seal_state_forger`) must do every call's work before the digests: when the `commit` comes
(`commit_window_worker`), or after every sample, before the worker says it is over (`sample_end_worker`). Either
way the work is in no event's span, but it is on the parent's clock, which sees two spans of each measured
request of each side:
- `commit`: from the parent's `commit` to the `committed` answer;
- `requests`: the request's round trip less what its calls claim and the precursors the parent asked for, per
  sample (the commit, the seal, the drains, the frames: the worker's own work around the samples).
Each is some fixed time and some time per call, alike for both sides, whose outputs are alike and whose workers
run the same code around their calls. Each side's span is its least of the judgment's requests: what the span must
do is in every one, and load (the other processes of a shared machine, a scheduler's delay) only adds to it. The
median it was until 0.3.15 rose with that load: on CI's 2-core machine a reference whose commits took 1.2 ms took
5.6 ms in three of five, and `commit_window_worker` (fifty calls' work in each commit) passed verified.

The requests' calls per sample differ, so the reference's span bounds an honest candidate's only through both parts
(`bound_check`: R (1 + n / n_ref)), to which the candidate's own claimed time per call is added (what a call's
work is, by its own account). That left room to hide most of a call's work in the commit wherever digesting an
output costs more than making it: on the 2-core CPU machine a candidate that did half its work (`relu_` of
`x + bias`, 4 MiB outputs) in the commit window passed verified at 1.15x and 1.33x with 0.3.12. Since 0.3.14 the
reference's commit digests as many outputs as the candidate's (its own in turn, protocol.Commit), so the two
commits do the same work (`matched`): the candidate's may exceed the reference's by NOISE_SHARE of it and
NOISE_FLOOR_MS, and by nothing for its calls' claimed work. NOISE_SHARE is what two processes' least spans of the
same work differ by: a quarter on a CUDA device, whose digests are fused kernels far cheaper than the work they
cover (worker/seal/digest_kernels.py); the whole on the CPU, where two processes' commits of the same outputs differed
by up to 56% (the 2-core CPU machine, 2026-12-06, judge 0.3.12) and their least by up to 48% under load (the same
machine and day, judge 0.3.15). There the digests cost tens of times the work, so half a call's work still hides in a
commit (the red team's `commit_window_half` is for CUDA only). More is work done where no timer sees it (KJ-R027).
docs/attacks.md (H03) says what is left.
"""

from __future__ import annotations

import statistics
from typing import Any

from kerneljudge.checks.catalog import finding
from kerneljudge.results.verdict import Finding

# The least untimed work per call that counts, whatever the claims (ms).
FLOOR_MS = 0.002
# What an honest candidate's least span may exceed its bound by, as a share of it, by device: the two processes
# differ besides their work (the allocator's state, the caches, a GPU's launch jitter on a few outputs). On CI's
# 2-core machine under load honest commits' least spans came within 1.48 of the reference's (2026-12-06,
# judge 0.3.15).
NOISE_SHARE = {"cpu": 1.0, "cuda": 0.25}
NOISE_FLOOR_MS = 0.25  # ... and in ms, on matched spans
MIN_SPANS = 3  # per side, for a check at all
SPANS = {"commit": "to commit to a checked sample's outputs", "requests": "around each sample of its requests"}


def bound_check(
    spans: dict[str, list[tuple[float, int]]],
    claimed_per_call_ms: float | None,
    matched: bool = False,
    share: float = NOISE_SHARE["cuda"],
) -> dict[str, Any]:
    """Each side's least span (ms, and the calls per sample it came with) and whether the candidate's is longer
    than an honest one could be (`suspicious`); where the reference's spans were not steady, the candidate's median
    must exceed the bound the reference's median sets as well.

    A span is some fixed time F and a time d per call, alike for both sides. The parent sees neither part, only
    each side's whole span; but the reference's least span R = F + n_ref d bounds both (F <= R, d <= R / n_ref),
    so an honest candidate's span with n calls is at most R (1 + n / n_ref). The candidate's may exceed that by
    its claimed time per call for each of its n calls (at least FLOOR_MS), and by `share` of it (the noise).

    `matched`: the reference's spans did the candidate's work (n = n_ref: the commit since 0.3.14), so an honest
    candidate's is R, and at most R max(1, n / n_ref) where they differ (F, d >= 0); it may exceed it by `share`
    of it and NOISE_FLOOR_MS, and by nothing for its calls' claimed work, which no commit holds (the sample's work
    is drained before it, worker/timing/timer.py)."""
    candidate, reference = spans.get("candidate", []), spans.get("reference", [])
    figures: dict[str, Any] = {"candidate_spans": len(candidate), "reference_spans": len(reference)}
    if len(candidate) < MIN_SPANS or len(reference) < MIN_SPANS or claimed_per_call_ms is None:
        return {**figures, "suspicious": False}
    calls = statistics.median(n for _, n in candidate)
    bound_calls = statistics.median(n for _, n in reference)

    def allowed(bound: float) -> float:
        if matched:
            return bound * max(1.0, calls / max(1, bound_calls)) * (1 + share) + NOISE_FLOOR_MS
        claims = calls * max(FLOOR_MS, claimed_per_call_ms)
        return bound * (1 + calls / max(1, bound_calls)) * (1 + share) + claims

    seen, bound = min(w for w, _ in candidate), min(w for w, _ in reference)
    # Load comes in bursts: on CI's 2-core machine one covered four of an honest candidate's five commits and three
    # of the reference's, so the least alone set 6.9 ms against 1.9 ms (0.3.17). Where the reference's own spans
    # show load (their median beyond the least by half the share), the medians must show the excess too: untimed
    # work is in every request.
    seen_median = statistics.median(w for w, _ in candidate)
    bound_median = statistics.median(w for w, _ in reference)
    steady = bound_median <= bound * (1 + share / 2)
    return {
        **figures,
        "candidate_least_ms": round(seen, 4),
        "candidate_median_ms": round(seen_median, 4),
        "candidate_calls": calls,
        "reference_least_ms": round(bound, 4),
        "reference_median_ms": round(bound_median, 4),
        "reference_calls": bound_calls,
        "candidate_claimed_ms_per_call": round(claimed_per_call_ms, 4),
        "noise_share": share,
        "allowed_ms": round(allowed(bound), 4),
        "allowed_median_ms": round(allowed(bound_median), 4),
        "candidate_each_ms": [round(w, 4) for w, _ in candidate],
        "reference_each_ms": [round(w, 4) for w, _ in reference],
        "matched": matched,
        "reference_steady": steady,
        "suspicious": seen > allowed(bound) and (steady or seen_median > allowed(bound_median)),
    }


def untimed_findings(checks: dict[str, dict[str, Any]]) -> list[Finding]:
    """KJ-R027 for each span whose check found the candidate's too long."""
    found = []
    for span, check in checks.items():
        if not check.get("suspicious"):
            continue
        summary = (
            f"the candidate's worker took at least {check['candidate_least_ms']:.3g} ms {SPANS[span]} with "
            f"{check['candidate_calls']:g} calls a sample, where the reference's took as little as "
            f"{check['reference_least_ms']:.3g} ms with {check['reference_calls']:g} and its calls claim "
            f"{check['candidate_claimed_ms_per_call']:.3g} ms each (medians {check['candidate_median_ms']:.3g} and "
            f"{check['reference_median_ms']:.3g} ms): work done where no timer sees it"
        )
        found.append(finding("KJ-R027", "error", summary, {"span": span, **check}))
    return found
