"""What is judged on the trusted side: the task, a KernelBench-format reference, whatever format it came in.

The parent only parses the task; the task runs in the reference worker. Every loader (tasks/load.py) ends in
`parse_task`: a text that defines `Model`, `get_inputs` and `get_init_inputs`.
"""

from __future__ import annotations

import ast
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from kerneljudge.errors import TaskError
from kerneljudge.sources import pyast

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
# A task's or a candidate's file: KernelBench's largest reference is a few KiB, and the server caps a text at
# 512 KiB (api/schema.py). The bound keeps /dev/zero or a stray dataset file from filling the parent's memory.
MAX_SOURCE_BYTES = 4 * 1024 * 1024
MAX_LISTING_BYTES = 256 * 1024 * 1024  # a file of many lines given as an input: responses, a baseline
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


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


def read_source(path: Path, what: str, error: type[Exception], max_bytes: int = MAX_SOURCE_BYTES) -> str:
    """A source file's UTF-8 text, at most `max_bytes` of it, or `error` with a one-line reason."""
    data = read_bounded(path, what, error, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"cannot read {what} {path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def read_bounded(path: Path, what: str, error: type[Exception], max_bytes: int) -> bytes:
    """The bytes of a regular file (a symlink to one is followed), or `error` with a one-line reason when it
    is another kind of file or holds more than `max_bytes`.

    A device, FIFO, socket or directory is refused by its kind before it is opened, and again on the opened
    descriptor (the path may have changed in between): /dev/zero never ends, and a FIFO's open would wait for
    a writer forever, which O_NONBLOCK prevents. At most `max_bytes + 1` bytes are read, whatever the file
    says its size is.
    """
    try:
        _require_regular(os.stat(path).st_mode, path, what, error)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        _require_regular(os.fstat(fd).st_mode, path, what, error)
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise error(f"cannot read {what} {path}: larger than the {byte_size(max_bytes)} cap")
    return b"".join(chunks)


def _require_regular(mode: int, path: Path, what: str, error: type[Exception]) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "a special file")
        raise error(f"cannot read {what} {path}: it is {kind}, not a regular file")


def byte_size(size_bytes: int) -> str:
    """`size_bytes` for a message: 4 MiB, 512 KiB, 100 bytes."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale} {unit}"
    return f"{size_bytes} bytes"
