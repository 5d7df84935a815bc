"""The Ray backend on a local Ray cluster with two declared GPUs: real CPU judgments, an actor killed with a
job in flight, and a candidate that crashes its worker (kerneljudge/runs/backends/ray.py, docs/ray.md)."""

from __future__ import annotations

import io
import json
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import CANDIDATES, TASKS
from kerneljudge.cli import main
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.results.store import Store, environment_digest, key_of
from kerneljudge.runs.backends import GroupJob, Job
from kerneljudge.runs.backends.machine import machine_environment
from kerneljudge.runs.backends.ray import LaneLost, RayBackend, import_ray
from kerneljudge.runs.backends.ray_actor import (
    RemoteJudgeError,
    envelope_json,
    group_from_json,
    group_to_json,
    job_from_json,
    job_to_json,
    read_envelopes,
)
from kerneljudge.runs.batch import read_manifest, run_batch
from kerneljudge.sources.candidate import load_candidate
from kerneljudge.tasks.load import load_task

CONFIG = JudgeConfig(device="cpu", policy="practical", timeout_s=60.0, timing=False)
FLAGS = ["--device", "cpu", "--policy", "practical", "--timeout", "60", "--no-timing"]  # the same configuration
# Honest, but slow to build: it stays in flight long enough for its actor to be killed under it.
SLOW = '''"""Honest, built slowly."""
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, width):
        super().__init__()
        time.sleep(6)
        self.bias = nn.Parameter(torch.randn(width))

    def forward(self, x):
        return torch.clamp_min(x + self.bias, 0.0)
'''
DISPATCHED = re.compile(r"^\S+ (?P<item>\S+): judging on (?P<lane>kerneljudge-\w+-lane\d+) ")


