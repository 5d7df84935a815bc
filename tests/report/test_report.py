"""The report over stores of every size from 1 to 30, mixed verdicts, timed and untimed: Markdown and HTML."""

import html
import re

import pytest

from kerneljudge.cli import main
from kerneljudge.report.markdown import summary_markdown
from kerneljudge.report.page import render
from kerneljudge.report.plots import failures_plot, fast_p_plot, pyplot
from kerneljudge.results.best_of_k import best_of_k
from kerneljudge.results.metrics import summarize
from kerneljudge.results.store import Store
from report_stores import mixed_record, mixed_store


def items(page: str) -> list[str]:
    """The rows of the page's table of every judgment."""
    table = page[page.index('<table id="items">') :]
    return re.findall(r"<tr class=\"\w+\">.*?</tr>", table[: table.index("</table>")])


@pytest.mark.parametrize("timed", [True, False], ids=["timed", "untimed"])
def test_every_store_size_renders_and_names_every_item(timed):
    for size in range(1, 31):
        records = mixed_store(size, timed)
        summary, claims = summarize(records), best_of_k(records)
        text = summary_markdown(summary, claims)
        page = render(records, summary, "synthetic.db", claims=claims)
        rows = items(page)
        assert len(rows) == size, size
        for record in records:
            task, candidate = html.escape(record.task.name), html.escape(record.candidate.name)
            assert any(f">{task}</td>" in row and f">{candidate}</td>" in row for row in rows), (size, candidate)
            if summary.timed:
                assert f"| {record.task.name} |" in text  # every task has its best-of-K row
        assert ("Failure kinds by" in page) == any(r.status != "PASS" for r in records)
        untimed_cells = text.count("| not timed | not timed |")
        if timed and summary.timed:
            assert "fast_p and verified_fast_p (95% Wilson intervals)" in page
            assert "not timed" not in text.split("| p |")[1].split("Best-of-K")[0], size
        elif summary.judged:
            assert untimed_cells == 5 and page.count("<td>not timed</td><td>not timed</td>") == 5, size
            assert "not timed" in page and "fast_p plot is left out" in page
            assert "no speedup claim to correct" in page and "no speedup claim to correct" in text


def test_an_item_names_its_status_failure_kind_speedup_and_verified_runtime():
    records = [mixed_record(i, timed=True) for i in range(9)]
    page = render(records, summarize(records), "synthetic.db", claims=best_of_k(records))
    rows = {re.search(r'<td class="text">(.*?)</td><td class="text">(.*?)</td>', r).group(2): r for r in items(page)}
    assert '<td class="status">PASS (verified)</td>' in rows["candidate &lt;0&gt;"]
    assert ">0.600x<" in rows["candidate &lt;0&gt;"] and ">1.000 ms<" in rows["candidate &lt;0&gt;"]
    assert '<td class="text">CPU</td><td class="num">0.600x</td>' in rows["candidate &lt;0&gt;"]  # timed on the CPU
    assert ">tolerance<" in rows["sample_1"] and ">not timed<" in rows["sample_1"]  # failed: never timed
    assert ">SUSPICIOUS<" in rows["sample_3"] and ">KJ-R051<" in rows["sample_3"]  # its finding named
    assert ">1.050x<" in rows["sample_3"]  # timed, correct, not verified
    assert rows["sample_3"].endswith('<td class="num">-</td></tr>')  # no verified_runtime without verification
    assert "judge failure, left out" in rows["sample_7"] and ">judge_error<" in rows["sample_7"]


def test_the_failures_plot_names_levels_tasks_and_real_failure_kinds():
    plt = pyplot()
    svg = failures_plot(plt, mixed_store(18, timed=False))
    for name in ("level 1", "level 2", "softmax_fp32", "odd&lt;task&gt;&amp;name"):
        assert name in svg, name
    for kind in ("tolerance", "runtime_error", "timeout", "integrity_violation", "suspicious", "unsupported"):
        assert kind in svg, kind
    assert ">other<" not in svg and "by level or task" in svg


def test_fast_p_is_drawn_apart_from_verified_fast_p_with_a_legend():
    records = mixed_store(12, timed=True)
    svg = fast_p_plot(pyplot(), summarize(records))
    assert "fast_p (correct)" in svg and "verified_fast_p (verified)" in svg
    assert "#1f77b4" in svg and "#d62728" in svg  # two colours, two line styles, filled and open markers
    assert fast_p_plot(pyplot(), summarize(mixed_store(12, timed=False))) is None


def test_an_untimed_store_reads_not_timed_through_the_command(tmp_path, capsys):
    db = tmp_path / "results.db"
    with Store(db) as store:
        for record in mixed_store(10, timed=False):
            store.put(record)
    page, summary = tmp_path / "report.html", tmp_path / "summary.md"
    assert main(["report", "--store", str(db), "--markdown", str(summary), "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    assert "| 1 | not timed | not timed |" in printed
    assert "nothing was timed, so there is no speedup claim to correct" in printed
    assert "| 1 | not timed | not timed |" in summary.read_text()
    assert "<td>1</td><td>not timed</td><td>not timed</td>" in page.read_text()
    assert "0.000" not in page.read_text().split("Best-of-K")[0].split("<th>p</th>")[1]


def test_timings_measured_on_the_cpu_are_said_to_be_no_gpu_speedups(tmp_path, capsys):
    records = mixed_store(12, timed=True)  # every record's device is "cpu"
    summary, claims = summarize(records), best_of_k(records)
    sentence = "measured on the CPU (Triton's interpreter): their speedups are not GPU speedups."
    text = summary_markdown(summary, claims, records)
    assert text.startswith(f"**Every timing here was {sentence}**")
    page = render(records, summary, "synthetic.db", claims=claims)
    assert page.count(f'<p class="note caveat">Every timing here was {html.escape(sentence)}</p>') == 2
    assert "CPU timings (Triton's interpreter): not GPU speedups" in page  # the histogram's subtitle
    for record in records[:3]:  # a store of GPU and CPU timings says how many of each
        record.device = "cuda"
    mixed = summary_markdown(summary, claims, records)
    timed = sum(r.valid and r.timing.measured for r in records)
    assert mixed.startswith(f"**{timed - 2} of {timed} timed judgment(s) were {sentence}**")
    assert '<td class="text">GPU</td><td class="num">0.600x</td>' in render(records, summary, "synthetic.db")
    gpu = [r for r in records if r.device == "cuda"]
    assert "CPU" not in summary_markdown(summarize(gpu), best_of_k(gpu), gpu)
    untimed = mixed_store(6, timed=False)
    assert "CPU" not in summary_markdown(summarize(untimed), (), untimed)  # nothing timed: nothing to caveat


def test_the_command_says_first_that_cpu_timings_are_cpu_timings(tmp_path, capsys):
    db = tmp_path / "results.db"
    with Store(db) as store:
        for record in mixed_store(10, timed=True):
            store.put(record)
    summary = tmp_path / "summary.md"
    assert main(["report", "--store", str(db), "--markdown", str(summary)]) == 0
    first = capsys.readouterr().out.strip().splitlines()[0]
    assert "measured on the CPU" in first and "not GPU speedups" in first, first
    assert summary.read_text().strip().splitlines()[0] == first
