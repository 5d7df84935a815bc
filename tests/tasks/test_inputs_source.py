"""The task's inputs-only source (tasks/inputs_source.py): what the candidate's worker is sent to make trials'
inputs from. It keeps what `get_inputs` reaches and nothing of the reference, makes the inputs the task makes,
and is refused where the inputs cannot be cut from the reference."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from kerneljudge.redteam import TASKS_DIR
from kerneljudge.tasks import gpumode
from kerneljudge.tasks.inputs_source import inputs_source
from kerneljudge.worker.correctness import seeded

FIXTURES = Path(__file__).parents[1] / "fixtures"


def reduce(text: str):
    return inputs_source(textwrap.dedent(text))


def same_inputs(full: str, reduced: str) -> bool:
    """Both texts make the same inputs for two seeds (by the fingerprint the judge compares)."""
    made = []
    for text, name in ((full, "kj_test_full"), (reduced, "kj_test_reduced")):
        module = seeded.load_text(text, name)
        made.append(
            [
                seeded.fingerprint(torch, seeded.make(torch, module, s, torch.device("cpu"), False, torch.manual_seed))
                for s in (3, 11)
            ]
        )
    return made[0] == made[1]


KERNELBENCH_LIKE = """
    '''Conv3d then GELU (KernelBench level 2 style).'''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F, math

    class Model(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size):
            super().__init__()
            self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

        def forward(self, x):
            return F.gelu(self.conv(x))

    batch_size = 2
    in_channels, out_channels = 3, 4
    D, H, W = (4, 5, 6)
    kernel_size = 3

    def get_inputs():
        return [torch.randn(batch_size, in_channels, D, H, W)]

    def get_init_inputs():
        return [in_channels, out_channels, kernel_size]

    if __name__ == "__main__":
        print(Model(*get_init_inputs())(*get_inputs()).shape)
"""


def test_a_kernelbench_task_keeps_its_sizes_and_get_inputs_and_nothing_of_the_model():
    reduced = reduce(KERNELBENCH_LIKE)
    assert reduced.refused is None and reduced.text is not None
    assert reduced.kept == ("torch", "batch_size", "in_channels", "out_channels", "D", "H", "W", "get_inputs")
    for absent in ("Model", "forward", "torch.nn", "math", "kernel_size", "get_init_inputs", "__main__", "gelu"):
        assert absent not in reduced.text, absent
    assert same_inputs(textwrap.dedent(KERNELBENCH_LIKE), reduced.text)


def test_a_helper_of_the_inputs_is_kept_and_the_forwards_helper_is_not():
    reduced = reduce(
        """
        import torch
        SCALE = 2.0

        def _curve(x):
            return torch.tanh(x) * SCALE

        def _make(n):
            return torch.rand(n, 8) * SCALE - 1

        class Model(torch.nn.Module):
            def forward(self, x):
                return _curve(x)

        def get_inputs():
            rows = 5  # a local: never read as the module's
            return [_make(rows)]
        """
    )
    assert reduced.kept == ("torch", "SCALE", "_make", "get_inputs"), reduced.kept
    assert "_curve" not in reduced.text and "tanh" not in reduced.text


def test_inputs_that_reach_the_model_are_refused():
    reduced = reduce(
        """
        import torch

        class Model(torch.nn.Module):
            WIDTH = 16
            def forward(self, x):
                return x.relu()

        def get_inputs():
            return [torch.randn(4, Model.WIDTH)]
        """
    )
    assert reduced.text is None and "reaches Model" in reduced.refused


def test_a_function_both_the_inputs_and_the_model_reach_is_refused():
    """It may be the reference's arithmetic under another name: the candidate could call it."""
    reduced = reduce(
        """
        import torch

        def _normalised(x):
            return x / x.norm(dim=-1, keepdim=True)

        class Model(torch.nn.Module):
            def forward(self, x):
                return _normalised(x) * 3

        def get_inputs():
            return [_normalised(torch.randn(4, 8))]
        """
    )
    assert reduced.text is None and "_normalised" in reduced.refused and "Model reaches too" in reduced.refused


