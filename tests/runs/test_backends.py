"""The local backend: jobs judged by lane threads in the order submitted, each answer on its own future."""

from __future__ import annotations

import threading

import pytest

from helpers import CANDIDATES, make_record
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment import pipeline
from kerneljudge.runs.backends import Job
from kerneljudge.runs.backends.local import LocalBackend
from kerneljudge.sources.candidate import load_candidate
from kerneljudge.tasks.load import load_task


@pytest.fixture
def jobs(tiny_task):
    task = load_task(tiny_task)
    config = JudgeConfig(device="cpu", timing=False, policy="practical")
    return [Job(task, load_candidate(CANDIDATES / f"{name}.py"), config) for name in ("honest_torch", "wrong_values")]


def test_each_job_gets_its_own_record_and_lanes_run_side_by_side(jobs, monkeypatch):
    both_in, release, seen = threading.Barrier(2, timeout=10), threading.Event(), []

    def judge(task, candidate, config, progress, gpu, gate, baselines=None, spares=None):
        seen.append((candidate.name, type(gate).__name__))
        both_in.wait()  # the two jobs are in flight together, on two lanes
        release.wait(10)
        return make_record(candidate.name, status="PASS" if candidate.name == "honest_torch" else "FAIL")

    monkeypatch.setattr(pipeline, "judge", judge)
    with LocalBackend([None, None]) as backend:
        futures = [backend.submit(job) for job in jobs]
        for _ in range(100):
            if backend.busy == 2:
                break
            threading.Event().wait(0.05)
        assert backend.busy == 2 and backend.lanes == 2
        release.set()
        records = [future.result(timeout=10) for future in futures]
    assert [record.candidate.name for record in records] == ["honest_torch", "wrong_values"]
    assert [record.status for record in records] == ["PASS", "FAIL"]
    assert sorted(seen) == [("honest_torch", "LaneGate"), ("wrong_values", "LaneGate")]
    assert backend.busy == 0


def test_a_fault_of_the_judge_reaches_the_caller_and_the_lane_goes_on(jobs, monkeypatch):
    def judge(task, candidate, config, progress, gpu, gate, baselines=None, spares=None):
        if candidate.name == "honest_torch":
            raise RuntimeError("the judge broke")
        return make_record(candidate.name)

    monkeypatch.setattr(pipeline, "judge", judge)
    with LocalBackend() as backend:
        first, second = (backend.submit(job) for job in jobs)
        with pytest.raises(RuntimeError, match="the judge broke"):
            first.result(timeout=10)
        assert second.result(timeout=10).candidate.name == "wrong_values"
    with pytest.raises(RuntimeError, match="closed"):
        backend.submit(jobs[0])


def test_a_real_judgment_on_the_cpu(jobs):
    with LocalBackend() as backend:
        record = backend.submit(jobs[0], progress=lambda text: None).result(timeout=600)
    assert record.status == "PASS" and record.correctness.passed


def test_a_backend_with_spare_workers_hands_every_lane_the_same_spares_and_closes_them(jobs, monkeypatch):
    seen = []

    def judge(task, candidate, config, progress, gpu, gate, baselines=None, spares=None):
        seen.append(spares)
        return make_record(candidate.name)

    monkeypatch.setattr(pipeline, "judge", judge)
    with LocalBackend([None, None], spare_workers=True) as backend:
        for future in [backend.submit(job) for job in jobs]:
            future.result(timeout=10)
        spares = backend.spares
    assert spares is not None and seen == [spares, spares]
    assert spares.take(("cpu",), dict) is None  # closed with the backend: it starts nothing more
    with LocalBackend() as plain:
        plain.submit(jobs[0]).result(timeout=10)
    assert seen[-1] is None
