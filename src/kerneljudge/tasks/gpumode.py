"""The GPU MODE task format (gpu-mode/reference-kernels), reduced to a KernelBench-format task and candidate.

A GPU MODE problem is a folder: `task.yml` (the files of the problem, the `tests` and `benchmarks` lists of
keyword arguments), `reference.py` (`generate_input(**spec)`, `ref_kernel(data)`,
`check_implementation(data, output)`), usually a `task.py` of type aliases and a shared `utils.py` that
task.yml names by relative path. A submission is a file that defines `custom_kernel(data)`.

The reduction writes one source text per side, as a worker needs it: the problem's helper modules inlined
(their `from task import ...` / `from utils import ...` lines dropped, an aliased name bound to its
original), then a wrapper. The task's `Model` calls `ref_kernel` on the inputs and `get_inputs()` calls
`generate_input` with the first `tests` entry, its seed replaced by one drawn from the judge's generator so
that every trial gets inputs of its own (made where the problem makes them: on the GPU). Every test and
every benchmark is a shape of the task's family, and the judge checks each of them (`SHAPE_TRIALS =
"all"`): a submission can be right at the small test sizes and cut corners only at the large benchmark
ones. The benchmarks are the timing shapes (`TIMING_SHAPES`): the speedup is their geometric mean, as
the leaderboard ranks. The problem's own `check_implementation` runs in the reference worker on the trial's
inputs and the candidate's output (`kerneljudge_check`) and decides, beside the float64 oracle, whose
figures stay in the record. The candidate's `ModelNew` calls `custom_kernel` on the same inputs.

YAML gives the tests' booleans as booleans: a problem whose platform reads them as the strings "True" and
"False" (both true) is judged as its task.yml says, not as the platform ran it (docs/conformance.md).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kerneljudge.errors import TaskError, UsageError
from kerneljudge.sources import pyast
from kerneljudge.sources.candidate import Candidate
from kerneljudge.sources.task import Task, defined_names, parse_task, read_source

MARKER = "# kerneljudge: a GPU MODE problem reduced to KernelBench's format"
HELPERS = ("task", "utils")  # the problem's modules that reference and submission import from
SKIPPED_FILES = ("submission.py", "reference.py", "eval.py")  # the harness's own files, and the two sides


@dataclass(frozen=True)
class Problem:
    folder: Path
    reference: str
    helpers: dict[str, str]  # module name -> source, for each helper module the problem ships
    tests: list[dict[str, Any]]  # task.yml's tests; the first is the public shape
    benchmarks: list[dict[str, Any]]  # task.yml's benchmarks: checked too, and timed
    gpus: int = 1  # a problem for several GPUs (`multi_gpu`, a `world_size` in its tests)


def is_problem(path: str | Path) -> bool:
    return Path(path).is_dir() and (Path(path) / "task.yml").is_file()


def load_problem(folder: str | Path) -> Problem:
    """Read a problem folder; a missing or malformed part is a TaskError naming it."""
    import yaml

    folder = Path(folder)
    try:
        spec = yaml.safe_load(read_source(folder / "task.yml", "GPU MODE task", TaskError))
    except yaml.YAMLError as exc:
        raise TaskError(f"{folder / 'task.yml'}: not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(spec, dict):
        raise TaskError(f"{folder / 'task.yml'}: expected a mapping")
    tests, benchmarks = spec.get("tests") or [], spec.get("benchmarks") or []
    if not tests or not all(isinstance(t, dict) for t in tests + benchmarks):
        raise TaskError(f"{folder / 'task.yml'}: needs a `tests` list of keyword-argument mappings")
    helpers: dict[str, str] = {}
    for entry in spec.get("files") or []:
        name, source = (entry or {}).get("name"), (entry or {}).get("source")
        if not isinstance(name, str) or not isinstance(source, str) or name in SKIPPED_FILES:
            continue
        if name.removesuffix(".py") in HELPERS:
            helpers[name.removesuffix(".py")] = read_source(folder / source, f"GPU MODE file {name}", TaskError)
    for module in HELPERS:  # a folder without a files list: the helpers beside reference.py
        if module not in helpers and (folder / f"{module}.py").is_file():
            helpers[module] = read_source(folder / f"{module}.py", f"GPU MODE file {module}.py", TaskError)
    reference = read_source(folder / "reference.py", "GPU MODE reference", TaskError)
    gpus = max([int(t.get("world_size") or 1) for t in tests] + [2 if spec.get("multi_gpu") else 1])
    return Problem(folder, reference, helpers, tests, benchmarks, gpus)


def _body(source: str, where: str) -> tuple[list[str], str]:
    """The `from __future__` lines of `source`, and the rest without them and without imports of helpers."""
    try:
        tree = pyast.parse(source)
    except SyntaxError as exc:
        raise TaskError(f"{where}: not valid Python (line {exc.lineno}: {exc.msg})") from None
    lines = source.splitlines()
    future: list[str] = []
    drop: set[int] = set()
    aliases: list[str] = []  # `from utils import a as b`: b must still name a once the line is gone
    for node in tree.body:
        span = range(node.lineno - 1, (node.end_lineno or node.lineno))
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            future.extend(lines[i] for i in span)
            drop.update(span)
        elif isinstance(node, ast.ImportFrom) and node.module in HELPERS and not node.level:
            drop.update(span)
            aliases.extend(f"{a.asname} = {a.name}" for a in node.names if a.asname and a.asname != a.name)
        elif isinstance(node, ast.Import) and any(alias.name in HELPERS for alias in node.names):
            raise TaskError(f"{where}: imports a helper module whole (line {node.lineno}); only `from` imports reduce")
    kept = "\n".join(line for i, line in enumerate(lines) if i not in drop)
    return future, "\n".join(aliases) + ("\n" if aliases else "") + kept


def _helpers_for(source: str, problem: Problem) -> list[tuple[str, str]]:
    """The helper modules `source` imports from, as (file name, source) in the order HELPERS lists them."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return []
    wanted = {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module in HELPERS and not n.level}
    return [(f"{name}.py", problem.helpers[name]) for name in HELPERS if name in wanted and name in problem.helpers]


