"""What the reference worker measures of outputs, on the device, for the parent to judge: the oracle rounded
like the reference, finiteness, an output's signature, task screening's fingerprints and statistics, and how
far one run's outputs are from another's (worker/reference.py; checks/screening.py, tasks lint).

Trusted code: it runs in the reference worker, which never sees the candidate's code.
"""

from __future__ import annotations

import math
from typing import Any

from kerneljudge.checks import correctness
from kerneljudge.worker import evidence
from kerneljudge.worker.base import container_of, items_of


def rounded_like(torch: Any, oracle: Any, out: Any) -> Any:
    """The oracle's floating-point outputs rounded to the dtypes of the reference's: the best answers
    representable there, which is all the comparison uses."""
    if isinstance(oracle, (tuple, list)) and isinstance(out, (tuple, list)) and len(oracle) == len(out):
        return type(oracle)(rounded_like(torch, o, r) for o, r in zip(oracle, out, strict=True))
    if isinstance(oracle, torch.Tensor) and isinstance(out, torch.Tensor):
        if oracle.is_floating_point() and out.is_floating_point():
            return oracle.to(out.dtype)
    return oracle


def all_finite(torch: Any, value: Any) -> bool:
    return all(
        bool(torch.isfinite(t).all()) for t in items_of(value) if isinstance(t, torch.Tensor) and t.is_floating_point()
    )


def json_safe(value: Any) -> Any:
    """Figures as JSON carries them: a NaN or an infinity (a candidate's non-finite output) becomes None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def signature(torch: Any, out: Any) -> dict[str, Any]:
    """The reference output's structure: container, and each item's dtype and shape (or a plain value)."""
    items = []
    for x in items_of(out):
        if isinstance(x, torch.Tensor):
            items.append({"dtype": str(x.dtype).removeprefix("torch."), "shape": list(x.shape)})
        else:
            items.append({"value": repr(x)[:200], "type": type(x).__name__})
    return {"container": container_of(out) if isinstance(out, (tuple, list)) else "Tensor", "items": items}


def screen(torch: Any, out: Any, stats: bool = False) -> list[dict[str, Any] | None]:
    """Per output, what task screening asks of it (checks/screening.py), computed on the device: a
    fingerprint (equal for equal outputs, different otherwise but by chance) and whether it is constant;
    with `stats` (tasks lint) its magnitude and whether zeros or its mean, as a constant, pass KernelBench's
    check (allclose with atol = rtol = 1e-2), in float64, piece by piece."""
    found: list[dict[str, Any] | None] = []
    for x in items_of(out):
        if not isinstance(x, torch.Tensor):
            found.append(None)
            continue
        flat = x.detach().reshape(-1)
        entry: dict[str, Any] = {
            "fingerprint": [*map(str, evidence.digest(x)), list(x.shape)],
            "constant": bool(flat.numel() > 1 and (flat == flat[0]).all()),
        }
        if stats and x.is_floating_point() and flat.numel():
            total, squares, peak, finite = 0.0, 0.0, 0.0, True
            for _, (piece,) in correctness.pieces(flat, work=torch.float64):
                total += float(piece.sum())
                squares += float((piece * piece).sum())
                peak = max(peak, float(piece.abs().max()))
                finite = finite and bool(torch.isfinite(piece).all())
            n = flat.numel()
            mean = total / n
            zeros_pass = mean_passes = True
            for _, (piece,) in correctness.pieces(flat, work=torch.float64):
                zeros_pass = zeros_pass and bool(torch.allclose(torch.zeros_like(piece), piece, 1e-2, 1e-2))
                mean_passes = mean_passes and bool(torch.allclose(torch.full_like(piece, mean), piece, 1e-2, 1e-2))
            variance = max(squares / n - mean * mean, 0.0) * n / max(n - 1, 1)
            entry |= {
                "finite": finite,
                "max_abs": peak,
                "mean": mean,
                "std": variance**0.5,
                "zeros_pass": zeros_pass,
                "mean_passes": mean_passes,
            }
        found.append(entry)
    return found


def differences(torch: Any, out: Any, kept: Any) -> list[dict[str, Any] | None]:
    """Per output, how far `out` is from `kept` (another run's): the largest absolute difference, the largest
    magnitude of `kept`, and whether `kept`, returned as the answer, passes KernelBench's check against `out`
    (allclose, atol = rtol = 1e-2), in float64, piece by piece; None where they cannot be set side by side.
    Task screening tells a random op (dropout: differences of the values' size) from a nondeterministic
    reduction (float atomics: differences in the last bits) by these, on the same inputs; on another input
    seed's, an output that `kept` still passes does not depend on its inputs as far as that check can tell."""
    found: list[dict[str, Any] | None] = []
    for x, y in zip(items_of(out), items_of(kept), strict=False):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)) or x.shape != y.shape or not x.numel():
            found.append(None)
            continue
        diff, peak, passes = 0.0, 0.0, True
        for _, (a, b) in correctness.pieces(x.detach(), y.detach(), work=torch.float64):
            diff = max(diff, float((a - b).abs().nan_to_num(nan=float("inf")).max()))
            peak = max(peak, float(b.abs().nan_to_num(nan=0.0).max()))
            passes = passes and bool(torch.allclose(b, a, 1e-2, 1e-2))
        found.append({"max_diff": diff, "peak": peak, "kept_passes": passes})
    return found
