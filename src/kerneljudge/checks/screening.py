"""Task screening: a task whose output does not depend on its inputs cannot tell a kernel from a constant (H08),
and one whose output depends on the random state as much as the comparison allows cannot tell a kernel from noise.

Pure: the reference worker's figures in, findings out. An output that is
constant within every trial, or identical across trials whose inputs differed,
is degenerate: a trivial kernel returning that constant passes any comparison,
so a pass on it verifies nothing (KJ-T001). An output that moves beyond rounding
when the reference runs again on identical inputs from another random state,
while the comparison still passes the moved output, is nondeterministic past
what the comparison can see (KJ-T003, checks/reference_replay.py). Each finding
is about the task, and withholds the verified result all the same: a warning,
SUSPICIOUS, not a failure the task would put on the candidate.
"""

from __future__ import annotations

from typing import Any

from kerneljudge.checks.catalog import finding
from kerneljudge.results.verdict import Finding


def degenerate_outputs(trials: list[list[dict[str, Any] | None]]) -> list[Finding]:
    """`trials[k][i]` is the reference worker's screen of the oracle's output i in trial k (at least two
    trials with different inputs): its fingerprint and whether it is constant (worker/correctness/outputs.py)."""
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


def nondeterministic_reference(outputs: list[dict[str, Any] | None]) -> list[Finding]:
    """`outputs[i]`: the reference worker's figures for output i of the reference run twice on one trial's
    inputs, from the call seed and from another random state (checks/reference_replay.py). KJ-T003 where an
    output moved beyond rounding and the oracle comparison passes the moved output all the same: the
    comparison's bound covers the reference's own randomness, so a wrong kernel within it passes."""
    unstable = [
        {"output": i, **figures}
        for i, figures in enumerate(outputs)
        if isinstance(figures, dict) and figures.get("beyond_rounding") and figures.get("replay_passes") is True
    ]
    if not unstable:
        return []
    which = ", ".join(str(u["output"]) for u in unstable)
    return [
        finding(
            "KJ-T003",
            "warning",
            f"the reference's own replays on identical inputs disagree (output {which}, another random state) "
            "and the comparison passes either: the task cannot verify any candidate",
            {"outputs": unstable},
        )
    ]
