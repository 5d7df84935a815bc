"""Untimed work on the parent's clock (judgment/stages/untimed_work.py): an honest candidate's span (its commit, its
requests around the samples) is bounded by the reference's, and more than its claimed calls' time beyond that
bound is KJ-R027."""

from __future__ import annotations

from kerneljudge.judgment.stages.untimed_work import (
    FLOOR_MS,
    NOISE_FLOOR_MS,
    NOISE_SHARE,
    bound_check,
    untimed_findings,
)


def windows(fixed_ms, per_output_ms, calls, count=6, jitter_ms=0.0):
    """`count` spans of `calls` calls a sample: a fixed part and a part per call, with some jitter."""
    return [(fixed_ms + calls * per_output_ms + jitter_ms * ((i % 3) - 1), calls) for i in range(count)]


def test_an_honest_candidate_with_more_or_fewer_calls_than_the_reference_is_within_the_bound():
    for calls in (10, 100, 1000, 10000):  # a much faster or slower candidate times more or fewer calls a sample
        check = bound_check(
            {"candidate": windows(0.3, 0.002, calls), "reference": windows(0.3, 0.002, 100, jitter_ms=0.02)}, 0.0
        )
        assert not check["suspicious"] and untimed_findings({"commit": check}) == []
        assert check["candidate_calls"] == calls and check["reference_calls"] == 100


def test_a_sample_of_work_in_the_commit_beyond_the_claimed_time_is_found():
    reference = windows(0.3, 0.002, 100, jitter_ms=0.02)
    # Its calls claim 1 us each and did nothing; its commit does 10 us of work per call of a 1000-call sample.
    check = bound_check({"candidate": windows(0.3, 0.002 + 0.010, 1000), "reference": reference}, 0.001)
    assert check["suspicious"] and check["candidate_least_ms"] > check["allowed_ms"]
    (found,) = untimed_findings({"requests": check, "commit": {"suspicious": False}})
    assert found.code == "KJ-R027" and found.severity == "error" and "1000 calls a sample" in found.summary
    assert "around each sample" in found.summary and found.evidence["span"] == "requests"
    # The same work within what its calls claim (10 us each) is not: its timed calls did that much.
    assert not bound_check({"candidate": windows(0.3, 0.012, 1000), "reference": reference}, 0.010)["suspicious"]


def test_the_floor_holds_for_claims_of_nothing():
    reference = windows(0.3, 0.002, 100)
    # The bound R (1 + n / n_ref) (1 + share) with n = 1000: 0.5 * 11 * 1.25 = 6.875 ms, then the floor per call
    under = bound_check({"candidate": windows(0.3, 0.0059 + FLOOR_MS / 2, 1000), "reference": reference}, 0.0)
    over = bound_check({"candidate": windows(0.3, 0.0059 + FLOOR_MS * 3, 1000), "reference": reference}, 0.0)
    assert not under["suspicious"] and over["suspicious"]


def test_the_least_spans_are_set_against_each_other_so_load_widens_nothing():
    """CI's 2-core machine under load (2026-12-06, judge 0.3.14): the reference's commits of 19 outputs took 1.5 ms in
    two of five and 3.4-4.2 ms in three; `commit_window_worker`, fifty calls' work in each of its commits, passed
    verified by their median (12.4 ms allowed for 11.7). Its least span sets the bound now."""
    reference = [(w, 19) for w in (1.4804, 1.4863, 4.2095, 3.4241, 3.6364)]
    deferring = [(w, 19) for w in (11.5503, 21.2309, 11.7213, 11.8548, 11.6897)]
    check = bound_check({"candidate": deferring, "reference": reference}, 0.012, True, NOISE_SHARE["cpu"])
    assert check["suspicious"] and check["reference_least_ms"] == 1.4804 and check["candidate_least_ms"] == 11.5503
    assert check["allowed_ms"] == round(1.4804 * 2 + NOISE_FLOOR_MS, 4)
    # An honest candidate's own spans loaded in all but one: its least is its work, within the bound (their median,
    # 8.3 ms, is beyond even the reference's median doubled).
    honest = [(w, 19) for w in (9.8, 1.61, 8.9, 7.3, 8.3)]
    assert not bound_check({"candidate": honest, "reference": reference}, 0.012, True, NOISE_SHARE["cpu"])["suspicious"]
    # The spans themselves are in the figures, the evidence of a finding.
    assert check["candidate_each_ms"][1] == 21.2309 and len(check["reference_each_ms"]) == 5


