"""Timing statistics, the stopping rule, the parent-clock cross-check and the claim ladder, with a fake clock."""

import math
import random

import pytest

from helpers import hello_frame
from kerneljudge.protocol.wire import timed_set
from kerneljudge.timing import crosscheck
from kerneljudge.timing.basic import run_interleaved
from kerneljudge.timing.calibration import CALIBRATION_PRECURSOR_MS
from kerneljudge.timing.clocks import throttle_reasons
from kerneljudge.timing.ladder import climb
from kerneljudge.timing.plan import TimingPlan
from kerneljudge.timing.sides import GraphUnsupported, SampleTimes
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

    host_ms_per_call = 0.002  # the host issues a call in 2 us

    def __call__(self, request):
        times = [self.per_call_ms * math.exp(self.rng.gauss(0.0, self.noise)) for _ in range(request.samples)]
        host = [self.host_ms_per_call * request.calls] * request.samples
        busy = [request.precursor_ms] * request.samples
        # Each sample takes the longer of its precursor and the host's issue, then the calls' device time.
        paced = sum(max(b, h) for b, h in zip(busy, host, strict=True))
        wall = sum(times) * request.calls + request.warmup * self.per_call_ms + paced + self.overhead_ms
        self.clock.now += wall / 1e3
        return SampleTimes([t * self.claims for t in times], host, busy)


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
    # A launch-bound candidate: the host needs 20x its device time to issue each call. Its request's wall
    # time is mostly the issue, which the cross-check accounts for.
    clock = FakeClock()
    launch_bound = NoisySide(clock, 0.005, 0.01, seed=1)
    launch_bound.host_ms_per_call = 0.1
    sides = {"candidate": launch_bound, "reference": NoisySide(clock, 0.01, 0.01, seed=2)}
    honest_host_bound = run_interleaved(sides, [None], TimingPlan(), "cuda", random.Random(0), clock)
    assert honest_host_bound.clock_check["suspicious"] is False, honest_host_bound.clock_check
    zero = timing_of(0.5, 1.0, claims=0.0)  # claims no time at all: no ratio, yet bounded (its calls are slow)
    assert zero.speedup is None and zero.stop_reason == TIME_BUDGET and zero.clock_check["suspicious"] is True
    assert zero.calls_per_sample["candidate"] <= 2000  # the parent's clock: 0.5 ms a call, 1 s a sample


def test_a_claim_far_below_what_the_parent_accounts_for_is_flagged_however_large_the_overhead():
    """As seen on an H200 (judge 0.1.0): a short kernel left on a side stream (70 us of work a call, 0.3 us claimed) in
    requests that are mostly overhead (600 ms each, both sides). The gap is a tenth of the requests' wall time at
    most, and was let through; what the parent can account for, the wall less the reference's overhead, exposes
    it."""
    clock = FakeClock()
    sides = {
        "candidate": NoisySide(clock, 0.07, 0.01, seed=1, claims=0.3 / 70, overhead_ms=600.0),
        "reference": NoisySide(clock, 0.141, 0.01, seed=2, overhead_ms=600.0),
    }
    check = run_interleaved(sides, [None], TimingPlan(), "cuda", random.Random(0), clock).clock_check
    assert check["candidate_implied_ms"] - check["candidate_claimed_ms"] < 0.1 * check["candidate_parent_ms"]
    assert check["suspicious"] is True and check["claimed_fraction"] < 0.01


class JitteryOverhead(NoisySide):
    """A side whose requests' overhead varies by tens of milliseconds (a loaded host)."""

    def __call__(self, request):
        base, self.overhead_ms = self.overhead_ms, self.overhead_ms + self.rng.uniform(0.0, 200.0)
        try:
            return super().__call__(request)
        finally:
            self.overhead_ms = base


