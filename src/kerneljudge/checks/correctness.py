"""Numerical correctness: a candidate's output against the float64 oracle.

Pure functions over CPU tensors. The oracle is first rounded to the output's
dtype, which is the best answer representable there (and overflows where the
task's own dtype overflows). An element passes when

    |candidate - oracle| <= atol' + rtol * |oracle| + slack

where atol' = min(atol, SCALE_FLOOR * RMS(oracle)): an absolute floor never
exceeds a small fraction of the output's own scale, so an output that is tiny
everywhere cannot be passed by returning zeros (H08); slack = ref_error_factor * max|reference - oracle|: the reference
implementation's own error bounds what a different but correct summation order
may cost (long reductions, K = 4096 matmuls). A precision downgrade is orders of
magnitude above that slack. docs/tolerances.md gives the reasons for each number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    ref_error_factor: float = 8.0
    name: str = ""


# ref_error_factor 32 for the full-precision types: on an H200 an honest Triton fp32 matmul
# (K = 4096, sequential accumulation) erred 10x the cuBLAS reference's max error; a precision
# downgrade errs 10^3 times more (docs/tolerances.md).
TOLERANCES = {
    torch.float64: Tolerance(1e-7, 1e-7, ref_error_factor=32.0, name="float64"),
    torch.float32: Tolerance(1e-4, 1e-4, ref_error_factor=32.0, name="float32"),
    torch.float16: Tolerance(1e-2, 1e-2, name="float16"),
    torch.bfloat16: Tolerance(2e-2, 2e-2, name="bfloat16"),
}

# The absolute floor is at most this fraction of the oracle's RMS (H08: tiny outputs, trivial kernels).
SCALE_FLOOR = 1e-2

# KernelBench's native check: torch.allclose(reference, candidate, atol, rtol) per precision.
# How many units in the last place two runs of a correct kernel may differ by (atomics, split reductions).
ROUNDING_ULPS = 8

KERNELBENCH_TOLERANCES = {
    torch.float32: Tolerance(1e-4, 1e-4, ref_error_factor=0.0, name="kernelbench-float32"),
    torch.float16: Tolerance(1e-2, 1e-2, ref_error_factor=0.0, name="kernelbench-float16"),
    torch.bfloat16: Tolerance(1e-2, 1e-2, ref_error_factor=0.0, name="kernelbench-bfloat16"),
}


def tolerance_for(dtype: torch.dtype, native: bool = False) -> Tolerance:
    table = KERNELBENCH_TOLERANCES if native else TOLERANCES
    return table.get(dtype, table[torch.float32])


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing one output tensor."""

    passed: bool
    failure_kind: str | None
    summary: str
    metrics: dict[str, Any]


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype comparisons compute in: float32 for outputs of 32 bits or fewer, whose values, and the
    differences between close ones, it holds exactly (Sterbenz); float64 for float64. Half the bytes of
    float64 for every pass over outputs that may hold tens of millions of elements."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _finite_mask_problem(
    cand: torch.Tensor, oracle: torch.Tensor, c_fin: torch.Tensor, o_fin: torch.Tensor
) -> str | None:
    if bool(c_fin.all()) and bool(o_fin.all()):
        return None
    bad = c_fin != o_fin
    both_nonfinite = ~c_fin & ~o_fin
    # Same kind of non-finite where both are non-finite: NaN with NaN, +inf with +inf.
    bad |= both_nonfinite & ~((torch.isnan(cand) & torch.isnan(oracle)) | (cand == oracle))
    count = int(bad.sum())
    if not count:
        return None
    return f"{count} element(s) are NaN/Inf where the oracle is not (or the reverse)"


