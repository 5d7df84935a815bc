"""The judge a trainer adapter reaches: the server at an explicit url or `KJ_JUDGE_URL` (`RemoteJudge`), else
`LocalJudge`, the same `Service` the server runs, in this process and without HTTP, with no bound on its queue
(the caller's own items are all it holds), storing records in `KJ_JUDGE_STORE`
(default ~/.cache/kerneljudge/adapters.db) and grouping a call's items of one task by `KJ_JUDGE_GROUP_SIZE`."""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from kerneljudge.api.catalog import TaskCatalog
from kerneljudge.api.outcomes import Judge
from kerneljudge.api.schema import Answer
from kerneljudge.client.remote import ItemLike, RemoteJudge, as_items
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.results.store import Store
from kerneljudge.runs.backends import Backend

URL_ENV = "KJ_JUDGE_URL"
STORE_ENV = "KJ_JUDGE_STORE"
GROUP_SIZE_ENV = "KJ_JUDGE_GROUP_SIZE"  # the local judge's group size (LocalJudge's `group_size`); unset: none
DEFAULT_STORE = Path.home() / ".cache" / "kerneljudge" / "adapters.db"


class LocalJudge:
    """Judges in this process through `backend` (which it owns) into the store at `store` (a path or an open
    `Store`, of which the path is taken). `config`: the judge configuration items' options start from.
    `group_size`: a call's items of one task judged as groups of at most that many (`Service`'s)."""

    def __init__(
        self,
        backend: Backend,
        store: str | Path | Store,
        config: JudgeConfig | None = None,
        tasks: TaskCatalog | None = None,
        group_size: int | None = None,
    ) -> None:
        from kerneljudge.serve.service import Service

        path = store.path if isinstance(store, Store) else store
        self.service = Service(backend, path, config or JudgeConfig(), tasks, queue=None, group_size=group_size)

    def judge(self, items: Sequence[ItemLike]) -> list[Answer]:
        """The answers to `items`; a bad item raises `service.BadRequest` (or `Conflict`) before any is judged."""
        return self.service.judge(as_items(items))

    def close(self) -> None:
        self.service.close()

    def __enter__(self) -> LocalJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_judges: dict[tuple[int, str], Judge] = {}
_lock = threading.Lock()


def default_judge(url: str | None = None) -> Judge:
    """The server at `url` (or `KJ_JUDGE_URL`), else this process's local judge; one of each per process
    (a forked trainer worker makes its own: a backend's lane threads do not survive a fork)."""
    chosen = url or os.environ.get(URL_ENV) or None
    key = (os.getpid(), chosen or "local")
    with _lock:
        if key not in _judges:
            _judges[key] = RemoteJudge(chosen) if chosen else _local_judge()
        return _judges[key]


def _local_judge() -> Judge:
    from kerneljudge.runs.backends.local import LocalBackend

    store = Path(os.environ.get(STORE_ENV) or DEFAULT_STORE)
    store.parent.mkdir(parents=True, exist_ok=True)
    judge = LocalJudge(LocalBackend(), store, group_size=group_size_from_env())
    atexit.register(judge.close)
    return judge


def group_size_from_env() -> int | None:
    """`KJ_JUDGE_GROUP_SIZE` as a group size: unset or empty, None; anything but a positive integer, a one-line
    error naming the variable."""
    text = os.environ.get(GROUP_SIZE_ENV, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{GROUP_SIZE_ENV} must be a positive integer (a group's most candidates), not {text!r}")
    return int(text)
