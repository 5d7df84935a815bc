"""Precision forensics on fp32 matmuls: downgrades are named, honest reorderings and plain bugs are not."""

import torch
from test_correctness import chunked_matmul, matmul_case

from kerneljudge.checks.correctness import compare_to_oracle, tolerance_for
from kerneljudge.checks.precision import precision_finding


def forensic(cand, ref, oracle):
    metrics = compare_to_oracle(cand, ref, oracle, tolerance_for(torch.float32)).metrics
    return precision_finding(metrics, "float32", "trial 0")


def test_bf16_arithmetic_is_named():
    a, b, ref, oracle = matmul_case()
    found = forensic((a.bfloat16() @ b.bfloat16()).float(), ref, oracle)
    assert found is not None and found.code == "KJ-P001" and found.severity == "error"
    assert found.evidence["consistent_with"] == "bf16"


def test_fp16_or_tf32_rounding_is_named():
    a, b, ref, oracle = matmul_case()
    found = forensic(a.half().float() @ b.half().float(), ref, oracle)
    assert found is not None and found.evidence["consistent_with"] == "fp16 or TF32"


def test_honest_reordering_and_plain_bugs_are_not_precision_findings():
    a, b, ref, oracle = matmul_case()
    assert forensic(chunked_matmul(a, b, 1), ref, oracle) is None
    assert forensic(torch.zeros_like(ref), ref, oracle) is None
    assert (
        precision_finding(
            {"rmse": 1.0, "oracle_rms": 100.0, "reference_rmse": 1e-6, "error_ratio": 1e6}, "float16", "t"
        )
        is None
    )


def test_skipped_work_is_not_labelled_as_reduced_precision():
    a, b, ref, oracle = matmul_case()
    one_wrong = oracle.float().clone()
    one_wrong.view(-1)[7] *= 1.01  # a single element off: a few wrong elements are not rounding
    assert forensic(one_wrong, ref, oracle) is None
    expected = oracle.float()
    one_sided = expected - 2e-3 * expected.abs().mean()  # every element short by the same amount
    metrics = compare_to_oracle(one_sided, ref, oracle, tolerance_for(torch.float32)).metrics
    assert metrics["error_spread"] == 1.0 and metrics["signed_mean_error"] < 0
    assert precision_finding(metrics, "float32", "trial 0") is None
    assert precision_finding({**metrics, "signed_mean_error": 0.0}, "float32", "trial 0") is not None