def error_metrics(
    cand: torch.Tensor, oracle: torch.Tensor, ref: torch.Tensor, tol: Tolerance, finite: torch.Tensor | None = None
) -> dict[str, Any]:
    """Error statistics of cand and ref against oracle (same dtype and shape; `finite`: where both cand and
    oracle are finite, computed here if not given).

    Each figure is one pass over tensors that may hold tens of millions of elements, in the parent, for
    every output of every trial: views where every position is finite (no masked copies), the difference
    computed once, sums of squares by norms, no gathers.
    """
    if finite is None:
        finite = torch.isfinite(oracle) & torch.isfinite(cand)
    all_finite = bool(finite.all())
    if all_finite:
        c, o, r = cand.reshape(-1), oracle.reshape(-1), ref.reshape(-1)
    else:
        c, o, r = cand[finite], oracle[finite], ref[finite]
    count = c.numel()
    diff = c - o
    err = diff.abs()
    ref_err = torch.nan_to_num((r - o).abs_(), nan=0.0, posinf=0.0)
    ref_max = float(ref_err.max()) if count else 0.0
    slack = tol.ref_error_factor * ref_max
    o_norm = float(torch.linalg.vector_norm(o)) if count else 0.0
    oracle_rms = o_norm / count**0.5 if count else 0.0
    atol = min(tol.atol, SCALE_FLOOR * oracle_rms)
    o_abs = o.abs()
    bound = o_abs.mul(tol.rtol).add_(atol + slack)
    over = err > bound
    mismatches = int(over.sum())
    significant = o_abs > atol
    rmse = float(torch.linalg.vector_norm(err)) / count**0.5 if count else 0.0
    ref_rmse = float(torch.linalg.vector_norm(ref_err)) / count**0.5 if count else 0.0
    c_norm = float(torch.linalg.vector_norm(c)) if count else 0.0
    cosine = 1.0 if c_norm == o_norm == 0.0 else float(torch.dot(c, o) / max(c_norm * o_norm, 1e-300))
    relative = torch.where(significant, err / o_abs, 0.0) if count else err
    metrics: dict[str, Any] = {
        "numel": int(cand.numel()),
        "max_abs_error": float(err.max()) if count else 0.0,
        "max_rel_error": float(relative.max()) if count else 0.0,
        "mean_abs_error": float(err.mean()) if count else 0.0,
        "rmse": rmse,
        "cosine_similarity": min(cosine, 1.0),
        "mismatch_count": mismatches,
        "reference_max_abs_error": ref_max,
        "reference_rmse": ref_rmse,
        "error_ratio": rmse / ref_rmse if ref_rmse > 0 else (1.0 if rmse == 0 else None),
        "slack": slack,
        "atol": atol,
        "signed_mean_error": float(diff.mean()) if count else 0.0,
        # Fraction of elements measurably worse than the reference's typical error: rounding in a lower
        # precision touches most elements, skipped work only some.
        "error_spread": int((err > 4.0 * ref_rmse).sum()) / count if count else 0.0,
        "oracle_rms": oracle_rms,
    }
    if mismatches:
        flat = int(torch.argmax((err - bound).masked_fill_(~over, float("-inf"))))
        full_index = flat if all_finite else torch.nonzero(finite.reshape(-1))[flat].item()
        metrics["worst_index"] = [int(i) for i in torch.unravel_index(torch.tensor(full_index), cand.shape)]
        metrics["worst_candidate"] = float(c[flat])
        metrics["worst_expected"] = float(o[flat])
    return metrics


def compare_to_oracle(cand: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor, tol: Tolerance) -> Comparison:
    """Compare one candidate output with the oracle, using the reference's own error as slack."""
    if not (cand.is_floating_point() or cand.is_complex()):
        mismatches = int((cand != ref).sum())
        metrics = {"numel": int(cand.numel()), "mismatch_count": mismatches}
        if mismatches:
            return Comparison(False, "tolerance", f"{mismatches} of {cand.numel()} integer elements differ", metrics)
        return Comparison(True, None, "exact match", metrics)
    work = work_dtype(cand.dtype)
    rounded = oracle.to(cand.dtype).to(work)  # the best answer the output's dtype can hold
    c, r = cand.to(work), ref.to(work)
    c_fin, o_fin = torch.isfinite(c), torch.isfinite(rounded)
    problem = _finite_mask_problem(c, rounded, c_fin, o_fin)
    metrics = error_metrics(c, rounded, r, tol, finite=c_fin & o_fin)
    if problem:
        return Comparison(False, "non_finite", problem, metrics)
    if metrics["mismatch_count"]:
        return Comparison(
            False,
            "tolerance",
            f"{metrics['mismatch_count']} of {metrics['numel']} elements outside tolerance "
            f"(max abs error {metrics['max_abs_error']:.3g}, reference's own {metrics['reference_max_abs_error']:.3g})",
            metrics,
        )
    return Comparison(True, None, "within tolerance", metrics)


