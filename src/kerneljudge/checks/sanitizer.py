"""compute-sanitizer's reports, read: text in, reports and findings out (pure; docs/sanitizer.md).

NVIDIA's compute-sanitizer prints each report as a header line and indented detail lines, every line
behind a `========= ` prefix, and ends with a summary (`ERROR SUMMARY: 3 errors`, or for racecheck
`RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)`). Two location forms are read, the current
`kernel(args)+0x1b0 in /path/file.cu:25` and the older `0x1b0 in /path/file.cu:25:kernel(args)`, each
without the file and line where the code has no line information. A report counts against the candidate
only where it lies in the candidate's own code: a kernel its source declares, or a source file in its
workspace (a torch extension's build, its Triton module); cuBLAS's, cuDNN's and torch's own kernels are
recorded and never held against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from kerneljudge.checks import catalog
from kerneljudge.checks.catalog import finding
from kerneljudge.results.verdict import Failure, Finding

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
CODES = {"racecheck": "KJ-R060", "memcheck": "KJ-R061", "initcheck": "KJ-R062", "synccheck": "KJ-R063"}
FAILURE_KINDS = {"racecheck": "race", "synccheck": "race", "memcheck": "memory_error"}
MAX_REPORTS = 8  # kept in a finding's evidence, per tool
TEXT_CAP = 300

PREFIX = re.compile(r"^=+ ?")
RACE = re.compile(r"^(Error|Warning|Info): Race reported between (\w+) access at (.+)$")
RACE_PEER = re.compile(r"^and (\w+) access at (.+?)(?: \[(\d+) hazards?\])?$")
HAZARD = re.compile(r"^(ERROR|WARNING|INFO): Potential (RAW|WAR|WAW) hazard detected at (\S+) (0x[0-9a-fA-F]+)")
HAZARD_THREAD = re.compile(r"^(Read|Write) Thread \(([^)]*)\) at (.+)$")
ACCESS = re.compile(r"^(?:Invalid|Misaligned|Out-of-range|Warp|Illegal|Malloc/Free)\b.*")
UNINITIALIZED = re.compile(r"^Uninitialized \S+ memory read")
BARRIER = re.compile(r"^(?:Barrier error|Invalid arguments?\b|Divergent threads?\b)")
API = re.compile(r"^(?:Program hit|Host API|Target application|Internal Sanitizer|Error:|Warning:)")  # not a kernel's
AT = re.compile(r"^at (.+)$")
HAZARDS = re.compile(r" \[(\d+) hazards?\]$")
NEW_FORM = re.compile(r"^(?P<kernel>.+?)\+(?P<pc>0x[0-9a-fA-F]+)(?: in (?P<file>.+):(?P<line>\d+))?$")
OLD_FORM = re.compile(r"^(?P<pc>0x[0-9a-fA-F]+) in (?:(?P<file>[^:]+):(?P<line>\d+):)?(?P<kernel>.+)$")
ERROR_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


@dataclass(frozen=True)
class Location:
    kernel: str | None = None  # as printed: a signature, a Triton kernel's name
    name: str | None = None  # the kernel's bare name (no return type, namespace, template or arguments)
    file: str | None = None
    line: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "name": self.name, "file": self.file, "line": self.line}


@dataclass(frozen=True)
class Report:
    tool: str
    kind: str  # race, hazard, access, uninitialized, barrier, api
    level: str  # error or warning (racecheck's own level; every other report is an error)
    headline: str
    where: tuple[Location, ...] = ()  # a race: both accesses
    hazards: int = 1
    detail: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "level": self.level,
            "headline": self.headline,
            "where": [w.as_dict() for w in self.where],
            "hazards": self.hazards,
            "detail": list(self.detail),
        }


@dataclass(frozen=True)
class ToolRun:
    """One tool's run: its reports, its summary counts (None where no summary was printed), and why the run
    did not finish where it did not (set by the runner, sanitize.py)."""

    tool: str
    reports: tuple[Report, ...] = ()
    complete: bool = False
    errors: int | None = None
    warnings: int | None = None
    problem: str | None = None
    roots: tuple[str, ...] = ()  # the sanitized worker's workspace: a source file there is the candidate's
    seconds: float | None = None


def bare_name(kernel: str) -> str:
    """`void ns::k<256>(const float *, int)` -> `k`; `_bias_relu_kernel` stays."""
    text = kernel.replace("(anonymous namespace)", "anonymous").strip()
    text = re.sub(r"^(?:void|static|__global__)\s+", "", text)
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            cut = i
            break
    text = text[:cut]
    while re.search(r"<[^<>]*>", text):
        text = re.sub(r"<[^<>]*>", "", text)
    return text.split("::")[-1].strip()


def location(text: str) -> Location:
    """A location in either of compute-sanitizer's forms; the kernel alone where neither matches."""
    text = text.strip()
    match = NEW_FORM.match(text) or OLD_FORM.match(text)
    if match is None:
        return Location(kernel=text[:TEXT_CAP], name=bare_name(text) or None)
    kernel = match.group("kernel").strip()
    line = match.group("line")
    return Location(kernel[:TEXT_CAP], bare_name(kernel) or None, match.group("file"), int(line) if line else None)


def _header(tool: str, line: str) -> Report | None:
    if match := RACE.match(line):
        level, _, where = match.groups()
        return Report(tool, "race", _level(level), line[:TEXT_CAP], (location(HAZARDS.sub("", where)),))
    if match := HAZARD.match(line):
        return Report(tool, "hazard", _level(match.group(1)), line[:TEXT_CAP])
    if UNINITIALIZED.match(line):
        return Report(tool, "uninitialized", "error", line[:TEXT_CAP])
    if BARRIER.match(line):
        return Report(tool, "barrier", "error", line[:TEXT_CAP])
    if API.match(line):
        return Report(tool, "api", "error", line[:TEXT_CAP])
    if ACCESS.match(line):
        return Report(tool, "access", "error", line[:TEXT_CAP])
    return None


