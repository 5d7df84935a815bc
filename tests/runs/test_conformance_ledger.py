"""The conformance sweep's ledger: a run on another machine judges only what the ledger does not hold for this
judge, and the table counts the ledger's rows; a row of another judge version counts for nothing."""

import json
import shutil
import sys

from helpers import ROOT, TASKS

sys.path.insert(0, str(ROOT / "benchmarks"))
import conformance  # noqa: E402  (a script of benchmarks/, not a package)
from conformance_ledger import Ledger  # noqa: E402
from conformance_ledger import main as merge_reports  # noqa: E402

from kerneljudge import __version__  # noqa: E402


def kernelbench_tree(tmp_path):
    """A KernelBench-shaped checkout of one small level-1 problem written for the tests (a scalar loss)."""
    level = tmp_path / "KernelBench" / "KernelBench" / "level1"
    level.mkdir(parents=True)
    shutil.copy(TASKS / "scalar_loss.py", level / "1_Scalar_loss.py")
    return tmp_path / "KernelBench"


def sweep(checkout, out, *extra):
    code = conformance.main(["--kernelbench", str(checkout), "--out", str(out), "--device", "cpu", *extra])
    rows = json.loads((out / "conformance.json").read_text())["kernelbench"]
    return code, rows


def ledger_rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_second_machine_reads_the_ledger_and_judges_nothing_again(tmp_path):
    checkout = kernelbench_tree(tmp_path)
    code, rows = sweep(checkout, tmp_path / "first")
    assert code == 0 and [r["outcome"] for r in rows] == ["ok"], rows
    written = ledger_rows(tmp_path / "first" / "ledger.jsonl")
    assert len(written) == 1 and written[0]["kerneljudge_version"] == __version__ and written[0]["timing"] is False
    assert written[0]["problem"] == "1_Scalar_loss" and len(written[0]["task_sha256"]) == 64
    # No problem's source goes into the ledger: it is committed to this repository.
    assert "torch.mean" not in (tmp_path / "first" / "ledger.jsonl").read_text()

    # Another machine, an empty output folder: the row answers, no judgment is made.
    code, rows = sweep(checkout, tmp_path / "second", "--ledger", str(tmp_path / "first" / "ledger.jsonl"))
    assert code == 0 and [r["outcome"] for r in rows] == ["ok"]
    assert not (tmp_path / "second" / "kernelbench.db").exists()
    assert ledger_rows(tmp_path / "second" / "ledger.jsonl") == written
    assert "| level1 | 1 | 1 |" in (tmp_path / "second" / "conformance.md").read_text()

    # A call whose ledger did not come back: its report alone adds the row to the committed ledger.
    committed = tmp_path / "committed.jsonl"
    committed.write_text("")
    assert merge_reports([str(committed), str(tmp_path / "first" / "conformance.json")]) == 0
    assert ledger_rows(committed) == written


def test_a_row_of_another_version_or_an_unexpected_one_with_again_does_not_answer(tmp_path):
    checkout = kernelbench_tree(tmp_path)
    (tmp_path / "first").mkdir()
    item = conformance.kernelbench_items(checkout, (1,), tmp_path / "first")[0]
    task_sha, candidate_sha = conformance.shas([item])[0]
    row = {
        "group": "level1",
        "problem": "1_Scalar_loss",
        "solution": "reference",
        "expected": "verified",
        "status": "FAIL",
        "verified": False,
        "outcome": "false_reject",
        "why": "tolerance: ...",
        "task_sha256": task_sha,
        "candidate_sha256": candidate_sha,
        "timing": False,
    }
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps(row | {"kerneljudge_version": "0.0.1"}) + "\n")
    # --stop-after: the deadline passes before any judgment starts, so only the ledger could answer.
    _, rows = sweep(checkout, tmp_path / "a", "--ledger", str(old), "--stop-after", "0.001")
    assert [r["outcome"] for r in rows] == ["missing"]
    assert len(ledger_rows(tmp_path / "a" / "ledger.jsonl")) == 1  # history kept, never counted

    current = tmp_path / "current.jsonl"
    current.write_text(json.dumps(row | {"kerneljudge_version": __version__}) + "\n")
    code, rows = sweep(checkout, tmp_path / "b", "--ledger", str(current), "--stop-after", "0.001")
    assert code == 1 and [r["outcome"] for r in rows] == ["false_reject"]
    _, rows = sweep(checkout, tmp_path / "c", "--ledger", str(current), "--stop-after", "0.001", "--again")
    assert [r["outcome"] for r in rows] == ["missing"] and ledger_rows(tmp_path / "c" / "ledger.jsonl") == []


def test_a_ledger_that_is_not_one_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "x"}\n')
    try:
        Ledger(bad)
    except SystemExit as exc:
        assert str(exc).startswith(f"{bad}:1: not a ledger row")
    else:
        raise AssertionError("a row without its keys was read")


