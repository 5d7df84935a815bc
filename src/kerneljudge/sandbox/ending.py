"""How one worker ends: its stdout and stderr drained into capped buffers, its process tree read from /proc, the
kill of its whole process group, and its exit status and last words made into the reason its failure gives.

`WorkerEnding` is mixed into `WorkerProcess` (sandbox/process.py), which starts the process these end.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from kerneljudge import protocol
from kerneljudge.protocol import wire

# How long a worker whose pipe broke is given to finish exiting before it is killed: its launcher passes its
# exit status on within milliseconds, and a status read after the judge's own kill would say SIGKILL.
EXIT_GRACE_S = 2.0
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b:?")


class StreamCapture(threading.Thread):
    """Drains a pipe, keeping the first and last cap/2 bytes and counting the rest."""

    def __init__(self, stream: Any, cap_bytes: int) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.half = cap_bytes // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total_bytes = 0
        self.start()

    def run(self) -> None:
        fd = self.stream.fileno()
        while chunk := os.read(fd, 65536):
            self.total_bytes += len(chunk)
            room = self.half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                del self.tail[: max(0, len(self.tail) - self.half)]

    def text(self) -> str:
        kept = len(self.head) + len(self.tail)
        middle = f"\n[... {self.total_bytes - kept} bytes dropped ...]\n" if self.total_bytes > kept else ""
        return self.head.decode(errors="replace") + middle + self.tail.decode(errors="replace")

    @property
    def truncated(self) -> bool:
        return self.total_bytes > len(self.head) + len(self.tail)


def descendants(pid: int) -> list[int]:
    """Every live descendant of pid, read from /proc (empty where /proc is absent)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


# How long a stop waits for each process of a tree to show stopped in /proc: one in a system call that does not sleep
# (reading the disk) stops once it returns.
STOP_WAIT_S = 0.5


def tree(root: int) -> list[int]:
    """`root` and its live descendants, read down from it through each thread's `children` in /proc (a few reads
    for a worker's tree, where `descendants` reads every process of the host), or by `descendants` where the kernel
    keeps no such list."""
    found, todo = [root], [root]
    while todo:
        pid = todo.pop()
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                listed = Path(f"/proc/{pid}/task/{thread}/children").read_text().split()
            except FileNotFoundError:  # no CONFIG_PROC_CHILDREN: every process of the host, read once
                return [root, *descendants(root)]
            except OSError:
                continue
            for child in map(int, listed):
                if child not in found:
                    found.append(child)
                    todo.append(child)
    return found


def signal_tree(root: int, sig: int) -> list[int]:
    """Send `sig` to `root` and every live descendant, again to those born meanwhile (a parent stopped
    between the listing and its own signal may have forked); the processes signalled."""
    sent: list[int] = []
    for _ in range(3):
        fresh = [pid for pid in tree(root) if pid not in sent]
        if not fresh:
            break
        for pid in fresh:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                continue
            sent.append(pid)
    return sent


def process_state(pid: int) -> str | None:
    """The state letter of a process in /proc (R, S, D, T, t, Z...), None where it is gone."""
    try:
        return Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def wait_stopped(pids: list[int], timeout_s: float = STOP_WAIT_S) -> bool:
    """Wait until each of `pids` is stopped (T, t), a zombie or gone; False if some were not within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    left = list(pids)
    while True:
        left = [pid for pid in left if process_state(pid) not in (None, "T", "t", "Z", "X")]
        if not left:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)


class Lineage:
    """Whether a process is `root` or one of its descendants, by the chain of its parents in /proc, each process's
    answer remembered under its start time (a pid can be reused): about one read for a process seen before, where
    `descendants` reads every process of the host. The GPU memory watch asks it of each process NVML lists, five
    times a second for every CUDA worker (sandbox/gpu_memory.py); a process whose parent ended stays in the tree
    it was found in."""

    MAX_KNOWN = 4096

    def __init__(self, root: int) -> None:
        self.root = root
        self.known: dict[int, tuple[str, bool]] = {}  # pid: (its start time, whether it descends from root)

    def __call__(self, pid: int) -> bool:
        chain: list[tuple[int, str]] = []
        found = False
        for _ in range(64):
            if pid == self.root:
                found = True
                break
            if pid <= 1:
                break
            try:
                fields = Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                break
            began, known = fields[19], self.known.get(pid)
            if known is not None and known[0] == began:
                found = known[1]
                break
            chain.append((pid, began))
            pid = int(fields[1])
        if len(self.known) + len(chain) > self.MAX_KNOWN:
            self.known.clear()
        self.known.update((link, (began, found)) for link, began in chain)
        return found


# How long a killed process tree is waited for, until each of its processes is gone.
GONE_TIMEOUT_S = 30.0


def kill_tree(root: int, timeout_s: float = GONE_TIMEOUT_S) -> bool:
    """SIGKILL `root`'s process group and every live descendant of root, and return once each of them has exited
    (True), or after `timeout_s` (False). Each is watched by a pidfd opened before the kill, so that a pid reused
    meanwhile is not waited for. A process has exited once its descriptors are closed, a CUDA context torn down
    with them (0.08-0.13 s on an H100, docs/batch.md); in the sandbox the launcher, root, holds no context and is
    gone within milliseconds of the kill while its worker is still tearing down (benchmarks/context_teardown.py),
    so waiting for root alone would let the judge measure while the killed worker's kernels still run."""
    tree = [root, *descendants(root)]
    watched = []
    for pid in tree:
        try:
            watched.append(os.pidfd_open(pid))
        except (AttributeError, OSError):  # gone already, or no pidfd before Linux 5.3
            pass
    for pid in tree:
        try:
            os.killpg(pid, signal.SIGKILL) if pid == root else os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return wait_gone(watched, timeout_s)


