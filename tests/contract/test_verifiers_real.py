"""kerneljudge's verifiers taskset inside `verifiers.v1` (verifiers 0.4.0; 0.3.1 ships it too), on the CPU.

The environment is built as `vf eval` and prime-rl build it: the `[env]` table a user writes (taskset id
`kerneljudge-verifiers`) narrowed by `resolve_env_config` and constructed by `load_environment`, which
imports the taskset package by id. Each rollout's trace is made as verifiers' rollout makes it (the task's
data, a user turn and the model's sampled reply) and scored by `Task.score`, the call a rollout ends with.
The judge is `ScriptedJudge`, so the test measures verifiers' calls, not judgments.
"""

from __future__ import annotations

import asyncio

import pytest

vf = pytest.importorskip("verifiers.v1", reason="verifiers 0.4 is not installed: pip install 'verifiers==0.4.0'")

from scripted_judge import ScriptedJudge, response  # noqa: E402
from verifiers.v1.trace import AgentInfo, TraceTask  # noqa: E402

from helpers import TASKS  # noqa: E402
from kerneljudge.adapters import verifiers_v1  # noqa: E402

URL = "http://judge-host:8000"
ENV = {  # the [env] table of a verifiers TOML config (or --env.taskset.* flags)
    "taskset": {
        "id": "kerneljudge-verifiers",
        "tasks": ["builtin:rmsnorm_fp32", str(TASKS / "tiny_bias_relu.py")],
        "task": {"judge_url": URL, "reward_spec": "kerneljudge.reward.binary.v1", "no_reward_score": 0.25},
    }
}


@pytest.fixture
def judge(monkeypatch) -> ScriptedJudge:
    scripted, asked = ScriptedJudge(), []
    monkeypatch.setattr(verifiers_v1, "default_judge", lambda url=None: asked.append(url) or scripted)
    scripted.urls_asked = asked
    return scripted


def rollout_trace(task, reply: str):
    """A finished rollout's trace, as `verifiers.v1.rollout` records it: the prompt, then the sampled reply."""
    trace = vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=AgentInfo(config=vf.AgentConfig()),
    )
    trace.nodes.append(vf.MessageNode(message=vf.UserMessage(content=task.data.prompt)))
    trace.nodes.append(vf.MessageNode(parent=0, message=vf.AssistantMessage(content=reply), sampled=True))
    return trace


def test_the_taskset_loads_by_id_and_scores_rollouts(judge):
    env = vf.load_environment(vf.resolve_env_config(ENV))
    tasks = list(env.taskset)
    assert [task.data.name for task in tasks] == ["rmsnorm_fp32", "bias_relu"]
    assert tasks[0].data.task == "builtin:rmsnorm_fp32"
    assert tasks[1].data.task == (TASKS / "tiny_bias_relu.py").read_text()
    assert "class Model(nn.Module)" in tasks[1].data.prompt and "ModelNew" in tasks[1].data.prompt

    replies = [response("a"), response("WRONG b"), "", response("BROKEN c")]
    traces = [rollout_trace(tasks[i % 2], reply) for i, reply in enumerate(replies)]

    async def score_group() -> None:  # a group's rollouts finish and are scored concurrently
        await asyncio.gather(*(tasks[i % 2].score(trace) for i, trace in enumerate(traces)))

    asyncio.run(score_group())
    assert [trace.reward for trace in traces] == [1.0, 0.0, 0.0, 0.25]
    assert [trace.rewards["kerneljudge"].weight for trace in traces] == [1.0] * 4
    assert [trace.info["kerneljudge"]["status"] for trace in traces] == ["PASS", "FAIL", "FAIL", "ERROR"]
    assert [trace.metrics["kerneljudge_verified"] for trace in traces] == [1.0, 0.0, 0.0, 0.0]
    assert [trace.metrics["kerneljudge_rewarded"] for trace in traces] == [1.0, 1.0, 1.0, 0.0]
    assert set(judge.urls_asked) == {URL}
    assert sorted(judge.items_judged) == sorted(reply.strip() for reply in replies if reply)  # the empty one: not sent
    sent = {item.task or item.task_source for request in judge.requests for item in request}
    assert sent == {tasks[0].data.task, tasks[1].data.task}


def test_a_bad_task_is_one_line_when_the_taskset_loads(tmp_path):
    env = vf.load_environment(
        vf.resolve_env_config({"taskset": {"id": "kerneljudge-verifiers", "tasks": [str(tmp_path / "none.py")]}})
    )
    with pytest.raises(Exception, match="none.py") as raised:
        list(env.taskset)
    assert "\n" not in str(raised.value)
