"""Task screening (`kerneljudge tasks lint`): flaws in a KernelBench-format task that let a wrong kernel pass.

Each task's reference runs in a sandboxed reference worker, as in a judgment, never in this process. The
worker builds the model after seed 42 and runs it on the inputs of seeds 1 and 2, on seed 1's inputs again
with the random state reseeded (once in eval mode, twice in training mode, with two states), and once
more after building the model from seed 43. The checks, each a
flag with an id:

- `input_independent`: the output is identical for two input seeds: a constant, or a function of the
  inputs' shapes only, passes without reading them;
- `near_zero`: zeros pass KernelBench's check (`allclose`, atol = rtol = 1e-2) on this output;
- `near_constant`: the output's mean, as a constant, passes that check;
- `weights_unused`: the model has parameters, yet another initialisation gives the same output;
- `stochastic`: the same inputs give other outputs, in eval mode or in training mode (nn.Module's default,
  which KernelBench's harness keeps: dropout stays on);
- `integer_inputs`: an input is an integer or bool tensor, which a harness that casts inputs to a float
  precision would change;
- `memory`: inputs, outputs and parameters take more than a quarter of the device's memory (the oracle's
  float64 copy, activations and the candidate's own buffers need the rest);
- `below_timer_floor` (CUDA): the reference runs in under 10 us of device time, less than the launch
  latency a single-call event pair absorbs (8-14 us on an H200, docs/timing.md);
- `shape_family_malformed`, `shape_family_broken`: the task's shape family cannot be read, or the
  reference fails (or gives a non-finite output) at one of up to 8 of its shapes; `fixed_shape` (a note,
  not a flaw): the task declares no family, so only its public shape is ever checked.

A task that cannot be loaded or run gets an `error` instead. docs/tasks.md has the details.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from kerneljudge.checks.outputs import reference_signature
from kerneljudge.checks.screening import digest
from kerneljudge.errors import TaskError, UsageError
from kerneljudge.sandbox import confine
from kerneljudge.sandbox.process import WorkerFailure, WorkerLimits, WorkerProcess
from kerneljudge.shapes import MalformedFamily, describe_shape, family_from
from kerneljudge.task import Task, load_task

NATIVE_ATOL = NATIVE_RTOL = 1e-2  # KernelBench's check: torch.allclose(reference, candidate, 1e-2, 1e-2)
MEMORY_SHARE = 0.25
TIMER_FLOOR_MS = 0.010
DEFAULT_MEMORY_BYTES = 80 * 1024**3  # the CPU has no device memory to read: an 80 GiB GPU's (H100, A100)
LOAD_SEED, OTHER_LOAD_SEED, SEEDS, RNG_SEEDS = 42, 43, (1, 2), (7, 8)
FAMILY_SHAPES, FAMILY_DRAW_SEED = 8, 0  # shapes of a task's family the reference is run at


@dataclass
class LintFlag:
    id: str
    severity: str  # "warning" or "info"
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)


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


def _tensors(values: Any) -> list[torch.Tensor]:
    return [t for t in reference_signature(values) if isinstance(t, torch.Tensor)]


def _bytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _passes_native(candidate: torch.Tensor, reference: torch.Tensor) -> bool:
    return bool(torch.allclose(reference.double(), candidate.double(), atol=NATIVE_ATOL, rtol=NATIVE_RTOL))


def output_flags(runs: dict[str, list[torch.Tensor]], parameter_count: int) -> list[LintFlag]:
    """The flags that compare outputs. `runs`: "seed1", "seed2", "seed1_again", "train1", "train2" and
    "other_init" (seed 1's inputs, the model built from another seed), each the reference's outputs."""
    flags: list[LintFlag] = []
    base = runs["seed1"]
    for i, out in enumerate(base):
        where = f"output {i}" if len(base) > 1 else "the output"
        if i < len(runs["seed2"]) and digest(out) == digest(runs["seed2"][i]):
            flags.append(
                LintFlag(
                    "input_independent",
                    "warning",
                    f"{where} is identical for two input seeds: a kernel that ignores the inputs passes",
                    {"output": i},
                )
            )
        if out.is_floating_point() and out.numel() > 0:
            if _passes_native(torch.zeros_like(out), out):
                flags.append(
                    LintFlag(
                        "near_zero",
                        "warning",
                        f"zeros pass KernelBench's check on {where} (max |value| {out.abs().max().item():.3g})",
                        {"output": i, "max_abs": out.abs().max().item()},
                    )
                )
            elif out.numel() > 1 and _passes_native(torch.full_like(out, out.double().mean().item()), out):
                mean = out.double().mean().item()
                flags.append(
                    LintFlag(
                        "near_constant",
                        "warning",
                        f"a constant (the mean, {mean:.4g}) passes KernelBench's check on {where}",
                        {"output": i, "mean": mean, "std": out.double().std().item()},
                    )
                )
    if parameter_count > 0 and all(digest(a) == digest(b) for a, b in zip(base, runs["other_init"], strict=False)):
        flags.append(
            LintFlag(
                "weights_unused",
                "warning",
                f"the model has {parameter_count} parameters, but another initialisation gives the same output",
                {"parameters": parameter_count},
            )
        )
    for mode, first, second in (("eval", "seed1", "seed1_again"), ("training", "train1", "train2")):
        differs = [i for i, (a, b) in enumerate(zip(runs[first], runs[second], strict=False)) if digest(a) != digest(b)]
        if differs:
            hint = " (dropout or another random op: KernelBench's harness keeps training mode)"
            hint = hint if mode == "training" else ""
            flags.append(
                LintFlag(
                    "stochastic",
                    "warning",
                    f"the same inputs gave another output in {mode} mode{hint}",
                    {"mode": mode, "outputs": differs},
                )
            )
            break
    return flags


def input_flags(inputs: Sequence[Any]) -> list[LintFlag]:
    flags = []
    for i, value in enumerate(inputs):
        if isinstance(value, torch.Tensor) and not (value.is_floating_point() or value.is_complex()):
            flags.append(
                LintFlag(
                    "integer_inputs",
                    "warning",
                    f"input {i} is {str(value.dtype).removeprefix('torch.')}: a harness that casts inputs to a "
                    "float precision changes it",
                    {"input": i, "dtype": str(value.dtype).removeprefix("torch.")},
                )
            )
    return flags


def memory_flag(total_bytes: int, memory_bytes: int) -> LintFlag | None:
    if total_bytes <= MEMORY_SHARE * memory_bytes:
        return None
    return LintFlag(
        "memory",
        "warning",
        f"inputs, outputs and parameters take {total_bytes / 2**30:.1f} GiB, more than a quarter of "
        f"{memory_bytes / 2**30:.0f} GiB",
        {"bytes": total_bytes, "device_memory_bytes": memory_bytes},
    )


def family_flags(reference: _Reference, loaded: dict[str, Any]) -> tuple[list[LintFlag], dict[str, Any] | None]:
    """The shape family's flags, and what the facts keep of it: malformed, absent (a note), or a shape of
    it where the reference itself fails or gives no finite output (the judge would stop on such a task)."""
    try:
        family = family_from(loaded)
    except MalformedFamily as exc:
        return [LintFlag("shape_family_malformed", "warning", f"the shape family is malformed: {exc}")], None
    if family is None:
        summary = (
            "no shape family: correctness is checked at the public shape only, so a kernel specialised to it "
            "passes (declare SHAPE_FAMILY, docs/tasks.md)"
        )
        return [LintFlag("fixed_shape", "info", summary)], None
    shapes = family.draw(FAMILY_SHAPES, random.Random(FAMILY_DRAW_SEED))  # the same shapes every lint
    broken: list[dict[str, str]] = []
    for shape in shapes:
        try:
            reference.load(LOAD_SEED, shape)
            outputs = reference.trial(SEEDS[0])[1]
            if not all(bool(torch.isfinite(t).all()) for t in outputs if t.is_floating_point()):
                raise TaskError("its output is not finite")
        except TaskError as exc:
            broken.append({"shape": describe_shape(shape), "error": str(exc)[:300]})
    facts = {**family.summary(), "checked": [describe_shape(s) for s in shapes]}
    if not broken:
        return [], facts
    summary = f"the reference fails at {len(broken)} of {len(shapes)} shapes of its family, {broken[0]['shape']}: "
    return [LintFlag("shape_family_broken", "warning", summary + broken[0]["error"], {"broken": broken})], facts


class _Reference:
    """The task's reference in a sandboxed worker: load it, run trials, time it."""

    def __init__(self, task: Task, device: str, timeout_s: float) -> None:
        limits = WorkerLimits(step_timeout_s=timeout_s)
        self.worker = WorkerProcess("reference", device, task.text, limits, policy=confine.policy_for("auto"))
        hello, _ = self.worker.receive(timeout_s=limits.start_timeout_s)
        if hello.get("type") != "hello":
            raise WorkerFailure("the reference worker did not start")
        self.hello = hello

    def ask(self, header: dict[str, Any], values: Any = None, expect: str = "") -> tuple[dict[str, Any], Any]:
        response, out = self.worker.request(header, values)
        if expect and response.get("type") != expect:
            what = response.get("phase") or header["op"]
            raise TaskError(f"the reference failed to {what}: {response.get('exc_type')}: {response.get('message')}")
        return response, out

    def load(self, seed: int, shape: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.ask({"op": "load", "seed": seed, "shape": shape}, expect="loaded")[0]

    def trial(
        self, seed: int, train: bool = False, rng_seed: int | None = None
    ) -> tuple[list[Any], list[torch.Tensor]]:
        header = {"op": "trial", "seed": seed, "oracle": False, "train": train, "rng_seed": rng_seed}
        _, values = self.ask(header, expect="trial")
        inputs, out, _ = values["values"]
        return list(inputs), _tensors(out)

    def device_ms(self, inputs: list[Any]) -> float:
        """Median device time of one call, behind a GPU-busy precursor (launch latency hidden)."""
        self.ask({"op": "stage"}, [inputs], expect="staged")
        header = {
            "op": "time", "calls": 1, "samples": 20, "warmup": 3, "flush_bytes": 0, "precursor_ms": 0.5,
            "method": "events", "compiled": False, "staged": True,
        }  # fmt: skip
        response, _ = self.ask(header, expect="timed")
        times = sorted(float(t) for t in response["times_ms"])
        return times[len(times) // 2]

    def close(self) -> None:
        self.worker.close()


def lint_task(task: Task, device: str = "auto", timeout_s: float = 180.0, memory_bytes: int | None = None) -> TaskLint:
    result = TaskLint(task=task.name, path=task.path)
    try:
        reference = _Reference(task, device, timeout_s)
    except (WorkerFailure, OSError, confine.SandboxUnavailable) as exc:
        result.error = f"the reference worker did not start: {exc}"
        return result
    try:
        loaded = reference.load(LOAD_SEED)
        inputs, first = reference.trial(SEEDS[0])
        # The same inputs again with the random state reseeded, in eval and in training mode: a reference
        # with its own random ops (dropout) answers otherwise.
        runs = {"seed1": first, "seed2": reference.trial(SEEDS[1])[1]}
        runs["seed1_again"] = reference.trial(SEEDS[0], rng_seed=RNG_SEEDS[0])[1]
        runs["train1"] = reference.trial(SEEDS[0], train=True, rng_seed=RNG_SEEDS[0])[1]
        runs["train2"] = reference.trial(SEEDS[0], train=True, rng_seed=RNG_SEEDS[1])[1]
        cuda = bool(reference.hello.get("cuda_available")) and device != "cpu"
        device_ms = reference.device_ms(inputs) if cuda else None
        reference.load(OTHER_LOAD_SEED)
        runs["other_init"] = reference.trial(SEEDS[0])[1]
        shape_flags, family_facts = family_flags(reference, loaded)
    except (TaskError, WorkerFailure) as exc:
        result.error = str(exc)
        return result
    finally:
        reference.close()
    tensors_in = [x for x in inputs if isinstance(x, torch.Tensor)]
    total = _bytes(tensors_in) + _bytes(first) + int(loaded.get("parameter_bytes") or 0)
    result.facts = {
        "device": "cuda" if cuda else "cpu",
        "inputs": [f"{list(t.shape)} {str(t.dtype).removeprefix('torch.')}" for t in tensors_in],
        "outputs": [f"{list(t.shape)} {str(t.dtype).removeprefix('torch.')}" for t in first],
        "parameters": int(loaded.get("parameter_count") or 0),
        "bytes": total,
        "device_us": None if device_ms is None else round(device_ms * 1e3, 3),
        "shape_family": family_facts,
    }
    result.flags = input_flags(inputs) + output_flags(runs, result.facts["parameters"]) + shape_flags
    memory = memory_bytes or int(reference.hello.get("gpu_memory_bytes") or 0) or DEFAULT_MEMORY_BYTES
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
