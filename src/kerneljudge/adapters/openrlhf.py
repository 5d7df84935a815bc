"""OpenRLHF's reward-file form of the judge: `--remote_rm_url path/to/kerneljudge/adapters/openrlhf.py`, whose
`reward_func(queries, prompts, labels, **kwargs)` returns the keys OpenRLHF reads (rewards, scores, extra_logs)
as tensors. The judge is the server at `KJ_JUDGE_URL`, else one in this process (client/local.py). The samples
are cut, judged and scored as `POST /get_reward` does (api/openrlhf.py has the contract and its reasons).
"""

from __future__ import annotations

import logging
from typing import Any

from kerneljudge.api.openrlhf import NO_REWARD_VALUE, outcomes_of, reward_response, samples_of
from kerneljudge.api.outcomes import AdapterError, Judge
from kerneljudge.api.schema import Answer, Item
from kerneljudge.client import default_judge
from kerneljudge.errors import KernelJudgeError

logger = logging.getLogger(__name__)
# The answers that refuse the items (a label that names no task the judge can use), over HTTP or in process.
REFUSED_STATUSES = (400, 404, 409, 422)


def judged_each(judge: Judge, items: list[Item]) -> list[Answer | str]:
    """The judge's answers; where it refuses the items (a label that names no task it can use), each item
    alone, a refused one its refusal's one line."""
    try:
        return list(judge.judge(items))
    except KernelJudgeError as exc:
        status = getattr(exc, "status", None) or getattr(exc, "http_status", None)
        refused = status in REFUSED_STATUSES
        if not refused:
            raise
        if len(items) > 1:
            return [entry for item in items for entry in judged_each(judge, [item])]
        logger.warning("reward_func: scored %s unjudged, refused: %s", NO_REWARD_VALUE, exc)
        return [str(exc)]


def reward_func(queries: list[str], prompts: list[str], labels: list[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's reward-file form (`--remote_rm_url this_file.py`): the judge at `KJ_JUDGE_URL`, else one in
    this process; the same values as the route, as tensors."""
    import torch

    if not len(queries) == len(prompts) == len(labels):
        raise AdapterError(f"{len(queries)} queries, {len(prompts)} prompts, {len(labels)} labels: give one each")
    samples = samples_of(queries, prompts, labels)
    items = [sample.item for sample in samples if sample.item is not None]
    judged = judged_each(default_judge(), items) if items else []
    result = reward_response(outcomes_of(samples, judged), samples)
    return {
        "rewards": torch.tensor(result.rewards),
        "scores": torch.tensor(result.scores),
        "extra_logs": {key: torch.tensor(values) for key, values in result.extra_logs.items()},
    }
