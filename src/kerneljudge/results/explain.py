"""Diagnostics for the model: a verdict in a few plain lines that a kernel-writing model can act on.

A trainer that feeds the judge's answer back into the next attempt needs what failed, where, by how much,
and what to change, not a record of hundreds of fields. `explain(record)` writes, from the record alone:

- the verdict and, for a correct candidate, its speedup (or why it was not timed), with `CPU_CAVEAT` where it
  was timed on the CPU (the record's `device`): there a ratio says nothing of the kernel's speed on a GPU;
- for a failure: its kind and phase, which trial (public, hidden and how its inputs were reshaped, or a
  hidden shape), the largest error with its index and the two values there, and the candidate's own line
  from a traceback (the judge's frames are left out);
- each finding of error or warning severity with its remediation.

The text is bounded (`LIMIT` characters; the last line says when something was cut) and never quotes the
hidden plan's seeds: a model that learns a seed learns nothing the next judgment reuses, but the
explanation has no need of them either.
"""

from __future__ import annotations

import re
from typing import Any

from kerneljudge.results.verdict import Record, TrialRecord

LIMIT = 1200  # characters: a few lines in a prompt, whatever the record holds
FINDINGS_SHOWN = 4
# Said wherever a timing measured on the CPU is shown (here and in the report, kerneljudge/report/).
CPU_MEASURED = "measured on the CPU (Triton's interpreter)"
CPU_CAVEAT = f"{CPU_MEASURED}: not a GPU speedup"
CANDIDATE_FRAME = re.compile(r'File "[^"]*candidate\.py", line (\d+), in (\S+)\n\s*(.+)')


def explain(record: Record, limit: int = LIMIT) -> str:
    """The record's verdict as plain text of at most `limit` characters."""
    lines = [headline(record)]
    if record.failure is not None:
        lines.extend(failure_lines(record))
    lines.extend(finding_lines(record))
    return bounded(lines, limit)


def headline(record: Record) -> str:
    if record.status == "PASS":
        return f"PASS: correct on every trial; {speed_text(record)}."
    if record.status == "SUSPICIOUS":
        return "SUSPICIOUS: the outputs matched, but the judge found the candidate gaming the evaluation (below)."
    if record.status == "UNSUPPORTED":
        why = record.failure.summary if record.failure is not None else "this task cannot be judged here"
        return f"UNSUPPORTED: {why} (not the candidate's fault)."
    if record.failure is None:
        return f"{record.status}."
    failure = record.failure
    return f"{record.status} ({failure.kind}) in {failure.phase}: {failure.summary}"


def speed_text(record: Record) -> str:
    timing = record.timing
    if not timing.measured or timing.speedup is None:
        return f"not timed ({timing.reason or 'timing was off'})"
    ms = ""
    if timing.candidate is not None and timing.reference is not None:
        ms = (
            f" (median {timing.candidate.median_ms:.4g} ms against the reference's {timing.reference.median_ms:.4g} ms)"
        )
    cpu = f"; {CPU_CAVEAT}" if record.device == "cpu" else ""
    if timing.speedup < 1:
        return f"{timing.speedup:.2f}x the reference's speed, slower than it{ms}{cpu}"
    return f"{timing.speedup:.2f}x faster than the reference{ms}{cpu}"


def failure_lines(record: Record) -> list[str]:
    lines = []
    trial = failed_trial(record)
    if trial is not None:
        lines.append(f"It failed on {trial_text(trial)}.")
        for output in trial.outputs:
            if not output.get("passed", True):
                lines.append(error_text(output))
                break
    frame = candidate_frame(record.failure.traceback if record.failure else None)
    if frame:
        lines.append(frame)
    return lines


def failed_trial(record: Record) -> TrialRecord | None:
    return next((trial for trial in record.correctness.trials if not trial.passed), None)


def trial_text(trial: TrialRecord) -> str:
    if trial.kind == "public":
        return "the task's own inputs (a public trial)"
    if trial.kind == "shape":
        values = (trial.shape or {}).get("values") or (trial.shape or {}).get("globals") or trial.shape or {}
        return f"a hidden shape ({describe(values)}): the kernel must handle every size the task allows"
    kind = (trial.distribution or {}).get("kind", "standard")
    if kind == "standard":
        return "hidden inputs drawn as the task draws them (another seed): nothing may be cached or fixed"
    detail = {key: value for key, value in (trial.distribution or {}).items() if key != "kind"}
    extra = f", {describe(detail)}" if detail else ""
    return f"hidden inputs of another distribution ({kind}{extra}) that keep every property the task's inputs have"


def error_text(output: dict[str, Any]) -> str:
    where = output.get("index", 0)
    parts = [f"Output {where}:"]
    if output.get("max_abs_error") is not None:
        parts.append(f"largest error {output['max_abs_error']:.4g}")
        if output.get("worst_index") is not None:
            parts.append(
                f"at index {tuple(output['worst_index'])} (got {number(output.get('worst_candidate'))}, "
                f"expected {number(output.get('worst_expected'))})"
            )
    if output.get("mismatch_count") is not None and output.get("numel"):
        parts.append(f"; {output['mismatch_count']} of {output['numel']} elements outside tolerance")
        if output.get("atol") is not None:
            parts.append(f"(atol {output['atol']:.3g})")
    elif output.get("summary"):
        parts.append(str(output["summary"]))
    return " ".join(parts).replace(" ;", ";") + "."


def candidate_frame(traceback: str | None) -> str:
    """The innermost frame of the candidate's own file in a traceback, as `line N, in F: code`."""
    if not traceback:
        return ""
    frames = CANDIDATE_FRAME.findall(traceback)
    if not frames:
        return ""
    line, function, code = frames[-1]
    return f"In your code, line {line}, in {function}: {code.strip()}"


def finding_lines(record: Record) -> list[str]:
    shown = [finding for finding in record.findings if finding.severity in ("error", "warning")]
    lines = []
    for finding in shown[:FINDINGS_SHOWN]:
        fix = f" Fix: {finding.remediation}" if finding.remediation else ""
        lines.append(f"{finding.code} [{finding.severity}] {finding.summary}.{fix}")
    if len(shown) > FINDINGS_SHOWN:
        lines.append(f"... and {len(shown) - FINDINGS_SHOWN} more findings in the record.")
    return lines


def describe(values: dict[str, Any]) -> str:
    return ", ".join(f"{key}={number(value)}" for key, value in values.items())


def number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def bounded(lines: list[str], limit: int) -> str:
    text = "\n".join(line.rstrip() for line in lines if line)
    if len(text) <= limit:
        return text
    cut = " [cut: the whole record has the rest]"
    return text[: limit - len(cut)].rstrip() + cut
