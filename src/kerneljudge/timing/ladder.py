"""The claim ladder: how far a verified candidate's speedup claim goes, each rung cleared by a margin.

correct -> faster than torch.compile -> faster than eager -> confirmed in fresh processes. A speed
rung holds when the lower bound of its interval clears 1 + margin; the claim is the highest rung
whose lower rungs all hold. A rung that was not measured (torch.compile unavailable for the task)
is recorded as such and does not block the rungs above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kerneljudge.timing.stats import RatioEstimate

RUNGS = ("correct", "faster_than_compile", "faster_than_eager", "confirmed_fresh_processes")


@dataclass(frozen=True)
class Rung:
    name: str
    holds: bool | None  # None: not measured
    detail: str


def clears(estimate: RatioEstimate | None, margin: float) -> bool | None:
    return None if estimate is None else estimate.low > 1.0 + margin


def climb(
    correct: bool,
    vs_compile: RatioEstimate | None,
    vs_eager: RatioEstimate | None,
    confirmations: Sequence[RatioEstimate] | None,
    margin: float = 0.02,
) -> tuple[str | None, list[Rung]]:
    """The claim (highest rung reached, or None when not even correct) and every rung's evidence."""

    def describe(e: RatioEstimate | None) -> str:
        return "not measured" if e is None else f"{e.speedup:.4g}x [{e.low:.4g}, {e.high:.4g}]"

    confirmed: bool | None = None
    if confirmations:
        confirmed = all(clears(c, margin) for c in confirmations)
    rungs = [
        Rung("correct", correct, "verified" if correct else "not verified"),
        Rung("faster_than_compile", clears(vs_compile, margin), describe(vs_compile)),
        Rung("faster_than_eager", clears(vs_eager, margin), describe(vs_eager)),
        Rung(
            "confirmed_fresh_processes",
            confirmed,
            "not run"
            if not confirmations
            else f"{len(confirmations)} fresh pair(s): " + "; ".join(map(describe, confirmations)),
        ),
    ]
    claim = None
    for rung in rungs:
        if rung.holds is None and rung.name != "confirmed_fresh_processes":
            continue  # unmeasured: neither climbed nor blocking
        if not rung.holds:
            break
        claim = rung.name
    return claim, rungs
