"""A server that groups (`kerneljudge serve --group-size N`, `Service(group_size=...)`): a request's new judgments of
one task and configuration handed to the backend as groups (judgment/group.py), each answered as its record is made;
and the local judge's `KJ_JUDGE_GROUP_SIZE`."""

from __future__ import annotations

import asyncio

import pytest

from helpers import EXAMPLES
from kerneljudge.client import LocalJudge
from kerneljudge.client.local import GROUP_SIZE_ENV, group_size_from_env
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.results.store import StoreKey
from kerneljudge.runs.backends import Job
from kerneljudge.runs.backends.local import LocalBackend
from kerneljudge.serve import get_reward
from kerneljudge.serve.get_reward import Gathered
from kerneljudge.serve.service import QueueFull, Service

CONFIG = JudgeConfig(device="cpu", timing=False, policy="practical", timeout_s=90.0)
TASK_TEXT = (EXAMPLES / "softmax" / "reference.py").read_text()
HONEST = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
HONEST += "        return torch.softmax(x, dim=-1)\n"
CAPPED = HONEST.replace("x, dim=-1)", "x[:, :512], dim=-1).repeat(1, 2)[:, :1000]")  # wrong past column 512


def test_a_requests_judgments_are_grouped_by_task_and_configuration_in_its_order(tmp_path):
    service = Service(LocalBackend(), tmp_path / "s.db", CONFIG, queue=None, group_size=2)
    try:
        keys = {
            f"d{i}": (Job(None, None, None), StoreKey(task, f"c{i}", config, "env"))  # type: ignore[arg-type]
            for i, (task, config) in enumerate([("A", "x"), ("B", "x"), ("A", "x"), ("A", "y"), ("A", "x")])
        }
        assert [[digest for digest, _, _ in group] for group in service._groups(keys)] == [
            ["d0", "d2"],
            ["d1"],
            ["d3"],
            ["d4"],
        ]
    finally:
        service.close()
    with pytest.raises(UsageError, match="--group-size"):
        Service(LocalBackend(), tmp_path / "t.db", CONFIG, group_size=0)


def test_a_local_judge_that_groups_judges_a_calls_samples_of_a_task_together(tmp_path):
    items = [{"task_source": TASK_TEXT, "candidate": text} for text in (HONEST, CAPPED, HONEST + "# again\n")]
    with LocalJudge(LocalBackend(), tmp_path / "s.db", CONFIG, group_size=8) as judge:
        answers = judge.judge(items)
        records = [judge.service.record(answer.record_id) for answer in answers]
    assert [a.status for a in answers] == ["PASS", "FAIL", "PASS"]
    assert [r.workers.group.index for r in records] == [0, 1, 2]
    assert len({r.workers.group.id for r in records}) == 1 and {r.workers.checked for r in records} == {"group"}


def test_the_local_judges_group_size_comes_from_its_variable_or_a_one_line_error(monkeypatch):
    monkeypatch.delenv(GROUP_SIZE_ENV, raising=False)
    assert group_size_from_env() is None
    monkeypatch.setenv(GROUP_SIZE_ENV, "16")
    assert group_size_from_env() == 16
    for bad in ("0", "-2", "eight"):
        monkeypatch.setenv(GROUP_SIZE_ENV, bad)
        with pytest.raises(UsageError, match=GROUP_SIZE_ENV) as raised:
            group_size_from_env()
        assert "\n" not in str(raised.value)


class Line:
    """An admission line that answers each item with its own text, and notes the items of each call."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.fail = fail

    async def judge(self, items, deadline):
        self.calls.append(list(items))
        if self.fail:
            raise QueueFull("no room", retry_after_s=1)
        return [f"answer {item}" for item in items]


def test_get_reward_requests_side_by_side_are_admitted_as_one_where_the_server_groups():
    """OpenRLHF posts one sample a request: a grouping server gathers the requests of a moment (`Gathered`), so that
    their samples of one task can be judged as a group; each request gets its own answers."""

    async def side_by_side(gathered, parts):
        return await asyncio.gather(*(gathered.judge(part) for part in parts))

    line = Line()
    answers = asyncio.run(side_by_side(Gathered(line, 0.05), [["a"], ["b", "c"], ["d"]]))
    assert line.calls == [["a", "b", "c", "d"]]
    assert answers == [["answer a"], ["answer b", "answer c"], ["answer d"]]
    alone = Line()
    assert asyncio.run(side_by_side(Gathered(alone, 0.0), [["a"], ["b"]])) == [["answer a"], ["answer b"]]
    assert alone.calls == [["a"], ["b"]]  # a server that does not group admits each request as it comes
    full = Line(fail=True)
    with pytest.raises(QueueFull):
        asyncio.run(side_by_side(Gathered(full, 0.05), [["a"], ["b"]]))
    assert full.calls == [["a", "b"]]


def test_the_reward_route_gathers_only_where_the_server_groups(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(get_reward, "Gathered", lambda line, window_s: made.append(window_s) or object())
    for size in (None, 1, 8):
        service = Service(LocalBackend(), tmp_path / f"s{size}.db", CONFIG, queue=None, group_size=size)
        try:
            get_reward.reward_router(service)
        finally:
            service.close()
    assert made == [0.0, 0.0, get_reward.GATHER_S]
