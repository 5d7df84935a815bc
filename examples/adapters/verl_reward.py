"""verl: the calls verl 0.9's reward loop makes to a custom reward function, made here without verl.

    python examples/adapters/verl_reward.py                              # a judge in this process
    python examples/adapters/verl_reward.py --url http://127.0.0.1:8000  # a running `kerneljudge serve`

In training (docs/adapters.md): reward.custom_reward_function.path=pkg://kerneljudge.adapters.verl
reward.custom_reward_function.name=compute_score_async (compute_score with reward.reward_manager.name=remote),
+reward.custom_reward_function.reward_kwargs.url=URL, the task in each row's reward_model.ground_truth.
"""

import argparse
import asyncio

from samples import OPTIONS, RESPONSES, TASK

from kerneljudge.adapters.verl import compute_score, compute_score_async

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--url", help="a kerneljudge serve; default: KJ_JUDGE_URL, else a judge in this process")
args = parser.parse_args()
reward_kwargs = {"url": args.url, "options": OPTIONS}  # verl passes custom_reward_function.reward_kwargs so

# verl's naive reward manager, for a plain function: one call per response, from its thread pool.
one = compute_score(data_source="kernelbench", solution_str=RESPONSES[0], ground_truth=TASK, extra_info={}, **reward_kwargs)
print("compute_score:", {key: one[key] for key in ("score", "status", "verified")})


async def reward_worker() -> list[dict]:
    """A reward loop worker: one coroutine per response, gathered (these become one judge request)."""
    calls = [
        compute_score_async(data_source="kernelbench", solution_str=text, ground_truth=TASK, extra_info={"index": i},
                            **reward_kwargs)
        for i, text in enumerate(RESPONSES)
    ]
    return await asyncio.gather(*calls)


for result in asyncio.run(reward_worker()):
    print("compute_score_async:", {key: result[key] for key in ("score", "status", "failure_kind")})