def _level(word: str) -> str:
    return {"error": "error", "warning": "warning"}.get(word.lower(), "info")


def _continue(report: Report, line: str) -> Report:
    """A detail line added to the report it follows."""
    if match := RACE_PEER.match(line):  # the other access of a race, with its hazard count: counts add up
        _, where, hazards = match.groups()
        before = report.hazards if len(report.where) > 1 else 0
        return replace(report, where=(*report.where, location(where)), hazards=before + int(hazards or 1))
    if match := HAZARD_THREAD.match(line):
        return replace(report, where=(*report.where, location(match.group(3))), detail=(*report.detail, line)[:4])
    if (match := AT.match(line)) and not report.where:
        return replace(report, where=(location(match.group(1)),))
    return replace(report, detail=(*report.detail, line[:TEXT_CAP])[:4])


def parse(tool: str, text: str) -> ToolRun:
    """The reports and summary of one tool's output (the sanitized worker's stdout: the candidate's own
    lines among them are skipped, and a forged report only counts against the one who forged it)."""
    reports: list[Report] = []
    current: Report | None = None
    complete, errors, warnings = False, None, None
    for raw in text.splitlines():
        if not raw.startswith("="):
            continue
        line = PREFIX.sub("", raw).strip()
        if match := RACE_SUMMARY.search(line):
            complete, errors, warnings = True, int(match.group(2)), int(match.group(3))
            current = None
        elif match := ERROR_SUMMARY.search(line):
            complete, errors = True, int(match.group(1))
            current = None
        elif not line:
            current = None
        elif (header := _header(tool, line)) is not None:
            reports.append(header)
            current = header
        elif current is not None:
            reports[-1] = current = _continue(current, line)
    return ToolRun(tool, tuple(reports), complete, errors, warnings)


def own(report: Report, declared: set[str], roots: tuple[str, ...]) -> bool:
    """A device report in the candidate's code: a kernel it declares, or a source file in its workspace
    (racecheck's info level, shown only when asked for, never counts)."""
    if report.kind == "api" or report.level == "info":
        return False
    return any(
        (w.name is not None and w.name in declared)
        or (w.file is not None and any(w.file.startswith(root.rstrip("/") + "/") for root in roots if root))
        for w in report.where
    )


def severity(tool: str, policy: str) -> str:
    """racecheck, memcheck, synccheck: error; initcheck: as the catalog says under the policy (a warning under
    strict, recorded only under practical)."""
    code = CODES[tool]
    return catalog.severity(code, policy) if catalog.CATALOG[code].by_policy else "error"


def _where(report: Report) -> str:
    places = []
    for w in report.where:
        at = f"{w.file.rsplit('/', 1)[-1]}:{w.line}" if w.file and w.line is not None else None
        places.append(" at ".join(p for p in (w.name, at) if p))
    return " and ".join(dict.fromkeys(p for p in places if p)) or "an unnamed kernel"


def findings_for(runs: list[ToolRun], declared: set[str], policy: str) -> list[Finding]:
    """One finding per tool whose reports lie in the candidate's own code."""
    found = []
    for run in runs:
        mine = [r for r in run.reports if own(r, declared, run.roots)]
        if not mine:
            continue
        others = sorted({w.name or "?" for r in run.reports if r not in mine for w in r.where[:1]})
        hazards = sum(r.hazards for r in mine)
        first = mine[0]
        count = f"{len(mine)} report(s)" + (f", {hazards} hazards" if run.tool == "racecheck" else "")
        summary = f"{run.tool}: {first.headline} in {_where(first)} ({count})"
        evidence = {
            "tool": run.tool,
            "reports": [r.as_dict() for r in mine[:MAX_REPORTS]],
            "count": len(mine),
            "hazards": hazards,
            "summary_errors": run.errors,
            "summary_warnings": run.warnings,
            "other_kernels": others[:MAX_REPORTS],
        }
        found.append(finding(CODES[run.tool], severity(run.tool, policy), summary[:500], evidence))
    return found


def failure_for(found: list[Finding]) -> Failure | None:
    """The failure that error-severity sanitizer findings amount to: `race` (racecheck, synccheck) before
    `memory_error` (memcheck)."""
    errors = [f for f in found if f.severity == "error" and f.evidence.get("tool") in FAILURE_KINDS]
    if not errors:
        return None
    first = min(errors, key=lambda f: FAILURE_KINDS[f.evidence["tool"]] != "race")
    kind = FAILURE_KINDS[first.evidence["tool"]]
    return Failure(kind=kind, phase="sanitizer", summary=f"{first.code}: {first.summary}")  # type: ignore[arg-type]


def status(run: ToolRun, declared: set[str]) -> str:
    """`reported` (reports in the candidate's code), `clean` (a full run without), or `inconclusive`."""
    if any(own(r, declared, run.roots) for r in run.reports):
        return "reported"
    return "clean" if run.complete and run.problem is None else "inconclusive"


def summary(runs: list[ToolRun], declared: set[str]) -> dict[str, Any]:
    """What the record keeps of each tool's run (`correctness.sanitizer.tools`)."""
    return {
        run.tool: {
            "status": status(run, declared),
            "own_reports": sum(own(r, declared, run.roots) for r in run.reports),
            "other_reports": sum(not own(r, declared, run.roots) for r in run.reports),
            "summary_errors": run.errors,
            "summary_warnings": run.warnings,
            "problem": run.problem,
            "seconds": run.seconds,
        }
        for run in runs
    }
