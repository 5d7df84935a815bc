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
  not a flaw): the task declares no family, so only its public shape is ever checked.

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
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerFailure
from kerneljudge.tasks.load import load_task
from kerneljudge.tasks.shapes import MalformedFamily, describe_shape, family_from
from kerneljudge.tasks.source import Task

NATIVE_ATOL = NATIVE_RTOL = 1e-2  # KernelBench's check: torch.allclose(reference, candidate, 1e-2, 1e-2)
MEMORY_SHARE = 0.25
TIMER_FLOOR_MS = 0.010
DEFAULT_MEMORY_BYTES = 80 * 1024**3  # the CPU has no device memory to read: an 80 GiB GPU's (H100, A100)
LOAD_SEED, OTHER_LOAD_SEED, SEEDS, RNG_SEEDS = 42, 43, (1, 2), (7, 8)
BASE_SLOT = "lint_first"  # the worker's slot of the first run of an input, beside which its second runs are set
# Two runs of one input whose outputs differ by at most this much of the output's largest value differ in
# rounding only (a reduction in another order: float32 atomics leave ~1e-7 per term); a random op (dropout)
# moves values by their own size.
ROUNDING = 1e-4
# The rules' version, kept with each stored lint (benchmarks/conformance.py lints again what an older one
# found): 2 since reductions in another order are a note (`nondeterministic`), not `stochastic`.
# 3 since an output another input seed leaves within KernelBench's tolerance is `input_independent` too.
RULES = 3
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


