"""The HTTP routes of `kerneljudge serve` (FastAPI), over a `Service` (docs/serve.md).

- POST /v1/judge: one item or a list; waits for the answers (one answer, or a list in the items' order).
- POST /v1/jobs, GET /v1/jobs/{id}: the same, answered at once with a job id, then polled (jobs.py).
- GET /v1/records/{id}: the whole record JSON an answer's record_id names.
- GET /v1/tasks, GET /healthz, GET /metrics (Prometheus' text format, metrics.py).
- POST /get_reward: OpenRLHF's remote reward model (kerneljudge/adapters/openrlhf.py, docs/adapters.md).

A candidate's failure is an ordinary 200 answer. Only the service's own faults are 5xx; a request it does
not judge is 4xx with `{"detail": "one line"}`, and a full queue is 429 with a Retry-After header. A body
is read within its size and time bounds before anything parses it (serve/limits.py). The OpenAPI schema
is FastAPI's, at /openapi.json.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from kerneljudge import __version__
from kerneljudge.serve.jobs import JobBook, one_line
from kerneljudge.serve.limits import BoundedBody, ServeLimits
from kerneljudge.serve.metrics import CONTENT_TYPE
from kerneljudge.serve.schema import Answer, Health, Item, ItemList, JobAccepted, JobStatus, TaskInfo
from kerneljudge.serve.service import QueueFull, ServeError, Service, Ticket

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "a bad item: unknown task, a task that does not parse, a bad option; a body not JSON"},
    408: {"description": "the body did not arrive in time"},
    409: {"description": "a request_id sent before with another item"},
    413: {"description": "a body over the size cap, or more new judgments than the server ever admits at once"},
    422: {"description": "the body is not items as the schema says (a list of more than 1024 items included)"},
    429: {"description": "the queue is full: retry after the Retry-After header's seconds"},
    503: {"description": "the server is shutting down"},
}
Items = Annotated[Item | ItemList, Body(description="one item, or a list of them")]


class JudgeFault(ServeError):
    """The judge raised instead of returning a record: the service's fault, never the candidate's."""


def create_app(service: Service, jobs: JobBook | None = None, limits: ServeLimits | None = None) -> FastAPI:
    """The routes over `service`, behind the body bounds of `limits`; the caller closes the service after the
    app stops serving."""
    limits = limits or ServeLimits()
    app = FastAPI(
        title="kerneljudge",
        version=__version__,
        description="A judge for AI-written GPU kernels, as a reward service (docs/serve.md).",
    )
    app.add_middleware(BoundedBody, max_body_bytes=limits.max_body_bytes, body_timeout_s=limits.body_timeout_s)
    book = jobs or JobBook()
    app.state.service = service
    app.state.jobs = book

    @app.exception_handler(ServeError)
    async def refused(request: Request, exc: ServeError) -> JSONResponse:
        headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, QueueFull) else None
        return JSONResponse({"detail": str(exc)}, status_code=exc.http_status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": validation_line(exc.errors(), isinstance(exc.body, list))}, status_code=422)

    @app.post("/v1/judge", response_model=Answer | list[Answer], responses=ERRORS)
    async def judge(items: Items) -> Answer | list[Answer]:
        """Judge the items and answer when every judgment is done (a retry is answered from the store)."""
        tickets = await run_in_threadpool(service.submit, items if isinstance(items, list) else [items])
        answers = await asyncio.gather(*(answer(index, ticket) for index, ticket in enumerate(tickets, start=1)))
        return list(answers) if isinstance(items, list) else answers[0]

    @app.post("/v1/jobs", response_model=JobAccepted, status_code=202, responses=ERRORS)
    async def submit(items: Items) -> JobAccepted:
        """Admit the items and answer at once with a job id to poll at GET /v1/jobs/{job_id}."""
        tickets = await run_in_threadpool(service.submit, items if isinstance(items, list) else [items])
        return book.add(tickets)

    @app.get("/v1/jobs/{job_id}", response_model=JobStatus, responses={404: {"description": "no such job"}})
    async def job(job_id: str) -> JobStatus:
        """pending, running, done (with the answers, in the items' order) or failed (the judge's own fault)."""
        return book.status(job_id)

    @app.get("/v1/records/{record_id}", responses={404: {"description": "no such record"}})
    async def record(record_id: str) -> Response:
        """The whole record (docs/record.md) an answer's record_id names."""
        found = await run_in_threadpool(service.record, record_id)
        return Response(found.model_dump_json(), media_type="application/json")

    @app.get("/v1/tasks", response_model=list[TaskInfo])
    async def tasks() -> list[TaskInfo]:
        """Every task id this server judges against (any task's text can be sent as task_source too)."""
        return service.tasks.listing()

    @app.get("/healthz", response_model=Health)
    async def healthz() -> Health:
        return service.health()

    @app.get("/metrics")
    async def metrics() -> Response:
        """Queue depth, lanes busy, judgments by status, latency (Prometheus text format)."""
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    from kerneljudge.adapters.openrlhf import reward_router

    app.include_router(reward_router(service))
    return app


async def answer(index: int, ticket: Ticket) -> Answer:
    try:
        await asyncio.wrap_future(ticket.result)
    except Exception as exc:
        raise JudgeFault(f"item {index}: the judge failed, no verdict: {one_line(exc)}") from None
    return ticket.answer()


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
