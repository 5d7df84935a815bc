"""What the record and the terminal say about a candidate that never got as far as a trial: the device asked,
a worker that exited by itself, a missing ModelNew found in the parent before any worker, an extracted
response."""

import pytest
from rich.console import Console

from helpers import CANDIDATES, TASKS, make_record
from kerneljudge import JudgeConfig
from kerneljudge.cli import main
from kerneljudge.judgment import pipeline
from kerneljudge.judgment.pipeline import judge
from kerneljudge.preflight.entry_point import cannot_define_entry_point
from kerneljudge.report.table import device_line, verdict_table
from kerneljudge.sources.pyast import parse

TASK = TASKS / "tiny_bias_relu.py"
FAST = {"device": "cpu", "timing": False, "policy": "practical"}
NO_MODEL = ("runtime_error", "init", "AttributeError: the candidate defines no ModelNew")


@pytest.fixture
def workers_started(monkeypatch):
    """Every worker pair a judgment starts, recorded; the judgment then goes on as usual."""
    started = []
    real = pipeline.new_pair

    def recording(state, device, prepare_triton=False, checked=False):
        started.append(device)
        return real(state, device, prepare_triton, checked)

    monkeypatch.setattr(pipeline, "new_pair", recording)
    return started


@pytest.mark.parametrize(
    "source",
    ["", "# nothing here\n", "import torch\n\nclass Model2(torch.nn.Module):\n    pass\n", "def f():\n    return 1\n"],
)
def test_a_candidate_without_modelnew_fails_in_the_parent_before_any_worker(source, tmp_path, workers_started):
    path = tmp_path / "candidate.py"
    path.write_text(source)
    record = judge(TASK, path, **FAST)
    assert workers_started == []
    assert (record.failure.kind, record.failure.phase, record.failure.summary) == NO_MODEL
    assert record.status == "FAIL" and not record.correctness.checked


def test_the_parent_reports_a_missing_modelnew_as_its_worker_does(tmp_path, workers_started):
    """A source that could bind names at run time is left to the worker, which fails it the same way."""
    path = tmp_path / "candidate.py"
    path.write_text("namespace = globals()\n")
    record = judge(TASK, path, **FAST)
    assert workers_started == ["cpu"]
    assert (record.failure.kind, record.failure.phase, record.failure.summary) == NO_MODEL


@pytest.mark.parametrize(
    "source, cannot",
    [
        ("", True),
        ("class Other:\n    pass\n", True),
        ("x = 'ModelNew'\n", True),  # a string binds nothing
        ("class ModelNew:\n    pass\n", False),
        ("ModelNew = dict\n", False),
        ("if True:\n    class ModelNew:\n        pass\n", False),
        ("from torch.nn import Linear as ModelNew\n", False),
        ("from torch.nn import *\n", False),
        ("globals()['Model' + 'New'] = dict\n", False),
        ("import sys\nsetattr(sys.modules[__name__], 'Model' + 'New', dict)\n", False),
        ("exec('class ' + 'Model' + 'New: pass')\n", False),
    ],
)
def test_whether_a_source_can_define_modelnew(source, cannot):
    assert cannot_define_entry_point(parse(source)) is cannot


def test_a_syntax_error_judged_on_the_cpu_shows_the_cpu(tmp_path, workers_started):
    path = tmp_path / "candidate.py"
    path.write_text("class ModelNew(:\n")
    record = judge(TASK, path, **FAST)
    assert workers_started == [] and record.failure.kind == "compile_error"
    assert record.device == "cpu"
    assert device_line(record).startswith("CPU") and "CUDA was required" not in device_line(record)


@pytest.mark.parametrize(
    ("asked", "device", "cuda_available", "says"),
    [
        ("cpu", "cpu", True, "CPU requested"),
        ("cpu", "cpu", False, "CPU requested"),
        ("auto", "cpu", False, "no CUDA device"),
        ("cuda", None, False, "CUDA was required and none is visible"),
        ("auto", None, False, "ended before any worker started (device asked: auto)"),
    ],
)
def test_the_device_row_says_what_was_asked_and_what_ran(asked, device, cuda_available, says):
    record = make_record(device=device, config=JudgeConfig(device=asked, timing=False).to_dict())
    record.environment["cuda_available"] = cuda_available
    line = device_line(record)
    assert says in line
    if asked != "cuda":
        assert "CUDA was required" not in line


def test_a_worker_that_exits_0_mid_call_is_said_to_have_exited_by_itself():
    record = judge(TASK, CANDIDATES / "exit_early.py", **FAST)
    assert record.failure.kind == "crash" and record.failure.phase.startswith("trial")
    assert "exited by itself (exit status 0) before answering" in record.failure.summary
    assert "SIGKILL" not in record.failure.summary
    assert not record.correctness.checked  # no trial was compared
    console = Console(width=200, record=True, color_system=None)
    console.print(verdict_table(record))
    shown = console.export_text()
    assert "(;" not in shown and "0/0 trials" not in shown


def test_the_terminal_says_when_the_candidate_came_from_a_models_response(tmp_path, capsys):
    response = tmp_path / "response.md"
    response.write_text("Here is my kernel.\n\n```python\nimport torch\n\nx = torch.ones(1)\n```\n\nHope it helps.\n")
    code = main(["judge", str(TASK), str(response), "--device", "cpu", "--no-timing", "--policy", "practical"])
    assert code == 2
    assert "extracted from a model's response" in capsys.readouterr().out


def test_a_cpu_record_without_workers_is_keyed_as_a_batch_looks_it_up(tmp_path, workers_started):
    """The record of a judgment that ended in the parent names the software a batch's resume keys on."""
    from kerneljudge.config import JudgeConfig
    from kerneljudge.results.store import environment_digest
    from kerneljudge.runs.backends.machine import machine_environment

    path = tmp_path / "candidate.py"
    path.write_text("")
    record = judge(TASK, path, **FAST)
    assert workers_started == [] and record.environment["triton"] == machine_environment(JudgeConfig("cpu"))["triton"]
    assert environment_digest(record.environment) == environment_digest(machine_environment(JudgeConfig("cpu")))
