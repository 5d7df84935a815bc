"""The judging service behind `kerneljudge serve`: admission, idempotency, backpressure, over any `Backend`.

Every item becomes a `Ticket` on a judgment's record, from one of three places, looked up in this order
under one lock:

1. a judgment of the same content already in flight (`Flight`): shared, not judged twice;
2. the store (kerneljudge/serve/ledger.py): a valid record of the same task, candidate, configuration and
   machine, whoever judged it (a retry, a duplicate, `kerneljudge batch`); an invalid one, the judge's own
   fault, is judged again;
3. a new judgment, submitted to the backend, if there is room: at most `lanes + queue` judgments are in
   flight; a request that needs more is refused whole (`QueueFull`, HTTP 429 with Retry-After) before any
   of it is submitted, so nothing piles up. A request that could never fit is `TooLarge` (413).

The content is what `kerneljudge batch` keys a record by: the task's and the candidate's hashes (the code
judged, after extraction from a model's response), the configuration's digest and this machine's
environment digest. A request id is remembered with that content; reused for another content it is
refused (`Conflict`, 409). The service runs only `kerneljudge.judgment.pipeline.judge` through its backend: the
candidate stays in the sandboxed workers, and the server reads it as text.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from kerneljudge.api.catalog import TaskCatalog
from kerneljudge.api.schema import Answer, Health, Item
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import KernelJudgeError, UsageError
from kerneljudge.results.store import StoreKey, config_digest
from kerneljudge.results.verdict import Record
from kerneljudge.runs.backends import Backend, GroupJob, Job
from kerneljudge.serve.answers import answer_for
from kerneljudge.serve.ledger import Ledger, LedgerSession, content_digest, record_id
from kerneljudge.serve.metrics import ServeMetrics

logger = logging.getLogger(__name__)

DEFAULT_RETRY_S = 10.0  # Retry-After before any judgment has finished
NAME = re.compile(r"^[\w.-]{1,100}$")


class ServeError(KernelJudgeError):
    """A request the service does not judge; `http_status` is its answer's status, `code` its problem's kind
    (serve/problems.py, which a test keeps in step with these)."""

    http_status = 500
    code = "internal"


class BadRequest(ServeError):
    http_status = 400
    code = "bad_item"


class UnknownTask(BadRequest):
    """An item names a task id this server does not know."""

    code = "unknown_task"


class NotFound(ServeError):
    http_status = 404
    code = "not_found"


class Conflict(ServeError):
    http_status = 409
    code = "conflict"


class TooLarge(ServeError):
    http_status = 413
    code = "too_large"


class QueueFull(ServeError):
    http_status = 429
    code = "queue_full"

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Unavailable(ServeError):
    http_status = 503
    code = "shutting_down"


@dataclass
class Flight:
    """One judgment in flight, shared by every item that asks for its content."""

    predicted: StoreKey
    backend: Future[Record]
    admitted: float
    done: Future[tuple[Record, str]] = field(default_factory=Future)  # the record and its record id


@dataclass(frozen=True)
class Ticket:
    """One item's claim on a record; `answer()` waits for it."""

    request_id: str | None
    reward_spec: str
    result: Future[tuple[Record, str]]
    flight: Flight | None = None  # None: answered from the store

    @property
    def started(self) -> bool:
        return self.flight is None or self.flight.backend.running() or self.flight.backend.done()

    def answer(self, timeout_s: float | None = None) -> Answer:
        record, rid = self.result.result(timeout_s)
        return answer_for(record, rid, self.request_id, self.reward_spec)


