"""Loading tasks and candidates: hashing, validation, and code extraction from a model's response."""

import hashlib

import pytest

from helpers import CANDIDATES, TASKS
from kerneljudge.errors import TaskError, UsageError
from kerneljudge.sources.candidate import extract_code, load_candidate, parse_candidate
from kerneljudge.sources.task import parse_task
from kerneljudge.tasks.load import load_task


def test_task_is_identified_by_the_sha256_of_its_content():
    task = load_task(TASKS / "tiny_bias_relu.py")
    assert task.sha256 == hashlib.sha256((TASKS / "tiny_bias_relu.py").read_bytes()).hexdigest()


def test_task_named_after_its_folder_when_the_file_is_reference_py(tmp_path):
    folder = tmp_path / "softmax"
    folder.mkdir()
    (folder / "reference.py").write_text((TASKS / "tiny_bias_relu.py").read_text())
    assert load_task(folder / "reference.py").name == "softmax"


@pytest.mark.parametrize(
    "text, message",
    [
        ("def get_inputs(): return []\ndef get_init_inputs(): return []\n", "does not define Model"),
        ("class Model:\n  pass\n", "get_inputs, get_init_inputs"),
        ("class Model(:\n", "not valid Python"),
    ],
)
def test_bad_tasks_get_one_line_errors(text, message):
    with pytest.raises(TaskError, match=message) as info:
        parse_task(text, "bad")
    assert "\n" not in str(info.value)


def test_missing_files_are_usage_errors(tmp_path):
    with pytest.raises(TaskError, match="cannot read task"):
        load_task(tmp_path / "nope.py")
    with pytest.raises(UsageError, match="cannot read candidate"):
        load_candidate(tmp_path / "nope.py")


def test_plain_python_is_taken_as_is():
    code = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"
    assert extract_code(code) == (code, False)


def test_response_takes_the_last_block_that_defines_modelnew():
    candidate = load_candidate(CANDIDATES / "response.md")
    assert candidate.extracted_from_response
    assert "class ModelNew" in candidate.text and "Draft" not in candidate.text
    assert candidate.sha256 == hashlib.sha256(candidate.text.encode()).hexdigest()


def test_response_with_tilde_fences_and_no_modelnew_takes_the_last_python_block():
    text = "intro\n~~~python\nx = 1\n~~~\nmore\n```py\ny = 2\n```\nend\n"
    assert parse_candidate(text, "r").text == "y = 2\n"


def test_response_without_code_is_kept_verbatim_and_fails_later_as_a_compile_error():
    candidate = parse_candidate("I could not write this kernel.", "r")
    assert not candidate.extracted_from_response and candidate.text == "I could not write this kernel."
