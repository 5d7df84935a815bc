"""A `verifiers.v1` taskset whose reward is the judge (docs/adapters.md): verifiers 0.4 (and 0.3.1, which ships
`verifiers.v1` beside its classic API).

verifiers.v1 loads a taskset by id (`--env.taskset.id`, or `[env.taskset] id` in TOML): an installed
package exporting its `vf.Taskset` subclass in `__all__`, whose `load()` yields `vf.Task`s; each task's
`@vf.reward` coroutines are called with the finished `vf.Trace` and their floats recorded in
`trace.rewards` (verifiers/v1/task.py, `Task.score`). The id is `kerneljudge-verifiers` (the package
`kerneljudge_verifiers` re-exports `KernelTaskset`): verifiers 0.4's loader takes an id's last part as one
module name, so a dotted path into kerneljudge cannot name it.

A task's prompt is `kerneljudge generate`'s KernelBench-style prompt and its `task` field the task sent to the
judge, as in the classic environment (`verifiers_env.task_row`). The reward, `kerneljudge`, sends the trace's last
reply to the judge (a server at `task.judge_url`, else `KJ_JUDGE_URL`, else a judge in this process) in one request
with the replies whose rewards are asked within `task.batch_window_s` (adapters/batching.py), from a worker thread;
a judgment without reward scores `no_reward_score`; the whole outcome is kept in `trace.info["kerneljudge"]` and
`kerneljudge_verified` / `kerneljudge_rewarded` are recorded as metrics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from kerneljudge.adapters.batching import batcher_for
from kerneljudge.adapters.verifiers_env import builtin_ids, task_row
from kerneljudge.api.outcomes import as_options
from kerneljudge.client import default_judge
from kerneljudge.results.reward import REWARD_V2

__all__ = ["KernelTaskset"]


class KernelData(vf.TaskData):
    task: str
    """The task the judge is sent: an id (`builtin:NAME`) or a KernelBench task's source."""


class KernelTaskConfig(vf.TaskConfig):
    """How every task is judged (`--env.taskset.task.*`)."""

    judge_url: str | None = None
    """A `kerneljudge serve`; unset: `KJ_JUDGE_URL`, else a judge in this process."""
    reward_spec: str = REWARD_V2
    no_reward_score: float = 0.0
    """The reward of a judgment that gives none (the judge's own fault, or UNSUPPORTED)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Judge options for every item: mode, policy, timing."""
    batch_window_s: float = 0.05
    """Rewards asked within this many seconds of each other go to the judge in one request (adapters/batching.py)."""


class KernelTask(vf.Task[KernelData, vf.State, KernelTaskConfig]):
    @vf.reward
    async def kerneljudge(self, trace: vf.Trace) -> float:
        """The judge's reward for the trace's last reply against this task."""
        chosen = as_options(self.config.options, self.config.reward_spec)
        batcher = batcher_for(default_judge(self.config.judge_url), chosen, self.config.batch_window_s)
        outcome = await batcher.score(self.data.task, trace.last_reply)
        trace.info["kerneljudge"] = dataclasses.asdict(outcome)
        trace.record_metrics(
            {"kerneljudge_verified": outcome.verified, "kerneljudge_rewarded": outcome.reward is not None}
        )
        return self.config.no_reward_score if outcome.reward is None else outcome.reward


class KernelTasksetConfig(vf.TasksetConfig):
    tasks: list[str] = Field(default_factory=list)
    """`builtin:NAME` ids or KernelBench task files; empty: the whole built-in suite."""
    task: KernelTaskConfig = KernelTaskConfig()


class KernelTaskset(vf.Taskset[KernelTask, KernelTasksetConfig]):
    def load(self) -> Iterator[KernelTask]:
        for reference in self.config.tasks or builtin_ids():
            row = task_row(reference)
            data = KernelData(name=row["info"]["task_name"], prompt=row["question"], task=row["answer"])
            yield KernelTask(data, self.config.task)
