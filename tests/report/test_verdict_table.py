"""The terminal's verdict table: the task's shape family in the same words whatever the verdict, and a speedup
measured on the CPU said to be no GPU speedup."""

from rich.console import Console

from helpers import TASKS, make_record, run_judge
from kerneljudge.config import JudgeConfig
from kerneljudge.report.table import verdict_table
from kerneljudge.results.verdict import Capability, Correctness
from kerneljudge.sources.candidate import reference_as_candidate
from kerneljudge.tasks.load import load_task

WRONG = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return torch.relu(x)  # the scale forgotten: wrong at the public trial already
"""


def shown(record) -> str:
    console = Console(width=300, record=True, color_system=None)
    console.print(verdict_table(record))
    return console.export_text()


def correctness_row(record) -> str:
    return next(line for line in shown(record).splitlines() if "trials passed" in line)


def test_an_honest_and_a_wrong_candidate_word_the_same_task_s_family_alike(tmp_path):
    task = load_task(TASKS / "sized_scale_relu.py")
    honest = run_judge(task, reference_as_candidate(task))
    (tmp_path / "wrong.py").write_text(WRONG)
    wrong = run_judge(task, tmp_path / "wrong.py")
    assert honest.status == "PASS" and wrong.status == "FAIL", (honest.failure, wrong.failure)
    assert "shape family derived from batch_size, dim" in correctness_row(honest)
    row = correctness_row(wrong)
    assert "no shape family declared" not in row  # the task's family is derived, whatever this candidate did
    assert "shape family not reached (the judgment ended before the hidden shapes)" in row


def checked(**correctness) -> Correctness:
    return Correctness(checked=True, passed=True, method="oracle", **correctness)


def test_each_state_of_the_family_has_its_own_words():
    declared = make_record(correctness=checked(shape_family={"derived": False, "size": 6, "names": ["N"]}))
    assert "shape family declared by the task (6 shape(s))" in correctness_row(declared)
    none = make_record(
        correctness=checked(), capabilities={"hidden_shapes": Capability(status="unavailable", required=False)}
    )
    assert "no shape family: none declared and none derived" in correctness_row(none)
    config = JudgeConfig(device="cpu", timing=False, shape_trials=0).to_dict()
    off = make_record(
        correctness=checked(),
        config=config,
        capabilities={"hidden_shapes": Capability(status="unavailable", required=False)},
    )
    assert "shape family not sought (shape_trials = 0)" in correctness_row(off)
    assert "not reached" in correctness_row(make_record(correctness=checked()))


def test_a_cpu_speedup_is_said_to_be_no_gpu_speedup():
    text = shown(make_record(speedup=0.003))
    speedup = next(line for line in text.splitlines() if "│ speedup" in line)
    assert "0.003x" in speedup and "measured on the CPU (Triton's interpreter): not a GPU speedup" in speedup
    cuda = make_record(speedup=2.0, device="cuda")
    assert "not a GPU speedup" not in next(line for line in shown(cuda).splitlines() if "│ speedup" in line)