@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray", reason="the Ray backend's tests need Ray: pip install 'kerneljudge[ray]'")
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 2**20)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ray")
    (folder / "slow_honest.py").write_text(SLOW)
    candidates = [CANDIDATES / "honest_torch.py", CANDIDATES / "segfault.py", folder / "slow_honest.py"]
    lines = [json.dumps({"task": str(TASKS / "tiny_bias_relu.py"), "candidate": str(path)}) for path in candidates]
    (folder / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "manifest.jsonl"


class Log(io.StringIO):
    """A batch's stage log that can act on a line as it is written (`on_line`)."""

    def __init__(self, on_line=None) -> None:
        super().__init__()
        self.on_line = on_line
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            written = super().write(text)
        if self.on_line is not None:
            self.on_line(text)
        return written

    def dispatches(self) -> list[tuple[str, str]]:
        return [(m["item"], m["lane"]) for m in map(DISPATCHED.match, self.getvalue().splitlines()) if m]


def killing(cluster, item: str, times: int, after_s: float = 2.0) -> Log:
    """A log that kills the actor `item` is sent to, `after_s` into its judgment, the first `times` times."""
    kills = iter(range(times))

    def on_line(text: str) -> None:
        match = DISPATCHED.match(text)
        if match and match["item"].endswith(f"/{item}") and next(kills, None) is not None:
            kill = lambda: cluster.kill(cluster.get_actor(match["lane"]), no_restart=True)  # noqa: E731
            threading.Timer(after_s, kill).start()

    return Log(on_line)


@dataclass
class Run:
    counts: object
    log: Log
    store: Path
    seen: list[str]  # the candidates on_record saw, in order
    verdicts: dict[str, tuple[str, str | None]]
    lanes_after: int


def batch(manifest: Path, store: Path, log: Log, num_gpus: int | None = None) -> Run:
    seen: list[str] = []
    with RayBackend(num_gpus=num_gpus) as backend:  # this process is connected already: the module's cluster
        counts = run_batch(
            read_manifest(manifest),
            CONFIG,
            store,
            progress=False,
            log=log,
            backend=backend,
            on_record=lambda item, record: seen.append(record.candidate.name),
        )
        lanes_after = backend.lanes
    with Store(store) as s:
        verdicts = {r.candidate.name: (r.status, r.failure_kind) for r in s}
    return Run(counts, log, store, seen, verdicts, lanes_after)


@pytest.fixture(scope="module")
def undisturbed(cluster, manifest, tmp_path_factory) -> Run:
    return batch(manifest, tmp_path_factory.mktemp("undisturbed") / "results.db", Log())


def test_every_gpu_is_a_lane_and_the_records_come_back_to_one_store(undisturbed):
    assert undisturbed.counts.to_dict() == {
        "judged": 3,
        "skipped": 0,
        "passed": 2,
        "failed": 1,
        "suspicious": 0,
        "unsupported": 0,
        "errors": 0,
        "interrupted": 0,
        "not_started": 0,
    }
    assert undisturbed.verdicts == {
        "honest_torch": ("PASS", None),
        "segfault": ("FAIL", "crash"),
        "slow_honest": ("PASS", None),
    }
    assert len({lane for _, lane in undisturbed.log.dispatches()}) == 2  # both declared GPUs judged
    assert "correctness trial 10/10 (hidden)" in undisturbed.log.getvalue()  # the actors' stages, forwarded
    here = environment_digest(machine_environment(CONFIG))  # the nodes' environment is this machine's
    with Store(undisturbed.store) as s:
        assert {key_of(record).environment_digest for record in s} == {here}


def test_a_candidate_that_crashes_its_worker_is_one_fail_judged_once(undisturbed):
    assert [item for item, _ in undisturbed.log.dispatches()].count("bias_relu/segfault") == 1
    assert undisturbed.seen.count("segfault") == 1
    assert "was lost" not in undisturbed.log.getvalue()
    assert undisturbed.lanes_after == 2  # its sandboxed worker died, not the actor


def test_a_rerun_on_the_cluster_skips_what_the_store_holds(undisturbed, manifest, capsys):
    argv = ["batch", str(manifest), "--store", str(undisturbed.store), "--backend", "ray", *FLAGS]
    assert main(argv) == 0
    assert "judged 0, skipped 3" in capsys.readouterr().out


def test_a_killed_actors_job_is_judged_again_elsewhere_and_stored_once(cluster, manifest, undisturbed, tmp_path):
    run = batch(manifest, tmp_path / "results.db", killing(cluster, "slow_honest", times=1))
    slow = [lane for item, lane in run.log.dispatches() if item == "bias_relu/slow_honest"]
    assert len(slow) == 2 and slow[0] != slow[1]  # sent once more, to the other actor
    assert f"{slow[0]} was lost" in run.log.getvalue()
    assert run.counts.to_dict() == undisturbed.counts.to_dict()
    assert run.verdicts == undisturbed.verdicts
    assert sorted(run.seen) == ["honest_torch", "segfault", "slow_honest"]  # each counted once
    with Store(run.store) as s:
        assert len(s) == 3
    assert run.lanes_after == 1  # the dead actor is not replaced


def slow_manifest(folder: Path) -> Path:
    (folder / "slow_honest.py").write_text(SLOW)
    line = {"task": str(TASKS / "tiny_bias_relu.py"), "candidate": str(folder / "slow_honest.py")}
    (folder / "m.jsonl").write_text(json.dumps(line) + "\n")
    return folder / "m.jsonl"


def test_a_job_whose_second_actor_dies_too_is_not_judged_a_third_time(cluster, tmp_path):
    run = batch(slow_manifest(tmp_path), tmp_path / "results.db", killing(cluster, "slow_honest", times=3))
    assert len(run.log.dispatches()) == 2
    assert "not judged: the lanes" in run.log.getvalue() and "a rerun judges it" in run.log.getvalue()
    assert (run.counts.judged, run.counts.errors, run.seen, run.verdicts) == (0, 1, [], {})  # nothing stored
    assert run.lanes_after == 0


def test_a_job_whose_only_actor_died_fails_when_no_lane_is_left(cluster, tmp_path):
    run = batch(slow_manifest(tmp_path), tmp_path / "results.db", killing(cluster, "slow_honest", times=1), num_gpus=1)
    assert len(run.log.dispatches()) == 1
    assert "no lane of the Ray cluster is left (lost: kerneljudge-" in run.log.getvalue()
    assert (run.counts.judged, run.counts.errors, run.verdicts) == (0, 1, {})


def test_an_exception_in_the_batch_stops_the_judgments_in_flight_at_once(cluster, tmp_path):
    (tmp_path / "slow_honest.py").write_text(SLOW)
    job = Job(load_task(TASKS / "tiny_bias_relu.py"), load_candidate(tmp_path / "slow_honest.py"), CONFIG)
    with pytest.raises(KeyboardInterrupt), RayBackend(num_gpus=1) as backend:
        futures = [backend.submit(job) for _ in range(2)]  # one in flight, one queued behind it
        while backend.busy == 0:
            time.sleep(0.05)
        started = time.monotonic()
        raise KeyboardInterrupt
    assert time.monotonic() - started < 5  # the slow judgment (about 10 s) was not waited for
    with pytest.raises(LaneLost, match="the batch was stopped"):
        futures[0].result(timeout=0)
    assert futures[1].cancelled()


def test_more_gpus_than_the_cluster_has_is_one_line(cluster):
    with pytest.raises(UsageError, match="asked for 3 GPUs of the Ray cluster; it has 2"):
        RayBackend(num_gpus=3)


def test_a_job_crosses_as_json_with_its_hashes_unchanged():
    task = load_task(TASKS / "tiny_bias_relu.py")
    job = Job(task, load_candidate(CANDIDATES / "honest_torch.py"), CONFIG.with_(mode="enforce"))
    text = job_to_json(job)
    json.loads(text)  # plain JSON, nothing pickled
    back = job_from_json(text)
    assert back == job and back.task.sha256 == task.sha256 and back.candidate.sha256 == job.candidate.sha256


def test_a_group_crosses_as_json_and_its_answer_must_be_one_envelope_a_candidate():
    task = load_task(TASKS / "tiny_bias_relu.py")
    candidates = tuple(load_candidate(CANDIDATES / name) for name in ("honest_torch.py", "segfault.py"))
    group = GroupJob(task, candidates, CONFIG)
    back = group_from_json(group_to_json(group))
    assert back == group and [c.sha256 for c in back.candidates] == [c.sha256 for c in candidates]
    with pytest.raises(RemoteJudgeError, match="1 to 64 candidates"):
        group_to_json(GroupJob(task, candidates * 33, CONFIG))
    one = envelope_json([], error="judge broke")
    assert [e.error for e in read_envelopes(json.dumps([one, one]), 2)] == ["judge broke"] * 2
    for answer in (json.dumps([one]), json.dumps({"a": one}), "[", 7, json.dumps([one, 3])):
        with pytest.raises(RemoteJudgeError):
            read_envelopes(answer, 2)


def test_a_group_is_judged_on_one_actor_as_a_group_and_again_elsewhere_when_that_actor_dies(cluster, tmp_path):
    """Its records are a group's (one place id, the checked pairs lent the group's reference); the actor killed
    with it in flight, the whole group goes to the other actor, once."""
    (tmp_path / "slow_honest.py").write_text(SLOW)
    task = load_task(TASKS / "tiny_bias_relu.py")
    names = [tmp_path / "slow_honest.py", CANDIDATES / "honest_torch.py", CANDIDATES / "segfault.py"]
    group = GroupJob(task, tuple(load_candidate(path) for path in names), CONFIG)
    lines: list[str] = []
    killed: list[str] = []

    def progress(text: str) -> None:
        lines.append(text)
        lane = re.match(r"judging on (kerneljudge-\w+-lane\d+) ", text)
        if lane and not killed:
            killed.append(lane[1])
            threading.Timer(2.0, lambda: cluster.kill(cluster.get_actor(lane[1]), no_restart=True)).start()

    with RayBackend() as backend:
        records = [future.result(timeout=300) for future in backend.submit_group(group, progress)]
    sent = [re.match(r"judging on (\S+)", line)[1] for line in lines if line.startswith("judging on")]
    assert len(sent) == 2 and sent[0] == killed[0] != sent[1], lines  # the group, once more, to the other actor
    assert [(r.candidate.name, r.status) for r in records] == [
        ("slow_honest", "PASS"),
        ("honest_torch", "PASS"),
        ("segfault", "FAIL"),
    ]
    places = [r.workers.group for r in records]
    assert len({p.id for p in places}) == 1 and [(p.index, p.size) for p in places] == [(0, 3), (1, 3), (2, 3)]
    assert [r.workers.checked for r in records] == ["group"] * 3


def test_without_ray_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(UsageError, match=r"pip install 'kerneljudge\[ray\]'"):
        import_ray()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--address", "10.0.0.1:6379"], "--address names a Ray cluster: give it with --backend ray"),
        (["--backend", "ray", "--gpus", "all"], "--gpus picks GPUs of this machine"),
        (["--backend", "ray", "--spare-workers"], "--spare-workers keeps spares on this machine's lanes"),
    ],
)
def test_backend_options_that_do_not_go_together_are_one_line(manifest, tmp_path, capsys, flags, message):
    assert main(["batch", str(manifest), "--store", str(tmp_path / "s.db"), *flags, *FLAGS]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.db").exists()


def test_a_served_load_with_an_actor_killed_midway_stores_every_judgment_once(cluster, tmp_path):
    """`kerneljudge serve --backend ray`'s service: four judgments over HTTP, one actor killed under its
    judgment; every item is answered, each judgment stored once, and a retry is answered from the store."""
    pytest.importorskip("fastapi", reason="the server needs its extra: pip install 'kerneljudge[serve]'")
    from fastapi.testclient import TestClient

    from kerneljudge.api.catalog import TaskCatalog
    from kerneljudge.serve.app import create_app
    from kerneljudge.serve.service import Service

    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "bias_relu.py").write_text((TASKS / "tiny_bias_relu.py").read_text())
    texts = {
        "slow_a": SLOW + "# a\n",  # the two slow ones first: both lanes hold one when the actor is killed
        "slow_b": SLOW + "# b\n",
        "honest": (CANDIDATES / "honest_torch.py").read_text(),
        "segfault": (CANDIDATES / "segfault.py").read_text(),
    }
    items = [{"task": "bias_relu", "candidate": text, "request_id": f"r-{name}"} for name, text in texts.items()]
    service = Service(RayBackend(), tmp_path / "rewards.db", CONFIG, TaskCatalog(folder), queue=8)
    try:
        client = TestClient(create_app(service))
        accepted = client.post("/v1/jobs", json=items)
        assert accepted.status_code == 202, accepted.text
        waited = time.monotonic()
        while service.backend.busy < 2:
            assert time.monotonic() - waited < 60, "the two lanes never both judged"
            time.sleep(0.05)
        time.sleep(2.0)  # into the slow judgments (each about 10 s)
        victim = sorted(service.backend.actors)[0]
        cluster.kill(cluster.get_actor(victim), no_restart=True)
        while (status := client.get(f"/v1/jobs/{accepted.json()['job_id']}").json())["state"] not in ("done", "failed"):
            assert time.monotonic() - waited < 180, status
            time.sleep(0.2)
        assert status["state"] == "done", status
        answers = {a["request_id"]: (a["status"], a["failure_kind"], a["valid"]) for a in status["answers"]}
        assert answers == {
            "r-slow_a": ("PASS", None, True),
            "r-slow_b": ("PASS", None, True),
            "r-honest": ("PASS", None, True),
            "r-segfault": ("FAIL", "crash", True),
        }
        assert service.backend.lanes == 1 and client.get("/healthz").json()["lanes"] == 1  # not replaced
        retried = client.post("/v1/judge", json=items)
        assert retried.status_code == 200
        assert retried.json() == status["answers"]  # the same answers, from the store
        metrics = client.get("/metrics").text
        assert 'kerneljudge_answers_total{source="store"} 4.0' in metrics and "kerneljudge_lanes 1.0" in metrics
    finally:
        service.close()
    with Store(tmp_path / "rewards.db") as s:
        assert sorted(record.candidate.name for record in s) == sorted(f"r-{name}" for name in texts)
