"""TRL's reward function: a callable for `GRPOTrainer(reward_funcs=[KernelJudgeReward()])` (docs/adapters.md).

GRPOTrainer calls each reward function as `f(prompts=..., completions=..., **columns)`: one entry per
generation, every dataset column but "prompt" passed as a keyword list of the same length, with
`completion_ids`, `trainer_state`, and the callables `log_metric(name, value)` and `log_extra(column,
values)`, and reads back a list of floats in which None means "no reward from this function" (it becomes NaN
and is left out of the weighted sum); it names the function in its logs by `__name__` (trl 1.16.0,
trl/trainer/grpo_trainer.py, `GRPOTrainer._calculate_rewards`; https://huggingface.co/docs/trl/main/en/grpo_trainer,
"Using a custom reward function"). A completion is a string, or, for a conversational dataset, a list holding
the assistant's message.

So the task is a dataset column (`task` by default), and a judgment without reward (the judge's own fault,
or UNSUPPORTED) is None: TRL drops it instead of training on a reward the candidate did not earn. Each call
logs, where TRL gives the callables, the share of its completions verified and rewarded (`NAME/verified`,
`NAME/rewarded`, averaged by TRL over its logging steps) and each completion's verdict as a column of the
completions table (`NAME_verdict`). The whole batch goes to the judge in one call; a server's client
(`serve.client.RemoteJudge`) splits it to what the server admits at once and retries what is safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kerneljudge.api.outcomes import AdapterError, Judge, Outcome, as_options, response_text, score
from kerneljudge.client import default_judge
from kerneljudge.results.reward import REWARD_V2


class KernelJudgeReward:
    """The judge as a TRL reward function.

    `task_column`: the dataset column holding each row's task (an id such as builtin:NAME, or the task's
    source). `url`: a `kerneljudge serve` (else `KJ_JUDGE_URL`, else a judge in this process). `options`:
    mode, policy, timing for every item. `last` keeps the latest call's outcomes, for logging.
    """

    def __init__(
        self,
        task_column: str = "task",
        *,
        url: str | None = None,
        reward_spec: str = REWARD_V2,
        options: Mapping[str, Any] | None = None,
        judge: Judge | None = None,
        name: str = "kerneljudge",
    ) -> None:
        self.task_column = task_column
        self.url = url
        self.options = as_options(options, reward_spec)
        self._judge = judge
        self.__name__ = name
        self.last: list[Outcome] = []

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float | None]:
        if self.task_column not in columns:
            given = ", ".join(sorted(columns)) or "none"
            raise AdapterError(
                f"no dataset column {self.task_column!r} with each row's task (columns passed: {given}); "
                "add one, or name yours with KernelJudgeReward(task_column=...)"
            )
        judge = self._judge or default_judge(self.url)
        self.last = score(judge, columns[self.task_column], [response_text(c) for c in completions], self.options)
        self._log(columns.get("log_metric"), columns.get("log_extra"))
        return [outcome.reward for outcome in self.last]

    def _log(self, log_metric: Any, log_extra: Any) -> None:
        """This call's figures to TRL's logs, through the callables TRL 1.x passes (absent before it)."""
        if not self.last:
            return
        if callable(log_metric):
            log_metric(f"{self.__name__}/verified", sum(o.verified for o in self.last) / len(self.last))
            log_metric(f"{self.__name__}/rewarded", sum(o.reward is not None for o in self.last) / len(self.last))
        if callable(log_extra):
            log_extra(f"{self.__name__}_verdict", [verdict(outcome) for outcome in self.last])


def verdict(outcome: Outcome) -> str:
    """A completion's verdict in a word or two: its status, and its failure kind where it failed."""
    return f"{outcome.status} {outcome.failure_kind}" if outcome.failure_kind else outcome.status
