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
