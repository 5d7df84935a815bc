"""OpenRLHF's remote reward model, as a contract: what its rollout posts and reads, and how a sample is cut
from its query, judged or not, and scored. Served by `kerneljudge serve` as `POST /get_reward`
(serve/get_reward.py) and offered as a reward file (adapters/openrlhf.py).

OpenRLHF's `--remote_rm_url` is an HTTP endpoint or a Python file. Its rollout posts each sample alone to an
endpoint, `{"query": [prompt + response], "prompts": [prompt], "labels": [label]}` (labels from
`--label_key`; the query decoded again from the prompt's and the response's tokens), within a 180 s timeout,
five tries one second apart whatever the answer said (Retry-After is not read); a sample with no answer after
them has no reward and fails the training step. It reads `{"rewards", "scores", "extra_logs"}`: rewards for
the advantages, scores in [0, 1] for dynamic filtering, extra_logs per-sample numbers for its logger. A file
defines `reward_func(queries, prompts, labels, **kwargs)` returning the same keys as tensors
(https://github.com/OpenRLHF/OpenRLHF, README "Reinforced Fine-tuning"; openrlhf 0.11.2,
openrlhf/utils/agent.py, `SingleTurnAgentExecutor.execute` and `_fetch_rewards_via_http`).

So the route never answers a sample with a 4xx, and waits rather than refuses:

- A full queue is waited out here, the oldest request first, for up to ADMISSION_WAIT_S, below the client's
  timeout; only then is it answered 429 (and OpenRLHF's next try waits again). A judgment still running when
  the client gives up goes on, and the client's next try shares it or finds it stored.
- A sample it cannot judge scores NO_REWARD_VALUE with its reason as a per-sample flag in extra_logs, and is
  logged: a label that names no task the server can use (`kerneljudge_bad_label`), a query in which its
  prompt is not found (`kerneljudge_prompt_mismatch`).
- A response with no code (empty, or no Python defining ModelNew) is the candidate's failure, not sent: it
  scores as an unverified candidate (-1 under reward v2), `kerneljudge_no_code` 1. A no-code answer must not
  score NO_REWARD_VALUE, which under v2 is a verified kernel's reward.
- Only the server's own fault (the judge raised) is a 5xx, which OpenRLHF tries again.

The label is the task (an id such as builtin:NAME, or its source). The response is the query after its
prompt, never the query whole, since a KernelBench-style prompt carries an example `ModelNew` of its own that
would otherwise be judged when the response has no code. OpenRLHF keeps a long prompt's last tokens and
decodes prompt and response together, so the prompt may be cut at its start or spelled differently; where it
is not found whole, the longest end of it the query holds (at least MIN_PROMPT_TAIL_CHARS) marks where the
response begins, then the same without whitespace (`kerneljudge_prompt_inexact` 1). The reward is
`kerneljudge.reward.v2` (the server's mode, policy and timing); the score is 1 for a verified kernel, else 0.
A judgment without reward (the judge's own fault, or UNSUPPORTED) gets NO_REWARD_VALUE and
`kerneljudge_rewarded` 0, since OpenRLHF trains on every reward it gets.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from kerneljudge.api.outcomes import AdapterError, Outcome, first_error, task_fields
from kerneljudge.api.schema import MAX_ITEMS, MAX_SOURCE_CHARS, Answer, Item, Options
from kerneljudge.sources.candidate import extract_code

logger = logging.getLogger(__name__)

NO_REWARD_VALUE = 0.0
OPTIONS = Options()  # reward v2; the server's mode, policy and timing
# The shortest end of a prompt taken as the place its response begins: shorter ones occur by chance.
MIN_PROMPT_TAIL_CHARS = 32
# The flags in extra_logs (1 or 0 a sample) for the samples not judged, by the reason given them.
REASON_FLAGS = {
    "bad_label": "kerneljudge_bad_label",
    "prompt_mismatch": "kerneljudge_prompt_mismatch",
    "no_code": "kerneljudge_no_code",
}
CANDIDATE_NAMES = re.compile(r"\b(ModelNew|custom_kernel)\b")  # a KernelBench candidate, or a GPU MODE one
# The lists' lengths are checked before their elements (one error, not one per element); a query is a
# prompt and a response, each at most the schema's cap on a text.
Prompt = Annotated[str, StringConstraints(max_length=MAX_SOURCE_CHARS)]
Query = Annotated[str, StringConstraints(max_length=2 * MAX_SOURCE_CHARS)]


class RewardRequest(BaseModel):
    """OpenRLHF's body; fields it may add later are ignored."""

    model_config = ConfigDict(extra="ignore")

    query: Annotated[list[Query], Field(max_length=MAX_ITEMS)]
    prompts: Annotated[list[Prompt], Field(max_length=MAX_ITEMS)]
    labels: Annotated[list[Any], Field(max_length=MAX_ITEMS)]

    @model_validator(mode="after")
    def _same_lengths(self) -> RewardRequest:
        if not len(self.query) == len(self.prompts) == len(self.labels):
            lengths = f"{len(self.query)} queries, {len(self.prompts)} prompts, {len(self.labels)} labels"
            raise ValueError(f"query, prompts and labels must be as long as each other; got {lengths}")
        return self


class RewardResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]


@dataclass(frozen=True)
class Sample:
    """One query as the adapter reads it: the item to judge, or the outcome it gets without a judgment."""

    item: Item | None
    outcome: Outcome | None
    inexact: bool = False  # its prompt was found only by its end, or without whitespace


