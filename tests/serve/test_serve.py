"""`kerneljudge serve`: answers over HTTP, idempotency, backpressure, async jobs, bad input, metrics, clients.

The mechanics run with `kerneljudge.judgment.pipeline.judge` replaced by `FakeJudge` (a record per candidate, held
back on demand); one real CPU judgment goes end to end through HTTP.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time

import pytest
from fastapi.testclient import TestClient

from helpers import CANDIDATES, TASKS, make_record
from kerneljudge.api.catalog import TaskCatalog
from kerneljudge.client import LocalJudge, RemoteJudge
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment import pipeline
from kerneljudge.results.verdict import Failure, Identity, Record
from kerneljudge.runs.backends.local import LocalBackend
from kerneljudge.serve.app import create_app
from kerneljudge.serve.service import Service

CONFIG = JudgeConfig(device="cpu", timing=False, policy="practical")
MODEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def candidate(tag: str) -> str:
    """A distinct candidate text (WRONG in the tag: the fake fails it; RAISE: the fake judge raises)."""
    return f"{MODEL}# {tag}\n"


class FakeJudge:
    """pipeline.judge's stand-in: a PASS (or FAIL) record naming the real task, candidate and configuration."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.go = threading.Event()
        self.go.set()
        self.errors_left = 0  # judgments that end in the judge's own fault (status ERROR, not valid)

    def __call__(
        self, task, candidate, config, progress=None, gpu=None, gate=None, baselines=None, spares=None
    ) -> Record:
        self.calls.append(candidate.text)
        assert self.go.wait(30), "the test never let the judgment finish"
        if "RAISE" in candidate.text:
            raise RuntimeError("the judge broke\nwith a second line")
        wrong = "WRONG" in candidate.text
        failure = Failure(kind="tolerance", phase="correctness", summary="output 0: largest error 3.5 at (0, 1)")
        record = make_record(candidate.name, status="FAIL" if wrong else "PASS", failure=failure if wrong else None)
        if self.errors_left:
            self.errors_left -= 1
            fault = Failure(kind="judge_error", phase="judge", summary="the reference worker did not start")
            record = make_record(candidate.name, status="ERROR", failure=fault, failure_kind="judge_error")
        return record.model_copy(
            update={
                "task": Identity(sha256=task.sha256, name=task.name),
                "candidate": Identity(sha256=candidate.sha256, name=candidate.name),
                "config": config.to_dict(),
            }
        )


@pytest.fixture
def fake(monkeypatch) -> FakeJudge:
    judge = FakeJudge()
    monkeypatch.setattr(pipeline, "judge", judge)
    return judge


@contextlib.contextmanager
def serving(tmp_path, lanes=1, queue=8, tasks=None, store="store.db"):
    service = Service(LocalBackend([None] * lanes), tmp_path / store, CONFIG, tasks, queue=queue)
    try:
        yield TestClient(create_app(service)), service
    finally:
        service.close()


def item(tag: str, **fields) -> dict:
    return {"task": "builtin:rmsnorm_fp32", "candidate": candidate(tag), **fields}


def metric(client: TestClient, line_start: str) -> float:
    lines = [line for line in client.get("/metrics").text.splitlines() if line.startswith(line_start + " ")]
    assert len(lines) == 1, f"{line_start} not in /metrics"
    return float(lines[0].rsplit(" ", 1)[1])


