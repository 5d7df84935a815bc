"""Preflight: what the candidate's source says, turned into findings before anything is imported.

In `audit` mode high-risk constructs are recorded as warnings (the candidate
still runs, and cannot be verified); in `enforce` mode they are errors and the
candidate is rejected before import. Under the `strict` policy a candidate that
declares no custom kernel fails, and high-level torch compute in the model is
suspicious; under `practical` both are recorded only. This module turns the
scan's constructs into findings (`preflight`).

- `scan.py`: static analysis of the candidate's source on its AST (comments and strings hide nothing);
- `scopes.py`: which names a function scope binds, so that a parameter called `input` is not the builtin;
- `rules.py`: the rule tables: which names, imports and attributes reveal which construct;
- `kernel_rules.py`: the policy's tables: what declares a custom kernel, which torch calls compute outside one;
- `allowlist.py`: the allow-list: the modules, builtins and attributes a candidate's source may reach;
- `reach.py`: the allow-list's side of the scan: what a resolved name, attribute or builtin reaches;
- `entry_point.py`: whether the source can define `ModelNew` at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kerneljudge.checks.catalog import CATALOG, finding, severity
from kerneljudge.config import native_mode
from kerneljudge.preflight.entry_point import cannot_define_entry_point
from kerneljudge.preflight.scan import Construct, StaticReport, scan
from kerneljudge.results.verdict import Finding
from kerneljudge.sources import pyast

MAX_OCCURRENCES = 20


@dataclass
class PreflightResult:
    report: StaticReport
    findings: list[Finding] = field(default_factory=list)
    defines_no_model: bool = False  # the source cannot bind ModelNew (entry_point.py): it fails before any worker

    @property
    def rejected(self) -> bool:
        return any(f.severity == "error" for f in self.findings)


def _grouped(constructs: list[Construct]) -> dict[str, list[Construct]]:
    groups: dict[str, list[Construct]] = {}
    for construct in constructs:
        groups.setdefault(construct.code, []).append(construct)
    return groups


def _evidence(occurrences: list[Construct]) -> dict[str, object]:
    return {
        "occurrences": [{"line": c.line, "detail": c.detail} for c in occurrences[:MAX_OCCURRENCES]],
        "count": len(occurrences),
    }


def preflight(source: str, mode: str, policy: str) -> PreflightResult:
    """Scan the source and judge it under a mode and policy; raises SyntaxError for unparsable source."""
    report = scan(source)
    result = PreflightResult(report, defines_no_model=cannot_define_entry_point(pyast.parse(source)))
    if native_mode(mode):
        return result
    for code, occurrences in sorted(_grouped(report.constructs).items()):
        entry = CATALOG[code]
        level = severity(code, policy, mode) if entry.high_risk else "info"  # other constructs: recorded only
        first = occurrences[0]
        summary = f"{entry.title} (line {first.line}: {first.detail})"
        result.findings.append(finding(code, level, summary, _evidence(occurrences)))
    if not report.declared_kernels:
        result.findings.append(finding("KJ-S070", severity("KJ-S070", policy)))
    if report.torch_compute:
        first = report.torch_compute[0]
        result.findings.append(
            finding(
                "KJ-S071",
                severity("KJ-S071", policy),
                f"{CATALOG['KJ-S071'].title} (line {first.line}: {first.detail})",
                _evidence(report.torch_compute),
            )
        )
    return result


__all__ = ["PreflightResult", "preflight", "scan"]
