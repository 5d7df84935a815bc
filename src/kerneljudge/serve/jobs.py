"""Asynchronous jobs: POST /v1/jobs answers at once with a job id, GET /v1/jobs/{id} says how far it got.

For judgments longer than a client's HTTP timeout. A job is the tickets of one request (service.py), held in
this process's memory: the `KEEP` most recent jobs are kept, the oldest finished ones forgotten first. A job
lost to a restart costs little: its records are in the store, and the same items sent again (the same
request ids, or the same content) are answered from it without judging again.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence

from kerneljudge.api.schema import JobAccepted, JobStatus
from kerneljudge.serve.service import NotFound, Ticket

KEEP = 10_000


class JobBook:
    """Job ids to their tickets, bounded: adding a job past `keep` forgets the oldest finished ones."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._jobs: OrderedDict[str, list[Ticket]] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, tickets: Sequence[Ticket]) -> JobAccepted:
        job_id = secrets.token_hex(16)
        with self._lock:
            self._jobs[job_id] = list(tickets)
            if len(self._jobs) > self.keep:
                finished = [key for key, held in self._jobs.items() if all(t.result.done() for t in held)]
                for key in finished[: len(self._jobs) - self.keep]:
                    del self._jobs[key]
        return JobAccepted(job_id=job_id, state=state_of(tickets), items=len(tickets))

    def status(self, job_id: str) -> JobStatus:
        with self._lock:
            tickets = self._jobs.get(job_id)
        if tickets is None:
            raise NotFound(
                f"no job {job_id!r} here (unknown, or forgotten after {self.keep} newer jobs or a restart): "
                "send its items again; judged ones are answered from the store"
            )
        state = state_of(tickets)
        done = sum(ticket.result.done() for ticket in tickets)
        if state == "failed":
            fault = next(t.result.exception() for t in tickets if t.result.done() and t.result.exception())
            error = f"the judge failed on an item: {one_line(fault)}"
            return JobStatus(job_id=job_id, state=state, items=len(tickets), done=done, error=error)
        answers = [ticket.answer() for ticket in tickets] if state == "done" else None
        return JobStatus(job_id=job_id, state=state, items=len(tickets), done=done, answers=answers)


def state_of(tickets: Sequence[Ticket]) -> str:
    """failed (an item's judgment raised), done, running (some judgment started), else pending."""
    if any(t.result.done() and t.result.exception() is not None for t in tickets):
        return "failed"
    if all(t.result.done() for t in tickets):
        return "done"
    return "running" if any(t.started for t in tickets) else "pending"


def one_line(exc: BaseException | None) -> str:
    """An exception as one line: its type and its message's first line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
