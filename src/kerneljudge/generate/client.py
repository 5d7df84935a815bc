"""Asking a model: the request and answer a backend trades, and the client of any OpenAI-compatible chat
endpoint (a hosted API, or a local vLLM, SGLang or llama.cpp server given by its base URL).

The client is the official `openai` package with its own retries off: this module retries, so that every
attempt (its status, error, latency and the backoff slept before it) lands in the sample's record. It retries
on 408, 409, 429 and 5xx answers and on connection errors and timeouts, waiting the server's Retry-After where
one is sent (seconds or an HTTP date, capped) and otherwise an exponential backoff with jitter; any other 4xx
answer fails at once. The key is read from the environment variable named by `api_key_env` and handed to the
`openai` client only: no record, log or message of ours holds it. The sleep, the clock and the jitter's
generator are injected, so that the tests of the backoff take no time.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kerneljudge.errors import UsageError
from kerneljudge.generate.records import Attempt, public_url

RETRYABLE = frozenset({408, 409, 429})  # and every 5xx
NO_KEY = "EMPTY"  # what a local server that checks no key is sent (vLLM's convention)


@dataclass(frozen=True)
class Sampling:
    """The sampling parameters sent with every request; None is not sent (the server's default)."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None  # a sample's seed is this plus its sample id

    def for_sample(self, sample_id: int) -> dict[str, Any]:
        sent = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}
        sent["seed"] = None if self.seed is None else self.seed + sample_id
        return {name: value for name, value in sent.items() if value is not None}


@dataclass(frozen=True)
class ChatRequest:
    """One request: the conversation, the model and its sampling, and which task, sample and round it is for
    (the offline backend answers by these; a server sees the messages only)."""

    messages: tuple[dict[str, str], ...]
    model: str
    sampling: dict[str, Any]
    task_name: str
    sample_id: int
    round: int = 1


@dataclass
class Completion:
    """What came back: the text, or the error that ended the attempts."""

    text: str | None
    started_at: str
    latency_s: float
    attempts: list[Attempt] = field(default_factory=list)
    model: str | None = None
    finish_reason: str | None = None
    completion_id: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None


class Backend(Protocol):
    description: str  # what a record's `backend` says: never a key

    def complete(self, request: ChatRequest) -> Completion: ...


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def one_line(text: object, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def retry_after_s(value: str | None) -> float | None:
    """A Retry-After header's delay: seconds, or an HTTP date from now; None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())


class ChatClient:
    """An OpenAI-compatible chat endpoint through the `openai` package; thread-safe (one HTTP pool)."""

    def __init__(
        self,
        base_url: str | None,
        api_key_env: str = "OPENAI_API_KEY",
        retries: int = 5,
        timeout_s: float = 600.0,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        try:
            import openai
        except ImportError:
            raise UsageError("asking a model needs the openai package: pip install 'kerneljudge[generate]'") from None
        key = os.environ.get(api_key_env)
        if not key and base_url is None:
            raise UsageError(
                f"no API key: set {api_key_env} (or name another variable with --api-key-env), or give "
                "--base-url of a server that needs none"
            )
        self._openai = openai
        self._client = openai.OpenAI(api_key=key or NO_KEY, base_url=base_url, max_retries=0, timeout=timeout_s)
        self.description = f"openai-compatible {public_url(str(self._client.base_url))}"
        self.retries, self.backoff_s, self.max_backoff_s = retries, backoff_s, max_backoff_s
        self.sleep, self.clock, self.rng = sleep, clock, rng or random.Random()

    def delay_s(self, attempt: int, retry_after: str | None) -> float:
        """The wait before attempt `attempt + 1`: the server's Retry-After, else 2^attempt backoffs, jittered."""
        asked = retry_after_s(retry_after)
        if asked is not None:
            return min(asked, self.max_backoff_s)
        return min(self.backoff_s * 2**attempt, self.max_backoff_s) * (0.5 + 0.5 * self.rng.random())

    def complete(self, request: ChatRequest) -> Completion:
        openai = self._openai
        started, first = now_iso(), self.clock()
        attempts: list[Attempt] = []
        waited = 0.0
        for attempt in range(self.retries + 1):
            begun = self.clock()
            try:
                answer = self._client.chat.completions.create(
                    model=request.model, messages=list(request.messages), **request.sampling
                )
            except openai.APIStatusError as exc:
                status, retry_after = exc.status_code, exc.response.headers.get("retry-after")
                error, retryable = f"HTTP {status}: {one_line(exc.message)}", status in RETRYABLE or status >= 500
            except openai.APIConnectionError as exc:  # timeouts too
                status, retry_after, error, retryable = None, None, one_line(exc), True
            except openai.APIError as exc:  # an answer the package cannot read
                status, retry_after, error, retryable = None, None, one_line(exc), False
            else:
                attempts.append(Attempt(status_code=200, latency_s=round(self.clock() - begun, 3), waited_s=waited))
                return self.completion(answer, started, first, attempts)
            attempts.append(
                Attempt(status_code=status, error=error, latency_s=round(self.clock() - begun, 3), waited_s=waited)
            )
            if not retryable or attempt == self.retries:
                why = error if not retryable else f"{error} (after {len(attempts)} attempts)"
                return Completion(None, started, round(self.clock() - first, 3), attempts, error=why)
            waited = round(self.delay_s(attempt, retry_after), 3)
            self.sleep(waited)
        raise AssertionError("unreachable: the last attempt returns")

    def completion(self, answer: Any, started: str, first: float, attempts: list[Attempt]) -> Completion:
        choice = answer.choices[0] if answer.choices else None
        text = choice.message.content if choice is not None else None
        usage = answer.usage.model_dump(include={"prompt_tokens", "completion_tokens"}) if answer.usage else {}
        return Completion(
            text,
            started,
            round(self.clock() - first, 3),
            attempts,
            model=answer.model,
            finish_reason=choice.finish_reason if choice is not None else None,
            completion_id=answer.id,
            usage={k: int(v) for k, v in usage.items() if v is not None},
            error=None if text else "the answer holds no text (no choice, or a refusal or tool call)",
        )