def test_a_retry_is_answered_identically_from_the_store_without_judging_again(tmp_path, fake):
    with serving(tmp_path) as (client, _):
        first = client.post("/v1/judge", json=item("a", request_id="r-1"))
        assert first.status_code == 200, first.text
        assert first.json()["status"] == "PASS" and first.json()["request_id"] == "r-1"
        again = client.post("/v1/judge", json=item("a", request_id="r-1"))
        assert again.json() == first.json()
        # the same content under another request id, and a model's whole response around the same code
        response = f"Here is my kernel:\n```python\n{candidate('a')}```\nIt is faster."
        other = client.post("/v1/judge", json={**item("a"), "candidate": response, "request_id": "r-2"})
        assert {**other.json(), "request_id": "r-1"} == first.json()
        assert len(fake.calls) == 1
        assert metric(client, 'kerneljudge_answers_total{source="store"}') == 2
        reused = client.post("/v1/judge", json=item("b", request_id="r-1"))
        assert reused.status_code == 409 and "request_id 'r-1'" in reused.json()["detail"]
        options = client.post("/v1/judge", json=item("a", request_id="r-1", options={"mode": "enforce"}))
        assert options.status_code == 409  # other options: another judgment, not a retry
        assert len(fake.calls) == 1


def test_concurrent_duplicates_share_one_judgment(tmp_path, fake):
    fake.go.clear()
    with serving(tmp_path) as (_, service):
        from kerneljudge.api.schema import Item

        first = service.submit([Item.model_validate(item("a", request_id="x"))])
        second = service.submit([Item.model_validate(item("a")), Item.model_validate(item("a"))])
        assert not any(ticket.result.done() for ticket in [*first, *second])
        fake.go.set()
        answers = [ticket.answer(timeout_s=30) for ticket in [*first, *second]]
    assert len(fake.calls) == 1
    assert len({answer.record_id for answer in answers}) == 1
    assert [answer.request_id for answer in answers] == ["x", None, None]


def test_a_full_queue_is_refused_at_once_and_async_jobs_are_polled_to_their_answers(tmp_path, fake):
    fake.go.clear()
    with serving(tmp_path, lanes=1, queue=1) as (client, _):
        running = client.post("/v1/jobs", json=item("a"))
        waiting = client.post("/v1/jobs", json=[item("b"), item("WRONG c", options={"reward_spec": "x"})])
        assert running.status_code == 202 and waiting.status_code == 422  # a bad reward spec admits nothing
        waiting = client.post("/v1/jobs", json=[item("b"), item("b")])  # one judgment for both
        assert waiting.status_code == 202 and waiting.json()["state"] == "pending"
        for _ in range(100):
            if client.get("/healthz").json()["busy"] == 1:
                break
            time.sleep(0.05)
        assert client.get("/healthz").json() | {"version": None} == {
            "status": "ok",
            "version": None,
            "lanes": 1,
            "busy": 1,
            "waiting": 1,
            "capacity": 2,
        }
        assert client.get(f"/v1/jobs/{running.json()['job_id']}").json()["state"] == "running"
        full = client.post("/v1/judge", json=item("d"))
        assert full.status_code == 429 and int(full.headers["Retry-After"]) >= 1
        assert "queue is full" in full.json()["detail"]
        too_large = client.post("/v1/judge", json=[item(f"e{n}") for n in range(3)])
        assert too_large.status_code == 413
        stored_meanwhile = client.post("/v1/jobs", json=item("a"))  # shares the one in flight: no room needed
        assert stored_meanwhile.status_code == 202
        assert metric(client, "kerneljudge_queue_depth") == 1
        assert metric(client, "kerneljudge_lanes_busy") == 1
        assert metric(client, 'kerneljudge_rejected_total{reason="queue_full"}') == 1
        assert metric(client, 'kerneljudge_answers_total{source="judged"}') == 2  # a and b; refused ones not
        fake.go.set()
        for job in (running, waiting, stored_meanwhile):
            status = poll(client, job.json()["job_id"])
            assert status["state"] == "done" and all(a["status"] == "PASS" for a in status["answers"])
        assert status["answers"][0]["record_id"] == poll(client, running.json()["job_id"])["answers"][0]["record_id"]
        assert len(fake.calls) == 2
        assert client.get("/v1/jobs/nope").status_code == 404


