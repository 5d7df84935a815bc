"""Reading a model's response: one with nothing to judge says so, and a block cut off at the end is judged."""

import pytest

from helpers import CANDIDATES
from kerneljudge.errors import UsageError
from kerneljudge.sources.candidate import NO_CODE, candidate_from_text, extract_code, load_candidate, parse_candidate

HONEST = (CANDIDATES / "honest_torch.py").read_text()


def test_a_refusal_carries_its_own_summary_quoting_its_first_line():
    candidate = parse_candidate("I'm sorry, I can't help with that.\nPerhaps another time.", "r")
    assert candidate.no_code == f"{NO_CODE}; the response begins \"I'm sorry, I can't help with that.\""


def test_a_long_first_line_is_shortened():
    candidate = parse_candidate("\n\n" + "word " * 100 + "\nsecond line", "r")
    quoted = candidate.no_code.split('"')[1]
    assert quoted.startswith("word word") and quoted.endswith("…") and len(quoted) <= 80
    assert "second line" not in candidate.no_code


def test_fenced_blocks_none_defining_modelnew_get_the_same_summary():
    text = "Here is a helper:\n```python\ndef helper(x):\n    return x\n```\n"
    candidate = parse_candidate(text, "r")
    assert candidate.extracted_from_response
    assert candidate.no_code == f'{NO_CODE}; the response begins "Here is a helper:"'


@pytest.mark.parametrize(
    "text",
    [
        HONEST,  # plain source
        "class ModelNew(torch.nn.Module:\n    pass\n",  # broken Python keeps its SyntaxError
        (CANDIDATES / "response.md").read_text(),  # a response with a block that defines ModelNew
    ],
)
def test_code_or_a_response_with_modelnew_carries_none(text):
    assert parse_candidate(text, "r").no_code is None


def test_an_unclosed_last_fence_is_the_block_it_opens():
    text = f"A draft:\n```python\nclass ModelNew:\n    draft = True\n```\nThe final version:\n```python\n{HONEST}"
    code, extracted = extract_code(text)
    assert extracted and code == HONEST
    assert parse_candidate(text, "r").no_code is None


def test_an_unclosed_fence_alone_is_judged_to_the_end_of_the_text():
    assert extract_code(f"Here it is:\n~~~py\n{HONEST}") == (HONEST, True)


def test_text_is_read_as_its_file_is():
    response = CANDIDATES / "response.md"
    assert candidate_from_text(response.read_text()).text == load_candidate(response).text


def test_text_that_is_not_a_str_is_a_usage_error():
    with pytest.raises(UsageError, match="candidate_text must be a str, not bytes"):
        candidate_from_text(b"x = 1")  # type: ignore[arg-type]
