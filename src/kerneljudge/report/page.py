"""A results store as one self-contained HTML page: the summary's tables and four plots as inline SVG.

Every figure is computed here from the records (`kerneljudge.metrics`), never typed in. The plots:
fast_p and verified_fast_p against p (with 95% Wilson intervals), the speedup distribution on a log
scale, findings by code (info left out), and failure kinds by level (a KernelBench `levelN` folder in
the task's path; other tasks under "other"). matplotlib draws them (Agg, no display needed).
"""

from __future__ import annotations

import datetime as dt
import html
import io
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from kerneljudge.metrics import Rate, Summary, is_correct, level_of, rate_text, speedup_of, speedup_text
from kerneljudge.verdict import Record

DASH = "&ndash;"


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("the HTML report draws with matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and the page stays small
    import matplotlib.pyplot as plt

    return plt


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    figure.clear()
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: the page holds the element inline


def _rate_bars(rates: dict[float, Rate]) -> tuple[list[float], list[float], list[list[float]]]:
    ps, values, errors = [], [], [[], []]
    for p, rate in rates.items():
        if rate.value is None or rate.interval is None:
            continue
        ps.append(p)
        values.append(rate.value)
        errors[0].append(rate.value - rate.interval[0])
        errors[1].append(rate.interval[1] - rate.value)
    return ps, values, errors


def fast_p_plot(plt: Any, summary: Summary) -> str:
    figure, axes = plt.subplots(figsize=(6, 3.6))
    for label, rates, style in (("fast_p", summary.fast, "o-"), ("verified_fast_p", summary.verified_fast, "s--")):
        ps, values, errors = _rate_bars(rates)
        axes.errorbar(ps, values, yerr=errors, fmt=style, capsize=3, label=label)
    axes.set(xlabel="p (speedup threshold)", ylabel="share of judgments", ylim=(0, 1.02))
    axes.set_title("fast_p and verified_fast_p (95% Wilson intervals)")
    axes.grid(alpha=0.3)
    axes.legend()
    return _svg(figure)


def speedup_plot(plt: Any, records: Sequence[Record], speedup: Callable[[Record], float | None]) -> str | None:
    correct = [s for r in records if r.valid and is_correct(r) and (s := speedup(r))]
    verified = [s for r in records if r.valid and r.verified and (s := speedup(r))]
    if not correct:
        return None
    figure, axes = plt.subplots(figsize=(6, 3.6))
    low, high = min(correct), max(correct)
    edges = [low * (high / low) ** (i / 20) for i in range(21)] if high > low else [low / 1.1, low * 1.1]
    axes.hist(correct, bins=edges, alpha=0.5, label=f"correct ({len(correct)})")
    if verified:
        axes.hist(verified, bins=edges, alpha=0.7, label=f"verified ({len(verified)})")
    axes.set_xscale("log", base=2)
    axes.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    axes.set(xlabel="speedup over the reference (log scale)", ylabel="judgments")
    axes.set_title("Speedup distribution")
    axes.legend()
    return _svg(figure)


def findings_plot(plt: Any, records: Sequence[Record]) -> str | None:
    counts = Counter(f.code for r in records for f in r.findings if f.severity != "info")
    if not counts:
        return None
    codes = sorted(counts, key=lambda c: (-counts[c], c))
    figure, axes = plt.subplots(figsize=(6, max(2.0, 0.3 * len(codes) + 1)))
    axes.barh(codes[::-1], [counts[c] for c in codes[::-1]])
    axes.set(xlabel="records with the finding (warnings and errors)")
    axes.set_title("Findings by code")
    return _svg(figure)


def failures_plot(plt: Any, records: Sequence[Record]) -> str | None:
    table: dict[str, Counter[str]] = {}
    for r in records:
        if r.failure_kind:
            table.setdefault(level_of(r), Counter())[r.failure_kind] += 1
    if not table:
        return None
    levels = sorted(table)
    kinds = sorted({k for c in table.values() for k in c})
    figure, axes = plt.subplots(figsize=(6, 3.6))
    bottom = [0] * len(levels)
    for kind in kinds:
        heights = [table[level][kind] for level in levels]
        axes.bar(levels, heights, bottom=bottom, label=kind)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axes.set(ylabel="failed judgments")
    axes.set_title("Failure kinds by level")
    axes.legend(fontsize="small")
    return _svg(figure)


def render(
    records: Sequence[Record],
    summary: Summary,
    source: str,
    speedup: Callable[[Record], float | None] = speedup_of,
) -> str:
    """The page: the headline table, fast_p and verified_fast_p per p, then the plots that have data.

    `speedup` must be the one `summary` was computed with (a baseline file's, or the record's own)."""
    plt = _pyplot()
    rows = [
        ("valid judgments", str(summary.judged)),
        ("judge failures (left out)", str(summary.judge_failures)),
        ("statuses", ", ".join(f"{k} {v}" for k, v in summary.statuses.items()) or "none"),
        ("speedups against", html.escape(summary.speedups_against)),
        ("correct (95% Wilson interval)", rate_text(summary.correct, DASH)),
        ("verified (95% Wilson interval)", rate_text(summary.verified, DASH)),
        ("geometric-mean speedup, correct", speedup_text(summary.geomean_speedup_correct)),
        ("geometric-mean speedup, verified", speedup_text(summary.geomean_speedup_verified)),
    ]
    headline = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    per_p = "".join(
        f"<tr><td>{p:g}</td><td>{rate_text(rate, DASH)}</td><td>{rate_text(summary.verified_fast[p], DASH)}</td></tr>"
        for p, rate in summary.fast.items()
    )
    plots = [fast_p_plot(plt, summary)]
    plots += [speedup_plot(plt, records, speedup), findings_plot(plt, records), failures_plot(plt, records)]
    figures = "".join(f"<figure>{svg}</figure>" for svg in plots if svg is not None)
    made = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kerneljudge report</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }}
table {{ border-collapse: collapse; margin: 1rem 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; }}
figure {{ display: inline-block; margin: 0.5rem; vertical-align: top; }}
figure svg {{ max-width: 100%; height: auto; }}
</style></head><body>
<h1>kerneljudge report</h1>
<p>{len(records)} record(s) from {html.escape(source)}, rendered {made}. fast_p is KernelBench's metric
(correct and speedup &gt; p, out of every valid judgment); verified_fast_p counts verified records only.</p>
<table>{headline}</table>
<table><tr><th>p</th><th>fast_p</th><th>verified_fast_p</th></tr>{per_p}</table>
{figures}
</body></html>
"""
