"""verl: the calls its reward managers make to a custom reward function, made here without verl.

    python examples/adapters/verl_reward.py                              # a judge in this process
    python examples/adapters/verl_reward.py --url http://127.0.0.1:8000  # a running `kerneljudge serve`

In training (docs/adapters.md): custom_reward_function.path=<kerneljudge/adapters/verl.py>
custom_reward_function.name=compute_score (or compute_score_batch with reward_model.reward_manager=batch),
the task in each row's reward_model.ground_truth.
"""

import argparse

from samples import OPTIONS, RESPONSES, TASK

from kerneljudge.adapters.verl import compute_score, compute_score_batch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--url", help="a kerneljudge serve; default: KJ_JUDGE_URL, else a judge in this process")
args = parser.parse_args()
reward_kwargs = {"url": args.url, "options": OPTIONS}  # verl passes custom_reward_function.reward_kwargs so

one = compute_score("kernelbench", RESPONSES[0], TASK, {"index": 0}, **reward_kwargs)
print("naive:", {key: one[key] for key in ("score", "status", "verified")})
batch = compute_score_batch(
    data_sources=["kernelbench"] * len(RESPONSES),
    solution_strs=RESPONSES,
    ground_truths=[TASK] * len(RESPONSES),
    extra_infos=[{"index": i} for i in range(len(RESPONSES))],
    **reward_kwargs,
)
for result in batch:
    print("batch:", {key: result[key] for key in ("score", "status", "failure_kind")})
