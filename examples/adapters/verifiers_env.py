"""verifiers: the environment's rubric scoring a rollout, made here without a model (docs/adapters.md).

    pip install 'kerneljudge[verifiers]'
    python examples/adapters/verifiers_env.py                              # a judge in this process
    python examples/adapters/verifiers_env.py --url http://127.0.0.1:8000  # a running `kerneljudge serve`

In training or evaluation: load_environment(tasks=[...], judge_url=...) from kerneljudge.adapters.verifiers_env,
e.g. behind an environment module's own `load_environment`.
"""

import argparse
import asyncio

from samples import EXAMPLE, OPTIONS, RESPONSES

from kerneljudge.adapters.verifiers_env import load_environment

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--url", help="a kerneljudge serve; default: KJ_JUDGE_URL, else a judge in this process")
args = parser.parse_args()

env = load_environment(tasks=[str(EXAMPLE / "reference.py")], judge_url=args.url, options=OPTIONS)
row = env.dataset[0]
print("prompt:", row["prompt"][-1]["content"][:70].replace("\n", " "), "...")
for text in RESPONSES:
    state = {"prompt": row["prompt"], "completion": [{"role": "assistant", "content": text}], "trajectory": []}
    state.update(answer=row["answer"], info=row["info"])
    asyncio.run(env.rubric.score_rollout(state))
    print("reward", state["reward"], state["kerneljudge"]["status"])
