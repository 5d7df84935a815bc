"""verl's custom reward function, in its single and batch forms (docs/adapters.md).

verl loads a reward function from a file (`custom_reward_function.path`, `.name`) and calls it with the
row's `data_source`, the decoded response (`solution_str`), the row's `reward_model.ground_truth` and its
`extra_info`, plus the config's `custom_reward_function.reward_kwargs` as keywords
(https://verl.readthedocs.io/en/latest/preparation/reward_function.html; verl/trainer/ppo/reward.py).
Its batch reward manager (`reward_model.reward_manager=batch`, verl/workers/reward_manager/batch.py) calls
one function with the plural names: `data_sources=`, `solution_strs=`, `ground_truths=`, `extra_infos=`.

A returned dict's "score" is the reward; every other key is gathered per sample into verl's
`reward_extra_info`, which verl requires to have the same keys in every dict and which its validation
metrics average (string values are skipped). So the extra keys are always present, numbers or strings,
never None. verl needs a number for every sample (a missing score is an error in its reward managers), so a
judgment without reward (the judge's own fault, or UNSUPPORTED) scores `no_reward_score` (default 0.0; a
`reward_kwargs` entry changes it) and says `rewarded: False` beside it.

This file imports only kerneljudge: verl can load it by path (its module name is verl's choice).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kerneljudge.adapters.common import Judge, Outcome, as_options, default_judge, score
from kerneljudge.reward import REWARD_V2


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    url: str | None = None,
    reward_spec: str = REWARD_V2,
    no_reward_score: float = 0.0,
    options: Mapping[str, Any] | None = None,
    judge: Judge | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """One response's score dict: `ground_truth` is the task (an id such as builtin:NAME, or its source)."""
    (result,) = compute_score_batch(
        [data_source],
        [solution_str],
        [ground_truth],
        [extra_info],
        url=url,
        reward_spec=reward_spec,
        no_reward_score=no_reward_score,
        options=options,
        judge=judge,
    )
    return result


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    *,
    url: str | None = None,
    reward_spec: str = REWARD_V2,
    no_reward_score: float = 0.0,
    options: Mapping[str, Any] | None = None,
    judge: Judge | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """A score dict per response, judged in one request. `data_sources` and `extra_infos` are verl's and
    not read: the task is the ground truth. `url`: a `kerneljudge serve` (else `KJ_JUDGE_URL`, else a
    judge in this process); `options`: mode, policy, timing for every item."""
    outcomes = score(
        judge or default_judge(url),
        list(ground_truths),
        [str(text) for text in solution_strs],
        as_options(options, reward_spec),
    )
    return [score_dict(outcome, no_reward_score) for outcome in outcomes]


def score_dict(outcome: Outcome, no_reward_score: float) -> dict[str, Any]:
    """verl's dict: "score", then the same extra keys for every sample (numbers and strings, no None)."""
    return {
        "score": no_reward_score if outcome.reward is None else outcome.reward,
        "rewarded": outcome.reward is not None,
        "valid": outcome.valid,
        "verified": outcome.verified,
        "status": outcome.status,
        "failure_kind": outcome.failure_kind or "",
        "record_id": outcome.record_id or "",
        "explanation": outcome.explanation,
    }
