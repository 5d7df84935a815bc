"""Best-of-K with a multiplicity correction: the sign test, Benjamini-Hochberg and the adjusted bound, by hand."""

import pytest

from helpers import make_record
from kerneljudge.report.markdown import summary_markdown
from kerneljudge.results.best_of_k import (
    benjamini_hochberg,
    best_of_k,
    binomial_upper_tail,
    evidence_of,
    median_lower_bound,
    sign_test_p,
)
from kerneljudge.results.metrics import summarize


def timed(candidate: str, speedup: float, ratios: list[float], **changes):
    record = make_record(candidate, speedup=speedup, **changes)
    record.timing.block_ratios = ratios
    return record


def test_the_sign_test_is_the_exact_binomial_tail_with_ties_dropped():
    assert binomial_upper_tail(5, 5) == 1 / 32
    assert binomial_upper_tail(8, 7) == 9 / 256  # C(8,7) + C(8,8) = 9
    assert binomial_upper_tail(3, 0) == 1.0
    assert sign_test_p([1.2, 1.1, 1.3, 0.9, 1.05]) == 6 / 32  # 4 of 5 above 1: C(5,4) + C(5,5) = 6
    assert sign_test_p([1.2, 1.0, 1.1]) == 1 / 4  # the tie at 1 is dropped: 2 of 2 above
    assert sign_test_p([0.5] * 6) == 1.0
    # 1000 blocks: integer sums, no overflow of 2**1000 as a float
    assert 0 < sign_test_p([1.1] * 600 + [0.9] * 400) < 1e-9


def test_benjamini_hochberg_steps_up_where_bonferroni_keeps_nothing():
    # m = 4, q = 0.05: the thresholds i*q/m are 0.0125, 0.025, 0.0375, 0.05. No p is below q/m (Bonferroni
    # keeps none), but p_(4) = 0.04 <= 0.05, so all four are kept: the step-up rule.
    assert benjamini_hochberg([0.02, 0.03, 0.035, 0.04]) == [True, True, True, True]
    # m = 8: thresholds 0.00625, 0.0125, 0.01875, ...; p_(1) = 0.001 and p_(2) = 0.008 pass, none above does.
    p = [0.041, 0.001, 0.039, 0.205, 0.008, 0.042, 0.06, 0.074]
    assert benjamini_hochberg(p) == [False, True, False, False, True, False, False, False]
    assert benjamini_hochberg([0.5, 0.9]) == [False, False]
    with pytest.raises(ValueError, match="must be in"):
        benjamini_hochberg([0.01], q=0)


def test_the_lower_bound_of_the_median_is_an_order_statistic():
    ratios = [1.3, 1.4, 1.5, 1.5, 1.6, 1.5, 1.45, 1.55]
    # n = 8: P(B <= 0) = 1/256 <= 0.0125 < P(B <= 1) = 9/256, so the bound at 98.75% is the smallest ratio
    assert median_lower_bound(ratios, 0.0125) == 1.3
    # at 95%: P(B <= 1) = 9/256 = 0.035 <= 0.05 < P(B <= 2) = 37/256, so the second smallest
    assert median_lower_bound(ratios, 0.05) == 1.4
    assert median_lower_bound(ratios[:5], 0.01) is None  # 1/32 > 0.01: five blocks bound nothing at 99%


def test_a_p_value_comes_from_the_interval_where_the_record_has_no_blocks():
    record = make_record("c", speedup=1.2)
    record.timing.speedup_interval, record.timing.interval_level = [1.1, 1.3], 0.95
    evidence = evidence_of(record)
    # se = ln(1.3/1.1) / (2 * 1.96) = 0.04262; z = ln(1.2) / se = 4.278; p = 1 - Phi(4.278) = 9.42e-6
    assert evidence.p_value == pytest.approx(9.4214e-6, rel=1e-3) and "interval" in evidence.method
    # at 98.75%: exp(ln 1.2 - 2.2414 * se) = 1.0907
    assert evidence.lower_bound(0.0125) == pytest.approx(1.0907, abs=1e-4)
    assert evidence_of(make_record("wrong", status="FAIL")).p_value == 1.0
    assert evidence_of(make_record("untimed")).method == "not timed: no claim"


