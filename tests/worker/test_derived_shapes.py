"""Shape families derived from a task's size globals (worker/correctness/derived.py): what is varied, the memory
bound, and the verdicts of candidates right only at the public size (docs/tasks.md#derived-shape-families); the size
classes drawn and what they catch are in test_shape_classes.py."""

import importlib.util
import time
import types

import pytest
import torch
from rich.console import Console

from helpers import CANDIDATES, TASKS, run_judge
from kerneljudge.checks.refusals import refused
from kerneljudge.report.table import print_verdict
from kerneljudge.results.verdict import Failure
from kerneljudge.sources.candidate import reference_as_candidate
from kerneljudge.tasks.load import load_task
from kerneljudge.tasks.shapes import MalformedFamily, read_family
from kerneljudge.worker.correctness import derived, family

HELPERS = """
import torch
import torch.nn as nn

rows = 12
cols = 40
heads = 3
verbose = True
scale = 2.0


def _shape():
    return (rows, cols)


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n * heads

    def forward(self, x):
        return x * self.n


def get_inputs():
    return [torch.randn(*_shape()) for _ in range(1) if verbose]


def get_init_inputs():
    return [heads, scale]
"""


def module_from(path):
    spec = importlib.util.spec_from_file_location(f"task_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def module_of(text, name="derived_task"):
    module = types.ModuleType(name)
    exec(compile(text, name, "exec"), module.__dict__)
    return module


def test_the_integers_read_through_helpers_and_comprehensions_but_not_bools_or_the_models_own():
    # rows and cols come through a helper and a comprehension; verbose is a bool, scale a float, and heads,
    # read by Model itself, would change the reference where the candidate cannot see it.
    assert derived.read_integers(module_of(HELPERS)) == ["rows", "cols"]


def test_values_below_the_public_one_are_off_its_power_of_two_multiples():
    assert derived.smaller(4096) == [4095, 2049, 1025]
    assert derived.smaller(16) == [15, 9, 5]
    assert derived.smaller(3) == [2] and derived.smaller(2) == [] and derived.smaller(1) == []


@pytest.mark.parametrize("small", [True, False])  # real runs on the host, or the meta device
def test_the_memory_bound_keeps_every_part_at_most_the_public_shapes(small):
    module = module_from(TASKS / "sized_scale_relu.py")
    described = derived.derive(torch, module, small=small)
    assert described["derived"] == ["batch_size", "dim"] and described["public"] == {"batch_size": 16, "dim": 256}
    shapes = described["shapes"]
    assert 0 < len(shapes) <= derived.MAX_SHAPES
    # Halving the batch pays for one more column in the inputs and outputs, not in the per-column scale.
    assert {"batch_size": 17, "dim": 129} in shapes and {"batch_size": 9, "dim": 257} not in shapes
    base = derived.probe(torch, module, real=small)
    for shape in shapes:
        for name, value in shape.items():
            setattr(module, name, value)
        found = derived.probe(torch, module, real=small)
        assert found.fits(base) and found.follows(base) and found.reshapes(base), shape
        module.batch_size, module.dim = 16, 256
    assert (module.batch_size, module.dim) == (16, 256)


def test_a_huge_task_is_derived_on_the_meta_device_without_allocating():
    module = module_from(TASKS / "sized_scale_relu.py")
    module.batch_size, module.dim = 4096, 2**20  # 16 GiB of inputs
    derived.probe(torch, module)  # the meta device's first call imports torch._dynamo: not what is measured
    started = time.monotonic()
    described = derived.family_for(torch, module, public_bytes=16 * 2**30).family
    assert time.monotonic() - started < 1.0
    assert {"batch_size": 4095} in described["shapes"] and {"dim": 2**20 - 1} in described["shapes"]


def test_only_sizes_are_varied_and_only_where_the_reference_runs():
    # dim must stay 64 (the rows are reshaped into 4 x 4 x 4) and axis changes no input's shape.
    found = derived.family_for(torch, module_from(TASKS / "fixed_reshape.py"), public_bytes=0)
    assert found.family["derived"] == ["batch_size"]
    assert found.family["shapes"] == [{"batch_size": 7}, {"batch_size": 5}, {"batch_size": 3}]
    assert found.fixed["dim"].startswith("no value qualified: the reference failed")  # what tasks lint reports


def test_an_empty_family_opts_out_and_a_declared_one_is_left_alone():
    opted_out = module_of((TASKS / "sized_scale_relu.py").read_text() + "\nSHAPE_FAMILY = []\n")
    assert family.describe(opted_out) == {} and derived.declares(opted_out)
    assert derived.family_for(torch, opted_out, public_bytes=0).family == {}
    assert derived.family_for(torch, module_from(TASKS / "family_bias_relu.py"), public_bytes=0).family == {}


def test_the_parent_reads_a_derived_family_and_refuses_a_wrong_one():
    description = {"shapes": [{"n": 7}, {"n": 5}], "public": {"n": 8}, "every": False, "derived": ["n"]}
    read = read_family(description)
    assert read.derived == ("n",) and read.summary()["derived"] is True and read.summary()["names"] == ["n"]
    assert "derived from the task's integers n" in read.trials_detail(2, refused=1)
    with pytest.raises(MalformedFamily):
        read_family({**description, "derived": ["m"]})


@pytest.mark.parametrize(
    ("kind", "summary", "expected"),
    [
        ("runtime_error", "ValueError: this kernel is built for 16 x 256", True),
        ("compile_error", "CompilationError: arange's range must be a power of 2", True),
        ("runtime_error", "AcceleratorError: CUDA error: an illegal memory access was encountered", False),
        ("runtime_error", "OutOfMemoryError: CUDA out of memory", False),
        ("tolerance", "3 of 99 elements outside tolerance", False),
        ("timeout", "the call did not return", False),
    ],
)
def test_a_refusal_is_a_plain_error_not_a_fault(kind, summary, expected):
    assert refused(Failure(kind=kind, phase="call", summary=summary)) is expected


def test_the_reference_passes_at_derived_shapes_and_the_record_names_the_integers():
    task = load_task(TASKS / "sized_scale_relu.py")
    record = run_judge(task, reference_as_candidate(task))
    assert record.status == "PASS" and record.verified, record.failure
    shaped = [t for t in record.correctness.trials if t.kind == "shape"]
    assert len(shaped) == 3 and all(t.passed and t.shape != {"batch_size": 16, "dim": 256} for t in shaped)
    summary = record.correctness.shape_family
    assert summary["derived"] is True and summary["names"] == ["batch_size", "dim"] and summary["form"] == "shapes"
    assert "derived from the task's integers batch_size, dim" in record.capabilities["hidden_shapes"].detail
    console = Console(record=True, width=240)
    print_verdict(record, console)
    assert "shape family derived from batch_size, dim" in console.export_text()


def test_an_unmasked_tail_exact_at_the_public_size_fails_at_a_derived_shape():
    record = run_judge(TASKS / "sized_scale_relu.py", CANDIDATES / "scale_relu_unmasked.py", shape_trials=6)
    assert all(t.passed for t in record.correctness.trials if t.kind != "shape")  # exact at 16 x 256
    assert record.status == "FAIL" and record.failure.kind in ("tolerance", "non_finite"), record.failure
    assert record.failure.phase.startswith("correctness (shape trial")
    assert record.correctness.shape_family["derived"] is True


@pytest.mark.parametrize("policy", ["practical", "strict"])
def test_refusing_a_derived_shape_fails_with_its_own_kind_naming_the_shapes(policy):
    # Every derived shape is one where the reference built and ran: a kernel that raises there handles less
    # than the model it replaces, under either policy; KJ-C003 keeps each refusal as evidence.
    record = run_judge(TASKS / "sized_scale_relu.py", CANDIDATES / "scale_relu_refuses.py", policy=policy)
    assert record.status == "FAIL" and not record.verified and record.failure.kind == "shape_refused"
    [refusal] = [f for f in record.findings if f.code == "KJ-C003"]
    assert refusal.severity == "error" and refusal.evidence["count"] == 3
    assert "ValueError: this kernel is built for 16 x 256" in refusal.evidence["refusals"][0]["error"]
    assert all(r["shape"] in record.failure.summary for r in refusal.evidence["refusals"])
    assert "the candidate refused 3 (shape_refused, KJ-C003)" in record.capabilities["hidden_shapes"].detail


def test_a_task_whose_width_is_bound_by_a_reshape_still_passes_its_reference():
    task = load_task(TASKS / "fixed_reshape.py")
    record = run_judge(task, reference_as_candidate(task))
    assert record.status == "PASS" and record.verified, record.failure
    assert record.correctness.shape_family["names"][0] == "batch_size"  # the width too, where 64 divides the rows
    shapes = [t.shape for t in record.correctness.trials if t.kind == "shape"]
    assert len(shapes) == 3 and all(s.get("batch_size", 8) * s.get("dim", 64) % 64 == 0 for s in shapes)


def test_an_empty_family_keeps_the_public_shape_only(tmp_path):
    path = tmp_path / "opted_out.py"
    path.write_text((TASKS / "sized_scale_relu.py").read_text() + "\nSHAPE_FAMILY = []\n")
    record = run_judge(path, CANDIDATES / "scale_relu_unmasked.py")
    assert record.status == "PASS" and record.correctness.shape_family is None  # as before: right at 16 x 256
    assert "no shape but the public one (SHAPE_FAMILY = [])" in record.capabilities["hidden_shapes"].detail
