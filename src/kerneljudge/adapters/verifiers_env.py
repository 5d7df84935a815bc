"""A `verifiers` 0.3 environment whose rubric is the judge (docs/adapters.md); 0.4's is `verifiers_v1`.

verifiers (Prime Intellect's RL environment library) 0.3 loads an environment by calling a module's
`load_environment(**args)`; a single-turn one is `vf.SingleTurnEnv(dataset=..., rubric=...)` whose dataset
rows carry a `question` (made into the chat prompt), an `answer` and an `info` dict, and whose `vf.Rubric`
calls each reward function with the keywords it names (`completion`, `answer`, `info`, `state`, ...)
and awaits it if it is async (https://docs.primeintellect.ai/verifiers/environments). That is the classic
API, `import verifiers as vf`. verifiers 0.4 removed it for `verifiers.v1`, which loads tasksets by id: the
taskset `kerneljudge-verifiers` (kerneljudge/adapters/verifiers_v1.py) builds its tasks with `task_row`.

Public KernelBench environments for verifiers score with KernelBench's own evaluation, which runs the
candidate in the scoring process; here the rubric sends each completion to kerneljudge (a server at
`judge_url`, else `KJ_JUDGE_URL`, else a judge in this process), whose workers are sandboxed. A row's prompt
is `kerneljudge generate`'s KernelBench-style prompt (kerneljudge/generate/prompts.py) and its `answer` the
task (an id, or the task's source for a task file). A rubric needs a number, so a judgment without reward
(the judge's own fault, or UNSUPPORTED) scores `no_reward_score`; the whole outcome is kept in
`state["kerneljudge"]`. The rollouts whose rewards are asked within `batch_window_s` of each other go to the
judge in one request (adapters/batching.py), from a thread, so rollouts keep being scored concurrently and a
judge that groups a request's samples of one task judges a step's rollouts as groups.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kerneljudge.adapters.batching import batcher_for
from kerneljudge.api.outcomes import Judge, as_options, response_text
from kerneljudge.client import default_judge
from kerneljudge.errors import UsageError
from kerneljudge.results.reward import REWARD_V2


def load_environment(
    tasks: Sequence[str] | None = None,
    judge_url: str | None = None,
    *,
    reward_spec: str = REWARD_V2,
    no_reward_score: float = 0.0,
    options: Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
    judge: Judge | None = None,
    batch_window_s: float = 0.05,
    **env_args: Any,
) -> Any:
    """A `vf.SingleTurnEnv` over `tasks`: `builtin:NAME` ids or KernelBench task files (default: the whole
    built-in suite). `env_args` go to `SingleTurnEnv` (e.g. `eval_dataset`, `sampling_args`)."""
    vf = _require("verifiers")
    datasets = _require("datasets")
    if not hasattr(vf, "SingleTurnEnv"):  # verifiers 0.4 kept only verifiers.v1
        raise UsageError(
            f"verifiers {vf.__version__} has no SingleTurnEnv (0.4 loads tasksets by id): "
            "use the taskset kerneljudge-verifiers (--env.taskset.id kerneljudge-verifiers), or verifiers<0.4"
        )
    chosen = as_options(options, reward_spec)

    async def kernel_reward(completion: Any, answer: str, state: dict, **kwargs: Any) -> float:
        """The judge's reward for this completion against the row's task, judged in one request with the rollouts
        that finish with it (adapters/batching.py)."""
        batcher = batcher_for(judge or default_judge(judge_url), chosen, batch_window_s)
        outcome = await batcher.score(answer, response_text(completion))
        state["kerneljudge"] = dataclasses.asdict(outcome)
        return no_reward_score if outcome.reward is None else outcome.reward

    rows = [task_row(task) for task in (tasks or builtin_ids())]
    rubric = vf.Rubric(funcs=[kernel_reward], weights=[1.0])
    return vf.SingleTurnEnv(
        dataset=datasets.Dataset.from_list(rows), system_prompt=system_prompt, rubric=rubric, **env_args
    )


def task_row(task: str) -> dict[str, Any]:
    """A dataset row: the generation prompt, the task the judge is sent as `answer`, and its name."""
    from kerneljudge.generate.prompts import generation_prompt, prompt_template
    from kerneljudge.tasks.load import load_builtin, load_kernelbench

    loaded = load_builtin(task) if task.startswith("builtin:") else load_kernelbench(Path(task))
    reference = task if task.startswith("builtin:") else loaded.text
    return {
        "question": generation_prompt(prompt_template(), loaded.text, loaded.name),
        "answer": reference,
        "info": {"task_name": loaded.name},
    }


def builtin_ids() -> list[str]:
    from kerneljudge.suite import SUITE

    return [f"builtin:{task.name}" for task in SUITE]


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"the verifiers environment needs {module}: pip install 'kerneljudge[verifiers]'") from None
