"""Every error `kerneljudge serve` answers, as `application/problem+json` (RFC 9457; docs/serve.md, "Errors").

A problem's body is `{"type", "title", "status", "detail", "code"}`: `type` a stable URN per kind of error,
`code` its short name for a program to branch on, `detail` one line for a person (the clients read it as
the server's reason). `PROBLEMS` is the one table of them; docs/serve.md's table is kept equal to it by a
test. The routes declare theirs in the OpenAPI document through `declared`, and `problem_media` rewrites
the document so that each error's content is `application/problem+json`, as sent.

Nothing here imports FastAPI: `serve/limits.py`'s middleware answers with these bodies too, and it loads
with the CLI. `FaultBarrier` is the one place an unexpected exception becomes a 500 and a logged traceback.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

    Message = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[Message]]
    Send = Callable[[Message], Awaitable[None]]
    ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

logger = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:kerneljudge:problem:"


@dataclass(frozen=True)
class ProblemType:
    """One kind of error: its code, its HTTP status, its title (the same for every instance) and when it
    happens (the OpenAPI description and docs/serve.md's table)."""

    code: str
    status: int
    title: str
    when: str

    @property
    def type(self) -> str:
        return TYPE_PREFIX + self.code


PROBLEMS: dict[str, ProblemType] = {
    problem.code: problem
    for problem in (
        ProblemType(
            "bad_item", 400, "An item the server cannot judge", "a task text that is not a reference, no items"
        ),
        ProblemType("unknown_task", 400, "Unknown task", "a task id this server does not know (GET /v1/tasks)"),
        ProblemType("malformed_json", 400, "The body is not JSON", "a JSON syntax error, not UTF-8, nested too deep"),
        ProblemType("bad_content_length", 400, "Bad Content-Length", "a Content-Length that is not a number"),
        ProblemType("not_found", 404, "Not found", "no such job, record or route"),
        ProblemType("method_not_allowed", 405, "Method not allowed", "a route asked with another method"),
        ProblemType("body_timeout", 408, "The body came too slowly", "the body did not arrive within --body-timeout"),
        ProblemType("conflict", 409, "request_id reused", "a request_id sent before with another item"),
        ProblemType("body_too_large", 413, "The body is too large", "a body over the size cap"),
        ProblemType("too_large", 413, "Too many judgments at once", "more new judgments than the server ever admits"),
        ProblemType("unsupported_media_type", 415, "Not JSON", "a POST whose Content-Type is not application/json"),
        ProblemType("invalid_body", 422, "The body is not items", "a body that is JSON but not what the schema says"),
        ProblemType("invalid_header", 422, "A bad header", "a header of a bad value (X-KJ-Deadline-S)"),
        ProblemType("queue_full", 429, "The queue is full", "no room now: retry after the Retry-After seconds"),
        ProblemType("internal", 500, "Internal error", "the server's own bug: its traceback is in the log"),
        ProblemType("judge_fault", 500, "The judge failed", "the judge raised instead of giving a verdict"),
        ProblemType("shutting_down", 503, "Shutting down", "the server is shutting down"),
    )
}


class Problem(BaseModel):
    """An error's body (RFC 9457, with the extension member `code`)."""

    type: str = Field(description=f"a stable URN per kind of error: {TYPE_PREFIX}CODE")
    title: str
    status: int
    detail: str = Field(description="one line: what was wrong and how to fix it")
    code: str = Field(description="the kind of error, for a program: " + ", ".join(PROBLEMS))


def problem_body(code: str, detail: str) -> dict[str, Any]:
    """The body of a problem of kind `code`; `detail` is cut to its first line."""
    kind = PROBLEMS[code]
    line = detail.strip().splitlines()[0] if detail.strip() else kind.title
    return {"type": kind.type, "title": kind.title, "status": kind.status, "detail": line, "code": code}


def problem_bytes(code: str, detail: str) -> bytes:
    return json.dumps(problem_body(code, detail)).encode()


def declared(*codes: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of a route that may answer these problems (and 500 `internal`, as any
    route may): one entry per status, its description naming each code."""
    by_status: dict[int, list[ProblemType]] = {}
    for code in (*codes, "internal"):
        kind = PROBLEMS[code]
        if kind not in by_status.setdefault(kind.status, []):
            by_status[kind.status].append(kind)
    return {
        status: {"model": Problem, "description": "; ".join(f"`{k.code}`: {k.when}" for k in kinds)}
        for status, kinds in sorted(by_status.items())
    }


def problem_media(document: dict[str, Any]) -> dict[str, Any]:
    """`document` (an OpenAPI document) with every response of `Problem` schema declared as
    `application/problem+json`, the media type the server sends them with. FastAPI's own 422 (its
    `HTTPValidationError` body, added to any route with parameters) is dropped, with its schemas: the app
    answers a validation error as a problem, and the routes that validate a body or a header declare it."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            for status, response in list(responses.items()):
                schema = response.get("content", {}).get("application/json", {}).get("schema", {})
                if schema.get("$ref", "").endswith("/HTTPValidationError"):
                    del responses[status]
                elif schema.get("$ref", "").endswith("/Problem"):
                    response["content"][MEDIA_TYPE] = response["content"].pop("application/json")
    schemas = document.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    return document


async def send_problem(send: Send, code: str, detail: str, close: bool = False) -> None:
    """A problem sent on a raw ASGI channel (middleware, before or instead of the app's own answer)."""
    body = problem_bytes(code, detail)
    headers = [(b"content-type", MEDIA_TYPE.encode()), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": PROBLEMS[code].status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class FaultBarrier:
    """ASGI middleware: an exception no route handled is logged with its traceback and answered as a 500
    problem `internal` (when no answer has started), so that the log holds one traceback per fault and the
    client a one-line body, never a stack or a dropped connection."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            logger.exception("%s %s failed: the server's own fault", scope.get("method"), scope.get("path"))
            if not started:
                await send_problem(send, "internal", f"the server failed: {type(exc).__name__}; see its log")
