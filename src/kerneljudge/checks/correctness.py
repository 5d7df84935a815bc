"""Numerical correctness: a candidate's output against the float64 oracle.

Pure functions over tensors on any device: they run in the reference worker, on
the device where the outputs lie, piece by piece (CHUNK elements) so that a
multi-GiB output costs bounded memory. The oracle is first rounded to the output's
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

from collections.abc import Iterator
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
    float64 for every pass over outputs that may hold billions of elements."""
    return torch.float64 if dtype == torch.float64 else torch.float32


# Elements per piece of a pass: the comparison runs in the reference worker, on the device, over outputs of up
# to billions of elements (KernelBench's level 1), and its temporaries must stay a small multiple of this.
CHUNK = 1 << 24


def pieces(*tensors: torch.Tensor, work: torch.dtype | None = None) -> Iterator[tuple[int, list[torch.Tensor]]]:
    """(offset, flat pieces of every tensor at that offset), each piece in `work` dtype when given."""
    flats = [t.reshape(-1) for t in tensors]
    numel = flats[0].numel() if flats else 0
    for start in range(0, numel, CHUNK):
        pieces = [f[start : start + CHUNK] for f in flats]
        yield start, [p.to(work) if work is not None else p for p in pieces]


def _nonfinite_problem(cand: torch.Tensor, oracle: torch.Tensor) -> str | None:
    """Where the candidate and the oracle disagree on being finite (NaN with NaN and +inf with +inf agree)."""
    count = 0
    for _, (c, o) in pieces(cand, oracle):
        c_fin, o_fin = torch.isfinite(c), torch.isfinite(o)
        if bool(c_fin.all()) and bool(o_fin.all()):
            continue
        bad = c_fin != o_fin
        both_nonfinite = ~c_fin & ~o_fin
        bad |= both_nonfinite & ~((torch.isnan(c) & torch.isnan(o)) | (c == o))
        count += int(bad.sum())
    if not count:
        return None
    return f"{count} element(s) are NaN/Inf where the oracle is not (or the reverse)"


def _finite(c: torch.Tensor, o: torch.Tensor) -> torch.Tensor | None:
    """The positions of one piece where candidate and oracle are finite (None: all of them)."""
    mask = torch.isfinite(c) & torch.isfinite(o)
    return None if bool(mask.all()) else mask


@dataclass(frozen=True)
class BoundTerms:
    """What the rule's bound depends on besides the candidate's values: over the positions where the candidate
    and the oracle are both finite, their count, the reference's largest error and its RMS error, the oracle's
    RMS and norm, and from them the slack (the reference's error times its factor) and the absolute floor."""

    count: int
    ref_max: float
    ref_rmse: float
    oracle_rms: float
    oracle_norm: float
    slack: float
    atol: float


