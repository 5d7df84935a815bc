"""When to stop timing: enough precision, or a bound reached. The record says which stopped it."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from kerneljudge.timing.stats import estimate_speedup

PRECISION = "precision_reached"
MAX_BLOCKS = "max_blocks"
TIME_BUDGET = "time_budget"


@dataclass(frozen=True)
class StoppingRule:
    """Stop when the relative standard error of the speedup (the bootstrap standard error of the median
    paired log ratio) is at most `target_rse`, after at least `min_blocks`; or at `max_blocks`; or once
    `budget_s` seconds of timing have passed (after `min_blocks`)."""

    target_rse: float = 0.005
    min_blocks: int = 5
    max_blocks: int = 40
    budget_s: float = 60.0
    resamples: int = 500

    def __post_init__(self) -> None:
        if not (self.target_rse > 0 and 1 <= self.min_blocks <= self.max_blocks and self.budget_s > 0):
            raise ValueError(f"inconsistent stopping rule: {self}")

    def decide(
        self, ratios_log: Sequence[float], elapsed_s: float, rng: random.Random, blocks: int | None = None
    ) -> str | None:
        """The reason to stop now, or None to time another block. `blocks` counts the blocks timed (default:
        one per ratio); a block whose ratio could not be formed still counts toward the bounds."""
        blocks = len(ratios_log) if blocks is None else blocks
        if blocks >= self.max_blocks:
            return MAX_BLOCKS
        if blocks < self.min_blocks:
            return None
        estimate = estimate_speedup(ratios_log, rng, resamples=self.resamples)
        if estimate is not None and len(ratios_log) >= self.min_blocks and estimate.rse <= self.target_rse:
            return PRECISION
        if elapsed_s >= self.budget_s:
            return TIME_BUDGET
        return None
