"""What every trainer adapter shares: how a row names its task, which judge answers, how an answer scores.

- A row's task (verl's `ground_truth`, a TRL dataset column, OpenRLHF's `labels`, a verifiers row's `answer`)
  is a task id the judge knows (`builtin:NAME`, or an id of `kerneljudge serve --tasks DIR`) or a
  KernelBench-format task's whole text: text with a line break is sent as `task_source`, anything else as
  `task` (`task_fields`). A mapping with a `task` or `task_source` key is taken as those fields.
- The judge (`default_judge`): the `kerneljudge serve` at an explicit `url=` or at the environment's
  `KJ_JUDGE_URL` (`serve.client.RemoteJudge`), else one `LocalJudge` per process over a one-lane
  `LocalBackend` on this machine's device, storing records in `KJ_JUDGE_STORE` (default
  ~/.cache/kerneljudge/adapters.db). Both have one method, `judge(items) -> answers`.
- A model's response is judged as the server judges it (the last fenced Python block defining `ModelNew`;
  `candidate.extract_code`). An empty response is not sent: it scores as an unverified candidate under the
  reward spec asked for (`Outcome.empty`), so one empty sample never refuses its whole batch.
- `Outcome.reward` is the answer's reward, None where the judge gives none (`valid: false`, the judge's own
  fault; or UNSUPPORTED). Each adapter maps None as its trainer allows (docs/adapters.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from kerneljudge.api.schema import Answer, Item, Options
from kerneljudge.errors import KernelJudgeError
from kerneljudge.results.reward import REWARD_BINARY_V1, REWARD_V1, REWARD_V2, reward_binary, reward_v1, reward_v2


class AdapterError(KernelJudgeError):
    """A trainer's call the adapter cannot judge (a missing task column, lists of unequal length)."""


class Judge(Protocol):
    def judge(self, items: Sequence[Item]) -> list[Answer]: ...


@dataclass(frozen=True)
class Outcome:
    """One response's result, as the adapters report it."""

    reward: float | None  # None: no reward (the judge's own fault, or a capability the machine lacks)
    valid: bool  # False: the judge failed on this item; never the candidate's fault
    status: str  # the record's status; FAIL for an empty response, which is not judged
    failure_kind: str | None
    explanation: str
    record_id: str | None  # GET /v1/records/{id}; None for an empty response
    speedup: float | None

    @property
    def verified(self) -> bool:
        return self.status == "PASS"

    @classmethod
    def of(cls, answer: Answer) -> Outcome:
        return cls(
            reward=answer.reward,
            valid=answer.valid,
            status=answer.status,
            failure_kind=answer.failure_kind,
            explanation=answer.explanation,
            record_id=answer.record_id,
            speedup=answer.metrics.speedup,
        )

    @classmethod
    def empty(cls, reward_spec: str) -> Outcome:
        """An empty response: an unverified candidate, rewarded as the spec rewards one."""
        spec = {
            REWARD_V2: lambda: reward_v2("FAIL", False, None, None, None),
            REWARD_V1: lambda: reward_v1("FAIL", False, None, None),
            REWARD_BINARY_V1: lambda: reward_binary("FAIL", False),
        }[reward_spec]
        return cls(spec().value, True, "FAIL", "empty_response", "FAIL: the response is empty.", None, None)


def task_fields(task: Any) -> dict[str, str]:
    """The item fields a row's task reference gives: `{"task": id}` or `{"task_source": text}`."""
    if isinstance(task, Mapping):
        fields = {key: task[key] for key in ("task", "task_source") if task.get(key)}
        if len(fields) == 1 and all(isinstance(value, str) for value in fields.values()):
            return fields
        raise AdapterError(f"a task mapping needs exactly one of 'task' and 'task_source'; got keys {sorted(task)}")
    if not isinstance(task, str) or not task.strip():
        raise AdapterError(f"a row's task must be a task id (builtin:NAME) or a task's source text; got {task!r:.80}")
    return {"task_source": task} if "\n" in task.strip() else {"task": task.strip()}


def response_text(completion: Any) -> str:
    """A completion's text: a string, or the last assistant message of a conversation (a list of messages,
    as dicts or objects with `content`; a content of parts is joined from its text parts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        messages = [m for m in completion if _get(m, "role") in (None, "assistant")] or list(completion)
        content = _get(messages[-1], "content")
        if isinstance(content, str):
            return content
        if isinstance(content, Sequence):
            return "".join(str(_get(part, "text") or "") for part in content)
        return ""
    if isinstance(completion, Sequence):
        return ""
    raise AdapterError(f"a completion must be text or a list of messages; got {type(completion).__name__}")


def _get(entry: Any, key: str) -> Any:
    return entry.get(key) if isinstance(entry, Mapping) else getattr(entry, key, None)


def as_options(options: Options | Mapping[str, Any] | None, reward_spec: str | None = None) -> Options:
    """Options from a mapping (mode, policy, timing, reward_spec); `reward_spec` wins when given."""
    fields = options.model_dump() if isinstance(options, Options) else dict(options or {})
    if reward_spec is not None:
        fields["reward_spec"] = reward_spec
    try:
        return Options.model_validate(fields)
    except ValidationError as exc:
        raise AdapterError(f"bad judge options: {first_error(exc)}") from None


def first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ()))
    message = str(error.get("msg", "not valid")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def build_items(tasks: Sequence[Any], responses: Sequence[str], options: Options) -> tuple[list[Item], list[int]]:
    """The items to judge and, for each, its row's index; empty responses are left out."""
    if len(tasks) != len(responses):
        raise AdapterError(f"{len(responses)} responses but {len(tasks)} tasks: give one task per response")
    items, rows = [], []
    for row, (task, response) in enumerate(zip(tasks, responses, strict=True)):
        if not response.strip():
            continue
        try:
            items.append(Item(**task_fields(task), candidate=response, options=options))
        except ValidationError as exc:
            raise AdapterError(f"row {row + 1}: {first_error(exc)}") from None
        rows.append(row)
    return items, rows


def merge(answers: Sequence[Answer], rows: Sequence[int], count: int, reward_spec: str) -> list[Outcome]:
    """Every row's outcome: its answer's, or an empty response's."""
    outcomes = [Outcome.empty(reward_spec)] * count
    for row, answer in zip(rows, answers, strict=True):
        outcomes[row] = Outcome.of(answer)
    return outcomes


def score(judge: Judge, tasks: Sequence[Any], responses: Sequence[str], options: Options) -> list[Outcome]:
    """Judge every response against its row's task in one request (the judge shares and parallelizes)."""
    items, rows = build_items(tasks, responses, options)
    answers = judge.judge(items) if items else []
    return merge(answers, rows, len(responses), options.reward_spec)
