"""`kerneljudge serve` as an operator expects it: errors as problems (RFC 9457), readiness, deadlines, the
OpenAPI document's responses, and the log of the judge's faults.

Judgments are `test_serve.FakeJudge`'s (held back on demand); no real judgment runs here.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_serve import CONFIG, FakeJudge, item, poll

from kerneljudge.judgment import pipeline
from kerneljudge.runs.backends.local import LocalBackend
from kerneljudge.serve import app as app_module
from kerneljudge.serve import service as service_module
from kerneljudge.serve.app import create_app
from kerneljudge.serve.limits import ServeLimits
from kerneljudge.serve.problems import MEDIA_TYPE, PROBLEMS
from kerneljudge.serve.service import ServeError, Service

DOCS = Path(__file__).resolve().parents[2] / "docs" / "serve.md"


@pytest.fixture
def fake(monkeypatch) -> FakeJudge:
    judge = FakeJudge()
    monkeypatch.setattr(pipeline, "judge", judge)
    return judge


@contextlib.contextmanager
def serving(tmp_path, backend=None, queue=8, limits=None):
    service = Service(backend or LocalBackend([None]), tmp_path / "store.db", CONFIG, queue=queue)
    try:
        yield TestClient(create_app(service, limits=limits), raise_server_exceptions=False), service
    finally:
        service.close()


def problem_of(response) -> tuple[int, str, str]:
    """The status, code and detail of a problem answer, after checking it is one (RFC 9457's members, a type
    that goes with its code, a one-line detail)."""
    assert response.headers["content-type"] == MEDIA_TYPE, response.text
    body = response.json()
    assert set(body) == {"type", "title", "status", "detail", "code"}
    kind = PROBLEMS[body["code"]]
    assert (body["type"], body["title"], body["status"]) == (kind.type, kind.title, response.status_code)
    assert "\n" not in body["detail"]
    return response.status_code, body["code"], body["detail"]


def test_malformed_json_names_its_byte_offset_never_an_item(tmp_path, fake):
    text = '[{"task": "builtin:rmsnorm_fp32", "candidate": "é" "x"}]'  # é: two bytes, one character
    with serving(tmp_path) as (client, _):
        response = client.post("/v1/judge", content=text.encode(), headers={"content-type": "application/json"})
    status, code, detail = problem_of(response)
    at = text.index('"x"')
    assert (status, code) == (400, "malformed_json")
    assert detail == f"body: not JSON: Expecting ',' delimiter at byte {at + 1}"
    assert "item" not in detail and fake.calls == []


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_post_not_said_to_be_json_is_415(tmp_path, fake, content_type):
    headers = {"content-type": content_type} if content_type else {}
    with serving(tmp_path) as (client, _):
        response = client.post("/v1/judge", content=b'{"task": "builtin:rmsnorm_fp32"}', headers=headers)
        assert client.post("/v1/jobs", content=b"{}", headers=headers).status_code == 415
    status, code, detail = problem_of(response)
    assert (status, code) == (415, "unsupported_media_type")
    assert detail.startswith(f"Content-Type {content_type or 'missing'}: send the body as JSON")
    assert fake.calls == []


@pytest.mark.parametrize(
    ("body", "status", "code", "detail"),
    [
        (item("a", task="builtin:nope"), 400, "unknown_task", "item 1: no built-in task 'nope'"),
        ([item("a"), item("b", task="mine")], 400, "unknown_task", "item 2: no task 'mine'"),
        ({"task_source": "x = 1", "candidate": "y"}, 400, "bad_item", "item 1: task task_"),
        ([], 400, "bad_item", "no items"),
        (item("a", options={"mode": "fast"}), 422, "invalid_body", "options.mode: mode must be one of off"),
    ],
)
def test_each_bad_item_is_its_problem(tmp_path, fake, body, status, code, detail):
    with serving(tmp_path) as (client, _):
        answered = problem_of(client.post("/v1/judge", json=body))
    assert answered[:2] == (status, code) and answered[2].startswith(detail)
    assert fake.calls == []


def test_unknown_routes_and_methods_are_problems(tmp_path):
    with serving(tmp_path) as (client, _):
        assert problem_of(client.get("/v2/judge"))[:2] == (404, "not_found")
        assert problem_of(client.get("/v1/jobs/nope"))[:2] == (404, "not_found")
        wrong = client.get("/v1/judge")
        assert problem_of(wrong)[:2] == (405, "method_not_allowed") and wrong.headers["allow"] == "POST"


def test_every_service_error_has_the_status_of_its_problem():
    classes, stack = [], [ServeError]
    while stack:
        cls = stack.pop()
        classes.append(cls)
        stack.extend(cls.__subclasses__())
    assert {app_module.JudgeFault, app_module.UnsupportedMediaType, service_module.UnknownTask} <= set(classes)
    for cls in classes:
        assert PROBLEMS[cls.code].status == cls.http_status, cls


def test_the_manuals_problem_table_is_the_servers(tmp_path):
    rows = re.findall(r"^\| `(\w+)` \| (\d{3}) \|", DOCS.read_text(), flags=re.MULTILINE)
    assert [(code, int(status)) for code, status in rows] == [(k.code, k.status) for k in PROBLEMS.values()]


class RisingBackend(LocalBackend):
    """A local backend whose lanes count as up only when the test says (a cluster's actors starting, then
    lost)."""

    def __init__(self) -> None:
        super().__init__([None])
        self.up = 0

    @property
    def lanes(self) -> int:
        return self.up


def test_readiness_is_503_until_a_lane_is_up_and_liveness_is_always_200(tmp_path):
    backend = RisingBackend()
    with serving(tmp_path, backend=backend) as (client, service):
        seen = []
        for up in (0, 1, 0):
            backend.up = up
            health = client.get("/healthz")
            seen.append((health.status_code, health.json()["status"], health.json()["lanes"]))
            assert client.get("/livez").json() == {"status": "alive"}
        service.close()
        closing = client.get("/healthz")
        seen.append((closing.status_code, closing.json()["status"], closing.json()["lanes"]))
    assert seen == [(503, "starting", 0), (200, "ok", 1), (503, "no_lanes", 0), (503, "stopping", 0)]


def test_past_its_deadline_a_judge_request_answers_202_with_a_job_and_the_judgment_goes_on(tmp_path, fake):
    fake.go.clear()
    with serving(tmp_path, limits=ServeLimits(deadline_s=0.3)) as (client, _):
        started = time.monotonic()
        late = client.post("/v1/judge", json=[item("a"), item("b")], headers={"X-KJ-Deadline-S": "30"})
        waited_s = time.monotonic() - started
        assert late.status_code == 202 and 0.3 <= waited_s < 5  # the server's bound is the shorter
        status = late.json()
        assert (status["state"], status["items"], status["done"], status["answers"]) == ("running", 2, 0, None)
        assert late.headers["location"] == f"/v1/jobs/{status['job_id']}"
        short = client.post("/v1/judge", json=item("c"), headers={"X-KJ-Deadline-S": "0.05"})
        assert short.status_code == 202  # the header's bound, when shorter
        fake.go.set()
        polled = poll(client, status["job_id"])
        assert polled["state"] == "done" and [a["status"] for a in polled["answers"]] == ["PASS", "PASS"]
        again = client.post("/v1/judge", json=[item("a"), item("b")], headers={"X-KJ-Deadline-S": "0.05"})
        assert again.status_code == 200 and again.json() == polled["answers"]  # from the store, in time
        bad = client.post("/v1/judge", json=item("a"), headers={"X-KJ-Deadline-S": "soon"})
        assert problem_of(bad)[:2] == (422, "invalid_header")
    assert len(fake.calls) == 3


def test_a_judge_fault_is_a_500_problem_and_its_traceback_is_logged_once(tmp_path, fake, caplog):
    caplog.set_level(logging.INFO, logger="kerneljudge")
    with serving(tmp_path) as (client, _):
        response = client.post("/v1/judge", json=[item("RAISE"), item("RAISE")])  # two items, one judgment
    status, code, detail = problem_of(response)
    assert (status, code) == (500, "judge_fault")
    assert detail == "item 1: the judge failed, no verdict: RuntimeError: the judge broke"
    faults = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert len(faults) == 1 and faults[0].name == "kerneljudge.serve.service"
    assert faults[0].exc_info[0] is RuntimeError and "the judge failed on task" in faults[0].getMessage()
    assert "in __call__" in caplog.text  # the fake judge's own frame, where it raised


def test_an_unhandled_exception_in_a_route_is_a_500_internal_problem_with_a_logged_traceback(tmp_path, caplog):
    with serving(tmp_path) as (client, service):

        def broken() -> list:
            raise KeyError("a bug of the server's")

        service.tasks.listing = broken
        response = client.get("/v1/tasks")
    assert problem_of(response) == (500, "internal", "the server failed: KeyError; see its log")
    (logged,) = [record for record in caplog.records if record.name == "kerneljudge.serve.problems"]
    assert logged.getMessage() == "GET /v1/tasks failed: the server's own fault"
    assert logged.exc_info[0] is KeyError and "in broken" in caplog.text


def test_the_openapi_document_declares_every_problem_each_v1_route_gives(tmp_path, fake):
    fake.go.clear()
    with serving(tmp_path, queue=0, limits=ServeLimits(max_body_bytes=1_000_000)) as (client, service):
        document = client.get("/openapi.json").json()
        routes = {(path, method) for path, ops in document["paths"].items() for method in ops}
        for path, method in routes:
            if not path.startswith("/v1/"):
                continue
            for status, response in document["paths"][path][method]["responses"].items():
                assert response["description"], (path, method, status)
                if status[0] in "45":
                    schema = response["content"][MEDIA_TYPE]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Problem"}, (path, method, status)
                    assert set(response["content"]) == {MEDIA_TYPE}
        json_header = {"content-type": "application/json"}
        busy = client.post("/v1/jobs", json=item("held"))  # the one lane, no queue
        assert busy.status_code == 202
        probes = {
            ("/v1/judge", "post"): [
                client.post("/v1/judge", content=b"{", headers=json_header),
                client.post("/v1/judge", json=item("a", task="nope")),
                client.post("/v1/judge", json={"task_source": "x = 1", "candidate": "y"}),
                client.post("/v1/judge", content=b"{}"),
                client.post("/v1/judge", content=b"0" * 1_000_001, headers=json_header),
                client.post("/v1/judge", content=b"{}", headers={**json_header, "content-length": "2x"}),
                client.post("/v1/judge", json={"candidate": "x"}),
                client.post("/v1/judge", json=item("a"), headers={"X-KJ-Deadline-S": "-1"}),
                client.post("/v1/judge", json=item("b")),  # the queue is full
                client.post("/v1/judge", json=[item("c"), item("d")]),  # more than ever fits
                client.post("/v1/jobs", json=item("held", request_id="r")),
                client.post("/v1/judge", json=item("other", request_id="r")),
            ],
            ("/v1/jobs", "post"): [
                client.post("/v1/jobs", json=item("b")),
                client.post("/v1/jobs", content=b"[1,", headers=json_header),
            ],
            ("/v1/jobs/{job_id}", "get"): [client.get("/v1/jobs/nope")],
            ("/v1/records/{record_id}", "get"): [client.get("/v1/records/nope")],
        }
        fake.go.set()
        poll(client, busy.json()["job_id"])
        service.close()
        probes[("/v1/judge", "post")].append(client.post("/v1/judge", json=item("e")))
        probes[("/v1/jobs", "post")].append(client.post("/v1/jobs", json=item("e")))
    produced = set()
    for (path, method), answers in probes.items():
        declared = document["paths"][path][method]["responses"]
        for answer in answers:
            if answer.status_code >= 400:
                status, code, _ = problem_of(answer)
                produced.add(code)
                assert str(status) in declared and f"`{code}`" in declared[str(status)]["description"], (path, code)
    assert produced >= {"malformed_json", "unknown_task", "bad_item", "unsupported_media_type", "body_too_large"}
    assert produced >= {"bad_content_length", "invalid_body", "invalid_header", "queue_full", "too_large"}
    assert produced >= {"conflict", "not_found", "shutting_down"}


def test_a_remote_judge_polls_the_job_a_passed_deadline_answers_with(tmp_path, fake):
    """RemoteJudge through a server whose deadline passes before the judgments end: the 202's job is polled to
    its answers, the same as the server's own answers once they are in."""
    from threading import Timer

    from kerneljudge.client import RemoteJudge

    fake.go.clear()
    slept: list[float] = []
    with serving(tmp_path, limits=ServeLimits(deadline_s=0.2)) as (client, _):
        Timer(1.0, fake.go.set).start()  # the judgments end a second in, after the 202

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            time.sleep(0.1)

        answers = RemoteJudge("http://testserver", client=client, sleep=sleep).judge([item("a"), item("b")])
        again = client.post("/v1/judge", json=[item("a"), item("b")]).json()
    assert slept and [a.status for a in answers] == ["PASS", "PASS"]
    assert [a.model_dump(mode="json", exclude={"request_id"}) for a in answers] == [
        {k: v for k, v in entry.items() if k != "request_id"} for entry in again
    ]
