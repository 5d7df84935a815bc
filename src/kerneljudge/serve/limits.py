"""Bounds on what a client can make `kerneljudge serve` hold: body size, body and header time, connections.

The schema caps the texts and the items of a parsed body (api/schema.py); these bounds act before any of
it is parsed (docs/serve.md, "Bounded inputs"):

- `BoundedBody`, an ASGI middleware: a body longer than `max_body_bytes`, by its Content-Length or as it
  streams in, is refused with 413 before the rest is read; a body not received within `body_timeout_s` is
  refused with 408. Both close the connection.
- `bounded_h11`: uvicorn's h11 protocol with a deadline on each request's head (request line and headers),
  which uvicorn itself lacks: its keep-alive timeout covers only the idle time between requests, and ends
  at the first byte received, so a client that sends its headers a byte at a time holds a connection for
  ever. The head's size is h11's `max_incomplete_event_size`.
- `uvicorn_config`: the server with both, and uvicorn's `limit_concurrency` (more connections or requests
  than that are answered 503 by uvicorn).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kerneljudge.serve.problems import send_problem
from kerneljudge.sources.task import byte_size

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

    Message = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[Message]]
    Send = Callable[[Message], Awaitable[None]]
    ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

# 16 MiB: 256 responses of 64 KiB each (about 16k tokens), or 16 items at the schema's full 512 KiB
# candidate and task_source. JSON made of empty containers parses to about 25 times its size, so this also
# bounds one parse (on the event loop, one at a time) at about 400 MB.
MAX_BODY_BYTES = 16 * 1024 * 1024
BODY_TIMEOUT_S = 60.0  # the whole body, from the first read: 16 MiB at 2 Mbit/s
HEADER_TIMEOUT_S = 10.0  # a request's head, from the connection's start or the previous response's end
MAX_HEADER_BYTES = 16 * 1024  # h11's default, stated: a request's line and headers
KEEP_ALIVE_S = 5  # uvicorn's default: an idle connection between requests
MAX_CONNECTIONS = 256  # uvicorn's limit_concurrency: open connections, and requests being answered


@dataclass(frozen=True)
class ServeLimits:
    """The bounds of one server; tests shrink them."""

    max_body_bytes: int = MAX_BODY_BYTES
    body_timeout_s: float = BODY_TIMEOUT_S
    header_timeout_s: float = HEADER_TIMEOUT_S
    max_header_bytes: int = MAX_HEADER_BYTES
    keep_alive_s: int = KEEP_ALIVE_S
    max_connections: int = MAX_CONNECTIONS
    # POST /v1/judge's longest wait for its answers before it answers 202 with a job to poll; a request's
    # X-KJ-Deadline-S header may shorten it. None: no bound but the header's (docs/serve.md, "Deadlines").
    deadline_s: float | None = None


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    pass


class BoundedBody:
    """ASGI middleware: the request's body, read whole within its size and time bounds before the app sees
    it; the app then reads it from memory."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES, body_timeout_s: float = BODY_TIMEOUT_S):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = byte_size(self.max_body_bytes)
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None and not declared.isdigit():
            await refuse(send, "bad_content_length", "Content-Length is not a number of bytes")
            return
        if declared is not None and int(declared) > self.max_body_bytes:
            await refuse(
                send, "body_too_large", f"the body is {int(declared)} bytes, more than {cap}: send fewer items"
            )
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.body_timeout_s)
        except _TooLarge:
            await refuse(send, "body_too_large", f"the body is more than {cap}: send fewer items")
            return
        except asyncio.TimeoutError:
            await refuse(send, "body_timeout", f"the body did not arrive within {self.body_timeout_s:g} s")
            return
        except _Disconnected:
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:  # after the body, only a disconnect is left to hear
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def refuse(send: Send, code: str, detail: str) -> None:
    """A problem (serve/problems.py) that closes the connection: the rest of the body is never read."""
    await send_problem(send, code, detail, close=True)


def bounded_h11(header_timeout_s: float) -> type:
    """uvicorn's h11 protocol, closing a connection whose next request's head has not fully arrived within
    `header_timeout_s` of the connection's start or of the previous response's end."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadlineH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm_head_deadline()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_head_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_deadline()
            super().connection_lost(exc)

        def _arm_head_deadline(self) -> None:
            self._disarm_head_deadline()
            if not self.transport.is_closing():
                self._head_timer = self.loop.call_later(header_timeout_s, self._head_deadline_passed)

        def _disarm_head_deadline(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_deadline_passed(self) -> None:
            self._head_timer = None
            # IDLE: no whole request head since the deadline was armed (a request being read or answered
            # is SEND_BODY or DONE, and its body has BoundedBody's own deadline).
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.logger.info("closed a connection whose request head took over %g s", header_timeout_s)
                self.transport.close()

    return HeadDeadlineH11Protocol


def uvicorn_config(app: Any, host: str, port: int, limits: ServeLimits, log_level: str = "info") -> Any:
    """A `uvicorn.Config` serving `app` within `limits` (its body bounds are `create_app`'s)."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=bounded_h11(limits.header_timeout_s),
        h11_max_incomplete_event_size=limits.max_header_bytes,
        timeout_keep_alive=limits.keep_alive_s,
        limit_concurrency=limits.max_connections,
    )
