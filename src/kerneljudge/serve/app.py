"""The HTTP routes of `kerneljudge serve` (FastAPI), over a `Service` (docs/serve.md).

- POST /v1/judge: one item or a list; waits for the answers (one answer, or a list in the items' order), or
  until its deadline (the X-KJ-Deadline-S header, the server's `--deadline`), then answers 202 with a job.
- POST /v1/jobs, GET /v1/jobs/{id}: the same, answered at once with a job id, then polled (jobs.py).
- GET /v1/records/{id}: the whole record JSON an answer's record_id names.
- GET /v1/tasks; GET /healthz (readiness: 503 until a lane is up), GET /livez (liveness); GET /metrics
  (Prometheus' text format, metrics.py).
- POST /get_reward: OpenRLHF's remote reward model (serve/get_reward.py, api/openrlhf.py; docs/adapters.md).

A candidate's failure is an ordinary 200 answer. Every error is a problem (`application/problem+json`,
serve/problems.py): 4xx for a request the service does not judge, 5xx for its own faults; a full queue is
429 with a Retry-After header. A body is read within its size and time bounds before anything parses it
(serve/limits.py), and a POST's body must say it is JSON. The OpenAPI document, at /openapi.json, declares
each route's problems.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from kerneljudge import __version__
from kerneljudge.api.schema import Answer, Health, Item, ItemList, JobAccepted, JobStatus, TaskInfo
from kerneljudge.serve.jobs import JobBook, one_line
from kerneljudge.serve.limits import BoundedBody, ServeLimits
from kerneljudge.serve.metrics import CONTENT_TYPE
from kerneljudge.serve.problems import MEDIA_TYPE, PROBLEMS, FaultBarrier, declared, problem_body, problem_media
from kerneljudge.serve.service import QueueFull, ServeError, Service, Ticket

logger = logging.getLogger(__name__)

DEADLINE_HEADER = "X-KJ-Deadline-S"
# The problems of a route that admits items (/v1/judge, /v1/jobs, and OpenRLHF's /get_reward).
ITEM_PROBLEMS = (
    "bad_item",
    "unknown_task",
    "malformed_json",
    "bad_content_length",
    "body_timeout",
    "conflict",
    "body_too_large",
    "too_large",
    "unsupported_media_type",
    "invalid_body",
    "queue_full",
    "judge_fault",
    "shutting_down",
)
ERRORS = declared(*ITEM_PROBLEMS)
Items = Annotated[Item | ItemList, Body(description="one item, or a list of them")]
Deadline = Annotated[
    float | None,
    Header(
        alias=DEADLINE_HEADER,
        gt=0,
        allow_inf_nan=False,
        description="seconds to wait for the answers before answering 202 with a job to poll (at most the "
        "server's --deadline)",
    ),
]


class JudgeFault(ServeError):
    """The judge raised instead of returning a record: the service's fault, never the candidate's."""

    code = "judge_fault"


class UnsupportedMediaType(ServeError):
    """A POST whose body is not said to be JSON."""

    http_status = 415
    code = "unsupported_media_type"


def create_app(service: Service, jobs: JobBook | None = None, limits: ServeLimits | None = None) -> FastAPI:
    """The routes over `service`, behind the body bounds of `limits`; the caller closes the service after the
    app stops serving."""
    limits = limits or ServeLimits()
    app = FastAPI(
        title="kerneljudge",
        version=__version__,
        description="A judge for AI-written GPU kernels, as a reward service (docs/serve.md).",
        dependencies=[Depends(json_content)],
    )
    app.add_middleware(BoundedBody, max_body_bytes=limits.max_body_bytes, body_timeout_s=limits.body_timeout_s)
    app.add_middleware(FaultBarrier)
    build_openapi = app.openapi
    app.openapi = lambda: problem_media(build_openapi())  # type: ignore[method-assign]
    book = jobs or JobBook()
    app.state.service = service
    app.state.jobs = book

    @app.exception_handler(ServeError)
    async def refused(request: Request, exc: ServeError) -> JSONResponse:
        headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, QueueFull) else None
        return problem(exc.code, str(exc), headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        malformed = next((error for error in errors if error.get("type") == "json_invalid"), None)
        if malformed is not None:
            return problem("malformed_json", json_error_line(malformed, exc.body))
        headers = [error for error in errors if tuple(error.get("loc", ()))[:1] == ("header",)]
        if headers:
            return problem("invalid_header", validation_line(headers, listed=False))
        return problem("invalid_body", validation_line(errors, isinstance(exc.body, list)))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI's: the body's JSON raised other than a syntax error
            return problem("malformed_json", parse_failure_line(exc.__cause__))
        if exc.status_code == 404:
            return problem("not_found", f"no route {request.method} {request.url.path}: GET /docs lists them")
        if exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            detail = f"{request.url.path} does not take {request.method}; it takes {allowed}"
            return problem("method_not_allowed", detail, exc.headers)
        logger.error("an HTTP error without a problem type: %s %s", exc.status_code, exc.detail)
        return problem("internal", f"HTTP {exc.status_code}: {exc.detail}")

    @app.post(
        "/v1/judge",
        response_model=Answer | list[Answer],
        responses={
            202: {"model": JobStatus, "description": "the deadline passed first: poll the job"},
            **declared(*ITEM_PROBLEMS, "invalid_header"),
        },
    )
    async def judge(items: Items, deadline_s: Deadline = None) -> Any:
        """Judge the items and answer when every judgment is done (a retry is answered from the store). When
        the deadline passes first, answer 202 with the job's status and a Location to poll; the judgments go
        on, and the same items sent again are answered from the store once judged."""
        tickets = await run_in_threadpool(service.submit, items if isinstance(items, list) else [items])
        if not await settled([ticket.result for ticket in tickets], shortest(deadline_s, limits.deadline_s)):
            status = book.status(book.add(tickets).job_id)
            headers = {"Location": f"/v1/jobs/{status.job_id}"}
            return JSONResponse(status.model_dump(mode="json"), status_code=202, headers=headers)
        answers = await asyncio.gather(*(answer(index, ticket) for index, ticket in enumerate(tickets, start=1)))
        return list(answers) if isinstance(items, list) else answers[0]

    @app.post("/v1/jobs", response_model=JobAccepted, status_code=202, responses=ERRORS)
    async def submit(items: Items) -> JobAccepted:
        """Admit the items and answer at once with a job id to poll at GET /v1/jobs/{job_id}."""
        tickets = await run_in_threadpool(service.submit, items if isinstance(items, list) else [items])
        return book.add(tickets)

    @app.get("/v1/jobs/{job_id}", response_model=JobStatus, responses=declared("not_found"))
    async def job(job_id: str) -> JobStatus:
        """pending, running, done (with the answers, in the items' order) or failed (the judge's own fault)."""
        return book.status(job_id)

    @app.get("/v1/records/{record_id}", responses=declared("not_found"))
    async def record(record_id: str) -> Response:
        """The whole record (docs/record.md) an answer's record_id names."""
        found = await run_in_threadpool(service.record, record_id)
        return Response(found.model_dump_json(), media_type="application/json")

    @app.get("/v1/tasks", response_model=list[TaskInfo], responses=declared())
    async def tasks() -> list[TaskInfo]:
        """Every task id this server judges against (any task's text can be sent as task_source too)."""
        return service.tasks.listing()

    @app.get(
        "/healthz",
        response_model=Health,
        responses={503: {"model": Health, "description": "not ready: starting, no_lanes or stopping"}},
    )
    async def healthz() -> JSONResponse:
        """Readiness: 200 while a lane can take a judgment, else 503 with the same body saying why."""
        health = service.health()
        return JSONResponse(health.model_dump(mode="json"), status_code=200 if health.status == "ok" else 503)

    @app.get("/livez")
    async def livez() -> dict[str, str]:
        """Liveness: the server answers (whether or not its lanes are up)."""
        return {"status": "alive"}

    @app.get("/metrics")
    async def metrics() -> Response:
        """Queue depth, lanes busy, judgments by status, latency (Prometheus text format)."""
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    from kerneljudge.serve.get_reward import reward_router

    app.include_router(reward_router(service))
    return app