def test_a_module_level_value_the_forward_calls_is_refused_and_one_it_only_reads_is_sent():
    """A layer made at module level is the reference's code whatever its statement; a size is data."""
    reduced = reduce(
        """
        import torch
        WIDTH = 8
        layer = torch.nn.Linear(WIDTH, WIDTH)

        class Model(torch.nn.Module):
            def forward(self, x):
                return layer.forward(x) + WIDTH

        def get_inputs():
            return [torch.randn(2, layer.in_features)]
        """
    )
    assert reduced.text is None and "layer, which Model calls" in reduced.refused, reduced.refused
    unread = reduce(
        """
        import torch
        layer = torch.nn.Linear(8, 8)
        layer.eval()

        class Model(torch.nn.Module):
            def forward(self, x):
                return layer(x)

        def get_inputs():
            return [torch.randn(2, 8)]
        """
    )
    assert unread.kept == ("torch", "get_inputs"), unread.text  # the statement acting on it brings it no closer


def test_a_model_that_looks_names_up_at_run_time_is_taken_to_reach_every_helper():
    reduced = reduce(
        """
        import torch

        def _rows():
            return torch.randn(3, 5)

        class Model(torch.nn.Module):
            def forward(self, x):
                return globals()["_ro" + "ws"]() + x

        def get_inputs():
            return [_rows()]
        """
    )
    assert reduced.text is None and "_rows" in reduced.refused, reduced.refused


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("from torch import *\ndef get_inputs():\n    return [randn(2)]\n", "star import"),
        ("import torch\ndef get_inputs():\n    return [globals()['make']()]\n", "globals"),
        ("import torch\nSRC = 'x = 1'\ndef get_inputs():\n    exec(SRC)\n    return [torch.ones(1)]\n", "exec"),
        ("import sys, torch\ndef get_inputs():\n    return [sys.modules[__name__].X]\n", ".modules"),
        ("import sys, torch\ndef get_inputs():\n    return [sys._getframe(0).f_globals['X']]\n", ".f_globals"),
        ("from sys import modules\nimport torch\ndef get_inputs():\n    return [modules['t'].X]\n", "modules"),
        ("import torch\ndef get_inputs():\n    return [torch.ones(SIZE)]\n", "`SIZE` is bound nowhere"),
        ("import torch\ndef get_input():\n    return []\n", "no get_inputs"),
        ("def get_inputs(:\n", "does not parse"),
    ],
)
def test_what_the_reduction_cannot_follow_is_refused(body: str, said: str):
    reduced = inputs_source("class Model: pass\n" + body if "parse" not in said else body)
    assert reduced.text is None and said in reduced.refused, reduced.refused


def test_statements_that_set_state_the_inputs_read_are_kept_and_those_that_name_the_model_are_not():
    reduced = reduce(
        """
        import torch
        SIZES = [3]
        SIZES.append(5)
        REGISTRY = []
        REGISTRY.append(lambda: Model)
        CONTRACT = {"kind": "any"}

        class Model(torch.nn.Module):
            def forward(self, x):
                return x

        Model.scale = 2.0
        INPUT_CONTRACT = CONTRACT

        def get_inputs():
            return [torch.randn(n) for n in SIZES]
        """
    )
    assert "SIZES.append(5)" in reduced.text and "INPUT_CONTRACT = CONTRACT" in reduced.text
    assert "REGISTRY" not in reduced.text and "Model" not in reduced.text


def test_a_module_global_the_inputs_rebind_is_kept_with_its_count():
    task = (FIXTURES / "tasks" / "counted_inputs.py").read_text()
    reduced = inputs_source(task)
    assert reduced.kept == ("torch", "_made", "get_inputs")
    assert same_inputs(task, reduced.text)


@pytest.mark.parametrize("path", sorted(TASKS_DIR.glob("*.py")), ids=lambda p: p.stem)
def test_the_red_teams_tasks_reduce_and_make_the_same_inputs(path: Path):
    task = path.read_text()
    reduced = inputs_source(task)
    assert reduced.text is not None, reduced.refused
    assert "Model" not in reduced.text and "forward" not in reduced.text
    assert same_inputs(task, reduced.text)


@pytest.mark.parametrize("problem", ["halfmix", "prefixstats", "qrinto", "rowscale"])
def test_a_gpu_mode_problem_keeps_generate_input_and_not_ref_kernel_or_its_check(problem: str):
    task = gpumode.load_task(FIXTURES / "gpumode" / problem)
    reduced = inputs_source(task.text)
    assert reduced.text is not None, reduced.refused
    assert "generate_input" in reduced.kept and "_KJ_SPEC" in reduced.kept
    for absent in ("Model", "ref_kernel", "check_implementation", "kerneljudge_check", "SHAPE_FAMILY"):
        assert absent not in reduced.text, absent
    assert same_inputs(task.text, reduced.text)
