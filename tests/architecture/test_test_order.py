"""The order the test processes take the test files in (tests/conftest.py): the longest files first, each file's own
tests as collected; and no name in that list is stale (a renamed file would drop out of the order unnoticed)."""

from pathlib import Path
from types import SimpleNamespace

from conftest import LONGEST_FIRST, longest_first

TESTS = Path(__file__).resolve().parents[1]


def test_every_file_run_first_exists_and_is_named_once():
    assert [name for name in LONGEST_FIRST if not (TESTS / name).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_the_longest_files_go_first_and_every_file_keeps_its_own_order():
    ids = [
        "tests/adapters/test_a.py::one",
        f"tests/{LONGEST_FIRST[1]}::first",
        "tests/adapters/test_a.py::two",
        f"tests/{LONGEST_FIRST[0]}::only",
        f"tests/{LONGEST_FIRST[1]}::second",
        "tests/worker/test_b.py::one",
    ]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in ids]
    longest_first(items)
    assert [item.nodeid for item in items] == [ids[3], ids[1], ids[4], ids[0], ids[2], ids[5]]
