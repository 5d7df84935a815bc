"""Input contracts: which hidden distributions keep what a task's inputs guarantee (H11).

The hidden trials draw a task's inputs under a hidden seed and then move them into
another distribution (scaled, shifted, heavy-tailed), so that a kernel tuned to the
sample distribution fails. A transformation may only change what the task leaves
free: a lower-triangular input shifted is no longer triangular, and an honest kernel
that skips the zero half would be rejected for a change of contract that was the
judge's. The rule: detect the properties of each input that a kernel may rely on
(exact zeros, signs, integer or two values, [0, 1] and [-1, 1] ranges, probability
or unit rows, symmetry, triangles, sorted rows), add those the task declares in
INPUT_CONTRACT, and apply a variant to an input only when it keeps every one of
them; otherwise the input stays as the task made it and the report says why. In
doubt the rule refuses: a skipped distribution costs coverage, a wrong one rejects
an honest kernel. Properties that cost more than a pass to detect (orthogonality,
definiteness) and relations between inputs are the task's to declare, or to mark
"fixed".

Detection is worker/correctness/input_properties.py's. A transformed input is detected again and falls back to the
input as made if rounding broke a property that held (an overflow to inf, a positive value underflowing to
zero). This module runs in the trusted reference worker: it imports the standard library, torch, wire and
input_properties alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kerneljudge.protocol import wire
from kerneljudge.worker.correctness.input_properties import CHUNK, PROPERTIES, detect

KINDS = ("scaled", "shifted", "heavy_tailed")
# What independent positive factors per element keep (heavy tails): each element's zero and sign.
ELEMENTWISE = ("zeros", "lower_triangular", "upper_triangular", "positive", "negative", "nonnegative", "nonpositive")
NEVER = {"value": "not a tensor", "integer": "an integer tensor", "bool": "a bool tensor"}
PARAMS = {"scaled": "factor", "shifted": "offset", "heavy_tailed": "sigma"}
DESCRIBE = {
    "scaled": "scaled by {factor:g}",
    "shifted": "shifted by {offset:g} std",
    "heavy_tailed": "heavy tails (sigma {sigma:g})",
}


def _checked(variant: Mapping[str, Any]) -> str:
    """The variant's kind, once its parameter is a number it can use."""
    kind = variant.get("kind")
    param = PARAMS.get(kind)  # type: ignore[arg-type]
    if param is None:
        raise ValueError(f"unknown distribution {kind!r}; known: {', '.join(KINDS)}")
    value = variant.get(param)
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not (number and (param == "offset" or value > 0)):
        raise ValueError(f"{kind} needs a finite {param}{'' if param == 'offset' else ' > 0'}, not {value!r}")
    return kind  # type: ignore[return-value]


def _keeps(name: str, variant: Mapping[str, Any], props: Mapping[str, Any]) -> bool:
    """Whether `variant` keeps property `name` of every input that has it."""
    kind = variant["kind"]
    if name == "finite":
        return True  # an overflow is caught when the result is detected again
    if name in ("constant", "integer_valued", "row_stochastic", "unit_norm"):
        return False  # a parameter the task chose, labels, probability rows, unit rows: no real factor keeps them
    if kind == "scaled":  # a positive factor keeps zeros, signs, two values, symmetry (definiteness), triangles, order
        factor = variant["factor"]
        if name in ("unit_interval", "unit_range"):
            return factor <= 1  # scaling down stays inside the range the task promises; up leaves it
        if name == "bounded":
            return factor <= 1 and props.get("min") is not None and props["min"] <= 0 <= props["max"]
        return True
    if kind == "shifted":  # keeps order; breaks zeros, ranges, and definiteness (a - c 11^T, c > 0, may not be)
        offset = variant["offset"]
        if name in ("positive", "nonnegative"):
            return offset > 0
        if name in ("negative", "nonpositive"):
            return offset < 0
        return name in ("sorted", "two_valued")
    return name in ELEMENTWISE  # heavy tails: nothing between elements (symmetry, order, sums) survives


def allows(properties: Mapping[str, Any], variant: Mapping[str, Any]) -> str | None:
    """None when `variant` keeps every property that holds (detected or declared); else the reason it does not."""
    _checked(variant)
    what = properties.get("kind")
    if what != "float":
        return f"{NEVER.get(what, 'not a float16, bfloat16, float32 or float64 tensor')}: never transformed"
    if properties.get("fixed"):
        return "the task declares this input fixed"
    if not properties.get("finite"):
        return "holds inf or NaN: sentinels no transformation may move"
    for name in PROPERTIES:
        if properties.get(name) and not _keeps(name, variant, properties):
            if name == "constant":
                return "constant (one value, or all equal): a parameter the task chose"
            return f"{DESCRIBE[variant['kind']].format(**variant)} does not keep {name}"
    return None


