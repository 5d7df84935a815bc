"""kerneljudge.adapters.verl inside verl's own reward loop (verl 0.9.1), on the CPU.

The configuration is composed from verl's `ppo_trainer.yaml` with the overrides docs/adapters.md tells a
user to type, and the batch goes through the objects `main_ppo` builds: a `RewardLoopWorker` (its reward
manager, loaded by `load_reward_manager`, decodes each response with the tokenizer at the model path and
calls our function) and `RewardLoopManager.compute_rm_score`, which places each score at the response's
last token. Only Ray's transport is left out: the worker runs in this process, and `ray.get` hands back
what it returned. The judge is `ScriptedJudge`, so the tests measure verl's calls, not judgments.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

verl = pytest.importorskip("verl", reason="verl is not installed: pip install 'verl==0.9.1'")

import cloudpickle  # noqa: E402 (verl's own dependency, through ray)
import numpy as np  # noqa: E402
import ray  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from scripted_judge import ScriptedJudge, response  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.reward_loop import reward_loop  # noqa: E402
from verl.trainer.ppo.reward import extract_reward, get_custom_reward_fn, resolve_reward_manager_cls  # noqa: E402

from kerneljudge.adapters import verl as adapter  # noqa: E402

TASK = "builtin:rmsnorm_fp32"
URL = "http://judge-host:8000"
PROMPT_LENGTH, RESPONSE_LENGTH = 8, 160


def user_overrides(function: str, manager: str = "naive") -> list[str]:
    """What docs/adapters.md tells a user to add to `python -m verl.trainer.main_ppo`."""
    return [
        "reward.custom_reward_function.path=pkg://kerneljudge.adapters.verl",
        f"reward.custom_reward_function.name={function}",
        f"+reward.custom_reward_function.reward_kwargs.url={URL}",
        "+reward.custom_reward_function.reward_kwargs.reward_spec=kerneljudge.reward.binary.v1",
        f"reward.reward_manager.name={manager}",
    ]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """A byte-level tokenizer with no merges, saved as a model directory (decoding gives back the text)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={char: i for i, char in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    path = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>", pad_token="<pad>").save_pretrained(path)
    return path


def trainer_config(tokenizer_dir: Path, overrides: list[str]):
    """verl's PPO configuration as `main_ppo` gets it from Hydra, resolved as its task runner resolves it."""
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        config = compose(
            config_name="ppo_trainer", overrides=[*overrides, f"actor_rollout_ref.model.path={tokenizer_dir}"]
        )
    OmegaConf.resolve(config)
    return config


def rollout_batch(tokenizer, texts: list[str]) -> DataProto:
    """A rollout's output as the reward loop receives it: left-padded prompts, right-padded responses."""
    rows = len(texts)
    responses = torch.full((rows, RESPONSE_LENGTH), tokenizer.pad_token_id)
    mask = torch.zeros((rows, PROMPT_LENGTH + RESPONSE_LENGTH), dtype=torch.long)
    mask[:, PROMPT_LENGTH - 3 : PROMPT_LENGTH] = 1
    for row, text in enumerate(texts):
        ids = tokenizer.encode(text, add_special_tokens=False)[: RESPONSE_LENGTH - 1] + [tokenizer.eos_token_id]
        responses[row, : len(ids)] = torch.tensor(ids)
        mask[row, PROMPT_LENGTH : PROMPT_LENGTH + len(ids)] = 1
    prompts = torch.full((rows, PROMPT_LENGTH), tokenizer.pad_token_id)
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["kernelbench"] * rows, dtype=object),
            "reward_model": np.array([{"ground_truth": TASK, "style": "rule"}] * rows, dtype=object),
            "extra_info": np.array([{"index": row} for row in range(rows)], dtype=object),
        },
    )


class InProcessWorker:
    """A reward loop worker's actor handle, without Ray: `.compute_score_batch.remote(chunk)` runs it here."""

    def __init__(self, worker, loop: asyncio.AbstractEventLoop) -> None:
        self.worker, self.loop = worker, loop

    @property
    def compute_score_batch(self):
        return self

    def remote(self, chunk: DataProto):
        return self.loop.run_until_complete(self.worker.compute_score_batch(chunk))


@pytest.fixture
def judge(monkeypatch) -> ScriptedJudge:
    """The scripted judge, standing where the adapter asks for the judge at the configured url."""
    scripted, asked = ScriptedJudge(), []
    monkeypatch.setattr(adapter, "default_judge", lambda url=None: asked.append(url) or scripted)
    scripted.urls_asked = asked
    return scripted


