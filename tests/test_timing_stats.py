"""Timing statistics, the stopping rule, the parent-clock cross-check and the claim ladder, with a fake clock."""

import math
import random

import pytest

from kerneljudge.timing.basic import TimingPlan, run_interleaved
from kerneljudge.timing.ladder import climb
from kerneljudge.timing.stats import RatioEstimate, estimate_speedup, log_ratios
from kerneljudge.timing.stopping import MAX_BLOCKS, PRECISION, TIME_BUDGET, StoppingRule


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class NoisySide:
    """A worker whose calls take `per_call_ms` with multiplicative noise; it may claim a fraction only."""

    def __init__(self, clock, per_call_ms, noise=0.0, seed=0, claims=1.0, overhead_ms=2.0):
        self.clock, self.per_call_ms, self.noise, self.claims = clock, per_call_ms, noise, claims
        self.overhead_ms = overhead_ms
        self.rng = random.Random(seed)

    def __call__(self, inputs, calls, samples, warmup):
        times = [self.per_call_ms * math.exp(self.rng.gauss(0.0, self.noise)) for _ in range(samples)]
        self.clock.now += (sum(times) * calls + warmup * self.per_call_ms + self.overhead_ms) / 1e3
        return [t * self.claims for t in times]


def timing_of(candidate_ms, reference_ms, noise=0.0, claims=1.0, device="cuda", **plan):
    clock = FakeClock()
    sides = {
        "candidate": NoisySide(clock, candidate_ms, noise, seed=1, claims=claims),
        "reference": NoisySide(clock, reference_ms, noise, seed=2),
    }
    return run_interleaved(sides, [None], TimingPlan(**plan), device, random.Random(0), clock)


def test_paired_log_ratios_give_the_speedup_and_an_interval_around_it():
    timing = timing_of(0.5, 1.0, noise=0.02)
    low, high = timing.speedup_interval
    assert low <= timing.speedup <= high and high - low < 0.1
    assert timing.speedup == pytest.approx(2.0, rel=0.02) and timing.interval_level == 0.95


def test_a_quiet_pair_stops_on_precision_a_noisy_one_on_the_block_limit():
    quiet = timing_of(0.5, 1.0, noise=0.001)
    assert quiet.stop_reason == PRECISION and len(quiet.block_ratios) == 5 and quiet.speedup_rse <= 0.005
    noisy = timing_of(0.5, 1.0, noise=0.3, max_blocks=12)
    assert noisy.stop_reason == MAX_BLOCKS and len(noisy.block_ratios) == 12 and noisy.speedup_rse > 0.005


def test_the_time_budget_stops_timing_after_the_minimum():
    slow = timing_of(5.0, 10.0, noise=0.3, budget_s=0.5)
    assert slow.stop_reason == TIME_BUDGET and len(slow.block_ratios) == 5


def test_on_the_cpu_the_minimum_number_of_blocks_is_taken():
    cpu = timing_of(0.5, 1.0, noise=0.3, device="cpu")
    assert cpu.stop_reason == MAX_BLOCKS and len(cpu.block_ratios) == 5


def test_stopping_rule_decisions():
    rule = StoppingRule(target_rse=0.01, min_blocks=3, max_blocks=6, budget_s=10.0)
    rng = random.Random(0)
    assert rule.decide([0.7, 0.7], 0.0, rng) is None
    assert rule.decide([0.7, 0.7, 0.7], 0.0, rng) == PRECISION
    assert rule.decide([0.1, 0.9, 0.4], 0.0, rng) is None
    assert rule.decide([0.1, 0.9, 0.4], 11.0, rng) == TIME_BUDGET
    assert rule.decide([0.1, 0.9, 0.4, 0.2, 0.8, 0.5], 0.0, rng) == MAX_BLOCKS
    assert rule.decide([], 0.0, rng, blocks=6) == MAX_BLOCKS  # blocks without a ratio still count
    assert rule.decide([], 11.0, rng, blocks=3) == TIME_BUDGET
    with pytest.raises(ValueError):
        StoppingRule(min_blocks=5, max_blocks=4)


def test_log_ratios_drop_non_positive_blocks_and_estimates_need_data():
    assert log_ratios([2.0, 1.0, 3.0], [1.0, 0.0, 3.0]) == [math.log(2.0), 0.0]
    assert estimate_speedup([], random.Random(0)) is None
    single = estimate_speedup([math.log(2.0)], random.Random(0))
    assert single.speedup == pytest.approx(2.0) and single.low == 0.0 and single.high == math.inf


def test_an_honest_worker_passes_the_clock_check_and_a_lying_one_does_not():
    honest = timing_of(0.5, 1.0, noise=0.01)
    assert honest.clock_check["suspicious"] is False
    assert 0.9 < honest.clock_check["claimed_fraction"] < 1.1
    liar = timing_of(0.5, 1.0, noise=0.01, claims=0.01)  # its timer reports a hundredth of the truth
    assert liar.clock_check["suspicious"] is True and liar.clock_check["claimed_fraction"] < 0.05
    # Overhead only the candidate pays (as when only its output was sent back, measured at 0.134 on an
    # H200) is not mistaken for an under-reported time.
    clock = FakeClock()
    sides = {
        "candidate": NoisySide(clock, 0.5, 0.01, seed=1, overhead_ms=40.0),
        "reference": NoisySide(clock, 1.0, 0.01, seed=2),
    }
    burdened = run_interleaved(sides, [None], TimingPlan(), "cuda", random.Random(0), clock)
    assert burdened.clock_check["claimed_fraction"] < 0.5 and burdened.clock_check["suspicious"] is False
    zero = timing_of(0.5, 1.0, claims=0.0)  # claims no time at all: no ratio, yet bounded (its calls are slow)
    assert zero.speedup is None and zero.stop_reason == TIME_BUDGET and zero.clock_check["suspicious"] is True


def estimate(speedup, low, high):
    return RatioEstimate(speedup, low, high, 0.95, 0.01, 10)


def test_the_ladder_climbs_only_while_each_lower_bound_clears_the_margin():
    fast = estimate(1.5, 1.4, 1.6)
    marginal = estimate(1.03, 1.01, 1.05)  # faster, but the interval does not clear 2%
    assert climb(False, fast, fast, [fast])[0] is None
    assert climb(True, None, marginal, None)[0] == "correct"
    assert climb(True, None, fast, None)[0] == "faster_than_eager"  # compile not measured: not blocking
    assert climb(True, marginal, fast, [fast])[0] == "correct"
    assert climb(True, fast, fast, [fast, fast])[0] == "confirmed_fresh_processes"
    claim, rungs = climb(True, fast, fast, [fast, marginal])
    assert claim == "faster_than_eager" and rungs[-1].holds is False
    assert [r.name for r in rungs] == [
        "correct",
        "faster_than_compile",
        "faster_than_eager",
        "confirmed_fresh_processes",
    ]


def test_flush_size_is_twice_the_l2_at_least_64_mib_and_kernelbenchs_256_mb_natively():
    from kerneljudge.pipeline import l2_flush_bytes

    assert l2_flush_bytes({"l2_cache_bytes": 62914560}, native=False) == 2 * 62914560  # an H200's 60 MiB
    assert l2_flush_bytes({"l2_cache_bytes": 4 * 2**20}, native=False) == 64 * 2**20
    assert l2_flush_bytes(None, native=False) == 64 * 2**20
    assert l2_flush_bytes({"l2_cache_bytes": 62914560}, native=True) == 256 * 2**20
