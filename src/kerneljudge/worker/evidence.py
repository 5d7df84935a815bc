"""Runtime observations a worker gathers around imports and calls.

Everything here only observes and reports; the parent turns observations into
findings (kerneljudge.checks.runtime). The originals of the APIs a candidate
might patch are captured when this module is imported, before any task or
candidate code runs. A candidate can of course tamper with this module too:
that is why missing or malformed evidence counts against it in the parent, and
why no verdict rests on this evidence alone.
"""

from __future__ import annotations

import contextlib
import importlib
import json  # noqa: F401  (json.load reads the kernel trace: its identity is watched)
import os
import signal
import sys
import threading
import time
from typing import Any

import torch
import torch.profiler  # noqa: F401  (the profiler's identity is watched)

from kerneljudge.worker import prepare

# Dotted paths of APIs whose identity matters: timers, synchronisation, comparison, data movement.
WATCHED_APIS = (
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.time",
    "time.sleep",
    "torch.allclose",
    "torch.equal",
    "torch.isclose",
    "torch.testing.assert_close",
    "torch.Tensor.__eq__",
    "torch.Tensor.__sub__",
    "torch.Tensor.abs",
    "torch.Tensor.cpu",
    "torch.Tensor.to",
    "torch.Tensor.clone",
    "torch.Tensor.detach",
    "torch.Tensor.contiguous",
    "torch.Tensor.copy_",
    "torch.nn.Module.__call__",
    "torch.cuda.synchronize",
    "torch.cuda.Event.record",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize",
    "torch.cuda.current_stream",
    "torch.no_grad",
    "torch.manual_seed",
    "torch.profiler.profile",
    "torch.profiler.record_function",
    "torch.profiler.profile.export_chrome_trace",
    "json.load",
    "threading.Thread.start",
    "os._exit",
    "os.write",
)
# The worker's own path from a timed call's output to the copy the parent checks, and the check itself (H03 by
# tampering, H31: a candidate that rewrites the copy to compute the named call's output afresh: the red team's
# `kept_copy_forger`). Their functions and code objects are taken when the worker's modules are all imported,
# before any candidate code runs (`load_torch_wrappers`), and a `time` request's answer says which differ.
WORKER_PATHS = (
    "kerneljudge.protocol.wire.timed_set",
    "kerneljudge.worker.timing.timer.Timer.op_time",
    "kerneljudge.worker.timing.timer.Timer.asked_keep",
    "kerneljudge.worker.timing.timer.Timer.op_captured",
    "kerneljudge.worker.timing.timer.Timer.send_captured",
    "kerneljudge.worker.timing.timer.Timer.load_static",
    "kerneljudge.worker.timing.timer.Timer.graph_for",
    "kerneljudge.worker.evidence.replaced_apis",
    "kerneljudge.worker.evidence.digest",
    "kerneljudge.worker.evidence.digest_words",
    "kerneljudge.worker.evidence.digest_weights",
    "kerneljudge.worker.timing.timer.evidence",
    "kerneljudge.worker.timing.timer.timed_outputs",
    "kerneljudge.worker.seal.timed_outputs.not_plain",
    "kerneljudge.worker.seal.timed_outputs.unlike",
    "kerneljudge.worker.seal.timed_outputs.written_over",
    "kerneljudge.worker.seal.timed_outputs.call_spans",
    "kerneljudge.worker.seal.timed_outputs.items",
    "kerneljudge.worker.evidence.overlaps",
    "kerneljudge.worker.seal.timed_outputs.empty_alike",
    "kerneljudge.worker.timing.timer.sample_seal",
    "kerneljudge.worker.seal.sample.Seal.open_doors",
    "kerneljudge.worker.seal.sample.Seal.kernels_replaced",
    "kerneljudge.worker.seal.sample.Snapshot.changed",
    "kerneljudge.worker.seal.sample.process_state",
    "kerneljudge.worker.seal.sample.kernels",
    "kerneljudge.worker.seal.sample.same",
    "kerneljudge.worker.seal.sample.python_threads",
    "kerneljudge.worker.seal.sample.native_tasks",
    "kerneljudge.worker.seal.sample.read_keep",
    "kerneljudge.worker.seal.sample.committed_calls",
    "kerneljudge.worker.seal.sample._read_exact",
    "kerneljudge.worker.seal.sample.write_sampled",
    "kerneljudge.worker.seal.sample.copy_kept",
    "kerneljudge.worker.seal.commit.commit_digests",
    "kerneljudge.worker.seal.digest.digest",
    "kerneljudge.worker.seal.digest.stacked",
    "kerneljudge.worker.seal.digest.pending",
    "kerneljudge.worker.seal.digest.stacked_pending",
    "kerneljudge.worker.seal.digest.settled",
    "kerneljudge.worker.seal.digest_graphs.replayed",
    "kerneljudge.worker.seal.digest.sums",
    "kerneljudge.worker.seal.digest.fused_sums",
    "kerneljudge.worker.seal.digest_kernels.leaves",
    "kerneljudge.worker.seal.digest_kernels.levels",
    "kerneljudge.worker.seal.commit.write_committed",
    "kerneljudge.worker.timing.timer.sample_commit",
    "kerneljudge.worker.seal.sample.gc_off",
    "kerneljudge.worker.seal.sample.gc_back",
    "kerneljudge.worker.seal.sample.device_wait",
)
WATCHED_SIGNALS = ("SIGALRM", "SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2", "SIGCHLD", "SIGVTALRM", "SIGPROF")


