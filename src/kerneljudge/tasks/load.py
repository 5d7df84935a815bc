"""`load_task`: a loader per task format, each ending in a KernelBench-format `Task` (sources/task.py)."""

from __future__ import annotations

from pathlib import Path

from kerneljudge.errors import TaskError
from kerneljudge.sources.task import Task, parse_task, read_source
from kerneljudge.tasks import gpumode

BUILTIN = "builtin:"


def load_task(spec: str | Path) -> Task:
    """A task by its spec: `builtin:NAME` (one task of the built-in suite), a GPU MODE problem folder (one
    holding task.yml), or a KernelBench file."""
    if str(spec).startswith(BUILTIN):
        return load_builtin(str(spec))
    if gpumode.is_problem(spec):
        return gpumode.load_task(spec)
    return load_kernelbench(Path(spec))


def load_builtin(spec: str) -> Task:
    """One task of the built-in suite (kerneljudge/suite), named `builtin:NAME`."""
    from kerneljudge.suite import resolve

    chosen = resolve(spec)
    if len(chosen) != 1:
        names = ", ".join(task.name for task in chosen)
        raise TaskError(f"{spec} names {len(chosen)} built-in tasks ({names}); give one")
    return parse_task(chosen[0].text(), chosen[0].name, f"{BUILTIN}{chosen[0].name}")


def load_kernelbench(path: Path) -> Task:
    """A KernelBench file. KernelBench-style folders name the file reference.py; the folder is the better name
    then."""
    text = read_source(path, "task", TaskError)
    name = path.parent.name if path.stem == "reference" and path.parent.name else path.stem
    return parse_task(text, name, str(path))
