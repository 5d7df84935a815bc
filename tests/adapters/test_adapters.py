"""The trainer adapters (kerneljudge/adapters): verl, TRL, OpenRLHF, verifiers, each called with the argument
shapes its trainer uses, against a judge in this process and against a server on loopback.

The mechanics run with `kerneljudge.judgment.pipeline.judge` replaced by `FakeJudge`; one real CPU judgment goes end
to end through TRL's callable; one example script runs as a subprocess against the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest

from helpers import CANDIDATES, EXAMPLES, TASKS, make_record
from kerneljudge.adapters.openrlhf import reward_func
from kerneljudge.adapters.trl import KernelJudgeReward
from kerneljudge.adapters.verl import compute_score, compute_score_batch
from kerneljudge.api.openrlhf import response_after_prompt
from kerneljudge.api.outcomes import AdapterError, response_text, task_fields
from kerneljudge.client import LocalJudge
from kerneljudge.client import local as client_local
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.judgment import pipeline
from kerneljudge.results.reward import REWARD_BINARY_V1
from kerneljudge.results.verdict import Failure, Identity, Record
from kerneljudge.runs.backends.local import LocalBackend
from kerneljudge.serve.app import create_app
from kerneljudge.serve.service import Service

CONFIG = JudgeConfig(device="cpu", timing=False, policy="practical")
MODEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
TASK = "builtin:rmsnorm_fp32"


def response(tag: str) -> str:
    """A model's response around a distinct candidate (WRONG: the fake fails it; BROKEN: the judge's fault)."""
    return f"My kernel:\n```python\n{MODEL}# {tag}\n```\nDone."


class FakeJudge:
    """pipeline.judge's stand-in: PASS, FAIL for WRONG, an invalid ERROR record for BROKEN."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.wrong: set[str] = set()  # whole candidate texts failed too

    def __call__(
        self, task, candidate, config, progress=None, gpu=None, gate=None, baselines=None, spares=None
    ) -> Record:
        self.calls.append(candidate.text)
        if "BROKEN" in candidate.text:
            fault = Failure(kind="judge_error", phase="judge", summary="the reference worker did not start")
            record = make_record(candidate.name, status="ERROR", failure=fault, failure_kind="judge_error")
        elif "WRONG" in candidate.text or candidate.text in self.wrong:
            failure = Failure(kind="tolerance", phase="correctness", summary="output 0: largest error 3.5")
            record = make_record(candidate.name, status="FAIL", failure=failure)
        else:
            record = make_record(candidate.name)
        identities = {"task": Identity(sha256=task.sha256, name=task.name), "config": config.to_dict()}
        return record.model_copy(update={**identities, "candidate": Identity(sha256=candidate.sha256, name="c")})


@pytest.fixture
def fake(monkeypatch) -> FakeJudge:
    judge = FakeJudge()
    monkeypatch.setattr(pipeline, "judge", judge)
    return judge


@pytest.fixture
def local(tmp_path):
    with LocalJudge(LocalBackend(), tmp_path / "local.db", CONFIG) as judge:
        yield judge


@contextlib.contextmanager
def live_server(tmp_path):
    """`kerneljudge serve`'s app under uvicorn on a loopback port, in a thread of this process."""
    import uvicorn

    service = Service(LocalBackend(), tmp_path / "server.db", CONFIG, queue=16)
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        service.close()


@pytest.fixture
def server(tmp_path, fake):
    with live_server(tmp_path) as url:
        yield url


@pytest.fixture(params=["local", "server"])
def where(request, tmp_path, fake) -> dict:
    """How an adapter is pointed at a judge: an explicit local judge, or a server's url."""
    if request.param == "local":
        with LocalJudge(LocalBackend(), tmp_path / "local.db", CONFIG) as judge:
            yield {"judge": judge}
    else:
        with live_server(tmp_path) as url:
            yield {"url": url}


def test_a_rows_task_and_a_completions_text():
    assert task_fields("builtin:softmax_fp32 ") == {"task": "builtin:softmax_fp32"}
    assert task_fields("import torch\nclass Model: ...") == {"task_source": "import torch\nclass Model: ..."}
    assert task_fields({"task_source": "x\ny"}) == {"task_source": "x\ny"}
    for bad in ("", None, {"task": "a", "task_source": "b\nc"}):
        with pytest.raises(AdapterError):
            task_fields(bad)
    assert response_text("plain") == "plain"
    conversation = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    assert response_text(conversation) == "a"
    assert response_text([{"role": "assistant", "content": [{"type": "text", "text": "x"}, {"text": "y"}]}]) == "xy"
    assert response_text([]) == ""


