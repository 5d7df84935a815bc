"""Shape families (hidden shapes drawn from what a task declares) and strided inputs: the judge's verdicts."""

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import CANDIDATES, TASKS, malformed_family_task, run_judge
from kerneljudge.tasks.shapes import MalformedFamily, describe_shape, read_family

AXES = {
    "axes": {"batch_size": {"values": [1, 5, 16]}, "width": {"range": [1, 201, 1]}},
    "public": {"batch_size": 16, "width": 33},
}
LISTED = {
    "shapes": [{"SHAPE": {"tuple": [1, 2]}}, {"SHAPE": {"tuple": [16, 33]}}, {"SHAPE": {"tuple": [7, 127]}}],
    "public": {"SHAPE": {"tuple": [16, 33]}},
}


def test_no_family_reads_as_none():
    assert read_family({}) is None and read_family(None) is None


def test_axes_draw_distinct_shapes_that_are_not_public():
    family = read_family(AXES)
    assert family.size == 3 * 200
    shapes = family.draw(50, random.Random(0))
    assert len(shapes) == 50 and len({describe_shape(s) for s in shapes}) == 50
    assert {"batch_size": 16, "width": 33} not in shapes
    assert all(1 <= s["width"] <= 200 and s["batch_size"] in (1, 5, 16) for s in shapes)


def test_listed_family_never_draws_the_public_shape_and_keeps_tuples():
    family = read_family(LISTED)
    shapes = family.draw(10, random.Random(1))
    assert sorted(describe_shape(s) for s in shapes) == ["SHAPE=(1, 2)", "SHAPE=(7, 127)"]
    assert family.summary() == {
        "form": "shapes",
        "size": 3,
        "names": ["SHAPE"],
        "public": {"SHAPE": [16, 33]},
        "every_shape": False,
        "timing_shapes": 0,
        "derived": False,
    }


def test_a_large_table_is_drawn_from_without_enumerating_it():
    family = read_family({"axes": {"n": {"range": [1, 10**9, 1]}}, "public": {"n": 5}})
    assert family.size == 10**9 - 1
    assert len(family.draw(3)) == 3


AXIS = st.one_of(
    st.lists(st.integers(1, 50), min_size=1, max_size=6, unique=True).map(lambda v: {"values": v}),
    st.tuples(st.integers(1, 20), st.integers(1, 40), st.integers(1, 3))
    .filter(lambda r: r[0] < r[1])
    .map(lambda r: {"range": [r[0], r[1], r[2]]}),
)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.dictionaries(st.sampled_from(["rows", "cols", "heads"]), AXIS, min_size=1), st.integers(1, 8), st.randoms())
def test_drawn_shapes_are_in_the_family_distinct_and_never_public(axes, count, rng):
    values = {n: a["values"] if "values" in a else list(range(*a["range"])) for n, a in axes.items()}
    public = {n: v[0] for n, v in values.items()}
    family = read_family({"axes": axes, "public": public})
    combos = [dict(zip(values, c, strict=True)) for c in itertools.product(*values.values())]
    shapes = family.draw(count, rng)
    assert all(s in combos and s != public for s in shapes)
    assert len({describe_shape(s) for s in shapes}) == len(shapes) == min(count, len(combos) - 1)


@pytest.mark.parametrize(
    "description",
    [
        {"axes": {"width": {"values": []}}, "public": {"width": 1}},
        {"axes": {"width": {"range": [5, 5, 1]}}, "public": {"width": 1}},
        {"axes": {"width": {"values": [1]}}, "public": {}},
        {"shapes": [{"other": 1}], "public": {"width": 1}},
        {"shapes": [], "public": {}},
        {"axes": {"not a name": {"values": [1]}}, "public": {"not a name": 1}},
        {"axes": {"width": {"values": [{"tensor": "t0"}]}}, "public": {"width": 1}},
    ],
)
def test_malformed_descriptions_are_refused(description):
    with pytest.raises(MalformedFamily):
        read_family(description)


def test_honest_candidate_passes_at_hidden_shapes():
    record = run_judge(TASKS / "family_bias_relu.py", CANDIDATES / "honest_torch.py")
    assert record.status == "PASS" and record.verified, record.failure
    shaped = [t for t in record.correctness.trials if t.kind == "shape"]
    assert len(shaped) == 3 and all(t.passed for t in shaped)
    assert all(t.shape != {"batch_size": 16, "width": 33} for t in shaped)
    assert len({(t.shape["batch_size"], t.shape["width"]) for t in shaped}) == 3
    assert record.correctness.shape_family["size"] == 16
    assert record.capabilities["hidden_shapes"].status == "available"