def _lookup(path: str) -> Any:
    module_name, *attributes = path.split(".")
    obj: Any = sys.modules.get(module_name)
    for attribute in attributes:
        obj = getattr(obj, attribute, None)
    return obj


ORIGINALS = {path: _lookup(path) for path in WATCHED_APIS}
CODES: dict[str, Any] = {}  # the code objects of the watched functions of WORKER_PATHS


def take_worker_originals() -> None:
    """Take the worker's own watched functions and their code objects (WORKER_PATHS), its modules all imported."""
    for path in WORKER_PATHS:
        ORIGINALS[path] = _lookup(path)
        CODES[path] = getattr(ORIGINALS[path], "__code__", None)


def load_torch_wrappers() -> None:
    """Load torch._dynamo and take the originals again: in a candidate's worker before its code runs, in the
    reference's before its hello (its footprint's meta ops would import it, worker/prepare.py).

    The kernel trace uses torch.profiler, whose first use imports torch._dynamo, which wraps some torch
    functions (torch.manual_seed) as it loads; so does a candidate's own torch.compile. Loaded first,
    torch's own wrapping is not mistaken for the candidate's. Only workers on CUDA load it (a candidate's for
    its traces, the reference's for its footprint); on the CPU the import (Triton, sympy, some 900 modules) is
    seconds of a worker's start that it does not pay (benchmarks/worker_start.py). A thread begun as the worker
    started has imported it, or is importing it (worker/prepare.py): it is waited for here, and the originals
    taken again.
    """
    prepare.torch_wrappers_loaded()
    take_worker_originals()
    if torch.cuda.is_available():
        if "torch._dynamo" not in sys.modules:
            importlib.import_module("torch._dynamo")
        ORIGINALS.update({path: _lookup(path) for path in WATCHED_APIS})


ORIGINAL_SIGNALS = {name: signal.getsignal(getattr(signal, name)) for name in WATCHED_SIGNALS if hasattr(signal, name)}


def replaced_apis() -> list[str]:
    """The watched paths whose object is not the one taken first, or whose function's code was swapped."""
    found = []
    for path, original in ORIGINALS.items():
        current = _lookup(path)
        if current is not original or (path in CODES and getattr(current, "__code__", None) is not CODES[path]):
            found.append(path)
    return found


def numerics_flags() -> dict[str, Any]:
    return {
        "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "default_dtype": str(torch.get_default_dtype()).removeprefix("torch."),
        "autocast_cpu": bool(torch.is_autocast_enabled("cpu")),
        "autocast_cuda": bool(torch.is_autocast_enabled("cuda")),
        "grad_enabled": bool(torch.is_grad_enabled()),
    }


AUDIT_HOOKS = {"armed": False, "refused": 0}  # whether `refuse_audit_hooks` ran, and the attempts it refused


def refuse_audit_hooks() -> None:
    """From now on no audit hook can be added in this process (the hook this adds refuses each, and notes it): an
    audit hook runs on events the worker's own code raises (opening a file, reading a frame), at moments the
    candidate does not choose otherwise (worker/seal/sample.py). Taken once, before any candidate code runs."""
    if AUDIT_HOOKS["armed"]:
        return

    def refuse(event: str, args: tuple[Any, ...]) -> None:
        if event == "sys.addaudithook":
            AUDIT_HOOKS["refused"] += 1
            raise RuntimeError("kerneljudge: a worker takes no audit hooks")

    sys.addaudithook(refuse)
    AUDIT_HOOKS["armed"] = True


