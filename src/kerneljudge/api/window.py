"""Calls gathered over a short window and answered by one: the pattern a trainer's per-sample rewards (adapters/
batching.py) and OpenRLHF's one-sample requests to a server (serve/get_reward.py) share, so that a judge that groups
one request's samples of a task judges a step's samples together."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

Part = TypeVar("Part")
Answer = TypeVar("Answer")


class Window(Generic[Part, Answer]):
    """Parts awaited on one event loop, answered together: the first to arrive opens a window of `window_s`; when it
    closes, `answer` gets every part gathered meanwhile, in order, and gives back one answer each. A failure fails
    every part of its window."""

    def __init__(self, answer: Callable[[list[Part]], Awaitable[Sequence[Answer]]], window_s: float) -> None:
        self.answer, self.window_s = answer, window_s
        self._waiting: list[tuple[Part, asyncio.Future[Answer]]] = []
        self._flushes: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak references to tasks

    async def ask(self, part: Part) -> Answer:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Answer] = loop.create_future()
        self._waiting.append((part, future))
        if len(self._waiting) == 1:
            flush = loop.create_task(self._flush_after_window())
            self._flushes.add(flush)
            flush.add_done_callback(self._flushes.discard)
        return await future

    async def _flush_after_window(self) -> None:
        await asyncio.sleep(self.window_s)
        gathered, self._waiting = self._waiting, []
        try:
            answers: Any = await self.answer([part for part, _ in gathered])
        except Exception as exc:
            for _, future in gathered:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), answer in zip(gathered, answers, strict=True):
            if not future.done():
                future.set_result(answer)