def test_verl_single_and_batch_forms(where, fake):
    one = compute_score("kernelbench", response("a"), TASK, {"index": 0}, **where)
    assert (one["score"], one["status"], one["verified"], one["rewarded"]) == (0.0, "PASS", True, True)
    batch = compute_score_batch(
        data_sources=["kernelbench"] * 4,
        solution_strs=[response("a"), response("WRONG b"), "  ", response("BROKEN c")],
        ground_truths=[TASK] * 4,
        extra_infos=[None] * 4,
        reward_spec=REWARD_BINARY_V1,
        no_reward_score=0.5,
        **where,
    )
    assert [r["score"] for r in batch] == [1.0, 0.0, 0.0, 0.5]
    assert [r["status"] for r in batch] == ["PASS", "FAIL", "FAIL", "ERROR"]
    assert [r["failure_kind"] for r in batch] == ["", "tolerance", "empty_response", "judge_error"]
    assert [(r["rewarded"], r["valid"]) for r in batch] == [(True, True)] * 3 + [(False, False)]
    assert len({tuple(r) for r in batch}) == 1 and all(v is not None for r in batch for v in r.values())
    assert batch[0]["record_id"] == one["record_id"] and batch[2]["record_id"] == ""
    assert batch[1]["explanation"].startswith("FAIL (tolerance)")
    assert len(fake.calls) == 3  # a: judged once, answered again from the store; the empty one never sent


def test_trl_reward_function(where, fake):
    reward = KernelJudgeReward(task_column="kernel_task", reward_spec=REWARD_BINARY_V1, **where)
    completions = [[{"role": "assistant", "content": response(tag)}] for tag in ("a", "WRONG b", "BROKEN c")]
    prompts = [[{"role": "user", "content": "write a kernel"}]] * 3
    metrics, extra = [], []  # GRPOTrainer 1.x passes these callables with every call
    rewards = reward(
        prompts=prompts,
        completions=completions,
        kernel_task=[TASK] * 3,
        completion_ids=[[1]] * 3,
        log_metric=lambda name, value: metrics.append((name, value)),
        log_extra=lambda column, values: extra.append((column, values)),
    )
    assert rewards == [1.0, 0.0, None]  # None: the judge's own fault, dropped by GRPOTrainer
    assert metrics == [("kerneljudge/verified", 1 / 3), ("kerneljudge/rewarded", 2 / 3)]
    assert extra == [("kerneljudge_verdict", ["PASS", "FAIL tolerance", "ERROR judge_error"])]
    assert reward.__name__ == "kerneljudge" and [o.status for o in reward.last] == ["PASS", "FAIL", "ERROR"]
    with pytest.raises(AdapterError, match="no dataset column 'kernel_task'.*columns passed: task"):
        reward(prompts=prompts, completions=completions, task=[TASK] * 3)
    with pytest.raises(AdapterError, match="row 1: task: String should have at most 1000 characters"):
        reward(prompts=prompts[:1], completions=completions[:1], kernel_task=["x" * 2000])


def test_the_judge_named_by_the_environment(server, fake, monkeypatch):
    monkeypatch.setenv(client_local.URL_ENV, server)
    judge = client_local.default_judge()
    assert type(judge).__name__ == "RemoteJudge" and judge.url == server
    assert client_local.default_judge() is judge  # one per process and url
    assert KernelJudgeReward()(prompts=["p"], completions=[response("env")], task=[TASK]) == [0.0]
    assert fake.calls == [f"{MODEL}# env\n"]