class OracleCheck:
    """Pass or fail of many candidate outputs against one reference and oracle output, as compare_to_oracle
    decides it, with what does not depend on the candidate (the rounded oracle and the bound) computed once:
    a timed call's output is checked this way in every timing block, in a few passes. Where the oracle or
    the candidate has a non-finite element, or an element is out of bounds, compare_to_oracle decides and
    describes the outcome itself."""

    def __init__(self, ref: torch.Tensor, oracle: torch.Tensor, tol: Tolerance) -> None:
        self.ref, self.oracle, self.tol = ref, oracle, tol
        self.fast = ref.is_floating_point()
        if not self.fast:
            return
        work = work_dtype(ref.dtype)
        self.rounded = oracle.to(ref.dtype).to(work)
        self.fast = bool(torch.isfinite(self.rounded).all())
        if self.fast:  # the slack and the absolute floor as compare_to_oracle computes them for a finite output
            probe = error_metrics(self.rounded, self.rounded, ref.to(work), tol, finite=torch.ones((), dtype=bool))
            self.bound = self.rounded.abs().mul_(tol.rtol).add_(probe["atol"] + probe["slack"])

    def compare(self, cand: torch.Tensor) -> Comparison:
        if self.fast and cand.dtype == self.ref.dtype and cand.shape == self.ref.shape:
            c = cand.to(self.rounded.dtype)
            if bool(torch.isfinite(c).all()) and not bool(((c - self.rounded).abs_() > self.bound).any()):
                return Comparison(True, None, "within tolerance", {"numel": int(cand.numel())})
        return compare_to_oracle(cand, self.ref, self.oracle, self.tol)


def compare_native(cand: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    """KernelBench's check, exactly: torch.allclose(reference, candidate, atol, rtol)."""
    diff = (ref.double() - cand.double()).abs()
    metrics = {
        "numel": int(cand.numel()),
        "max_abs_error": float(diff.max()) if diff.numel() else 0.0,
        "mean_abs_error": float(diff.mean()) if diff.numel() else 0.0,
    }
    try:
        ok = bool(torch.allclose(ref, cand, atol=tol.atol, rtol=tol.rtol))
    except RuntimeError as exc:
        return Comparison(False, "tolerance", f"allclose failed: {exc}", metrics)
    if ok:
        return Comparison(True, None, "allclose", metrics)
    return Comparison(False, "tolerance", f"not allclose (max abs difference {metrics['max_abs_error']:.3g})", metrics)


def compare_replay(
    first: torch.Tensor, second: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor, tol: Tolerance
) -> Comparison:
    """Two runs on identical inputs: bitwise equal, rounding-level apart, or racing.

    Rounding level is what a different accumulation order can change: a few
    units in the last place of the values involved, plus the reference's own
    error slack. A race that reads unfinished or uninitialised data differs by far more.
    """
    a, b = first.double(), second.double()
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    differing = int((~same).sum())
    metrics: dict[str, Any] = {"numel": int(a.numel()), "differing_elements": differing}
    if not differing:
        return Comparison(True, None, "bitwise identical", {**metrics, "max_abs_difference": 0.0})
    if not first.is_floating_point():
        return Comparison(
            False,
            "nondeterministic",
            f"{differing} integer element(s) changed between two runs on the same inputs",
            metrics,
        )
    diff = torch.nan_to_num((a - b).abs(), nan=float("inf"))
    metrics["max_abs_difference"] = float(diff.max())
    o = oracle.to(first.dtype).double()
    slack = error_metrics(a, o, ref.double(), tol)["slack"]
    finite = torch.isfinite(o)
    scale = float(o[finite].abs().mean()) if finite.any() else 0.0
    eps = torch.finfo(first.dtype).eps
    bound = ROUNDING_ULPS * eps * (torch.nan_to_num(o.abs(), posinf=0.0) + scale) + slack
    beyond = int((diff > bound).sum())
    metrics.update(beyond_rounding=beyond, slack=slack)
    if beyond:
        return Comparison(
            False,
            "nondeterministic",
            f"{beyond} element(s) changed beyond rounding between two runs on the same inputs",
            metrics,
        )
    return Comparison(True, None, f"{differing} element(s) differ at rounding level between runs", metrics)
