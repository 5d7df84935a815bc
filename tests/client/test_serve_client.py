"""`RemoteJudge` (kerneljudge/api/client.py) against a scripted server (httpx.MockTransport): what it sends
again and what it does not, with the same items each time; how long it waits; how it splits a batch."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from email.utils import format_datetime

import httpx
import pytest

from kerneljudge.client.remote import RemoteError, RemoteJudge, retry_after_s

ITEMS = [{"task": "builtin:softmax_fp32", "candidate": f"class ModelNew: pass  # {n}"} for n in range(10)]
NOW = 1_800_000_000.0


def answer(item: dict) -> dict:
    metrics = {"correct": True, "trials": 1, "trials_passed": 1, "timed": False, "duration_s": 1.0}
    return {
        "request_id": item.get("request_id"),
        "reward": 0.0,
        "reward_spec": "kerneljudge.reward.v2",
        "valid": True,
        "status": "PASS",
        "failure_kind": None,
        "failure_reason": None,
        "findings": [],
        "metrics": metrics,
        "record_id": "r-" + item["candidate"][-1],
        "explanation": "PASS",
    }


class Script:
    """A server that answers /v1/judge from a list of scripted replies, then judges; /healthz as told."""

    def __init__(self, replies=(), health: dict | None = None) -> None:
        self.replies = list(replies)
        self.health = health
        self.bodies: list[list[dict]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/healthz":
            return httpx.Response(200, json=self.health) if self.health else httpx.Response(404, json={"detail": "no"})
        body = json.loads(request.content)
        self.bodies.append(body)
        if self.replies:
            reply = self.replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            return reply
        return httpx.Response(200, json=[answer(item) for item in body])


def judge_of(script: Script, **kwargs) -> tuple[RemoteJudge, list[float]]:
    slept: list[float] = []
    client = httpx.Client(transport=httpx.MockTransport(script))
    judge = RemoteJudge("http://judge", client=client, sleep=slept.append, clock=lambda: NOW, **kwargs)
    return judge, slept


def problem(status: int, code: str, detail: str, **headers: str) -> httpx.Response:
    body = {"type": f"urn:kerneljudge:problem:{code}", "title": code, "status": status, "detail": detail, "code": code}
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json", **headers})


def test_what_is_safe_is_sent_again_with_the_same_items_as_the_server_or_a_backoff_says():
    request = httpx.Request("POST", "http://judge/v1/judge")
    date = format_datetime(datetime.fromtimestamp(NOW + 7, timezone.utc), usegmt=True)
    script = Script(
        [
            problem(429, "queue_full", "the queue is full", **{"Retry-After": "3"}),
            problem(503, "shutting_down", "shutting down", **{"Retry-After": date}),
            httpx.Response(502, text="bad gateway"),
            httpx.ConnectError("connection refused", request=request),
            httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request),
            httpx.ReadTimeout("timed out", request=request),
            problem(500, "judge_fault", "item 1: the judge failed"),
        ]
    )
    judge, slept = judge_of(script)
    answers = judge.judge(ITEMS[:2])
    assert slept == [3.0, 7.0, 4.0, 8.0, 16.0, 30.0, 30.0]  # Retry-After's seconds and date, else doubling to 30
    assert len(script.bodies) == 8 and all(body == script.bodies[0] for body in script.bodies)
    ids = [item["request_id"] for item in script.bodies[0]]
    assert len(set(ids)) == 2 and all(rid.startswith("kj-") for rid in ids)  # made before the first try
    assert [a.request_id for a in answers] == [None, None]  # the items' own ids, which they had none of
    assert judge.judge(ITEMS[:2]) and script.bodies[-1] == script.bodies[0]  # the same content, the same ids
    other, _ = judge_of(Script())
    other.judge(ITEMS[:1])  # another client salts its ids: a later run never meets this one's


def test_a_refusal_is_not_sent_again_and_its_problem_detail_is_read_old_bodies_too():
    judge, slept = judge_of(Script([problem(400, "unknown_task", "item 1: no task 'builtin:x'")]))
    with pytest.raises(RemoteError, match=r"^HTTP 400: item 1: no task 'builtin:x'$") as caught:
        judge.judge(ITEMS[:1])
    assert (caught.value.status, caught.value.code, slept) == (400, "unknown_task", [])
    judge, _ = judge_of(Script([httpx.Response(409, json={"detail": "item 1: request_id reused"})]))
    with pytest.raises(RemoteError, match="request_id reused") as caught:
        judge.judge([{**ITEMS[0], "request_id": "mine"}])
    assert caught.value.code is None


def test_the_waits_are_bounded_in_all():
    judge, slept = judge_of(Script([problem(429, "queue_full", "full", **{"Retry-After": "30"})] * 10), max_wait_s=70)
    with pytest.raises(RemoteError, match=r"HTTP 429: full \(still so after 4 tries and 70 s of waiting\)"):
        judge.judge(ITEMS[:1])
    assert slept == [30.0, 30.0, 10.0]
    request = httpx.Request("POST", "http://judge/v1/judge")
    judge, slept = judge_of(Script([httpx.ConnectError("refused", request=request)] * 10), max_wait_s=5)
    with pytest.raises(RemoteError, match="ConnectError: refused") as caught:
        judge.judge(ITEMS[:1])
    assert caught.value.status is None and slept == [1.0, 2.0, 2.0]


def test_retry_after_in_seconds_or_as_a_date():
    assert retry_after_s("12", NOW) == 12.0
    assert retry_after_s(format_datetime(datetime.fromtimestamp(NOW + 90, timezone.utc), usegmt=True), NOW) == 90.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", NOW) == 0.0  # past
    assert retry_after_s(None, NOW) is None and retry_after_s("soon", NOW) is None


def test_a_batch_larger_than_the_server_admits_goes_in_parts_and_a_413_in_halves():
    script = Script(health={"status": "ok", "lanes": 2, "capacity": 6, "busy": 0, "waiting": 0, "version": "x"})
    judge, _ = judge_of(script)
    answers = judge.judge(ITEMS)
    assert judge.parts() == (2, 3)  # a lane's worth a request, as many side by side as lanes + queue hold
    assert sorted(len(body) for body in script.bodies) == [2] * 5
    assert [a.record_id for a in answers] == [f"r-{n}" for n in range(10)]  # in the items' order
    too_large = problem(413, "too_large", "this request needs 10 new judgments")
    script = Script([too_large, too_large])  # no /healthz: whole batches, halved while too large
    judge, slept = judge_of(script)
    assert [a.record_id for a in judge.judge(ITEMS)] == [f"r-{n}" for n in range(10)]
    assert [len(body) for body in script.bodies] == [10, 5, 2, 3, 5] and slept == []


def test_a_tasks_items_go_in_the_same_parts_and_come_back_in_the_items_order():
    """A server that groups a request's items of one task (serve --group-size) gets a task's items together."""
    items = [
        {"task": f"builtin:{name}", "candidate": f"class ModelNew: pass  # {n}"}
        for n, name in enumerate(
            ["softmax_fp32", "rmsnorm_fp32", "softmax_fp32", "rmsnorm_fp32", "softmax_fp32", "rmsnorm_fp32"]
        )
    ]
    script = Script(health={"status": "ok", "lanes": 3, "capacity": 9, "busy": 0, "waiting": 0, "version": "x"})
    judge, _ = judge_of(script)
    answers = judge.judge(items)
    assert sorted({item["task"] for item in body} == {body[0]["task"]} for body in script.bodies) == [True, True]
    assert [a.record_id for a in answers] == [f"r-{n}" for n in range(6)]  # in the items' order
