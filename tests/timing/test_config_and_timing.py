"""Configuration validation, KernelBench's seeds, timing statistics with injected fakes, rewards."""

import math
import random

import pytest
import torch

from helpers import CANDIDATES, run_judge
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import ConfigError
from kerneljudge.judgment.hidden_plan import kernelbench_trial_seeds
from kerneljudge.results.reward import reward_binary, reward_v1, reward_v2
from kerneljudge.timing.basic import run_interleaved
from kerneljudge.timing.calibration import calls_for
from kerneljudge.timing.plan import KERNELBENCH, TimingPlan
from kerneljudge.timing.sides import SampleTimes
from kerneljudge.timing.stats import summarize


def test_unknown_setting_is_rejected_with_a_hint():
    with pytest.raises(ConfigError, match="did you mean 'timeout_s'"):
        JudgeConfig.from_mapping({"timeout": 3})


@pytest.mark.parametrize(
    "changes", [{"mode": "paranoid"}, {"device": "tpu"}, {"hidden_trials": 2}, {"timeout_s": 0}, {"policy": "lax"}]
)
def test_invalid_settings_are_rejected(changes):
    with pytest.raises(ConfigError):
        JudgeConfig(**changes)


def test_off_mode_allows_no_hidden_trials():
    assert JudgeConfig(mode="off", hidden_trials=0).hidden_trials == 0


def test_trial_seeds_match_kernelbenchs_derivation():
    torch.manual_seed(42)
    expected = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(5)]
    assert kernelbench_trial_seeds(42, 5) == expected


def test_summary_statistics_come_from_the_raw_samples():
    stats = summarize([4.0, 1.0, 3.0, 2.0, 100.0])
    assert stats.median_ms == 3.0 and stats.min_ms == 1.0 and stats.max_ms == 100.0 and stats.count == 5
    assert stats.mean_ms == 22.0 and stats.samples_ms == [4.0, 1.0, 3.0, 2.0, 100.0]
    assert stats.p95_ms == pytest.approx(80.8)


def test_calls_per_sample_fill_the_target():
    assert calls_for(0.01, 1.0) == 100 and calls_for(5.0, 1.0) == 1 and calls_for(0.0, 1.0) == 10_000


class FakeSide:
    """A worker stand-in that advances a fake clock by what it reports."""

    def __init__(self, clock, per_call_ms):
        self.clock, self.per_call_ms = clock, per_call_ms

    def __call__(self, request):
        self.clock.now += (request.calls * request.samples + request.warmup) * self.per_call_ms / 1e3
        return SampleTimes([self.per_call_ms] * request.samples, [self.per_call_ms * request.calls] * request.samples)


class FakeClock:
    now = 0.0

    def __call__(self):
        return self.now


def test_interleaved_speedup_is_the_median_of_block_ratios():
    clock = FakeClock()
    sides = {"candidate": FakeSide(clock, 0.5), "reference": FakeSide(clock, 1.0)}
    timing = run_interleaved(sides, [None], TimingPlan(blocks=4, samples=5), "cuda", random.Random(0), clock)
    assert timing.speedup == pytest.approx(2.0) and timing.block_ratios == [2.0] * 4
    assert timing.candidate.count == 20 and timing.calls_per_sample == {"candidate": 2, "reference": 1}
    assert timing.parent_observed_ms["candidate"] > 0 and "CUDA events" in timing.regime


def test_native_timing_is_kernelbenchs_mean_of_single_calls():
    clock = FakeClock()
    sides = {"candidate": FakeSide(clock, 0.25), "reference": FakeSide(clock, 1.0)}
    timing = run_interleaved(sides, [None], TimingPlan(method=KERNELBENCH), "cuda", random.Random(0), clock)
    assert timing.method == "kernelbench" and timing.candidate.count == 100 and timing.speedup == 4.0


