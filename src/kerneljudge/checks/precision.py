"""Precision forensics: is a candidate's error the signature of lower precision than the task asks for?

The effective precision of an output is -log2(RMSE / RMS of the oracle), in
bits. An fp32 reference typically keeps 20 or more; bf16 arithmetic (8-bit
significand) lands near 8 bits, fp16 and TF32 (11-bit significands) near 11.
A candidate whose error is at least 16 times the reference's and whose
effective precision falls in one of those bands gets KJ-P001 with the numbers,
provided the error also looks like rounding: spread over many elements (at least
5% measurably worse than the reference) and unbiased (on 32 elements or more,
the signed mean error is under half the RMSE). Skipped work (a few wrong
elements, or a sum short by the same sign everywhere) and an error far larger
than any precision effect (a wrong kernel) are left to the tolerance check.
docs/findings.md.
"""

from __future__ import annotations

import math
from typing import Any

from kerneljudge.checks.catalog import finding
from kerneljudge.results.verdict import Finding

FULL_PRECISION = ("float32", "float64")
BANDS = ((6.0, 10.0, "bf16"), (10.0, 14.5, "fp16 or TF32"))
MIN_ERROR_RATIO = 16.0
MIN_SPREAD = 0.05
MAX_BIAS = 0.5
MIN_ELEMENTS_FOR_BIAS = 32


def effective_bits(rmse: float, scale: float) -> float | None:
    if scale <= 0:
        return None
    return math.inf if rmse == 0 else -math.log2(rmse / scale)


def precision_finding(metrics: dict[str, Any], output_dtype: str, where: str) -> Finding | None:
    """KJ-P001 when a full-precision output's error looks like bf16, fp16 or TF32 arithmetic."""
    if output_dtype not in FULL_PRECISION:
        return None
    scale = float(metrics.get("oracle_rms") or 0.0)
    cand = effective_bits(float(metrics.get("rmse", 0.0)), scale)
    ref = effective_bits(float(metrics.get("reference_rmse", 0.0)), scale)
    ratio = metrics.get("error_ratio")
    if ratio is None and ref == math.inf and cand is not None and cand < math.inf:
        ratio = math.inf  # the reference is exact, the candidate is not
    if cand is None or ref is None or not isinstance(ratio, (int, float)) or ratio < MIN_ERROR_RATIO:
        return None
    band = next((name for low, high, name in BANDS if low <= cand < high), None)
    if band is None:
        return None
    rmse = float(metrics.get("rmse", 0.0))
    if float(metrics.get("error_spread", 1.0)) < MIN_SPREAD:
        return None  # a few elements wrong: not the signature of a lower precision
    biased = abs(float(metrics.get("signed_mean_error", 0.0))) > MAX_BIAS * rmse
    if int(metrics.get("numel", 0)) >= MIN_ELEMENTS_FOR_BIAS and biased:
        return None  # wrong the same way everywhere: missing work, not rounding
    return finding(
        "KJ-P001",
        "error",
        f"{where}: error consistent with {band} arithmetic on a {output_dtype} task "
        f"({cand:.1f} effective bits; the reference keeps {min(ref, 53.0):.1f})",
        {
            "candidate_bits": round(cand, 2),
            "reference_bits": round(min(ref, 53.0), 2),
            "error_ratio": ratio,
            "consistent_with": band,
            "output_dtype": output_dtype,
        },
    )