def test_a_run_cut_off_before_its_tables_is_summarised_from_its_store_without_judging(tmp_path):
    # A device call's limit killed the sweep after it had stored its judgments but before it wrote the tables
    # and the ledger (2026-12-03): `--no-judging` writes them from the store, here or on any machine.
    checkout = kernelbench_tree(tmp_path)
    code, _ = sweep(checkout, tmp_path / "cut")
    (tmp_path / "cut" / "ledger.jsonl").unlink()
    (tmp_path / "cut" / "conformance.md").unlink()
    code, rows = sweep(checkout, tmp_path / "cut", "--no-judging")
    assert code == 0 and [r["outcome"] for r in rows] == ["ok"]
    assert [r["problem"] for r in ledger_rows(tmp_path / "cut" / "ledger.jsonl")] == ["1_Scalar_loss"]
    # Nothing stored and nothing judged: the problem is missing, not judged now.
    code, rows = sweep(checkout, tmp_path / "empty", "--no-judging")
    assert code == 1 and [r["outcome"] for r in rows] == ["missing"]
    assert not (tmp_path / "empty" / "kernelbench.db").exists()


def test_either_expectation_takes_a_verified_pass_or_a_fail_and_nothing_else():
    from types import SimpleNamespace

    entry = SimpleNamespace(verdict="either")
    for status, verified, want in [
        ("PASS", True, "ok"),
        ("FAIL", False, "ok"),
        ("SUSPICIOUS", False, "false_reject"),
        ("ERROR", False, "judge_error"),
    ]:
        assert conformance.outcome(entry, SimpleNamespace(status=status, verified=verified)) == want


def test_an_untimed_row_of_the_version_before_a_timing_only_raise_still_answers(tmp_path, monkeypatch):
    import conformance_ledger

    monkeypatch.setattr(conformance_ledger, "UNTIMED_SAME_AS", {"9.0.2": "9.0.1", "9.0.1": "9.0.0"})
    path = tmp_path / "ledger.jsonl"
    rows = [
        {"task_sha256": "t", "candidate_sha256": "c", "timing": False, "kerneljudge_version": "9.0.0", "outcome": "ok"},
        {"task_sha256": "t", "candidate_sha256": "c", "timing": True, "kerneljudge_version": "9.0.1", "outcome": "ok"},
        {"task_sha256": "u", "candidate_sha256": "c", "timing": False, "kerneljudge_version": "8.9", "outcome": "ok"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ledger = Ledger(path)
    assert ledger.get("t", "c", (False,), "9.0.2") == rows[0]  # carried over two timing-only raises
    assert ledger.get("t", "c", (True,), "9.0.2") is None  # a timed judgment is judged again
    assert ledger.get("u", "c", (False,), "9.0.2") is None  # a raise that changed more breaks the chain
    assert ledger.get("t", "c", (True,), "9.0.1") == rows[1]


def test_a_passing_row_of_the_version_before_a_raise_for_failing_judgments_still_answers(tmp_path, monkeypatch):
    """0.3.3 changed only judgments that enforce fails (kerneljudge.PASSED_SAME_AS): a PASS of 0.3.2, timed or
    not, answers for 0.3.3; a FAIL of 0.3.2 does not (that judgment may differ), nor does a raise of another
    kind break into the chain."""
    import conformance_ledger

    monkeypatch.setattr(conformance_ledger, "UNTIMED_SAME_AS", {"9.0.3": "9.0.2", "9.0.2": "9.0.1"})
    monkeypatch.setattr(conformance_ledger, "PASSED_SAME_AS", {"9.0.3": "9.0.2"})
    path = tmp_path / "ledger.jsonl"

    def row(task, timing, version, status):
        return {
            "task_sha256": task,
            "candidate_sha256": "c",
            "timing": timing,
            "kerneljudge_version": version,
            "status": status,
            "outcome": "ok",
        }

    rows = [
        row("t", True, "9.0.2", "PASS"),
        row("f", True, "9.0.2", "FAIL"),
        row("u", False, "9.0.1", "FAIL"),
        row("o", True, "9.0.1", "PASS"),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ledger = Ledger(path)
    assert ledger.get("t", "c", (True,), "9.0.3") == rows[0]  # a timed pass carried over
    assert ledger.get("f", "c", (True,), "9.0.3") is None  # a timed FAIL is judged again
    assert ledger.get("u", "c", (False,), "9.0.3") == rows[2]  # untimed: the timing-only chain, whatever it said
    assert ledger.get("o", "c", (True,), "9.0.3") is None  # 9.0.2 changed more than failing judgments


def test_a_sweep_timed_ahead_keeps_its_judgments_out_of_the_ledger(tmp_path, capsys):
    """`--timing-ahead` measures an option the ledger's key does not hold: it reads no ledger and writes none,
    and asking for one with it is a one-line error."""
    checkout = kernelbench_tree(tmp_path)
    code, rows = sweep(checkout, tmp_path / "ahead", "--timing-ahead")
    assert code == 0 and [r["outcome"] for r in rows] == ["ok"], rows
    assert not (tmp_path / "ahead" / "ledger.jsonl").exists()
    try:
        sweep(checkout, tmp_path / "refused", "--timing-ahead", "--ledger", str(tmp_path / "none.jsonl"))
    except SystemExit as exc:
        assert exc.code == 2 and "leave --ledger out" in capsys.readouterr().err
    else:
        raise AssertionError("a ledger was taken with --timing-ahead")