def poll(client: TestClient, job_id: str) -> dict:
    for _ in range(200):
        status = client.get(f"/v1/jobs/{job_id}").json()
        if status["state"] in ("done", "failed"):
            return status
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never finished")


def test_a_failing_candidate_is_an_ordinary_answer_and_a_judge_fault_is_a_5xx_judged_again(tmp_path, fake):
    with serving(tmp_path) as (client, _):
        failed = client.post("/v1/judge", json=[item("WRONG", options={"reward_spec": "kerneljudge.reward.binary.v1"})])
        assert failed.status_code == 200
        (answer,) = failed.json()
        assert (answer["status"], answer["failure_kind"], answer["reward"], answer["valid"]) == (
            "FAIL",
            "tolerance",
            0.0,
            True,
        )
        assert answer["failure_reason"] == "output 0: largest error 3.5 at (0, 1)"
        assert answer["explanation"].startswith("FAIL (tolerance) in correctness")
        broke = client.post("/v1/judge", json=item("RAISE"))
        assert broke.status_code == 500
        assert broke.json()["detail"] == "item 1: the judge failed, no verdict: RuntimeError: the judge broke"
        assert client.post("/v1/judge", json=item("RAISE")).status_code == 500
        assert len(fake.calls) == 3  # the fault was not kept: the retry judged again
        assert metric(client, 'kerneljudge_judgments_total{status="judge_fault"}') == 2
        assert metric(client, 'kerneljudge_judgments_total{status="FAIL"}') == 1
        assert metric(client, "kerneljudge_judgment_seconds_count") == 3
        assert metric(client, 'kerneljudge_judgment_latency_seconds{quantile="0.5"}') >= 0


def test_a_record_of_the_judges_own_fault_is_judged_again_and_replaced(tmp_path, fake):
    fake.errors_left = 1
    with serving(tmp_path) as (client, _):
        fault = client.post("/v1/judge", json=item("a")).json()
        assert (fault["status"], fault["valid"], fault["reward"]) == ("ERROR", False, None)
        assert fault["failure_reason"] == "the reference worker did not start"
        retried = client.post("/v1/judge", json=item("a")).json()
        again = client.post("/v1/judge", json=item("a")).json()
        assert retried["status"] == "PASS" and again == retried and retried["record_id"] == fault["record_id"]
        assert Record.model_validate_json(client.get(f"/v1/records/{fault['record_id']}").content).status == "PASS"
    assert len(fake.calls) == 2


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        (item("a", task="builtin:nope"), 400, "item 1: no built-in task 'nope'"),
        ([item("a"), item("b", task="mine")], 400, "item 2: no task 'mine'"),
        ({"task_source": "x = 1", "candidate": "y"}, 400, "item 1: task task_"),
        (item("a", candidate="  \n"), 422, "candidate: the candidate is empty"),
        (item("a", options={"mode": "fast"}), 422, "options.mode: mode must be one of off, audit, enforce"),
        (item("a", options={"tiling": True}), 422, "options.tiling: Extra inputs are not permitted"),
        (item("a", task_source="x = 1"), 422, "body: give exactly one of task (an id) and task_source"),
        ([], 400, "no items"),
        ("a", 422, "body: Input should be a valid dictionary"),
    ],
)
def test_bad_input_is_a_4xx_with_one_line(tmp_path, fake, body, status, detail):
    with serving(tmp_path) as (client, _):
        response = client.post("/v1/judge", json=body)
    assert response.status_code == status, response.text
    assert response.json()["detail"].startswith(detail) and "\n" not in response.json()["detail"]
    assert fake.calls == []


