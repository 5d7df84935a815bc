"""fast_p as KernelBench defines it, verified_fast_p, Wilson intervals, and the report over a store."""

import math

import pytest

from helpers import make_record
from kerneljudge.cli import main
from kerneljudge.report.markdown import summary_markdown
from kerneljudge.results.metrics import (
    Baseline,
    BaselineError,
    Rate,
    fast_p,
    geometric_mean,
    level_of,
    summarize,
    wilson,
)
from kerneljudge.results.store import Store
from kerneljudge.results.verdict import Finding


def test_wilson_intervals_match_the_textbook_values():
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    low, high = wilson(10, 10)
    assert high == pytest.approx(1.0) and low == pytest.approx(0.7225, abs=1e-4)
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_wilson_ends_are_exact_at_the_edges_and_always_hold_the_share():
    # Before the clamp, wilson(0, 3) gave a lower end of 5.6e-17 and the HTML report crashed on a negative error bar.
    for total in range(1, 301):
        assert wilson(0, total)[0] == 0.0 and wilson(total, total)[1] == 1.0
        for count in range(total + 1):
            low, high = wilson(count, total)
            assert 0.0 <= low <= count / total <= high <= 1.0, (count, total)
    for count, total in ((-1, 3), (4, 3), (0, 0)):
        with pytest.raises(ValueError, match="0 <= count <= total"):
            wilson(count, total)


def test_fast_p_counts_incorrect_judgments_in_the_denominator_and_needs_a_strictly_larger_speedup():
    correct = [True, True, True, False, True]
    speedups = [2.0, 1.0, 0.6, 5.0, None]
    assert fast_p(correct, speedups, 1.0) == Rate(1, 5)  # 1.0 is not > 1.0; the wrong 5x counts for nothing
    assert fast_p(correct, speedups, 0.5) == Rate(3, 5)
    assert fast_p(correct, speedups, 0.0) == Rate(4, 5)  # correct without a speedup: at p = 0 only
    with pytest.raises(ValueError):
        fast_p([True], [], 1.0)


def test_verified_fast_p_counts_only_verified_records_and_judge_failures_are_left_out():
    records = [
        make_record("fast", speedup=2.0),
        make_record("slow", speedup=0.7),
        make_record("flagged", speedup=3.0, status="SUSPICIOUS", verified=False),  # correct, not verified
        make_record("wrong", status="FAIL"),
        make_record("crashed-judge", status="ERROR", verified=False),
    ]
    records[2].correctness.passed = True
    summary = summarize(records)
    assert summary.judged == 4 and summary.judge_failures == 1
    assert summary.fast[1.0] == Rate(2, 4) and summary.verified_fast[1.0] == Rate(1, 4)
    assert summary.fast[0.0] == Rate(3, 4) and summary.verified_fast[0.0] == Rate(2, 4)
    assert summary.verified == Rate(2, 4)
    assert summary.geomean_speedup_verified == pytest.approx(math.sqrt(2.0 * 0.7))
    assert summary.geomean_speedup_correct == pytest.approx((2.0 * 0.7 * 3.0) ** (1 / 3))
    text = summary_markdown(summary)
    assert "| 1 | 0.500 (2/4; 95% CI" in text and "| 0.25 |" not in text
    assert geometric_mean([]) is None