def _compose(parts: list[tuple[str, str]], wrapper: str) -> str:
    futures: list[str] = []
    bodies = []
    for where, source in parts:
        future, body = _body(source, where)
        futures += [f for f in future if f not in futures]
        bodies.append(f"# ---- {where}\n{body.strip()}\n")
    header = [*futures, MARKER, "import torch", "import torch.nn as nn", ""]
    return "\n".join(header) + "\n" + "\n\n".join(bodies) + "\n\n" + wrapper


TASK_WRAPPER = """# ---- kerneljudge's wrapper
_KJ_SPEC = {spec!r}  # task.yml's first test, as (keyword, value) pairs
SHAPE_FAMILY = {{"_KJ_SPEC": {family!r}}}  # every test and every benchmark
SHAPE_TRIALS = "all"  # the judge checks each of them
TIMING_SHAPES = {timing!r}  # the benchmarks: timed, their speedups' geometric mean reported
INPUTS_WRITABLE = True  # GPU MODE's harness hands each call a copy: a submission may write into its inputs


def _kj_arguments(data):
    return data if len(data) > 1 else data[0]


class Model(nn.Module):
    def forward(self, *data):
        return ref_kernel(_kj_arguments(data))


def get_inputs():
    if {gpus} > 1:
        raise RuntimeError("kerneljudge: this problem runs on {gpus} GPUs with a process group; one worker has one")
    spec = dict(_KJ_SPEC)
    if "seed" in spec:  # drawn from the judge's seeded generator: each trial gets inputs of its own
        spec["seed"] = int(torch.randint(0, 2**31 - 1, ()))
    data = generate_input(**spec)
    if isinstance(data, (tuple, list)):
        if len(data) == 1:
            raise TypeError("generate_input returned a 1-tuple, which the reduction cannot tell from its item")
        return list(data)
    return [data]


def get_init_inputs():
    return []


def kerneljudge_check(inputs, output):
    # The problem's own check_implementation: (passed, message); an older one returns a message, empty on a pass.
    result = check_implementation(_kj_arguments(list(inputs)), output)
    if isinstance(result, tuple):
        return bool(result[0]), str(result[1])
    return not result, str(result)
"""

