"""The latency benchmark: one judgment at a time, with timing and without, its time by stage."""

import json
import sys

import pytest

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import judgment_latency  # noqa: E402  (a script of benchmarks/, not a package)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The benchmark's plain run, once for the module: the README example timed and untimed, no spare workers,
    nothing made ready ahead; its rows and its table. The other tests' variants are set against its timed row."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("latency")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = judgment_latency.main(["--device", "cpu", "--out", str(out)])
    return code, json.loads((out / "latency.json").read_text()), printed.getvalue()


def test_the_readme_example_is_judged_with_timing_and_without_and_the_table_says_where_the_time_went(plain):
    code, rows, table = plain
    assert code == 0
    assert [(r["task"], r["timing"], r["status"]) for r in rows] == [
        ("readme_softmax", True, "PASS"),
        ("readme_softmax", False, "PASS"),
    ]
    timed, untimed = rows
    assert 0 < timed["busy_fraction"] < 1 and timed["stages_s"]["timing"] > 0
    assert untimed["busy_fraction"] is None and "timing" not in untimed["stages_s"]
    assert "| readme_softmax | yes | no | PASS verified |" in table  # timed, no spare workers
    assert "| readme_softmax | no | no | PASS verified |" in table
    assert "| yes | no | 1 |" in table and "| no | no | 1 |" in table  # the medians, one judgment each
    # the timing stage split by its round trips: the parts and the parent's own rest make up the stage
    split = judgment_latency.timing_split(timed["stages_s"])
    assert all(part >= 0 for part in split) and split[3] > 0  # the measured requests took time
    assert abs(sum(split) - timed["stages_s"]["timing"]) < 0.01
    assert "| task | timing | fresh pair's start and load |" in table
    # the checked pair's close: the stage's wait for it (none left, where its thread ended first), its own time
    assert split[-3] == timed["stages_s"]["timing.checked_pair.close"] >= 0
    assert timed["stages_s"]["timing.checked_pair.close:beside"] > 0
    assert split[-2] == 0  # no pair made ready ahead to wait for (`timing.ahead`)
    # staging by the reference's clocked parts: the sets made, their outputs and the oracle's, the checks
    stage = timed["stages_s"]
    assert all(stage[f"timing.reference.stage:{part}"] > 0 for part in ("inputs", "reference", "checks"))
    assert "| task | reference makes inputs | its outputs and the oracle's |" in table


def test_with_spare_workers_the_build_no_longer_waits_for_the_workers_start(plain, tmp_path, capsys):
    args = ["--device", "cpu", "--no-untimed", "--spare-workers", "yes", "--out", str(tmp_path)]
    assert judgment_latency.main(args) == 0
    (with_spares,) = json.loads((tmp_path / "latency.json").read_text())
    without = plain[1][0]
    assert (without["spare_workers"], with_spares["spare_workers"]) == (False, True)
    assert with_spares["status"] == "PASS" and with_spares["verified"]
    # the spare had started before the judgment came: the build no longer holds the interpreters' start
    assert with_spares["stages_s"]["build.reference.hello"] < without["stages_s"]["build.reference.hello"]
    assert "| yes | yes | 1 |" in capsys.readouterr().out


def test_with_the_timing_pair_made_ready_ahead_the_stage_no_longer_stages_and_a_table_says_what_went_ahead(
    plain, tmp_path, capsys
):
    args = ["--device", "cpu", "--no-untimed", "--timing-ahead", "yes", "--out", str(tmp_path)]
    assert judgment_latency.main(args) == 0
    (ahead,) = json.loads((tmp_path / "latency.json").read_text())
    plain_timed = plain[1][0]
    assert (plain_timed["timing_ahead"], ahead["timing_ahead"]) == (False, True)
    assert ahead["status"] == "PASS" and ahead["verified"] and ahead["ahead"]["staged"]
    assert ahead["stages_s"]["ahead.reference.stage"] > 0 and "timing.reference.stage" not in ahead["stages_s"]
    assert plain_timed["stages_s"]["timing.reference.stage"] > 0 and "ahead" not in plain_timed["stages_s"]
    split = judgment_latency.ahead_split(ahead["stages_s"])
    assert split[1] > 0 and split[3] >= sum(split[:3]) - 0.01  # the thread's wall holds its round trips
    table = capsys.readouterr().out
    assert "| task | greeting and loading | staging | first calls |" in table
    assert "| yes (ahead) | no | 1 |" in table
