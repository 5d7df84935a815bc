"""The load benchmark against a real `kerneljudge serve` on loopback (benchmarks/serve_load.py): a small load
with a queue short enough to refuse, every kind of candidate, retries; its checks must pass, and each check
must fail when what it checks is broken."""

from __future__ import annotations

import json
import sys

import pytest

from helpers import ROOT

pytest.importorskip("fastapi", reason="the server needs its extra: pip install 'kerneljudge[serve]'")
sys.path.insert(0, str(ROOT / "benchmarks"))
import serve_load  # noqa: E402  (a script of benchmarks/, not a package)


@pytest.mark.parametrize("spares", [[], ["--spare-workers"]], ids=["own-pairs", "spare-workers"])
def test_a_small_load_is_answered_once_each_with_every_kind_judged_as_it_should(tmp_path, capsys, spares):
    argv = ["--requests", "12", "--clients", "4", "--lanes", "2", "--queue", "1", "--timeout", "8", *spares]
    code = serve_load.main([*argv, "--json", str(tmp_path / "load.json"), "--markdown", str(tmp_path / "load.md")])
    out = capsys.readouterr().out
    assert code == 0, out
    said = json.loads((tmp_path / "load.json").read_text())
    assert [ok for _, ok, _ in said["checks"]] == [True] * 5
    rows = said["requests"]
    assert len(rows) == 12 and all(row["status_code"] == 200 for row in rows)
    kinds = {row["kind"]: (row["answer"]["status"], row["answer"]["failure_kind"]) for row in rows}
    assert kinds == serve_load.EXPECTED  # honest, wrong, raises and hangs each got its verdict
    assert any(row["retry"] for row in rows)
    assert "| judgments per minute |" in (tmp_path / "load.md").read_text()


def sent(rid, kind, candidate, record_id, status="PASS", failure=None):
    item = {"candidate": candidate, "request_id": rid}
    answer = {"record_id": record_id, "status": status, "failure_kind": failure}
    return serve_load.Sent(rid, kind, item, answer=answer)


def failed(checks):
    return [name for name, ok, _ in checks if not ok]


def test_each_check_fails_when_what_it_checks_is_broken():
    good = [
        sent("a", "honest", "x", "r1"),
        sent("b", "honest", "x", "r1"),
        sent("c", "wrong", "y", "r2", "FAIL", "tolerance"),
    ]
    assert failed(serve_load.check(good, judgments=2, stored=2)) == []
    lost = [*good, serve_load.Sent("d", "honest", {"candidate": "z", "request_id": "d"})]
    assert failed(serve_load.check(lost, 2, 2)) == ["every request answered"]
    differing = [*good, sent("a", "honest", "x", "r1", status="FAIL", failure="tolerance")]
    assert "one answer per request id" in failed(serve_load.check(differing, 2, 2))
    split = [*good, sent("e", "honest", "x", "r9")]
    assert failed(serve_load.check(split, 2, 2)) == ["one record per content"]
    assert failed(serve_load.check(good, judgments=3, stored=2)) == ["each content judged and stored once"]
    assert failed(serve_load.check(good, judgments=2, stored=1)) == ["each content judged and stored once"]
    misjudged = [*good[:2], sent("c", "wrong", "y", "r2", "PASS")]
    assert failed(serve_load.check(misjudged, 2, 2)) == ["each kind its verdict"]


def test_the_plan_has_one_of_each_kind_first_and_retries_repeat_a_request_whole():
    plan = serve_load.plan(40, variants=3, seed=1, mix=serve_load.MIX)
    assert [s.kind for s in plan[:4]] == ["honest", "wrong", "raises", "hangs"] and plan[4].retry
    for retry in (s for s in plan if s.retry):
        first = next(s for s in plan if s.request_id == retry.request_id and not s.retry)
        assert retry.item is first.item
    honest = {s.item["candidate"] for s in plan if s.kind == "honest"}
    assert len(honest) <= 3  # honest texts come again under new request ids
    with pytest.raises(SystemExit, match="NAME=PERCENT"):
        serve_load.parse_mix("bogus=3")


def test_the_real_work_sends_every_manifest_pair_once_and_expects_honest_ones_to_pass(tmp_path):
    plan = serve_load.plan_real(retries=5, seed=2, folder=tmp_path)
    first, again = [s for s in plan if not s.retry], [s for s in plan if s.retry]
    assert len(again) == 5 and len({s.request_id for s in first}) == len(first) == 8 * 7
    assert {s.request_id for s in again} <= {s.request_id for s in first}
    assert all(s.item["task_source"].startswith('"""') and "class ModelNew" in s.item["candidate"] for s in first)
    passed = {"status": "PASS", "failure_kind": None}
    caught = {"status": "FAIL", "failure_kind": "tolerance"}
    assert serve_load.as_expected("honest_triton", passed) and not serve_load.as_expected("honest_torch", caught)
    assert serve_load.as_expected("side_stream", caught) and not serve_load.as_expected("cache_by_pointer", passed)
    assert serve_load.as_expected("hangs", {"status": "FAIL", "failure_kind": "timeout"})


