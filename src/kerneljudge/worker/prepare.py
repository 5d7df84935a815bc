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

Only Triton's own code runs here, as torch's does at every worker's start; the candidate's import of triton
then finds it imported. That tells a candidate its worker was started ahead, which a timing worker's
requests tell it anyway; its timed calls' outputs are checked all the same. Any failure leaves things as
they were: the candidate's first call does the work.
"""

from __future__ import annotations

import os
import time

PREPARE_TRITON_ENV = "KJ_PREPARE_TRITON"


def prepare_triton() -> float | None:
    """Seconds spent readying Triton where the parent asked for it (PREPARE_TRITON_ENV), else None."""
    if os.environ.get(PREPARE_TRITON_ENV) != "1" or os.environ.get("TRITON_INTERPRET") == "1":
        return None
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
