"""Interleaved block timing of candidate and reference, each in its own worker.

Each side is first calibrated (how many calls fill one sample of the target
length), then blocks alternate candidate and reference in a random order; the
speedup is the median of per-block ratios of medians, never a ratio of two
unrelated means. The parent times every request with its own clock, so a
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

from kerneljudge.timing.stats import summarize
from kerneljudge.verdict import Timing

# time_side(inputs, calls, samples, warmup) -> per-call milliseconds of each sample
TimeSide = Callable[[Any, int, int, int], list[float]]

MAX_CALLS_PER_SAMPLE = 10_000


@dataclass(frozen=True)
class TimingPlan:
    blocks: int = 5
    samples: int = 10
    warmup: int = 2
    target_sample_ms: float = 1.0
    native: bool = False
    native_trials: int = 100


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
    ratios: list[float] = []

    def timed(name: str, block_inputs: Any, calls: int, count: int, warmup: int) -> list[float]:
        start = clock()
        values = sides[name](block_inputs, calls, count, warmup)
        observed_ms[name] += (clock() - start) * 1e3
        return values

    if plan.native:
        calls = {name: 1 for name in sides}
        for name in sides:
            samples[name] = timed(name, inputs[0], 1, plan.native_trials, 3)
        means = {name: statistics.fmean(v) for name, v in samples.items()}
        speedup = means["reference"] / means["candidate"] if means["candidate"] > 0 else None
        method, regime = "kernelbench_native", "one call per sample, mean of samples"
    else:
        calls = {
            name: calls_for(statistics.median(timed(name, inputs[0], 1, 3, plan.warmup)), plan.target_sample_ms)
            for name in sides
        }
        for block in range(plan.blocks):
            block_inputs = inputs[block % len(inputs)]
            order = list(sides)
            rng.shuffle(order)
            medians = {}
            for name in order:
                values = timed(name, block_inputs, calls[name], plan.samples, 1)
                samples[name].extend(values)
                medians[name] = statistics.median(values)
            if medians["candidate"] > 0:
                ratios.append(medians["reference"] / medians["candidate"])
        speedup = statistics.median(ratios) if ratios else None
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
        parent_observed_ms={k: round(v, 3) for k, v in observed_ms.items()},
    )
