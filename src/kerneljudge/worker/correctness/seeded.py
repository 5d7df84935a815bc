"""A trial's inputs, made from its seed: in the reference's worker, and again in the candidate's.

Shipping a trial's inputs from the reference's worker to the candidate's costs two copies over the host
(device to shared memory, shared memory to device): on an H200, about 3 s for each of the twelve calls of a
KernelBench task with 8 GiB of inputs, most of its correctness stage. So in the hardened modes the
candidate's worker makes them itself, from the seed, the task's `get_inputs()` and the distribution the
reference applied (worker/correctness/contracts.py), where the reference made them (on the device or the host), and
compares their fingerprint with the one the reference's worker sent. Where they differ (a task whose inputs
do not follow from the seed alone, a generator the candidate patched) it answers "inputs_differ", and the
parent ships that trial's inputs and every later one's.

What the candidate's worker loads for this is not the task: it is the task's inputs-only source, which the
parent cut from the task's text (tasks/inputs_source.py: `get_inputs`, the sizes and helpers it reaches, no
`Model` and nothing the forward reaches but imports and data), loaded as `INPUTS_MODULE`. The reference's
source never enters the candidate's process, so no route there (sys.modules, the collector, frames, the line
cache) leads to it. A task whose inputs cannot be cut from its reference has them shipped from the start.

Nothing is given away by this: the seed reaches the candidate's worker when its inputs would, and the
inputs themselves are what the candidate sees either way. A candidate that makes other inputs than it
reports answers for other inputs than the reference's, and fails the comparison, which the reference's
worker makes on its own outputs.
"""

from __future__ import annotations

import contextlib
import linecache
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

from kerneljudge.protocol import wire
from kerneljudge.worker import evidence
from kerneljudge.worker.correctness import contracts

VALUE_CAP = 200  # characters of a non-tensor input's repr in its fingerprint
INPUTS_MODULE = "kj_inputs"  # the name the candidate's worker loads the task's inputs-only source under


def load_text(text: str, name: str) -> Any:
    """A module from source text, registered under `name` (a dataclass needs its module in sys.modules);
    tracebacks show its lines."""
    filename = f"<{name}>"
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), module.__dict__)
    return module


@contextlib.contextmanager
def filled_empties(torch: Any) -> Any:
    """Memory that torch.empty hands out filled (NaN for floating point, the largest value for integers) while
    the task makes its inputs: GPU MODE's problems pass a preallocated output buffer made by torch.empty among
    them, whose bytes are whatever the allocator held before, other in each worker and each call. The fill
    is torch's own (torch.utils.deterministic.fill_uninitialized_memory), on while deterministic algorithms
    are, here in warn-only mode; both are set back after."""
    # torch._C's setter, not torch.use_deterministic_algorithms: that one imports torch._dynamo, which wraps
    # torch functions (torch.manual_seed) as it loads, and would read as the candidate's doing (KJ-R001).
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    try:
        torch._C._set_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an op without a deterministic form warns, and runs as it would
            yield
    finally:
        torch._C._set_deterministic_algorithms(enabled, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def make(torch: Any, module: Any, seed: int, device: Any, on_device: bool, set_seed: Callable[[int], None]) -> list:
    """The task's inputs for `seed`: `get_inputs()` after the seed, under the device as default when
    `on_device` (a CUDA device), else as the task makes them; empty tensors filled (`filled_empties`)."""
    set_seed(seed)
    with filled_empties(torch):
        if on_device and device.type == "cuda":
            with torch.device(device):
                return list(module.get_inputs())
        return list(module.get_inputs())


def fingerprint(torch: Any, value: Any) -> Any:
    """What identifies inputs, as JSON: each tensor's digest (bytes, dtype, two position-weighted sums,
    worker/evidence.py) with its shape and strides, nests followed, other values by their repr."""
    if isinstance(value, torch.Tensor):
        return [*evidence.digest(value), list(value.shape), list(value.stride())]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [fingerprint(torch, v) for v in value]]
    if isinstance(value, dict):
        return ["dict", [[str(k), fingerprint(torch, v)] for k, v in value.items()]]
    return repr(value)[:VALUE_CAP]


def moved(torch: Any, value: Any, device: Any, seen: set[int] | None = None) -> Any:
    """`value` with every tensor in it on `device` as the inbox would give it: a strided tensor keeps its
    layout with NaN in the gaps (wire.placed), an overlapping one (an expand) comes dense, and no two share
    storage."""
    seen = set() if seen is None else seen
    if isinstance(value, torch.Tensor):
        base = value.untyped_storage().data_ptr() if value.numel() else None
        shared = base is not None and base in seen
        if base is not None:
            seen.add(base)
        if wire.layout(value) is not None:
            return wire.placed(value, device)
        if not value.is_contiguous():
            return value.to(device).contiguous()
        return value.to(device, copy=shared)
    if isinstance(value, (list, tuple)):
        return type(value)(moved(torch, v, device, seen) for v in value)
    if isinstance(value, dict):
        return {k: moved(torch, v, device, seen) for k, v in value.items()}
    return value


def remake(torch: Any, module: Any, spec: dict[str, Any], device: Any, set_seed: Callable[[int], None]) -> list:
    """The inputs `spec` describes (seed, on_device, the distribution the reference asked for, the task's
    declared contract), made as the reference made them (before they are moved())."""
    seed = int(spec["seed"])
    inputs = make(torch, module, seed, device, bool(spec.get("on_device")), set_seed)
    variant = spec.get("variant") or {"kind": "standard"}
    if variant.get("kind", "standard") != "standard" and "rejected" not in variant:
        declared = contracts.read_declared(getattr(module, "INPUT_CONTRACT", None))
        inputs, _ = contracts.reshape(torch, inputs, variant, seed, declared=declared)
    return inputs