def test_function_family_with_tuples():
    record = run_judge(TASKS / "family_listed.py", CANDIDATES / "honest_torch.py", shape_trials=4)
    shaped = [t.shape["SHAPE"] for t in record.correctness.trials if t.kind == "shape"]
    assert record.status == "PASS", record.failure
    assert sorted(shaped) == [[1, 2], [1, 127], [7, 2], [7, 127]]  # every shape but the public (16, 33)


def test_a_kernel_for_the_public_width_only_fails_at_a_hidden_shape():
    # The public trials pass: it is right at width 33. Drawing all 15 other shapes of the family makes the
    # outcome certain (8 of them are wider than 33, where the unwritten tail shows); three draws miss them
    # all one time in 13.
    record = run_judge(TASKS / "family_bias_relu.py", CANDIDATES / "fixed_width.py", shape_trials=15)
    assert all(t.passed for t in record.correctness.trials if t.kind != "shape")
    assert record.status == "FAIL" and record.failure.kind == "tolerance", record.failure
    assert record.failure.phase.startswith("correctness (shape trial") and "width=" in record.failure.phase
    failed = record.correctness.trials[-1]
    assert not failed.passed and failed.shape["width"] in (127, 200)


def test_a_kernel_that_refuses_other_shapes_fails_to_build_there():
    record = run_judge(TASKS / "family_listed.py", CANDIDATES / "public_shape_only.py")
    assert record.status == "FAIL" and record.failure.kind == "runtime_error"
    assert "at SHAPE=(" in record.failure.summary and "built for width 33" in record.failure.summary


def test_without_a_family_only_the_public_shape_is_checked(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "fixed_width.py")
    assert record.status == "PASS"  # nothing declares other shapes: the judge cannot know
    assert record.correctness.shape_family is None
    assert record.capabilities["hidden_shapes"].status == "unavailable"
    assert "declares no shape family" in record.capabilities["hidden_shapes"].detail


def test_native_mode_checks_the_public_shape_only():
    record = run_judge(TASKS / "family_bias_relu.py", CANDIDATES / "fixed_width.py", mode="off")
    assert record.status == "PASS" and not [t for t in record.correctness.trials if t.kind == "shape"]


def test_a_malformed_family_is_the_tasks_fault(tmp_path):
    record = run_judge(malformed_family_task(tmp_path), CANDIDATES / "honest_torch.py")
    assert record.status == "ERROR" and not record.valid
    assert "widht" in record.failure.summary and "does not define" in record.failure.summary


def test_timing_after_shape_trials_measures_the_public_shape():
    record = run_judge(TASKS / "family_bias_relu.py", CANDIDATES / "honest_torch.py", timing=True)
    assert record.status == "PASS" and record.timing.measured, record.timing.reason


def test_a_strided_input_reaches_the_candidate_strided():
    honest = run_judge(TASKS / "strided_bias_relu.py", CANDIDATES / "honest_torch.py")
    assert honest.status == "PASS", honest.failure
    dense = run_judge(TASKS / "tiny_bias_relu.py", CANDIDATES / "ignores_strides.py")
    assert dense.status == "PASS", dense.failure  # right for contiguous inputs
    strided = run_judge(TASKS / "strided_bias_relu.py", CANDIDATES / "ignores_strides.py")
    assert strided.status == "FAIL" and strided.failure.kind in ("non_finite", "tolerance"), strided.failure


def test_the_command_line_can_ask_for_the_public_shape_only(capsys):
    from kerneljudge.cli import main

    task, candidate = str(TASKS / "family_bias_relu.py"), str(CANDIDATES / "fixed_width.py")
    common = ["judge", task, candidate, "--device", "cpu", "--policy", "practical", "--no-timing", "--quiet"]
    assert main([*common, "--shape-trials", "0"]) == 0  # right at the public width, and nothing else is asked
    assert main([*common, "--shape-trials", "-1"]) == 1
    assert "kerneljudge: error: --shape-trials must be 0 or more, got -1" in capsys.readouterr().err