def test_a_burst_of_load_over_all_but_one_of_a_sides_requests_is_no_finding():
    """CI's 2-core machine (0.3.17, two tests of an honest candidate failed): load covered four of the honest
    candidate's five commits and all but two of the reference's, so the least alone set 6.9 ms against 1.9 ms. The
    reference's spans show the load (median 2.2 times its least), so the medians (7.7 and 4.2 ms) must show the
    excess too, and show none; work done in every commit shows in both."""
    reference = [(w, 81) for w in (8.8744, 4.1622, 11.158, 1.9341, 2.1229)]
    honest = [(w, 81) for w in (7.0288, 6.8905, 10.8343, 7.7182, 12.965)]
    check = bound_check({"candidate": honest, "reference": reference}, 0.0115, True, NOISE_SHARE["cpu"])
    assert check["candidate_least_ms"] > check["allowed_ms"] and not check["reference_steady"]
    assert not check["suspicious"] and untimed_findings({"commit": check}) == []
    assert check["candidate_median_ms"] == 7.7182 and check["allowed_median_ms"] == round(4.1622 * 2 + 0.25, 4)
    # The red team's `commit_window_worker` on the same machine, quiet: every commit holds fifty calls' work.
    reference = [(w, 29) for w in (1.4385, 1.3, 1.2084, 1.6678, 1.884)]
    deferring = [(w, 29) for w in (12.1106, 11.8337, 25.5379, 12.1337, 11.3687)]
    check = bound_check({"candidate": deferring, "reference": reference}, 0.0115, True, NOISE_SHARE["cpu"])
    assert check["suspicious"] and check["reference_steady"]
    assert check["candidate_median_ms"] > check["allowed_median_ms"]  # and were it loaded, its median shows it
    (found,) = untimed_findings({"commit": check})
    assert "medians 12.1 and 1.44 ms" in found.summary


def test_matched_commits_bound_the_candidates_by_the_references_own_and_no_claimed_work():
    """The commit since 0.3.14: the reference digests as many outputs as the candidate's sample holds. The red team's
    case on a CUDA device: 4 MiB outputs whose digest costs 0.1 ms each, a call claiming 0.05 ms that left half its
    work (0.025 ms) to the commit, 40 calls a sample; the unmatched bound, with the reference's 20, let it pass."""
    honest = windows(0.2, 0.1, 40, jitter_ms=0.3)
    deferring = windows(0.2, 0.1 + 0.025 + 0.005, 40)  # half its work, and its hook's cost
    for matched, reference in ((True, windows(0.2, 0.1, 40, jitter_ms=0.3)), (False, windows(0.2, 0.1, 20))):
        assert not bound_check({"candidate": honest, "reference": reference}, 0.05, matched)["suspicious"]
        found = bound_check({"candidate": deferring, "reference": reference}, 0.05, matched)
        assert found["suspicious"] is matched and found["matched"] is matched
    # Matched, an honest candidate's span may exceed the reference's by the share and the floor, no more.
    reference = windows(0.3, 0.002, 100)
    bound = 0.3 + 100 * 0.002
    for share in NOISE_SHARE.values():
        inside = bound * (1 + share) + NOISE_FLOOR_MS - 0.01
        spans = {"candidate": [(inside, 100)] * 6, "reference": reference}
        assert not bound_check(spans, 0.0, True, share)["suspicious"]
        spans = {"candidate": [(inside + 0.02, 100)] * 6, "reference": reference}
        assert bound_check(spans, 0.0, True, share)["suspicious"]
        # Its claimed time per call buys nothing here: no commit holds a call's work.
        assert bound_check(spans, 0.5, True, share)["suspicious"]


def test_too_few_commits_or_no_claims_check_nothing():
    few = bound_check({"candidate": windows(0.3, 1.0, 100, count=2), "reference": windows(0.3, 0.002, 100)}, 0.0)
    assert few == {"candidate_spans": 2, "reference_spans": 6, "suspicious": False}
    assert not bound_check({"candidate": windows(0.3, 1.0, 100)}, 0.0)["suspicious"]
    assert not bound_check({"candidate": windows(0.3, 1.0, 100), "reference": windows(0.3, 0.002, 100)}, None)[
        "suspicious"
    ]


def test_a_requests_span_is_its_round_trip_less_its_claimed_calls_and_precursors_per_sample():
    from types import SimpleNamespace

    from kerneljudge.judgment.stages.state import TimedLedger
    from kerneljudge.judgment.stages.timed_calls import note_spans

    state = SimpleNamespace(timed=TimedLedger())
    request = SimpleNamespace(calls=10, samples=4, precursor_ms=0.5)
    note_spans(state, "candidate", request, SimpleNamespace(window_ms=2.0, commits=10), [0.1, 0.1, 0.1, 0.1], 20.0)
    # 4 samples of 10 calls claimed at 0.1 ms each: 4 ms; 4 precursors of 0.5 ms; (20 - 4 - 2) / 4 samples
    note_spans(state, "candidate", request, SimpleNamespace(window_ms=None, commits=10), [0.1, 0.1, 0.1, 0.1], 24.0)
    # The reference's commit is noted with the outputs it digested: the candidate's calls, not its own.
    note_spans(state, "reference", request, SimpleNamespace(window_ms=3.0, commits=25), [0.1, 0.1, 0.1, 0.1], 20.0)
    assert state.timed.untimed_spans["candidate"] == {"commit": [(2.0, 10)], "requests": [(3.5, 10), (4.5, 10)]}
    assert state.timed.untimed_spans["reference"]["commit"] == [(3.0, 25)]
