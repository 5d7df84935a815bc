"""A batch stopped by SIGTERM or SIGINT ends cleanly: the records finished stay stored, the judgment in flight is
stopped (its workers killed, their workspaces removed) and not stored, the summary says what finished and what
did not, the exit code is the signal's (143, 130), and the same command again judges the rest."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from helpers import CANDIDATES, ROOT, TASKS
from kerneljudge.config import JudgeConfig
from kerneljudge.runs.backends import Backend
from kerneljudge.runs.batch import Interrupt, read_manifest, run_batch

FLAGS = ["--device", "cpu", "--policy", "practical", "--timeout", "60", "--no-timing"]
NAMES = ["wrong_values.py", "raise_in_forward.py", "honest_torch.py"]
WORKSPACE = "kerneljudge-"  # a worker's workspace: kerneljudge-ROLE-pPID-... (sandbox/workspace.py)
BYTECODE = "kerneljudge-bytecode"  # the judge's bytecode cache, kept on purpose (sandbox/bytecode.py)


def write_manifest(folder: Path) -> Path:
    shutil.copy(TASKS / "tiny_bias_relu.py", folder / "task.py")
    for name in NAMES:
        shutil.copy(CANDIDATES / name, folder / name)
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"task": "task.py", "candidate": name}) + "\n" for name in NAMES))
    return manifest


def workspaces(tmp: Path) -> list[str]:
    return sorted(n for n in os.listdir(tmp) if n.startswith(WORKSPACE) and not n.startswith(BYTECODE))


def stored_rows(store: Path) -> int:
    try:
        with sqlite3.connect(store, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent = int(Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its parent to read its status has ended)."""
    try:
        return Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def batch(manifest: Path, store: Path, tmp: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["TMPDIR"] = str(tmp)  # the workers' workspaces are made there
    env["PYTHONPATH"] = str(ROOT / "src")
    argv = [sys.executable, "-m", "kerneljudge", "batch", str(manifest), "--store", str(store), *FLAGS]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["TERM", "INT"])
def test_a_signalled_batch_stops_cleanly_and_a_rerun_judges_the_rest(tmp_path, signum, code):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    manifest = write_manifest(tmp_path)
    store = tmp_path / "results.db"
    first = batch(manifest, store, tmp)
    try:
        # SIGTERM once the first record is stored and the second item is being judged (its workspaces made);
        # SIGINT as soon as the first item is.
        wanted = 1 if signum == signal.SIGTERM else 0
        deadline = time.monotonic() + 120
        while first.poll() is None and time.monotonic() < deadline:
            if stored_rows(store) == wanted and len(workspaces(tmp)) == 2:
                break
            time.sleep(0.05)
        time.sleep(0.5)  # its workers are importing torch
        assert first.poll() is None, f"the batch ended before the signal: {first.communicate()[1][-2000:]}"
        workers = descendants(first.pid)
        assert workers, "no worker ran when the signal was sent"
        began = time.monotonic()
        first.send_signal(signum)
        out, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == code, err[-3000:]
    assert time.monotonic() - began < 30  # it stops, it does not finish the batch
    name = signal.Signals(signum).name
    assert f"stopped by {name}: judged {wanted}, skipped 0" in out, out
    assert "not judged: 1 stopped in flight, " in out and f"{2 - wanted} not started" in out, out
    assert f"kerneljudge: stopped by {name}" in err
    assert f": not judged: stopped by {name}, not stored; a rerun judges it" in err
    assert [pid for pid in workers if alive(pid)] == []  # no worker outlived the batch
    assert workspaces(tmp) == []  # nor any workspace
    assert stored_rows(store) == wanted  # what finished stays; what was stopped is not stored
    if signum != signal.SIGTERM:
        return
    again = batch(manifest, store, tmp)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-3000:]
    assert out.startswith("judged 2, skipped 1 (already stored)"), out
    assert stored_rows(store) == 3
    assert workspaces(tmp) == []


class Unanswered(Backend):
    """A backend whose jobs never end: a batch asked to stop must not wait for them."""

    def __init__(self, stop: Interrupt) -> None:
        self.stop = stop
        self.submitted: list[Future] = []

    def submit(self, job, progress=None) -> Future:
        self.submitted.append(Future())
        if len(self.submitted) == 2:  # two queued ahead on its one lane: a SIGTERM comes while they run
            threading.Timer(0.3, self.stop.ask, args=(signal.SIGTERM,)).start()
        return self.submitted[-1]

    @property
    def lanes(self) -> int:
        return 1

    @property
    def busy(self) -> int:
        return len(self.submitted)

    def close(self) -> None:
        pass


def test_a_batch_on_a_backend_asked_to_stop_submits_nothing_more_nor_waits_for_its_jobs(tmp_path):
    manifest = write_manifest(tmp_path)
    stop = Interrupt()
    backend = Unanswered(stop)
    config = JudgeConfig(device="cpu", policy="practical", timeout_s=60.0, timing=False)
    began = time.monotonic()
    counts = run_batch(read_manifest(manifest), config, tmp_path / "s.db", False, backend=backend, stop=stop)
    assert time.monotonic() - began < 10
    assert len(backend.submitted) == 2  # two a lane queued ahead, none after the stop
    assert (counts.judged, counts.interrupted, counts.not_started) == (0, 2, 1)
    assert stop.exit_code == 143 and "2 stopped in flight, 1 not started" in counts.summary()
