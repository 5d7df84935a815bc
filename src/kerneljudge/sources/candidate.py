"""What is judged on the untrusted side: candidate source, possibly inside a model's response.

The parent reads the candidate as text only; it never imports or executes it.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from kerneljudge.errors import UsageError
from kerneljudge.sources import pyast
from kerneljudge.sources.task import Task, read_source, sha256_text

FENCE = re.compile(
    r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL
)
PYTHON_LANGS = {"", "python", "py", "python3"}


@dataclass(frozen=True)
class Candidate:
    text: str
    name: str
    path: str | None = None
    extracted_from_response: bool = False

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
    blocks = [m.group("body") for m in FENCE.finditer(text) if m.group("lang").lower() in PYTHON_LANGS]
    if not blocks:
        return text, False
    with_model = [b for b in blocks if re.search(r"^\s*class\s+ModelNew\b", b, re.MULTILINE)]
    return (with_model or blocks)[-1], True


def parse_candidate(text: str, name: str, path: str | None = None) -> Candidate:
    code, extracted = extract_code(text)
    return Candidate(text=code, name=name, path=path, extracted_from_response=extracted)


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
