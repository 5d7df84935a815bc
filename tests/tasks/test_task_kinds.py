"""Every kind of task the public sets hold, judged end to end on the CPU: scalar losses, integer labels,
inputs whose structure the task guarantees (triangular matrices, probability rows), tuples of outputs of
four dtypes, in-place references and references that draw random numbers. Each task's own reference, as
its candidate, must be verified in enforce mode (docs/conformance.md); tasks written for the tests."""

from __future__ import annotations

import pytest

from helpers import CANDIDATES, TASKS, run_judge
from kerneljudge.sources.candidate import reference_as_candidate
from kerneljudge.tasks.load import load_task

KINDS = ["scalar_loss", "int_labels", "triangular", "probabilities", "mixed_outputs", "inplace", "random_state"]


@pytest.fixture(scope="module")
def verdicts():
    """Each task judged with its own reference as the candidate, once for the module."""
    found = {}
    for name in KINDS:
        task = load_task(TASKS / f"{name}.py")
        found[name] = run_judge(task, reference_as_candidate(task), mode="enforce")
    return found


@pytest.mark.parametrize("name", KINDS)
def test_the_reference_as_its_own_candidate_is_verified(verdicts, name):
    record = verdicts[name]
    assert record.status == "PASS" and record.verified, (record.failure, [f.code for f in record.findings])
    trials = record.correctness.trials  # with three shape trials where a family is derived from size globals
    assert len([t for t in trials if t.kind != "shape"]) == 10 and all(t.passed for t in trials)


def test_a_scalar_loss_is_compared_as_a_zero_dim_tensor(verdicts):
    trial = verdicts["scalar_loss"].correctness.trials[0]
    [output] = trial.outputs
    assert output["numel"] == 1 and output["max_abs_error"] == output["reference_max_abs_error"]  # the same code


def hidden(record):
    return [
        t.distribution for t in record.correctness.trials if t.kind == "hidden" and t.distribution["kind"] != "standard"
    ]


def test_integer_labels_stay_integers_under_every_hidden_distribution(verdicts):
    reshaped = hidden(verdicts["int_labels"])
    assert reshaped, "no hidden distribution ran"
    for distribution in reshaped:
        assert 1 not in distribution["applied_to"] and "integer" in distribution["kept_as_made"]["1"]
        assert distribution["applied_to"] == [0]  # the logits still move: the hardening is not lost


def test_structured_inputs_keep_their_structure_and_a_kernel_relying_on_it_passes(verdicts):
    for name, why in (("triangular", "triangular"), ("probabilities", "row_stochastic")):
        for distribution in hidden(verdicts[name]):
            kept = distribution["kept_as_made"]
            if name == "triangular" and distribution["kind"] in ("scaled", "heavy_tailed"):
                assert kept == {}, distribution  # a positive factor per element keeps the zeros where they are
                continue
            assert set(kept) == {"0", "1"} and all(why in reason for reason in kept.values()), distribution
    record = run_judge(TASKS / "triangular.py", CANDIDATES / "triangular_aware.py", mode="enforce")
    assert record.status == "PASS" and record.verified, record.failure


def test_four_kinds_of_output_compare_each_by_its_rule(verdicts):
    outputs = verdicts["mixed_outputs"].correctness.trials[5].outputs
    assert [o["numel"] for o in outputs] == [16, 16, 640, 640]
    assert outputs[1]["mismatch_count"] == 0 and outputs[2]["mismatch_count"] == 0  # exact: int64 and bool
    assert verdicts["mixed_outputs"].correctness.tolerance["float64"]["name"] == "float64"
    wrong = run_judge(TASKS / "mixed_outputs.py", CANDIDATES / "mixed_outputs_wrong_mask.py", mode="enforce")
    assert wrong.status == "FAIL" and wrong.failure_kind == "tolerance", wrong.failure
    assert "integer elements differ" in wrong.failure.summary
    assert [o["passed"] for o in wrong.correctness.trials[0].outputs] == [True, True, False, True]


def test_an_in_place_reference_is_matched_by_its_in_place_self(verdicts):
    codes = {f.code for f in verdicts["inplace"].findings}
    assert not codes & {"KJ-R021", "KJ-R023"}  # writing its input and returning it is what the reference does


def test_a_reference_drawing_random_numbers_is_judged_from_a_common_random_state(verdicts):
    record = verdicts["random_state"]
    [note] = [f for f in record.findings if f.code == "KJ-T002"]
    assert note.severity == "info"
