"""scripts/setup.sh says what it does as each step starts, that a long install is still going, and how long it
took; run here in a copy whose .venv/bin/python only records what it was asked, so nothing is installed."""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup.sh"


def run_setup(folder: Path, torch_s: float = 0, tick_s: int | None = None) -> subprocess.CompletedProcess:
    """setup.sh in a copy at `folder`, its .venv's python a stand-in whose torch install takes `torch_s` seconds."""
    (folder / "scripts").mkdir(exist_ok=True)
    shutil.copy(SCRIPT, folder / "scripts" / "setup.sh")
    python = folder / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    # The stand-in python writes each call out; one stream keeps them in order with the script's messages.
    python.write_text(f'#!/bin/sh\necho "python $*" >&2\ncase "$*" in *torch==*) sleep {torch_s};; esac\n')
    python.chmod(0o755)
    env = {**os.environ, **({"SETUP_TICK_S": str(tick_s)} if tick_s is not None else {})}
    script = folder / "scripts" / "setup.sh"
    return subprocess.run(
        ["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=60
    )


def test_setup_announces_every_step_before_it_runs(tmp_path):
    done = run_setup(tmp_path)
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    calls = [i for i, line in enumerate(lines) if line.startswith("python ")]
    assert len(calls) == 3  # torch, the package, the import check
    for index in calls:
        assert lines[index - 1].startswith("setup: "), f"no message before {lines[index]!r}"
    assert lines[-1].startswith("setup: done")
    assert "still installing" not in done.stdout  # a quick install says nothing more
    again = run_setup(tmp_path).stdout.splitlines()  # on the same .venv: the same steps, nothing else
    assert again[:-1] == lines[:-1] and again[-1].startswith("setup: done in ")


def test_a_long_install_says_it_is_still_going_and_the_end_gives_the_real_duration(tmp_path):
    started = time.monotonic()
    done = run_setup(tmp_path, torch_s=3.5, tick_s=1)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    ticks = [line for line in lines if line.startswith("setup: still installing torch (")]
    assert ticks[:3] == [
        "setup: still installing torch (1 s)",
        "setup: still installing torch (2 s)",
        "setup: still installing torch (3 s)",
    ], done.stdout
    assert lines.index(ticks[0]) < next(i for i, line in enumerate(lines) if "kerneljudge (editable)" in line)
    duration = re.fullmatch(r"setup: done in (\d+) s: .*", lines[-1])
    assert duration is not None, lines[-1]
    assert 3 <= int(duration[1]) <= took + 1
    assert took < 10  # the ticker's sleep keeps no pipe open after the install ends


def test_the_script_states_no_duration_it_cannot_keep():
    assert not re.search(r"about \d+ ?s", SCRIPT.read_text())


GPU_SUITE = SCRIPT.parent / "gpu_suite.sh"


def test_the_gpu_suite_runs_every_stage_its_usage_names_and_names_every_stage_it_runs():
    import re

    text = GPU_SUITE.read_text()
    usage = re.search(r"run \[STAGE \.\.\.\] \((?P<stages>[a-z ]+)\)\" >&2", text)
    assert usage is not None
    named = set(usage["stages"].split()) - {"all"}
    handled = set(re.findall(r"^  if asked (\w+); then", text, re.MULTILINE))
    assert named == handled
    for stage in handled:  # each is told in the header's notes
        assert f"`{stage}`" in text.split("set -euo pipefail")[0], stage


def test_the_gpu_suite_without_a_command_says_how_to_use_it():
    done = subprocess.run(["bash", str(GPU_SUITE)], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.startswith("usage: scripts/gpu_suite.sh fetch | run")