def problem(code: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The problem of kind `code` (serve/problems.py) as an answer."""
    return JSONResponse(
        problem_body(code, detail), status_code=PROBLEMS[code].status, headers=headers, media_type=MEDIA_TYPE
    )


async def json_content(request: Request) -> None:
    """Every POST says its body is JSON (application/json, or a +json type): otherwise 415, whatever the body
    holds, rather than FastAPI's reading of the bytes as a string."""
    if request.method != "POST":
        return
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not (media == "application/json" or (media.startswith("application/") and media.endswith("+json"))):
        raise UnsupportedMediaType(
            f"Content-Type {media or 'missing'}: send the body as JSON with Content-Type: application/json"
        )


def shortest(*deadlines_s: float | None) -> float | None:
    """The earliest of the deadlines given; None when none is."""
    given = [seconds for seconds in deadlines_s if seconds is not None]
    return min(given) if given else None


async def settled(results: Sequence[Future[Any]], timeout_s: float | None) -> bool:
    """True when every result is done within `timeout_s` (None: however long it takes). Nothing is cancelled
    when the time is up: a judgment may be shared with other items, and it goes on to the store."""
    waits = [asyncio.wrap_future(result) for result in results if not result.done()]
    for wait in waits:  # its exception is read from the ticket's own future; this keeps asyncio quiet
        wait.add_done_callback(lambda done: done.cancelled() or done.exception())
    if not waits:
        return True
    _, pending = await asyncio.wait(waits, timeout=timeout_s)
    return not pending


async def answer(index: int, ticket: Ticket) -> Answer:
    """The item's answer once its judgment is done; a judge that raised is a `JudgeFault` (its traceback
    is logged where the judgment ended, once: `Service._finish`)."""
    try:
        await asyncio.wrap_future(ticket.result)
    except Exception as exc:
        raise JudgeFault(f"item {index}: the judge failed, no verdict: {one_line(exc)}") from None
    return ticket.answer()


def json_error_line(error: Any, document: Any) -> str:
    """A JSON syntax error as one line naming its byte offset in the body (the decoder counts characters)."""
    position = next((part for part in reversed(error.get("loc", ())) if isinstance(part, int)), None)
    reason = str(error.get("ctx", {}).get("error", "not valid"))
    if position is None:
        return f"body: not JSON: {reason}"
    offset = len(document[:position].encode("utf-8", "surrogatepass")) if isinstance(document, str) else position
    return f"body: not JSON: {reason} at byte {offset}"


def parse_failure_line(cause: BaseException | None) -> str:
    """Why the body's JSON could not be read, when it was not a syntax error."""
    if isinstance(cause, UnicodeDecodeError):
        return f"body: not UTF-8 at byte {cause.start}: send JSON encoded as UTF-8"
    if isinstance(cause, RecursionError):
        return "body: not JSON the server reads: nested too deeply"
    return f"body: not JSON the server reads ({one_line(cause) if cause else 'unreadable'})"


def validation_line(errors: Any, listed: bool) -> str:
    """pydantic's errors as one line: where and what of the first, and how many more. Of the one-or-list
    union, only the branch the body took (`listed`: it was a list) is told."""
    branch = [e for e in errors if any(str(part).startswith("list[") for part in e.get("loc", ())) == listed]
    chosen = branch or list(errors)
    first = chosen[0] if chosen else {"loc": (), "msg": "not valid"}
    parts = [part for part in first.get("loc", ()) if part != "body" and "[" not in str(part)]
    where = ".".join(f"item {part + 1}" if isinstance(part, int) else str(part) for part in parts)
    message = str(first.get("msg", "not valid")).removeprefix("Value error, ")
    more = f" (and {len(chosen) - 1} more)" if len(chosen) > 1 else ""
    return f"{where or 'body'}: {message}{more}"
