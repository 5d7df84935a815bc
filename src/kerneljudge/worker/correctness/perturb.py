"""Perturbed replays (CUDA only): the same call on the same inputs, under other device conditions.

A race that compute-sanitizer does not model (in global memory, between blocks, across streams) and that
an idle GPU hides may show when the candidate's blocks are scheduled and finish in another order. The
conditions are made by this worker's own code around the call (the parent draws them and asks for one per
replay, `perturb` in a `call` request; judgment/stages/replays.py), never by the candidate:

- `gpu_load`: matrix products on a stream of the worker's own, queued just before the call and lasting
  about `factor` times as long as the previous call took: the candidate's kernels share the SMs, the
  caches and the memory bandwidth with other work while they run;
- `launch_order`: the L2 flushed and a delay kernel queued on the call's stream ahead of it: the call's
  kernels start behind the delay, on a cold cache, with all of its launches already queued;
- `copy_traffic`: device-to-device and host-to-device copies of `bytes` each (sized by the parent to the
  call's data and to the memory reserved for the judgment), on two streams of the worker's own, for about
  `factor` times the previous call: the copy engines and the memory bandwidth are contended;
- `sm_hold`: a kernel of the worker's own, one block per SM (each takes the SM's whole shared memory), on
  `share` of the SMs, spinning from the moment the call's stream reaches the call (a mark the worker queues
  there just before it: `begin_call`) for `factor` times the previous call, or until the call is over: the
  call's blocks land on the other SMs, and on all of them, in another order, once it ends;
- `staggered_release`: the call's stream made to wait for a delay on another stream, while a third stream's
  products are released at a moment inside the call (`release`, a fraction of the previous call's length).

Each is bounded: its work by counts and milliseconds scaled to the previous call (`scaled_count`,
`hold_ms`), its memory by the parent's `bytes`. What the worker did goes back in the response (`perturbed`:
the kind and its counts, which the parent checks against what it asked, judgment/stages/replays.check_report); a
perturbation the worker could not set up is said so and never charged to the candidate. On the CPU there is
nothing to perturb: the parent asks for none there. Nothing here draws from the random generator, so the
call's random state is the one the parent set.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

from kerneljudge.protocol.limits import (
    MAX_COPIES,
    MAX_COPY_BYTES,
    MAX_CYCLES,
    MAX_DELAY_MS,
    MAX_HOLD_MS,
    MAX_PRODUCTS,
    MIN_COPIES,
    MIN_COPY_BYTES,
    MIN_HOLD_MS,
    MIN_PRODUCTS,
    hold_blocks,
)
from kerneljudge.protocol.limits import PERTURB_KINDS as KINDS

HOLD_THREADS = 1024
HOLD_SOURCE = r"""
extern "C" __global__ void kj_sm_hold(const volatile unsigned int* marks, int cycles, int most) {
    // Launched with the SM's whole shared memory: one block per SM, and no other block that needs any beside it.
    // Thread 0 spins while the block's other threads wait at the barrier, the SM's shared memory and threads taken.
    // marks[0]: the call's stream has reached the call; marks[1]: the call is over. `most` bounds the whole hold.
    if (threadIdx.x == 0) {
        long long start = clock64();
        while (marks[0] == 0u && clock64() - start < (long long)most) { }
        long long begun = clock64();
        while (marks[1] == 0u && clock64() - begun < (long long)cycles && clock64() - start < (long long)most) { }
    }
    __syncthreads();
}

extern "C" __global__ void kj_hold_mark(unsigned int* marks, int which) {
    if (which < 0) { marks[0] = 1u; marks[1] = 1u; } else { marks[which] = 1u; }
    __threadfence();
}
"""


def scaled_count(factor: float, last_call_s: float, each_ms: float, low: int, high: int) -> int:
    """How many pieces of work of `each_ms` last about `factor` times the previous call, within [low, high]."""
    if not each_ms > 0 or not math.isfinite(factor * last_call_s):
        return low
    return min(high, max(low, math.ceil(factor * last_call_s * 1e3 / each_ms)))


def hold_ms(factor: float, last_call_s: float) -> float:
    """How long `sm_hold` holds its SMs: `factor` times the previous call, within [MIN_HOLD_MS, MAX_HOLD_MS]."""
    wanted = factor * last_call_s * 1e3
    return min(MAX_HOLD_MS, max(MIN_HOLD_MS, wanted)) if math.isfinite(wanted) else MIN_HOLD_MS


def bounded_cycles(cycles: int) -> int:
    return min(MAX_CYCLES, max(0, int(cycles)))


@contextlib.contextmanager
def perturbed(worker: Any, spec: Any, last_call_s: float) -> Iterator[dict[str, Any]]:
    """The call's conditions while the block runs (`spec`: the parent's `perturb`, None for none); what the
    worker queued is waited for and released afterwards. Yields what was done, for the response: the kind and
    its counts, or, for a perturbation the worker could not set up (memory running short, no NVRTC), the
    error, never charged to the candidate."""
    kind = spec.get("kind") if isinstance(spec, dict) else None
    if kind not in KINDS or worker.device.type != "cuda":
        yield {}
        return
    held: list[Any] = []
    streams: list[Any] = []
    try:
        counts = MAKERS[kind](worker, spec, last_call_s, held, streams)
        done: dict[str, Any] = {"applied": kind, **counts}
    except Exception as exc:
        done = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        yield done
    finally:
        try:
            _release_hold(worker)
        finally:
            for stream in streams:
                stream.synchronize()
            held.clear()


def begin_call(worker: Any) -> None:
    """Just before the call, on the call's stream: the mark from which a pending `sm_hold` counts its length
    (none pending: nothing). The hold's SMs stay taken from its launch to this mark, whatever the judge's own
    work before the call (its memory poisoning) and the host's time to get there."""
    _mark(worker, 0, drop=False)


