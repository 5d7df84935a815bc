"""What is judged on the untrusted side: candidate source, possibly inside a model's response.

The parent reads the candidate as text only; it never imports or executes it. A model's response is read
for its fenced Python blocks (`extract_code`); one with none that defines ModelNew carries the summary it fails
with (`Candidate.no_code`), quoting the response's first line, rather than a SyntaxError on its prose.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from kerneljudge.errors import UsageError
from kerneljudge.sources import pyast
from kerneljudge.sources.task import MAX_SOURCE_BYTES, Task, byte_size, read_source, sha256_text

FENCE = re.compile(
    r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL
)
# A fence opened and never closed: a response cut off (a token limit) inside its last block.
OPEN_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*)", re.MULTILINE | re.DOTALL)
PYTHON_LANGS = {"", "python", "py", "python3"}
DEFINES_MODEL_NEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)
NO_CODE = "no fenced Python block defining ModelNew"
FIRST_LINE_CHARS = 80  # of the response's first line, quoted in the failure's summary


@dataclass(frozen=True)
class Candidate:
    text: str
    name: str
    path: str | None = None
    extracted_from_response: bool = False
    # A model's response with no fenced Python block that defines ModelNew: the failure's summary, quoting the
    # response's first line. The build stage fails with it where the text judged turns out to define no ModelNew
    # (a GPU MODE submission's block, which defines custom_kernel, is composed into one first: tasks/gpumode.py).
    no_code: str | None = None

    @property
    def sha256(self) -> str:
        return sha256_text(self.text)


def _parses(text: str) -> bool:
    try:
        pyast.parse(text)
    except SyntaxError:
        return False
    return True


def extract_code(text: str) -> tuple[str, bool]:
    """The Python to judge: the text itself, or the best fenced block of a model's response.

    Among fenced Python blocks the last one that defines ModelNew wins (models
    often show a draft first); failing that, the last Python block.
    """
    if _parses(text):
        return text, False
    blocks = python_blocks(text)
    if not blocks:
        return text, False
    with_model = [b for b in blocks if DEFINES_MODEL_NEW.search(b)]
    return (with_model or blocks)[-1], True


def python_blocks(text: str) -> list[str]:
    """The bodies of a response's fenced Python blocks, in order; a last fence left open is a block to the end
    of the text (a response cut off inside it), not dropped in favour of an earlier one."""
    blocks, end = [], 0
    for match in FENCE.finditer(text):
        if match.group("lang").lower() in PYTHON_LANGS:
            blocks.append(match.group("body"))
        end = match.end()
    opened = OPEN_FENCE.search(text, end)  # every fence before `end` was closed; one after it never is
    if opened is not None and opened.group("lang").lower() in PYTHON_LANGS:
        blocks.append(opened.group("body"))
    return blocks


def no_code_summary(text: str) -> str:
    """The failure's summary for a response with nothing to judge, quoting its first line (shortened)."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        return f"{NO_CODE}: the response is empty"
    if len(first) > FIRST_LINE_CHARS:
        first = first[: FIRST_LINE_CHARS - 1].rstrip() + "…"
    return f'{NO_CODE}; the response begins "{first}"'


def parse_candidate(text: str, name: str, path: str | None = None) -> Candidate:
    code, extracted = extract_code(text)
    # A response none of whose blocks defines ModelNew, or prose that neither parses nor defines ModelNew (a
    # refusal): its failure names that, not a SyntaxError. Python that only fails to parse keeps its SyntaxError.
    unparsed_prose = not extracted and not DEFINES_MODEL_NEW.search(text) and not _parses(text)
    defines_none = extracted and not any(DEFINES_MODEL_NEW.search(b) for b in python_blocks(text))
    no_code = no_code_summary(text) if unparsed_prose or defines_none else None
    return Candidate(text=code, name=name, path=path, extracted_from_response=extracted, no_code=no_code)


def candidate_from_text(text: str, name: str = "candidate") -> Candidate:
    """A candidate from its text, read as a file's would be (`load_candidate`): plain source, or a model's
    response whose fenced Python block is judged; bounded as a file is."""
    if not isinstance(text, str):
        raise UsageError(f"candidate_text must be a str, not {type(text).__name__}")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise UsageError(f"candidate_text is not UTF-8 text (character {exc.start}: {exc.reason})") from None
    if size > MAX_SOURCE_BYTES:
        raise UsageError(f"candidate_text is larger than the {byte_size(MAX_SOURCE_BYTES)} cap")
    return parse_candidate(text, name)


def load_candidate(path: str | Path) -> Candidate:
    path = Path(path)
    return parse_candidate(read_source(path, "candidate", UsageError), path.stem, str(path))


def reference_as_candidate(task: Task) -> Candidate:
    """The task's own reference as a candidate: its source with `Model` renamed `ModelNew` wherever the name
    is used (the class, `super(Model, self)`, code that builds one), strings and comments untouched. The
    conformance sweep judges every public task this way: a judge that does not verify it rejects falsely."""
    tokens = []
    for token in tokenize.generate_tokens(io.StringIO(task.text).readline):
        if token.type == tokenize.NAME and token.string == "Model":
            token = token._replace(string="ModelNew")
        tokens.append(token)
    return Candidate(text=tokenize.untokenize(tokens), name=f"{task.name}_reference", path=task.path)
