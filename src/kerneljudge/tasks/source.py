"""What is judged on the trusted side: the task, a KernelBench-format reference, whatever format it came in.

The parent only parses the task; the task runs in the reference worker. Every loader (tasks/load.py) ends in
`parse_task`: a text that defines `Model`, `get_inputs` and `get_init_inputs`.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from kerneljudge import pyast
from kerneljudge.errors import TaskError

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Task:
    text: str
    name: str
    path: str | None = None

    @property
    def sha256(self) -> str:
        return sha256_text(self.text)


def defined_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def parse_task(text: str, name: str, path: str | None = None) -> Task:
    try:
        tree = pyast.parse(text)
    except SyntaxError as exc:
        raise TaskError(f"task {name}: not valid Python (line {exc.lineno}: {exc.msg})") from None
    missing = [n for n in REQUIRED_NAMES if n not in defined_names(tree)]
    if missing:
        raise TaskError(f"task {name}: not a KernelBench reference, it does not define {', '.join(missing)}")
    return Task(text=text, name=name, path=path)


def read_source(path: Path, what: str, error: type[Exception]) -> str:
    """A source file's text, or `error` with a one-line reason."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None