# The forward-and-backward contract (princeton/cross_entropy_py): `generate_inputs(batch_size, vocab_size, seed)`,
# `reference_forward` and `reference_backward`, a submission with `cross_entropy_forward` and `_backward`; its
# own eval.py fixes the batch at 4096 and compares both outputs with allclose, which the oracle stands in for.
PAIR_TASK_WRAPPER = """# ---- kerneljudge's wrapper (the forward-and-backward contract)
_KJ_SPEC = {spec!r}
SHAPE_FAMILY = {{"_KJ_SPEC": {family!r}}}
SHAPE_TRIALS = "all"
TIMING_SHAPES = {timing!r}
INPUTS_WRITABLE = True
_KJ_BATCH = 4096  # its eval.py's fixed batch


class Model(nn.Module):
    def forward(self, logits, targets, grad_output):
        return reference_forward(logits, targets), reference_backward(logits, targets, grad_output)


def get_inputs():
    spec = dict(_KJ_SPEC)
    spec["seed"] = int(torch.randint(0, 2**31 - 1, ()))
    return list(generate_inputs(_KJ_BATCH, **spec))


def get_init_inputs():
    return []
"""

PAIR_CANDIDATE_WRAPPER = """# ---- kerneljudge's wrapper (the forward-and-backward contract)


class ModelNew(nn.Module):
    def forward(self, logits, targets, grad_output):
        return cross_entropy_forward(logits, targets), cross_entropy_backward(logits, targets, grad_output)
"""
PAIR_NAMES = ("generate_inputs", "reference_forward", "reference_backward")
PAIR_SUBMISSION = ("cross_entropy_forward", "cross_entropy_backward")

CANDIDATE_WRAPPER = """# ---- kerneljudge's wrapper


class ModelNew(nn.Module):
    def forward(self, *data):
        return custom_kernel(data if len(data) > 1 else data[0])
"""


def load_task(folder: str | Path) -> Task:
    problem = load_problem(folder)
    parts = [*_helpers_for(problem.reference, problem), ("reference.py", problem.reference)]
    family = [tuple(test.items()) for test in problem.tests + problem.benchmarks]
    timing = [{"_KJ_SPEC": tuple(bench.items())} for bench in problem.benchmarks] or None
    names = defined_names(pyast.parse(problem.reference))
    if all(n in names for n in PAIR_NAMES) and "ref_kernel" not in names:
        wrapper = PAIR_TASK_WRAPPER.format(spec=family[0], family=family, timing=timing)
    elif "generate_input" in names and "ref_kernel" in names:
        wrapper = TASK_WRAPPER.format(spec=family[0], family=family, timing=timing, gpus=problem.gpus)
    else:
        raise TaskError(
            f"{folder}: reference.py defines neither generate_input and ref_kernel nor {', '.join(PAIR_NAMES)}"
        )
    text = _compose(parts, wrapper)
    return parse_task(text, Path(folder).resolve().name, str(folder))


def adapt_candidate(task: Task, candidate: Candidate) -> Candidate:
    """A GPU MODE submission (defines custom_kernel, not ModelNew) against a GPU MODE task, as a candidate;
    anything else is returned as it is."""
    if MARKER not in task.text.splitlines()[:10]:
        return candidate
    try:  # `custom_kernel = torch.compile(_custom_kernel)` defines it as well as a `def` does
        names = defined_names(pyast.parse(candidate.text))
    except SyntaxError:
        return candidate  # the judge reports the syntax error
    wrapper = CANDIDATE_WRAPPER
    if "ModelNew" in names:
        return candidate
    if all(n in names for n in PAIR_SUBMISSION) and "custom_kernel" not in names:
        wrapper = PAIR_CANDIDATE_WRAPPER
    elif "custom_kernel" not in names:
        return candidate
    if task.path is None or not is_problem(task.path):
        raise UsageError(f"task {task.name}: its GPU MODE folder is not at hand to reduce the submission")
    problem = load_problem(task.path)
    parts = [*_helpers_for(candidate.text, problem), (Path(candidate.path or "submission.py").name, candidate.text)]
    return replace(candidate, text=_compose(parts, wrapper))