def test_the_bar_rises_with_the_spread_of_the_references_own_overhead(monkeypatch):
    """An honest candidate on a host whose request overhead jitters by up to 200 ms: its requests happened to
    pay 280 ms more overhead than the reference's, ten times its timed calls, and the spread of the
    reference's overheads, measured, says that gap is noise. Without the spread it would be flagged."""

    def check():
        clock = FakeClock()
        sides = {
            "candidate": JitteryOverhead(clock, 0.01, 0.01, seed=3, overhead_ms=50.0),
            "reference": JitteryOverhead(clock, 0.01, 0.01, seed=7, overhead_ms=50.0),
        }
        return run_interleaved(sides, [None], TimingPlan(max_blocks=5), "cuda", random.Random(0), clock).clock_check

    honest = check()
    assert honest["claimed_fraction"] < 0.1 and honest["overhead_noise_ms"] > 100.0, honest
    assert honest["suspicious"] is False
    monkeypatch.setattr(crosscheck, "NOISE_SPREADS", 0.0)
    assert check()["suspicious"] is True


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
    from kerneljudge.judgment.pipeline import l2_flush_bytes

    assert l2_flush_bytes(hello_frame(l2_cache_bytes=62914560), native=False) == 2 * 62914560  # an H200's 60 MiB
    assert l2_flush_bytes(hello_frame(l2_cache_bytes=4 * 2**20), native=False) == 64 * 2**20
    assert l2_flush_bytes(None, native=False) == 64 * 2**20
    assert l2_flush_bytes(hello_frame(l2_cache_bytes=62914560), native=True) == 256 * 2**20


class HostHeavySide(NoisySide):
    """Issuing one call takes the host `host_ms_per_call`, and more after the first blocks."""

    def __init__(self, clock, per_call_ms, host_ms_per_call, slower_after=None):
        super().__init__(clock, per_call_ms, seed=3)
        self.host, self.slower_after, self.requests = host_ms_per_call, slower_after, []

    def __call__(self, request):
        self.requests.append(request)
        result = super().__call__(request)
        host = self.host * (3 if self.slower_after and len(self.requests) > self.slower_after else 1)
        return SampleTimes(result.times_ms, [host * request.calls] * request.samples)


def test_the_busy_precursor_covers_the_hosts_issue_time_and_grows_when_it_does_not():
    clock = FakeClock()
    candidate = HostHeavySide(clock, 0.01, 0.004, slower_after=4)  # 100 calls: 0.4 ms to issue, then 1.2 ms
    sides = {"candidate": candidate, "reference": NoisySide(clock, 0.02, seed=2)}
    timing = run_interleaved(sides, [None], TimingPlan(regime="busy_precursor"), "cuda", random.Random(0), clock)
    assert timing.launch_regime == "busy_precursor"
    calibration = [r for r in candidate.requests if not r.measured]
    assert calibration[0].precursor_ms == CALIBRATION_PRECURSOR_MS and calibration[1].precursor_ms == 0.0
    measured = [r for r in candidate.requests if r.measured]
    assert measured[0].precursor_ms == pytest.approx(1.5 * 0.4 + 0.05)
    # The host slowed down: those samples were host-bound, and later blocks got a longer precursor.
    assert timing.host_bound_samples["candidate"] > 0 and timing.host_bound_samples["reference"] == 0
    assert measured[-1].precursor_ms == pytest.approx(1.5 * 1.2 + 0.05)
    assert timing.precursor_ms["candidate"] == pytest.approx(1.85)
    assert timing.host_ms_per_call["candidate"] > timing.host_ms_per_call["reference"]
    assert timing.speedup == pytest.approx(2.0)
    back_to_back = run_interleaved(sides, [None], TimingPlan(regime="back_to_back"), "cuda", random.Random(0), clock)
    assert back_to_back.launch_regime == "back_to_back" and back_to_back.precursor_ms == {}


class GraphSide(HostHeavySide):
    """A side that cannot be captured in a CUDA graph when `capturable` is False."""

    def __init__(self, clock, per_call_ms, capturable=True):
        super().__init__(clock, per_call_ms, 0.004)
        self.capturable = capturable

    def __call__(self, request):
        if request.graph and not self.capturable:
            raise GraphUnsupported("the candidate side: operation not permitted when stream is capturing")
        return super().__call__(request)