def end_call(worker: Any) -> None:
    """Just after the call returns, on the call's stream: the mark at which a pending `sm_hold` ends, once the
    stream has run everything the call queued on it (none pending: nothing)."""
    _mark(worker, 1, drop=True)


def _release_hold(worker: Any) -> None:
    """The call never came or never returned: both of a pending hold's marks set, on a stream of their own, so
    that it ends now rather than at its bound."""
    _mark(worker, -1, drop=True, own_stream=True)


def _mark(worker: Any, which: int, drop: bool, own_stream: bool = False) -> None:
    """Mark a pending hold's `which` (-1: both) on the current stream, or on a new one of its own."""
    cache = _cache(worker)
    hold = cache.pop("hold", None) if drop else cache.get("hold")
    if hold is not None:
        kernel, marks = hold
        stream = worker.torch.cuda.Stream(device=worker.device) if own_stream else None
        kernel(grid=(1, 1, 1), block=(1, 1, 1), args=[marks, which], stream=stream)


def _cache(worker: Any) -> dict[str, Any]:
    """What a worker measures or builds once for its perturbations (a copy's time, the holding kernel)."""
    return vars(worker).setdefault("perturb_cache", {})


def product_ms(worker: Any, a: Any, out: Any, stream: Any) -> float:
    """How long one product takes on this device (measured once per worker, on the load's stream)."""
    if worker.product_ms is None:
        worker.product_ms = _timed(worker.torch, stream, lambda: worker.torch.mm(a, a, out=out))
    return float(worker.product_ms)


def _timed(torch: Any, stream: Any, work: Any) -> float:
    """One run of `work` on `stream`, timed by events after a first run (which loads its kernel), in ms."""
    with torch.cuda.stream(stream):
        work()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        work()
        end.record(stream)
    end.synchronize()
    return max(start.elapsed_time(end), 1e-3)


def _products(worker: Any, spec: dict[str, Any], last_call_s: float, held: list[Any], stream: Any) -> Any:
    """Matrix products for about `factor` times the previous call, measured now and queued on `stream` when the
    returned function is called (after whatever else the stream must do first); it returns how many."""
    torch = worker.torch
    side = int(spec.get("side", 2048))
    with torch.cuda.stream(stream):
        a = torch.full((side, side), 1.0 / side, device=worker.device)
        out = torch.empty_like(a)
    held += [a, out]
    count = scaled_count(
        float(spec.get("factor", 3.0)), last_call_s, product_ms(worker, a, out, stream), MIN_PRODUCTS, MAX_PRODUCTS
    )

    def queue() -> int:
        with torch.cuda.stream(stream):
            for _ in range(count):
                torch.mm(a, a, out=out)
        return count

    return queue


def _load(worker: Any, spec: dict[str, Any], last_call_s: float, held: list[Any], streams: list[Any]) -> dict:
    stream = worker.torch.cuda.Stream(device=worker.device)
    streams.append(stream)
    return {"products": _products(worker, spec, last_call_s, held, stream)()}


def _reorder(worker: Any, spec: dict[str, Any], last_call_s: float, held: list[Any], streams: list[Any]) -> dict:
    flush_bytes = int(spec.get("flush_bytes", 0))
    flush = worker.flush_buffer(flush_bytes)
    if flush is not None:
        flush.zero_()
    cycles = bounded_cycles(worker.sleep_cycles(min(MAX_DELAY_MS, float(spec.get("delay_ms", 1.0)))))
    if cycles:
        worker.torch.cuda._sleep(cycles)
    return {"flushed_bytes": flush_bytes if flush is not None else 0, "delay_cycles": cycles}