def test_report_reads_a_store_and_says_what_is_wrong_in_one_line(tmp_path, capsys):
    db = tmp_path / "results.db"
    with Store(db) as store:
        for name, speedup in (("a", 1.5), ("b", 0.9)):
            store.put(make_record(name, speedup=speedup))
    out = tmp_path / "summary.md"
    assert main(["report", "--store", str(db), "--markdown", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed == out.read_text() and "| 1 | 0.500 (1/2;" in printed
    assert main(["report", "--store", str(tmp_path / "missing.db")]) == 1
    err = capsys.readouterr().err.strip()
    assert "no store at" in err and len(err.splitlines()) == 1


def test_the_html_report_is_one_page_with_the_summary_and_a_plot_per_figure(tmp_path, capsys):
    warning = Finding(code="KJ-R051", detector="timing", severity="warning", summary="timed less than traced")
    records = [
        make_record("fast", speedup=2.0),
        make_record("slow", speedup=0.8),
        make_record("flagged", speedup=4.0, status="SUSPICIOUS", verified=False, findings=[warning]),
        make_record("wrong", status="FAIL"),
    ]
    records[0].task.path = "KernelBench/level1/19_ReLU.py"
    records[3].task.path = "KernelBench/level2/1_Conv2D_ReLU_BiasAdd.py"
    db = tmp_path / "results.db"
    with Store(db) as store:
        for record in records:
            store.put(record)
    page = tmp_path / "report.html"
    assert main(["report", "--store", str(db), "--html", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 4  # fast_p, speedups, findings, failures
    assert "src=" not in text and 'href="http' not in text  # self-contained: nothing fetched
    assert "<td>1</td><td>0.250 (1/4;" in text  # fast_1: one correct judgment above 1x out of four
    assert "KJ-R051" in text and "level 2" in text and "tolerance" in text
    assert [level_of(r) for r in records] == ["level 1", "other", "other", "level 2"]


def kernelbench_records() -> list:
    """Three judged KernelBench samples: two timed (candidate means 0.5 ms and 2 ms), one wrong."""
    records = [make_record("fast", speedup=1.1), make_record("slow", speedup=1.1), make_record("wrong", status="FAIL")]
    records[0].timing.candidate = records[0].timing.candidate.model_copy(update={"mean_ms": 0.5})
    records[1].timing.candidate = records[1].timing.candidate.model_copy(update={"mean_ms": 2.0})
    records[0].task.path = "kernelbench-problems/level1/19_ReLU.py"
    records[1].task.path = "KernelBench/level2/1_Conv2D_ReLU_BiasAdd.py"
    records[2].task.path = "KernelBench/level1/23_Softmax.py"
    return records


BASELINE = {  # KernelBench's shape: level -> problem file -> timing statistics (ms)
    "level1": {
        "19_ReLU.py": {"mean": 1.5, "std": 0.01, "min": 1.4, "max": 1.6, "num_trials": 100},
        "23_Softmax.py": {"mean": 3.0, "std": 0.02, "min": 2.9, "max": 3.1, "num_trials": 100},
        "40_LayerNorm.py": None,  # KernelBench leaves a problem it could not time empty
    },
    "level2": {"1_Conv2D_ReLU_BiasAdd.py": {"mean": 1.0, "std": 0.01, "min": 0.9, "max": 1.1, "num_trials": 100}},
}


def test_a_kernelbench_baseline_file_replaces_the_paired_speedup(tmp_path):
    import json

    path = tmp_path / "baseline_time_torch.json"
    path.write_text(json.dumps(BASELINE))
    baseline = Baseline.read(path)
    records = kernelbench_records()
    assert [baseline.speedup(r) for r in records] == [3.0, 0.5, None]  # baseline mean / candidate mean
    summary = summarize(records, baseline=baseline)
    assert summary.fast[1.0] == Rate(1, 3) and summary.fast[0.0] == Rate(2, 3)
    assert summary.fast[0.5] == Rate(1, 3)  # 0.5 is not > 0.5
    assert summary.geomean_speedup_verified == pytest.approx(math.sqrt(3.0 * 0.5))
    assert "baseline_time_torch.json (KernelBench's format)" in summary_markdown(summary)
    assert "the live reference" in summary_markdown(summarize(records))
    # A timed record whose problem the file lacks is an error naming it, not a silent zero.
    records[0].task.path = "KernelBench/level1/99_Missing.py"
    with pytest.raises(BaselineError, match="no time for level1/99_Missing.py"):
        summarize(records, baseline=baseline)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "is not JSON"),
        ("[]", "is not KernelBench's format"),
        ('{"levelX": {}}', "is not a level of problems"),
        ('{"level1": {"1_A.py": {"mean": -1}}}', "level1/1_A.py has no positive mean time"),
        ('{"level1": {"1_A.py": {"mean": "fast"}}}', "level1/1_A.py has no positive mean time"),
    ],
)
def test_a_bad_baseline_file_is_one_line_naming_the_problem(tmp_path, capsys, text, message):
    db = tmp_path / "results.db"
    with Store(db) as store:
        store.put(make_record("a", speedup=1.5))
    path = tmp_path / "baseline.json"
    path.write_text(text)
    with pytest.raises(BaselineError, match=message):
        Baseline.read(path)
    assert main(["report", "--store", str(db), "--baseline", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_the_report_scores_a_store_against_a_baseline_file(tmp_path, capsys):
    import json

    path = tmp_path / "baseline_time_torch.json"
    path.write_text(json.dumps(BASELINE))
    db = tmp_path / "results.db"
    with Store(db) as store:
        for record in kernelbench_records():
            store.put(record)
    page = tmp_path / "report.html"
    assert main(["report", "--store", str(db), "--baseline", str(path), "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    assert "| 1 | 0.333 (1/3;" in printed and "| 2 | 0.333 (1/3;" in printed  # 3x clears 2; 0.5x clears neither
    assert "baseline_time_torch.json" in page.read_text()
    # The items show the baseline's speedup, without the paired interval that belongs to the live one
    assert ">3.000x<" in page.read_text() and "[1.500, 2.500]" not in page.read_text()