def response_after_prompt(query: str, prompt: str) -> tuple[str, bool] | None:
    """The model's response in `query` and whether its prompt was found other than whole; None when the query
    holds neither the prompt nor an end of it of MIN_PROMPT_TAIL_CHARS, as written or without whitespace."""
    at = query.find(prompt)
    if at >= 0:
        return query[at + len(prompt) :], False
    end = _tail_end(query, prompt)
    if end is None:
        kept = [index for index, char in enumerate(query) if not char.isspace()]
        squeezed_query = "".join(query[index] for index in kept)
        squeezed_prompt = "".join(char for char in prompt if not char.isspace())
        at = squeezed_query.find(squeezed_prompt) if squeezed_prompt else -1
        squeezed_end = at + len(squeezed_prompt) if at >= 0 else _tail_end(squeezed_query, squeezed_prompt)
        if not squeezed_end:
            return None
        end = kept[squeezed_end - 1] + 1
    return query[end:], True


def _tail_end(query: str, prompt: str) -> int | None:
    """Where the longest end of `prompt` found in `query` ends there (its last place: what follows is the
    response whatever the prompt holds before); None below MIN_PROMPT_TAIL_CHARS. An end found means each
    shorter end is found too, so the length is searched by halves."""
    shortest = min(MIN_PROMPT_TAIL_CHARS, len(prompt))
    if shortest == 0 or prompt[-shortest:] not in query:
        return None
    low, high = shortest, len(prompt)  # found at low; the answer is in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if prompt[-middle:] in query:
            low = middle
        else:
            high = middle - 1
    return query.rfind(prompt[-low:]) + low


def has_code(response: str) -> bool:
    """The response holds a candidate: the code the judge would take from it names ModelNew (or, for a GPU
    MODE task, custom_kernel). Without one the judge could only fail it."""
    code, _ = extract_code(response)
    return CANDIDATE_NAMES.search(code) is not None


def unjudged(reason: str, explanation: str) -> Outcome:
    """A sample the adapter does not send: no reward (NO_REWARD_VALUE), `reason` its flag's key."""
    return Outcome(None, True, "UNJUDGED", reason, explanation, None, None)


def sample_of(index: int, query: str, prompt: str, label: Any, options: Options = OPTIONS) -> Sample:
    """What to do with one query: judge its response against its label's task, or score it without judging."""
    try:
        fields = task_fields(label)
    except AdapterError as exc:
        return Sample(None, unjudged("bad_label", f"sample {index}: {exc}"))
    found = response_after_prompt(query, prompt)
    if found is None:
        why = f"sample {index}: the query holds neither its prompt nor its prompt's last {MIN_PROMPT_TAIL_CHARS} "
        return Sample(None, unjudged("prompt_mismatch", why + "characters (as written or without whitespace)"))
    response, inexact = found
    if not response.strip():
        return Sample(None, Outcome.empty(options.reward_spec), inexact)
    failed = Outcome.empty(options.reward_spec)  # an unverified candidate's outcome, as an empty one's
    if len(response) > MAX_SOURCE_CHARS:
        explanation = f"FAIL: the response is over the {MAX_SOURCE_CHARS} characters a candidate may have."
        return Sample(None, replace(failed, failure_kind="response_too_long", explanation=explanation), inexact)
    if not has_code(response):
        explanation = "FAIL: the response has no Python code defining ModelNew."
        return Sample(None, replace(failed, failure_kind="no_code", explanation=explanation), inexact)
    try:
        item = Item(**fields, candidate=response, options=options)
    except ValidationError as exc:  # a task id or text over its cap
        return Sample(None, unjudged("bad_label", f"sample {index}: {first_error(exc)}"), inexact)
    return Sample(item, None, inexact)


def samples_of(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]) -> list[Sample]:
    samples = [sample_of(index, *row) for index, row in enumerate(zip(queries, prompts, labels, strict=True), 1)]
    for sample in samples:
        if sample.outcome is not None and sample.outcome.status == "UNJUDGED":
            logger.warning("get_reward: scored %s unjudged: %s", NO_REWARD_VALUE, sample.outcome.explanation)
    if any(sample.inexact for sample in samples):
        logger.info("get_reward: %d prompts found by their end only", sum(sample.inexact for sample in samples))
    return samples


def outcomes_of(samples: Sequence[Sample], judged: Sequence[Answer | str]) -> list[Outcome]:
    """Each sample's outcome: its own, its answer's, or (a refusal's one line) a bad label's."""
    answers = iter(judged)
    outcomes = []
    for sample in samples:
        if sample.outcome is not None:
            outcomes.append(sample.outcome)
            continue
        answer = next(answers)
        outcomes.append(unjudged("bad_label", answer) if isinstance(answer, str) else Outcome.of(answer))
    return outcomes


def reward_response(outcomes: Sequence[Outcome], samples: Sequence[Sample]) -> RewardResponse:
    """OpenRLHF's answer: the rewards, the scores, and per sample: verified, rewarded, valid, each reason's
    flag (an empty response counts as no code), and whether its prompt was found only inexactly."""
    flags = {
        key: [float(o.failure_kind in (reason, "empty_response" if reason == "no_code" else reason)) for o in outcomes]
        for reason, key in REASON_FLAGS.items()
    }
    return RewardResponse(
        rewards=[NO_REWARD_VALUE if o.reward is None else o.reward for o in outcomes],
        scores=[float(o.verified) for o in outcomes],
        extra_logs={
            "kerneljudge_verified": [float(o.verified) for o in outcomes],
            "kerneljudge_rewarded": [float(o.reward is not None) for o in outcomes],
            "kerneljudge_valid": [float(o.valid) for o in outcomes],
            **flags,
            "kerneljudge_prompt_inexact": [float(sample.inexact) for sample in samples],
        },
    )
