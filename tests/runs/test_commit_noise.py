"""The commit-noise benchmark (benchmarks/commit_noise.py): honest torch candidates judged with timing, and each
record's commit and host-time ratios of the two workers."""

import json
import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import commit_noise  # noqa: E402  (a script of benchmarks/, not a package)


def test_honest_candidates_are_timed_and_their_commit_ratios_reported(tmp_path, capsys):
    out = tmp_path / "noise"
    argv = ["--device", "cpu", "--tasks", "1", "--samples", "1", "--small", "--jobs", "1", "--out", str(out)]
    assert commit_noise.main(argv) == 0
    (row,) = json.loads((out / "noise.json").read_text())
    assert row["status"] == "PASS" and row["r027"] is False
    assert row["least_ratio"] > 0 and row["median_ratio"] > 0 and row["host_ratio"] > 0
    table = capsys.readouterr().out
    assert "1 honest candidates, 1 lanes" in table
    assert "| least commit span |" in table and "Honest candidates found KJ-R027: 0 of 1 timed (none)." in table
