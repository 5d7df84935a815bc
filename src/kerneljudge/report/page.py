"""A results store as one self-contained HTML page: the summary, fast_p and verified_fast_p per p, the
best-of-K claim per task, every judged item, and the plots (report/plots.py) as inline SVG. Timings measured on
the CPU are said to be so above the figures, over the items (whose "timed on" column says CPU or GPU) and in the plot.

Every figure is computed from the records (`kerneljudge.results.metrics`, `kerneljudge.results.best_of_k`), never
typed in.
No script and no fetched file: the page opens offline and in any browser.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Callable, Sequence

from kerneljudge.report.markdown import (
    BEST_OF_K_HEADER,
    best_of_k_rows,
    cpu_note,
    fast_text,
    headline_rows,
    runtime_text,
    speedup_text,
    timing_note,
)
from kerneljudge.report.plots import failures_plot, fast_p_plot, findings_plot, pyplot, speedup_plot
from kerneljudge.results.best_of_k import TaskClaim
from kerneljudge.results.metrics import Summary, is_correct, speedup_of, verified_runtime_ms
from kerneljudge.results.verdict import Record

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 80rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
#items { font-size: 0.9rem; }
#items td { overflow-wrap: anywhere; }
tr.PASS td.status { color: #17702a; font-weight: bold; }
tr.FAIL td.status, tr.ERROR td.status { color: #b01c1c; font-weight: bold; }
tr.SUSPICIOUS td.status { color: #8a1c8a; font-weight: bold; }
tr.UNSUPPORTED td.status { color: #8a6d00; font-weight: bold; }
figure { display: inline-block; margin: 0.5rem; vertical-align: top; }
figure svg { max-width: 100%; height: auto; }
p.note { color: #555; }
p.caveat { color: #8a4b00; font-weight: bold; }
"""


def html_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    classes: Sequence[str] = (),
    row_classes: Sequence[str] = (),
    table_id: str = "",
) -> str:
    """An HTML table; every cell is escaped here, so callers pass plain text. `classes` name each column's
    cells' class ("num" aligns right), `row_classes` each row's (a status colours it)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        (f'<tr class="{row_classes[n]}">' if row_classes else "<tr>")
        + "".join(
            f'<td class="{classes[i]}">{html.escape(cell)}</td>' if classes else f"<td>{html.escape(cell)}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for n, row in enumerate(rows)
    )
    ident = f' id="{table_id}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort `sample_4` before `sample_12`: runs of digits compare as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


ITEM_COLUMNS = (  # (header, cell class)
    ("task", "text"),
    ("candidate", "text"),
    ("status", "status"),
    ("failure kind", "text"),
    ("findings", "text"),
    ("correct", "text"),
    ("timed on", "text"),  # "CPU": a timing there is no GPU speedup
    ("speedup", "num"),
    ("interval", "num"),
    ("verified_runtime", "num"),
)


def item_cells(record: Record, speedup: Callable[[Record], float | None]) -> tuple[str, ...]:
    """One judgment's row; the interval only where the speedup is the record's own paired one (not a baseline's);
    where it was timed (CPU or GPU) before the speedup."""
    r, value = record, speedup(record)
    interval = r.timing.speedup_interval if r.timing is not None and value == speedup_of(r) else None
    timed = r.timing is not None and r.timing.measured
    return (
        r.task.name,
        r.candidate.name,
        r.status + (" (verified)" if r.verified else "") + ("" if r.valid else " (judge failure, left out)"),
        r.failure_kind or "-",
        ", ".join(sorted({f.code for f in r.findings if f.severity != "info"})) or "-",
        "yes" if is_correct(r) else "no",
        {"cpu": "CPU", "cuda": "GPU"}.get(r.device or "", "-") if timed else "-",
        speedup_text(value) if value is not None else ("-" if timed else "not timed"),
        f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval and value is not None else "",
        runtime_text(verified_runtime_ms(r)),
    )


def items_table(records: Sequence[Record], speedup: Callable[[Record], float | None]) -> str:
    """Every record, by task then candidate: status, failure kind, findings, speedup, its interval, verified_runtime."""
    ordered = sorted(records, key=lambda r: (natural_key(r.task.name), natural_key(r.candidate.name), r.created_at))
    return html_table(
        [h for h, _ in ITEM_COLUMNS],
        [item_cells(r, speedup) for r in ordered],
        classes=[c for _, c in ITEM_COLUMNS],
        row_classes=[r.status for r in ordered],
        table_id="items",
    )


def render(
    records: Sequence[Record],
    summary: Summary,
    source: str,
    speedup: Callable[[Record], float | None] = speedup_of,
    claims: Sequence[TaskClaim] = (),
) -> str:
    """The page: the headline table, fast_p and verified_fast_p per p, best-of-K per task, every item, the plots.

    `speedup` must be the one `summary` was computed with (a baseline file's, or the record's own); `claims`
    are `best_of_k.best_of_k(records)`, always against the live paired reference."""
    plt = pyplot()
    counts = [
        ("valid judgments", str(summary.judged)),
        ("judge failures (left out)", str(summary.judge_failures)),
        ("statuses", ", ".join(f"{k} {v}" for k, v in summary.statuses.items()) or "none"),
        ("speedups against", summary.speedups_against),
    ]
    headline = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in counts + headline_rows(summary)
    )
    per_p = html_table(
        ("p", "fast_p", "verified_fast_p"),
        [
            (f"{p:g}", fast_text(summary, p, r), fast_text(summary, p, summary.verified_fast[p]))
            for p, r in summary.fast.items()
        ],
    )
    fast_plot = fast_p_plot(plt, summary)
    note = cpu_note(records)
    caveat = f'<p class="note caveat">{html.escape(note)}</p>' if note else ""
    plot_note = "CPU timings (Triton's interpreter): not GPU speedups" if note else ""
    plots = [
        fast_plot,
        speedup_plot(plt, records, speedup, plot_note),
        findings_plot(plt, records),
        failures_plot(plt, records),
    ]
    figures = "".join(f"<figure>{svg}</figure>" for svg in plots if svg is not None)
    left_out = "" if fast_plot is not None else '<p class="note">The fast_p plot is left out: nothing was timed.</p>'
    best = (
        f'<h2>Best-of-K per task</h2><p class="note">Corrected for having looked K times: Benjamini&ndash;Hochberg at '
        f"false discovery rate {claims[0].q:g} over each task's candidates, each with a one-sided p-value of "
        "&ldquo;faster than the reference&rdquo; from its own paired timing; the kept claim's lower bound at the "
        "false-coverage-adjusted level (docs/report.md). Speedups against the live paired reference.</p>"
        + html_table(
            BEST_OF_K_HEADER, best_of_k_rows(claims), classes=("text", "num", "text", "num", "num", "text", "text")
        )
        if claims and not summary.not_timed
        else '<h2>Best-of-K per task</h2><p class="note">Nothing was timed: no speedup claim to correct.</p>'
        if claims
        else ""
    )
    made = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kerneljudge report</title>
<style>{STYLE}</style></head><body>
<h1>kerneljudge report</h1>
<p>{len(records)} record(s) from {html.escape(source)}, rendered {made}. fast_p is KernelBench's metric
(correct and speedup &gt; p, out of every valid judgment); verified_fast_p counts verified records only.
{html.escape(timing_note(summary))}</p>
{caveat}
<table>{headline}</table>
{per_p}
{left_out}{figures}
{best}
<h2>Every judgment ({len(records)})</h2>
{caveat}
{items_table(records, speedup)}
</body></html>
"""
