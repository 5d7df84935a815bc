"""Trials' inputs made again in the candidate's worker from each trial's seed (worker/correctness/seeded.py): the
record says where they were made; inputs that the candidate's worker cannot make as the reference did are
shipped from the reference's, whatever the reason (a task that draws from an unseeded source, a candidate
that tampers with torch's generators). Tasks and candidates written for the tests."""

from __future__ import annotations

from helpers import CANDIDATES, TASKS, run_judge
from kerneljudge.sources.candidate import reference_as_candidate
from kerneljudge.tasks.load import load_task


def test_inputs_are_made_in_each_worker_in_the_hardened_modes_and_shipped_in_off():
    task = load_task(TASKS / "probabilities.py")
    hardened = run_judge(task, reference_as_candidate(task), mode="enforce")
    assert hardened.status == "PASS" and hardened.verified, hardened.failure
    assert hardened.correctness.inputs == {"made": "each worker"}
    native = run_judge(task, reference_as_candidate(task), mode="off")
    assert native.status == "PASS" and native.correctness.inputs == {"made": "reference worker"}


def test_inputs_that_do_not_follow_from_the_seed_are_shipped_and_the_reference_is_verified():
    task = load_task(TASKS / "unseeded_inputs.py")
    record = run_judge(task, reference_as_candidate(task), mode="enforce")
    assert record.status == "PASS" and record.verified, (record.failure, [f.code for f in record.findings])
    inputs = record.correctness.inputs
    assert inputs["shipped"] == "trial 0" and "fingerprint differs" in inputs["why"], inputs
    assert len(record.correctness.trials) == 10 and all(t.passed for t in record.correctness.trials)


def test_a_candidate_that_tampers_with_its_generators_gets_the_reference_inputs():
    """Its zeros never reach the comparison: the trial runs on the reference's inputs, shipped."""
    # audit: enforce rejects the patch before import (KJ-S001), which is not the mechanism under test
    record = run_judge(TASKS / "probabilities.py", CANDIDATES / "zeroes_its_own_inputs.py", mode="audit")
    inputs = record.correctness.inputs
    assert inputs["shipped"] == "trial 0" and "fingerprint differs" in inputs["why"], inputs
    assert record.correctness.trials and all(t.passed for t in record.correctness.trials), record.failure
    first = record.correctness.trials[0].outputs[0]
    assert first["numel"] == 1 and first["max_abs_error"] == first["reference_max_abs_error"]  # the same formula


def test_inputs_made_alike_once_and_not_again_at_the_replay_are_shipped_and_the_trial_run_again():
    task = load_task(TASKS / "counted_inputs.py")
    record = run_judge(task, reference_as_candidate(task), mode="enforce")
    assert record.status == "PASS" and record.verified, (record.failure, [f.code for f in record.findings])
    assert record.correctness.inputs["shipped"] == "replay of trial 0", record.correctness.inputs
    assert [t.index for t in record.correctness.trials] == list(range(10))  # the first trial's record: its rerun
    assert record.correctness.replay["trials"][0]["trial"] == 0 and record.correctness.replay["bitwise_identical"]


def test_inputs_that_cannot_be_made_apart_from_the_reference_are_shipped_from_the_start():
    """Its get_inputs reads Model: the candidate's worker is sent no source (tasks/inputs_source.py)."""
    task = load_task(TASKS / "inputs_from_the_model.py")
    record = run_judge(task, reference_as_candidate(task), mode="enforce")
    assert record.status == "PASS" and record.verified, (record.failure, [f.code for f in record.findings])
    inputs = record.correctness.inputs
    assert inputs["shipped"] == "the start" and "reaches Model" in inputs["why"], inputs
