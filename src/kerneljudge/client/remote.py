"""`RemoteJudge`: the judging service over HTTP, with one method, `judge(items) -> answers`, for the trainer adapters.

- `RemoteJudge(url)`: over HTTP (httpx) to a `kerneljudge serve`. What is safe to send again is sent again, with
  the same items: a full queue (429), the server's 500/502/503/504, a dropped or reset connection, a read
  timeout. It waits as Retry-After says (seconds or an HTTP date), else a backoff doubling from 1 s to 30 s, at
  most `max_wait_s` in all; any other refusal raises `RemoteError` with the server's one line. A batch larger
  than the server admits at once (GET /healthz's `capacity`, read once) is sent in parts, side by side.

Items may be `schema.Item`s or plain dicts of the same fields; answers are `schema.Answer`s, in the items'
order. A retry of the same items (the same request ids, or the same content) is answered from the store, or
shares the judgment in flight: `RemoteJudge` gives every item without a request id one before its first try,
derived from its content and this client's own salt, so a retry never judges twice. The salt keeps another
client's id (another process, a later run against a server whose configuration or machine changed) from
meeting this one's with another content, which the server would refuse (409).
"""

from __future__ import annotations

import email.utils
import hashlib
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timezone
from typing import Any

from kerneljudge.api.schema import MAX_ITEMS, Answer, Item, JobStatus
from kerneljudge.errors import KernelJudgeError

ItemLike = Item | Mapping[str, Any]
# What may be sent again: nothing was judged twice, since the items keep their request ids and the server
# shares or stores every judgment by content (serve/service.py).
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
BACKOFF_FIRST_S = 1.0  # the first wait without a Retry-After; doubled each try up to BACKOFF_CAP_S
BACKOFF_CAP_S = 30.0
# Parts of a split batch in flight at once: enough to keep a server's lanes and queue full, few enough for
# one connection pool (httpx's default holds 100).
MAX_PARTS_IN_FLIGHT = 16


class RemoteError(KernelJudgeError):
    """The server refused a request or failed; `status` is the HTTP status (None: no answer came, the
    connection failed), the message its one line, `code` its problem's code where it gives one."""

    def __init__(self, status: int | None, message: str, code: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}" if status is not None else message)
        self.status = status
        self.code = code  # the problem's code (RFC 9457 bodies), where the server gives one


def as_items(items: Sequence[ItemLike]) -> list[Item]:
    return [item if isinstance(item, Item) else Item.model_validate(item) for item in items]


def derived_request_id(item: Item, salt: str) -> str:
    """A request id for an item sent without one: the same for the same content under the same salt."""
    content = item.model_dump_json(exclude={"request_id"})
    return "kj-" + hashlib.sha256(f"{salt}\n{content}".encode()).hexdigest()[:32]


def retry_after_s(value: str | None, now_s: float) -> float | None:
    """Retry-After's wait in seconds: delta-seconds or an HTTP date (RFC 9110, section 10.2.3), measured from
    `now_s` (Unix time); None when absent or unreadable."""
    text = (value or "").strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - now_s)


