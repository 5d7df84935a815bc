"""The built-in suite: listed, addressable as builtin:NAME, every task's reference Triton candidate verified
on the CPU's Triton interpreter at a small shape that keeps its edge case, and every task linted clean."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import run_judge
from kerneljudge import suite
from kerneljudge.errors import TaskError
from kerneljudge.sources.task import parse_task
from kerneljudge.tasks.lint import lint_task, task_files
from kerneljudge.tasks.load import load_task

pytest.importorskip("triton")

DTYPES = {"fp32": "torch.float32", "fp16": "torch.float16", "bf16": "torch.bfloat16"}


def test_the_suite_covers_every_operation_in_every_dtype_with_edge_cases():
    ops = {"rmsnorm", "swiglu", "softmax", "residual_rmsnorm", "rope", "layernorm", "bias_gelu", "bias_relu"}
    assert set(suite.OPS) == ops
    for op in ops:
        assert {t.dtype for t in suite.SUITE if t.op == op and not t.case} == {"fp32", "fp16", "bf16"}
        assert any(t.case for t in suite.SUITE if t.op == op), op
        assert suite.SuiteTask(op, "fp32", (1, 1)).candidate_path().is_file()
    assert len(suite.BY_NAME) == len(suite.SUITE)  # names are unique
    cases = {t.case for t in suite.SUITE}
    assert {"tail127", "onerow", "long", "large", "tiny", "offset", "w2880", "strided"} <= cases
    assert any(shape[0] == 1 for t in suite.SUITE for shape in (t.shape, *t.family))  # one row


@pytest.mark.parametrize("task", suite.SUITE, ids=lambda t: t.name)
def test_each_task_is_a_kernelbench_file_with_its_own_parameters(task):
    loaded = load_task(f"builtin:{task.name}")
    assert loaded.name == task.name and loaded.path == f"builtin:{task.name}"
    assert f"DTYPE = {DTYPES[task.dtype]}\n" in loaded.text and f"SHAPE = {task.shape!r}\n" in loaded.text
    assert f"SCALE = {task.scale!r}\n" in loaded.text
    namespace: dict = {}
    exec(compile(loaded.text, task.name, "exec"), namespace)  # trusted code of this package
    assert namespace["SHAPE"] == task.shape and str(namespace["DTYPE"]) == DTYPES[task.dtype]
    assert namespace["SHAPE_FAMILY"] == {"SHAPE": list(task.family)} and task.shape not in task.family
    if task.strided:  # the input is a slice of a wider buffer
        (x,) = namespace["get_inputs"]()
        assert not x.is_contiguous() and x.stride(0) == 3 * task.shape[-1] and x.shape == task.shape


def test_builtin_names_resolve_and_a_wrong_one_is_one_line():
    assert [t.name for t in suite.resolve("builtin:rope")] == [t.name for t in suite.SUITE if t.op == "rope"]
    assert len(suite.resolve("builtin:all")) == len(suite.SUITE)
    with pytest.raises(TaskError, match="no built-in task 'rmsnrom'.*rmsnorm, softmax"):
        load_task("builtin:rmsnrom")
    with pytest.raises(TaskError, match="names 4 built-in tasks"):
        load_task("builtin:swiglu")
    assert [str(p) for p in task_files(["builtin:bias_relu"])] == [
        f"builtin:{t.name}" for t in suite.SUITE if t.op == "bias_relu"
    ]


def test_tasks_list_and_show_on_the_command_line(tmp_path):
    out = tmp_path / "suite.json"
    listed = subprocess.run(
        [sys.executable, "-m", "kerneljudge", "tasks", "list", "--json", str(out)],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert listed.returncode == 0, listed.stderr
    for task in suite.SUITE:
        assert task.name in listed.stdout
    rows = json.loads(out.read_text())
    assert [r["name"] for r in rows] == [t.name for t in suite.SUITE] and rows[0]["candidate"].endswith(".py")
    shown = subprocess.run(
        [sys.executable, "-m", "kerneljudge", "tasks", "show", "builtin:softmax_fp32_large", "--candidate"],
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 0 and "@triton.jit" in shown.stdout and "class ModelNew" in shown.stdout
    command = [sys.executable, "-m", "kerneljudge", "tasks", "show", "builtin:x"]
    bad = subprocess.run(command, capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "no built-in task 'x'" in bad.stderr


def small(task: suite.SuiteTask):
    return parse_task(task.text(task.small_shape(), task.small_family()), task.name)


@pytest.mark.parametrize("task", suite.SUITE, ids=lambda t: t.name)
def test_each_reference_triton_candidate_passes_verified_on_the_cpu_interpreter(task):
    record = run_judge(small(task), task.candidate_path(), mode="enforce", policy="strict", timeout_s=300.0)
    assert record.status == "PASS" and record.verified, (record.failure, [f.code for f in record.findings])
    assert record.capabilities["triton"].status == "available"
    assert len(record.correctness.trials) >= 3  # hidden trials with other seeds and input distributions
    shaped = [t for t in record.correctness.trials if t.kind == "shape"]
    assert len(shaped) == 3 and all(t.passed for t in shaped)  # three hidden shapes of the family


def test_a_candidate_that_ignores_the_tail_or_the_max_fails_its_edge_case(tmp_path):
    # The edge cases bite: the softmax candidate without the max subtraction overflows on large logits.
    task = suite.BY_NAME["softmax_fp32_large"]
    naive = tmp_path / "naive.py"
    naive.write_text(task.candidate_path().read_text().replace("x - tl.max(x, axis=0)", "x"))
    record = run_judge(small(task), naive, device="cpu", mode="enforce", timing=False)
    assert record.status == "FAIL" and record.failure_kind in ("non_finite", "tolerance"), record.failure


def test_tasks_lint_passes_the_builtin_suite_clean():
    # Small shapes: the flags that need the public shape (memory, the timer floor) need a GPU to mean anything.
    flagged = {}
    for task in suite.SUITE:
        result = lint_task(small(task), device="cpu", timeout_s=120.0)
        if not result.clean:
            flagged[task.name] = result.error or [f.id for f in result.flags]
    assert not flagged
