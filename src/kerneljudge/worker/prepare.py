"""Readying a candidate's worker as it starts, before any candidate code: Triton's installation key, and
torch's own wrappers (torch._dynamo), each in a thread beside torch's import and CUDA's start.

**Triton's key.** Before its first compile or cache lookup, Triton computes once per process a key of its own
installation (`triton.runtime.cache.triton_key`): a sha256 of its compiler's sources and of `libtriton.so`,
about 500 MB in Triton 3.x, 0.64 s on the 2-core machine, 0.5-0.6 s on the H200. It was most of a fresh
timing worker's first call even with its kernels carried from its checked worker (sandbox/cache_carry.py;
docs/batch.md), and of the checked worker's first call a good part. Where the parent asks for it
(PREPARE_TRITON_ENV: a candidate that declares a Triton kernel, the timing pair, a spare pair), the worker
computes it in a thread begun as its process starts (`begin`, from worker/main.py): hashing releases the
interpreter's lock, and Triton does not import torch, nor torch Triton, so neither import waits on the
other's lock. On the 2-core machine torch's import alone took 2.7 s, Triton's import and key 2.0 s, both
together 2.9 s. The worker waits for it (`prepare_triton`) before its hello. (The driver's utilities, a small
C module Triton builds with the host's compiler, are not built here: a timing worker finds them among the
carried caches, and building them at every start would cost seconds of CPU where they are not needed.)

**torch's wrappers.** A candidate's worker on CUDA imports torch._dynamo before any candidate code
(worker/evidence.load_torch_wrappers: some 900 modules, which wrap some of torch's functions as they load,
so that this wrapping is not taken for the candidate's). Done after the hello, it was most of the
candidate's load on the H200 (0.8-1.3 s; the reference's load, which it ran beside, takes milliseconds).
Begun in a thread once torch is imported (`begin_wrappers`, from the worker's constructor), it runs beside
CUDA's start and the hello; the worker waits for it (`torch_wrappers_loaded`) where it did the import
before, after the hello and before the evidence's originals and baselines are taken.

The reference's worker imports torch._dynamo the same way, on a GPU, and waits for it before its hello: the
task's footprint (worker/footprint.py), which a batch's admission and timing ahead ask at the reference's load,
runs the task on torch's meta device, whose first op imports torch._dynamo through torch's Python meta kernels.
That first op took 0.8-1.0 s on the 2-core machine and made the reference's load 1.3-1.5 s on an H100 (2026-12-05,
judge 0.3.5) where it takes milliseconds without the footprint; after the import, 4 ms. Begun as the worker starts,
beside CUDA's start, it is off the judgment's path, and both sides of a timing pair have it imported alike.

Only Triton's and torch's own code runs here, as torch's does at every worker's start; the candidate's
import of triton then finds it imported, which tells a candidate that it declared a Triton kernel, which it
knows. Both threads are over before the worker serves any request (before it counts its own threads for
KJ-R026). Any failure leaves things as they were: the work is done where it was done before.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections.abc import Callable

from kerneljudge.protocol.environment import PREPARE_TRITON_ENV

_begun: dict[str, threading.Thread] = {}  # by what it readies: "triton", "torch_wrappers"
_seconds: dict[str, float | None] = {}  # what each thread took, once it is over


def on_gpu(device: str) -> bool:
    """Whether this worker will run on a GPU, as far as can be told before torch is imported (a worker of
    device "auto" on a machine without NVIDIA's device nodes is a CPU worker)."""
    return device != "cpu" and (device != "auto" or os.path.exists("/dev/nvidiactl"))


def asked() -> bool:
    """Whether the parent asked this worker to ready Triton (PREPARE_TRITON_ENV), not under Triton's interpreter."""
    return os.environ.get(PREPARE_TRITON_ENV) == "1" and os.environ.get("TRITON_INTERPRET") != "1"


def wanted(device: str) -> bool:
    """Whether to ready Triton in a thread as the worker starts: asked, on a GPU."""
    return asked() and on_gpu(device)


def begin(device: str, role: str) -> None:
    """In a candidate's worker, before torch is imported: start readying Triton where it is wanted;
    `prepare_triton` waits for it."""
    if role == "candidate" and wanted(device) and "triton" not in _begun:
        start("triton", ready)


def begin_wrappers(device: str) -> None:
    """In either worker, once torch is imported: start importing torch._dynamo on a GPU;
    `torch_wrappers_loaded` waits for it."""
    if on_gpu(device) and "torch_wrappers" not in _begun:
        start("torch_wrappers", load_wrappers)


def start(name: str, work: Callable[[], float | None]) -> None:
    def run() -> None:
        _seconds[name] = work()

    _begun[name] = threading.Thread(target=run, name=f"kerneljudge-prepare-{name}", daemon=True)
    _begun[name].start()


def waited(name: str) -> bool:
    """Wait for the thread readying `name`, if one was begun; whether one was."""
    thread = _begun.get(name)
    if thread is None:
        return False
    thread.join()
    return True


def prepare_triton() -> float | None:
    """Seconds spent readying Triton where the parent asked for it (PREPARE_TRITON_ENV), else None: the thread
    `begin` started, waited for, or the work done here where none was started."""
    if waited("triton"):
        return _seconds.get("triton")
    return ready() if asked() else None


def torch_wrappers_loaded() -> float | None:
    """Wait for the thread importing torch._dynamo, if one was begun; the seconds it took, None where there was
    none or it failed (the caller imports it then)."""
    return _seconds.get("torch_wrappers") if waited("torch_wrappers") else None


def ready() -> float | None:
    """Import Triton and compute its installation key; the seconds it took, or None where it could not."""
    began = time.perf_counter()
    try:
        from triton.runtime import cache

        key = getattr(cache, "triton_key", None)
        if not callable(key):
            return None
        key()
    except Exception:  # another Triton, or none: the first call does it, as without this
        return None
    return round(time.perf_counter() - began, 3)


def load_wrappers() -> float | None:
    """Import torch._dynamo (torch is imported), where CUDA is available; the seconds it took, or None."""
    began = time.perf_counter()
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        importlib.import_module("torch._dynamo")
    except Exception:  # left to evidence.load_torch_wrappers, after the hello, as before (a failed import
        return None  # leaves nothing in sys.modules)
    return round(time.perf_counter() - began, 3)