def same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Two screened outputs with the same fingerprint: identical but by chance."""
    return a is not None and b is not None and a["fingerprint"] == b["fingerprint"]


def output_flags(runs: dict[str, list[dict[str, Any]]], parameter_count: int) -> list[LintFlag]:
    """The flags that compare outputs. `runs`: "seed1", "seed2", "seed1_again", "train1", "train2" and
    "other_init" (seed 1's inputs, the model built from another seed), each the reference worker's screen
    of every output (worker/reference.py: fingerprint, max_abs, mean, zeros_pass, mean_passes)."""
    flags: list[LintFlag] = []
    base = runs["seed1"]
    gaps = runs.get("seed2_differences") or []
    for i, out in enumerate(base):
        where = f"output {i}" if len(base) > 1 else "the output"
        constant_passes = out is not None and bool(out.get("zeros_pass") or out.get("mean_passes"))
        gap = gaps[i] if i < len(gaps) else None
        if i < len(runs["seed2"]) and same(out, runs["seed2"][i]):
            flags.append(
                LintFlag(
                    "input_independent",
                    "warning",
                    f"{where} is identical for two input seeds: a kernel that ignores the inputs passes",
                    {"output": i},
                )
            )
        elif gap is not None and gap.get("kept_passes") and not constant_passes:
            # Level 3's EfficientNetB2 and UNetSoftmax in eval mode: outputs that differ in float32 rounding
            # only (the judge's float64 oracle found them identical, KJ-T001), so no fingerprint matched.
            flags.append(
                LintFlag(
                    "input_independent",
                    "warning",
                    f"{where} for one input seed passes KernelBench's check (atol = rtol = 1e-2) against another "
                    f"seed's (differences up to {gap['max_diff']:.3g} of {gap['peak']:.3g}): a kernel that "
                    "ignores the inputs passes",
                    {"output": i, **gap},
                )
            )
        if out is None or "zeros_pass" not in out:
            continue
        if out["zeros_pass"]:
            flags.append(
                LintFlag(
                    "near_zero",
                    "warning",
                    f"zeros pass KernelBench's check on {where} (max |value| {out['max_abs']:.3g})",
                    {"output": i, "max_abs": out["max_abs"]},
                )
            )
        elif out["mean_passes"] and int(math.prod(out["fingerprint"][-1])) > 1:
            flags.append(
                LintFlag(
                    "near_constant",
                    "warning",
                    f"a constant (the mean, {out['mean']:.4g}) passes KernelBench's check on {where}",
                    {"output": i, "mean": out["mean"], "std": out["std"]},
                )
            )
    if parameter_count > 0 and all(same(a, b) for a, b in zip(base, runs["other_init"], strict=False)):
        flags.append(
            LintFlag(
                "weights_unused",
                "warning",
                f"the model has {parameter_count} parameters, but another initialisation gives the same output",
                {"parameters": parameter_count},
            )
        )
    rounding: dict[str, Any] = {}
    for mode, first, second in (("eval", "seed1", "seed1_again"), ("training", "train1", "train2")):
        differs = [i for i, (a, b) in enumerate(zip(runs[first], runs[second], strict=False)) if not same(a, b)]
        gaps = runs.get(f"{second}_differences") or []
        random = [i for i in differs if not in_rounding(gaps[i] if i < len(gaps) else None)]
        if random:
            hint = " (dropout or another random op: KernelBench's harness keeps training mode)"
            hint = hint if mode == "training" else ""
            flags.append(
                LintFlag(
                    "stochastic",
                    "warning",
                    f"the same inputs gave another output in {mode} mode{hint}",
                    {"mode": mode, "outputs": random},
                )
            )
            return flags
        if differs and not rounding:
            rounding = {"mode": mode, "outputs": differs, "differences": [gaps[i] for i in differs]}
    if rounding:
        worst = max(g["max_diff"] / g["peak"] if g["peak"] else 0.0 for g in rounding["differences"])
        flags.append(
            LintFlag(
                "nondeterministic",
                "info",
                f"the same inputs gave outputs that differ in rounding only (at most {worst:.2g} of the largest "
                "value): a reduction in another order (float atomics); the judge's tolerance covers it",
                rounding,
            )
        )
    return flags


def in_rounding(gap: dict[str, float] | None) -> bool:
    """Whether two runs' outputs differ by rounding only: by at most ROUNDING of the output's largest value."""
    return gap is not None and gap.get("max_diff") is not None and gap["max_diff"] <= ROUNDING * gap["peak"]


def unused_input_flags(base: list[dict[str, Any]], swapped: dict[int, tuple[bool | None, list[Any]]]) -> list[LintFlag]:
    """`swapped[k]`: whether input k of seed 2 differs from seed 1's, and the outputs' screens with it in place.
    An input that changed while every output stayed the same is never read (or does not matter)."""
    flags = []
    for k, (differs, screens) in sorted(swapped.items()):
        if not differs or len(screens) != len(base):
            continue
        if all(same(a, b) for a, b in zip(base, screens, strict=True)):
            flags.append(
                LintFlag(
                    "input_unused",
                    "warning",
                    f"input {k} from another seed leaves every output identical: a kernel that never reads it passes",
                    {"input": k},
                )
            )
    return flags


def input_flags(kinds: Sequence[dict[str, Any]]) -> list[LintFlag]:
    flags = []
    for i, kind in enumerate(kinds):
        dtype = kind.get("dtype")
        if dtype is not None and not (dtype.startswith("float") or dtype.startswith("bfloat") or "complex" in dtype):
            flags.append(
                LintFlag(
                    "integer_inputs",
                    "warning",
                    f"input {i} is {dtype}: a harness that casts inputs to a float precision changes it",
                    {"input": i, "dtype": dtype},
                )
            )
    return flags


def _nbytes(kind: dict[str, Any]) -> int:
    if "dtype" not in kind:
        return 0
    return int(math.prod(kind["shape"])) * torch.empty((), dtype=getattr(torch, kind["dtype"])).element_size()


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
            "no shape family: correctness is checked at the public shape and at most at shapes the judge derives "
            "from the task's size globals, so a kernel specialised to it may pass (declare SHAPE_FAMILY, docs/tasks.md)"
        )
        return [LintFlag("fixed_shape", "info", summary)], None
    shapes = family.draw(FAMILY_SHAPES, random.Random(FAMILY_DRAW_SEED))  # the same shapes every lint
    broken: list[dict[str, str]] = []
    for shape in shapes:
        try:
            reference.load(LOAD_SEED, shape)
            screens = reference.trial(SEEDS[0])["screen"]
            if not all(s is None or s.get("finite", True) for s in screens):
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
        hello = self.worker.receive(timeout_s=limits.start_timeout_s)
        if hello.get("type") != "hello":
            raise WorkerFailure("the reference worker did not start")
        self.hello = hello

    def ask(self, request: protocol.Request, values: Any = None, expect: str = "") -> tuple[dict[str, Any], Any]:
        response, out = self.worker.request(request, values)
        if expect and response.get("type") != expect:
            what = response.get("phase") or request.op
            raise TaskError(f"the reference failed to {what}: {response.get('exc_type')}: {response.get('message')}")
        return response, out

    def load(self, seed: int, shape: dict[str, Any] | None = None, footprint: bool = False) -> dict[str, Any]:
        """Build the model; with `footprint`, what one call holds is told too (worker/footprint.py)."""
        return self.ask(protocol.Load(seed=seed, shape=shape, footprint=footprint), expect="loaded")[0]

    def trial(
        self,
        seed: int,
        train: bool = False,
        rng_seed: int | None = None,
        swap: dict[str, int] | None = None,
        slot: str = "lint",
        diff_slot: str | None = None,
    ) -> dict[str, Any]:
        """One run, its outputs kept in `slot`; the worker's response: "screen" per output, "input_kinds",
        "swapped", "signature", and with `diff_slot` "differences" from that slot's outputs."""
        trial = protocol.Trial(
            seed=seed, oracle=False, train=train, rng_seed=rng_seed, slot=slot, stats=True, swap=swap, on_device=True,
            diff_slot=diff_slot,
        )  # fmt: skip
        return self.ask(trial, expect="trial")[0]

    def stage(self) -> dict[str, Any]:
        """The first seed's inputs made and kept in the worker for timing (no candidate's inbox to fill)."""
        return self.ask(protocol.Stage(sets=[{"seed": SEEDS[0]}], on_device=True, inputs_to="here"), expect="staged")[0]

    def device_ms(self) -> float:
        """Median device time of one call, behind a GPU-busy precursor (launch latency hidden)."""
        self.stage()
        timing = protocol.Time(calls=1, samples=20, warmup=3, precursor_ms=0.5, staged=True)
        response, _ = self.ask(timing, expect="timed")
        times = sorted(float(t) for t in response["times_ms"])
        return times[len(times) // 2]

    def close(self) -> None:
        self.worker.close()


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
    GPU through kerneljudge/gate.py; benchmarks/conformance.py)."""
    result = TaskLint(task=task.name, path=task.path)
    try:
        reference = _Reference(task, device, timeout_s)
    except (WorkerFailure, OSError, confine.SandboxUnavailable) as exc:
        result.error = f"the reference worker did not start: {exc}"
        return result
    held = contextlib.ExitStack()
    try:
        loaded = reference.load(LOAD_SEED, footprint=admit is not None)
        if admit is not None:
            held.enter_context(admit(loaded.get("footprint")))
        first = reference.trial(SEEDS[0], slot=BASE_SLOT)
        # The same inputs again with the random state reseeded, in eval and in training mode: a reference
        # with its own random ops (dropout) answers otherwise.
        # Each second run is set beside the first in the worker: a random op differs by the values' size, a
        # reduction in another order (float atomics, e.g. ConvTranspose3d's on CUDA) in the last bits.
        second = reference.trial(SEEDS[1], diff_slot=BASE_SLOT)
        runs = {"seed1": first["screen"], "seed2": second["screen"], "seed2_differences": second["differences"]}
        again = reference.trial(SEEDS[0], rng_seed=RNG_SEEDS[0], diff_slot=BASE_SLOT)
        runs["seed1_again"], runs["seed1_again_differences"] = again["screen"], again["differences"]
        runs["train1"] = reference.trial(SEEDS[0], train=True, rng_seed=RNG_SEEDS[0], slot=BASE_SLOT)["screen"]
        train2 = reference.trial(SEEDS[0], train=True, rng_seed=RNG_SEEDS[1], diff_slot=BASE_SLOT)
        runs["train2"], runs["train2_differences"] = train2["screen"], train2["differences"]
        swapped = {}
        for k, kind in enumerate(first["input_kinds"]):
            if "dtype" in kind and len(first["input_kinds"]) > 1:
                response = reference.trial(SEEDS[0], swap={"seed": SEEDS[1], "position": k})
                swapped[k] = (response["swapped"], response["screen"])
        cuda = bool(reference.hello.get("cuda_available")) and device != "cpu"
        device_ms = reference.device_ms() if cuda else None
        reference.load(OTHER_LOAD_SEED)
        runs["other_init"] = reference.trial(SEEDS[0])["screen"]
        shape_flags, family_facts = family_flags(reference, loaded)
    except (TaskError, WorkerFailure) as exc:
        result.error = str(exc)
        return result
    finally:
        reference.close()
        held.close()  # the worker's memory is back before its reservation is
    kinds, outputs = first["input_kinds"], first["signature"]["items"]
    total = sum(_nbytes(k) for k in kinds) + sum(_nbytes(o) for o in outputs) + int(loaded.get("parameter_bytes") or 0)
    result.facts = {
        "device": "cuda" if cuda else "cpu",
        "inputs": [f"{k['shape']} {k['dtype']}" for k in kinds if "dtype" in k],
        "outputs": [f"{o['shape']} {o['dtype']}" for o in outputs if "dtype" in o],
        "parameters": int(loaded.get("parameter_count") or 0),
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
