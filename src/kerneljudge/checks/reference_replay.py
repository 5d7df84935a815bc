"""The reference's own replay: its output on a trial's inputs from another random state, set against its first run.

A pure function over tensors, run in the reference worker on the device piece by piece (checks/correctness.py's
pieces), like the candidate's replays (checks/replay.py); the parent decides from its figures
(checks/screening.py, KJ-T003). Two questions per output: did the output move beyond rounding when only the
random state changed, and would the judge's own comparison pass the moved output as a candidate's? Both yes:
the comparison cannot tell one draw of the reference from another, so it cannot tell a wrong kernel whose error
is as large from a right one.

"Beyond rounding" is the dtype's relative tolerance (docs/tolerances.md) of the output's largest magnitude, the
rule `kerneljudge tasks lint` uses for fp32 (1e-4): a reduction summed in another order (float atomics) moves an
fp32 value by about 1e-7 per term, a random op moves values by their own size. The reference-error slack of the
comparison is left out here on purpose: a reference whose float64 oracle draws other random numbers than it
(`torch.randn_like` of a float64 tensor) has that slack inflated by its own randomness.
"""

from __future__ import annotations

from typing import Any

import torch

from kerneljudge.checks.correctness import OracleCheck, Tolerance, compare_to_oracle, pieces, work_dtype


def replay_figures(first: Any, again: Any, oracle: torch.Tensor | None, tol: Tolerance) -> dict[str, Any]:
    """One output of the reference's two runs on identical inputs, from two random states: `numel`,
    `differing_elements`, `beyond_rounding` (elements that moved by more than `tol.rtol` of the first run's
    largest finite magnitude), `max_abs_difference`, `peak`, and `replay_passes`: whether the oracle comparison
    (first run as the reference, `oracle` rounded like it) passes the replay (None without an oracle, or where
    nothing moved beyond rounding: then it is not asked). Outputs
    whose dtype or shape changed between the runs, or that lie in the first run's storage (a buffer the
    reference writes again at every call), are `comparable: False`."""
    if not (isinstance(first, torch.Tensor) and isinstance(again, torch.Tensor)):
        return {"comparable": False, "replay_passes": False}
    if first.dtype != again.dtype or first.shape != again.shape:
        return {"comparable": False, "numel": int(first.numel()), "replay_passes": False}
    if first.numel() and first.untyped_storage().data_ptr() == again.untyped_storage().data_ptr():
        return {"comparable": False, "shared_storage": True, "numel": int(first.numel()), "replay_passes": False}
    if first.is_complex():
        first, again = torch.view_as_real(first), torch.view_as_real(again)
        oracle = torch.view_as_real(oracle) if oracle is not None else None
    figures: dict[str, Any] = {"comparable": True, "numel": int(first.numel())}
    if torch.equal(first, again):  # one pass, the common case: nothing moved (NaN never equals: the long way)
        return figures | {"differing_elements": 0, "beyond_rounding": 0, "replay_passes": None}
    if not first.is_floating_point():  # integers and booleans: any change is beyond rounding
        differing = sum(int((a != b).sum()) for _, (a, b) in pieces(first, again))
        figures |= {"differing_elements": differing, "beyond_rounding": differing}
    else:
        work = work_dtype(first.dtype)  # the difference of two values is exact there (checks/correctness.py)
        peak = 0.0
        for _, (a,) in pieces(first, work=work):
            if a.numel():
                peak = max(peak, float(torch.nan_to_num(a.abs(), nan=0.0, posinf=0.0).max()))
        differing, beyond, max_difference = 0, 0, 0.0
        for _, (a, b) in pieces(first, again, work=work):
            same = (a == b) | (torch.isnan(a) & torch.isnan(b))
            diff = torch.nan_to_num((a - b).abs(), nan=float("inf")).masked_fill_(same, 0.0)
            differing += int((~same).sum())
            beyond += int((diff > tol.rtol * peak).sum())
            if diff.numel():
                max_difference = max(max_difference, float(diff.max()))
        figures |= {
            "differing_elements": differing,
            "beyond_rounding": beyond,
            "max_abs_difference": max_difference,
            "peak": peak,
        }
    passes = None
    if oracle is not None and figures["beyond_rounding"]:  # pass or fail only, as a timed output is checked
        check = OracleCheck(first, oracle, tol)
        passes = check.within(again) if check.fast else compare_to_oracle(again, first, oracle, tol).passed
    figures["replay_passes"] = passes
    return figures