def test_the_cuda_graph_regime_replays_behind_a_precursor_and_says_when_a_side_cannot_be_captured():
    clock = FakeClock()
    candidate, reference = GraphSide(clock, 0.01), GraphSide(clock, 0.02)
    timing = run_interleaved(
        {"candidate": candidate, "reference": reference},
        [None],
        TimingPlan(),
        "cuda",
        random.Random(0),
        clock,
    )
    assert timing.launch_regime == "cuda_graph" and "CUDA graph" in timing.regime
    assert timing.speedup == pytest.approx(2.0) and timing.precursor_ms["candidate"] > 0
    first, probe, *measured = candidate.requests
    assert not first.graph and probe.graph and not probe.measured  # calls counted eagerly; the probe captures
    assert measured and all(r.graph and r.measured and r.calls == probe.calls for r in measured)
    # The CPU has no graphs: the host clock times it whatever the regime asked.
    cpu = run_interleaved(
        {"candidate": candidate, "reference": reference},
        [None],
        TimingPlan(regime="cuda_graph"),
        "cpu",
        random.Random(0),
        clock,
    )
    assert cpu.launch_regime == "host_clock" and not candidate.requests[-1].graph
    uncapturable = {"candidate": GraphSide(clock, 0.01, capturable=False), "reference": GraphSide(clock, 0.02)}
    with pytest.raises(GraphUnsupported, match="candidate side"):
        run_interleaved(uncapturable, [None], TimingPlan(regime="cuda_graph"), "cuda", random.Random(0), clock)


class LaunchBoundSide(GraphSide):
    """One call behind the short calibration precursor reads the host's 0.25 ms issue of it; a sample of many
    calls, replayed in a graph, reads the kernel's 2 us (a small Triton kernel on an H200, 2026-11-30)."""

    def __call__(self, request):
        result = super().__call__(request)
        if request.calls == 1 and not request.graph:
            return SampleTimes([0.25] * request.samples, result.host_ms, result.busy_ms)
        return result


def test_samples_are_sized_again_from_a_probe_of_many_calls_when_one_call_read_its_launch():
    clock = FakeClock()
    candidate, reference = LaunchBoundSide(clock, 0.002), GraphSide(clock, 0.0025)
    timing = run_interleaved(
        {"candidate": candidate, "reference": reference}, [None], TimingPlan(), "cuda", random.Random(0), clock
    )
    # Sized from the calibration alone a sample would hold 4 calls (8 us); the probes size it to the 1 ms target.
    probes = [r for r in candidate.requests if r.graph and not r.measured]
    assert [r.calls for r in probes] == [4, 500]
    assert timing.calls_per_sample == {"candidate": 500, "reference": 400}
    assert all(r.calls == 500 for r in candidate.requests if r.measured)
    assert timing.speedup == pytest.approx(1.25)


@pytest.mark.parametrize("sets", [2, 3, 4])
def test_timed_calls_rotate_sets_and_no_sample_sees_a_graph_buffer_as_captured(sets):
    for sample in range(6):
        chosen = [timed_set(sample, call, sets) for call in range(12)]
        assert all(a != b for a, b in zip(chosen, chosen[1:], strict=False))  # consecutive calls differ
        # Buffer m of a graph holds set m at capture; in every sample it holds another set.
        assert all(timed_set(sample, m, sets) != m for m in range(sets))
    assert {timed_set(sample, 0, sets) for sample in range(6)} == set(range(1, sets))
    assert timed_set(5, 7, 1) == 0


class FakeMonitor:
    """Reports the clocks held down (a power cap) during the given blocks."""

    name = "fake"

    def __init__(self, throttled_blocks):
        self.throttled_blocks, self.reads = set(throttled_blocks), 0

    def snapshot(self):  # the n-th reading is the boundary before block n (and after block n - 1)
        boundary, self.reads = self.reads, self.reads + 1
        return {"boundary": boundary, "sm_mhz": 1400 if boundary - 1 in self.throttled_blocks else 1980}

    def throttled(self, before, after):
        assert after["boundary"] == before["boundary"] + 1  # the two ends of one block
        return ["sw_power_cap"] if before["boundary"] in self.throttled_blocks else []


