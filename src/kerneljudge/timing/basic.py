"""Interleaved block timing of candidate and reference, each in its own worker.

Each side is first calibrated (how many calls fill one sample of the target
length), then blocks alternate candidate and reference in a random order until
the stopping rule is satisfied; the speedup is exp(median of the paired per-block
log ratios of medians) with a bootstrap interval, never a ratio of two unrelated
means. The parent times every request with its own clock, so a
worker's reported figures can be set against what the parent saw. The native
variant reproduces KernelBench's timing (one call per event pair, 100 trials,
mean) for `--mode off`.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kerneljudge.timing.stats import estimate_speedup, log_ratios, summarize
from kerneljudge.timing.stopping import StoppingRule
from kerneljudge.verdict import Timing

# time_side(inputs, calls, samples, warmup) -> per-call milliseconds of each sample
TimeSide = Callable[[Any, int, int, int], list[float]]

MAX_CALLS_PER_SAMPLE = 10_000


@dataclass(frozen=True)
class TimingPlan:
    blocks: int = 5  # the minimum; the stopping rule may take more on CUDA
    samples: int = 10
    warmup: int = 2
    target_sample_ms: float = 1.0
    native: bool = False
    native_trials: int = 100
    max_blocks: int = 40
    target_rse: float = 0.005
    budget_s: float = 60.0

    def rule(self, device: str) -> StoppingRule:
        # On the CPU the figure is not a GPU speedup: the minimum number of blocks is enough.
        most = max(self.blocks, self.max_blocks) if device == "cuda" else self.blocks
        return StoppingRule(target_rse=self.target_rse, min_blocks=self.blocks, max_blocks=most, budget_s=self.budget_s)


def calls_for(estimate_ms: float, target_ms: float) -> int:
    if estimate_ms <= 0:
        return MAX_CALLS_PER_SAMPLE
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(target_ms / estimate_ms)))


def run_interleaved(
    sides: dict[str, TimeSide],
    inputs: Sequence[Any],
    plan: TimingPlan,
    device: str,
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Time `candidate` and `reference` (keys of sides) and return the timing section of a record."""
    rng = rng or random.Random()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    observed_ms: dict[str, float] = {name: 0.0 for name in sides}
    # For the cross-check, measured requests only (not the calibration): what the worker claims its timed
    # calls took in all, and what the parent's clock saw for the whole request.
    claimed_ms: dict[str, float] = {name: 0.0 for name in sides}
    seen_ms: dict[str, float] = {name: 0.0 for name in sides}
    ratios: list[float] = []

    def timed(name: str, block_inputs: Any, calls: int, count: int, warmup: int, measured: bool = True) -> list[float]:
        start = clock()
        values = sides[name](block_inputs, calls, count, warmup)
        elapsed = (clock() - start) * 1e3
        observed_ms[name] += elapsed
        if measured:
            claimed_ms[name] += sum(values) * calls
            seen_ms[name] += elapsed
        return values

    if plan.native:
        calls = {name: 1 for name in sides}
        for name in sides:
            samples[name] = timed(name, inputs[0], 1, plan.native_trials, 3)
        means = {name: statistics.fmean(v) for name, v in samples.items()}
        speedup = means["reference"] / means["candidate"] if means["candidate"] > 0 else None
        method, regime = "kernelbench_native", "one call per sample, mean of samples"
        estimate, stop_reason = None, "native_trials"
    else:
        calls = {
            name: calls_for(
                statistics.median(timed(name, inputs[0], 1, 3, plan.warmup, measured=False)), plan.target_sample_ms
            )
            for name in sides
        }
        rule = plan.rule(device)
        began = clock()
        reference_medians: list[float] = []
        candidate_medians: list[float] = []
        block = 0
        while True:
            block_inputs = inputs[block % len(inputs)]
            order = list(sides)
            rng.shuffle(order)
            medians = {}
            for name in order:
                values = timed(name, block_inputs, calls[name], plan.samples, 1)
                samples[name].extend(values)
                medians[name] = statistics.median(values)
            reference_medians.append(medians["reference"])
            candidate_medians.append(medians["candidate"])
            if medians["candidate"] > 0:
                ratios.append(medians["reference"] / medians["candidate"])
            block += 1
            stop_reason = rule.decide(
                log_ratios(reference_medians, candidate_medians), clock() - began, rng, blocks=block
            )
            if stop_reason is not None:
                break
        estimate = estimate_speedup(log_ratios(reference_medians, candidate_medians), rng)
        speedup = estimate.speedup if estimate is not None else None
        method = "interleaved_blocks"
        regime = (
            "CUDA events around each sample's calls"
            if device == "cuda"
            else "host clock around each sample's calls (CPU: not a GPU speedup)"
        )
    return Timing(
        measured=True,
        device=device,
        method=method,
        regime=regime,
        calls_per_sample=calls,
        candidate=summarize(samples["candidate"]),
        reference=summarize(samples["reference"]),
        block_ratios=ratios,
        speedup=speedup,
        speedup_interval=[estimate.low, estimate.high] if estimate is not None else None,
        interval_level=estimate.level if estimate is not None else None,
        speedup_rse=estimate.rse if estimate is not None and math.isfinite(estimate.rse) else None,
        stop_reason=stop_reason,
        parent_observed_ms={k: round(v, 3) for k, v in observed_ms.items()},
        clock_check=clock_check(claimed_ms, seen_ms),
    )


# A candidate claiming less than this fraction of the time the parent's clock implies is flagged. Set low:
# on an H200 an honest Triton softmax claimed 0.134 of it while only the candidate sent a timed output
# back (since fixed: both sides do); a patched timer claims 0.
CLAIM_FLOOR = 0.1
NOISE_MS = 5.0


def clock_check(claimed_ms: dict[str, float], seen_ms: dict[str, float]) -> dict[str, Any]:
    """Set the candidate worker's claimed time against the parent's clock (H30: a worker that cannot be trusted).

    The parent's wall time of a request is the timed calls plus overhead (the request's transfer, warm-up
    calls, synchronisation). The reference worker is trusted: its overhead (seen minus claimed) estimates
    the candidate's, which gets the same inputs through the same path. What is left of the candidate's
    wall time after that overhead is what its timed calls must at least roughly have taken.
    """
    overhead = max(0.0, seen_ms["reference"] - claimed_ms["reference"])
    implied = seen_ms["candidate"] - overhead
    claimed = claimed_ms["candidate"]
    suspicious = implied - claimed > max(NOISE_MS, 0.1 * seen_ms["candidate"]) and claimed < CLAIM_FLOOR * implied
    return {
        "candidate_claimed_ms": round(claimed, 3),
        "candidate_parent_ms": round(seen_ms["candidate"], 3),
        "reference_overhead_ms": round(overhead, 3),
        "candidate_implied_ms": round(implied, 3),
        "claimed_fraction": round(claimed / implied, 4) if implied > 0 else None,
        "suspicious": suspicious,
    }
