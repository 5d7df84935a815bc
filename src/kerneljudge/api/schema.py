"""What crosses the wire: the items a trainer sends and the answers it gets (docs/serve.md).

Plain pydantic models shared by the server (kerneljudge/serve/app.py), its clients
(kerneljudge/api/client.py) and the trainer adapters, so that `RemoteJudge` and `LocalJudge` take and give
the same objects. Sizes are capped here, before anything is loaded: a candidate is text, never executed in
the server.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kerneljudge.config import MODES, POLICIES
from kerneljudge.results.reward import REWARD_BINARY_V1, REWARD_V1, REWARD_V2

REWARD_SPECS = (REWARD_V2, REWARD_V1, REWARD_BINARY_V1)
MAX_SOURCE_CHARS = 512 * 1024  # a task's or a candidate's text (a model's whole response included)
MAX_REQUEST_ID_CHARS = 200
# Items in one request: the list's length is checked before its items, so a long list is one error, not
# one per item (the body's own cap, serve/limits.py, comes first).
MAX_ITEMS = 1024
JobState = Literal["pending", "running", "done", "failed"]


class Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _few_fields(cls, data: Any) -> Any:
        # extra="forbid" makes an error per unknown key: an object of a million keys would build a million.
        if isinstance(data, dict) and len(data) > len(cls.model_fields):
            unknown = itertools.islice((key for key in data if key not in cls.model_fields), 3)
            names = ", ".join(repr(str(key)[:40]) for key in unknown)
            raise ValueError(f"{len(data)} fields, more than the {len(cls.model_fields)} known (unknown: {names})")
        return data


class Options(Wire):
    """How to judge one item; None keeps the server's setting (`kerneljudge serve --mode/--policy/--no-timing`)."""

    mode: str | None = None
    policy: str | None = None
    timing: bool | None = None
    reward_spec: str = REWARD_V2  # which reward the answer carries; the record holds every spec's

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str | None) -> str | None:
        return _one_of("mode", value, MODES)

    @field_validator("policy")
    @classmethod
    def _policy(cls, value: str | None) -> str | None:
        return _one_of("policy", value, POLICIES)

    @field_validator("reward_spec")
    @classmethod
    def _reward_spec(cls, value: str) -> str:
        return _one_of("reward_spec", value, REWARD_SPECS) or REWARD_V2


class Item(Wire):
    """One judgment asked for: a task (an id the server knows, or its source) and a candidate's text."""

    task: str | None = Field(default=None, max_length=1000, description="builtin:NAME, or a task id of GET /v1/tasks")
    task_source: str | None = Field(
        default=None, max_length=MAX_SOURCE_CHARS, description="instead of task: a KernelBench-format task's text"
    )
    candidate: str = Field(
        max_length=MAX_SOURCE_CHARS, description="a candidate's source, or a model's whole response with code blocks"
    )
    request_id: str | None = Field(default=None, min_length=1, max_length=MAX_REQUEST_ID_CHARS)
    options: Options = Field(default_factory=Options)

    @field_validator("candidate")
    @classmethod
    def _candidate(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the candidate is empty")
        return value

    @model_validator(mode="after")
    def _one_task(self) -> Item:
        if (self.task is None) == (self.task_source is None):
            raise ValueError("give exactly one of task (an id) and task_source (a task's text)")
        return self


ItemList = Annotated[list[Item], Field(max_length=MAX_ITEMS)]


class AnswerMetrics(Wire):
    """The record's figures a trainer logs; None where not measured."""

    correct: bool
    trials: int
    trials_passed: int
    timed: bool
    device: str | None = None
    speedup: float | None = None
    speedup_interval: list[float] | None = None
    candidate_ms: float | None = None  # median per-call times
    reference_ms: float | None = None
    speedup_vs_compile: float | None = None
    duration_s: float


class Answer(Wire):
    """The verdict on one item. A failing candidate is an ordinary answer (status, failure_kind, reward)."""

    request_id: str | None
    reward: float | None  # None: no reward (the judge failed, or the machine lacks a required capability)
    reward_spec: str
    valid: bool  # False: the judge's own fault; drop the sample rather than train on it
    status: Literal["PASS", "FAIL", "SUSPICIOUS", "UNSUPPORTED", "ERROR"]
    failure_kind: str | None
    failure_reason: str | None
    findings: list[str]  # codes of the error and warning findings
    metrics: AnswerMetrics
    record_id: str  # GET /v1/records/{record_id}: the whole record
    explanation: str  # kerneljudge.results.explain: a few lines for the model's next attempt


class JobAccepted(Wire):
    job_id: str
    state: JobState
    items: int


class JobStatus(Wire):
    job_id: str
    state: JobState
    items: int
    done: int
    answers: list[Answer] | None = None  # when done
    error: str | None = None  # when failed: the judge's own fault, one line


class TaskInfo(Wire):
    id: str
    name: str
    source: Literal["builtin", "file"]
    path: str | None = None


class Health(Wire):
    """GET /healthz: ready (`ok`, HTTP 200) or not (HTTP 503), and the lanes' state (docs/serve.md, "Readiness")."""

    status: Literal["ok", "starting", "no_lanes", "stopping"]
    version: str
    lanes: int
    busy: int
    waiting: int
    capacity: int | None  # judgments admitted at most (lanes + --queue); None: unbounded


def _one_of(name: str, value: str | None, allowed: tuple[str, ...]) -> str | None:
    if value is not None and value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return value
