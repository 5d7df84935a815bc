"""Task screening: a task whose output does not depend on its inputs cannot tell a kernel from a constant (H08).

Pure: the oracle's outputs over the trials in, findings out. An output that is
constant within every trial, or identical across trials whose inputs differed,
is degenerate: a trivial kernel returning that constant passes any comparison,
so a pass on it verifies nothing. The finding is about the task, and it
withholds the verified result all the same.
"""

from __future__ import annotations

from typing import Any

from kerneljudge.checks.catalog import finding
from kerneljudge.verdict import Finding


def degenerate_outputs(trials: list[list[dict[str, Any] | None]]) -> list[Finding]:
    """`trials[k][i]` is the reference worker's screen of the oracle's output i in trial k (at least two
    trials with different inputs): its fingerprint and whether it is constant (worker/outputs.py)."""
    if len(trials) < 2:
        return []
    found = []
    for i in range(len(trials[0])):
        outputs = [t[i] for t in trials if i < len(t) and isinstance(t[i], dict)]
        if len(outputs) < 2:
            continue
        constant = all(o.get("constant") for o in outputs)
        same = len({repr(o.get("fingerprint")) for o in outputs}) == 1
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
