"""TRL: the call GRPOTrainer makes to a reward function, made here without TRL (docs/adapters.md).

    python examples/adapters/trl_reward.py                              # a judge in this process
    python examples/adapters/trl_reward.py --url http://127.0.0.1:8000  # a running `kerneljudge serve`

In training: GRPOTrainer(..., reward_funcs=[KernelJudgeReward(task_column="task")], train_dataset=dataset),
with a conversational dataset whose "task" column holds each row's task.
"""

import argparse

from samples import OPTIONS, PROMPT, RESPONSES, TASK

from kerneljudge.adapters.trl import KernelJudgeReward

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--url", help="a kerneljudge serve; default: KJ_JUDGE_URL, else a judge in this process")
args = parser.parse_args()

reward = KernelJudgeReward(task_column="task", url=args.url, options=OPTIONS)
prompts = [[{"role": "user", "content": PROMPT}]] * len(RESPONSES)
completions = [[{"role": "assistant", "content": text}] for text in RESPONSES]
rewards = reward(prompts=prompts, completions=completions, task=[TASK] * len(RESPONSES), completion_ids=None)
for value, outcome in zip(rewards, reward.last, strict=True):
    print(f"{reward.__name__}: reward {value}, {outcome.status} {outcome.failure_kind or ''}".rstrip())
