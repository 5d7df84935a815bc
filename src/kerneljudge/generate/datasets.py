"""Which tasks a generation asks a model about: the built-in suite, a KernelBench checkout, KernelBench's Hugging
Face parquet files and GPU MODE problem folders, narrowed by level and by name (docs/generate.md).

Every task gets a KernelBench address, a level and a problem id, so that its samples are named as KernelBench
names them (`level_L_problem_P_sample_S_kernel.py`) and `write_problems` can lay the tasks out as a checkout's
`KernelBench/` folder, which `kerneljudge batch --kernelbench-run` reads unchanged. KernelBench's own tasks
keep their level and id. The built-in suite is level 0 and GPU MODE problems level 10, outside KernelBench's
levels, so that a mixed run never gives two tasks one address; their ids are positions in a fixed order (the
suite's, or the sorted folders under the root given), the same whatever the filters keep.
"""

from __future__ import annotations

import fnmatch
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kerneljudge.errors import UsageError
from kerneljudge.sources.task import Task, parse_task
from kerneljudge.tasks import gpumode
from kerneljudge.tasks.load import load_kernelbench

BUILTIN_LEVEL = 0
GPUMODE_LEVEL = 10
SOURCES = ("builtin", "kernelbench", "parquet", "gpumode")
SPEC_HELP = (
    "builtin:NAME|OP|GLOB|all, kernelbench:DIR (a checkout or its KernelBench/ folder), parquet:FILE (the "
    "Hugging Face dataset's), gpumode:DIR (a problem folder or a folder of them); a bare path is recognised"
)
PROBLEM_FILE = re.compile(r"^(\d+)_.*\.py$")


@dataclass(frozen=True)
class SelectedTask:
    """One task of a generation, with the KernelBench address its samples are filed under."""

    level: int
    problem_id: int
    task: Task = field(repr=False)
    source: str  # the spec that selected it, e.g. "builtin:softmax_fp32" or "kernelbench:/path/KernelBench"

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def task_id(self) -> str:
        """`levelL/P_name`: the task's problem file under a problems folder, without `.py`."""
        stem = re.sub(r"[^\w.-]", "_", self.name)
        return f"level{self.level}/{stem if stem.startswith(f'{self.problem_id}_') else f'{self.problem_id}_{stem}'}"

    def sample_stem(self, sample_id: int) -> str:
        return f"level_{self.level}_problem_{self.problem_id}_sample_{sample_id}"


def select_tasks(specs: Sequence[str], levels: Sequence[int] = (), names: Sequence[str] = ()) -> list[SelectedTask]:
    """The tasks the specs name, kept where their level is one of `levels` and their name (or problem id)
    matches one of the globs in `names` (either filter empty: no filter), in address order.

    A spec that selects nothing, or two tasks at one address, is a UsageError that says which.
    """
    chosen: dict[tuple[int, int], SelectedTask] = {}
    for spec in specs:
        found = [
            t
            for t in tasks_of(spec)
            if (not levels or t.level in levels)
            and (not names or any(fnmatch.fnmatchcase(t.name, g) or str(t.problem_id) == g for g in names))
        ]
        if not found:
            raise UsageError(f"--tasks {spec}: no task matches (levels {list(levels) or 'any'}, names {list(names)})")
        for task in found:
            other = chosen.setdefault((task.level, task.problem_id), task)
            if other.task.sha256 != task.task.sha256:
                raise UsageError(
                    f"{task.task_id} ({task.source}) and {other.task_id} ({other.source}) share an address"
                )
    return [chosen[key] for key in sorted(chosen)]


def tasks_of(spec: str) -> list[SelectedTask]:
    """Every task of one spec, unfiltered."""
    kind, _, rest = spec.partition(":")
    if kind not in SOURCES or not rest:
        kind, rest = guess_kind(spec), spec
    if kind == "builtin":
        return builtin_tasks(rest, spec)
    if kind == "parquet":
        return parquet_tasks(Path(rest), spec)
    if kind == "gpumode":
        return gpumode_tasks(Path(rest), spec)
    return kernelbench_tasks(Path(rest), spec)


