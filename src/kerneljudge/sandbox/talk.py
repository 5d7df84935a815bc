"""Talking to one worker: a request written to its pipe in the wire format, the response read back within a
deadline, and the tensors both name checked and read in its shared-memory channels (protocol/channel.py); the
typed failures a worker's answer can end in.

`WorkerTalk` is mixed into `WorkerProcess` (sandbox/process.py), which holds the pipes, the channels and the
limits; a worker that fails to answer is killed, and its end described, by sandbox/ending.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from kerneljudge import protocol
from kerneljudge.protocol import channel, wire


class WorkerFailure(Exception):
    """The worker could not answer: it timed out, died, or broke the protocol."""

    kind = "crash"

    def __init__(self, message: str, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class WorkerTimeout(WorkerFailure):
    kind = "timeout"


class WorkerCrashed(WorkerFailure):
    kind = "crash"


class WorkerProtocolError(WorkerFailure):
    kind = "crash"


class WorkerOversized(WorkerFailure):
    """The worker announced a message larger than the output it could legitimately send."""

    kind = "shape_mismatch"


class WorkerChannels:
    """The parent's read-write endpoints of one worker's two channels, `<role>_in` and `<role>_out`
    (protocol/channel.py); a reference worker is also handed the candidate's, as its peer."""

    def __init__(self, role: str, capacity_bytes: int) -> None:
        self.role = role
        self.inbox = channel.create(f"{role}_in", capacity_bytes)
        self.outbox = channel.create(f"{role}_out", capacity_bytes)
        self.access = channel.Channels([self.inbox, self.outbox])

    def close(self) -> None:
        self.access.close()

    def duplicate(self) -> WorkerChannels:
        """The same two channels through descriptors of their own, closed with the copy and not with these:
        the view of the candidate's channels that its sanitized workers get (sanitize.py)."""
        copy = object.__new__(WorkerChannels)
        copy.role = self.role
        copy.inbox, copy.outbox = (
            channel.Endpoint(e.name, os.dup(e.fd), e.writable, e.capacity_bytes) for e in (self.inbox, self.outbox)
        )
        copy.access = channel.Channels([copy.inbox, copy.outbox])
        return copy


CLOCK_PARTS = 8  # a worker's report of where a request's time went: at most this many parts, known names only
CLOCK_NAMES = frozenset(
    {
        "read",
        "write",
        "inputs",
        "place",
        "reference",
        "kept",
        "compare",
        "checks",
        "task_check",
        "call",
        "evidence",
        "task",
        "import",
        "build",
    }
)


def clock_parts(reported: Any) -> dict[str, float]:
    """The parts of a round trip as the worker clocked them (worker/base.py), kept only where they are plain
    seconds with a known name: a figure for where the time went, never evidence (a candidate's worker could
    report anything)."""
    if not isinstance(reported, dict) or len(reported) > CLOCK_PARTS:
        return {}
    return {
        k: float(v) for k, v in reported.items() if k in CLOCK_NAMES and type(v) in (int, float) and 0.0 <= v < 86400.0
    }


