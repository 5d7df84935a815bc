"""Canned model responses, replayed: the offline backend (`--offline RESPONSES`) that needs no network and no
key, and the book of responses that the loopback server (generate/loopback.py) serves over HTTP too.

A book is a JSONL file, or a folder holding `responses.jsonl`; one response a line:

    {"task": "softmax_fp32", "round": 1, "sample": 0, "file": "softmax_honest.md", "match": "...", "model": "..."}

`task` names the task (a run's own `samples.jsonl` and `rounds.jsonl` replay as they are: `task_name`,
`sample_id` and `round` are read too); the text is `response`, or the file `file` beside the book; `round`,
`sample`, `match` (the text that identifies the task in a prompt, for the server; default the task's name)
and `model` (the name reported; default "replay") are optional. Which response a request gets is fixed
(`ResponseBook.pick`): the task's responses of that round (those without a round count for round 1), the one
of that sample if there is one, else the sample id modulo their number, in the book's order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kerneljudge.errors import UsageError
from kerneljudge.generate.client import ChatRequest, Completion, now_iso
from kerneljudge.generate.records import Attempt
from kerneljudge.sources.task import MAX_LISTING_BYTES, read_source

BOOK_FILE = "responses.jsonl"
DEFAULT_MODEL = "replay"


@dataclass(frozen=True)
class Canned:
    task: str
    text: str
    round: int | None = None
    sample: int | None = None
    match: str | None = None
    model: str = DEFAULT_MODEL

    @property
    def key(self) -> str:
        """What identifies the task in a prompt."""
        return self.match or self.task


class ResponseBook:
    """Canned responses by task, round and sample (the module's docstring has the rules)."""

    def __init__(self, entries: list[Canned], origin: str) -> None:
        if not entries:
            raise UsageError(f"{origin}: no responses")
        self.entries, self.origin = entries, origin

    @classmethod
    def load(cls, path: Path) -> ResponseBook:
        book = path / BOOK_FILE if path.is_dir() else path
        if not book.is_file():
            raise UsageError(f"no responses at {path}: give a JSONL file, or a folder holding {BOOK_FILE}")
        return cls(list(read_book(book)), str(path))

    def pick(self, task: str, round_: int, sample: int) -> Canned | None:
        mine = [e for e in self.entries if e.task == task]
        chosen = [e for e in mine if (e.round or 1) == round_]
        exact = [e for e in chosen if e.sample == sample]
        if exact:
            return exact[0]
        return chosen[sample % len(chosen)] if chosen else None

    def task_in(self, text: str) -> str | None:
        """The task whose key appears in `text` (the longest, where several do: `residual_rmsnorm_fp32` holds
        `rmsnorm_fp32`)."""
        found = {e.key: e.task for e in self.entries if e.key in text}
        return found[max(found, key=len)] if found else None


def read_book(path: Path) -> Iterator[Canned]:
    for number, line in enumerate(read_source(path, "responses", UsageError, MAX_LISTING_BYTES).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: expected an object")
        task = entry.get("task", entry.get("task_name"))
        text = entry.get("response")
        if "file" in entry:
            if not isinstance(entry["file"], str):
                raise UsageError(f"{where}: 'file' must be a path (a string)")
            text = read_source(path.parent / entry["file"], f"{where}: the response", UsageError)
        if not isinstance(task, str) or not isinstance(text, str):
            if entry.get("error"):  # a failed request in a replayed samples.jsonl: nothing to replay
                continue
            raise UsageError(f"{where}: needs a task (task) and a text (response or file)")
        sample = entry.get("sample", entry.get("sample_id"))
        yield Canned(task, text, entry.get("round"), sample, entry.get("match"), entry.get("model") or DEFAULT_MODEL)


class OfflineBackend:
    """A backend that answers from a ResponseBook, the same answer for the same request every time."""

    def __init__(self, book: ResponseBook) -> None:
        self.book = book
        self.description = f"offline {book.origin}"

    def complete(self, request: ChatRequest) -> Completion:
        started = now_iso()
        canned = self.book.pick(request.task_name, request.round, request.sample_id)
        if canned is None:
            error = f"no canned response for task {request.task_name} round {request.round} in {self.book.origin}"
            return Completion(None, started, 0.0, [Attempt(status_code=None, error=error, latency_s=0.0)], error=error)
        return Completion(
            canned.text,
            started,
            0.0,
            [Attempt(status_code=200, latency_s=0.0)],
            model=canned.model,
            finish_reason="stop",
            completion_id=f"replay-{request.task_name}-{request.round}-{request.sample_id}",
        )
