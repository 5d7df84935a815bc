"""A group's reference worker: started once for a group of candidates of one task, lent to each candidate's
judgment in turn for its checked pair (judgment/group.py).

A single judgment starts its checked pair's reference worker, greets it and builds the task; in a group the
reference worker is started and greeted once, and each candidate's judgment gets it together with a fresh
candidate worker of its own (`SharedReference.lend`). The judgment uses it as it would its own worker; closing it
gives it back (`LentReference`). The timing pair stays fresh for every candidate, both workers
(judgment/stages/timing_pair.py): the pairing of a timed judgment is unchanged.

What keeps one candidate's doing from another (docs/process-model.md):
- every candidate runs in a fresh sandboxed worker of its own; a judgment ends, and its candidate's processes are
  gone, before the next candidate's worker starts (a group is judged in order);
- the channels the reference shares with the candidate (`candidate_in`, which the candidate reads, and
  `candidate_out`, which it writes) are the group's, handed to each candidate's worker in turn: before each lend the
  parent writes zeros over every page of them that holds data (`wipe`), so no output of one candidate is there for
  the next to read;
- the reference worker runs only the task's code; what it keeps between judgments is the task's (its imported
  module, its model, which every load builds again from the public seed) and, until the next load clears them, the
  reference's and the oracle's outputs of the last trials;
- a reference that died, broke off in the middle of a request (a judgment that ended inside one), or lived half its
  lifetime is not lent again: it is closed, and the next lend starts a fresh one.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kerneljudge.judgment.stages.failures import JudgeFailed
from kerneljudge.protocol import channel
from kerneljudge.protocol.environment import PREPARE_TRITON_ENV
from kerneljudge.sandbox.confine import SandboxPolicy, SandboxUnavailable
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerChannels

WIPE_CHUNK_BYTES = 16 * 1024 * 1024
# What a fresh load of the reference says of the task (protocol.Loaded): the same at every judgment of a group.
TASK_DESCRIPTION = (
    "parameter_count",
    "parameter_bytes",
    "family",
    "family_error",
    "integers",
    "contract_error",
    "inputs_writable",
)


# The device bytes of trial outputs the group's reference keeps for the group's next judgments (protocol.Load's
# `keep`, worker/correctness/memo.py); the gate reserves them with the group's reference (gate.memory_need).
KEEP_BYTES = 512 * 1024**2

# At most this many bytes of a channel are wiped; a candidate that left more data in its channels (it decides how
# much of its outbox it touches) costs the group its reference and channels instead: fresh ones hold nothing.
WIPE_LIMIT_BYTES = 4 * 1024**3


def extents(endpoint: channel.Endpoint, limit_bytes: int) -> list[tuple[int, int]] | None:
    """The (start, end) byte ranges of a channel that hold data (a sparse file's holes read as zeros already), or
    None as soon as they come to more than `limit_bytes`."""
    fd, position, found, total = endpoint.fd, 0, [], 0
    while position < endpoint.capacity_bytes:
        try:
            start = os.lseek(fd, position, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data past `position`
                break
            raise
        end = min(os.lseek(fd, start, os.SEEK_HOLE), endpoint.capacity_bytes)
        total += end - start
        if total > limit_bytes:
            return None
        found.append((start, end))
        position = end
    return found


def wipe(endpoints: Sequence[channel.Endpoint], limit_bytes: int | None = None) -> int | None:
    """Write zeros over every extent of the channels that holds data; the bytes written, or None (and nothing
    written) where that is more than `limit_bytes` (default `WIPE_LIMIT_BYTES`) in all. Through the parent's
    read-write descriptors, so a mapping or registered head of a channel in a worker stays valid (nothing is
    punched out from under it)."""
    left = WIPE_LIMIT_BYTES if limit_bytes is None else limit_bytes
    ranges = []
    for endpoint in endpoints:
        found = extents(endpoint, left)
        if found is None:
            return None
        left -= sum(end - start for start, end in found)
        ranges += [(endpoint.fd, start, end) for start, end in found]
    zeros, written = memoryview(bytes(WIPE_CHUNK_BYTES)), 0
    for fd, start, end in ranges:
        while start < end:
            written += os.pwrite(fd, zeros[: min(WIPE_CHUNK_BYTES, end - start)], start)
            start += min(WIPE_CHUNK_BYTES, end - start)
    return written


class SharedReference:
    """The reference worker of a group's checked pairs, with the candidate channels it holds (module docstring).

    `lend(candidate_text)` returns a pair as `workers.new_pair` does: the group's reference (started and greeted
    on the first lend, or again after one was retired) and a fresh candidate worker on the group's channels.
    `close()` ends the reference and the channels once the group is judged. Not for two judgments at once.
    """

    def __init__(
        self,
        task_text: str,
        device: str,
        gpu: str | None,
        policy: SandboxPolicy,
        limits: WorkerLimits,
        start: Callable[..., WorkerProcess] = WorkerProcess,
    ) -> None:
        self.task_text, self.device, self.gpu, self.policy, self.limits = task_text, device, gpu, policy, limits
        self.start = start  # WorkerProcess, or what a test puts in its place
        self.worker: WorkerProcess | None = None
        self.channels: WorkerChannels | None = None
        self.hello_frame: dict[str, Any] | None = None  # the reference's first frame, read once per worker
        self.lent: LentReference | None = None
        self.started = 0  # reference workers started for the group
        self.lends = 0  # judgments that got the group's reference
        self.wiped_bytes = 0  # zeros written over the group's candidate channels, over all lends
        self.retired: list[str] = []  # why each reference before the current one was not lent again
        self.first_load: dict[str, Any] | None = None  # how the reference's first fresh load described the task
        self.first_load_worker = 0  # of which reference started (`started`)

    @property
    def kind(self) -> tuple[Any, ...]:
        """What a pair's start depends on (as spare pairs key it): a judgment of another kind cannot borrow it."""
        return (self.device, self.gpu, self.policy, self.limits)

    def lend(self, candidate_text: str, prepare_triton: bool = False) -> dict[str, WorkerProcess]:
        """The group's reference, lent, and a fresh candidate worker that reads and writes the group's candidate
        channels, wiped first."""
        if self.lent is not None:
            raise RuntimeError("the group's reference is lent to a judgment already")
        if self.worker is not None and (self.worker.dead or self.worker.proc.poll() is not None):
            self.retire("it ended while it waited for the next judgment")
        try:
            if self.channels is not None:
                wiped = wipe((self.channels.inbox, self.channels.outbox))
                if wiped is None:
                    self.retire("the last candidate left more in its channels than is wiped")
                self.wiped_bytes += wiped or 0
            if self.worker is None:
                self.channels = WorkerChannels("candidate", self.limits.max_message_bytes)
                self.worker = self.start(
                    "reference",
                    self.device,
                    self.task_text,
                    self.limits,
                    policy=self.policy,
                    gpu=self.gpu,
                    peer=self.channels,
                )
                self.started += 1
            assert self.channels is not None
            ready = {PREPARE_TRITON_ENV: "1"} if prepare_triton else {}
            candidate = self.start(
                "candidate",
                self.device,
                candidate_text,
                self.limits,
                self.policy,
                self.gpu,
                channels=self.channels.duplicate(),
                extra_env=ready,
            )
        except SandboxUnavailable as exc:  # as workers.start_pair says it
            self.retire("a worker could not be sandboxed")
            raise JudgeFailed(f"a worker cannot be sandboxed as required: {exc}") from None
        self.lent = LentReference(self, self.worker)
        self.lends += 1
        return {"reference": self.lent, "candidate": candidate}  # type: ignore[dict-item]

    def check_fresh(self, loaded: Any) -> str | None:
        """A judgment's first load of the reference (protocol.Load's `fresh`) described the task as the group's first
        did: where it did not, what differs (the worker kept something of an earlier judgment), and the reference is
        retired once given back."""
        described = {name: getattr(loaded, name, None) for name in TASK_DESCRIPTION}
        if self.first_load is None or self.first_load_worker != self.started:
            self.first_load, self.first_load_worker = described, self.started
            return None
        differs = [name for name in TASK_DESCRIPTION if described[name] != self.first_load[name]]
        if differs and self.lent is not None:
            self.lent.broke_off = True
        return ", ".join(differs) or None

    def give_back(self, lent: LentReference) -> None:
        """The judgment is done with the reference: kept for the next lend where it is whole, else retired."""
        if lent is not self.lent:
            return
        self.lent = None
        worker = self.worker
        if worker is None:
            return
        why = None
        if lent.broke_off:
            why = "a judgment ended in the middle of one of its requests"
        elif worker.dead or worker.proc.poll() is not None:
            why = "it is no longer running"
        elif time.monotonic() - worker.started_at > self.limits.lifetime_s / 2:
            why = "it has lived half its lifetime"
        if why is not None:
            self.retire(why)

    def retire(self, why: str | None) -> None:
        """Close the reference and its channels, for `why` (None: the group is judged); the next lend starts
        another."""
        worker, channels, self.worker, self.channels, self.hello_frame = self.worker, self.channels, None, None, None
        if worker is not None:
            if why is not None:
                self.retired.append(why)
            worker.ask_exit()
            worker.close()
        if channels is not None:
            channels.close()

    def close(self) -> None:
        """End the group's reference (once the group is judged)."""
        self.retire(None)

    def __enter__(self) -> SharedReference:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LentReference:
    """The group's reference worker as one judgment holds it: everything is the worker's, but for its hello (read
    once per worker, and given again to each judgment that borrows it), its end and its close (the worker is given
    back, and lives on), and whether the judgment left it in the middle of a request (`broke_off`)."""

    def __init__(self, shared: SharedReference, worker: WorkerProcess) -> None:
        self._shared = shared
        self._worker = worker
        self.broke_off = False
        self.returned = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._worker, name)

    @property
    def last_clock(self) -> dict[str, float]:
        """The worker's own: the parts of its last answer as it clocked them (stages.workers.counted resets it
        before each request and reads it after)."""
        return self._worker.last_clock

    @last_clock.setter
    def last_clock(self, value: dict[str, float]) -> None:
        self._worker.last_clock = value

    def receive(self, *args: Any, **kw: Any) -> dict[str, Any]:
        """The worker's hello: read from it the first time, then the same frame for each judgment."""
        if self._shared.hello_frame is None:
            self._shared.hello_frame = self._worker.receive(*args, **kw)
        return dict(self._shared.hello_frame)

    def request(self, *args: Any, **kw: Any) -> Any:
        if self.returned:
            raise RuntimeError("the group's reference was given back")
        self.broke_off = True  # until the answer is read whole
        answer = self._worker.request(*args, **kw)
        self.broke_off = False
        return answer

    def ask_exit(self) -> None:
        """The worker lives on for the group's next judgment."""

    def end(self) -> None:
        """The worker lives on for the group's next judgment."""

    def close(self, before_removal: Callable[[Path], None] | None = None) -> None:
        if not self.returned:
            self.returned = True
            self._shared.give_back(self)

    def kill(self) -> Any:
        """A judgment that kills its workers (a batch asked to stop) ends the group's reference too."""
        self.broke_off = True
        return self._worker.kill()
