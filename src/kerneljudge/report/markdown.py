"""The report's text: the summary and the per-task best-of-K claims as Markdown, and the figures' wording
that the HTML page shares (a rate with its interval, a speedup, a runtime, "not timed", and the caveat on
timings measured on the CPU)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from kerneljudge.results.best_of_k import TaskClaim
from kerneljudge.results.explain import CPU_MEASURED
from kerneljudge.results.metrics import Rate, Summary
from kerneljudge.results.verdict import Record

NOT_TIMED = "not timed"


def rate_text(rate: Rate, dash: str = "-") -> str:
    """`0.500 (2/4; 95% CI 0.150-0.850)`, or "-" for an empty total; `dash` joins the interval's ends."""
    if rate.value is None or rate.interval is None:
        return "-"
    low, high = rate.interval
    return f"{rate.value:.3f} ({rate.count}/{rate.total}; 95% CI {low:.3f}{dash}{high:.3f})"


def fast_text(summary: Summary, p: float, rate: Rate, dash: str = "-") -> str:
    """A fast_p cell: "not timed" above p = 0 where no judgment was timed (never a measured-looking 0.000)."""
    return NOT_TIMED if summary.not_timed and p > 0 else rate_text(rate, dash)


def speedup_text(value: float | None) -> str:
    """`1.234x`, or "-" where there is none."""
    return f"{value:.3f}x" if value is not None and math.isfinite(value) else "-"


def runtime_text(value_ms: float | None) -> str:
    """`12.34 us` under a millisecond, `1.234 ms` above, "-" where there is none."""
    if value_ms is None:
        return "-"
    return f"{value_ms * 1e3:.2f} us" if value_ms < 1 else f"{value_ms:.3f} ms"


def timing_note(summary: Summary) -> str:
    """One sentence on what was timed, so that an untimed store's figures are not read as measured zeros."""
    if summary.not_timed:
        return (
            "No judgment in the store was timed (a batch with --no-timing times none): fast_p above p = 0 is not timed."
        )
    return f"{summary.timed} of {summary.judged} valid judgment(s) timed; a correct one not timed counts at p = 0 only."


def cpu_timed(record: Record) -> bool:
    """The record's timing was measured on the CPU (its `device`), where a speedup is no GPU speedup."""
    return record.valid and record.device == "cpu" and record.timing is not None and record.timing.measured


def cpu_note(records: Sequence[Record]) -> str:
    """One sentence when any valid timed record was timed on the CPU, saying how many; "" when none was."""
    timed = [r for r in records if r.valid and r.timing is not None and r.timing.measured]
    cpu = sum(cpu_timed(r) for r in timed)
    if not cpu:
        return ""
    which = "Every timing here was" if cpu == len(timed) else f"{cpu} of {len(timed)} timed judgment(s) were"
    return f"{which} {CPU_MEASURED}: their speedups are not GPU speedups."


def headline_rows(summary: Summary) -> list[tuple[str, str]]:
    """The summary's figures as (name, value) rows, shared by the Markdown and the page."""
    return [
        ("correct", rate_text(summary.correct)),
        ("verified", rate_text(summary.verified)),
        ("geometric-mean speedup, correct", speedup_text(summary.geomean_speedup_correct)),
        ("geometric-mean speedup, verified", speedup_text(summary.geomean_speedup_verified)),
        (
            "verified_runtime",
            f"given to {summary.verified_runtimes} of {summary.judged} judgment(s) (verified and timed: the "
            "candidate's median time per call; compared within a task only)",
        ),
    ]


def claim_text(claim: TaskClaim) -> str:
    """The corrected claim in words: the fastest kept candidate with its adjusted lower bound, or why none."""
    if claim.claimed is None:
        if claim.fastest is None:
            return "no claim: no verified, timed candidate"
        alone = claim.q / claim.k
        blocks = math.ceil(math.log2(1 / alone))
        return (
            f"no claim survives at FDR {claim.q:g} (the fastest's p: {claim.fastest_p:.3g}; a claim alone among "
            f"{claim.k} needs p <= {alone:.3g}, by the sign test {blocks} paired blocks all faster)"
        )
    bound = f"at least {claim.claimed_lower_bound:.3f}x" if claim.claimed_lower_bound else "no lower bound"
    speedup = speedup_text(claim.claimed_speedup)
    return f"{claim.claimed}: {speedup}, {bound} at {claim.level:.1%} confidence ({claim.method})"


def best_of_k_rows(claims: Sequence[TaskClaim]) -> list[tuple[str, ...]]:
    """One row per task: task, K, uncorrected best, its p, kept claims, corrected claim, its verified_runtime."""
    return [
        (
            c.task,
            str(c.k),
            f"{c.fastest} ({speedup_text(c.fastest_speedup)})" if c.fastest else "-",
            f"{c.fastest_p:.3g}" if c.fastest_p is not None else "-",
            str(c.discoveries),
            claim_text(c),
            runtime_text(c.claimed_runtime_ms),
        )
        for c in claims
    ]


BEST_OF_K_HEADER = (
    "task",
    "K",
    "fastest verified (uncorrected)",
    "its p",
    "kept by BH",
    "corrected claim",
    "verified_runtime",
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def summary_markdown(summary: Summary, claims: Sequence[TaskClaim] = (), records: Sequence[Record] = ()) -> str:
    """The summary as Markdown: counts, fast_p and verified_fast_p side by side, then best-of-K per task;
    `records` (those summarized) say whether the timings were measured on the CPU, which is then said first."""
    note = cpu_note(records)
    lines = [
        *([f"**{note}**", ""] if note else []),
        f"Judgments: {summary.judged} valid, {summary.judge_failures} judge failure(s) left out. "
        + "Statuses: "
        + (", ".join(f"{k} {v}" for k, v in summary.statuses.items()) or "none")
        + ".",
        f"Speedups against {summary.speedups_against}. {timing_note(summary)}",
        "",
        "| figure | value |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in headline_rows(summary)),
        "",
        "| p | fast_p | verified_fast_p |",
        "|---|---|---|",
    ]
    for p, rate in summary.fast.items():
        lines.append(f"| {p:g} | {fast_text(summary, p, rate)} | {fast_text(summary, p, summary.verified_fast[p])} |")
    if claims and summary.not_timed:
        lines += ["", "Best-of-K per task: nothing was timed, so there is no speedup claim to correct."]
    elif claims:
        q = claims[0].q
        lines += [
            "",
            f"Best-of-K per task, corrected for having looked K times (Benjamini-Hochberg at FDR {q:g} over each "
            "task's candidates; one-sided p of \"faster than the reference\" from each one's paired timing; the "
            "lower bound at the false-coverage-adjusted level; docs/report.md):",
            "",
            "| " + " | ".join(BEST_OF_K_HEADER) + " |",
            "|" + "---|" * len(BEST_OF_K_HEADER),
            *("| " + " | ".join(_cell(cell) for cell in row) + " |" for row in best_of_k_rows(claims)),
        ]
    return "\n".join(lines) + "\n"
