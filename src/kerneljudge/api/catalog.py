"""Which tasks a server judges against: the built-in suite, the tasks it was started with, a task's own text.

A task id is `builtin:NAME` (kerneljudge/suite), or the id of a task of `kerneljudge serve --tasks DIR`: a
KernelBench-format file `DIR/ID.py`, or a GPU MODE problem folder `DIR/ID/` (one holding task.yml). Those
are loaded once, when the server starts, so a bad file stops the start, not a request. A request may send a
task's text instead (`task_source`); it is parsed here, never run: tasks run in the reference worker.
"""

from __future__ import annotations

import threading
from pathlib import Path

from kerneljudge.api.schema import TaskInfo
from kerneljudge.errors import TaskError, UsageError
from kerneljudge.sources.task import Task, parse_task, sha256_text


class TaskCatalog:
    """Task ids to loaded tasks; built-in ones are loaded on first use and kept."""

    def __init__(self, folder: str | Path | None = None) -> None:
        self.files: dict[str, Task] = load_folder(Path(folder)) if folder is not None else {}
        self._builtin: dict[str, Task] = {}
        self._lock = threading.Lock()

    def resolve(self, task_id: str | None, source: str | None) -> Task:
        """The task an item names; TaskError with a one-line reason when there is none."""
        if source is not None:
            return parse_task(source, f"task_{sha256_text(source)[:12]}")
        assert task_id is not None  # schema.Item asks for exactly one of the two
        if task_id in self.files:
            return self.files[task_id]
        if task_id.startswith("builtin:"):
            return self._load_builtin(task_id)
        known = f"; this server's own: {', '.join(sorted(self.files)[:10])}" if self.files else ""
        raise TaskError(f"no task {task_id!r}: give builtin:NAME (GET /v1/tasks lists them){known}")

    def _load_builtin(self, task_id: str) -> Task:
        from kerneljudge.tasks.load import load_builtin

        with self._lock:
            if task_id not in self._builtin:
                self._builtin[task_id] = load_builtin(task_id)
            return self._builtin[task_id]

    def listing(self) -> list[TaskInfo]:
        """Every task id this server knows: its own first, then the built-in suite."""
        from kerneljudge.suite import SUITE

        own = [TaskInfo(id=key, name=task.name, source="file", path=task.path) for key, task in self.files.items()]
        builtin = [TaskInfo(id=f"builtin:{task.name}", name=task.name, source="builtin") for task in SUITE]
        return [*own, *builtin]


def load_folder(folder: Path) -> dict[str, Task]:
    """Every task of `folder`, by id: `*.py` files by stem, GPU MODE problem folders by name."""
    from kerneljudge.tasks import gpumode
    from kerneljudge.tasks.load import load_kernelbench

    if not folder.is_dir():
        raise UsageError(f"--tasks {folder}: not a folder of task files")
    tasks: dict[str, Task] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix == ".py" and not path.name.startswith("_"):
            tasks[path.stem] = load_kernelbench(path)
        elif path.is_dir() and gpumode.is_problem(path):
            tasks[path.name] = gpumode.load_task(path)
    if not tasks:
        raise UsageError(f"--tasks {folder}: no task files (*.py) or GPU MODE problem folders (task.yml) in it")
    return tasks