def test_reward_v1_formula():
    assert reward_v1("PASS", True, 2.0, 0.01).value == pytest.approx(1.0)
    assert reward_v1("PASS", True, 64.0, 0.0).value == 2.0
    assert reward_v1("PASS", True, 0.5, 0.15).value == pytest.approx(-1.0 - 0.2)
    assert reward_v1("PASS", True, 1.0, 1.0).value == pytest.approx(-0.5)
    assert reward_v1("FAIL", False, 3.0, 0.0).value == -1.0
    assert reward_v1("ERROR", False, None, None).value is None
    assert reward_v1("UNSUPPORTED", False, None, None).value is None
    assert reward_binary("PASS", True).value == 1.0 and reward_binary("SUSPICIOUS", False).value == 0.0
    assert math.isclose(reward_v1("PASS", True, 1.5, 0.05).components["speed"], math.log2(1.5))


def test_reward_v2_ranks_every_verified_kernel_above_a_wrong_one_and_reads_no_cpu_timing_as_a_speedup():
    wrong = reward_v2("FAIL", False, 100.0, 0.0, "cuda").value
    assert wrong == -1.0
    slowest_shakiest = reward_v2("PASS", True, 1e-4, 10.0, "cuda")
    assert slowest_shakiest.value == pytest.approx(-0.75) and slowest_shakiest.value > wrong
    assert reward_v2("PASS", True, 2.0, 0.01, "cuda").value == pytest.approx(1.0)
    assert reward_v2("PASS", True, 64.0, 0.0, "cuda").value == 2.0
    assert reward_v2("PASS", True, 1.0, 0.1, "cuda").value == pytest.approx(-0.1)
    # The README's CPU example: interpreted Triton against torch, 0.000157x; a CPU timing earns no speed.
    on_cpu = reward_v2("PASS", True, 0.000157, 0.3, "cpu")
    assert on_cpu.value == 0.0 and "not a GPU" in on_cpu.reason and on_cpu.value > wrong
    assert reward_v2("PASS", True, None, None, "cuda").value == 0.0
    assert reward_v2("ERROR", False, None, None, "cuda").value is None
    assert reward_v2("UNSUPPORTED", False, None, None, None).value is None


def test_timing_settings_are_validated_and_do_bench_needs_cuda(tiny_task):
    with pytest.raises(ConfigError, match="timing_method"):
        JudgeConfig(timing_method="fastest")
    with pytest.raises(ConfigError, match="timing_regime"):
        JudgeConfig(timing_regime="idle")
    assert JudgeConfig(mode="off").resolved_timing_method() == "kernelbench"
    assert JudgeConfig().resolved_timing_method() == "interleaved"
    record = run_judge(tiny_task, CANDIDATES / "honest_torch.py", timing=True, timing_method="do_bench")
    assert record.verified and not record.timing.measured and "CUDA" in record.timing.reason