@pytest.mark.parametrize(
    "client", [["--client", "openrlhf"], ["--client", "trl", "--clients", "2"]], ids=["openrlhf", "trl"]
)
def test_a_trainers_client_at_three_times_the_capacity_loses_no_sample_and_fails_no_request(tmp_path, capsys, client):
    """OpenRLHF: six senders of one sample each (five tries 1 s apart) at a capacity of two; TRL: two ranks
    with batches of four, twice the capacity. Stand-in judgments of 0.05 s, so the protocol is what runs."""
    argv = [*client, "--fake", "0.05", "--requests", "24", "--lanes", "1", "--queue", "1", "--json"]
    code = serve_load.main([*argv, str(tmp_path / "load.json"), "--markdown", str(tmp_path / "load.md")])
    out = capsys.readouterr().out
    assert code == 0, out
    said = json.loads((tmp_path / "load.json").read_text())
    assert [name for name, ok, _ in said["checks"] if ok] == [
        "no sample lost",
        "no request failed",
        "each content judged once",
        "each kind its verdict",
    ]
    load = said["load"]
    assert load["samples"] == 24 and load["lost"] == [] and load["failed"] == 0
    assert load["senders"] == (6 if client[1] == "openrlhf" else 2)
    assert "| lost | failed |" in (tmp_path / "load.md").read_text()


def test_the_trainer_checks_fail_when_a_sample_is_lost_or_a_request_failed():
    good = serve_load.TrainerLoad("openrlhf", 6, 24, 24, [], 0, [0.1] * 24, {}, 10)
    assert [ok for _, ok, _ in serve_load.trainer_checks(good, judgments=10)] == [True] * 4
    broken = serve_load.TrainerLoad("openrlhf", 6, 29, 24, ["load-0003"], 5, [0.1] * 24, {"wrong": 1}, 10)
    assert [ok for _, ok, _ in serve_load.trainer_checks(broken, judgments=11)] == [False] * 4


def test_get_reward_waits_for_room_and_answers_429_only_past_its_bound(tmp_path, monkeypatch):
    """A queue of nothing beyond one lane: the second sample waits for the first's judgment rather than being
    refused; with a bound shorter than a judgment, it is refused, as 429, once the bound is past."""
    import threading

    from fastapi.testclient import TestClient

    from kerneljudge.config import JudgeConfig
    from kerneljudge.serve import get_reward
    from kerneljudge.serve.app import create_app
    from kerneljudge.serve.service import Service

    sent = serve_load.plan(2, variants=2, seed=0, mix={"honest": 100})
    service = Service(serve_load.StandInLanes(1, 0.6), tmp_path / "s.db", JudgeConfig(device="cpu"), queue=0)
    client = TestClient(create_app(service))
    try:
        replies = [None, None]

        def post(index: int) -> None:
            replies[index] = client.post("/get_reward", json=serve_load.openrlhf_body(sent[index]))

        threads = [threading.Thread(target=post, args=(index,)) for index in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert [r.status_code for r in replies] == [200, 200], [r.text for r in replies]
        assert [r.json()["scores"] for r in replies] == [[1.0], [1.0]]
        monkeypatch.setattr(get_reward, "ADMISSION_WAIT_S", 0.2)
        judged = {s.item["candidate"] for s in sent}
        fresh = [s for s in serve_load.plan(40, variants=40, seed=3, mix={"honest": 100})]
        fresh = list({s.item["candidate"]: s for s in fresh if s.item["candidate"] not in judged}.values())
        tries: list[int] = []
        real_submit = service.submit
        monkeypatch.setattr(service, "submit", lambda items, *a: tries.append(len(items)) or real_submit(items, *a))
        for pair, codes in ((fresh[:2], [200, 429]), ([fresh[2], fresh[2]], [200, 200])):
            # Two new judgments, room for one: the other waits its bound and is refused. The same content
            # twice needs room for one judgment: the second shares it, however full the queue.
            sent[:] = pair
            threads = [threading.Thread(target=post, args=(index,)) for index in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert sorted(r.status_code for r in replies) == codes, [r.text[:200] for r in replies]
            if codes == [200, 429]:  # the refused one tried at most on arrival and at the line's head, not each poll
                assert len(tries) <= 3, tries
        refused = client.get("/metrics").text
        assert 'kerneljudge_rejected_total{reason="queue_full"} 1.0' in refused  # the one 429, not the tries
    finally:
        service.close()
