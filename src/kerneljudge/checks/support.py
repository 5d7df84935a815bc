"""Whether a failure of the trusted reference means the task cannot be judged on this machine.

Pure: the reference worker's error response in, a one-line reason out (or None). A reference that cannot
run here is no verdict on the candidate and no fault of the judge: the record is UNSUPPORTED, with the
reason, where a task that is broken everywhere is an ERROR. The cases are few and named, so that a real
bug in a task is never hidden behind them:

- device memory: the task's tensors, with the float64 oracle's copies, do not fit what the device has free;
- the device: an op or dtype this GPU (or the CPU, for a task that makes its inputs on CUDA) does not
  have, such as Blackwell-only FP4 matrix products on an H200;
- a package the task imports is not installed on this machine;
- the reference runs, but neither in float64 nor in float32 (no oracle to judge against);
- the task's inputs hold objects (a dataclass of weights, a stateful module) that cannot be handed to
  another process as tensors and plain values.
"""

from __future__ import annotations

import re

from kerneljudge import protocol

MEMORY = ("out of memory", "outofmemoryerror", "cudaerrormemoryallocation", "cannot allocate memory")
DEVICE = (
    "no kernel image is available",
    "torch not compiled with cuda",
    "found no nvidia driver",
    "no cuda gpus are available",
    "cuda driver initialization failed",
    "is not supported on this gpu",
    "not supported on this device",
    "requires compute capability",
    "requires sm_1",
    "only supported on sm1",
    "only supported on sm_1",
    "cublas_status_not_supported",  # a Blackwell-only FP4 matrix product on an older GPU
    "kerneljudge: this problem runs on",  # a GPU MODE problem for several GPUs (tasks/gpumode.py)
)
AMD = re.compile(r"\b(hip|rocm|aiter)\b", re.I)
DTYPE_NOT_IMPLEMENTED = re.compile(r"not implemented for .?(float8_e4m3fnuz|float8_e5m2fnuz|float4|fp4)", re.I)


def out_of_memory(text: str) -> bool:
    """Whether an error's type and message say that memory ran short (torch's allocator, the host's)."""
    return any(m in text.lower() for m in MEMORY)


def unsupported_reason(error: protocol.Failed, device: str | None) -> str | None:
    """Why the task cannot be judged here, from the reference worker's error answer; None: a real failure."""
    kind, message = error.exc_type, error.message
    text = f"{kind}: {message}".lower()
    first_line = message.strip().splitlines()[0][:200] if message.strip() else kind
    if kind in ("OutOfMemoryError", "MemoryError") or out_of_memory(text):
        return f"the reference does not fit the {device or 'device'}'s free memory ({first_line})"
    if kind == "ModuleNotFoundError":  # at import, or imported inside a function as a ROCm-only reference does
        found = re.search(r"No module named '([^']+)'", message)
        missing = found.group(1) if found else "a module"
        return f"the task imports {missing}, which is not installed on this machine"
    if any(m in text for m in DEVICE) or DTYPE_NOT_IMPLEMENTED.search(message) or AMD.search(message):
        return f"the reference cannot run on this {device or 'device'} ({first_line})"
    if kind == "NoOracle":
        return f"no oracle: {first_line}"
    if kind == "TypeError" and "cannot send a value of type" in message:
        return f"the task's inputs hold objects no process boundary carries ({first_line})"
    return None