def test_a_timed_output_is_named_after_its_sample_and_fetched_by_a_request_of_its_own():
    """The kept call is named by the parent after the sample ran (H03: a position in the request could be read
    from the worker's frames), and its output's copy to the host is outside the timed request's round trip,
    which the parent's clock sets against the claimed times (on an H200 a 4 GiB output's copy was most of that
    round trip and varied by a quarter: an honest A/A judgment of KernelBench's 9_Tall_skinny was called a
    lying timer)."""
    from helpers import TASKS
    from kerneljudge import protocol
    from kerneljudge.sandbox.talk import WorkerProtocolError
    from kerneljudge.tasks.lint_reference import SEEDS, LintReference
    from kerneljudge.tasks.load import load_task
    from kerneljudge.worker.seal.digest import digest

    worker = LintReference(load_task(TASKS / "tiny_bias_relu.py"), "cpu", 60.0)
    try:
        worker.load(SEEDS[0])
        worker.stage()
        said = []

        def commit_and_keep_second_call_of_sample_one(frame):
            said.append(frame)
            if frame == protocol.Sampled(sample=1):
                return protocol.Commit(calls=2)  # every output's digests first (worker/seal/commit.py)
            return protocol.Keep(call=1 if frame.kind == "committed" else -1)

        timed = protocol.Time(calls=2, samples=3, warmup=1, staged=True, ask_keep=True)
        response, values = worker.worker.request(timed, interim=commit_and_keep_second_call_of_sample_one)
        assert [(f.kind, f.sample) for f in said] == [
            ("sampled", 0),
            ("sampled", 1),
            ("committed", 1),
            ("sampled", 2),
        ]
        assert isinstance(response, protocol.Timed) and response.kept == 1 and len(response.times_ms) == 3
        assert not values  # nothing of the output in the timed request (a `timed` answer describes none)
        captured, values = worker.worker.request(protocol.Captured())
        assert isinstance(captured, protocol.CapturedOutput) and captured.items[0]["plain_tensor"]
        assert list(values["captured"][0].shape) == captured.items[0]["shape"]
        assert said[2].digests[1] == [list(digest(values["captured"][0]))]  # the kept output's, as committed
        assert len(said[2].digests) == 2  # of each call's output
        # The reference's side commits as many outputs as the candidate's sample holds, its own in turn.
        asked = []

        def commit_five(frame):
            asked.append(frame)
            return protocol.Commit(calls=5) if frame == protocol.Sampled(sample=0) else protocol.Keep(call=-1)

        more = protocol.Time(calls=2, samples=1, warmup=1, staged=True, ask_keep=True)
        assert worker.worker.request(more, interim=commit_five)[0].kind == "timed"
        five = asked[1].digests
        assert len(five) == 5 and five[0] == five[2] == five[4] and five[1] == five[3]  # calls 0 and 1 in turn
        again, _ = worker.worker.request(protocol.Captured())  # fetched once, then dropped
        assert isinstance(again, protocol.Error) and "no kept output" in again.message
        # A keep naming no call of the sample fails the request, and the worker serves on.
        wrong, _ = worker.worker.request(timed, interim=lambda frame: protocol.Keep(call=2))
        assert isinstance(wrong, protocol.Error) and "keep of one of 2 calls" in wrong.message
        # A `sampled` the parent did not ask for, or one out of turn, breaks the protocol: the worker is stopped.
        with pytest.raises(WorkerProtocolError, match="'sampled' is no answer to 'time'"):
            worker.worker.request(timed)
    finally:
        worker.close()


def test_the_timed_busy_time_counts_the_sides_measured_here_and_sums_over_timing_shapes():
    from kerneljudge.results.verdict import Timing, TimingStats
    from kerneljudge.timing.figures import combined_timing, timed_busy_s

    def stats(samples):
        return TimingStats(
            median_ms=samples[0],
            p95_ms=max(samples),
            min_ms=min(samples),
            max_ms=max(samples),
            mean_ms=sum(samples) / len(samples),
            cv=0.0,
            count=len(samples),
            samples_ms=samples,
        )

    timing = Timing(
        measured=True,
        candidate=stats([1.0, 2.0]),
        reference=stats([3.0]),
        calls_per_sample={"candidate": 10, "reference": 4},
        speedup=1.0,
    )
    assert timed_busy_s(timing, ["candidate", "reference"]) == pytest.approx(0.042)  # 30 ms + 12 ms
    assert timed_busy_s(timing, ["candidate"]) == pytest.approx(0.030)  # the reference came from a cache
    assert timed_busy_s(Timing(measured=False, reason="x"), ["candidate"]) is None
    first = timing.model_copy(update={"timed_busy_s": 0.042})
    second = timing.model_copy(update={"timed_busy_s": 0.008})
    assert combined_timing([({}, first), ({}, second)]).timed_busy_s == pytest.approx(0.05)


def test_after_the_measurement_the_last_call_is_checked_so_a_switch_after_some_calls_shows(tiny_task, monkeypatch):
    """Each measured request checks one call drawn at random; a candidate honest for its first 16 calls escaped
    when every draw fell before its switch (the red team's `timing_switch` PASSed verified once on the 2-core CI
    machine, 2026-12-04). The last-call recheck comes after every measured call: with the measured requests'
    checks switched off here, it alone must catch the switch (its one kept answer cannot be right for the two
    sets it checks), and must pass an honest candidate."""
    from kerneljudge.judgment.stages import timed_calls
    from kerneljudge.redteam import FIXTURES_DIR

    real, seen = timed_calls.check_timed_output, []

    def only_the_recheck(state, response, set_index, what="", committed=None):
        seen.append(what)
        if what:  # the measured requests' own checks name no call: skipped, to leave the recheck alone
            real(state, response, set_index, what=what, committed=committed)

    monkeypatch.setattr(timed_calls, "check_timed_output", only_the_recheck)
    switch = run_judge(tiny_task, FIXTURES_DIR / "timing_switch.py", timing=True)
    assert switch.status == "FAIL" and switch.failure.kind == "tolerance", switch.failure
    assert "the last call of a request after the measurement" in switch.failure.summary
    seen.clear()
    honest = run_judge(tiny_task, FIXTURES_DIR / "honest_torch.py", timing=True)
    assert honest.status == "PASS" and honest.timing.measured, honest.failure
    rechecks = [what for what in seen if what]
    assert len(rechecks) == 2 and seen[-2:] == rechecks and rechecks[0] != rechecks[1]  # two sets, at the end
    assert honest.timing.timed_outputs_checked == len(rechecks)  # the ones that ran (the others were skipped here)


