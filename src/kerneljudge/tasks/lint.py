"""Task screening (`kerneljudge tasks lint`): flaws in a KernelBench-format task that let a wrong kernel pass.

Each task's reference runs in a sandboxed reference worker, as in a judgment, never in this process. The
worker builds the model after seed 42 and runs it on the inputs of seeds 1 and 2, on seed 1's inputs again
with the random state reseeded (once in eval mode, twice in training mode, with two states), and once
more after building the model from seed 43, and once per input with that input from seed 2. Outputs
stay in the worker, which describes them (a fingerprint, magnitudes, whether a constant passes KernelBench's
check): multi-GiB outputs never cross to this process. The checks, each a flag with an id:

- `input_independent`: the output is identical for two input seeds: a constant, or a function of the
  inputs' shapes only, passes without reading them;
- `input_unused`: replacing one input by another seed's (the others kept) leaves the output identical: a
  kernel that never reads that input passes;
- `near_zero`: zeros pass KernelBench's check (`allclose`, atol = rtol = 1e-2) on this output;
- `near_constant`: the output's mean, as a constant, passes that check;
- `weights_unused`: the model has parameters, yet another initialisation gives the same output;
- `stochastic`: the same inputs give other outputs, in eval mode or in training mode (nn.Module's default,
  which KernelBench's harness keeps: dropout stays on), by more than rounding; `nondeterministic` (a note):
  they differ in rounding only (at most 1e-4 of the largest value: float atomics, a reduction's order);
- `integer_inputs`: an input is an integer or bool tensor, which a harness that casts inputs to a float
  precision would change;
- `memory`: inputs, outputs and parameters take more than a quarter of the device's memory (the oracle's
  float64 copy, activations and the candidate's own buffers need the rest);
- `below_timer_floor` (CUDA): the reference runs in under 10 us of device time, less than the launch
  latency a single-call event pair absorbs (8-14 us on an H200, docs/timing.md);
- `shape_family_malformed`, `shape_family_broken`: the task's shape family cannot be read, or the
  reference fails (or gives a non-finite output) at one of up to 8 of its shapes; `fixed_shape` (a note,
  not a flaw): the task declares no family, so only its public shape and the shapes the judge derives from
  its size integers are checked; `fixed_sizes` (a note): integers that `get_inputs()` or `get_init_inputs()`
  read which the derivation cannot vary, each with why (the task's `Model` reads it, a reshape or an assert
  fixes it and the reference fails at every other value, no tensor's shape follows it: docs/tasks.md).

A task that cannot be loaded or run gets an `error` instead. docs/tasks.md has the details.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from kerneljudge import protocol
from kerneljudge.errors import TaskError, UsageError
from kerneljudge.sandbox import confine
from kerneljudge.sandbox.talk import WorkerFailure
from kerneljudge.sources.task import Task
from kerneljudge.tasks import size_classes
from kerneljudge.tasks.lint_flags import LintFlag, input_flags, memory_flag, output_flags, unused_input_flags
from kerneljudge.tasks.lint_reference import LOAD_SEED, OTHER_LOAD_SEED, RNG_SEEDS, SEEDS, LintReference
from kerneljudge.tasks.load import load_task
from kerneljudge.tasks.shapes import MalformedFamily, describe_shape, family_from, read_family, size_integers

TIMER_FLOOR_MS = 0.010
DEFAULT_MEMORY_BYTES = 80 * 1024**3  # the CPU has no device memory to read: an 80 GiB GPU's (H100, A100)
BASE_SLOT = "lint_first"  # the worker's slot of the first run of an input, beside which its second runs are set
# The rules' version, kept with each stored lint (benchmarks/conformance.py lints again what an older one
# found): 2 since reductions in another order are a note (`nondeterministic`), not `stochastic`.
# 3 since an output another input seed leaves within KernelBench's tolerance is `input_independent` too.
RULES = 3
FAMILY_SHAPES, FAMILY_DRAW_SEED = 8, 0  # shapes of a task's family the reference is run at


@dataclass
class TaskLint:
    task: str
    path: str | None
    flags: list[LintFlag] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # output shapes and dtypes, bytes, device time
    error: str | None = None

    @property
    def clean(self) -> bool:
        return self.error is None and not any(f.severity == "warning" for f in self.flags)


def _nbytes(kind: dict[str, Any]) -> int:
    if "dtype" not in kind:
        return 0
    return int(math.prod(kind["shape"])) * torch.empty((), dtype=getattr(torch, kind["dtype"])).element_size()


def family_flags(reference: LintReference, loaded: protocol.Loaded) -> tuple[list[LintFlag], dict[str, Any] | None]:
    """The shape family's flags, and what the facts keep of it: malformed, absent (a note), or a shape of
    it where the reference itself fails or gives no finite output (the judge would stop on such a task)."""
    try:
        family = family_from(loaded)
    except MalformedFamily as exc:
        return [LintFlag("shape_family_malformed", "warning", f"the shape family is malformed: {exc}")], None
    if family is None:
        summary = (
            "no shape family: correctness is checked at the public shape and at most at shapes the judge derives "
            "from the task's size globals, so a kernel specialised to it may pass (declare SHAPE_FAMILY, docs/tasks.md)"
        )
        notes, facts = derived_flags(reference, loaded)
        return [LintFlag("fixed_shape", "info", summary), *notes], facts
    shapes = family.draw(FAMILY_SHAPES, random.Random(FAMILY_DRAW_SEED))  # the same shapes every lint
    broken: list[dict[str, str]] = []
    for shape in shapes:
        try:
            reference.load(LOAD_SEED, shape)
            screens = reference.trial(SEEDS[0]).screen
            if not all(s is None or s.get("finite", True) for s in screens):
                raise TaskError("its output is not finite")
        except TaskError as exc:
            broken.append({"shape": describe_shape(shape), "error": str(exc)[:300]})
    facts = {**family.summary(), "checked": [describe_shape(s) for s in shapes]}
    if not broken:
        return [], facts
    summary = f"the reference fails at {len(broken)} of {len(shapes)} shapes of its family, {broken[0]['shape']}: "
    return [LintFlag("shape_family_broken", "warning", summary + broken[0]["error"], {"broken": broken})], facts


def derived_flags(reference: LintReference, loaded: protocol.Loaded) -> tuple[list[LintFlag], dict[str, Any] | None]:
    """For a task that declares no family: the family the judge would derive (at values drawn as a judgment
    draws them, from a fixed seed here so that every lint says the same), and a note naming each integer read
    that it cannot vary, with why."""
    integers = size_integers(loaded.integers)
    proposals = size_classes.propose(integers, random.Random(FAMILY_DRAW_SEED)) if integers else None
    derived = reference.derive(proposals)
    fixed = {str(k): str(v)[:400] for k, v in derived.fixed.items()}
    try:
        family = read_family(derived.family)
    except MalformedFamily:
        family = None
    facts = {**(family.summary() if family is not None else {}), "fixed": fixed} if family or fixed else None
    if not fixed:
        return [], facts
    listed = "; ".join(f"{name} ({why})" for name, why in fixed.items())
    summary = f"sizes the judge cannot vary, so a kernel may assume them: {listed}"
    return [LintFlag("fixed_sizes", "info", summary, {"fixed": fixed})], facts


Admit = Callable[[dict[str, Any] | None], contextlib.AbstractContextManager[None]]


def lint_task(
    task: Task,
    device: str = "auto",
    timeout_s: float = 180.0,
    memory_bytes: int | None = None,
    admit: Admit | None = None,
) -> TaskLint:
    """Lint one task in a sandboxed reference worker. `admit`: given the task's footprint once the model is
    built, holds the device memory the lint needs until its worker is closed (lints side by side share a
    GPU through kerneljudge/judgment/gate.py; benchmarks/conformance.py)."""
    result = TaskLint(task=task.name, path=task.path)
    try:
        reference = LintReference(task, device, timeout_s)
    except (WorkerFailure, OSError, confine.SandboxUnavailable) as exc:
        result.error = f"the reference worker did not start: {exc}"
        return result
    held = contextlib.ExitStack()
    try:
        loaded = reference.load(LOAD_SEED, footprint=admit is not None)
        if admit is not None:
            held.enter_context(admit(loaded.footprint))
        first = reference.trial(SEEDS[0], slot=BASE_SLOT)
        # The same inputs again with the random state reseeded, in eval and in training mode: a reference
        # with its own random ops (dropout) answers otherwise.
        # Each second run is set beside the first in the worker: a random op differs by the values' size, a
        # reduction in another order (float atomics, e.g. ConvTranspose3d's on CUDA) in the last bits.
        second = reference.trial(SEEDS[1], diff_slot=BASE_SLOT)
        runs = {"seed1": first.screen, "seed2": second.screen, "seed2_differences": second.differences}
        again = reference.trial(SEEDS[0], rng_seed=RNG_SEEDS[0], diff_slot=BASE_SLOT)
        runs["seed1_again"], runs["seed1_again_differences"] = again.screen, again.differences
        runs["train1"] = reference.trial(SEEDS[0], train=True, rng_seed=RNG_SEEDS[0], slot=BASE_SLOT).screen
        train2 = reference.trial(SEEDS[0], train=True, rng_seed=RNG_SEEDS[1], diff_slot=BASE_SLOT)
        runs["train2"], runs["train2_differences"] = train2.screen, train2.differences
        swapped = {}
        for k, kind in enumerate(first.input_kinds):
            if "dtype" in kind and len(first.input_kinds) > 1:
                swap = reference.trial(SEEDS[0], swap={"seed": SEEDS[1], "position": k})
                swapped[k] = (swap.swapped, swap.screen)
        cuda = reference.hello.cuda_available and device != "cpu"
        device_ms = reference.device_ms() if cuda else None
        reference.load(OTHER_LOAD_SEED)
        runs["other_init"] = reference.trial(SEEDS[0]).screen
        shape_flags, family_facts = family_flags(reference, loaded)
    except (TaskError, WorkerFailure) as exc:
        result.error = str(exc)
        return result
    finally:
        reference.close()
        held.close()  # the worker's memory is back before its reservation is
    kinds, outputs = first.input_kinds, first.signature["items"]
    total = sum(_nbytes(k) for k in kinds) + sum(_nbytes(o) for o in outputs) + int(loaded.parameter_bytes or 0)
    result.facts = {
        "device": "cuda" if cuda else "cpu",
        "inputs": [f"{k['shape']} {k['dtype']}" for k in kinds if "dtype" in k],
        "outputs": [f"{o['shape']} {o['dtype']}" for o in outputs if "dtype" in o],
        "parameters": int(loaded.parameter_count or 0),
        "bytes": total,
        "device_us": None if device_ms is None else round(device_ms * 1e3, 3),
        "shape_family": family_facts,
    }
    result.flags = (
        input_flags(kinds)
        + output_flags(runs, result.facts["parameters"])
        + unused_input_flags(runs["seed1"], swapped)
        + shape_flags
    )
    memory = memory_bytes or (reference.hello.gpu_memory_bytes or 0) or DEFAULT_MEMORY_BYTES
    too_big = memory_flag(total, memory)
    if too_big is not None:
        result.flags.append(too_big)
    if device_ms is not None and device_ms < TIMER_FLOOR_MS:
        result.flags.append(
            LintFlag(
                "below_timer_floor",
                "warning",
                f"the reference takes {device_ms * 1e3:.1f} us of device time, under the ~10 us a single-call "
                "event pair adds in launch latency: such a timer measures the launch, not the kernel",
                {"device_us": device_ms * 1e3},
            )
        )
    return result


def task_files(paths: Sequence[str | Path]) -> list[Path]:
    """Every .py file named or under a named folder, sorted; a path that does not exist is a UsageError."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if str(raw).startswith("builtin:"):  # the built-in suite: builtin:NAME, builtin:OP or builtin:all
            from kerneljudge.suite import resolve

            files.extend(Path(f"builtin:{task.name}") for task in resolve(str(raw)))
        elif path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.py") if p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"no such file or folder: {path}")
    return files


def lint_paths(
    paths: Sequence[str | Path],
    device: str = "auto",
    timeout_s: float = 180.0,
    memory_bytes: int | None = None,
    progress: Any = None,
) -> tuple[list[TaskLint], list[str]]:
    """Lint every task under `paths`; returns the results and the files skipped as not tasks (with why)."""
    results, skipped = [], []
    for path in task_files(paths):
        try:
            task = load_task(path)
        except TaskError as exc:
            skipped.append(f"{path}: {exc}")
            continue
        if progress is not None:
            progress(task)
        results.append(lint_task(task, device, timeout_s, memory_bytes))
    return results, skipped


def to_json(results: Sequence[TaskLint], skipped: Sequence[str]) -> dict[str, Any]:
    return {
        "tasks": [{**asdict(r), "clean": r.clean} for r in results],
        "skipped": list(skipped),
        "flagged": sum(not r.clean for r in results),
    }


def write_json(path: Path, results: Sequence[TaskLint], skipped: Sequence[str]) -> None:
    path.write_text(json.dumps(to_json(results, skipped), indent=2) + "\n")
