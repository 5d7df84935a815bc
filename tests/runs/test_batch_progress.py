"""What a batch shows as it goes: off a terminal, a line at its start, at each item's start and end (its place,
name, status, failure kind and speedup, marked as a CPU timing) and a heartbeat while a judgment runs; on a
terminal, the same item lines above the live counts."""

from __future__ import annotations

import io
import json
import shutil
import time
from types import SimpleNamespace

from helpers import CANDIDATES, TASKS, make_record
from kerneljudge.cli import main
from kerneljudge.runs.batch import BatchCounts
from kerneljudge.runs.progress import BatchProgress


def entry(candidate: str) -> SimpleNamespace:
    """What the progress reads of a prepared item: its task's and candidate's names."""
    return SimpleNamespace(task=SimpleNamespace(name="task"), candidate=SimpleNamespace(name=candidate))


def test_off_a_terminal_each_item_has_a_line_with_its_place_status_kind_and_speedup():
    lines = io.StringIO()
    counts = BatchCounts()
    first, second = entry("fast"), entry("wrong")
    with BatchProgress(False, 2, counts, lines=lines, about=" (0 already stored, skipped), on 1 lane") as bar:
        bar.start(first)
        counts.add(passed := make_record("fast", "PASS", speedup=1.7))
        bar.finish(first, passed)
        bar.start(second)
        counts.add(failed := make_record("wrong", "FAIL"))
        bar.finish(second, failed)
    out = lines.getvalue().splitlines()
    assert out[0] == "batch: 2 items to judge (0 already stored, skipped), on 1 lane"
    assert out[1] == "judging task/fast (1 of 2 started)"
    assert out[2] == "[1/2] task/fast: PASS, speedup 1.7x (a CPU timing, not a GPU speedup), 1.0 s"
    assert out[3] == "judging task/wrong (2 of 2 started)"
    assert out[4] == "[2/2] task/wrong: FAIL, tolerance, 1.0 s"


def test_a_gpu_speedup_is_not_marked_and_an_untimed_pass_says_no_speedup():
    lines = io.StringIO()
    item = entry("gpu")
    with BatchProgress(False, 2, BatchCounts(), lines=lines) as bar:
        bar.start(item)
        bar.finish(item, make_record("gpu", "PASS", speedup=2.0, device="cuda"))
        bar.start(item)
        bar.finish(item, make_record("gpu", "PASS"))
    out = lines.getvalue().splitlines()
    assert out[2] == "[1/2] task/gpu: PASS, speedup 2x, 1.0 s"
    assert out[4] == "[2/2] task/gpu: PASS, 1.0 s"


def test_off_a_terminal_a_heartbeat_says_what_is_still_judged_and_for_how_long():
    lines = io.StringIO()
    slow = entry("slow")
    with BatchProgress(False, 1, BatchCounts(), lines=lines, heartbeat_s=0.2) as bar:
        bar.start(slow)
        time.sleep(0.9)
        beats = [line for line in lines.getvalue().splitlines() if line.startswith("still judging")]
        bar.stop(slow, "stopped by SIGTERM")
    assert beats and beats[0].startswith("still judging 1 item, oldest (task/slow) for "), lines.getvalue()
    assert len(beats) >= 2  # every heartbeat_s, not once
    assert lines.getvalue().splitlines()[-1] == "[1/1] task/slow: not judged: stopped by SIGTERM"
    quiet = len(lines.getvalue())
    time.sleep(0.5)
    assert len(lines.getvalue()) == quiet  # no heartbeat once the batch is over


def test_on_a_terminal_the_item_lines_go_above_the_live_counts():
    counts = BatchCounts()
    item = entry("fast")
    bar = BatchProgress(True, 1, counts)
    record_console = bar.bar.console
    record_console.file = io.StringIO()  # what the terminal would show
    with bar:
        bar.start(item)
        counts.add(record := make_record("fast", "PASS", speedup=1.7))
        bar.finish(item, record)
    shown = record_console.file.getvalue()
    assert "[1/1] task/fast: PASS, speedup 1.7x (a CPU timing, not a GPU speedup), 1.0 s" in shown


def test_a_batch_piped_or_in_ci_says_it_started_and_how_each_item_ended(tmp_path, capsys):
    """`kerneljudge batch` with stderr not a terminal (pytest captures it): plain lines there, the summary on stdout."""
    shutil.copy(TASKS / "tiny_bias_relu.py", tmp_path / "task.py")
    shutil.copy(CANDIDATES / "wrong_values.py", tmp_path / "wrong_values.py")
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"task": "task.py", "candidate": "wrong_values.py"}) + "\n")
    flags = ["--device", "cpu", "--policy", "practical", "--timeout", "60", "--no-timing"]
    assert main(["batch", str(manifest), "--store", str(tmp_path / "s.db"), *flags]) == 0
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert err[0] == "batch: 1 item to judge (0 already stored, skipped), on 1 lane, --device cpu"
    assert err[1] == "judging task/wrong_values (1 of 1 started)"
    assert err[2].startswith("[1/1] task/wrong_values: FAIL, tolerance, "), err[2]  # and its failure's kind
    assert captured.out.startswith("judged 1, skipped 0")
