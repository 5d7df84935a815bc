"""The shipped examples on the CPU: Triton candidates through the interpreter, honest PASS, wrong FAIL."""

import pytest

from helpers import EXAMPLES, run_judge

pytest.importorskip("triton")


@pytest.mark.parametrize("example", ["softmax", "elementwise", "matmul"])
def test_honest_example_passes(example):
    record = run_judge(EXAMPLES / example / "reference.py", EXAMPLES / example / "candidate_triton.py", timeout_s=300.0)
    assert record.status == "PASS" and record.verified, record.failure
    assert record.capabilities["triton"].status == "available"
    assert "interpreter" in record.capabilities["triton"].detail


@pytest.mark.parametrize("example", ["softmax", "elementwise", "matmul"])
def test_wrong_example_fails_with_tolerance(example):
    record = run_judge(EXAMPLES / example / "reference.py", EXAMPLES / example / "candidate_wrong.py", timeout_s=300.0)
    assert record.status == "FAIL" and record.failure.kind == "tolerance", record.failure
    assert record.correctness.trials[-1].outputs[0]["mismatch_count"] > 0


def test_long_fp32_reduction_is_not_rejected():
    """K = 4096: the honest matmul's error exceeds a bare 1e-4 atol; the oracle-relative rule accepts it."""
    record = run_judge(
        EXAMPLES / "matmul" / "reference.py", EXAMPLES / "matmul" / "candidate_triton.py", timeout_s=300.0
    )
    worst = record.correctness.worst
    assert record.status == "PASS"
    assert worst["max_abs_error"] > 1e-5 and worst["error_ratio"] < 10
