"""verifiers: the kerneljudge environment scoring rollouts, made here without a model (docs/adapters.md).

    pip install 'kerneljudge[verifiers]'
    python examples/adapters/verifiers_env.py                              # a judge in this process
    python examples/adapters/verifiers_env.py --url http://127.0.0.1:8000  # a running `kerneljudge serve`

verifiers 0.4 (`verifiers.v1`): the taskset `kerneljudge-verifiers`, e.g. `--env.taskset.id kerneljudge-verifiers
--env.taskset.task.judge-url URL`; the example loads it as verifiers does and scores each trace with Task.score.
verifiers 0.3: load_environment(tasks=[...], judge_url=...) from kerneljudge.adapters.verifiers_env, whose rubric
scores each rollout.
"""

import argparse
import asyncio

from samples import EXAMPLE, OPTIONS, RESPONSES

import verifiers

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--url", help="a kerneljudge serve; default: KJ_JUDGE_URL, else a judge in this process")
args = parser.parse_args()
TASKS = [str(EXAMPLE / "reference.py")]


def with_verifiers_04() -> None:
    import verifiers.v1 as vf
    from verifiers.v1.trace import AgentInfo, TraceTask

    task_config = {"judge_url": args.url, "options": OPTIONS}
    env = vf.load_environment(
        vf.resolve_env_config({"taskset": {"id": "kerneljudge-verifiers", "tasks": TASKS, "task": task_config}})
    )
    (task,) = env.taskset
    print("prompt:", task.data.prompt[:70].replace("\n", " "), "...")
    for text in RESPONSES:  # a finished rollout's trace: the prompt, then the model's reply
        trace = vf.Trace(task=TraceTask(type="KernelTask", data=task.data), agent=AgentInfo(config=vf.AgentConfig()))
        trace.nodes.append(vf.MessageNode(message=vf.UserMessage(content=task.data.prompt)))
        trace.nodes.append(vf.MessageNode(parent=0, message=vf.AssistantMessage(content=text), sampled=True))
        asyncio.run(task.score(trace))
        print("reward", trace.reward, trace.info["kerneljudge"]["status"])


def with_verifiers_03() -> None:
    from kerneljudge.adapters.verifiers_env import load_environment

    env = load_environment(tasks=TASKS, judge_url=args.url, options=OPTIONS)
    row = env.dataset[0]
    print("prompt:", row["prompt"][-1]["content"][:70].replace("\n", " "), "...")
    for text in RESPONSES:
        state = {"prompt": row["prompt"], "completion": [{"role": "assistant", "content": text}], "trajectory": []}
        state.update(answer=row["answer"], info=row["info"])
        asyncio.run(env.rubric.score_rollout(state))
        print("reward", state["reward"], state["kerneljudge"]["status"])


with_verifiers_03() if hasattr(verifiers, "SingleTurnEnv") else with_verifiers_04()
