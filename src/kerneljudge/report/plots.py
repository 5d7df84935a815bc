"""The report page's plots, drawn by matplotlib (Agg, no display) as inline SVG; each is None without data.

fast_p and verified_fast_p against p (95% Wilson intervals), the speedup distribution on a log scale (correct
and verified bars side by side in each bin, the axis labelled at a few round values),
findings by code (info left out), and failures by level (a KernelBench `levelN` in the task's path or
name) or, for tasks without a level, by task.
"""

from __future__ import annotations

import bisect
import io
import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from kerneljudge.results.metrics import Rate, Summary, is_correct, level_of
from kerneljudge.results.verdict import Record

MOST_GROUPS = 15  # failure groups drawn; the rest are named in the title's count
MOST_BINS = 12  # speedup bins: few enough that each bar is wide enough to see
LEAST_BIN_LOG2 = 0.25  # the narrowest speedup bin: a factor 2 ** 0.25 (about 1.19)
BAR_GAP = 0.06  # of a bin's width (log scale), left free at each side of each bar
MOST_TICKS = 6  # labels on the speedup axis: six of at most six characters fit side by side, unrotated
DODGE = 0.02  # fast_p and verified_fast_p points are offset by this much in p so equal values both show
FAST_STYLE = {"color": "#1f77b4", "fmt": "o-", "markersize": 7, "zorder": 3}
VERIFIED_STYLE = {"color": "#d62728", "fmt": "s--", "markersize": 10, "markerfacecolor": "none", "zorder": 2}


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend; RuntimeError with the install line when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("the HTML report draws with matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and the page stays small
    import matplotlib.pyplot as plt

    return plt


def _svg(plt: Any, figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: the page holds the element inline


def rate_bars(rates: dict[float, Rate]) -> tuple[list[float], list[float], list[list[float]]]:
    """Thresholds, values and (below, above) error lengths; never negative, whatever the rounding."""
    ps: list[float] = []
    values: list[float] = []
    errors: list[list[float]] = [[], []]
    for p, rate in rates.items():
        if rate.value is None or rate.interval is None:
            continue
        ps.append(p)
        values.append(rate.value)
        errors[0].append(max(0.0, rate.value - rate.interval[0]))
        errors[1].append(max(0.0, rate.interval[1] - rate.value))
    return ps, values, errors


def fast_p_plot(plt: Any, summary: Summary) -> str | None:
    """fast_p (solid, filled circles) over verified_fast_p (dashed, open squares); None when nothing was timed."""
    if summary.not_timed or not summary.judged:
        return None
    figure, axes = plt.subplots(figsize=(6.4, 3.8))
    for label, rates, style, shift in (
        ("fast_p (correct)", summary.fast, FAST_STYLE, -DODGE),
        ("verified_fast_p (verified)", summary.verified_fast, VERIFIED_STYLE, DODGE),
    ):
        ps, values, errors = rate_bars(rates)
        axes.errorbar([p + shift for p in ps], values, yerr=errors, capsize=4, linewidth=1.8, label=label, **style)
    axes.set(xlabel="p (speedup threshold)", ylabel="share of valid judgments", ylim=(-0.02, 1.04))
    axes.set_title("fast_p and verified_fast_p (95% Wilson intervals)")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper right")
    return _svg(plt, figure)


def speedup_bins(values: Sequence[float]) -> list[float]:
    """Bin edges, equal on a log-2 scale, from the smallest speedup to the largest: at most `MOST_BINS`, none
    narrower than a factor 2 ** `LEAST_BIN_LOG2`, and one bin of that width around a single value."""
    low, high = math.log2(min(values)), math.log2(max(values))
    count = max(1, min(MOST_BINS, math.ceil((high - low) / LEAST_BIN_LOG2)))
    if count == 1:
        middle = (low + high) / 2
        low, high = middle - LEAST_BIN_LOG2, middle + LEAST_BIN_LOG2
    return [2 ** (low + (high - low) * i / count) for i in range(count + 1)]


def bin_counts(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    """How many values fall in each bin (the last bin holds its right edge; rounding never drops one)."""
    counts = [0] * (len(edges) - 1)
    for value in values:
        index = bisect.bisect_right(edges, value) - 1
        counts[min(max(index, 0), len(counts) - 1)] += 1
    return counts


def speedup_ticks(low: float, high: float) -> list[float]:
    """Round speedups to label the axis from `low` to `high`: 1, 2, 5 (or finer, or coarser) times a power of
    ten, the finest such series with at most `MOST_TICKS` inside; whole decades thinned where even those are
    too many; the two ends, rounded, where no round value falls inside."""
    decades = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    for steps in ((1, 1.5, 2, 3, 5, 7), (1, 2, 5), (1,)):
        ticks = [m * 10.0**k for k in decades for m in steps if low <= m * 10.0**k <= high]
        if len(ticks) <= MOST_TICKS:
            break
    else:
        ticks = ticks[:: math.ceil(len(ticks) / MOST_TICKS)]
    if len(ticks) < 2:
        ticks = sorted({float(f"{low * 1.02:.2g}"), *ticks, float(f"{high / 1.02:.2g}")})
    return ticks


def tick_text(value: float) -> str:
    """`0.002x`, `1.5x`, `1e-05x`: at most two significant digits, so that a label stays short."""
    return f"{float(f'{value:.2g}'):g}x"


def speedup_plot(
    plt: Any, records: Sequence[Record], speedup: Callable[[Record], float | None], cpu_note: str = ""
) -> str | None:
    """Histogram of correct and verified speedups on log-2 bins, the two side by side in each bin (neither ever
    hides the other), its axis labelled at a few round values; None when none was timed. `cpu_note` (a record
    timed on the CPU) goes under the title. Bars and labels carry ids (`speedup-bar-...`, `speedup-tick-...`)."""
    correct = [s for r in records if r.valid and is_correct(r) and (s := speedup(r))]
    verified = [s for r in records if r.valid and r.verified and (s := speedup(r))]
    if not correct:
        return None
    figure, axes = plt.subplots(figsize=(6.4, 3.8))
    edges = speedup_bins(correct)
    series = [("correct", correct, {"color": "#1f77b4", "alpha": 0.6})]
    if verified:
        series.append(("verified", verified, {"color": "#d62728", "alpha": 0.85, "hatch": "//"}))
    share = 1 / len(series)
    for number, (name, values, style) in enumerate(series):
        counts = bin_counts(values, edges)
        labelled = False
        for index, count in enumerate(counts):
            if not count:
                continue  # no bar at all where the bin is empty: nothing of zero width or height is drawn
            low, high = math.log2(edges[index]), math.log2(edges[index + 1])
            gap = (high - low) * BAR_GAP  # bars of neighbouring bins and of the two series never touch
            left = low + (high - low) * share * number + gap
            right = low + (high - low) * share * (number + 1) - gap
            (bar,) = axes.bar(
                2**left,
                count,
                width=2**right - 2**left,
                align="edge",
                edgecolor=style["color"],
                linewidth=1,
                label=None if labelled else f"{name} ({len(values)})",
                **style,
            )
            bar.set_gid(f"speedup-bar-{name}-{index}")
            labelled = True
    axes.set_xscale("log", base=2)
    low, high = min(edges[0], 1.0) / 1.1, max(edges[-1], 1.0) * 1.1  # 1x, dashed, always in view
    axes.set_xlim(low, high)
    ticks = speedup_ticks(low, high)
    axes.set_xticks(ticks, [tick_text(value) for value in ticks])
    axes.xaxis.set_minor_locator(plt.NullLocator())  # a log axis's minor labels are the ones that crowd
    for index, label in enumerate(axes.get_xticklabels()):
        label.set_gid(f"speedup-tick-{index}")
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    axes.set(xlabel="speedup over the reference (log scale; 1x dashed)", ylabel="judgments")
    axes.set_title("Speedup distribution" + (f"\n{cpu_note}" if cpu_note else ""), fontsize="medium")
    axes.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))  # outside: it covers no bar
    return _svg(plt, figure)


def findings_plot(plt: Any, records: Sequence[Record]) -> str | None:
    """Records per finding code, warnings and errors only; None when there are none."""
    counts = Counter(f.code for r in records for f in r.findings if f.severity != "info")
    if not counts:
        return None
    codes = sorted(counts, key=lambda c: (-counts[c], c))
    figure, axes = plt.subplots(figsize=(6.4, max(2.0, 0.3 * len(codes) + 1)))
    axes.barh(codes[::-1], [counts[c] for c in codes[::-1]], color="#9467bd")
    axes.xaxis.get_major_locator().set_params(integer=True)
    axes.set(xlabel="records with the finding (warnings and errors)")
    axes.set_title("Findings by code")
    return _svg(plt, figure)


def failure_group(record: Record) -> str:
    """`level N` where the task carries a KernelBench level, else the task's name."""
    level = level_of(record)
    return level if level != "other" else record.task.name


def failure_label(record: Record) -> str | None:
    """The record's failure kind; a status that withheld verification without one (SUSPICIOUS, UNSUPPORTED,
    ERROR) in lower case; None for a verified record."""
    if record.failure_kind:
        return record.failure_kind
    return None if record.status == "PASS" else record.status.lower()


def failures_plot(plt: Any, records: Sequence[Record]) -> str | None:
    """Unverified judgments by level or task, stacked by failure kind (or status); None when all are verified."""
    table: dict[str, Counter[str]] = {}
    for r in records:
        label = failure_label(r)
        if label is not None:
            table.setdefault(failure_group(r), Counter())[label] += 1
    if not table:
        return None
    groups = sorted(table, key=lambda g: (-sum(table[g].values()), g))[:MOST_GROUPS][::-1]
    kinds = sorted({k for g in groups for k in table[g]})
    tab20 = plt.get_cmap("tab20").colors
    colours = tab20[::2] + tab20[1::2]  # the ten strong colours first: neighbours in the legend differ
    figure, axes = plt.subplots(figsize=(6.4, max(2.4, 0.35 * len(groups) + 1.4)))
    left = [0] * len(groups)
    for index, kind in enumerate(kinds):
        widths = [table[g][kind] for g in groups]
        axes.barh(groups, widths, left=left, label=kind, color=colours[index % len(colours)])
        left = [a + w for a, w in zip(left, widths, strict=True)]
    levels = sum(g.startswith("level ") for g in table)
    by = "level" if levels == len(table) else "task" if not levels else "level or task"
    hidden = len(table) - len(groups)
    axes.set(xlabel="judgments not verified")
    axes.set_title(f"Failure kinds by {by}" + (f" (the {len(groups)} with most; {hidden} more)" if hidden else ""))
    axes.xaxis.get_major_locator().set_params(integer=True)
    axes.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _svg(plt, figure)