class Service:
    """Judges items through `backend` (which it owns: `close()` closes it) into the store at `store`.

    `config`: the server's judge configuration; an item's options change its mode, policy and timing.
    `queue`: judgments that may wait for a lane beyond those the lanes run (None: no bound, for in-process
    use). `environment`: the environment digest of the machines the backend judges on; None asks the backend
    (`Backend.machine_environments`). `group_size`: a request's new judgments of one task (and configuration) are
    judged as groups of at most that many (judgment/group.py: one hidden plan and one reference worker per
    group; `Backend.submit_group`); None or 1: each alone.
    """

    def __init__(
        self,
        backend: Backend,
        store: str | Path,
        config: JudgeConfig,
        tasks: TaskCatalog | None = None,
        queue: int | None = 64,
        environment: str | None = None,
        group_size: int | None = None,
    ) -> None:
        from kerneljudge.results.store import environment_digest

        if queue is not None and queue < 0:
            raise UsageError(f"--queue must be 0 or more, got {queue}")
        if group_size is not None and group_size < 1:
            raise UsageError(f"--group-size must be 1 or more, got {group_size}")
        self.group_size = group_size
        self.backend = backend
        self.config = config
        self.tasks = tasks or TaskCatalog()
        self.capacity = None if queue is None else backend.lanes + queue
        self.ledger = Ledger(store)
        self.environment = environment or environment_digest(backend.machine_environments(config)[0])
        self.metrics = ServeMetrics(lambda: backend.lanes, lambda: backend.busy, self.waiting)
        self._flights: dict[str, Flight] = {}
        self._lock = threading.RLock()  # a backend may finish a job inside submit(): _finish runs there
        self._closed = False
        self._lanes_seen = backend.lanes > 0  # tells "starting" (no lane up yet) from "no_lanes" (all lost)

    def waiting(self) -> int:
        """Judgments admitted that no lane has started."""
        with self._lock:
            return sum(not flight.backend.running() and not flight.backend.done() for flight in self._flights.values())

    def health(self) -> Health:
        """Readiness: `ok` while a lane can take a judgment; `starting` before the backend's first lane is up,
        `no_lanes` once every lane is lost (a Ray cluster's actors), `stopping` once `close()` began."""
        from kerneljudge import __version__

        lanes = self.backend.lanes
        self._lanes_seen = self._lanes_seen or lanes > 0
        if self._closed:
            status = "stopping"
        elif lanes == 0:
            status = "no_lanes" if self._lanes_seen else "starting"
        else:
            status = "ok"
        return Health(
            status=status,
            version=__version__,
            lanes=lanes,
            busy=self.backend.busy,
            waiting=self.waiting(),
            capacity=self.capacity,
        )

    def judge(self, items: Sequence[Item], timeout_s: float | None = None) -> list[Answer]:
        """Every item's answer, in order, waiting for the judgments (in-process use: `LocalJudge`)."""
        return [ticket.answer(timeout_s) for ticket in self.submit(items)]

    def record(self, rid: str) -> Record:
        with self.ledger.session() as ledger:
            record = ledger.record(rid)
        if record is None:
            raise NotFound(f"no record {rid!r} in this server's store")
        return record

    def submit(self, items: Sequence[Item], count_refusal: bool = True) -> list[Ticket]:
        """A ticket per item; raises before anything is submitted if any item is refused. `count_refusal`: a
        full queue counts in the metrics as a refusal (a caller that waits and tries again says False)."""
        if not items:
            raise BadRequest("no items: send one item or a non-empty list of them")
        jobs = [self._job(index, item) for index, item in enumerate(items, start=1)]
        with self._lock, self.ledger.session() as ledger:
            if self._closed:
                raise Unavailable("the server is shutting down; retry on another server or after its restart")
            self._check_request_ids(ledger, items, jobs)
            found: list[tuple[Future[tuple[Record, str]], Flight | None] | str] = []  # ready, or a digest to judge
            sources: list[str] = []
            new: dict[str, tuple[Job, StoreKey]] = {}
            for job, predicted in jobs:
                digest = content_digest(predicted)
                flight = self._flights.get(digest)
                record = None if flight is not None or digest in new else ledger.lookup(predicted)
                if flight is not None:
                    found.append((flight.done, flight))
                    sources.append("shared")
                elif record is not None and record.valid:
                    stored: Future[tuple[Record, str]] = Future()
                    stored.set_result((record, record_id_of(record)))
                    found.append((stored, None))
                    sources.append("store")
                else:
                    sources.append("shared" if digest in new else "judged")
                    new.setdefault(digest, (job, predicted))
                    found.append(digest)
            self._admit(len(new), count_refusal)
            launched: dict[str, Flight] = {}
            for group in self._groups(new):
                launched.update(self._launch(group))
            for item, (_, predicted) in zip(items, jobs, strict=True):
                if item.request_id is not None:
                    ledger.claim_request(item.request_id, content_digest(predicted))
        for source in sources:
            self.metrics.answered(source)
        tickets = []
        for item, entry in zip(items, found, strict=True):
            future, flight = (launched[entry].done, launched[entry]) if isinstance(entry, str) else entry
            tickets.append(Ticket(item.request_id, item.options.reward_spec, future, flight))
        return tickets

    def _job(self, index: int, item: Item) -> tuple[Job, StoreKey]:
        """The job an item asks for and the store key its record is predicted to have."""
        from kerneljudge.sources.candidate import parse_candidate
        from kerneljudge.tasks import gpumode

        options = {"mode": item.options.mode, "policy": item.options.policy, "timing": item.options.timing}
        name = item.request_id if item.request_id and NAME.match(item.request_id) else "candidate"
        try:
            task = self.tasks.resolve(item.task, item.task_source)
        except UsageError as exc:  # an id that resolves to nothing is unknown; a text that does not parse, bad
            refused = BadRequest if item.task is None else UnknownTask
            raise refused(f"item {index}: {exc}") from None
        try:
            candidate = gpumode.adapt_candidate(task, parse_candidate(item.candidate, name))
            config = self.config.with_(**{key: value for key, value in options.items() if value is not None})
        except UsageError as exc:
            raise BadRequest(f"item {index}: {exc}") from None
        predicted = StoreKey(task.sha256, candidate.sha256, config_digest(config.to_dict()), self.environment)
        return Job(task, candidate, config), predicted

    def _check_request_ids(
        self, ledger: LedgerSession, items: Sequence[Item], jobs: Sequence[tuple[Job, StoreKey]]
    ) -> None:
        seen: dict[str, str] = {}
        for index, (item, (_, predicted)) in enumerate(zip(items, jobs, strict=True), start=1):
            if item.request_id is None:
                continue
            content = content_digest(predicted)
            first = seen.setdefault(item.request_id, ledger.requested(item.request_id) or content)
            if first != content:
                raise Conflict(
                    f"item {index}: request_id {item.request_id!r} was sent before with another task, candidate or "
                    "options; a retry must send the same item, a new item a new request_id"
                )

    def _admit(self, count: int, count_refusal: bool = True) -> None:
        if self.capacity is None or count == 0:
            return
        if count > self.capacity:
            self.metrics.refused("too_large")
            raise TooLarge(
                f"this request needs {count} new judgments; this server admits at most {self.capacity} at a time: "
                "send smaller batches"
            )
        if len(self._flights) + count > self.capacity:
            if count_refusal:
                self.metrics.refused("queue_full")
            raise QueueFull(
                f"the queue is full ({len(self._flights)} judgments in flight, at most {self.capacity}); "
                "retry after the Retry-After seconds",
                self._retry_after_s(),
            )

    def _retry_after_s(self) -> int:
        """About when a lane frees: a typical judgment's time over the lanes, 1 s to 5 min."""
        typical = self.metrics.quantile(0.5)
        seconds = DEFAULT_RETRY_S if math.isnan(typical) else typical / max(self.backend.lanes, 1)
        return int(min(300, max(1, math.ceil(seconds))))

    def _groups(self, new: dict[str, tuple[Job, StoreKey]]) -> list[list[tuple[str, Job, StoreKey]]]:
        """The new judgments of a request as the backend is given them: each alone, or with `group_size`, those of
        one task and configuration together, in groups of at most that many, in the request's order."""
        size = self.group_size or 1
        groups: list[list[tuple[str, Job, StoreKey]]] = []
        open_groups: dict[tuple[str, str], list[tuple[str, Job, StoreKey]]] = {}
        for digest, (job, predicted) in new.items():
            kind = (predicted.task_sha256, predicted.config_digest)
            group = open_groups.get(kind)
            if group is None or len(group) >= size:
                group = open_groups[kind] = []
                groups.append(group)
            group.append((digest, job, predicted))
        return groups

    def _launch(self, group: list[tuple[str, Job, StoreKey]]) -> dict[str, Flight]:
        """Submit one judgment, or a group of one task's (`Backend.submit_group`); their flights by digest."""
        try:
            if len(group) == 1:
                futures = [self.backend.submit(group[0][1])]
            else:
                first = group[0][1]
                candidates = tuple(job.candidate for _, job, _ in group)
                futures = self.backend.submit_group(GroupJob(first.task, candidates, first.config))
        except RuntimeError as exc:  # the backend is closed
            raise Unavailable(f"the judging backend refused the job: {exc}") from None
        flights = {}
        for (digest, _, predicted), backend_future in zip(group, futures, strict=True):
            flight = flights[digest] = Flight(predicted, backend_future, time.monotonic())
            self._flights[digest] = flight
            backend_future.add_done_callback(lambda future, digest=digest, flight=flight: self._finish(digest, flight))
        return flights

    def _finish(self, digest: str, flight: Flight) -> None:
        """Store the record before the flight is forgotten, so a duplicate finds one or the other."""
        seconds = time.monotonic() - flight.admitted
        try:
            record = flight.backend.result()
            with self.ledger.session() as ledger:
                rid = ledger.keep(record, flight.predicted)
        except BaseException as exc:  # the judge's or the store's fault, never the candidate's
            # Logged here, once per judgment, however many items share it (their 500s or failed jobs say so).
            logger.error(
                "the judge failed on task %s, candidate %s after %.1f s: no record",
                flight.predicted.task_sha256[:12],
                flight.predicted.candidate_sha256[:12],
                seconds,
                exc_info=exc,
            )
            with self._lock:
                self._flights.pop(digest, None)
            self.metrics.judged("judge_fault", seconds)
            flight.done.set_exception(exc)
            return
        with self._lock:
            self._flights.pop(digest, None)
        self.metrics.judged(record.status, seconds)
        logger.info("judged %s: %s in %.1f s (%s)", rid, record.status, seconds, record.task.name)
        flight.done.set_result((record, rid))

    def close(self) -> None:
        """Refuse new requests, let the judgments in flight finish and be stored, and close the backend."""
        with self._lock:
            self._closed = True
        self.backend.close()


def record_id_of(record: Record) -> str:
    from kerneljudge.results.store import key_of

    return record_id(key_of(record))