def _copies(worker: Any, spec: dict[str, Any], last_call_s: float, held: list[Any], streams: list[Any]) -> dict:
    torch = worker.torch
    nbytes = min(MAX_COPY_BYTES, max(MIN_COPY_BYTES, int(spec["bytes"])))
    inner, inward = torch.cuda.Stream(device=worker.device), torch.cuda.Stream(device=worker.device)
    streams += [inner, inward]
    with torch.cuda.stream(inner):
        source = torch.ones(nbytes, dtype=torch.uint8, device=worker.device)
        target, landing = torch.empty_like(source), torch.empty_like(source)
    host = torch.ones(nbytes, dtype=torch.uint8, pin_memory=True)
    held += [source, target, landing, host]
    each_ms = _timed(torch, inner, lambda: target.copy_(source, non_blocking=True))
    count = scaled_count(float(spec.get("factor", 2.0)), last_call_s, each_ms, MIN_COPIES, MAX_COPIES)
    for _ in range(count):
        with torch.cuda.stream(inner):
            target.copy_(source, non_blocking=True)
        with torch.cuda.stream(inward):
            landing.copy_(host, non_blocking=True)
    return {"copies": count, "copy_bytes": nbytes}


def _hold(worker: Any, spec: dict[str, Any], last_call_s: float, held: list[Any], streams: list[Any]) -> dict:
    torch = worker.torch
    props = torch.cuda.get_device_properties(worker.device)
    sms = int(props.multi_processor_count)
    shared = int(getattr(props, "shared_memory_per_block_optin", 0) or 48 * 1024)
    cache = _cache(worker)
    if "hold_kernel" not in cache:  # compiled by NVRTC once per worker (torch's own runtime compiler)
        kernel = torch.cuda._compile_kernel(HOLD_SOURCE, "kj_sm_hold")
        kernel.set_shared_memory_config(shared)
        cache["hold_kernel"] = kernel
        cache["hold_mark"] = torch.cuda._compile_kernel(HOLD_SOURCE, "kj_hold_mark")
    blocks = hold_blocks(float(spec.get("share", 0.5)), sms)
    cycles = bounded_cycles(worker.sleep_cycles(hold_ms(float(spec.get("factor", 1.0)), last_call_s)))
    most = bounded_cycles(worker.sleep_cycles(MAX_HOLD_MS))
    stream = torch.cuda.Stream(device=worker.device)
    streams.append(stream)
    with torch.cuda.stream(stream):
        marks = torch.zeros(2, dtype=torch.int32, device=worker.device)
        zeroed = torch.cuda.Event()
        zeroed.record(stream)
    torch.cuda.current_stream(worker.device).wait_event(zeroed)  # no mark of the call's lands before the zeros
    held.append(marks)
    cache["hold_kernel"](
        grid=(blocks, 1, 1), block=(HOLD_THREADS, 1, 1), args=[marks, cycles, most], shared_mem=shared, stream=stream
    )
    cache["hold"] = (cache["hold_mark"], marks)  # marked by begin_call, released when the replay is over
    return {"blocks": blocks, "sms": sms, "hold_cycles": cycles}


def _stagger(worker: Any, spec: dict[str, Any], last_call_s: float, held: list[Any], streams: list[Any]) -> dict:
    torch = worker.torch
    gate, other = torch.cuda.Stream(device=worker.device), torch.cuda.Stream(device=worker.device)
    streams += [gate, other]
    delay_ms = min(MAX_DELAY_MS, float(spec.get("delay_ms", 0.5)))
    release_ms = delay_ms + min(MAX_HOLD_MS, float(spec.get("release", 0.5)) * last_call_s * 1e3)
    delay, release = bounded_cycles(worker.sleep_cycles(delay_ms)), bounded_cycles(worker.sleep_cycles(release_ms))
    products = _products(worker, spec, last_call_s, held, other)  # measured before anything is queued
    with torch.cuda.stream(other):
        if release:
            torch.cuda._sleep(release)
    count = products()
    with torch.cuda.stream(gate):
        if delay:
            torch.cuda._sleep(delay)
        opened = torch.cuda.Event()
        opened.record(gate)
    torch.cuda.current_stream(worker.device).wait_event(opened)  # the call's kernels queue behind the gate
    return {"delay_cycles": delay, "release_cycles": release, "products": count}


MAKERS = {
    "gpu_load": _load,
    "launch_order": _reorder,
    "copy_traffic": _copies,
    "sm_hold": _hold,
    "staggered_release": _stagger,
}
