"""verl's custom reward function: per sample (sync and async) and per batch (docs/adapters.md).

verl 0.9 computes rewards in its reward loop (verl/experimental/reward_loop): each reward worker runs one
coroutine per sample through its reward manager (`naive` by default; `dapo`, `gdpo`, `rate_limited`,
`remote`), which calls the function named by `reward.custom_reward_function.path` and `.name` (not the
top-level `custom_reward_function.*` keys, which `main_ppo` no longer reads) with the keywords
`data_source`, `solution_str` (the decoded response), `ground_truth` (the row's
`reward_model.ground_truth`) and `extra_info`, plus `reward.custom_reward_function.reward_kwargs`
(verl/trainer/ppo/reward.py). A coroutine function is awaited on the worker's event loop and a plain one
runs in its thread pool; the `remote` manager runs a plain one in Ray worker processes (no coroutines).

- `compute_score`: the plain per-sample function (every manager, `remote` included).
- `compute_score_async`: the coroutine verl recommends for a reward behind a service. Calls that arrive
  on one event loop within `batch_window_s` of each other are judged in one request, as a batch reward
  manager would send them, and the wait holds one thread of the loop's pool per request, not per sample.
- `compute_score_batch`: the plural form of a `batch` reward manager (verl before the reward loop, and
  later versions that register one): `data_sources=`, `solution_strs=`, `ground_truths=`, `extra_infos=`.

A returned dict's "score" is the reward; every other key is gathered per sample into verl's
`reward_extra_info`, which verl requires to have the same keys in every dict and which its validation
metrics average (string values are skipped). So the extra keys are always present, numbers or strings,
never None. verl needs a number for every sample (a missing score is an error in its reward managers), so a
judgment without reward (the judge's own fault, or UNSUPPORTED) scores `no_reward_score` (default 0.0; a
`reward_kwargs` entry changes it) and says `rewarded: False` beside it.

This file imports only kerneljudge: verl loads it as `pkg://kerneljudge.adapters.verl` (or by file path).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kerneljudge.adapters.batching import batcher_for
from kerneljudge.api.outcomes import Judge, Outcome, as_options, score
from kerneljudge.client import default_judge
from kerneljudge.results.reward import REWARD_V2


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


async def compute_score_async(
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
    batch_window_s: float = 0.05,
    **kwargs: Any,
) -> dict[str, Any]:
    """`compute_score` as a coroutine: this response joins the others that reach this event loop within
    `batch_window_s` (a reward worker's samples, or rollouts finishing together) in one judge request."""
    chosen = as_options(options, reward_spec)
    batcher = batcher_for(judge or default_judge(url), chosen, batch_window_s)
    outcome = await batcher.score(ground_truth, str(solution_str))
    return score_dict(outcome, no_reward_score)


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