def wait_gone(pidfds: list[int], timeout_s: float) -> bool:
    """Wait until every process these pidfds watch has exited (its pidfd reads ready), closing them; False if some
    had not within `timeout_s`. (poll, not select: a busy judge's descriptors run past select's 1024.)"""
    deadline = time.monotonic() + timeout_s
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    left = set(pidfds)
    try:
        while left:
            wait_s = deadline - time.monotonic()
            if wait_s <= 0:
                return False
            for fd, _ in poller.poll(wait_s * 1000):
                poller.unregister(fd)
                left.discard(fd)
        return True
    finally:
        for fd in pidfds:
            os.close(fd)


class WorkerEnding:
    """The kill and the exit of a `WorkerProcess`, and why it ended."""

    def kill(self) -> int | None:
        """Kill the worker's process group and every descendant, and wait until they are all gone (`kill_tree`);
        return its exit status."""
        if not self.dead:
            self.dead = True
            kill_tree(self.proc.pid)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        """Stop the worker's whole process tree (SIGSTOP) and return once each process shows stopped, or after
        STOP_WAIT_S: a worker still starting, while another lane measures (judgment/gate.py). Its own clock and
        its launcher's stop with it; the judge's deadlines on it go on, and its start is short beside them."""
        if not self.dead and self.proc.poll() is None:
            wait_stopped(signal_tree(self.proc.pid, signal.SIGSTOP))

    def go(self) -> None:
        """Continue a tree `stop` stopped (SIGCONT to every process of it)."""
        if not self.dead and self.proc.poll() is None:
            signal_tree(self.proc.pid, signal.SIGCONT)

    def ask_exit(self) -> None:
        """Ask the worker to exit without waiting for it: workers asked together end together."""
        if not self.dead and self.exit_asked_at is None and self.proc.poll() is None:
            self.exit_asked_at = time.monotonic()
            try:
                wire.write_frame(self._req_w, protocol.Exit().header(), time.monotonic() + 1.0)
            except wire.WireError:
                pass

    def _ended(self) -> tuple[int | None, bool]:
        """After its pipe broke: the worker's exit status, and whether it ended by itself. It is given a moment
        to finish exiting (the launcher passes its status on) before the judge kills what is left; a status
        read after that kill is the judge's SIGKILL, not the worker's own end."""
        if not self.dead:
            try:
                returncode = self.proc.wait(timeout=EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                return self.kill(), False
            self.kill()  # its session may still hold processes it started
            return returncode, True
        return self.kill(), False

    def _died(self, returncode: int | None, by_itself: bool = True) -> str:
        """Why the worker died: the last exception line it wrote to stderr (a traceback's last line; CUDA's
        errors trail several lines of advice after it), else its last line."""
        if self.gpu_watch is not None and self.gpu_watch.reason():
            return f"the {self.role} worker was killed: it {self.gpu_watch.reason()}"
        self.stderr.join(timeout=2)
        lines = [line.strip() for line in self.stderr.text().splitlines() if line.strip()]
        raised = [line for line in lines if EXCEPTION_LINE.match(line)]
        cause = f": {(raised or lines)[-1][:300]}" if lines else ""
        if not by_itself:
            return f"the {self.role} worker closed its pipe without exiting and was killed by the judge{cause}"
        if returncode is not None and returncode >= 0:
            status = describe_returncode(returncode)
            return f"the {self.role} worker exited by itself ({status}) before answering{cause}"
        died = describe_returncode(returncode)
        if returncode == -signal.SIGKILL:  # the judge's own kills are told above: this one is the kernel's or its own
            died += ", not sent by the judge: an out-of-memory kill looks like this"
        return f"the {self.role} worker died ({died}){cause}"


def describe_returncode(returncode: int | None) -> str:
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"
