"""The training-step benchmark (benchmarks/training_step.py): its GRPO-shaped manifest, and a step judged on the CPU
as groups and as single candidates, with the same verdicts."""

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import training_step  # noqa: E402  (a script of benchmarks/, not a package)

from kerneljudge.results.store import Store  # noqa: E402


def test_a_step_is_sixteen_tasks_of_eight_distinct_samples_mixed_as_an_early_policy_writes_them(tmp_path):
    lines = training_step.step_lines(tmp_path, 16, 8, seed=1)
    by_task = Counter(line["task"] for line in lines)
    assert len(by_task) == 16 and set(by_task.values()) == {8}
    names = {Path(line["task"]).parent.name for line in lines}
    assert {name.rsplit("_", 1)[1] for name in names} == {"fp32", "fp16"}
    for task in by_task:
        kinds = Counter(line["kind"] for line in lines if line["task"] == task)
        assert (kinds["honest_triton"], kinds["honest_torch"], kinds["tail_zeroed"]) == (2, 2, 1)
        assert sum(kinds[k] for k in training_step.HACK_KINDS) == 3
    texts = [open(line["candidate"]).read() for line in lines]
    assert len(set(texts)) == len(texts)  # no two samples are one judgment
    assert training_step.step_lines(tmp_path / "again", 16, 8, seed=1)[5]["kind"] == lines[5]["kind"]


def test_upstreams_share_of_the_step_is_spaced_evenly_through_it(tmp_path):
    lines = training_step.step_lines(tmp_path, 16, 8, seed=1)
    share = training_step.spread(lines, 32)
    assert len(share) == 32
    assert set(Counter(line["task"] for line in share).values()) == {2}  # every task alike
    assert training_step.spread(lines, None) == lines == training_step.spread(lines, 500)


def test_a_small_step_on_the_cpu_judges_groups_as_single_candidates_judge_them(tmp_path, capsys):
    # Split as on a machine lent for limited calls: the groups in one run, the single candidates in a second that
    # joins the first's rows and store.
    first, second = tmp_path / "groups", tmp_path / "single"
    argv = ["--device", "cpu", "--tasks", "1", "--samples", "2", "--small", "--no-timing", "--jobs", "1"]
    assert training_step.main([*argv, "--ways", "groups", "--out", str(first)]) == 0
    capsys.readouterr()
    assert training_step.main([*argv, "--ways", "single", "--join", str(first), "--out", str(second)]) == 0
    report = json.loads((second / "step.json").read_text())
    groups, single = report["rows"]
    assert groups["candidates"] == single["candidates"] == 2
    assert groups["passed"] == single["passed"] == 1  # the honest Triton kernel passes, the bug fails
    agreement = report["agreement"]
    assert (agreement["items"], agreement["status_differs"], agreement["failure_kind_differs"]) == (2, [], [])
    with Store(first / "groups.db") as store:
        assert {r.workers.checked for r in store} == {"group"}
    with Store(second / "single.db") as store:
        assert {r.workers.checked for r in store} == {"started"}
    table = capsys.readouterr().out
    assert "| groups | 1 | 2 |" in table and "| single candidates | 1 | 2 |" in table
    assert "Groups against single candidates: 2 items, status differs on 0, failure kind on 0" in table


def test_a_join_of_a_folder_without_a_step_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        training_step.main(["--device", "cpu", "--join", str(tmp_path), "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    assert "no step.json there" in capsys.readouterr().err
