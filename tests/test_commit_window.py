"""The commit's time on the parent's clock (stages/commit_window.py): an honest candidate's commit is bounded by
the reference's, and more than its claimed calls' time beyond that bound is KJ-R027."""

from __future__ import annotations

from kerneljudge.stages.commit_window import FLOOR_MS, window_check, window_findings


def windows(fixed_ms, per_output_ms, calls, count=6, jitter_ms=0.0):
    """`count` commits of `calls` outputs: a fixed part and a part per output, with some jitter."""
    return [(fixed_ms + calls * per_output_ms + jitter_ms * ((i % 3) - 1), calls) for i in range(count)]


def test_an_honest_candidate_with_more_or_fewer_calls_than_the_reference_is_within_the_bound():
    for calls in (10, 100, 1000, 10000):  # a much faster or slower candidate times more or fewer calls a sample
        check = window_check(
            {"candidate": windows(0.3, 0.002, calls), "reference": windows(0.3, 0.002, 100, jitter_ms=0.02)}, 0.0
        )
        assert not check["suspicious"] and window_findings(check) == []
        assert check["candidate_calls"] == calls and check["reference_calls"] == 100


def test_a_sample_of_work_in_the_commit_beyond_the_claimed_time_is_found():
    reference = windows(0.3, 0.002, 100, jitter_ms=0.02)
    # Its calls claim 1 us each and did nothing; its commit does 10 us of work per call of a 1000-call sample.
    check = window_check({"candidate": windows(0.3, 0.002 + 0.010, 1000), "reference": reference}, 0.001)
    assert check["suspicious"] and check["candidate_ms"] > check["allowed_ms"]
    (found,) = window_findings(check)
    assert found.code == "KJ-R027" and found.severity == "error" and "1000 calls" in found.summary
    # The same work within what its calls claim (10 us each) is not: its timed calls did that much.
    assert not window_check({"candidate": windows(0.3, 0.012, 1000), "reference": reference}, 0.010)["suspicious"]


def test_the_floor_holds_for_claims_of_nothing():
    reference = windows(0.3, 0.002, 100)
    under = window_check({"candidate": windows(0.3, 0.002 + FLOOR_MS / 2, 1000), "reference": reference}, 0.0)
    over = window_check({"candidate": windows(0.3, 0.002 + FLOOR_MS * 3, 1000), "reference": reference}, 0.0)
    assert not under["suspicious"] and over["suspicious"]


def test_the_reference_noise_widens_the_bound():
    quiet = window_check({"candidate": windows(0.3, 0.02, 100), "reference": windows(0.3, 0.002, 100)}, 0.0)
    noisy = window_check(
        {"candidate": windows(0.3, 0.02, 100), "reference": windows(0.3, 0.002, 100, jitter_ms=0.5)}, 0.0
    )
    assert quiet["suspicious"] and not noisy["suspicious"]


def test_too_few_commits_or_no_claims_check_nothing():
    few = window_check({"candidate": windows(0.3, 1.0, 100, count=2), "reference": windows(0.3, 0.002, 100)}, 0.0)
    assert few == {"candidate_commits": 2, "reference_commits": 6, "suspicious": False}
    assert not window_check({"candidate": windows(0.3, 1.0, 100)}, 0.0)["suspicious"]
    assert not window_check({"candidate": windows(0.3, 1.0, 100), "reference": windows(0.3, 0.002, 100)}, None)[
        "suspicious"
    ]
