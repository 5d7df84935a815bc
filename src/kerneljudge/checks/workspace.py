"""What the candidate's workers left in their workspaces, turned into findings. Pure: logs in, findings out.

The parent's walk of a workspace is bounded (sandbox/tree.py); a candidate's workspace past a bound (a folder
chain deeper than the walk goes, more entries or longer names than it reads, a folder it may not open) is the
candidate's doing, whatever the mode: the judge cannot say what it left (KJ-R070). The reference's workspace
is the task's, and never a finding against the candidate.
"""

from __future__ import annotations

from kerneljudge.checks.catalog import finding
from kerneljudge.results.verdict import Finding, WorkerLog


def past_bounds(logs: dict[str, WorkerLog]) -> list[Finding]:
    """KJ-R070 where a candidate worker's workspace went past the walk's bounds: which bound, its limit and the
    walk's counts (of the first such worker), and every such worker by log name."""
    past = {
        name: log.workspace_changes
        for name, log in logs.items()
        if name.startswith("candidate") and log.workspace_changes and log.workspace_changes.get("bound")
    }
    if not past:
        return []
    first = next(iter(past.values()))
    walked = {k: v for k, v in (first.get("walked") or {}).items() if k != "bound"}
    summary = f"the candidate left more in its workspace than the judge reads ({first['bound']} past the bound)"
    return [finding("KJ-R070", "error", summary, {"bound": first["bound"], **walked, "workers": sorted(past)})]