def read_declared(obj: Any) -> dict[Any, Any]:
    """A task's INPUT_CONTRACT, validated: {index: sorted property names | "fixed", "distributions": kinds}."""
    out: dict[Any, Any] = {"distributions": list(KINDS)}
    if obj is None:
        return out
    if not isinstance(obj, Mapping):
        raise ValueError(f"INPUT_CONTRACT must be a dict, not {type(obj).__name__}")
    for key, value in obj.items():
        if key == "distributions":
            if not (isinstance(value, (list, tuple)) and all(isinstance(v, str) and v in KINDS for v in value)):
                raise ValueError(f"INPUT_CONTRACT['distributions'] must list kinds among {', '.join(KINDS)}: {value!r}")
            out["distributions"] = [k for k in KINDS if k in value]
        elif not (isinstance(key, int) and not isinstance(key, bool) and key >= 0):
            raise ValueError(f"INPUT_CONTRACT keys are input indices (int >= 0) or 'distributions', not {key!r}")
        elif value == "fixed" and isinstance(value, str):
            out[key] = "fixed"
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            unknown = [v for v in value if v not in PROPERTIES]
            if unknown:
                raise ValueError(
                    f"INPUT_CONTRACT[{key}]: unknown property {unknown[0]!r}; known: {', '.join(PROPERTIES)}"
                )
            out[key] = sorted(set(value))
        else:
            raise ValueError(f"INPUT_CONTRACT[{key}] must be a list of property names or 'fixed', not {value!r}")
    return out


def reshape(
    torch: Any,
    inputs: list[Any],
    variant: Mapping[str, Any],
    seed: int,
    properties: list[dict[str, Any]] | None = None,
    declared: Mapping[Any, Any] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """`inputs` with `variant` applied to each floating tensor whose properties allow it, and a report:
    the variant, "applied_to" (indices) and "kept_as_made" ({str(index): reason}, JSON keys as sent)."""
    kind = _checked(variant)
    contract = read_declared(declared)
    made = [detect(x) for x in inputs] if properties is None else properties
    if len(made) != len(inputs):
        raise ValueError(f"{len(made)} property records for {len(inputs)} inputs")
    beyond = [i for i in contract if isinstance(i, int) and i >= len(inputs)]
    if beyond:
        raise ValueError(f"INPUT_CONTRACT names input {beyond[0]}, but get_inputs() returned {len(inputs)}")
    out, applied, kept, generators = [], [], {}, {}
    for i, (x, found) in enumerate(zip(inputs, made, strict=True)):
        terms = contract.get(i, [])
        props = {**found, "fixed": True} if terms == "fixed" else {**found, **dict.fromkeys(terms, True)}
        allowed = contract["distributions"]
        reason = allows(props, variant) if kind in allowed else f"the task allows only: {', '.join(allowed) or 'none'}"
        if reason is None:
            y = _apply(torch, x, variant, seed, generators)
            after = detect(y)
            broken = [p for p in PROPERTIES if found.get(p) and not after.get(p)]
            if not broken:
                out.append(y)
                applied.append(i)
                continue
            dtype = str(x.dtype).removeprefix("torch.")
            reason = f"{DESCRIBE[kind].format(**variant)} broke {broken[0]} once rounded to {dtype}"
        out.append(x)
        kept[str(i)] = reason
    return out, {**variant, "applied_to": applied, "kept_as_made": kept}


def _apply(torch: Any, x: Any, variant: Mapping[str, Any], seed: int, generators: dict[Any, Any]) -> Any:
    """The numerics of the hidden trials: float64 on the input's device, cast back, the task's layout kept;
    CHUNK elements at a time, so that the float64 temporaries stay small (whole-tensor float64 copies and
    tails took 4x the input more in each worker: on an H200, KernelBench's 6 GiB inputs ran the device out of
    memory at their first hidden trial, docs/conformance.md). Both workers apply it alike
    (worker/correctness/seeded.py)."""
    flat = x.contiguous().reshape(-1)  # the logical order, as the tails are drawn
    out = torch.empty_like(flat)
    kind = variant["kind"]
    if kind == "shifted":
        offset = float(variant["offset"]) * (_spread(torch, flat) or 1.0)
    elif kind == "heavy_tailed" and x.device not in generators:  # one stream per device, in input order
        generators[x.device] = torch.Generator(device=x.device).manual_seed(seed ^ 0x5EED)
    for start in range(0, flat.numel(), CHUNK):
        wide = flat[start : start + CHUNK].to(torch.float64, copy=True)  # x itself stays as made
        if kind == "scaled":
            wide.mul_(float(variant["factor"]))
        elif kind == "shifted":
            wide.add_(offset)
        else:
            tails = torch.randn(wide.numel(), generator=generators[x.device], dtype=torch.float64, device=x.device)
            wide.mul_(tails.mul_(float(variant["sigma"])).exp_())
        out[start : start + CHUNK] = wide
    shaped = out.reshape(x.shape)
    strides = wire.layout(x)  # a strided input keeps the task's layout
    return shaped if strides is None else wire.placed(shaped, strides=strides)


def _spread(torch: Any, flat: Any) -> float:
    """The standard deviation of `flat` (n - 1), in float64, two passes of CHUNK elements."""
    n = flat.numel()
    if n < 2:
        return 1.0
    total = sum(float(flat[s : s + CHUNK].sum(dtype=torch.float64)) for s in range(0, n, CHUNK))
    mean = total / n
    squares = sum(float((flat[s : s + CHUNK].to(torch.float64) - mean).square().sum()) for s in range(0, n, CHUNK))
    return math.sqrt(squares / (n - 1))