def test_tasks_of_a_folder_and_a_task_sent_as_text(tmp_path, fake):
    folder = tmp_path / "tasks"
    folder.mkdir()
    shutil.copy(TASKS / "tiny_bias_relu.py", folder / "tiny.py")
    text = (folder / "tiny.py").read_text()
    with serving(tmp_path, tasks=TaskCatalog(folder)) as (client, _):
        listed = client.get("/v1/tasks").json()
        assert listed[0] == {"id": "tiny", "name": "tiny", "source": "file", "path": str(folder / "tiny.py")}
        assert {"id": "builtin:rmsnorm_fp32", "name": "rmsnorm_fp32", "source": "builtin", "path": None} in listed
        by_id = client.post("/v1/judge", json=item("a", task="tiny")).json()
        by_text = client.post("/v1/judge", json={"task_source": text, "candidate": candidate("a")}).json()
        assert by_text["record_id"] == by_id["record_id"]  # the same task content: the same judgment
        assert len(fake.calls) == 1
        assert client.get("/v1/records/0000").status_code == 404
        assert "/v1/judge" in client.get("/openapi.json").json()["paths"]


def test_remote_and_local_judges_give_the_same_answers(tmp_path, fake):
    items = [item("a", request_id="q1"), item("WRONG b")]
    with LocalJudge(LocalBackend(), tmp_path / "local.db", CONFIG) as local:
        expected = local.judge(items)
    fake.go.clear()
    with serving(tmp_path, queue=0) as (client, _):
        occupied = client.post("/v1/jobs", json=item("c"))
        assert occupied.status_code == 202
        slept = []

        def sleep(seconds: float) -> None:  # the queue is full until the held judgment finishes
            slept.append(seconds)
            fake.go.set()
            time.sleep(0.1)

        answers = RemoteJudge("http://testserver", client=client, sleep=sleep).judge(items[:1])
        answers += RemoteJudge("http://testserver", client=client).judge(items[1:])
    assert slept and answers == expected
    assert [a.status for a in answers] == ["PASS", "FAIL"]


@pytest.fixture(scope="module")
def real_judgment(tmp_path_factory):
    """One real CPU judgment through HTTP: the tiny task's text and a model's response around its candidate."""
    folder = tmp_path_factory.mktemp("serve")
    service = Service(LocalBackend(), folder / "store.db", CONFIG, queue=4)
    client = TestClient(create_app(service))
    response = "My kernel:\n```python\n" + (CANDIDATES / "honest_torch.py").read_text() + "```\n"
    body = {
        "task_source": (TASKS / "tiny_bias_relu.py").read_text(),
        "candidate": response,
        "request_id": "real-1",
        "options": {"reward_spec": "kerneljudge.reward.binary.v1"},
    }
    yield client, body, client.post("/v1/judge", json=body)
    service.close()


def test_a_real_cpu_judgment_end_to_end(real_judgment):
    client, body, response = real_judgment
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["status"], answer["reward"], answer["valid"]) == ("PASS", 1.0, True)
    assert answer["metrics"]["correct"] and answer["metrics"]["trials"] == answer["metrics"]["trials_passed"] > 0
    assert answer["explanation"].startswith("PASS")
    record = Record.model_validate_json(client.get(f"/v1/records/{answer['record_id']}").content)
    assert record.status == "PASS" and record.candidate.extracted_from_response
    assert record.config["policy"] == "practical" and record.config["device"] == "cpu"
    started = time.monotonic()
    assert client.post("/v1/judge", json=body).json() == answer  # from the store, in no time
    assert time.monotonic() - started < 5
    assert metric(client, 'kerneljudge_judgments_total{status="PASS"}') == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--address", "10.0.0.1:6379"], "--address names a Ray cluster: give it with --backend ray"),
        (["--backend", "ray", "--gpus", "all"], "--gpus picks GPUs of this machine"),
        (["--backend", "ray", "--spare-workers"], "--spare-workers keeps spares on this machine's lanes"),
    ],
)
def test_serve_backend_options_that_do_not_go_together_are_one_line(tmp_path, capsys, flags, message):
    from kerneljudge.cli import main

    assert main(["serve", "--store", str(tmp_path / "s.db"), "--device", "cpu", *flags]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.db").exists()  # refused before anything was made
