"""Groups in a batch: a manifest line of one task's candidates judged as a group (judgment/group.py), `--group-size`
grouping every item with the others of its task, each record stored as it is made, and a rerun that resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import EXAMPLES
from kerneljudge.config import JudgeConfig
from kerneljudge.results.store import Store
from kerneljudge.runs.batch import Interrupt, ManifestError, Prepared, prepare, read_manifest, run_batch, units_of

CONFIG = JudgeConfig(device="cpu", policy="practical", timeout_s=90.0, timing=False)
TASK = EXAMPLES / "softmax" / "reference.py"
HONEST = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
HONEST += "        return torch.softmax(x, dim=-1)\n"
CAPPED = HONEST.replace(
    "return torch.softmax(x, dim=-1)", "return torch.softmax(x[:, :512], dim=-1).repeat(1, 2)[:, :1000]"
)


def manifest(folder: Path, *lines: dict) -> Path:
    for name, text in (("honest.py", HONEST), ("capped.py", CAPPED), ("again.py", HONEST + "\n# again\n")):
        (folder / name).write_text(text)
    path = folder / "manifest.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_group_line_is_read_as_its_candidates_marked_with_their_line(tmp_path):
    path = manifest(
        tmp_path,
        {"task": str(TASK), "candidates": ["honest.py", "capped.py"]},
        {"task": str(TASK), "candidate": "again.py"},
    )
    items = read_manifest(path)
    assert [i.candidate.name for i in items] == ["honest.py", "capped.py", "again.py"]
    assert items[0].group == items[1].group == f"{path} line 1" and items[2].group is None
    assert items[1].where == f"{path} line 1 candidate 2"


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ({"task": "t.py", "candidates": []}, "a list of 1 to"),
        ({"task": "t.py", "candidates": "c.py"}, "a list of 1 to"),
        ({"task": "t.py", "candidates": ["c.py", 3]}, "must be paths"),
        ({"task": "t.py", "candidates": ["c.py"], "candidate": "c.py"}, "unknown key(s) 'candidate'"),
        ({"candidates": ["c.py"]}, "'task' must be a path"),
    ],
)
def test_a_malformed_group_line_is_named_in_one_line(tmp_path, line, says):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(ManifestError, match="line 1") as raised:
        read_manifest(path)
    assert says in str(raised.value) and "\n" not in str(raised.value)


def test_units_keep_a_lines_group_or_group_every_item_by_task(tmp_path):
    path = manifest(
        tmp_path,
        {"task": str(TASK), "candidate": "honest.py"},
        {"task": str(TASK), "candidates": ["capped.py", "again.py"]},
        {"task": "builtin:softmax_fp32", "candidate": "honest.py"},
        {"task": str(TASK), "candidate": "again.py"},
    )
    entries = [(entry, index) for index, entry in enumerate(prepare(read_manifest(path)))]

    def shape(units: list[list[tuple[Prepared, int]]]) -> list[list[int]]:
        return [[index for _, index in unit] for unit in units]

    assert shape(units_of(entries, None)) == [[0], [1, 2], [3], [4]]  # the line's group; the rest alone
    assert shape(units_of(entries, 8)) == [[0, 1, 2, 4], [3]]  # by task, in the manifest's order
    assert shape(units_of(entries, 3)) == [[0, 1, 2], [3], [4]]
    assert shape(units_of(entries, 1)) == [[0], [1], [2], [3], [4]]


def test_a_batch_judges_a_group_line_together_stores_each_record_and_resumes(tmp_path):
    path = manifest(
        tmp_path,
        {"task": str(TASK), "candidates": ["honest.py", "capped.py", "again.py"]},
        {"task": str(TASK), "candidate": "honest.py"},  # the same candidate alone: stored once, as the group's
    )
    store = tmp_path / "results.db"
    counts = run_batch(read_manifest(path), CONFIG, store, progress=False)
    assert (counts.judged, counts.passed, counts.failed, counts.skipped) == (3, 2, 1, 1)
    with Store(store) as opened:
        records = {r.candidate.name: r for r in opened}
    group = [records[name] for name in ("honest", "capped", "again")]
    assert [r.status for r in group] == ["PASS", "FAIL", "PASS"]
    assert [r.workers.group.index for r in group] == [0, 1, 2] and {r.workers.group.size for r in group} == {3}
    assert len({r.workers.group.id for r in group}) == 1 and {r.workers.checked for r in group} == {"group"}
    again = run_batch(read_manifest(path), CONFIG, store, progress=False)
    assert (again.judged, again.skipped) == (0, 4)


def test_a_batch_asked_to_stop_in_a_group_starts_none_of_its_other_candidates(tmp_path):
    path = manifest(tmp_path, {"task": str(TASK), "candidates": ["honest.py", "capped.py", "again.py"]})
    stop = Interrupt()
    counts = run_batch(
        read_manifest(path), CONFIG, tmp_path / "r.db", progress=False, stop=stop, on_record=lambda *_: stop.ask()
    )
    assert (counts.judged, counts.interrupted, counts.not_started) == (1, 0, 2)
    assert "2 not started" in counts.summary()
