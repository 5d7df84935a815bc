"""Rewards asked one at a time, judged together: a trainer that scores each sample in its own coroutine (verl's
reward loop, verifiers' rubrics) hands the judge one request for the samples that finish together, so that a judge
that groups a request's samples of one task (`kerneljudge serve --group-size`, `KJ_JUDGE_GROUP_SIZE`) judges a
training step's samples as groups (judgment/group.py), and the wait holds one thread per request, not per sample."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from kerneljudge.api.outcomes import Judge, Outcome, score
from kerneljudge.api.schema import Options
from kerneljudge.api.window import Window


class RequestBatcher:
    """Responses awaited on one event loop, sent to `judge` together (api/window.py): the first to arrive opens a
    window of `window_s`; when it closes, everything gathered is judged in one request in a worker thread (the judge
    blocks), and each caller gets its own outcome. A request that fails fails every caller in it."""

    def __init__(self, judge: Judge, options: Options, window_s: float) -> None:
        self.judge, self.options, self.window_s = judge, options, window_s
        self._window: Window[tuple[Any, str], Outcome] = Window(self._score_all, window_s)

    async def score(self, task: Any, response: str) -> Outcome:
        return await self._window.ask((task, response))

    async def _score_all(self, batch: list[tuple[Any, str]]) -> list[Outcome]:
        tasks, responses = [task for task, _ in batch], [response for _, response in batch]
        return await asyncio.to_thread(score, self.judge, tasks, responses, self.options)


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, RequestBatcher]] = (
    weakref.WeakKeyDictionary()
)


def batcher_for(judge: Judge, options: Options, window_s: float) -> RequestBatcher:
    """The running loop's batcher for this judge, these options and this window (one per combination:
    a request carries one set of options)."""
    per_loop = _batchers.setdefault(asyncio.get_running_loop(), {})
    key = (id(judge), options.model_dump_json(), window_s)
    if key not in per_loop or per_loop[key].judge is not judge:
        per_loop[key] = RequestBatcher(judge, options, window_s)
    return per_loop[key]