def guess_kind(spec: str) -> str:
    path = Path(spec)
    if spec.endswith(".parquet") and path.is_file():
        return "parquet"
    if path.is_dir() and next(path.rglob("task.yml"), None) is not None:
        return "gpumode"
    if path.is_dir():
        return "kernelbench"
    raise UsageError(f"--tasks {spec}: not a task source; give {SPEC_HELP}")


def builtin_tasks(pattern: str, spec: str) -> list[SelectedTask]:
    from kerneljudge.suite import SUITE, resolve

    if any(ch in pattern for ch in "*?["):
        wanted = {t.name for t in SUITE if fnmatch.fnmatchcase(t.name, pattern)}
    else:
        wanted = {t.name for t in resolve(f"builtin:{pattern}")}
    return [
        SelectedTask(BUILTIN_LEVEL, number, parse_task(t.text(), t.name, f"builtin:{t.name}"), spec)
        for number, t in enumerate(SUITE, start=1)
        if t.name in wanted
    ]


def kernelbench_tasks(folder: Path, spec: str) -> list[SelectedTask]:
    """A checkout's `KernelBench/levelL/P_Name.py` files (the checkout's root works too)."""
    if (folder / "KernelBench").is_dir():
        folder = folder / "KernelBench"
    levels = sorted(p for p in folder.glob("level*") if p.is_dir() and p.name[5:].isdigit())
    if not levels:
        raise UsageError(f"--tasks {spec}: no level1/, level2/, ... folders in {folder} (a KernelBench checkout?)")
    found = []
    for level_dir in levels:
        for path in sorted(level_dir.glob("*.py")):
            number = PROBLEM_FILE.match(path.name)
            if number:
                found.append(SelectedTask(int(level_dir.name[5:]), int(number.group(1)), load_kernelbench(path), spec))
    return found


def parquet_tasks(path: Path, spec: str) -> list[SelectedTask]:
    """The rows of one of the dataset's parquet files, read as the checkout they would be."""
    from kerneljudge.runs.kernelbench_runs import problems_from_parquet

    with tempfile.TemporaryDirectory(prefix="kerneljudge-parquet-") as folder:
        problems_from_parquet([path], folder)
        tasks = kernelbench_tasks(Path(folder), spec)
    # The temporary folder is gone: the tasks are kept by their text, addressed by the parquet file.
    return [
        SelectedTask(t.level, t.problem_id, Task(t.task.text, t.task.name, f"{path}#{t.task_id}"), spec) for t in tasks
    ]


def gpumode_tasks(root: Path, spec: str) -> list[SelectedTask]:
    """A GPU MODE problem folder, or every problem folder under one, reduced to KernelBench's format."""
    folders = [root] if gpumode.is_problem(root) else sorted(p.parent for p in root.rglob("task.yml"))
    if not folders:
        raise UsageError(f"--tasks {spec}: no GPU MODE problem (a folder with task.yml) in {root}")
    return [
        SelectedTask(GPUMODE_LEVEL, number, gpumode.load_task(folder), spec)
        for number, folder in enumerate(folders, start=1)
    ]


def write_problems(tasks: Sequence[SelectedTask], folder: Path) -> Path:
    """Each task's text at `folder/levelL/P_name.py`, as a KernelBench checkout lays it out; a file there with
    other contents is an error and is left as it is (a resumed run must judge against the tasks it began with)."""
    for task in tasks:
        target = folder / f"{task.task_id}.py"
        if target.exists():
            if target.read_text() != task.task.text:
                raise UsageError(f"{target} exists with other contents: the run began with another version of it")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        partial.write_text(task.task.text)
        partial.replace(target)
    return folder
