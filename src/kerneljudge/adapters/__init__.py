"""The judge as a reward in the shapes trainers already call (docs/adapters.md).

One module per trainer, each reaching the judge through client/ and api/ only (never serve/):

- `verl.py`: `compute_score(data_source, solution_str, ground_truth, extra_info)` and `compute_score_batch`;
- `trl.py`: `KernelJudgeReward`, a reward function for `GRPOTrainer(reward_funcs=[...])`;
- `openrlhf.py`: `reward_func`, OpenRLHF's reward-file form (its `POST /get_reward` is the server's own route,
  serve/get_reward.py; the contract both follow is api/openrlhf.py);
- `verifiers_env.py`: `load_environment(...)`, a verifiers 0.3 `SingleTurnEnv` whose rubric calls the judge;
- `verifiers_v1.py`: a `verifiers.v1` taskset whose reward is the judge (verifiers 0.4);
- `batching.py`: rewards asked one coroutine at a time (verl's reward loop, verifiers' rubrics) sent in one request.

What they share, a row's task, the judge that answers and the `Outcome` each maps to its trainer's score, is
api/outcomes.py, re-exported here. Each sends a step's samples in as few requests as its trainer allows; a judge
that groups a request's samples of one task (`kerneljudge serve --group-size N`, or `KJ_JUDGE_GROUP_SIZE` for the
judge in the trainer's process) judges them as groups (judgment/group.py). They need the `serve` extra (its client
and service); the verifiers environments need the `verifiers` extra.
"""

from kerneljudge.api.outcomes import AdapterError, Outcome, score
from kerneljudge.client import default_judge

__all__ = ["AdapterError", "Outcome", "default_judge", "score"]