def judged_noting_where_kept_outputs_are_checked(task, candidate, monkeypatch):
    """Judge with timing; the record, and for each check of a kept output whether the measuring hold was on."""
    from contextlib import contextmanager

    from kerneljudge.judgment.stages import timed_calls, timed_rechecks, timing

    holding, checks = [False], []
    real_gate, real_check = timing.at_gate, timed_calls.check_captured

    @contextmanager
    def noting_gate(state, measuring):
        with real_gate(state, measuring):
            holding[0] = measuring
            try:
                yield
            finally:
                holding[0] = False

    def noting_check(state, set_index, what=""):
        checks.append((holding[0], what))
        real_check(state, set_index, what)

    monkeypatch.setattr(timing, "at_gate", noting_gate)
    monkeypatch.setattr(timed_calls, "check_captured", noting_check)
    monkeypatch.setattr(timed_rechecks, "check_captured", noting_check)  # the last-call rechecks'
    return run_judge(task, candidate, timing=True), checks


def test_kept_outputs_are_checked_after_the_samples_outside_the_measuring_hold(tiny_task, monkeypatch):
    """The measured requests' kept outputs wait in the candidate's worker and are checked, oldest first, once the
    samples are taken, so that the hold that pauses every other lane holds no check. Each is checked
    against the pool set it was drawn on: fetched out of order, an honest candidate's would fail."""
    from kerneljudge.redteam import FIXTURES_DIR

    honest, checks = judged_noting_where_kept_outputs_are_checked(
        tiny_task, FIXTURES_DIR / "honest_torch.py", monkeypatch
    )
    assert honest.status == "PASS" and honest.timing.measured, honest.failure
    measured = [held for held, what in checks if not what]
    assert len(measured) >= 2 and not any(measured)  # one per measured request, none in the hold
    assert honest.timing.timed_outputs_checked == len(checks)
    # The record names each kept call (sample, call within it, pool set), the last-call rechecks' last.
    kept = honest.timing.kept_calls
    assert len(kept) == len(checks) and all(set(k) == {"sample", "call", "set"} for k in kept)
    assert kept[-1]["call"] == kept[-2]["call"] + 1 and kept[-1]["sample"] == kept[-2]["sample"] == 0
    switch, _ = judged_noting_where_kept_outputs_are_checked(tiny_task, FIXTURES_DIR / "timing_switch.py", monkeypatch)
    assert switch.status == "FAIL" and switch.failure.phase == "timing" and switch.failure.kind == "tolerance"
    if "after the measurement" not in switch.failure.summary:  # a measured request's kept output caught it
        assert not switch.timing.measured and "kept output failed its check" in switch.timing.reason


def test_kept_outputs_too_large_to_wait_are_checked_as_they_come(tiny_task, monkeypatch):
    """Past DEFERRED_BYTES of kept outputs the worker would hold on the device, each is checked as its request is
    answered, in the hold, as before 0.3.6."""
    from kerneljudge.judgment.stages import timed_calls
    from kerneljudge.redteam import FIXTURES_DIR

    monkeypatch.setattr(timed_calls, "DEFERRED_BYTES", 0)
    honest, checks = judged_noting_where_kept_outputs_are_checked(
        tiny_task, FIXTURES_DIR / "honest_torch.py", monkeypatch
    )
    assert honest.status == "PASS" and honest.timing.measured, honest.failure
    measured = [held for held, what in checks if not what]
    assert len(measured) >= 2 and all(measured)
