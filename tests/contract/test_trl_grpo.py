"""TRL's GRPO trainer, the real package, rewarded by `kerneljudge serve` (docs/adapters.md, TRL).

A tiny randomly initialised causal LM trains for three steps on the CPU. Its samples are scripted (GRPOTrainer's
own `rollout_func` hook hands the trainer the token ids of known responses: an honest kernel, a wrong one, two
reward hacks and an empty answer), so each completion's reward is known in advance; the reward is
`KernelJudgeReward(url=...)` against a `kerneljudge serve` process started from the command line, exactly as a
user runs it. The test checks that every step finishes, that each completion got the judge's reward for what it
is, and that TRL logged the adapter's metrics (`log_metric`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed (pip install 'kerneljudge[dev]')")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
datasets = pytest.importorskip("datasets")

from kerneljudge.adapters.trl import KernelJudgeReward  # noqa: E402
from kerneljudge.redteam import FIXTURES_DIR, TASKS_DIR  # noqa: E402

TASK = (TASKS_DIR / "bias_relu.py").read_text()
PROMPT = "Write a faster ModelNew for this architecture:\n\n"


def fenced(name: str) -> str:
    return f"Here is my kernel:\n\n```python\n{(FIXTURES_DIR / name).read_text()}```\n"


# (response, the reward kerneljudge.reward.binary.v1 gives it: 1 for a verified kernel, else 0)
SCRIPTED = [
    (fenced("honest_torch.py"), 1.0),
    (fenced("constant_output.py"), 0.0),  # wrong
    (fenced("patch_allclose.py"), 0.0),  # a hack: the comparisons patched
    (fenced("cache_by_content.py"), 0.0),  # a hack: outputs cached by their inputs' content
    ("I cannot write this kernel.", 0.0),  # no code
    (fenced("honest_torch.py"), 1.0),  # a duplicate: answered from the server's store
]
GENERATIONS = 6
STEPS = 3


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`kerneljudge serve` on the CPU, correctness only, the practical policy (the honest fixture is plain torch)."""
    folder = tmp_path_factory.mktemp("grpo")
    port = free_port()
    command = [sys.executable, "-m", "kerneljudge", "serve", "--store", str(folder / "rewards.db"), "--port"]
    command += [str(port), "--device", "cpu", "--no-timing", "--policy", "practical", "--jobs", "2"]
    log = (folder / "serve.log").open("w")
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    )
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None:
            raise RuntimeError(f"kerneljudge serve exited: {(folder / 'serve.log').read_text()[-2000:]}")
        time.sleep(0.25)
    else:
        process.kill()
        raise RuntimeError("kerneljudge serve did not become ready in 60 s")
    yield url
    process.terminate()
    process.wait(30)
    log.close()


def byte_tokenizer():
    """A byte-level BPE tokenizer made here (no Hub download): any text round-trips through it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    model = Tokenizer(models.BPE())
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    model.train_from_iterator([PROMPT, TASK] + [text for text, _ in SCRIPTED], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=model, pad_token="<pad>", eos_token="<eos>")


def test_grpo_trains_three_steps_on_the_judges_rewards(server, tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func, the hook that scripts the samples
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = byte_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    dataset = datasets.Dataset.from_list([{"prompt": PROMPT + TASK, "task": TASK}] * STEPS)
    served: list[list[str]] = []

    def rollout(prompts, trainer):
        """The policy's samples, scripted: each prompt's generations are SCRIPTED in turn."""
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        texts = [SCRIPTED[i % len(SCRIPTED)][0] for i in range(len(prompts))]
        served.append(texts)
        completion_ids = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in texts]
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}

    reward = KernelJudgeReward(url=server, reward_spec="kerneljudge.reward.binary.v1")
    rewarded: list[list[float | None]] = []

    def kerneljudge(prompts, completions, **columns):  # TRL's call, recorded
        rewarded.append(reward(prompts, completions, **columns))
        return rewarded[-1]

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=GENERATIONS,
        num_generations=GENERATIONS,
        max_completion_length=2048,
        max_steps=STEPS,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[kerneljudge],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    result = trainer.train()
    assert result.global_step == STEPS and len(rewarded) == STEPS
    # TRL decoded the scripted ids back to the responses, and each got the judge's reward for what it is.
    expected = [SCRIPTED[i % len(SCRIPTED)][1] for i in range(GENERATIONS)]
    assert rewarded == [expected] * STEPS
    statuses = [o.status for o in reward.last]
    assert statuses[0] == "PASS" and statuses[1:5] == ["FAIL"] * 4, [(o.status, o.failure_kind) for o in reward.last]
    # The rewards reached the trainer's logs: the mean reward of each step, and the adapter's own metrics.
    logged = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert len(logged) == STEPS
    assert all(entry["reward"] == pytest.approx(sum(expected) / GENERATIONS) for entry in logged)
    assert all(entry.get("kerneljudge/verified") == pytest.approx(2 / GENERATIONS) for entry in logged), logged[0]


def test_the_tokenizer_round_trips_every_scripted_response():
    tokenizer = byte_tokenizer()
    for text, _ in SCRIPTED:
        assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text
