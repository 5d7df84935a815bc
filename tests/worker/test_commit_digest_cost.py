"""The commit's cost benchmark (docs/timing.md, "What the commit window still holds"): each row times the commit's
digests of outputs of one size against the kernel that makes them, and the table prints every row."""

import json
import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import commit_digest_cost  # noqa: E402  (a script of benchmarks/, not a package)


def test_each_size_and_count_is_timed_both_ways_and_tabled(tmp_path, capsys, monkeypatch):
    out = tmp_path / "rows.json"
    argv = ["commit_digest_cost.py", "--device", "cpu", "--sizes-kib", "4", "64", "--calls", "1", "3"]
    monkeypatch.setattr(sys, "argv", [*argv, "--repeats", "2", "--json", str(out)])
    commit_digest_cost.main()
    found = json.loads(out.read_text())
    rows = found["rows"]
    assert found["fused"] is False  # the CPU: the operators digest, in both columns
    assert [(r["kib"], r["calls"]) for r in rows] == [(4, 1), (64, 1), (4, 3), (64, 3)]
    assert all(r["kernel_ms"] > 0 and r["operators_ms"] > 0 and r["digest_ms"] > 0 and r["ratio"] > 0 for r in rows)
    table = capsys.readouterr().out
    assert table.count("\n| 4 | ") == 2 and table.count("\n| 64 | ") == 2
