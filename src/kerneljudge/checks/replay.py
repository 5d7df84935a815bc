"""Replays: whether two runs of the candidate on identical inputs agree to rounding, or race.

A pure function over tensors, run in the reference worker on the device piece by piece (checks/correctness.py's
pieces); its bound adds the reference's own error slack as the oracle comparison computes it.
"""

from __future__ import annotations

from typing import Any

import torch

from kerneljudge.checks.correctness import Comparison, Tolerance, error_metrics, pieces

# How many units in the last place two runs of a correct kernel may differ by (atomics, split reductions).
ROUNDING_ULPS = 8


def compare_replay(
    first: torch.Tensor, second: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor, tol: Tolerance
) -> Comparison:
    """Two runs on identical inputs: bitwise equal, rounding-level apart, or racing.

    Rounding level is what a different accumulation order can change: a few
    units in the last place of the values involved, plus the reference's own
    error slack. A race that reads unfinished or uninitialised data differs by far more.
    """
    differing = 0
    for _, (a, b) in pieces(first, second):
        differing += int((~((a == b) | (torch.isnan(a) & torch.isnan(b)))).sum())
    metrics: dict[str, Any] = {"numel": int(first.numel()), "differing_elements": differing}
    if not differing:
        return Comparison(True, None, "bitwise identical", {**metrics, "max_abs_difference": 0.0})
    if not first.is_floating_point():
        return Comparison(
            False,
            "nondeterministic",
            f"{differing} integer element(s) changed between two runs on the same inputs",
            metrics,
        )
    rounded = oracle.to(first.dtype)
    slack = error_metrics(first, rounded, ref, tol)["slack"]
    finite_sum, finite_count = 0.0, 0
    for _, (o,) in pieces(rounded, work=torch.float64):
        finite = o[torch.isfinite(o)]
        finite_sum += float(finite.abs().sum())
        finite_count += finite.numel()
    scale = finite_sum / finite_count if finite_count else 0.0
    eps = torch.finfo(first.dtype).eps
    max_difference, beyond = 0.0, 0
    for _, (a, b, o) in pieces(first, second, rounded, work=torch.float64):
        diff = torch.nan_to_num((a - b).abs(), nan=float("inf"))
        max_difference = max(max_difference, float(diff.max()))
        bound = ROUNDING_ULPS * eps * (torch.nan_to_num(o.abs(), posinf=0.0) + scale) + slack
        beyond += int((diff > bound).sum())
    metrics.update(max_abs_difference=max_difference, beyond_rounding=beyond, slack=slack)
    if beyond:
        return Comparison(
            False,
            "nondeterministic",
            f"{beyond} element(s) changed beyond rounding between two runs on the same inputs",
            metrics,
        )
    return Comparison(True, None, f"{differing} element(s) differ at rounding level between runs", metrics)