def hooks() -> list[str]:
    found = ["sys.addaudithook (refused)"] if AUDIT_HOOKS["refused"] else []
    if sys.gettrace() is not None:
        found.append("sys.settrace")
    if sys.getprofile() is not None:
        found.append("sys.setprofile")
    for name, original in ORIGINAL_SIGNALS.items():
        if signal.getsignal(getattr(signal, name)) is not original:
            found.append(f"signal handler {name}")
    return found


def python_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def thread_names(idents: set[int]) -> list[str]:
    """The names of the threads `idents` (the first eight): who started them, where a library names its own."""
    return sorted(t.name for t in threading.enumerate() if t.ident in idents)[:8]


def thread_kinds(idents: set[int]) -> list[str]:
    """The classes of the threads `idents` (module and name, the first eight): a library's service thread is
    of its own class (tqdm's monitor: tqdm._monitor.TMonitor), a plain one of threading.Thread."""
    return sorted(f"{type(t).__module__}.{type(t).__qualname__}" for t in threading.enumerate() if t.ident in idents)[
        :8
    ]


def native_tasks() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


# Taken before any candidate code can run: a candidate could replace them, and what it reports is read as its word.
_clock_gettime = time.clock_gettime
_current_stream = torch.cuda.current_stream
_set_stream = torch.cuda.set_stream
_cuda_stream = torch.cuda.stream
# A thread's name as its creator left it: torch's, CUDA's and LLVM's service threads name themselves. A name can be
# chosen by anyone, so a named thread is only recorded; what every thread does after a call returns is measured.
NATIVE_REPORTED = 16  # native threads named in one observation
BUSY_REPORT_MS = 0.5  # CPU time after a call's return below which a thread is not reported


