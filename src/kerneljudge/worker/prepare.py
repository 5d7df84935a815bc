"""Readying Triton in a candidate's worker as it starts, before any candidate code: for a worker started
ahead of its use (the timing pair, booted while the checked pair works; a spare pair).

Before its first compile or cache lookup, Triton computes once per process a key of its own installation
(`triton.runtime.cache.triton_key`): a sha256 of its compiler's sources and of `libtriton.so`, about 500 MB
in Triton 3.x, 0.64 s on the 2-core machine. In a fresh timing worker that was most of the candidate's first
call even with its kernels carried from its checked worker (sandbox/cache_carry.py; docs/batch.md), and the
first call falls inside the measuring hold. Computed here, it is done while the worker waits for its load.
(The driver's utilities, a small C module Triton builds with the host's compiler, are not built here: a
timing worker finds them among the carried caches, and building them at every start would cost seconds of
CPU where they are not needed.)

The work begins in a thread as the worker's process starts (`begin`, from worker/main.py), beside torch's
import and CUDA's start, which take longer (about 2.7 s against Triton's import and key, 2.0 s, on the
2-core machine; both together 2.9 s): hashing releases the interpreter's lock. The worker waits for it
(`prepare_triton`) before it says hello, so it is over before any candidate code runs and before the
worker counts its own threads (the baseline of KJ-R026). Triton does not import torch, nor torch Triton,
so the two imports take no lock of each other's. So the checked pair's candidate worker does it too, for a
candidate that declares a Triton kernel: its first call then compiles without the key, and its import finds
Triton imported.

Only Triton's own code runs here, as torch's does at every worker's start; the candidate's import of triton
then finds it imported. That tells a candidate that it declared a Triton kernel, which it knows; its calls'
outputs are checked all the same. Any failure leaves things as they were: the candidate's first call does
the work.
"""

from __future__ import annotations

import os
import threading
import time

PREPARE_TRITON_ENV = "KJ_PREPARE_TRITON"

_begun: dict[str, object] = {}  # the thread `begin` started ("thread") and, once it is over, its figure ("seconds")


def wanted(device: str) -> bool:
    """Whether to ready Triton: asked by the parent (PREPARE_TRITON_ENV), not under Triton's interpreter, and on
    a GPU (a worker of device "auto" on a machine without NVIDIA's device nodes is a CPU worker)."""
    if os.environ.get(PREPARE_TRITON_ENV) != "1" or os.environ.get("TRITON_INTERPRET") == "1":
        return False
    return device != "cpu" and (device != "auto" or os.path.exists("/dev/nvidiactl"))


def begin(device: str) -> None:
    """Start readying Triton in a thread where it is wanted; `prepare_triton` waits for it."""
    if not wanted(device) or "thread" in _begun:
        return

    def run() -> None:
        _begun["seconds"] = ready()

    thread = threading.Thread(target=run, name="kerneljudge-prepare-triton", daemon=True)
    _begun["thread"] = thread
    thread.start()


def prepare_triton() -> float | None:
    """Seconds spent readying Triton where the parent asked for it (PREPARE_TRITON_ENV), else None: the thread
    `begin` started, waited for, or the work done here where none was started."""
    thread = _begun.get("thread")
    if isinstance(thread, threading.Thread):
        thread.join()
        seconds = _begun.get("seconds")
        return seconds if isinstance(seconds, float) else None
    if os.environ.get(PREPARE_TRITON_ENV) != "1" or os.environ.get("TRITON_INTERPRET") == "1":
        return None
    return ready()


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
