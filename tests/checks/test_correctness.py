"""The numerical comparison against the float64 oracle, without processes."""

import pytest
import torch

from kerneljudge.checks.correctness import (
    OracleCheck,
    compare_native,
    compare_to_oracle,
    tolerance_for,
)
from kerneljudge.checks.replay import compare_replay


def matmul_case(k: int = 4096, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(64, k, generator=g), torch.randn(k, 64, generator=g)
    oracle = a.double() @ b.double()
    ref = a @ b
    return a, b, ref, oracle


def chunked_matmul(a, b, chunk):
    """fp32 matmul accumulated in K-chunks: a different (correct) summation order."""
    out = torch.zeros(a.shape[0], b.shape[1])
    for k in range(0, a.shape[1], chunk):
        out += a[:, k : k + chunk] @ b[k : k + chunk]
    return out


def test_reordered_long_reduction_passes():
    a, b, ref, oracle = matmul_case()
    for chunk in (1, 7, 64, 1024):
        cand = chunked_matmul(a, b, chunk)
        result = compare_to_oracle(cand, ref, oracle, tolerance_for(torch.float32))
        assert result.passed, (chunk, result.summary)
        assert result.metrics["error_ratio"] < 10


def test_naive_sequential_fp32_sum_over_a_million_passes():
    x = torch.rand(2, 1_000_000, generator=torch.Generator().manual_seed(1))
    oracle, ref = x.double().sum(1), x.sum(1)
    cand = torch.stack([torch.cumsum(row, 0)[-1] for row in x])  # strictly sequential order
    assert compare_to_oracle(cand, ref, oracle, tolerance_for(torch.float32)).passed


def test_bf16_downgrade_fails_an_fp32_task():
    a, b, ref, oracle = matmul_case()
    cand = (a.bfloat16() @ b.bfloat16()).float()
    result = compare_to_oracle(cand, ref, oracle, tolerance_for(torch.float32))
    assert not result.passed and result.failure_kind == "tolerance"
    assert result.metrics["error_ratio"] > 100


def test_fp16_inputs_downgrade_fails_an_fp32_task():
    a, b, ref, oracle = matmul_case(k=256)
    cand = a.half().float() @ b.half().float()
    assert not compare_to_oracle(cand, ref, oracle, tolerance_for(torch.float32)).passed


def test_metrics_report_what_a_user_checks():
    oracle = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    ref = oracle.float()
    cand = torch.tensor([1.0, 2.0, 3.5, 4.0])
    result = compare_to_oracle(cand, ref, oracle, tolerance_for(torch.float32))
    m = result.metrics
    assert not result.passed
    assert m["max_abs_error"] == 0.5 and m["mismatch_count"] == 1
    # figures of a float32 output are computed in float32 (work_dtype): to its precision, not float64's
    assert abs(m["max_rel_error"] - 0.5 / 3) < 1e-7
    assert abs(m["mean_abs_error"] - 0.125) < 1e-7
    assert abs(m["rmse"] - 0.25) < 1e-7
    assert 0.99 < m["cosine_similarity"] < 1.0
    assert m["worst_index"] == [2] and m["worst_candidate"] == 3.5 and m["worst_expected"] == 3.0


def test_the_worst_element_is_found_in_the_full_shape_when_some_positions_are_not_finite():
    # Where every position is finite the metrics read views; elsewhere the non-finite ones are left out.
    oracle = torch.zeros(3, 4, dtype=torch.float64)
    oracle[0, 1] = float("inf")
    cand = oracle.float()
    cand[2, 3] = 0.5
    m = compare_to_oracle(cand, oracle.float(), oracle, tolerance_for(torch.float32)).metrics
    assert m["worst_index"] == [2, 3] and m["mismatch_count"] == 1 and m["numel"] == 12
    assert abs(m["mean_abs_error"] - 0.5 / 11) < 1e-7  # over the 11 finite positions


def test_nan_where_oracle_is_finite_is_non_finite():
    oracle = torch.ones(8, dtype=torch.float64)
    cand = torch.ones(8)
    cand[3] = float("nan")
    result = compare_to_oracle(cand, oracle.float(), oracle, tolerance_for(torch.float32))
    assert result.failure_kind == "non_finite"


def test_matching_infinities_pass_and_fp16_overflow_matches_the_task_dtype():
    oracle = torch.tensor([1.0, 70000.0], dtype=torch.float64)  # overflows float16
    ref = oracle.half()
    assert compare_to_oracle(ref.clone(), ref, oracle, tolerance_for(torch.float16)).passed
    cand = torch.tensor([1.0, float("-inf")], dtype=torch.float16)
    assert compare_to_oracle(cand, ref, oracle, tolerance_for(torch.float16)).failure_kind == "non_finite"


def test_integer_outputs_are_compared_exactly():
    ref = torch.tensor([1, 2, 3])
    assert compare_to_oracle(ref.clone(), ref, ref.double(), tolerance_for(torch.int64)).passed
    assert not compare_to_oracle(torch.tensor([1, 2, 4]), ref, ref.double(), tolerance_for(torch.int64)).passed


def test_native_mode_is_kernelbench_allclose():
    ref = torch.tensor([1.0, 2.0])
    tol = tolerance_for(torch.float32, native=True)
    assert (tol.atol, tol.rtol) == (1e-4, 1e-4)
    assert (tolerance_for(torch.float16, native=True).atol, tolerance_for(torch.bfloat16, native=True).rtol) == (
        1e-2,
        1e-2,
    )
    assert compare_native(ref + 1e-5, ref, tol).passed
    assert not compare_native(ref + 1e-3, ref, tol).passed


def test_replay_distinguishes_rounding_from_a_race():
    a, b, ref, oracle = matmul_case(k=512)
    first, second = chunked_matmul(a, b, 16), chunked_matmul(a, b, 64)
    tol = tolerance_for(torch.float32)
    rounding = compare_replay(first, second, ref, oracle, tol)
    assert rounding.passed and rounding.metrics["differing_elements"] > 0
    racy = first.clone()
    racy[5, 5] += 1e-3 * float(oracle.abs().mean())
    race = compare_replay(first, racy, ref, oracle, tol)
    assert not race.passed and race.failure_kind == "nondeterministic"
    assert compare_replay(first, first.clone(), ref, oracle, tol).summary == "bitwise identical"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_timed_output_check_decides_as_the_full_comparison(dtype):
    torch.manual_seed(3)
    oracle = torch.randn(64, 130, dtype=torch.float64)
    ref = oracle.to(dtype)
    check = OracleCheck(ref, oracle, tolerance_for(dtype))
    eps = torch.finfo(dtype).eps
    cases = {
        "exact": ref.clone(),
        "rounding": (oracle * (1 + 2 * eps)).to(dtype),
        "one_wrong": ref.clone().index_put_((torch.tensor([5]), torch.tensor([7])), torch.tensor(9.0, dtype=dtype)),
        "nan": ref.clone().index_put_((torch.tensor([0]), torch.tensor([0])), torch.tensor(float("nan"), dtype=dtype)),
        "inf": ref.clone().index_put_((torch.tensor([1]), torch.tensor([2])), torch.tensor(float("inf"), dtype=dtype)),
        "downgraded": oracle.to(torch.float16 if dtype != torch.float16 else torch.float16).to(dtype) * 1.01,
    }
    for name, cand in cases.items():
        fast, full = check.compare(cand), compare_to_oracle(cand, ref, oracle, tolerance_for(dtype))
        assert (fast.passed, fast.failure_kind) == (full.passed, full.failure_kind), (name, fast, full)
    assert check.compare(cases["exact"]).passed and not check.compare(cases["one_wrong"]).passed


def test_the_timed_output_check_defers_to_the_full_comparison_where_the_oracle_is_not_finite():
    oracle = torch.tensor([1.0, float("inf"), float("-inf")], dtype=torch.float64)
    ref = oracle.float()
    check = OracleCheck(ref, oracle, tolerance_for(torch.float32))
    assert check.compare(ref.clone()).passed
    swapped = torch.tensor([1.0, float("-inf"), float("inf")])
    assert check.compare(swapped).failure_kind == "non_finite"  # -inf for +inf is caught, as in the full check


@pytest.mark.parametrize("chunk", [7, 64, 1000])
def test_the_comparison_piece_by_piece_decides_and_measures_as_in_one_pass(monkeypatch, chunk):
    """Outputs of billions of elements are compared in pieces (CHUNK); every figure, the worst element's
    index among them, must come out as one pass over the whole tensor gives it."""
    from kerneljudge.checks import correctness

    g = torch.Generator().manual_seed(3)
    oracle = torch.randn(37, 53, generator=g, dtype=torch.float64)
    oracle[5, 7] = float("nan")
    ref = oracle.float()
    cand = ref + 1e-6 * torch.randn(37, 53, generator=g)
    cand[5, 7] = float("nan")
    cand[30, 50] += 0.5  # the worst element, in a late piece
    cand[2, 3] += 0.1
    tol = tolerance_for(torch.float32)
    whole = compare_to_oracle(cand, ref, oracle, tol)
    monkeypatch.setattr(correctness, "CHUNK", chunk)
    pieces = compare_to_oracle(cand, ref, oracle, tol)
    assert (pieces.passed, pieces.failure_kind) == (whole.passed, whole.failure_kind) == (False, "tolerance")
    for key, value in whole.metrics.items():
        expected = pytest.approx(value, rel=1e-9) if isinstance(value, float) else value
        assert pieces.metrics[key] == expected, key
    assert pieces.metrics["worst_index"] == [30, 50] and pieces.metrics["mismatch_count"] == 2
    check = OracleCheck(ref, oracle, tol)
    assert not check.compare(cand).passed and check.compare(ref).passed
    assert compare_replay(cand, cand.clone(), ref, oracle, tol).passed


def test_a_scalar_output_and_integer_and_boolean_outputs_compare():
    """A mean loss is a 0-dim tensor; argmax gives int64 indices, a mask is bool: those compare exactly."""
    oracle = torch.tensor(0.25, dtype=torch.float64)
    tol = tolerance_for(torch.float32)
    assert compare_to_oracle(torch.tensor(0.25), torch.tensor(0.25), oracle, tol).passed
    wrong = compare_to_oracle(torch.tensor(0.3), torch.tensor(0.25), oracle, tol)
    assert not wrong.passed and wrong.metrics["worst_index"] == []
    labels = torch.tensor([3, 1, 4])
    assert compare_to_oracle(labels.clone(), labels, labels, tol).passed
    off_by_one = compare_to_oracle(labels + torch.tensor([0, 0, 1]), labels, labels, tol)
    assert not off_by_one.passed and off_by_one.metrics["mismatch_count"] == 1
    mask = torch.tensor([True, False])
    assert not compare_to_oracle(~mask, mask, mask, tol).passed