def native_thread_ids() -> set[int]:
    """The kernel thread ids (TIDs) of this process's threads; empty where /proc cannot be read."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task") if t.isdigit()}
    except OSError:
        return set()


def thread_name(tid: int) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as handle:
            return handle.read(64).strip()
    except OSError:
        return "?"


def thread_cpu_s(tid: int) -> float | None:
    """The CPU time a thread of this process has used (its per-thread CPU clock, Linux: `(~tid << 3) | 6`), or
    None where it has ended or the clock cannot be read."""
    try:
        return _clock_gettime((~tid << 3) | 6)
    except (OSError, OverflowError, ValueError):
        return None


NATIVE_BASELINE = {"tids": native_thread_ids()}  # the threads alive before any candidate code ran


def take_native_baseline() -> None:
    """The native threads alive now count as the worker's own: taken once every pool the worker's work starts at
    first use is up (CUDA's threads in `warm_up`; torch's intra-op threads here, with a CPU operator that runs in
    parallel wherever the pool has more than one thread), before any candidate code runs."""
    if torch.get_num_threads() > 1:
        torch.ones(1 << 17).sum()  # past ATen's grain size: the intra-op pool's threads start now, not in a call
    NATIVE_BASELINE["tids"] = native_thread_ids()


def native_threads_added(before: set[int]) -> list[str]:
    """The names of native threads alive now that were not in `before` and that no `threading.Thread` runs (those
    are the Python threads of KJ-R010): threads that native code (the candidate's, or a library's) started."""
    python = {t.native_id for t in threading.enumerate() if t.native_id is not None}
    added = sorted(native_thread_ids() - before - python)
    return [thread_name(tid) for tid in added[:NATIVE_REPORTED]] + ["..."] * (len(added) > NATIVE_REPORTED)


class ThreadClocks:
    """Every thread's CPU clock from a call's return on: `busy` says which threads but the calling one used CPU
    since (a thread started since counts its whole time)."""

    def __init__(self, judges: set[int] | None = None) -> None:
        self.caller = threading.get_native_id()
        self.judges = set(judges or ())  # threads the judge's own instrumentation started (CallWatch.judge_threads)
        self.began = time.perf_counter()
        self.start = {tid: thread_cpu_s(tid) for tid in native_thread_ids()}

    def busy(self) -> dict[str, Any]:
        window_ms = (time.perf_counter() - self.began) * 1e3
        threads = []
        for tid in sorted(native_thread_ids() - {self.caller} - self.judges):
            now = thread_cpu_s(tid)
            if now is None:
                continue
            used_ms = (now - (self.start.get(tid) or 0.0)) * 1e3
            if used_ms >= BUSY_REPORT_MS:
                threads.append({"name": thread_name(tid), "cpu_ms": round(used_ms, 3), "new": tid not in self.start})
        threads.sort(key=lambda t: -t["cpu_ms"])
        return {"window_ms": round(window_ms, 3), "threads": threads[:NATIVE_REPORTED]}


def stream_now(device: Any) -> Any:
    """The current CUDA stream (of the current device) where `device` is CUDA, else None."""
    if getattr(device, "type", None) != "cuda" or not torch.cuda.is_available():
        return None
    return _current_stream()


def stream_record(stream: Any) -> dict[str, Any] | None:
    if stream is None:
        return None
    return {"id": int(stream.stream_id), "device": str(stream.device)}


class StreamWatch:
    """The current stream as a call (or a timed request) begins and as it returns; the stream it began on made
    current again where the call left another one (the worker's own work after the call runs on it)."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.entry = stream_now(device)
        self.left: Any = self.entry

    def returned(self) -> None:
        self.left = stream_now(self.device)
        if stream_record(self.left) != stream_record(self.entry):
            _set_stream(self.entry)

    def on_entry(self) -> Any:
        """A context in which work is queued on the stream the call was made on."""
        return _cuda_stream(self.entry)

    def record(self) -> dict[str, Any]:
        return {"before": stream_record(self.entry), "after": stream_record(self.left)}


def child_processes() -> list[int]:
    children: list[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as handle:
                children += [int(pid) for pid in handle.read().split()]
    except OSError:
        pass
    return children


def storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def live_spans(tensors: list[Any]) -> list[tuple[int, int]]:
    """The storage spans of the tensors that can still be read: torch.compile's CUDA graphs refuse any use
    of an output a later run has overwritten (RuntimeError), and no one can hand that one back either."""
    spans = []
    for t in tensors:
        if isinstance(t, torch.Tensor):
            try:
                spans.append(storage_span(t))
            except RuntimeError:
                continue
    return spans


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[0] != a[1] and b[0] != b[1]


DIGEST_BYTES = 1 << 26  # bytes per piece of a digest: its temporaries stay a few hundred MiB on any tensor


def digest(t: torch.Tensor) -> tuple[int, ...]:
    """A fingerprint of a tensor's bytes, computed where it lies, in pieces: two sums of its 32-bit words
    (bytes, for an odd size) each times an odd weight that depends on the position, wrapping at 2**64.

    Any change of a single word changes both sums (an odd weight is invertible modulo 2**64); changes that
    cancel must be made on purpose, by code in this process, which could as well replace this function.
    A copy of every input and output for bitwise comparison doubled a worker's memory: 12 GiB more on
    KernelBench's 6 GiB elementwise tasks.
    """
    words = digest_words(t)
    sums = [0, 0]
    step = DIGEST_BYTES // words.element_size()
    for start in range(0, words.numel(), step):
        piece = words[start : start + step].to(torch.int64)
        index = torch.arange(start, start + piece.numel(), device=piece.device, dtype=torch.int64)
        first, second = digest_weights(index)
        sums[0] += int((piece * first).sum())
        sums[1] += int((piece * second).sum())
    return (t.numel() * t.element_size(), str(t.dtype), *(s % 2**64 for s in sums))


def digest_words(t: torch.Tensor) -> torch.Tensor:
    """A tensor's bytes as `digest` reads them: 32-bit words, or bytes where their number is odd."""
    flat = t.detach().reshape(-1)
    raw = flat.contiguous().view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)
    return raw.view(torch.int32) if raw.numel() % 4 == 0 else raw


def digest_weights(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The two odd weights of `digest`'s sums at word positions `index` (int64)."""
    return index * 2 + 1, (index * 0x9E3779B1) | 1


class CallWatch:
    """Observations around one call: threads, processes, flags, hooks, APIs, inputs, outputs."""

    def __init__(self, inputs: list[Any], pinned_flags: dict[str, Any], device: Any = None) -> None:
        self.pinned_flags = pinned_flags
        self.device = device
        self.inputs = [x for x in inputs if isinstance(x, torch.Tensor)]
        self.input_digests = [digest(x) for x in self.inputs]
        self.threads_before = python_threads()
        self.tasks_before = native_tasks()
        self.tids_before = native_thread_ids()
        self.children_before = set(child_processes())
        self.streams: StreamWatch | None = None
        self.clocks: ThreadClocks | None = None
        self.judges: set[int] = set()
        # The judge's own host-side work goes on past the return (protocol.limits.HOST_BUSY_KINDS).
        self.host_busy = False

    def judge_threads(self, tids: set[int]) -> None:
        """The native threads the judge's own work around this call started (the kernel trace's profiler, a
        perturbed replay's streams, pinned buffers and compiled kernel; worker/candidate.py takes them between
        this watch's start and the call): the worker's, not the candidate's, for KJ-R012. CUDA's and CUPTI's
        service threads are unnamed ("python3") and start on first use, so a name cannot tell them apart."""
        tids = tids - self.tids_before
        NATIVE_BASELINE["tids"] |= tids  # and at a later load's evidence too
        self.judges |= tids
        self.tids_before |= tids
        self.tasks_before += len(tids)

    def calling(self) -> None:
        """Just before the call: the current stream it is made on."""
        self.streams = StreamWatch(self.device)

    def returned(self) -> None:
        """Just after the call returned: the stream it left current (the entry one made current again), and
        every thread's CPU clock from now on."""
        if self.streams is not None:
            self.streams.returned()
        self.clocks = None if self.host_busy else ThreadClocks(self.judges)

    def on_entry(self) -> Any:
        """A context that queues work on the stream the call was made on."""
        return self.streams.on_entry() if self.streams is not None else contextlib.nullcontext()

    def after(
        self, outputs: list[Any], previous_outputs: list[Any], synchronize: Any, reread_delay_s: float
    ) -> dict[str, Any]:
        tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
        # Digests on the current stream read what that stream sees (they synchronise with it to return);
        # read again once the whole device is idle, a difference is work that was still running elsewhere.
        snapshots = [digest(o) for o in tensors]
        time.sleep(reread_delay_s)
        synchronize()
        changed = [i for i, (o, s) in enumerate(zip(tensors, snapshots, strict=True)) if digest(o) != s]
        input_spans = [storage_span(x) for x in self.inputs]
        previous_spans = live_spans(previous_outputs)
        flags = numerics_flags()
        return {
            "changed_after_return": changed,
            "inputs_mutated": [
                i for i, (x, d) in enumerate(zip(self.inputs, self.input_digests, strict=True)) if digest(x) != d
            ],
            "aliases_input": [
                i for i, o in enumerate(tensors) if any(overlaps(storage_span(o), s) for s in input_spans)
            ],
            "aliases_previous_output": [
                i for i, o in enumerate(tensors) if any(overlaps(storage_span(o), s) for s in previous_spans)
            ],
            "threads_started": len(python_threads() - self.threads_before),
            "thread_names": thread_names(python_threads() - self.threads_before),
            "thread_kinds": thread_kinds(python_threads() - self.threads_before),
            "native_tasks_added": native_tasks() - self.tasks_before,
            "native_threads": native_threads_added(self.tids_before),
            "busy_after_return": self.clocks.busy() if self.clocks is not None else None,
            "streams": self.streams.record() if self.streams is not None else None,
            "children": sorted(set(child_processes()) - self.children_before),
            "flags_changed": {k: v for k, v in flags.items() if self.pinned_flags.get(k) != v},
            "hooks": hooks(),
            "apis_replaced": replaced_apis(),
        }


def import_evidence(pinned_flags: dict[str, Any], threads_before: set[int]) -> dict[str, Any]:
    """Observations after the candidate was imported and built."""
    flags = numerics_flags()
    return {
        "threads_started": len(python_threads() - threads_before),
        "thread_names": thread_names(python_threads() - threads_before),
        "thread_kinds": thread_kinds(python_threads() - threads_before),
        "native_threads": native_threads_added(NATIVE_BASELINE["tids"]),
        "children": child_processes(),
        "flags_changed": {k: v for k, v in flags.items() if pinned_flags.get(k) != v},
        "hooks": hooks(),
        "apis_replaced": replaced_apis(),
    }