def test_throttled_blocks_are_left_out_of_the_sign_test_as_the_estimate_leaves_them_out():
    record = timed("c", 1.5, [0.5, 1.5, 1.5, 1.5, 1.5])
    record.timing.clocks = {"throttled_blocks": [0], "reasons": ["hw_slowdown"]}
    evidence = evidence_of(record)
    assert evidence.p_value == 1 / 16 and evidence.ratios == (1.5, 1.5, 1.5, 1.5)


def four_candidates() -> list:
    """One task, K = 4: A 1.5x on 8 blocks all above 1 (p = 1/256); B 1.8x with 7 of 8 above (p = 9/256);
    C 1.0x with 4 of 8 above (p = 163/256); D wrong (p = 1)."""
    return [
        timed("A", 1.5, [1.3, 1.4, 1.5, 1.5, 1.6, 1.5, 1.45, 1.55]),
        timed("B", 1.8, [0.9, 1.7, 1.8, 1.9, 2.0, 1.8, 1.75, 1.85]),
        timed("C", 1.0, [0.9, 1.1, 0.95, 1.05, 0.98, 1.02, 0.97, 1.03]),
        make_record("D", status="FAIL"),
    ]


def test_best_of_k_keeps_the_claims_bh_keeps_and_bounds_the_fastest_at_the_adjusted_level():
    records = four_candidates()
    assert [evidence_of(r).p_value for r in records] == [1 / 256, 9 / 256, 163 / 256, 1.0]
    # Sorted p: 0.0039 <= 0.0125 (kept), 0.0352 > 0.025, 0.637 > 0.0375, 1 > 0.05: one discovery, A.
    (claim,) = best_of_k(records)
    assert (claim.k, claim.fastest, claim.fastest_speedup, claim.fastest_p) == (4, "B", 1.8, 9 / 256)
    assert (claim.discoveries, claim.claimed, claim.claimed_speedup) == (1, "A", 1.5)
    assert claim.level == pytest.approx(1 - 0.05 / 4)
    assert claim.claimed_lower_bound == 1.3  # the order statistic at alpha = 1 * 0.05 / 4 (see above)
    assert claim.claimed_runtime_ms == 1.0  # A's median ms per call: its verified_runtime
    text = summary_markdown(summarize(records), [claim])
    row = (
        "| task | 4 | B (1.800x) | 0.0352 | 1 | A: 1.500x, at least 1.300x at 98.8% confidence (exact sign test over 8"
    )
    assert row + " paired blocks) | 1.000 ms |" in text


def test_with_one_candidate_the_same_evidence_is_a_claim_and_with_many_it_is_not():
    lone = timed("B", 1.8, [0.9, 1.7, 1.8, 1.9, 2.0, 1.8, 1.75, 1.85])
    assert best_of_k([lone])[0].claimed == "B"  # 9/256 = 0.035 <= 0.05
    rivals = [timed(f"r{i}", 0.95, [0.9, 1.05, 0.93, 0.97, 1.01, 0.96, 0.94, 0.92]) for i in range(7)]
    (claim,) = best_of_k([lone, *rivals])  # K = 8: 0.035 > 0.05/8, and the rivals' p are large
    assert claim.fastest == "B" and claim.claimed is None and claim.discoveries == 0
    text = summary_markdown(summarize([lone, *rivals]), [claim])
    # alone among 8 at q = 0.05: p <= 0.00625, which 2**-n reaches at n = 8 blocks (2**-7 = 0.0078 does not)
    assert "no claim survives at FDR 0.05 (the fastest's p: 0.0352; a claim alone among 8 needs p <= 0.00625" in text
    assert "by the sign test 8 paired blocks all faster)" in text


def test_a_record_timed_at_several_shapes_claims_faster_at_every_shape_with_the_largest_p():
    record = make_record("shapes", speedup=1.2)
    record.timing.interval_level = 0.95
    record.timing.shapes = [
        {"shape": {"n": 1}, "speedup": 1.2, "interval": [1.1, 1.3]},  # p = 9.4e-6 (see the interval test)
        {"shape": {"n": 2}, "speedup": 1.0, "interval": [0.9, 1.1]},  # ln 1 = 0: p = 1/2
    ]
    evidence = evidence_of(record)
    assert evidence.p_value == pytest.approx(0.5) and "2 timing shapes" in evidence.method
    record.timing.shapes[1]["interval"] = None
    assert evidence_of(record).p_value == 1.0  # a shape without an interval gives no claim
