"""The report's speedup histogram, read back from the SVG the page holds: no two axis labels overlap, every bar
is wider than nothing, and no bar covers another (correct and verified stand side by side in a bin)."""

import math
import re
import xml.etree.ElementTree as ET

import pytest
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath

from helpers import make_record
from kerneljudge.report.page import render
from kerneljudge.report.plots import bin_counts, pyplot, speedup_bins, speedup_plot
from kerneljudge.results.best_of_k import best_of_k
from kerneljudge.results.metrics import speedup_of, summarize
from report_stores import mixed_store

SVG = "{http://www.w3.org/2000/svg}"
MEASURE = TextToPath()
# Speedups as judgments give them: CPU-interpreter ones three decades below 1x, a few near 1x, one alone, many
# decades, a crowd within a few percent, and two values at the same speedup.
SPREADS = {
    "cpu_interpreter": [0.003, 0.0031, 0.0029, 0.01, 0.5, 1.05, 1.2],
    "two_tiny": [0.0021, 0.0034],
    "one": [1.7],
    "seven_decades": [1e-5, 3e-4, 0.02, 0.9, 4.0, 35.0, 99.0],
    "near_one": [0.98 + 0.002 * i for i in range(21)],
    "equal": [2.5, 2.5, 2.5],
}


def boxes(svg: str, prefix: str) -> dict[str, tuple[float, float, float, float]]:
    """(left, top, right, bottom) in the SVG's points of each group whose id starts with `prefix`: a bar's path,
    or a label's text measured with the font it names (its rotation applied)."""
    found = {}
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        ident = group.get("id", "")
        if not ident.startswith(prefix):
            continue
        text = group.find(f"{SVG}text")
        if text is not None:
            size = float(re.search(r"font-size: ([\d.]+)px", text.get("style"))[1])
            width, height, descent = MEASURE.get_text_width_height_descent(
                text.text, FontProperties(family="DejaVu Sans", size=size), ismath=False
            )
            x, y = float(text.get("x")), float(text.get("y"))
            anchor = re.search(r"text-anchor: (\w+)", text.get("style"))[1]
            left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
            angle = math.radians(float(re.search(r"rotate\((-?[\d.]+)", text.get("transform", "rotate(0"))[1]))
            corners = [
                (left - x, -height),
                (left + width - x, -height),
                (left - x, descent),
                (left + width - x, descent),
            ]
            turned = [
                (x + a * math.cos(angle) - b * math.sin(angle), y + a * math.sin(angle) + b * math.cos(angle))
                for a, b in corners
            ]
            found[ident] = (
                min(p[0] for p in turned),
                min(p[1] for p in turned),
                max(p[0] for p in turned),
                max(p[1] for p in turned),
            )
        else:
            path = group.find(f"{SVG}path")
            numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", path.get("d"))]
            xs, ys = numbers[0::2], numbers[1::2]
            found[ident] = (min(xs), min(ys), max(xs), max(ys))
    return found


def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def assert_readable(svg: str, values: list[float]) -> None:
    labels, bars = boxes(svg, "speedup-tick-"), boxes(svg, "speedup-bar-")
    assert len(labels) >= 2, "the axis needs at least two labels to be read"
    _, _, view_width, view_height = (float(v) for v in ET.fromstring(svg).get("viewBox").split())
    for name, box in labels.items():
        assert 0 <= box[0] and box[2] <= view_width and 0 <= box[1] and box[3] <= view_height, (name, box)
    names = sorted(labels)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            assert not overlap(labels[first], labels[second]), (first, second, labels[first], labels[second])
    assert bars
    for name, box in bars.items():
        assert box[2] - box[0] > 0.5 and box[3] - box[1] > 0, (name, box)  # wider than half a point, and drawn
    spans = sorted((box[0], box[2], name) for name, box in bars.items())
    for (_, right, first), (left, _, second) in zip(spans, spans[1:], strict=False):
        assert right < left, f"{first} and {second} overlap: one hides the other"
    correct = [name for name in bars if name.startswith("speedup-bar-correct-")]
    assert len(correct) == sum(1 for count in bin_counts(values, speedup_bins(values)) if count)


@pytest.mark.parametrize("spread", SPREADS, ids=list(SPREADS))
def test_labels_never_overlap_and_bars_never_hide_one_another(spread):
    values = SPREADS[spread]
    records = [make_record(f"c{i}", speedup=value) for i, value in enumerate(values)]
    svg = speedup_plot(pyplot(), records, speedup_of)
    assert_readable(svg, values)
    edges = speedup_bins(values)
    assert sum(bin_counts(values, edges)) == len(values)  # every speedup in a bin, the extremes included
    assert all(b > a for a, b in zip(edges, edges[1:], strict=False))


@pytest.mark.parametrize("size", [1, 4, 12, 30])
def test_the_page_s_histogram_is_readable_for_every_store_size(size):
    records = mixed_store(size, timed=True)
    page = render(records, summarize(records), "synthetic.db", claims=best_of_k(records))
    figures = re.findall(r"<figure>(<svg.*?</svg>)\s*</figure>", page, re.DOTALL)
    histogram = [svg for svg in figures if "speedup-tick-" in svg]
    correct = [s for r in records if r.valid and r.correctness.passed and (s := speedup_of(r))]
    assert len(histogram) == (1 if correct else 0)
    if correct:
        assert_readable(histogram[0], correct)
