"""`POST /get_reward`: OpenRLHF's remote reward model (api/openrlhf.py says what it posts and reads) over the
server's service. OpenRLHF's client gives up after 180 s and tries again five times whatever the answer said, so
a full queue is waited out here, the oldest request first, for up to ADMISSION_WAIT_S, and only then answered
429; a sample that cannot be judged scores with its reason in extra_logs rather than refusing the request.

OpenRLHF 0.11.2 posts one sample a request, and a server groups only a request's samples of one task
(`--group-size`, serve/service.py): where it groups, the requests that arrive within GATHER_S of each other are
admitted as one (`Gathered`), so that a step's samples, posted side by side, are judged as groups.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from kerneljudge.api.openrlhf import (
    NO_REWARD_VALUE,
    RewardRequest,
    RewardResponse,
    outcomes_of,
    reward_response,
    samples_of,
)
from kerneljudge.api.schema import MAX_ITEMS, Answer, Item
from kerneljudge.api.window import Window
from kerneljudge.serve.service import BadRequest, Conflict, QueueFull, Service, Ticket

logger = logging.getLogger(__name__)

# How long a request waits for room in a full queue before it is answered 429: below OpenRLHF's 180 s client
# timeout, so that the client hears a refusal (and tries again) rather than timing out on its own.
ADMISSION_WAIT_S = 150.0
ADMISSION_POLL_S = 0.05  # how often the oldest waiting request looks for room
# Where the server groups, how long the first of several /get_reward requests waits for the others to be admitted
# with it (the window verl's and verifiers' adapters gather rewards in: adapters/batching.py).
GATHER_S = 0.05


class AdmissionLine:
    """The /get_reward requests waiting for room in the service's queue, the oldest first: a request finds
    room at once, or waits in line until `deadline` (then QueueFull, 429) rather than being refused."""

    def __init__(self, service: Service, poll_s: float = ADMISSION_POLL_S) -> None:
        self.service = service
        self.poll_s = poll_s
        self._turn = asyncio.Lock()  # held by the request at the head of the line; asyncio's lock is FIFO

    async def judge(self, items: Sequence[Item], deadline: float) -> list[Answer | str]:
        """Each item's answer, or the one line of the service's refusal of it (its label names no task it can
        use); the items the service refuses together are sent again one by one, so one bad label refuses one."""
        from kerneljudge.serve.app import answer

        admitted = await self._admitted(list(items), deadline)
        tickets = {index: entry for index, entry in enumerate(admitted, start=1) if isinstance(entry, Ticket)}
        answers = await asyncio.gather(*(answer(index, ticket) for index, ticket in tickets.items()))
        by_index = dict(zip(tickets, answers, strict=True))
        return [by_index[index] if isinstance(entry, Ticket) else entry for index, entry in enumerate(admitted, 1)]

    async def _admitted(self, items: list[Item], deadline: float) -> list[Ticket | str]:
        size = self.service.capacity or len(items)  # a part the queue can ever hold
        out: list[Ticket | str] = []
        for start in range(0, len(items), size):
            part = items[start : start + size]
            try:
                out += await self._admit(part, deadline)
            except (BadRequest, Conflict) as exc:
                if len(part) > 1:
                    for item in part:
                        out += await self._admitted([item], deadline)
                else:
                    logger.warning("get_reward: scored %s unjudged, refused: %s", NO_REWARD_VALUE, exc)
                    out.append(str(exc))
        return out

    async def _admit(self, part: list[Item], deadline: float) -> list[Ticket]:
        """The part's tickets once the service admits it. The service alone decides: a part whose items are in
        flight or stored needs no room, so it is tried at once unless others wait, and once at the head of the
        line; after that, each `poll_s`, only when a judgment's place has come free (a try parses and looks up
        every item: a wait of minutes must not repeat that thousands of times). Tries that find no room are no
        refusal in the metrics; the 429 past `deadline` is."""
        if not self._turn.locked():  # no one waiting
            try:
                return await run_in_threadpool(self.service.submit, part, False)
            except QueueFull:
                pass
        try:
            await asyncio.wait_for(self._turn.acquire(), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise self._no_room() from None
        try:
            first = True
            while True:
                if first or self._room() > 0:
                    try:
                        return await run_in_threadpool(self.service.submit, part, False)
                    except QueueFull:
                        pass
                first = False
                if time.monotonic() >= deadline:
                    raise self._no_room()
                await asyncio.sleep(self.poll_s)
        finally:
            self._turn.release()

    def _room(self) -> int:
        """Judgments the queue could admit now, as the service's figures say (it holds at most `capacity` in
        flight, judging or waiting); only a hint of when to try: the service decides."""
        if self.service.capacity is None:
            return MAX_ITEMS
        return self.service.capacity - self.service.backend.busy - self.service.waiting()

    def _no_room(self) -> QueueFull:
        self.service.metrics.refused("queue_full")
        return QueueFull(
            f"no room in the queue within {ADMISSION_WAIT_S:g} s; the next try waits again (the server needs "
            "more lanes for this load: --jobs, --gpus)",
            retry_after_s=1,
        )


class Gathered:
    """/get_reward requests admitted together (api/window.py): the first opens a window of `window_s`; when it closes,
    every request's items that came meanwhile go to the admission line as one (`AdmissionLine.judge`), and each
    request gets its own items' answers, in its order. A failure (a full queue past the wait) fails every request
    gathered with it, as it would have failed each. A window of 0 admits each request alone."""

    def __init__(self, line: AdmissionLine, window_s: float) -> None:
        self.line, self.window_s = line, window_s
        self._window: Window[list[Item], list[Answer | str]] = Window(self._admit_all, window_s)

    async def judge(self, items: Sequence[Item]) -> list[Answer | str]:
        if self.window_s <= 0:
            return await self.line.judge(items, time.monotonic() + ADMISSION_WAIT_S)
        return await self._window.ask(list(items))

    async def _admit_all(self, parts: list[list[Item]]) -> list[list[Answer | str]]:
        answers = await self.line.judge([item for part in parts for item in part], time.monotonic() + ADMISSION_WAIT_S)
        split, at = [], 0
        for part in parts:
            split.append(answers[at : at + len(part)])
            at += len(part)
        return split


def reward_router(service: Service) -> APIRouter:
    """`POST /get_reward` over the server's service (mounted by `serve.app.create_app`)."""
    from kerneljudge.serve.app import ERRORS

    router = APIRouter()
    gathered = Gathered(AdmissionLine(service), GATHER_S if (service.group_size or 1) > 1 else 0.0)

    @router.post("/get_reward", response_model=RewardResponse, responses=ERRORS, tags=["adapters"])
    async def get_reward(body: RewardRequest) -> RewardResponse:
        """OpenRLHF's remote reward model: a reward per query, judged against its label's task; a full queue
        is waited out, and a sample that cannot be judged scores with its reason in extra_logs."""
        samples = await run_in_threadpool(samples_of, body.query, body.prompts, body.labels)
        items = [sample.item for sample in samples if sample.item is not None]
        judged = await gathered.judge(items) if items else []
        return reward_response(outcomes_of(samples, judged), samples)

    return router
