"""Task screening: a task whose output does not depend on its inputs cannot tell a kernel from a constant (H08).

Pure: the oracle's outputs over the trials in, findings out. An output that is
constant within every trial, or identical across trials whose inputs differed,
is degenerate: a trivial kernel returning that constant passes any comparison,
so a pass on it verifies nothing. The finding is about the task, and it
withholds the verified result all the same.
"""

from __future__ import annotations

import hashlib

import torch

from kerneljudge.checks.catalog import finding
from kerneljudge.verdict import Finding


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()).hexdigest()


def _constant(t: torch.Tensor) -> bool:
    if t.numel() <= 1:
        return False
    flat = t.detach().reshape(-1)
    return bool((flat == flat[0]).all())


def degenerate_outputs(trials: list[list[torch.Tensor]]) -> list[Finding]:
    """`trials[k][i]` is the oracle's output i in trial k (at least two trials with different inputs)."""
    if len(trials) < 2:
        return []
    found = []
    for i in range(len(trials[0])):
        outputs = [t[i] for t in trials if i < len(t) and isinstance(t[i], torch.Tensor)]
        if len(outputs) < 2:
            continue
        constant = all(_constant(o) for o in outputs)
        same = len({digest(o) for o in outputs}) == 1
        if constant or same:
            why = "is constant in every trial" if constant else f"is identical in all {len(outputs)} trials"
            found.append(
                finding(
                    "KJ-T001",
                    "warning",
                    f"the task's output {i} {why}: a trivial kernel would pass",
                    {"output": i, "constant": constant, "identical_across_trials": same, "trials": len(outputs)},
                )
            )
    return found
