"""The candidate's worker never holds the reference (tasks/inputs_source.py, worker/correctness/seeded.py): it makes the
trials' inputs from the task's inputs-only source, so a candidate that hunts the task's `Model` in its own
process finds nothing by any route, and its answer is its own. Both candidates below found the reference and
passed every trial when the worker loaded the task's whole source (checked against the code before the
change); audit mode, since enforce's preflight rejects them before import, which is not what is tested."""

from __future__ import annotations

from helpers import CANDIDATES, TASKS, probes, run_judge


def assert_judged_on_its_own(record, routes: int) -> None:
    assert record.status == "FAIL" and record.failure is not None, (record.status, record.failure)
    assert record.failure.kind == "tolerance" and record.failure.phase.startswith("correctness"), record.failure
    found = probes(record, "FOUND")
    assert not found, found
    assert len(probes(record, "nothing")) >= routes, record.logs["candidate"].stdout_tail
    assert record.correctness.inputs == {"made": "each worker"}  # remade from the seed, not shipped


def test_a_candidate_that_hunts_the_model_through_python_finds_nothing():
    """sys.modules, the collector's classes, dicts and strings, the frames above __init__ and forward, the line
    cache, the files a task may lie in (/proc's command lines, the reference's workspace), the environment."""
    record = run_judge(
        TASKS / "hidden_formula.py", CANDIDATES / "hunts_the_reference.py", mode="audit", policy="strict"
    )
    assert_judged_on_its_own(record, routes=14)


def test_a_candidate_that_reads_its_memory_and_imports_for_the_source_finds_nothing():
    """Every writable mapping of /proc/self/mem searched for a text defining Model, and the task imported by
    the names and files it may have."""
    record = run_judge(
        TASKS / "hidden_formula.py", CANDIDATES / "reads_its_memory_for_the_reference.py", mode="audit", policy="strict"
    )
    assert_judged_on_its_own(record, routes=2)