class WorkerTalk:
    """The requests and responses of a `WorkerProcess`; every way an answer fails raises a `WorkerFailure`."""

    def has_answered(self) -> bool:
        """Whether something waits to be read from the worker (a started worker's hello) or its pipe has
        closed; never blocks."""
        return wire.ready(self._resp_r, 0)

    def receive(self, timeout_s: float | None = None, deadline: float | None = None) -> dict[str, Any]:
        deadline = self._deadline(timeout_s) if deadline is None else deadline
        try:
            return wire.read_frame(self._resp_r, deadline)
        except wire.PeerTimeout:
            self.kill()
            raise WorkerTimeout(f"the {self.role} worker gave no answer within its time limit") from None
        except wire.FrameTooLarge as exc:
            self.kill()
            raise WorkerOversized(f"the {self.role} worker sent an oversized message: {exc}") from None
        except wire.PeerClosed:
            returncode, by_itself = self._ended()
            raise WorkerCrashed(self._died(returncode, by_itself), returncode) from None
        except wire.WireError as exc:
            returncode = self.kill()
            raise WorkerProtocolError(f"the {self.role} worker broke the protocol: {exc}", returncode) from None

    def request(
        self,
        request: protocol.Request,
        values: Any = None,
        max_bytes: int | None = None,
        timeout_s: float | None = None,
        placed: tuple[Any, dict[str, Any]] | None = None,
        fetch: tuple[str, ...] = ("values", "inputs", "init_inputs", "captured"),
        interim: Callable[[protocol.Interim], protocol.Request | None] | None = None,
    ) -> tuple[protocol.Answer, Any]:
        """Send one request (kerneljudge.protocol) and return its answer, decoded (protocol/responses.py), and the
        values it names under `fetch`, read from the worker's channel (at most `max_bytes` of tensors, else
        WorkerOversized).

        `values` are written to the worker's inbox; `placed` is (tree, descriptions) of values already
        there (a trial's inputs the reference worker wrote for the candidate). `interim` answers each frame
        the worker sends within the request (protocol.INTERIM) with a request of its own, or with None where
        the frame is out of turn (a protocol error); without it such a frame is one. The request's time limit
        covers its interim frames.
        """
        inbox = self.channels.inbox.name
        tree, described = placed if placed is not None else self.channels.access.put(inbox, values or [])
        deadline = self._deadline(timeout_s)
        self.asked = True
        self._send({**request.header(), "args": tree, "tensors": described}, deadline)
        answer = self.answer(request, deadline, interim is not None)
        while isinstance(answer, protocol.Interim) and interim is not None:
            reply = interim(answer)
            if reply is None:
                self.kill()
                raise WorkerProtocolError(f"the {self.role} worker broke protocol: {answer.kind!r} out of turn")
            self._send(reply.header(), deadline)
            answer = self.answer(request, deadline, True)
        keys = [k for k in fetch if getattr(answer, k, None) is not None]
        self.described(answer, keys, max_bytes)
        try:
            unpacked = {k: self.channels.access.get(getattr(answer, k), answer.tensors, "cpu") for k in keys}
        except (wire.WireError, channel.ChannelError) as exc:
            self.kill()
            raise WorkerProtocolError(f"the {self.role} worker sent malformed values: {exc}") from None
        return answer, unpacked

    def answer(self, request: protocol.Request, deadline: float, interim: bool) -> protocol.Answer:
        """The worker's next frame within `request`, decoded as an answer to it (with `interim`, a frame sent
        within it may be one); a frame that answers no such way breaks the protocol, and the worker is killed.
        The clock it reports is kept first (`last_clock`), whatever the frame."""
        frame = self.receive(deadline=deadline)
        self.last_clock = clock_parts(protocol.clock_report(frame))
        try:
            return protocol.decode_answer(request, frame, interim=interim)
        except protocol.ProtocolError as exc:
            self.kill()
            raise WorkerProtocolError(f"the {self.role} worker broke protocol: {exc}") from None

    def _send(self, frame: dict[str, Any], deadline: float) -> None:
        """Write one frame to the worker's request pipe by `deadline`."""
        try:
            wire.write_frame(self._req_w, frame, deadline)
        except wire.PeerTimeout:
            self.kill()
            raise WorkerTimeout(f"the {self.role} worker stopped reading its requests") from None
        except wire.WireError:
            returncode, by_itself = self._ended()
            raise WorkerCrashed(self._died(returncode, by_itself), returncode) from None

    def described(self, answer: protocol.Answer, keys: list[str], max_bytes: int | None = None) -> int:
        """Check that the tensors the answer names under `keys` (its value trees) lie in this worker's outbox and
        add up to at most `max_bytes`; their byte count. A worker that breaks this is killed (WorkerOversized, or a
        protocol error)."""
        descriptions = answer.tensors or {}
        try:
            trees = [getattr(answer, k, None) for k in keys]
            names = set().union(*(wire.tensor_names(tree) for tree in trees if tree is not None))
            if names - set(descriptions):
                raise channel.ChannelError("a value refers to an undescribed tensor")
            total = 0
            for name in names:
                if descriptions[name].get("channel") != self.channels.outbox.name:
                    raise channel.ChannelError(f"tensor {name!r} does not lie in {self.channels.outbox.name}")
                total += self.channels.access.check(descriptions[name])[4]
        except (channel.ChannelError, AttributeError) as exc:
            self.kill()
            raise WorkerProtocolError(f"the {self.role} worker described its tensors wrongly: {exc}") from None
        if max_bytes is not None and total > max_bytes:
            self.kill()
            raise WorkerOversized(
                f"the {self.role} worker sent an oversized message: {total} bytes of tensors, "
                f"where at most {max_bytes} could be legitimate"
            )
        return total

    def _deadline(self, timeout_s: float | None) -> float:
        now = time.monotonic()
        step = timeout_s if timeout_s is not None else self.limits.step_timeout_s
        return min(now + step, self.started_at + self.limits.lifetime_s)
