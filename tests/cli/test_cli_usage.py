"""The command line's usage: every argparse error exits 1 in one line and a hint (2 is "not verified"), the
help gives each option's meaning and default and the exit codes, and `tasks list` never cuts a value."""

import re

import pytest
from rich.console import Console

from helpers import CANDIDATES, TASKS
from kerneljudge.cli import main
from kerneljudge.cli.tasks import plain_listing, suite_rows, terminal_listing

TASK, CANDIDATE = str(TASKS / "tiny_bias_relu.py"), str(CANDIDATES / "honest_torch.py")


@pytest.mark.parametrize(
    "args, message",
    [
        (["judge", TASK, CANDIDATE, "--device", "gpu"], "invalid choice: 'gpu'"),
        (["export"], "required: --store"),
        ([], "required: COMMAND"),
        (["tasks"], "required: list|show|lint"),
        (["judge", TASK], "required: candidate"),
        (["judge", TASK, CANDIDATE, "--bogus"], "unrecognized arguments: --bogus"),
        (["judge", TASK, CANDIDATE, "--timeout", "-5"], "--timeout must be positive, got -5"),
        (["judge", TASK, CANDIDATE, "--timeout", "0"], "--timeout must be positive, got 0"),
        (["judge", TASK, CANDIDATE, "--timeout", "soon"], "--timeout must be a number of seconds"),
        (["judge", TASK, CANDIDATE, "--shape-trials", "-1"], "--shape-trials must be 0 or more"),
        (["redteam", "--jobs", "0"], "--jobs must be at least 1"),
        (["batch", "m.jsonl", "--store", "s.db", "--timeout", "-5"], "--timeout must be positive, got -5"),
        (["redteam", "--timeout", "-1"], "--timeout must be positive"),
        (["confirm", TASK, CANDIDATE, "--runs", "0"], "--runs must be at least 1"),
    ],
)
def test_usage_errors_exit_1_with_one_line_and_a_hint(args, message, capsys):
    assert main(args) == 1
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("kerneljudge: error: ") and message in lines[0]
    assert re.fullmatch(r"run `kerneljudge( \w+)? --help` for the options", lines[1])
    assert "timeout_s" not in err and "usage:" not in err


@pytest.mark.parametrize("command", ["judge", "redteam", "batch"])
def test_help_gives_the_meaning_and_default_of_each_option(command, capsys):
    args = [command, "--help"]
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for option, default in (("--device", "auto"), ("--mode", "audit"), ("--timeout SECONDS", "")):
        described = text.split(option, 2)[-1].split(" --")[0]  # the option's own entry in the options list
        assert len(described.split()) > 4, f"{option} has no help text"
        assert f"(default: {default}" in described, f"{option} does not say its default"
    if command != "redteam":  # redteam has no --policy
        assert "(default: strict)" in text.split("--policy", 2)[-1]
    assert (
        "exit codes:" in text and "bad usage" in text.split("exit codes:")[-1]
    )  # each command's own: test_cli_outcome


def test_tasks_list_piped_prints_every_value_whole(capsys):
    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    for row in suite_rows():
        line = next(line for line in out.splitlines() if line.startswith(row[0] + " "))
        assert line.split()[:4] == list(row[:4]) and line.endswith(row[4])


def test_tasks_list_wraps_on_a_narrow_terminal_rather_than_cutting():
    console = Console(width=80, force_terminal=True, record=True, color_system=None)
    console.print(terminal_listing(suite_rows()))
    shown = console.export_text()
    assert "…" not in shown and max(len(line) for line in shown.splitlines()) <= 80
    words = set(shown.split())
    for row in suite_rows():
        assert set(row[4].split()) <= words, row  # every word of the case, wrapped but whole


def test_the_plain_listing_has_a_header_and_a_line_per_task():
    rows = suite_rows()
    lines = plain_listing(rows).splitlines()
    assert lines[0].split() == ["name", "op", "dtype", "shape", "case"] and len(lines) == len(rows) + 1


def test_the_api_draws_the_cli_spinner_when_asked(monkeypatch, tmp_path):
    """judge(progress=True) enters the CLI's spinner and names each stage through it."""
    from contextlib import contextmanager

    from kerneljudge.judgment import progress
    from kerneljudge.judgment.pipeline import judge

    drawn: list[str] = []

    @contextmanager
    def recording_spinner(description, file=None):
        drawn.append(description)
        yield drawn.append

    monkeypatch.setattr(progress, "spinner", recording_spinner)
    broken = tmp_path / "broken.py"
    broken.write_text("class ModelNew(:\n")
    record = judge(TASK, broken, device="cpu", timing=False, progress=True)
    assert record.failure.kind == "compile_error"
    assert drawn[0] == "judging" and len(drawn) > 1  # the spinner, then at least one stage named in it
    drawn.clear()
    judge(TASK, broken, device="cpu", timing=False)
    assert drawn == []  # no progress asked: no spinner
