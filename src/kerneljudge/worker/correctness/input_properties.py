"""The properties of an input that a kernel may rely on, as the input contracts read them (H11).

detect() reports them for worker/correctness/contracts.py, which adds what the task declares. Detection runs on the
tensor's device, block by block (temporaries of about CHUNK elements, or of one row where a row is longer),
and brings back only scalars. Zeros, triangles, integers, signs and order are tested exactly; row sums and
symmetry within row_tolerance and symmetry_tolerance. This module runs in the trusted reference worker: it
imports the standard library and torch alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

FLOATS = ("float16", "bfloat16", "float32", "float64")
# Detectable and declarable properties, in the order a refusal names the first one a variant breaks.
# "bounded" is never detected (a sample cannot tell a guaranteed range from a draw's extremes): declare it.
# fmt: off
PROPERTIES = (
    "constant", "integer_valued", "row_stochastic", "unit_norm", "symmetric", "lower_triangular", "upper_triangular",
    "zeros", "two_valued", "sorted", "unit_interval", "unit_range", "bounded", "positive", "negative", "nonnegative",
    "nonpositive", "finite",
)
# fmt: on
# Elements per block: temporaries of tens of MiB for any input, and few enough blocks (64 for 4 GiB of float32)
# that launches do not dominate: on an H200 detection took 10 ms for 4 GiB of randn, at most 26 ms with structure.
CHUNK = 1 << 24
# Zeros rarer than this are chance (a float16 draw that underflowed, torch.rand's exact 0.0), not structure.
CHANCE_ZEROS = 2.0**-20


def row_tolerance(eps: float, cols: int) -> float:
    """|row sum - 1| (or |row norm - 1|) allowed: each element rounded to the dtype moves a non-negative unit
    row by at most eps/2 in all, and so does the sum's own rounding here; a normalisation computed in float32
    adds about log2(cols) float32 roundings."""
    return 4 * eps + 4 * math.log2(cols) * 2.0**-23


def symmetry_tolerance(eps: float, n: int, peak: float, wide: bool) -> float:
    """|x - x^T| allowed: a @ a.T rounds (i, j) and (j, i) to the dtype after summing them in different orders,
    each sum within n roundings of its accumulator (float32, or float64 for float64) of the largest entry (which
    bounds sum |a_ik a_jk| for a Gram matrix)."""
    return peak * (2 * eps + n * (2.0**-52 if wide else 2.0**-23))


def detect(x: Any) -> dict[str, Any]:
    """The properties of one input that a kernel may rely on; JSON-able (module docstring)."""
    import torch

    if not isinstance(x, torch.Tensor):
        return {"kind": "value"}
    if x.dtype == torch.bool:
        return {"kind": "bool"}
    if str(x.dtype).removeprefix("torch.") not in FLOATS:
        return {"kind": "integer" if not (x.is_floating_point() or x.is_complex()) else "other"}
    found: dict[str, Any] = {"kind": "float", **dict.fromkeys(PROPERTIES, False), "min": None, "max": None}
    if x.numel() == 0:
        return {**found, "finite": True, "constant": True}
    lo, hi = torch.stack(list(torch.aminmax(x))).tolist()  # NaN propagates: one pass also tells finiteness
    found.update(
        finite=math.isfinite(lo) and math.isfinite(hi),
        constant=lo == hi,
        positive=lo > 0,
        negative=hi < 0,
        nonnegative=lo >= 0,
        nonpositive=hi <= 0,
        unit_interval=0 <= lo and hi <= 1,
        unit_range=-1 <= lo and hi <= 1,
    )
    if not found["finite"]:
        return found  # inf and NaN are sentinels no variant may touch: the structure need not be read
    found.update(min=lo, max=hi)
    rows, cols = (x.shape[-2], x.shape[-1]) if x.dim() >= 2 else (1, x.numel())
    x3 = x.reshape(-1, rows, cols)  # a view, unless batch dimensions that cannot merge force one copy
    eps, peak, numel = torch.finfo(x.dtype).eps, max(-lo, hi), x.numel()

    def run(b0: int, b1: int, r0: int, r1: int, c0: int, c1: int) -> Any:  # one past the block: order across edges
        return x3[b0:b1, r0:r1, c0 : c1 + 1]

    checks: dict[str, Any] = {
        "integer_valued": lambda *s: (_at(x3, s) == _at(x3, s).trunc()).all(),
        "two_valued": lambda *s: ((_at(x3, s) == lo) | (_at(x3, s) == hi)).all(),  # a mask such as {0, 1/(1-p)}
    }
    if cols > 1:
        checks["ascending"] = lambda *s: (run(*s)[..., 1:] >= run(*s)[..., :-1]).all()
        checks["descending"] = lambda *s: (run(*s)[..., 1:] <= run(*s)[..., :-1]).all()
    held, nonzero = _scan(torch, x3.shape, True, checks, lambda *s: torch.count_nonzero(_at(x3, s)))
    found.update(
        zeros=numel - nonzero > numel * CHANCE_ZEROS,
        integer_valued="integer_valued" in held,
        two_valued="two_valued" in held and numel > 2 and lo != hi,
        sorted="ascending" in held or "descending" in held,
    )
    # Whole rows, and only what is still possible: triangles need zeros, row sums non-negative values.
    checks, row_tol = {}, row_tolerance(eps, cols)
    if found["zeros"] and rows > 1 and cols > 1:
        checks["lower_triangular"] = lambda *s: _zero_beyond(torch, x3, s, above=True)
        checks["upper_triangular"] = lambda *s: _zero_beyond(torch, x3, s, above=False)
    if rows == cols > 1:
        tol = symmetry_tolerance(eps, cols, peak, x.dtype == torch.float64)
        checks["symmetric"] = lambda *s: (_at(x3, s) - x3[s[0] : s[1], :, s[2] : s[3]].mT).abs().amax() <= tol
    if cols > 1 and lo >= 0:
        # In the dtype's own accumulator: a dtype= argument would copy a huge row to float64 first.
        checks["row_stochastic"] = lambda *s: (_at(x3, s).sum(-1).double() - 1).abs().amax() <= row_tol
    if cols > 1 and found["unit_range"]:
        norm = torch.linalg.vector_norm
        checks["unit_norm"] = lambda *s: (norm(_at(x3, s), dim=-1).double() - 1).abs().amax() <= row_tol
    found.update(dict.fromkeys(_scan(torch, x3.shape, False, checks)[0], True))
    return found


def _blocks(shape: Any, split_rows: bool) -> Iterator[tuple[int, ...]]:
    """(matrices, rows, columns) ranges of blocks of about CHUNK elements, whole rows unless `split_rows`."""
    count, rows, cols = shape
    if rows * cols <= CHUNK:
        step = max(1, CHUNK // (rows * cols))
        yield from ((b, b + step, 0, rows, 0, cols) for b in range(0, count, step))
    elif cols <= CHUNK or not split_rows:
        step = max(1, CHUNK // cols)
        yield from ((b, b + 1, r, r + step, 0, cols) for b in range(count) for r in range(0, rows, step))
    else:
        yield from (
            (b, b + 1, r, r + 1, c, c + CHUNK) for b in range(count) for r in range(rows) for c in range(0, cols, CHUNK)
        )


def _at(x3: Any, span: tuple[int, ...]) -> Any:
    b0, b1, r0, r1, c0, c1 = span
    return x3[b0:b1, r0:r1, c0:c1]


def _zero_beyond(torch: Any, x3: Any, span: tuple[int, ...], above: bool) -> Any:
    """Whether a block is zero above (or below) the diagonal of its matrices. An index mask rather than
    torch.triu, which took 20 ms a call on a two-thread CPU whatever the size."""
    block = _at(x3, span)
    rows = torch.arange(span[2], span[2] + block.shape[-2], device=block.device)[:, None]
    cols = torch.arange(span[4], span[4] + block.shape[-1], device=block.device)
    return ~(block.ne(0) & (cols > rows if above else cols < rows)).any()


def _scan(torch: Any, shape: Any, split_rows: bool, checks: dict[str, Any], tally: Any = None) -> tuple[set, int]:
    """The names of `checks` (block -> 0-dim bool) that hold in every block, and `tally` summed over the blocks.
    One sync a block: a check that failed is not computed again, and a scan with nothing left stops."""
    alive, total = dict(checks), []
    for span in _blocks(shape, split_rows):
        if not alive and tally is None:
            break
        if tally is not None:
            total.append(tally(*span))
        if alive:
            flags = torch.stack([check(*span) for check in alive.values()]).tolist()
            alive = {name: check for (name, check), ok in zip(alive.items(), flags, strict=True) if ok}
    return set(alive), int(torch.stack(total).sum()) if total else 0
