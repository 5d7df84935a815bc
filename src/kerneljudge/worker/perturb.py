"""Perturbed replays (CUDA only): the same call on the same inputs, under other device conditions.

A race that compute-sanitizer does not model (in global memory, between blocks, across streams) and that
an idle GPU hides may show when the candidate's blocks are scheduled and finish in another order. Two
conditions, made by this worker's own code around the call (the parent asks for them, `perturb` in a
`call` request; stages/replays.py, `perturbations`), never by the candidate:

- `gpu_load`: matrix products on a stream of the worker's own, queued just before the call and lasting
  about `factor` times as long as the previous call took: the candidate's kernels share the SMs, the
  caches and the memory bandwidth with other work while they run;
- `launch_order`: the L2 flushed and a delay kernel queued on the call's stream ahead of it: the call's
  kernels start behind the delay, on a cold cache, with all of its launches already queued.

On the CPU there is nothing to perturb: the parent asks for neither there. The matrices are made without
the random generator, so the call's random state is the one the parent set.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

MIN_PRODUCTS, MAX_PRODUCTS = 4, 512


def product_ms(worker: Any, a: Any, out: Any, stream: Any) -> float:
    """How long one product takes on this device (measured once per worker, on the load's stream)."""
    if worker.product_ms is None:
        torch = worker.torch
        with torch.cuda.stream(stream):
            torch.mm(a, a, out=out)  # the first also loads the kernel
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            torch.mm(a, a, out=out)
            end.record(stream)
        end.synchronize()
        worker.product_ms = max(start.elapsed_time(end), 1e-3)
    return float(worker.product_ms)


@contextlib.contextmanager
def perturbed(worker: Any, spec: Any, last_call_s: float) -> Iterator[dict[str, Any]]:
    """The call's conditions while the block runs (`spec`: the parent's `perturb`, None for none); what the
    worker queued is waited for and released afterwards. Yields what was done, for the response: a
    perturbation the worker could not set up (memory running short) is left out and said so, never charged
    to the candidate."""
    kind = spec.get("kind") if isinstance(spec, dict) else None
    if kind not in ("gpu_load", "launch_order") or worker.device.type != "cuda":
        yield {}
        return
    held: list[Any] = []
    stream = None
    try:
        stream = _load(worker, spec, last_call_s, held) if kind == "gpu_load" else _reorder(worker, spec)
        done: dict[str, Any] = {"applied": kind}
    except Exception as exc:
        done = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        yield done
    finally:
        if stream is not None:
            stream.synchronize()
        held.clear()


def _load(worker: Any, spec: dict[str, Any], last_call_s: float, held: list[Any]) -> Any:
    torch = worker.torch
    side = int(spec.get("side", 2048))
    stream = torch.cuda.Stream(device=worker.device)
    with torch.cuda.stream(stream):
        a = torch.full((side, side), 1.0 / side, device=worker.device)
        out = torch.empty_like(a)
    held += [a, out]
    each = product_ms(worker, a, out, stream)
    count = math.ceil(float(spec.get("factor", 3.0)) * last_call_s * 1e3 / each)
    with torch.cuda.stream(stream):
        for _ in range(min(MAX_PRODUCTS, max(MIN_PRODUCTS, count))):
            torch.mm(a, a, out=out)
    return stream


def _reorder(worker: Any, spec: dict[str, Any]) -> None:
    flush = worker.flush_buffer(int(spec.get("flush_bytes", 0)))
    if flush is not None:
        flush.zero_()
    cycles = worker.sleep_cycles(float(spec.get("delay_ms", 1.0)))
    if cycles:
        worker.torch.cuda._sleep(cycles)