def reward_loop_output(config, texts: list[str], monkeypatch) -> tuple[DataProto, object]:
    """`RewardLoopManager.compute_rm_score` over one in-process `RewardLoopWorker`, as the trainer calls it."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # the worker and its reward manager bind the loop current at construction
    try:
        worker = reward_loop.RewardLoopWorker(config)
        manager = object.__new__(reward_loop.RewardLoopManager)
        manager.config, manager.reward_model_manager = config, None
        manager.reward_manager_cls = resolve_reward_manager_cls(config)
        manager.reward_loop_workers = [InProcessWorker(worker, loop)]
        monkeypatch.setattr(ray, "get", lambda refs: refs)
        data = rollout_batch(worker.input_tokenizer, texts)
        return manager.compute_rm_score(data), data
    finally:
        asyncio.set_event_loop(None)
        loop.close()


@pytest.mark.parametrize(
    ("function", "manager"),
    [("compute_score_async", "naive"), ("compute_score", "naive"), ("compute_score_async", "rate_limited")],
)
def test_rewards_land_where_the_trainer_reads_them(function, manager, tokenizer_dir, judge, monkeypatch):
    config = trainer_config(tokenizer_dir, user_overrides(function, manager))
    texts = [response("a"), response("WRONG b"), "", response("BROKEN c")]
    output, data = reward_loop_output(config, texts, monkeypatch)

    reward_tensor, extra = extract_reward(output)  # what RayPPOTrainer reads
    last = data.batch["attention_mask"][:, PROMPT_LENGTH:].sum(dim=1) - 1
    assert reward_tensor.shape == (4, RESPONSE_LENGTH)
    assert reward_tensor[torch.arange(4), last].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert reward_tensor.sum(dim=1).tolist() == [1.0, 0.0, 0.0, 0.0]  # nothing anywhere else
    assert list(extra["status"]) == ["PASS", "FAIL", "FAIL", "ERROR"]
    assert list(extra["failure_kind"]) == ["", "tolerance", "empty_response", "judge_error"]
    assert list(extra["rewarded"]) == [True, True, True, False] and list(extra["valid"]) == [True] * 3 + [False]
    assert {"score", "verified", "record_id", "explanation"} <= set(output.meta_info["reward_extra_keys"])

    assert set(judge.urls_asked) == {URL}  # reward_kwargs reached the adapter
    assert sorted(judge.items_judged) == sorted(text for text in texts if text)  # decoded back whole
    assert all(
        item.task == TASK and item.options.reward_spec == "kerneljudge.reward.binary.v1"
        for request in judge.requests
        for item in request
    )
    if (function, manager) == ("compute_score_async", "naive"):
        assert len(judge.requests) == 1  # the worker's concurrent samples went as one request
    else:  # one request per sample: verl's thread pool, or rate_limited's default max_concurrent of 1
        assert len(judge.requests) == 3


def test_the_remote_manager_gets_a_function_it_can_ship(tokenizer_dir):
    """`remote` runs the plain function in Ray worker processes: what `get_custom_reward_fn` returns is
    pickled to them, which `pkg://` makes a reference to this module rather than a copy of it."""
    config = trainer_config(tokenizer_dir, user_overrides("compute_score", "remote"))
    reward_fn = get_custom_reward_fn(config)
    shipped = cloudpickle.loads(cloudpickle.dumps(reward_fn))
    assert shipped.args[0] is adapter.compute_score and shipped.args[1]["url"] == URL
    assert resolve_reward_manager_cls(config).__name__ == "RemoteRewardManager"


def test_what_verl_091_no_longer_reads(tokenizer_dir):
    """The keys older docs gave: top-level `custom_reward_function.*` and `reward_model.reward_manager` stay
    out of `reward.*` (main_ppo does not migrate them), and the reward loop has no `batch` reward manager."""
    legacy = [
        "custom_reward_function.path=pkg://kerneljudge.adapters.verl",
        "custom_reward_function.name=compute_score_batch",
        "reward_model.reward_manager=batch",
    ]
    config = trainer_config(tokenizer_dir, legacy)
    assert config.reward.custom_reward_function.path is None and get_custom_reward_fn(config) is None
    assert config.reward.reward_manager.name == "naive"  # verl's default scorer would run, silently
    batch = trainer_config(tokenizer_dir, ["reward.reward_manager.name=batch"])
    with pytest.raises(ValueError, match="Unknown reward manager: batch"):
        resolve_reward_manager_cls(batch)
