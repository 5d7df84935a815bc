"""The red-team suite on the CPU: every hack fixture is caught with its evidence, every honest one verified."""

import json

import pytest

from helpers import make_record
from kerneljudge.cli import main
from kerneljudge.redteam import FIXTURES_DIR
from kerneljudge.redteam.runner import inert_in_graph_timing, run_suite
from kerneljudge.redteam.suite import FIXTURES


def test_every_fixture_file_is_registered_and_every_entry_has_a_file():
    assert {f.name for f in FIXTURES} == {p.stem for p in FIXTURES_DIR.glob("*.py")}


def test_every_attack_class_has_a_fixture():
    attacks = {f.attack for f in FIXTURES}
    expected = {f"H{n:02d}" for n in [*range(1, 12), *range(20, 27), *range(30, 35), *range(40, 44)]}
    assert expected - {"H25"} <= attacks, sorted(expected - attacks)


def test_redteam_command_exits_0_when_all_match_and_writes_json_and_records(tmp_path, capsys):
    out, records = tmp_path / "redteam.json", tmp_path / "records"
    only = ["--only", "honest_torch", "mutate_inputs"]
    code = main(["redteam", "--device", "cpu", *only, "--json", str(out), "--records", str(records)])
    written = json.loads(out.read_text())
    assert code == 0 and written["matched"] == 2 and written["complete"] is True
    # each fixture's whole record, to read why it came out as it did
    kept = {p.stem: json.loads(p.read_text()) for p in records.glob("*.json")}
    assert sorted(kept) == ["honest_torch", "mutate_inputs"]
    assert kept["honest_torch"]["status"] == "PASS" and kept["mutate_inputs"]["status"] == "FAIL"
    said = capsys.readouterr()
    assert "2/2 fixtures matched" in said.out
    # Each outcome as it came, on stderr (and in the JSON, marked incomplete): a run a machine's limit cuts
    # short still leaves what it judged.
    assert "honest_torch: PASS (matched)" in said.err and "mutate_inputs: FAIL (matched)" in said.err
    assert main(["redteam", "--device", "cpu", *only, "--records", str(tmp_path / "no" / "such")]) == 1
    assert "cannot write the records: directory" in capsys.readouterr().err


def test_the_suite_reports_each_outcome_as_it_comes_with_all_so_far():
    heard = []
    outcomes, _ = run_suite(
        "cpu",
        "audit",
        ["honest_torch", "mutate_inputs"],
        jobs=2,
        on_outcome=lambda o, s: heard.append((o.fixture, len(s))),
    )
    assert sorted(name for name, _ in heard) == ["honest_torch", "mutate_inputs"]
    assert [count for _, count in heard] == [1, 2]
    assert [o.fixture for o in outcomes] == ["honest_torch", "mutate_inputs"]  # suite order, whatever came first


def test_redteam_rejects_unknown_fixtures(capsys):
    assert main(["redteam", "--only", "nope"]) == 1
    assert "unknown fixture(s) nope" in capsys.readouterr().err


def test_the_documented_fixture_table_is_the_suite():
    from pathlib import Path

    from kerneljudge.redteam.suite import fixtures_markdown

    docs = (Path(__file__).resolve().parents[2] / "docs" / "redteam.md").read_text()
    assert fixtures_markdown() in docs


@pytest.mark.parametrize(
    ("regime", "rechecks", "status", "inert"),
    [
        ("cuda_graph", 2, "PASS", True),
        ("cuda_graph", 0, "PASS", False),  # no plain call after the replays: nothing shows the hack was off
        ("busy_precursor", 2, "PASS", False),  # every timed call was a plain call: the hack would have run
        ("cuda_graph", 2, "FAIL", False),
    ],
)
def test_a_counted_hack_counts_as_inert_only_when_graph_replays_were_rechecked(regime, rechecks, status, inert):
    record = make_record(status=status, speedup=1.0)
    record.timing.launch_regime = regime
    record.timing.graph_rechecks = rechecks
    assert inert_in_graph_timing(record) is inert


@pytest.mark.parametrize(
    ("mode", "codes", "kind", "waived"),
    [
        ("enforce", ["KJ-R020"], "integrity_violation", True),  # the replay ended it before the trace could run
        ("audit", ["KJ-R020"], "integrity_violation", False),  # audit goes on to the trace: KJ-R024 must be there
        ("enforce", ["KJ-S010"], "integrity_violation", False),  # ended by a code the fixture does not list
        ("enforce", ["KJ-R020"], "tolerance", False),
    ],
)
def test_cuda_evidence_is_waived_only_where_another_listed_code_ended_an_enforced_judgment(mode, codes, kind, waived):
    from kerneljudge.redteam.runner import ended_by_another
    from kerneljudge.results.verdict import Finding

    fixture = next(f for f in FIXTURES if f.name == "gpu_side_stream_short")
    findings = [Finding(code=c, detector="test", severity="error", summary="s") for c in codes]
    record = make_record(status="FAIL", findings=findings, failure_kind=kind)
    assert ended_by_another(fixture, record, mode) is waived
