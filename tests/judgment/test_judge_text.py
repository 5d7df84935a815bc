"""`judge(task, candidate_text=...)` on the CPU: a response's or a source's text judged as its file would be,
and a response with nothing to judge failing as such, not as a SyntaxError."""

import pytest

from helpers import CANDIDATES, validate_record
from kerneljudge import judge
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError

CONFIG = JudgeConfig(device="cpu", timing=False, timeout_s=60.0, policy="practical")


def judged(task, **candidate):
    record = judge(task, config=CONFIG, **candidate)
    validate_record(record)
    return record


def test_a_response_text_is_judged_as_its_file_is(tiny_task):
    record = judged(tiny_task, candidate_text=(CANDIDATES / "response.md").read_text())
    assert record.status == "PASS" and record.candidate.extracted_from_response


def test_a_source_text_is_judged(tiny_task):
    record = judged(tiny_task, candidate_text=(CANDIDATES / "honest_torch.py").read_text())
    assert record.status == "PASS" and not record.candidate.extracted_from_response


@pytest.mark.parametrize(
    "text, first_line",
    [
        ("I'm sorry, I can't help with that.", "I'm sorry, I can't help with that."),
        ("Sure:\n```python\nimport torch\nx = torch.ones(2)\n```\n", "Sure:"),
    ],
)
def test_a_response_without_a_block_defining_modelnew_fails_as_such(tiny_task, text, first_line):
    record = judged(tiny_task, candidate_text=text)
    assert record.status == "FAIL" and record.failure_kind == "compile_error"
    assert record.failure.summary == f'no fenced Python block defining ModelNew; the response begins "{first_line}"'
    assert "SyntaxError" not in record.failure.summary and record.failure.exception is None


def test_a_python_file_with_a_syntax_error_keeps_it(tiny_task):
    record = judged(tiny_task, candidate=CANDIDATES / "syntax_error.py")
    assert record.failure.summary.startswith("SyntaxError")


@pytest.mark.parametrize(
    "candidate, message",
    [
        ({}, "exactly one of candidate"),
        ({"candidate": CANDIDATES / "honest_torch.py", "candidate_text": "x = 1"}, "exactly one of candidate"),
        ({"candidate": "import torch\nclass ModelNew: pass\n"}, "pass candidate_text="),
    ],
)
def test_the_candidate_given_wrongly_is_a_one_line_usage_error(tiny_task, candidate, message):
    with pytest.raises(UsageError, match=message) as info:
        judge(tiny_task, config=CONFIG, **candidate)
    assert "\n" not in str(info.value)
