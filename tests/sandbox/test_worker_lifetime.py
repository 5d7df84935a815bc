"""Workers die with the judge, and the workspaces of a judge that was killed are removed at the next start:
a SIGKILL of the parent leaves no worker running and, after the next start, no workspace."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import TASKS, allow_descriptors_past
from kerneljudge.sandbox.ending import descendants
from kerneljudge.sandbox.workspace import OWNED_NAME, Workspace, remove_stale

# A candidate that says, in its workspace, that its call has begun, then never returns.
IN_FORWARD = """
import time
import torch


class ModelNew(torch.nn.Module):
    def __init__(self, width):
        super().__init__()

    def forward(self, x):
        open("in_forward", "w").close()
        while True:
            time.sleep(0.05)
"""
JUDGE = (
    "import sys; from kerneljudge.judgment.pipeline import judge; "
    "judge(sys.argv[1], sys.argv[2], device='cpu', timing=False, policy='practical', sandbox=sys.argv[3])"
)


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for a reaper that is not ours."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def wait_until(condition, limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {limit_s} s")
        time.sleep(0.05)


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_workers_die_with_a_killed_judge_and_its_workspaces_go_at_the_next_start(tmp_path, sandbox):
    temp = tmp_path / "tmp"
    temp.mkdir()
    candidate = tmp_path / "candidate.py"
    candidate.write_text(IN_FORWARD)
    env = {**os.environ, "TMPDIR": str(temp)}
    judge = subprocess.Popen(
        [sys.executable, "-c", JUDGE, str(TASKS / "tiny_bias_relu.py"), str(candidate), sandbox], env=env
    )
    workers: list[int] = []
    ended = False
    try:
        wait_until(lambda: list(temp.glob("kerneljudge-candidate-*/in_forward")), 120, "the candidate's call began")
        workers = descendants(judge.pid)
        assert workers, "the judgment has workers"
        judge.send_signal(signal.SIGKILL)
        judge.wait()
        # The launchers read the end of the judge's lifeline at once (0.08 s on the 2-core machine); before,
        # the candidate's worker ran on in its call until its lifetime limit.
        wait_until(lambda: not any(alive(pid) for pid in workers), 2, "every worker of the killed judge ended")
        ended = True
    finally:
        judge.kill()
        judge.wait()
        for pid in [] if ended else workers:  # a failed run must not leave its workers spinning
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    stale = sorted(p.name for p in temp.iterdir() if OWNED_NAME.match(p.name))
    assert {name.split("-")[1] for name in stale} == {"reference", "candidate"}
    assert all(f"-p{judge.pid}-" in name for name in stale)
    nxt = "from kerneljudge.sandbox.workspace import Workspace; Workspace.create('reference').remove()"
    subprocess.run([sys.executable, "-c", nxt], env=env, check=True)
    assert not [p for p in temp.iterdir() if OWNED_NAME.match(p.name)]


def test_only_workspaces_of_dead_owners_are_swept(tmp_path):
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(finished.stdout)
    dead = tmp_path / f"kerneljudge-candidate-p{dead_pid}-abc"
    live = tmp_path / f"kerneljudge-reference-p{os.getpid()}-def"
    unowned = tmp_path / "kerneljudge-reference-xyz"  # an older judge's, which records no owner
    cache = tmp_path / "kerneljudge-bytecode-0"
    for folder in (dead, live, unowned, cache):
        (folder / "home").mkdir(parents=True)
    assert remove_stale(tmp_path) == [dead.name]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (live, unowned, cache))


def test_a_workspace_names_its_owner():
    workspace = Workspace.create("candidate")
    try:
        assert OWNED_NAME.match(workspace.root.name)["pid"] == str(os.getpid())
    finally:
        workspace.remove()


# A grandchild that takes a while to exit once killed: its half GiB of written pages are freed as it exits,
# as a killed CUDA worker's exit waits on its context's teardown.
SLOW_TO_EXIT = r"""
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import sys, time; held = b'x' * (512 << 20); print(flush=True); time.sleep(60)"],
    stdout=subprocess.PIPE, start_new_session=True)
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(60)
"""


def pid_state(pid: int) -> str | None:
    """A process's state letter (Z once exited, not yet reaped), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_a_killed_tree_is_waited_for_until_every_process_has_exited():
    from kerneljudge.sandbox.ending import kill_tree

    root = subprocess.Popen([sys.executable, "-c", SLOW_TO_EXIT], stdout=subprocess.PIPE, start_new_session=True)
    grandchild = int(root.stdout.readline())
    assert pid_state(grandchild) not in (None, "Z")
    assert kill_tree(root.pid)  # the grandchild is in a session of its own: only the walk of descendants finds it
    assert pid_state(grandchild) in (None, "Z")
    assert root.wait(timeout=5) == -signal.SIGKILL


def test_waiting_for_processes_to_exit_gives_up_at_its_timeout():
    from kerneljudge.sandbox.ending import wait_gone

    quick = subprocess.Popen(["sleep", "0.3"])
    began = time.monotonic()
    assert wait_gone([os.pidfd_open(quick.pid)], 10.0)
    assert 0.2 < time.monotonic() - began < 5.0
    slow = subprocess.Popen(["sleep", "30"])
    try:
        assert not wait_gone([os.pidfd_open(slow.pid)], 0.2)
    finally:
        slow.kill()
        slow.wait()
    quick.wait()


def test_exits_are_waited_for_on_descriptors_past_select_s_limit():
    """A batch's parent holds many pipes and channels: a pidfd numbered past 1024 is still waited on."""
    from kerneljudge.sandbox.ending import wait_gone

    allow_descriptors_past(1500)
    quick = subprocess.Popen(["sleep", "0.1"])
    pidfd = os.pidfd_open(quick.pid)
    high = os.dup2(pidfd, 1500)
    os.close(pidfd)
    assert wait_gone([high], 10.0)
    quick.wait()
