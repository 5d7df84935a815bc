"""What a generation writes, one JSON document a line: a sample (`samples.jsonl`), a repair round
(`rounds.jsonl`), a request that failed for good (`failures.jsonl`); docs/generate.md lists every field.

Each line is written with one `write` of the whole line and flushed to disk before the next sample is
counted as done, so that a process killed at any moment leaves whole lines and at most a torn last one,
which `repair_tail` cuts off before anything is appended again. No line ever holds the API key: the client
never hands it to a record (generate/client.py), and a base URL's user and password are dropped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, ValidationError

from kerneljudge.errors import UsageError
from kerneljudge.results.verdict import Model

SAMPLE_SCHEMA = "kerneljudge.generate.sample.v1"
ROUND_SCHEMA = "kerneljudge.generate.round.v1"
Stop = Literal["verified", "rounds_exhausted", "judge_error", "unsupported"]
M = TypeVar("M", bound=Model)


class Attempt(Model):
    """One HTTP request of a sample (a retry is another attempt)."""

    status_code: int | None  # the server's answer; None: none came (connection refused, timeout)
    error: str | None = None
    latency_s: float
    waited_s: float = 0.0  # the backoff slept before it (Retry-After, where the server sent one)


class Exchange(Model):
    """A request to the model and its answer, the part a sample and a repair round share."""

    task_id: str  # levelL/P_name, the task's file under problems/
    task_name: str
    task_sha256: str
    level: int
    problem_id: int
    sample_id: int
    prompt: str  # the user message this request added (the conversation before it: the earlier rounds)
    response: str | None = None  # the model's raw text; None when the request failed for good
    model: str | None = None  # as the server reported it
    requested_model: str
    finish_reason: str | None = None
    completion_id: str | None = None
    usage: dict[str, int] = Field(default_factory=dict)
    sampling: dict[str, Any] = Field(default_factory=dict)  # exactly what was sent: temperature, top_p, ...
    backend: str  # "openai-compatible URL" or "offline PATH"
    started_at: str
    latency_s: float  # from the first attempt's start to the answer, backoff included
    attempts: list[Attempt] = Field(default_factory=list)
    candidate: str | None = None  # the file written, relative to the run folder
    extracted: bool = False  # the code came from a fenced block of the response, not the whole text
    source_sha256: str | None = None  # of the file written (the judged text, unless GPU MODE wraps it)
    source: str | None = None
    error: str | None = None  # the request failed for good, or the response holds no code


class SampleRecord(Exchange):
    schema_version: Literal["kerneljudge.generate.sample.v1"] = SAMPLE_SCHEMA


class Verdict(Model):
    """The judgment of a round's candidate, in brief (the whole record is in the store)."""

    status: str
    verified: bool
    failure_kind: str | None = None
    speedup: float | None = None
    candidate_sha256: str
    record_created_at: str


class RoundRecord(Exchange):
    schema_version: Literal["kerneljudge.generate.round.v1"] = ROUND_SCHEMA
    round: int
    verdict: Verdict | None = None
    explanation: str | None = None  # what the next round's prompt quotes (kerneljudge.results.explain)
    reward: float | None = None
    reward_spec: str | None = None
    stop: Stop | None = None  # why the chain ends here; None: another round follows


def public_url(url: str | None) -> str | None:
    """A base URL without its user and password (the key can travel there)."""
    if not url:
        return url
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def repair_tail(path: Path) -> None:
    """Cut a torn last line (a process killed while writing it) so that appends start on a new line."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with path.open("rb+") as handle:
        data = handle.read()
        if not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


def append_line(path: Path, record: Model) -> None:
    line = (record.model_dump_json() + "\n").encode()
    with path.open("ab") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def read_lines(path: Path, model: type[M]) -> list[M]:
    """The records of a JSONL file (none when it does not exist); a line that is not one is a UsageError."""
    if not path.is_file():
        return []
    records = []
    with path.open() as handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith("\n"):
                break  # torn by a kill; repair_tail removes it before the next append
            if not line.strip():
                continue
            try:
                records.append(model.model_validate(json.loads(line)))
            except (ValueError, ValidationError) as exc:
                why = str(exc).splitlines()[0]
                raise UsageError(f"{path} line {number}: not a {model.__name__} ({why})") from None
    return records
