"""Derived shape families at values drawn at run time by size class (tasks/size_classes.py,
worker/correctness/derived.py):
the classes drawn, a width that reaches only `__init__` varied, the draw of trial shapes, the plan's record,
the `Derive` request's checks, and a channel-width-specialised Triton kernel failing `shape_refused`
(docs/tasks.md#derived-shape-families)."""

import importlib.util
import random
import secrets

import pytest
import torch

from helpers import TASKS, run_judge
from kerneljudge import protocol
from kerneljudge.checks.refusals import refusal_failure
from kerneljudge.judgment import hidden_plan
from kerneljudge.redteam import FIXTURES_DIR
from kerneljudge.tasks import size_classes
from kerneljudge.tasks.shapes import read_family
from kerneljudge.worker.correctness import derived

CHANNEL_MIX = TASKS / "channel_mix.py"


def module_from(path, text=None):
    spec = importlib.util.spec_from_file_location(f"task_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    if text is None:
        spec.loader.exec_module(module)
    else:
        exec(compile(text, str(path), "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("public", [4096, 1024, 768, 96, 33])
def test_every_class_is_drawn_over_draws_and_no_draw_is_the_fixed_one(public):
    rng = secrets.SystemRandom()
    draws = [size_classes.draw_values(public, rng) for _ in range(200)]
    seen = {c for values in draws for v in values for c in size_classes.classify(v, public)}
    # a multiple of 128 that is not one of 256 lies below 1024 or 4096, and within twice 96 or 768
    expected = set(size_classes.CLASSES) - ({"multiple_of_128"} if public == 33 else set())
    assert seen == expected
    assert all(2 <= v != public for values in draws for v in values)
    assert len({tuple(sorted(values)) for values in draws}) > 150  # not the n - 1, n // 2 | 1 of old
    assert all(v > public for values in draws for v in values if "larger" in size_classes.classify(v, public))


def test_a_value_is_classed_against_its_public_size():
    assert size_classes.classify(80, 128) == ["even", "multiple_of_16"]
    assert size_classes.classify(192, 128) == ["even", "multiple_of_64", "larger"]
    assert size_classes.classify(384, 4096) == ["even", "multiple_of_128"]
    assert size_classes.classify(8, 4096) == ["tiny", "power_of_two"]
    assert size_classes.classify(7, 4) == ["tiny", "odd", "larger"]


def test_a_joint_shape_grows_one_size_and_shrinks_the_others_by_as_much():
    rng = random.Random(5)
    public = {"batch": 16, "features": 1024, "width": 512}
    for _ in range(50):
        for shape in size_classes.draw_joint(public, rng):
            grown = [n for n, v in shape.items() if v > public[n]]
            assert len(grown) <= 1 and len(shape) > 1
            if grown:
                factor = shape[grown[0]] / public[grown[0]]
                assert all(v <= public[n] / factor for n, v in shape.items() if n != grown[0])


def test_the_plan_draws_the_proposals_once_and_records_them():
    plan = hidden_plan.draw(42, 2, 2, 3, False, False, random.Random(3))
    first = plan.propose_sizes({"dim": 4096, "batch_size": 16})
    assert plan.propose_sizes({"dim": 4096, "batch_size": 16}) is first
    assert plan.as_record()["size_proposals"] == first and set(first["values"]) == {"dim", "batch_size"}
    assert "size_proposals" not in hidden_plan.draw(42, 2, 2, 3, False, False).as_record()


@pytest.mark.parametrize(
    "proposals",
    [
        {"values": {"dim": [1]}},  # below 2
        {"values": {"dim": [True]}},  # a bool is no size
        {"values": {"dim": 7}},  # a value, not a list
        {"values": {"not a name": [7]}},
        {"values": {"dim": list(range(2, 100))}},  # too many
        {"joint": [{}]},
        {"joint": [{"dim": 2**40}]},
        {"values": {}, "seed": 3},
    ],
)
def test_the_derive_request_refuses_malformed_proposals(proposals):
    with pytest.raises(protocol.ProtocolError):
        protocol.decode({"op": "derive", "proposals": proposals})
    assert protocol.decode({"op": "derive", "proposals": {"values": {"dim": [7, 9]}, "joint": [{"dim": 3}]}})


def test_a_width_that_reaches_only_init_is_varied():
    module = module_from(CHANNEL_MIX)
    proposals = {"values": {"out_channels": [96, 113, 320]}}  # 320: more parameter and output bytes
    found = derived.explore(torch, module, small=True, proposals=proposals)
    # no input changes shape, only the weight's, the bias's and the output's channels
    assert found.family["shapes"] == [{"out_channels": 96}, {"out_channels": 113}]
    assert found.family["derived"] == ["out_channels"] and module.out_channels == 128
    assert "no value was proposed" in found.fixed["batch_size"]


def test_an_axis_is_not_a_size_and_a_model_read_integer_stays_fixed():
    text = (
        "import torch\nimport torch.nn as nn\n\nbatch_size = 4\naxis = 2\nscale = 3\n\n\n"
        "class Model(nn.Module):\n    def __init__(self, axis):\n        super().__init__()\n"
        "        self.axis = axis\n\n"
        "    def forward(self, x):\n        return x.sum(self.axis) * scale\n\n\n"
        "def get_inputs():\n    return [torch.randn(batch_size, 4, 6, 8) * scale]\n\n\n"
        "def get_init_inputs():\n    return [axis]\n"
    )
    module = module_from(TASKS / "axis_task.py", text)
    found = derived.explore(torch, module, small=True, proposals={"values": {"batch_size": [3], "axis": [3]}})
    assert found.family["derived"] == ["batch_size"]
    assert found.fixed["axis"] == "no value qualified: no tensor's shape follows it at 1 of 1 values"
    assert found.fixed["scale"].startswith("the task's Model reads it itself")


def test_the_trial_shapes_drawn_set_each_size_off_the_powers_of_two():
    module = module_from(CHANNEL_MIX)
    rng = secrets.SystemRandom()
    for _ in range(25):
        found = derived.explore(torch, module, True, size_classes.propose(derived.integers(module), rng))
        family = read_family(found.family)
        assert family.summary()["classes"][:2] == ["tiny", "odd"]
        drawn = family.draw(3, rng)
        widths = [shape.get("out_channels", 128) for shape in drawn]
        assert any(w & (w - 1) for w in widths), drawn  # a width that is no power of two, every time


def test_the_failure_names_every_shape_refused():
    refusals = [{"shape": f"out_channels={w}", "phase": "init", "error": "ValueError: no"} for w in (5, 80)]
    failure = refusal_failure(refusals)
    assert failure.kind == "shape_refused" and "out_channels=5; out_channels=80" in failure.summary


def test_a_width_specialised_triton_kernel_is_refused_not_verified():
    # Right at every power-of-two width: under strict in enforce it passed verified when widths never varied.
    record = run_judge(
        CHANNEL_MIX, FIXTURES_DIR / "channel_tile_pow2.py", policy="strict", mode="enforce", shape_trials=3
    )
    assert record.status == "FAIL" and not record.verified and record.failure.kind == "shape_refused", record.failure
    assert "arange's range must be a power of 2" in record.failure.summary
    assert "out_channels" in record.correctness.shape_family["names"]
    assert record.correctness.plan["size_proposals"]["values"]["out_channels"]
