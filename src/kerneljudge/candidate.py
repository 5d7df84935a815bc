"""What is judged on the untrusted side: candidate source, possibly inside a model's response.

The parent reads the candidate as text only; it never imports or executes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kerneljudge import pyast
from kerneljudge.errors import UsageError
from kerneljudge.task import read_source, sha256_text

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
