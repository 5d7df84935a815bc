"""Clients of the judging service with one method, `judge(items) -> answers`, for the trainer adapters.

- `RemoteJudge(url)`: over HTTP (httpx) to a `kerneljudge serve`; a full queue (429) is waited out as its
  Retry-After says, up to `max_wait_s`; any other refusal raises `RemoteError` with the server's one line.
- `LocalJudge(backend, store)`: in this process, without HTTP: the same `Service` the server runs, with no
  bound on its queue (the caller's own items are all it holds).

Items may be `schema.Item`s or plain dicts of the same fields; answers are `schema.Answer`s, in the items'
order. A retry of the same items (the same request ids, or the same content) is answered from the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kerneljudge.backends import Backend
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import KernelJudgeError
from kerneljudge.serve.catalog import TaskCatalog
from kerneljudge.serve.schema import Answer, Item, JobStatus
from kerneljudge.store import Store

ItemLike = Item | Mapping[str, Any]


class RemoteError(KernelJudgeError):
    """The server refused a request or failed; `status` is the HTTP status, the message its one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def as_items(items: Sequence[ItemLike]) -> list[Item]:
    return [item if isinstance(item, Item) else Item.model_validate(item) for item in items]


class RemoteJudge:
    """A `kerneljudge serve` at `url` (e.g. http://judge-host:8000). `client`: an httpx.Client to use
    instead of a new one (a test's FastAPI TestClient, or one with the trainer's own transport settings)."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 3600.0,
        max_wait_s: float = 600.0,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.max_wait_s = max_wait_s
        self.client = client if client is not None else httpx.Client(timeout=httpx.Timeout(timeout_s, connect=10.0))
        self._owns_client = client is None
        self._sleep = sleep

    def judge(self, items: Sequence[ItemLike]) -> list[Answer]:
        """The answers to `items`, waiting for the judgments (POST /v1/judge)."""
        response = self._post("/v1/judge", as_items(items))
        return [Answer.model_validate(entry) for entry in response.json()]

    def submit(self, items: Sequence[ItemLike]) -> str:
        """Admit `items` as a job and return its id at once (POST /v1/jobs); `poll` it."""
        return str(self._post("/v1/jobs", as_items(items)).json()["job_id"])

    def poll(self, job_id: str) -> JobStatus:
        """How far the job got (GET /v1/jobs/{job_id}); its answers once its state is done."""
        response = self.client.get(f"{self.url}/v1/jobs/{job_id}")
        if response.status_code != 200:
            raise RemoteError(response.status_code, detail(response))
        return JobStatus.model_validate(response.json())

    def _post(self, path: str, items: list[Item]) -> Any:
        body = [item.model_dump(mode="json", exclude_none=True) for item in items]
        waited_s = 0.0
        while True:
            response = self.client.post(f"{self.url}{path}", json=body)
            if response.status_code == 429 and waited_s < self.max_wait_s:
                pause = min(float(response.headers.get("Retry-After", "5")), self.max_wait_s - waited_s)
                self._sleep(pause)
                waited_s += pause
                continue
            if response.status_code not in (200, 202):
                raise RemoteError(response.status_code, detail(response))
            return response

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> RemoteJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalJudge:
    """Judges in this process through `backend` (which it owns) into the store at `store` (a path or an open
    `Store`, of which the path is taken). `config`: the judge configuration items' options start from."""

    def __init__(
        self,
        backend: Backend,
        store: str | Path | Store,
        config: JudgeConfig | None = None,
        tasks: TaskCatalog | None = None,
    ) -> None:
        from kerneljudge.serve.service import Service

        path = store.path if isinstance(store, Store) else store
        self.service = Service(backend, path, config or JudgeConfig(), tasks, queue=None)

    def judge(self, items: Sequence[ItemLike]) -> list[Answer]:
        """The answers to `items`; a bad item raises `service.BadRequest` (or `Conflict`) before any is judged."""
        return self.service.judge(as_items(items))

    def close(self) -> None:
        self.service.close()

    def __enter__(self) -> LocalJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def detail(response: Any) -> str:
    """The server's one-line reason, or the start of whatever it sent."""
    try:
        return str(response.json()["detail"])
    except Exception:
        return response.text[:300] or "no reason given"