def test_openrlhf_route_and_reward_file(server, fake, monkeypatch):
    prompt = "<|user|>Write a kernel with ModelNew:\n```python\nclass ModelNew: pass\n```<|assistant|>"
    queries = [prompt + response(tag) for tag in ("a", "WRONG b")] + [prompt, prompt + response("BROKEN c")]
    queries += [prompt + "I would rather not.", "another prompt entirely" + response("d"), prompt + response("e")]
    body = {"query": queries, "prompts": [prompt] * 7, "labels": [TASK] * 6 + ["builtin:no_such_task"]}
    reply = httpx.post(f"{server}/get_reward", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json() == {
        "rewards": [0.0, -1.0, -1.0, 0.0, -1.0, 0.0, 0.0],
        "scores": [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        "extra_logs": {
            "kerneljudge_verified": [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "kerneljudge_rewarded": [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0],
            "kerneljudge_valid": [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0],
            "kerneljudge_bad_label": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            "kerneljudge_prompt_mismatch": [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
            "kerneljudge_no_code": [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0],  # empty, and prose without code
            "kerneljudge_prompt_inexact": [0.0] * 7,
        },
    }
    assert "class ModelNew: pass" not in "".join(fake.calls)  # the prompt's example was never judged
    assert len(fake.calls) == 3  # a, WRONG b, BROKEN c: nothing else was sent
    short = httpx.post(f"{server}/get_reward", json={**body, "labels": [TASK]}, timeout=60)
    assert short.status_code == 422 and "1 labels" in short.json()["detail"]
    monkeypatch.setenv(client_local.URL_ENV, server)
    result = reward_func(body["query"], body["prompts"], body["labels"])
    assert result["rewards"].tolist() == reply.json()["rewards"]
    assert {key: value.tolist() for key, value in result["extra_logs"].items()} == reply.json()["extra_logs"]


def test_openrlhf_finds_a_prompt_cut_at_its_start_or_spelled_with_other_spaces():
    prompt = "System: you write kernels.\n\nUser: make   relu  faster , please .\nAssistant:"
    reply = "\n```python\nclass ModelNew: ...\n```"
    assert response_after_prompt(prompt + reply, prompt) == (reply, False)
    cut = prompt[-40:]  # OpenRLHF kept the prompt's last tokens
    assert response_after_prompt(cut + reply, prompt) == (reply, True)
    respaced = "System: you write kernels.\nUser: make relu faster, please.\nAssistant:"  # decoded again
    assert response_after_prompt(respaced + reply, prompt) == (reply, True)
    assert response_after_prompt("unrelated text" + reply, prompt) is None
    assert response_after_prompt(prompt[-20:] + reply, prompt) is None  # too short an end to trust
    # Where only an end of the prompt is found, its last place in the query marks the response: a prompt whose
    # end comes twice (before its example ModelNew and at its end) never has its example judged as the response.
    again = "Write your kernel in one fenced Python block, please.\n"
    example = "```python\nclass ModelNew: example\n```."
    prompt = "Intro:" + again + example + again
    query = "Intro:" + again + example[:-1] + "?" + again + "no code here"  # decoded with one character changed
    assert response_after_prompt(query, prompt) == ("no code here", True)


def test_verifiers_environment_scores_a_rollout(local, fake):
    verifiers = pytest.importorskip("verifiers", reason="the verifiers extra is not installed")
    from kerneljudge.adapters.verifiers_env import load_environment

    if not hasattr(verifiers, "SingleTurnEnv"):  # 0.4: the taskset's (tests/contract/test_verifiers_real.py)
        with pytest.raises(UsageError, match="kerneljudge-verifiers"):
            load_environment(judge=local)
        return

    tiny = TASKS / "tiny_bias_relu.py"
    env = load_environment(tasks=[TASK, str(tiny)], judge=local, reward_spec=REWARD_BINARY_V1, no_reward_score=0.25)
    rows = list(env.dataset)
    assert [row["answer"] for row in rows] == [TASK, tiny.read_text()]
    assert (
        "class Model(nn.Module)" in rows[1]["prompt"][-1]["content"] and "ModelNew" in rows[1]["prompt"][-1]["content"]
    )
    assert rows[0]["info"] == {"task_name": "rmsnorm_fp32"}

    async def scored(row: dict, text: str) -> dict:
        completion = [{"role": "assistant", "content": text}]
        state = {"prompt": row["prompt"], "completion": completion, "trajectory": []}  # as a rollout leaves it
        state.update(answer=row["answer"], info=row["info"])
        await env.rubric.score_rollout(state)
        return state

    async def rollouts() -> list[dict]:  # scored concurrently, as verifiers scores a group
        return await asyncio.gather(
            *(scored(rows[i % 2], response(tag)) for i, tag in enumerate(["a", "WRONG", "BROKEN"]))
        )

    states = asyncio.run(rollouts())
    assert [s["reward"] for s in states] == [1.0, 0.0, 0.25]
    assert [s["kerneljudge"]["status"] for s in states] == ["PASS", "FAIL", "ERROR"]
    assert len(fake.calls) == 3


def test_an_adapter_example_runs_against_a_server(server, fake):
    fake.wrong.add((EXAMPLES / "elementwise" / "candidate_wrong.py").read_text())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    script = EXAMPLES / "adapters" / "trl_reward.py"
    done = subprocess.run([sys.executable, str(script), "--url", server], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "kerneljudge: reward 0.0, PASS",
        "kerneljudge: reward -1.0, FAIL tolerance",
        "kerneljudge: reward -1.0, FAIL empty_response",
    ]


def test_a_real_cpu_judgment_through_trl(tmp_path):
    """The fixture task's text in the task column, a conversational completion around an honest candidate."""
    honest = "I fused them:\n```python\n" + (CANDIDATES / "honest_torch.py").read_text() + "```\n"
    with LocalJudge(LocalBackend(), tmp_path / "real.db", CONFIG) as judge:
        reward = KernelJudgeReward(judge=judge, reward_spec=REWARD_BINARY_V1)
        rewards = reward(
            prompts=[[{"role": "user", "content": "write it"}]],
            completions=[[{"role": "assistant", "content": honest}]],
            task=[(TASKS / "tiny_bias_relu.py").read_text()],
        )
    (outcome,) = reward.last
    assert rewards == [1.0] and (outcome.status, outcome.valid) == ("PASS", True), outcome.explanation
    assert outcome.explanation.startswith("PASS") and outcome.record_id