class SlowDuringBlocks(NoisySide):
    def __init__(self, clock, per_call_ms, slow_requests, seed):
        super().__init__(clock, per_call_ms, seed=seed)
        self.slow_requests, self.count = slow_requests, 0

    def __call__(self, request):
        result = super().__call__(request)
        self.count += request.measured
        factor = 3.0 if request.measured and self.count in self.slow_requests else 1.0
        return SampleTimes([t * factor for t in result.times_ms], result.host_ms)


def test_blocks_timed_while_throttled_are_flagged_and_left_out():
    clock = FakeClock()
    # The candidate's 2nd and 3rd measured requests (blocks 1 and 2) ran on held-down clocks.
    sides = {
        "candidate": SlowDuringBlocks(clock, 0.5, {2, 3}, seed=1),
        "reference": NoisySide(clock, 1.0, seed=2),
    }
    monitor = FakeMonitor({1, 2})
    timing = run_interleaved(sides, [None], TimingPlan(), "cuda", random.Random(0), clock, monitor)
    assert timing.clocks["throttled_blocks"] == [1, 2] and timing.clocks["reasons"] == ["sw_power_cap"]
    assert timing.clocks["throttled_dropped"] is True and timing.clocks["sm_mhz_min"] == 1400
    assert timing.block_ratios[1] == pytest.approx(2.0 / 3.0) and timing.speedup == pytest.approx(2.0)
    assert len(timing.block_ratios) == 7  # two more blocks replace the ones left out
    assert monitor.reads == 7 + 1  # one reading a boundary between blocks, not two a block
    unmonitored = run_interleaved(sides, [None], TimingPlan(), "cuda", random.Random(0), clock)
    assert unmonitored.clocks == {"monitor": None}


def test_throttle_reasons_read_reason_bits_and_violation_counters():
    assert throttle_reasons({"reasons": 0x1}, {"reasons": 0x2}) == []  # idle, application clocks: not throttling
    assert throttle_reasons({"reasons": 0x4}, {"reasons": 0x0}) == ["sw_power_cap"]
    grew = throttle_reasons({"thermal_violation_ns": 5}, {"thermal_violation_ns": 9, "reasons": 0x40})
    assert grew == ["hw_thermal_slowdown", "thermal_violation"]


def test_a_compiled_reference_is_a_third_side_of_every_block():
    clock = FakeClock()
    sides = {
        "candidate": NoisySide(clock, 0.5, 0.01, seed=1),
        "reference": NoisySide(clock, 1.0, 0.01, seed=2),
        "compiled": NoisySide(clock, 0.6, 0.01, seed=4),
    }
    timing = run_interleaved(sides, [None], TimingPlan(), "cuda", random.Random(0), clock)
    assert timing.speedup == pytest.approx(2.0, rel=0.02)
    assert timing.speedup_vs_compile == pytest.approx(1.2, rel=0.02)
    low, high = timing.speedup_vs_compile_interval
    assert low <= timing.speedup_vs_compile <= high and timing.compiled.count == timing.candidate.count
    assert set(timing.calls_per_sample) == {"candidate", "reference"}


def test_do_bench_compatibility_is_one_figure_per_side():
    clock = FakeClock()
    seen = []

    def side(ms):
        def time_side(request):
            seen.append(request.method)
            return SampleTimes([ms])

        return time_side

    timing = run_interleaved(
        {"candidate": side(0.2), "reference": side(0.5)}, [None], TimingPlan(method="do_bench"), "cuda", None, clock
    )
    assert seen == ["do_bench", "do_bench"] and timing.speedup == pytest.approx(2.5)
    assert timing.method == "do_bench" and timing.launch_regime == "do_bench" and timing.speedup_interval is None


def test_one_block_gives_a_speedup_without_an_interval_rather_than_an_unbounded_one():
    timing = timing_of(0.5, 1.0, noise=0.02, device="cpu", blocks=1)
    assert timing.speedup == pytest.approx(2.0, rel=0.05) and timing.speedup_interval is None
    assert timing.speedup_rse is None


