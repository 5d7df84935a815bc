"""`kerneljudge tasks lint`'s flags that are pure: the reference worker's screens of a task's outputs and
inputs, and its size, in; flags out (tasks/lint.py runs the reference and lists every check).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

NATIVE_ATOL = NATIVE_RTOL = 1e-2  # KernelBench's check: torch.allclose(reference, candidate, 1e-2, 1e-2)
MEMORY_SHARE = 0.25
# Two runs of one input whose outputs differ by at most this much of the output's largest value differ in
# rounding only (a reduction in another order: float32 atomics leave ~1e-7 per term); a random op (dropout)
# moves values by their own size.
ROUNDING = 1e-4


@dataclass
class LintFlag:
    id: str
    severity: str  # "warning" or "info"
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)


def same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Two screened outputs with the same fingerprint: identical but by chance."""
    return a is not None and b is not None and a["fingerprint"] == b["fingerprint"]


def output_flags(runs: dict[str, list[dict[str, Any]]], parameter_count: int) -> list[LintFlag]:
    """The flags that compare outputs. `runs`: "seed1", "seed2", "seed1_again", "train1", "train2" and
    "other_init" (seed 1's inputs, the model built from another seed), each the reference worker's screen
    of every output (worker/correctness/outputs.py: fingerprint, max_abs, mean, zeros_pass, mean_passes)."""
    flags: list[LintFlag] = []
    base = runs["seed1"]
    gaps = runs.get("seed2_differences") or []
    for i, out in enumerate(base):
        where = f"output {i}" if len(base) > 1 else "the output"
        constant_passes = out is not None and bool(out.get("zeros_pass") or out.get("mean_passes"))
        gap = gaps[i] if i < len(gaps) else None
        if i < len(runs["seed2"]) and same(out, runs["seed2"][i]):
            flags.append(
                LintFlag(
                    "input_independent",
                    "warning",
                    f"{where} is identical for two input seeds: a kernel that ignores the inputs passes",
                    {"output": i},
                )
            )
        elif gap is not None and gap.get("kept_passes") and not constant_passes:
            # Level 3's EfficientNetB2 and UNetSoftmax in eval mode: outputs that differ in float32 rounding
            # only (the judge's float64 oracle found them identical, KJ-T001), so no fingerprint matched.
            flags.append(
                LintFlag(
                    "input_independent",
                    "warning",
                    f"{where} for one input seed passes KernelBench's check (atol = rtol = 1e-2) against another "
                    f"seed's (differences up to {gap['max_diff']:.3g} of {gap['peak']:.3g}): a kernel that "
                    "ignores the inputs passes",
                    {"output": i, **gap},
                )
            )
        if out is None or "zeros_pass" not in out:
            continue
        if out["zeros_pass"]:
            flags.append(
                LintFlag(
                    "near_zero",
                    "warning",
                    f"zeros pass KernelBench's check on {where} (max |value| {out['max_abs']:.3g})",
                    {"output": i, "max_abs": out["max_abs"]},
                )
            )
        elif out["mean_passes"] and int(math.prod(out["fingerprint"][-1])) > 1:
            flags.append(
                LintFlag(
                    "near_constant",
                    "warning",
                    f"a constant (the mean, {out['mean']:.4g}) passes KernelBench's check on {where}",
                    {"output": i, "mean": out["mean"], "std": out["std"]},
                )
            )
    if parameter_count > 0 and all(same(a, b) for a, b in zip(base, runs["other_init"], strict=False)):
        flags.append(
            LintFlag(
                "weights_unused",
                "warning",
                f"the model has {parameter_count} parameters, but another initialisation gives the same output",
                {"parameters": parameter_count},
            )
        )
    rounding: dict[str, Any] = {}
    for mode, first, second in (("eval", "seed1", "seed1_again"), ("training", "train1", "train2")):
        differs = [i for i, (a, b) in enumerate(zip(runs[first], runs[second], strict=False)) if not same(a, b)]
        gaps = runs.get(f"{second}_differences") or []
        random = [i for i in differs if not in_rounding(gaps[i] if i < len(gaps) else None)]
        if random:
            hint = " (dropout or another random op: KernelBench's harness keeps training mode)"
            hint = hint if mode == "training" else ""
            flags.append(
                LintFlag(
                    "stochastic",
                    "warning",
                    f"the same inputs gave another output in {mode} mode{hint}",
                    {"mode": mode, "outputs": random},
                )
            )
            return flags
        if differs and not rounding:
            rounding = {"mode": mode, "outputs": differs, "differences": [gaps[i] for i in differs]}
    if rounding:
        worst = max(g["max_diff"] / g["peak"] if g["peak"] else 0.0 for g in rounding["differences"])
        flags.append(
            LintFlag(
                "nondeterministic",
                "info",
                f"the same inputs gave outputs that differ in rounding only (at most {worst:.2g} of the largest "
                "value): a reduction in another order (float atomics); the judge's tolerance covers it",
                rounding,
            )
        )
    return flags


def in_rounding(gap: dict[str, float] | None) -> bool:
    """Whether two runs' outputs differ by rounding only: by at most ROUNDING of the output's largest value."""
    return gap is not None and gap.get("max_diff") is not None and gap["max_diff"] <= ROUNDING * gap["peak"]


def unused_input_flags(base: list[dict[str, Any]], swapped: dict[int, tuple[bool | None, list[Any]]]) -> list[LintFlag]:
    """`swapped[k]`: whether input k of seed 2 differs from seed 1's, and the outputs' screens with it in place.
    An input that changed while every output stayed the same is never read (or does not matter)."""
    flags = []
    for k, (differs, screens) in sorted(swapped.items()):
        if not differs or len(screens) != len(base):
            continue
        if all(same(a, b) for a, b in zip(base, screens, strict=True)):
            flags.append(
                LintFlag(
                    "input_unused",
                    "warning",
                    f"input {k} from another seed leaves every output identical: a kernel that never reads it passes",
                    {"input": k},
                )
            )
    return flags


def input_flags(kinds: Sequence[dict[str, Any]]) -> list[LintFlag]:
    flags = []
    for i, kind in enumerate(kinds):
        dtype = kind.get("dtype")
        if dtype is not None and not (dtype.startswith("float") or dtype.startswith("bfloat") or "complex" in dtype):
            flags.append(
                LintFlag(
                    "integer_inputs",
                    "warning",
                    f"input {i} is {dtype}: a harness that casts inputs to a float precision changes it",
                    {"input": i, "dtype": dtype},
                )
            )
    return flags


def memory_flag(total_bytes: int, memory_bytes: int) -> LintFlag | None:
    if total_bytes <= MEMORY_SHARE * memory_bytes:
        return None
    return LintFlag(
        "memory",
        "warning",
        f"inputs, outputs and parameters take {total_bytes / 2**30:.1f} GiB, more than a quarter of "
        f"{memory_bytes / 2**30:.0f} GiB",
        {"bytes": total_bytes, "device_memory_bytes": memory_bytes},
    )
