"""OpenRLHF: its remote reward model's request, to a running server's /get_reward or to the reward file form.

    kerneljudge serve --store rewards.db --no-timing &
    python examples/adapters/openrlhf_reward.py --url http://127.0.0.1:8000   # POST /get_reward
    python examples/adapters/openrlhf_reward.py                               # reward_func, a judge in process

In training (docs/adapters.md): --remote_rm_url http://HOST:8000/get_reward --label_key task (a dataset
column holding each row's task), or --remote_rm_url <kerneljudge/adapters/openrlhf.py>.
"""

import argparse
import json

from samples import PROMPT, RESPONSES, TASK

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--url", help="a kerneljudge serve; default: reward_func with a judge in this process")
args = parser.parse_args()
body = {
    "query": [PROMPT + text for text in RESPONSES],
    "prompts": [PROMPT] * len(RESPONSES),
    "labels": [TASK] * len(RESPONSES),
}

if args.url:
    import httpx

    response = httpx.post(args.url.rstrip("/") + "/get_reward", json=body, timeout=3600)
    response.raise_for_status()
    print(json.dumps(response.json()))
else:
    from kerneljudge.adapters.openrlhf import reward_func

    result = reward_func(body["query"], body["prompts"], body["labels"])
    print({key: value.tolist() for key, value in result.items() if key != "extra_logs"})