def test_work_that_escapes_the_timed_stream_cannot_inflate_the_calls_per_sample():
    # Each call really takes 25 ms (a side stream's sleep), the worker's events see 5 us of it. Sized from
    # the events alone a sample would hold 200 calls, 5 s of GPU work, 10 of them per request; the
    # parent's clock around the calibration caps it at 1000 x the 1 ms target.
    clock = FakeClock()
    sides = {
        "candidate": NoisySide(clock, 25.0, 0.01, seed=1, claims=0.0002),
        "reference": NoisySide(clock, 1.0, 0.01, seed=2),
    }
    timing = run_interleaved(sides, [None], TimingPlan(), "cuda", random.Random(0), clock)
    assert timing.calls_per_sample["candidate"] <= 40 and timing.calls_per_sample["reference"] == 1
    assert clock.now < 120  # seconds of the fake clock: 5 blocks of bounded requests, not minutes per request
    assert timing.clock_check["suspicious"] is True
    # An honest kernel of 5 us keeps the calls that fill its 1 ms sample.
    assert timing_of(0.005, 0.01).calls_per_sample["candidate"] == 200


def test_a_cached_reference_stands_in_for_its_blocks_and_keeps_the_cross_check():
    from kerneljudge.timing.sides import CachedSide

    paired = timing_of(0.5, 1.0, noise=0.01)
    cached = CachedSide.from_timing(paired, "reference", TimingPlan().samples, "cached: once")
    assert len(cached.block_medians) == len(paired.block_ratios) and cached.calls == 1
    assert cached.launch_regime == paired.launch_regime and cached.overhead_ms_per_block > 0

    def timed(claims):
        clock = FakeClock()
        sides = {"candidate": NoisySide(clock, 0.25, 0.01, seed=3, claims=claims)}  # no reference worker
        return run_interleaved(
            sides, [None], TimingPlan(), "cuda", random.Random(0), clock, cached={"reference": cached}
        )

    honest = timed(1.0)
    assert honest.speedup == pytest.approx(4.0, rel=0.03)  # the cached 1 ms reference over a 0.25 ms candidate
    assert honest.reference.samples_ms == cached.samples_ms and honest.reference_source == "cached: once"
    assert honest.calls_per_sample["reference"] == 1 and honest.clock_check["suspicious"] is False
    assert timed(0.01).clock_check["suspicious"] is True  # the cached overhead still exposes a lying timer
    assert paired.reference_source == "paired"
    # Only an interleaved timing can be cached.
    assert CachedSide.from_timing(timing_of(0.5, 1.0, method="kernelbench"), "reference", 10, "x") is None


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_one_call_plan_times_every_side_one_call_a_sample(device):
    """A candidate whose outputs share one storage is timed one call a sample (judgment/stages/timing.shares_outputs),
    the reference alike: no probe grows the samples, and both carry the same per-sample overhead."""
    timing = timing_of(0.005, 0.01, device=device, one_call=True)
    assert timing.calls_per_sample == {"candidate": 1, "reference": 1}
    assert timing.speedup == pytest.approx(2.0, rel=0.02)
    assert timing_of(0.005, 0.01, device=device).calls_per_sample["candidate"] > 1


def test_one_late_request_is_no_under_claim_but_a_gap_in_most_requests_is():
    """The candidate's requests set against the reference's by their medians (a loaded CI machine: one honest
    request 353 ms late, and the sums alone called the candidate's timer a liar)."""
    reference = [100.0] * 6
    claimed = {"candidate": 39.0, "reference": 42.0}

    def seen(overheads):
        return {"candidate": sum(overheads) + claimed["candidate"], "reference": sum(reference) + claimed["reference"]}

    late = [100.0] * 5 + [500.0]
    assert crosscheck.clock_check(claimed, seen(late), reference)["suspicious"]  # by the sums alone
    check = crosscheck.clock_check(claimed, seen(late), reference, late)
    assert not check["suspicious"] and check["candidate_implied_ms"] == pytest.approx(39.0)
    lying = [160.0] * 6  # 60 ms more in every request than the reference's, 6.5 ms claimed in each
    check = crosscheck.clock_check(claimed, seen(lying), reference, lying)
    assert check["suspicious"] and check["candidate_implied_ms"] == pytest.approx(39.0 + 360.0)