class RemoteJudge:
    """A `kerneljudge serve` at `url` (e.g. http://judge-host:8000). `client`: an httpx.Client to use
    instead of a new one (a test's FastAPI TestClient, or one with the trainer's own transport settings).
    `max_wait_s`: the most seconds one request waits between its tries in all. `sleep` and `clock` (Unix
    time, for a Retry-After date) are injected by tests."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 3600.0,
        max_wait_s: float = 600.0,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.max_wait_s = max_wait_s
        self.client = client if client is not None else httpx.Client(timeout=httpx.Timeout(timeout_s, connect=10.0))
        self._owns_client = client is None
        self._sleep = sleep
        self._clock = clock
        self._salt = secrets.token_hex(8)
        self._parts: tuple[int, int] | None = None  # (items a request, requests side by side), from /healthz
        self._parts_lock = threading.Lock()
        self._in_flight: threading.Semaphore | None = None  # the parts side by side, across this client's threads
        # A dropped or reset connection, a timeout: the request may or may not have arrived; sent again, it is
        # answered by the same judgment. A malformed URL or a proxy's refusal is not retried.
        self._retried_errors = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)

    def judge(self, items: Sequence[ItemLike]) -> list[Answer]:
        """The answers to `items`, waiting for the judgments (POST /v1/judge); a batch larger than the server
        admits at once is sent in parts, and a part it still finds too large (413) in halves."""
        given = as_items(items)
        sent = [self._identified(item) for item in given]
        size, side_by_side = self.parts()
        # A task's items side by side in the parts (the trainer's order kept within a task), so that a server that
        # groups a request's items of one task (serve --group-size) gets whole groups where they fit in a part.
        order = sorted(range(len(sent)), key=lambda i: (sent[i].task or "", sent[i].task_source or ""))
        ordered = [sent[i] for i in order]
        parts = [ordered[start : start + size] for start in range(0, len(ordered), size)] or [[]]
        if len(parts) == 1:
            in_order = self._judge_part(parts[0])
        else:
            with ThreadPoolExecutor(min(len(parts), side_by_side), thread_name_prefix="kerneljudge-part") as pool:
                in_order = [answer for part in pool.map(self._judge_part, parts) for answer in part]
        answers: list[Answer] = [in_order[place] for place in sorted(range(len(order)), key=order.__getitem__)]
        # The ids this client made up are its own business: each answer names the request id its item had.
        return [a.model_copy(update={"request_id": item.request_id}) for a, item in zip(answers, given, strict=True)]

    def submit(self, items: Sequence[ItemLike]) -> str:
        """Admit `items` as a job and return its id at once (POST /v1/jobs); `poll` it."""
        response = self._post("/v1/jobs", [self._identified(item) for item in as_items(items)])
        return str(response.json()["job_id"])

    def poll(self, job_id: str) -> JobStatus:
        """How far the job got (GET /v1/jobs/{job_id}); its answers once its state is done."""
        response = self._send("GET", f"/v1/jobs/{job_id}")
        if response.status_code != 200:
            raise refusal(response)
        return JobStatus.model_validate(response.json())

    def parts(self) -> tuple[int, int]:
        """(items a request, requests side by side): a lane's worth a request, as many side by side as the
        server's lanes and queue hold (`capacity` of GET /healthz, read once). A server that does not say,
        or says it has no bound, gets whole batches up to the wire's cap, one at a time. The parts of every
        call on this client, from any thread, share those places side by side."""
        with self._parts_lock:
            if self._parts is None:
                self._parts = self._read_parts()
                self._in_flight = threading.Semaphore(self._parts[1])
            return self._parts

    def _read_parts(self) -> tuple[int, int]:
        try:
            response = self._send("GET", "/healthz")
            health = response.json() if response.status_code == 200 else {}
        except (RemoteError, ValueError):
            health = {}
        capacity, lanes = health.get("capacity"), health.get("lanes")
        if not isinstance(capacity, int) or capacity < 1:
            return MAX_ITEMS, 1
        size = max(1, min(lanes if isinstance(lanes, int) and lanes > 0 else 1, capacity, MAX_ITEMS))
        return size, max(1, min(MAX_PARTS_IN_FLIGHT, capacity // size))

    def _judge_part(self, items: list[Item]) -> list[Answer]:
        assert self._in_flight is not None  # parts() ran first
        try:
            with self._in_flight:  # a trainer's threads (or ranks in one process) share the server's room
                response = self._post("/v1/judge", items)
        except RemoteError as exc:
            if exc.status != 413 or len(items) < 2:
                raise
            half = len(items) // 2
            return self._judge_part(items[:half]) + self._judge_part(items[half:])
        if response.status_code == 202:  # the server's deadline passed first: the judgments go on as a job
            return self._awaited(str(response.json()["job_id"]))
        return [Answer.model_validate(entry) for entry in response.json()]

    def _awaited(self, job_id: str) -> list[Answer]:
        """A job's answers, polled until it is done (every 1 s, then up to every 10 s)."""
        pause = 1.0
        while True:
            status = self.poll(job_id)
            if status.state == "done" and status.answers is not None:
                return status.answers
            if status.state == "failed":
                raise RemoteError(500, status.error or "the judge failed, no verdict", "judge_fault")
            self._sleep(pause)
            pause = min(10.0, pause * 2)

    def _identified(self, item: Item) -> Item:
        if item.request_id is not None:
            return item
        return item.model_copy(update={"request_id": derived_request_id(item, self._salt)})

    def _post(self, path: str, items: list[Item]) -> Any:
        body = [item.model_dump(mode="json", exclude_none=True) for item in items]
        response = self._send("POST", path, body)
        if response.status_code not in (200, 202):
            raise refusal(response)
        return response

    def _send(self, method: str, path: str, body: Any = None) -> Any:
        """The server's answer to one request, sent again while what came back is safe to retry; RemoteError
        once `max_wait_s` of waiting is spent."""
        waited_s, attempt = 0.0, 0
        while True:
            status = None
            try:
                response = self.client.request(method, f"{self.url}{path}", json=body)
            except self._retried_errors as exc:
                said, pause = f"{type(exc).__name__}: {str(exc) or 'no detail'}", None
            else:
                if response.status_code not in RETRIED_STATUSES:
                    return response
                status, said = response.status_code, detail(response)
                pause = retry_after_s(response.headers.get("Retry-After"), self._clock())
            attempt += 1
            if waited_s >= self.max_wait_s:
                raise RemoteError(status, f"{said} (still so after {attempt} tries and {waited_s:.0f} s of waiting)")
            pause = min(BACKOFF_CAP_S, BACKOFF_FIRST_S * 2 ** (attempt - 1)) if pause is None else pause
            pause = min(pause, self.max_wait_s - waited_s)
            self._sleep(pause)
            waited_s += pause

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> RemoteJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def refusal(response: Any) -> RemoteError:
    body = _json_object(response)
    code = body.get("code") if isinstance(body.get("code"), str) else None
    return RemoteError(response.status_code, detail(response), code)


def detail(response: Any) -> str:
    """The server's one-line reason: the body's `detail`, of an RFC 9457 problem (application/problem+json) or
    of the older `{"detail": ...}`; a problem's `title` where it has no detail; else the start of the body."""
    body = _json_object(response)
    for key in ("detail", "title"):
        if isinstance(body.get(key), str) and body[key].strip():
            return body[key]
    if body.get("detail") is not None:  # a list of validation errors, as FastAPI's default handler gives
        return str(body["detail"])[:300]
    return response.text[:300] or "no reason given"


def _json_object(response: Any) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
