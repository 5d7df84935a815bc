"""scripts/setup.sh says what it does as each step starts (its first run is about 90 s of pip); run here in a
copy whose .venv/bin/python only records what it was asked, so nothing is installed."""

import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup.sh"


def test_setup_announces_every_step_before_it_runs(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "setup.sh")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    # The stand-in python writes each call out; one stream keeps them in order with the script's messages.
    python.write_text('#!/bin/sh\necho "python $*" >&2\n')
    python.chmod(0o755)
    script = tmp_path / "scripts" / "setup.sh"
    done = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    calls = [i for i, line in enumerate(lines) if line.startswith("python ")]
    assert len(calls) == 3  # torch, the package, the import check
    for index in calls:
        assert lines[index - 1].startswith("setup: "), f"no message before {lines[index]!r}"
    assert lines[-1].startswith("setup: done")


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
