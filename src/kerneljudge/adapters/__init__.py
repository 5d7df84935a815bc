"""The judge as a reward in the shapes trainers already call (docs/adapters.md).

One module per trainer, each importing only kerneljudge (the trainers' call shapes are all they need):

- `verl`: `compute_score(data_source, solution_str, ground_truth, extra_info)` and `compute_score_batch`;
- `trl`: `KernelJudgeReward`, a reward function for `GRPOTrainer(reward_funcs=[...])`;
- `openrlhf`: `POST /get_reward` on `kerneljudge serve` (`reward_router`), and `reward_func` for a file;
- `verifiers_env`: `load_environment(...)`, a verifiers `SingleTurnEnv` whose rubric calls the judge;
- `common`: a row's task, the judge (a server at `url`/`KJ_JUDGE_URL`, else one in this process) and the
  `Outcome` each adapter maps to its trainer's score.

They need the `serve` extra (its client and service); the verifiers environment needs the `verifiers` extra.
"""

from kerneljudge.api.outcomes import AdapterError, Outcome, score
from kerneljudge.client import default_judge

__all__ = ["AdapterError", "Outcome", "default_judge", "score"]
