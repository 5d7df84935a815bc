"""`POST /get_reward`: OpenRLHF's remote reward model (api/openrlhf.py says what it posts and reads) over the
server's service. OpenRLHF's client gives up after 180 s and tries again five times whatever the answer said, so
a full queue is waited out here, the oldest request first, for up to ADMISSION_WAIT_S, and only then answered
429; a sample that cannot be judged scores with its reason in extra_logs rather than refusing the request.
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
from kerneljudge.serve.service import BadRequest, Conflict, QueueFull, Service, Ticket

logger = logging.getLogger(__name__)

# How long a request waits for room in a full queue before it is answered 429: below OpenRLHF's 180 s client
# timeout, so that the client hears a refusal (and tries again) rather than timing out on its own.
ADMISSION_WAIT_S = 150.0
ADMISSION_POLL_S = 0.05  # how often the oldest waiting request looks for room


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


def reward_router(service: Service) -> APIRouter:
    """`POST /get_reward` over the server's service (mounted by `serve.app.create_app`)."""
    from kerneljudge.serve.app import ERRORS

    router = APIRouter()
    line = AdmissionLine(service)

    @router.post("/get_reward", response_model=RewardResponse, responses=ERRORS, tags=["adapters"])
    async def get_reward(body: RewardRequest) -> RewardResponse:
        """OpenRLHF's remote reward model: a reward per query, judged against its label's task; a full queue
        is waited out, and a sample that cannot be judged scores with its reason in extra_logs."""
        deadline = time.monotonic() + ADMISSION_WAIT_S
        samples = await run_in_threadpool(samples_of, body.query, body.prompts, body.labels)
        items = [sample.item for sample in samples if sample.item is not None]
        judged = await line.judge(items, deadline) if items else []
        return reward_response(outcomes_of(samples, judged), samples)

    return router
