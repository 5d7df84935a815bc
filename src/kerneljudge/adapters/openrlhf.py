"""OpenRLHF's remote reward model: `POST /get_reward` on `kerneljudge serve`, and the same as a reward file.

OpenRLHF's `--remote_rm_url` is an HTTP endpoint or a Python file. To an endpoint it posts
`{"query": [prompt + response, ...], "prompts": [prompt, ...], "labels": [label, ...]}` (labels from
`--label_key`) and reads `{"rewards": [...], "scores": [...], "extra_logs": {...}}`: rewards for the
advantages, scores in [0, 1] for dynamic filtering, extra_logs per-sample numbers for its logger. A file
defines `reward_func(queries, prompts, labels, **kwargs)` returning the same keys as tensors
(https://github.com/OpenRLHF/OpenRLHF, README "Reinforced Fine-tuning" and openrlhf/utils/remote_rm_utils.py).

Here the label is the task (an id such as builtin:NAME, or its source). The response is the query after its
prompt: the query is searched for the prompt, never judged whole, since a KernelBench-style prompt carries an
example `ModelNew` of its own that would otherwise be judged when the response has no code. The reward is
`kerneljudge.reward.v2` (the server's mode, policy and timing); the score is 1 for a verified kernel, else 0.
OpenRLHF trains on every reward it gets, so a judgment without reward (the judge's own fault, or
UNSUPPORTED) gets NO_REWARD_VALUE, 0, and `kerneljudge_rewarded` 0 in extra_logs says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from starlette.concurrency import run_in_threadpool

from kerneljudge.adapters.common import AdapterError, Outcome, build_items, default_judge, merge, score
from kerneljudge.serve.schema import MAX_ITEMS, MAX_SOURCE_CHARS, Options
from kerneljudge.serve.service import BadRequest, Service

NO_REWARD_VALUE = 0.0
OPTIONS = Options()  # reward v2; the server's mode, policy and timing
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


def responses_of(queries: Sequence[str], prompts: Sequence[str]) -> list[str]:
    """Each query's text after its prompt; AdapterError when a query does not contain its prompt."""
    responses = []
    for index, (query, prompt) in enumerate(zip(queries, prompts, strict=True), start=1):
        at = query.find(prompt)
        if at < 0:
            raise AdapterError(
                f"item {index}: the query does not contain its prompt; send each prompt as OpenRLHF does, "
                "the text the query begins with"
            )
        responses.append(query[at + len(prompt) :])
    return responses


def reward_response(outcomes: Sequence[Outcome]) -> RewardResponse:
    return RewardResponse(
        rewards=[NO_REWARD_VALUE if o.reward is None else o.reward for o in outcomes],
        scores=[float(o.verified) for o in outcomes],
        extra_logs={
            "kerneljudge_verified": [float(o.verified) for o in outcomes],
            "kerneljudge_rewarded": [float(o.reward is not None) for o in outcomes],
            "kerneljudge_valid": [float(o.valid) for o in outcomes],
        },
    )


def reward_router(service: Service) -> APIRouter:
    """`POST /get_reward` over the server's service (wired into `serve.app.create_app`)."""
    from kerneljudge.serve.app import ERRORS, answer

    router = APIRouter()

    @router.post("/get_reward", response_model=RewardResponse, responses=ERRORS, tags=["adapters"])
    async def get_reward(body: RewardRequest) -> RewardResponse:
        """OpenRLHF's remote reward model: a reward per query, judged against its label's task."""
        try:
            items, rows = build_items(body.labels, responses_of(body.query, body.prompts), OPTIONS)
        except AdapterError as exc:
            raise BadRequest(str(exc)) from None
        answers = []
        if items:
            tickets = await run_in_threadpool(service.submit, items)
            answers = await asyncio.gather(*(answer(index, t) for index, t in enumerate(tickets, start=1)))
        return reward_response(merge(answers, rows, len(body.query), OPTIONS.reward_spec))

    return router


def reward_func(queries: list[str], prompts: list[str], labels: list[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's reward-file form (`--remote_rm_url this_file.py`): the judge at `KJ_JUDGE_URL`, else one in
    this process; the same values as the route, as tensors."""
    import torch

    outcomes = score(default_judge(), labels, responses_of(queries, prompts), OPTIONS)
    result = reward_response(outcomes)
    return {
        "rewards": torch.tensor(result.rewards),
        "scores": torch.tensor(result.scores),
        "extra_logs": {key: torch.tensor(values) for key, values in result.extra_logs.items()},
    }