def bound_terms(cand: torch.Tensor, oracle: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> BoundTerms:
    """The first pass of `error_metrics` (in the work dtype of the candidate's; sums in float64)."""
    count, ref_max, o_sq, ref_sq = 0, 0.0, 0.0, 0.0
    for _, (c, o, r) in pieces(cand, oracle, ref, work=work_dtype(cand.dtype)):
        mask = _finite(c, o)
        if mask is not None:
            o, r = o[mask], r[mask]
        count += o.numel()
        if o.numel():
            ref_err = torch.nan_to_num((r - o).abs_(), nan=0.0, posinf=0.0)
            ref_max = max(ref_max, float(ref_err.max()))
            ref_sq += float(torch.linalg.vector_norm(ref_err, dtype=torch.float64)) ** 2
            o_sq += float(torch.linalg.vector_norm(o, dtype=torch.float64)) ** 2
    oracle_rms = (o_sq / count) ** 0.5 if count else 0.0
    ref_rmse = (ref_sq / count) ** 0.5 if count else 0.0
    atol = min(tol.atol, SCALE_FLOOR * oracle_rms)
    return BoundTerms(count, ref_max, ref_rmse, oracle_rms, o_sq**0.5, tol.ref_error_factor * ref_max, atol)


def error_metrics(cand: torch.Tensor, oracle: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> dict[str, Any]:
    """Error statistics of cand and ref against oracle (same shape; computed in the work dtype of the
    candidate's), over the positions where cand and oracle are both finite.

    Two passes of pieces: the first finds what the rule's bound depends on (`bound_terms`: the reference's
    largest error, the oracle's RMS), the second counts against it. Sums and norms accumulate in float64.
    """
    work = work_dtype(cand.dtype)
    terms = bound_terms(cand, oracle, ref, tol)
    count, ref_max, slack, atol = terms.count, terms.ref_max, terms.slack, terms.atol
    oracle_rms, ref_rmse = terms.oracle_rms, terms.ref_rmse
    mismatches, max_err, max_rel, sum_err, err_sq, c_sq, dot, sum_diff, spread = 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0
    worst: tuple[float, int, float, float] | None = None  # (excess over the bound, flat index, cand, expected)
    for start, (c, o) in pieces(cand, oracle, work=work):
        mask = _finite(c, o)
        positions = torch.nonzero(mask).reshape(-1) if mask is not None else None
        if mask is not None:
            c, o = c[mask], o[mask]
        if not o.numel():
            continue
        diff = c - o
        err = diff.abs()
        o_abs = o.abs()
        bound = o_abs.mul(tol.rtol).add_(atol + slack)
        over = err > bound
        n_over = int(over.sum())
        mismatches += n_over
        max_err = max(max_err, float(err.max()))
        significant = o_abs > atol
        max_rel = max(max_rel, float(torch.where(significant, err / o_abs, 0.0).max()))
        sum_err += float(err.sum(dtype=torch.float64))
        err_sq += float(torch.linalg.vector_norm(err, dtype=torch.float64)) ** 2
        c_sq += float(torch.linalg.vector_norm(c, dtype=torch.float64)) ** 2
        dot += float(torch.dot(c.double(), o.double())) if work != torch.float64 else float(torch.dot(c, o))
        sum_diff += float(diff.sum(dtype=torch.float64))
        spread += int((err > 4.0 * ref_rmse).sum())
        if n_over:
            excess = (err - bound).masked_fill_(~over, float("-inf"))
            k = int(torch.argmax(excess))
            if worst is None or float(excess[k]) > worst[0]:
                index = start + (int(positions[k]) if positions is not None else k)
                worst = (float(excess[k]), index, float(c[k]), float(o[k]))
    o_norm, c_norm = terms.oracle_norm, c_sq**0.5
    rmse = (err_sq / count) ** 0.5 if count else 0.0
    cosine = 1.0 if c_norm == o_norm == 0.0 else dot / max(c_norm * o_norm, 1e-300)
    metrics: dict[str, Any] = {
        "numel": int(cand.numel()),
        "max_abs_error": max_err,
        "max_rel_error": max_rel,
        "mean_abs_error": sum_err / count if count else 0.0,
        "rmse": rmse,
        "cosine_similarity": min(cosine, 1.0),
        "mismatch_count": mismatches,
        "reference_max_abs_error": ref_max,
        "reference_rmse": ref_rmse,
        "error_ratio": rmse / ref_rmse if ref_rmse > 0 else (1.0 if rmse == 0 else None),
        "slack": slack,
        "atol": atol,
        "signed_mean_error": sum_diff / count if count else 0.0,
        # Fraction of elements measurably worse than the reference's typical error: rounding in a lower
        # precision touches most elements, skipped work only some.
        "error_spread": spread / count if count else 0.0,
        "oracle_rms": oracle_rms,
    }
    if worst is not None:
        metrics["worst_index"] = [int(i) for i in torch.unravel_index(torch.tensor(worst[1]), cand.shape)]
        metrics["worst_candidate"] = worst[2]
        metrics["worst_expected"] = worst[3]
    return metrics


def compare_exact(cand: torch.Tensor, ref: torch.Tensor) -> Comparison:
    """Integer and boolean outputs (labels, indices, masks, counts): equal element by element, or wrong."""
    mismatches = sum(int((c != r).sum()) for _, (c, r) in pieces(cand, ref))
    metrics = {"numel": int(cand.numel()), "mismatch_count": mismatches}
    if mismatches:
        return Comparison(False, "tolerance", f"{mismatches} of {cand.numel()} integer elements differ", metrics)
    return Comparison(True, None, "exact match", metrics)


def compare_to_oracle(cand: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor, tol: Tolerance) -> Comparison:
    """Compare one candidate output with the oracle, using the reference's own error as slack."""
    if not (cand.is_floating_point() or cand.is_complex()):
        return compare_exact(cand, ref)
    if cand.is_complex():
        return compare_to_oracle(torch.view_as_real(cand), torch.view_as_real(ref), torch.view_as_real(oracle), tol)
    rounded = oracle.to(cand.dtype)  # the best answer the output's dtype can hold
    problem = _nonfinite_problem(cand, rounded)
    metrics = error_metrics(cand, rounded, ref, tol)
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
    decides it, with what does not depend on the candidate (the rounded oracle, the bound's constant part)
    computed once: a timed call's output is checked this way in every timing block, in one pass. Where the
    oracle or the candidate has a non-finite element, or an element is out of bounds, compare_to_oracle
    decides and describes the outcome itself."""

    def __init__(self, ref: torch.Tensor, oracle: torch.Tensor, tol: Tolerance) -> None:
        self.ref, self.oracle, self.tol = ref, oracle, tol
        self.fast = ref.is_floating_point()
        if not self.fast:
            return
        self.rounded = oracle.to(ref.dtype)
        self.fast = all(bool(torch.isfinite(o).all()) for _, (o,) in pieces(self.rounded))
        if self.fast:  # the slack and the absolute floor as compare_to_oracle computes them for a finite output
            terms = bound_terms(self.rounded, self.rounded, ref, tol)
            self.constant = terms.atol + terms.slack
            # One pass of the check itself, on the rounded oracle: the device's first launch of each of its
            # kernels (loaded lazily) falls here, at staging, not in the first check, inside the measuring hold.
            self.within(self.rounded)

    def within(self, cand: torch.Tensor) -> bool:
        """Whether a finite candidate output of the reference's dtype and shape is within the bound, everywhere."""
        for _, (c, o) in pieces(cand, self.rounded, work=work_dtype(cand.dtype)):
            bound = o.abs().mul_(self.tol.rtol).add_(self.constant)
            if not bool(torch.isfinite(c).all()) or bool(((c - o).abs_() > bound).any()):
                return False
        return True

    def compare(self, cand: torch.Tensor) -> Comparison:
        if self.fast and cand.dtype == self.ref.dtype and cand.shape == self.ref.shape and self.within(cand):
            return Comparison(True, None, "within tolerance", {"numel": int(cand.numel())})
        return compare_to_oracle(cand, self.ref, self.oracle, self.tol)


def compare_native(cand: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    """KernelBench's check, exactly: torch.allclose(reference, candidate, atol, rtol), piece by piece."""
    max_diff, sum_diff, ok = 0.0, 0.0, True
    try:
        for _, (r, c) in pieces(ref, cand):
            diff = (r.double() - c.double()).abs()
            if diff.numel():
                max_diff = max(max_diff, float(diff.max()))
                sum_diff += float(diff.sum())
            ok = ok and bool(torch.allclose(r, c, atol=tol.atol, rtol=tol.rtol))
    except RuntimeError as exc:
        return Comparison(False, "tolerance", f"allclose failed: {exc}", {"numel": int(cand.numel())})
    metrics = {
        "numel": int(cand.numel()),
        "max_abs_error": max_diff,
        "mean_abs_error": sum_diff / cand.numel() if cand.numel() else 0.0,
    }
    if ok:
        return Comparison(True, None, "allclose", metrics)
    return Comparison(False, "tolerance", f"not allclose (max abs difference {max_diff:.3g})", metrics)
