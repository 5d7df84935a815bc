"""Entry point of a worker process: ``python -m kerneljudge.worker.main``.

A worker serves one role for one judgment. The reference role loads the trusted
task, makes inputs from seeds and computes the reference and float64-oracle
outputs; it never sees candidate code. The candidate role imports the untrusted
candidate and runs it on inputs the parent sends. Either way the worker only
reports observations (tensors, shapes, times, exceptions); every decision is the
parent's. Once a candidate is imported, anything in this process may have been
replaced, which is why nothing here is trusted by the parent.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import traceback
from typing import Any

from kerneljudge.worker import evidence, family, trace, wire

TEXT_CAP = 4096
TRACE_CAP = 16384


def pin_flags(torch: Any) -> None:
    """Pin numerics flags the same way in every worker, before any task or candidate code runs."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def describe_exception(phase: str, exc: BaseException) -> dict[str, Any]:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {
        "type": "error",
        "phase": phase,
        "exc_type": type(exc).__name__,
        "exc_module": type(exc).__module__,
        "message": str(exc)[:TEXT_CAP],
        "traceback": text[-TRACE_CAP:],
    }


def load_module(path: str, name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def reshape_distribution(torch: Any, inputs: list[Any], variant: dict[str, Any], seed: int) -> list[Any]:
    """The task's floating-point inputs under another distribution (H11): scaled, shifted or heavy-tailed."""
    generator = torch.Generator().manual_seed(seed ^ 0x5EED)
    out = []
    for x in inputs:
        if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel()):
            out.append(x)
            continue
        wide = x.double()
        if variant["kind"] == "scaled":
            wide = wide * float(variant["factor"])
        elif variant["kind"] == "shifted":
            spread = float(wide.std()) if wide.numel() > 1 else 1.0
            wide = wide + float(variant["offset"]) * (spread or 1.0)
        elif variant["kind"] == "heavy_tailed":
            tails = torch.randn(x.shape, generator=generator, dtype=torch.float64)
            wide = wide * torch.exp(float(variant["sigma"]) * tails)
        strides = wire.layout(x)  # a strided input keeps the task's layout
        out.append(wide.to(x.dtype) if strides is None else wire.placed(wide.to(x.dtype), strides=strides))
    return out


def profiler_range(torch: Any, start: bool) -> None:
    """cudaProfilerStart/Stop: `ncu --profile-from-start off` then profiles only what lies between."""
    try:
        runtime = torch.cuda.cudart()
        if start:
            runtime.cudaProfilerStart()
        else:
            runtime.cudaProfilerStop()
    except Exception:  # no profiler API in this build: the bracket is a convenience, never evidence
        pass


def describe_output(torch: Any, out: Any) -> dict[str, Any]:
    """What a call returned, item by item, for the parent's structural checks (checks/outputs.py)."""
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    return {
        "container": type(out).__name__,
        "items": [
            {
                "type": f"{type(x).__module__}.{type(x).__qualname__}",
                "plain_tensor": type(x) is torch.Tensor,
                "dtype": str(x.dtype).removeprefix("torch.") if isinstance(x, torch.Tensor) else None,
                "shape": list(x.shape) if isinstance(x, torch.Tensor) else None,
                "device": str(x.device) if isinstance(x, torch.Tensor) else None,
            }
            for x in items
        ],
    }


def clone_output(torch: Any, value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(clone_output(torch, v) for v in value)
    return value.clone() if isinstance(value, torch.Tensor) else value


def rounded_like(torch: Any, oracle: Any, out: Any) -> Any:
    """The oracle's floating-point outputs rounded to the dtypes of the reference's: the best answers
    representable there, which is all the parent compares with (checks/correctness.py); a float64 oracle of
    a bf16 output travels in a quarter of the bytes."""
    if isinstance(oracle, (tuple, list)) and isinstance(out, (tuple, list)) and len(oracle) == len(out):
        return type(oracle)(rounded_like(torch, o, r) for o, r in zip(oracle, out, strict=True))
    if (
        isinstance(oracle, torch.Tensor)
        and isinstance(out, torch.Tensor)
        and oracle.is_floating_point()
        and out.is_floating_point()
    ):
        return oracle.to(out.dtype)
    return oracle


def all_finite(torch: Any, value: Any) -> bool:
    if value is None:
        return True
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    return all(bool(torch.isfinite(t).all()) for t in items if isinstance(t, torch.Tensor) and t.is_floating_point())


class Worker:
    def __init__(self, role: str, device: str, source: str, req_fd: int, resp_fd: int) -> None:
        import torch

        self.torch = torch
        self.role = role
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
            if device == "cpu":
                os.environ["TRITON_INTERPRET"] = "1"  # read by triton.jit when the candidate is imported
        self.device = torch.device(device)
        if self.device.type == "cpu":
            # One intra-op thread: the two workers alternate, and idle OpenMP threads of one spinning while
            # the other is timed made CPU timings swing by whole scheduler slices (4 ms on this machine).
            torch.set_num_threads(1)
        self.source = source
        self.req_fd = req_fd
        self.resp_fd = resp_fd
        self.module: Any = None
        self.model: Any = None
        self.oracle: Any = None
        self.oracle_dtype: str | None = None
        pin_flags(torch)
        self.pinned_flags = evidence.numerics_flags()
        self.flush: Any = None  # the L2-flush buffer, kept between timing requests
        self.compiled: Any = None  # the model under torch.compile, once `compile` has run
        self.staged: list[Any] = []  # the timing pool, sent once (`stage`) and named by `time` requests
        self.cycles_per_ms: float | None = None  # GPU sleep cycles per millisecond, measured once
        self.cudart: Any = None  # the CUDA runtime library, opened once (persisting-L2 reset)
        self.graphs: dict[tuple[bool, int, int], Any] = {}  # CUDA graphs of timed samples (`graph_for`)
        self.prev_inputs: list[Any] = []
        self.prev_outputs: list[Any] = []
        self.family: dict[str, Any] = {}  # the task's shape family as described to the parent (reference role)
        self.family_error: str | None = None
        self.shaped = False  # the task's globals are set to a hidden shape of its family
        self.warm_up()
        self.threads_baseline = evidence.python_threads()

    # ------------------------------------------------------------ plumbing

    def send(self, header: dict[str, Any], tensors: dict[str, Any] | None = None) -> None:
        wire.write_frame(self.resp_fd, header, wire.encode_tensors(tensors or {}))

    def serve(self) -> None:
        self.send(self.hello())
        while True:
            header, blob = wire.read_frame(self.req_fd, max_blob_bytes=1 << 62)
            op = header.get("op")
            if op == "exit":
                return
            handler = getattr(self, f"op_{op}", None)
            if handler is None:
                self.send(
                    {
                        "type": "error",
                        "phase": "protocol",
                        "exc_type": "UnknownOp",
                        "exc_module": "kerneljudge",
                        "message": f"unknown op {op!r}",
                        "traceback": "",
                    }
                )
                continue
            args = wire.unpack_values(header.get("args", []), wire.decode_tensors(blob))
            handler(header, args)

    def set_seed(self, seed: int) -> None:
        self.torch.manual_seed(seed)
        if self.device.type == "cuda":
            self.torch.cuda.manual_seed_all(seed)

    def to_device(self, values: list[Any]) -> list[Any]:
        """Values on this worker's device, a strided tensor keeping its layout (a plain move would not)."""
        torch = self.torch
        return [
            (wire.placed(v, self.device) if wire.layout(v) else v.to(self.device)) if isinstance(v, torch.Tensor) else v
            for v in values
        ]

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def stream_synchronize(self) -> None:
        """Wait for the current stream only: work left on other streams is still running (H20)."""
        if self.device.type == "cuda":
            self.torch.cuda.current_stream(self.device).synchronize()

    def warm_up(self) -> None:
        """Start torch's own thread pools and the CUDA context now, so the census sees only the candidate's."""
        if self.device.type == "cuda" and not self.torch.cuda.is_available():
            return  # the parent reports the missing device; the hello must still go out
        x = self.torch.ones(64, 64, device=self.device)
        (x @ x).sum().item()
        self.synchronize()

    def poison(self, nbytes: int) -> None:
        """Fill memory the allocator will hand out next with NaN, so unwritten output cannot look plausible."""
        if nbytes > 0:
            junk = self.torch.full((nbytes // 4 + 1,), float("nan"), device=self.device)
            del junk

    def hello(self) -> dict[str, Any]:
        torch = self.torch
        info: dict[str, Any] = {
            "type": "hello",
            "role": self.role,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(),
            "device": str(self.device),
            "flags": evidence.numerics_flags(),
        }
        if torch.cuda.is_available():
            index = self.device.index if self.device.type == "cuda" and self.device.index is not None else 0
            props = torch.cuda.get_device_properties(index)
            info["gpu_name"] = props.name
            info["gpu_capability"] = f"{props.major}.{props.minor}"
            info["gpu_memory_bytes"] = int(props.total_memory)
            info["gpu_count"] = torch.cuda.device_count()
            info["l2_cache_bytes"] = int(getattr(props, "L2_cache_size", 0))
            info["gpu_uuid"] = str(getattr(props, "uuid", "")) or None  # the parent finds the GPU in NVML by it
        try:  # the version without importing triton, which costs seconds
            from importlib.metadata import version

            info["triton"] = version("triton")
        except Exception:  # triton is optional; absent or unreadable means "not available"
            info["triton"] = None
        return info

    # ------------------------------------------------------------ both roles

    def op_load(self, header: dict[str, Any], args: Any) -> None:
        """Import the source (once) and build the model after the public seed (KernelBench's convention).

        A later `load` builds the model again without importing: the reference at the hidden shape that
        `shape` names (its family's globals set first, worker/family.py), the candidate from the init
        inputs sent with it. The reference's first answer describes the task's shape family.
        """
        torch = self.torch
        seed = int(header["seed"])
        if self.module is None:
            try:
                self.module = load_module(self.source, "kj_" + self.role)
            except BaseException as exc:  # a SystemExit or KeyboardInterrupt raised by import is a result too
                self.send(describe_exception("import", exc))
                return
            if self.role == "reference":
                try:
                    self.family = family.describe(self.module)
                except family.FamilyError as exc:  # the parent decides what a malformed family costs
                    self.family, self.family_error = {}, str(exc)[:TEXT_CAP]
        self.model = self.oracle = self.compiled = None
        self.oracle_dtype = None
        self.graphs, self.prev_inputs, self.prev_outputs = {}, [], []
        try:
            if self.role == "reference":
                if header.get("shape") is not None or self.shaped:  # a hidden shape, or back to the public one
                    family.apply(self.module, header.get("shape") or {}, self.family.get("public", {}))
                    self.shaped = header.get("shape") is not None
                self.set_seed(seed)
                init_inputs = list(self.module.get_init_inputs())
                cls = self.module.Model
            else:
                init_inputs = list(args)
                cls = getattr(self.module, "ModelNew", None)
                if cls is None:
                    raise AttributeError("the candidate defines no ModelNew")
            with torch.no_grad():
                self.set_seed(seed)
                self.model = cls(*self.to_device(init_inputs))
                if hasattr(self.model, "to"):
                    self.model = self.model.to(self.device)
                if hasattr(self.model, "eval"):
                    self.model.eval()
            self.synchronize()
        except BaseException as exc:
            self.send(describe_exception("init", exc))
            return
        tree, tensors = wire.pack_values(init_inputs if self.role == "reference" else [])
        observed = evidence.import_evidence(self.pinned_flags, self.threads_baseline)
        # The reference's size, for task screening (a candidate's own figures would not be trusted anyway).
        reference = self.role == "reference" and hasattr(self.model, "parameters")
        parameters = list(self.model.parameters()) if reference else []
        loaded: dict[str, Any] = {
            "type": "loaded",
            "init_inputs": tree,
            "evidence": observed,
            "parameter_count": sum(p.numel() for p in parameters),
            "parameter_bytes": sum(p.numel() * p.element_size() for p in parameters),
        }
        if self.role == "reference":
            loaded |= {"family": self.family, "family_error": self.family_error}
        self.send(loaded, tensors)

    def op_time(self, header: dict[str, Any], args: Any) -> None:
        """Time `calls` consecutive forwards per sample; report per-call milliseconds.

        `args` is a pool of input sets; call i of sample s uses set `wire.timed_set(s, i, len(pool))`, so
        consecutive calls see different inputs. With `capture` = [s, i] the output of that call is kept
        (a reference, no copy inside the timed region) and sent back for the parent to check. On CUDA,
        `precursor_ms` > 0 puts a GPU sleep of that length before each sample's start event, so the GPU
        is still busy while the host issues the sample's calls; `host_ms` reports how long each issue took.
        `graph` replays a CUDA graph of the sample's calls instead of issuing them (`graph_for`); the graph
        keeps the output of call `graph_keep`, so `capture` must name that call.
        `compiled` times the torch.compile'd model (reference role); `method` "do_bench" asks Triton.
        """
        torch = self.torch
        calls, samples, warmup = int(header["calls"]), int(header["samples"]), int(header["warmup"])
        pool = self.staged if header.get("staged") else [self.to_device(list(inputs)) for inputs in args]
        model = self.compiled if header.get("compiled") else self.model
        if model is None:
            self.send(describe_exception("time", RuntimeError("no compiled model: send `compile` first")))
            return
        capture = header.get("capture")
        cuda = self.device.type == "cuda"
        flush = self.flush_buffer(int(header.get("flush_bytes", 0)))  # before the samples, not in them
        l2_reset = self.reset_persisting_l2() if cuda else None
        # Bracket the measured samples for `ncu --profile-from-start off` (no-ops without a profiler attached).
        bracket = bool(header.get("profile_range")) and cuda
        captured: Any = None
        times_ms: list[float] = []
        host_ms: list[float] = []
        busy_ms: list[float] = []

        def run_sample(s: int) -> Any:
            nonlocal captured
            keep = int(capture[1]) if capture is not None and s == int(capture[0]) else -1
            for i in range(calls):
                out = model(*pool[wire.timed_set(s, i, len(pool))])
                if i == keep:
                    captured = out

        try:
            with torch.no_grad():
                if header.get("method") == "do_bench":
                    from triton.testing import do_bench  # Triton's defaults, as published figures use them

                    self.send({"type": "timed", "times_ms": [float(do_bench(lambda: model(*pool[0])))]})
                    return
                graph = None
                if header.get("graph") and cuda:
                    keep = int(header.get("graph_keep", -1))  # `capture` then names a sample of that call
                    try:
                        graph, static, kept = self.graph_for(model, bool(header.get("compiled")), pool, calls, keep)
                    except BaseException as exc:
                        self.send({**describe_exception("graph", exc), "type": "graph_unsupported"})
                        return
                else:
                    for _ in range(warmup):
                        model(*pool[0])
                self.synchronize()
                if cuda:
                    cycles = self.sleep_cycles(float(header.get("precursor_ms", 0.0)))
                    events = []
                    for s in range(samples):
                        if graph is not None:  # the sample's inputs into the graph's buffers, untimed
                            self.load_static(static, pool, s)
                        busy = torch.cuda.Event(enable_timing=True)
                        start = torch.cuda.Event(enable_timing=True)
                        end = torch.cuda.Event(enable_timing=True)
                        if flush is not None:
                            flush.zero_()  # evict L2 before the sample, outside the event pair
                        busy.record()
                        if cycles:
                            torch.cuda._sleep(cycles)
                        if bracket:
                            profiler_range(torch, True)
                        t0 = time.perf_counter_ns()
                        start.record()
                        if graph is not None:
                            graph.replay()
                        else:
                            run_sample(s)
                        end.record()
                        host_ms.append((time.perf_counter_ns() - t0) / 1e6)
                        if bracket:
                            profiler_range(torch, False)
                        if graph is not None and capture is not None and s == int(capture[0]):
                            captured = clone_output(torch, kept)  # after the end event; the next replay reuses it
                        events.append((busy, start, end))
                    self.synchronize()
                    times_ms = [s.elapsed_time(e) / calls for _, s, e in events]
                    busy_ms = [b.elapsed_time(s) for b, s, _ in events]
                    if cycles:  # keep the sleep's length true to the request (clocks differ from the probe's)
                        self.cycles_per_ms = cycles / max(sorted(busy_ms)[len(busy_ms) // 2], 1e-3)
                else:
                    for s in range(samples):
                        t0 = time.perf_counter_ns()
                        run_sample(s)
                        host_ms.append((time.perf_counter_ns() - t0) / 1e6)
                        times_ms.append(host_ms[-1] / calls)
        except BaseException as exc:
            self.send(describe_exception("time", exc))
            return
        header_out: dict[str, Any] = {
            "type": "timed",
            "times_ms": times_ms,
            "host_ms": host_ms,
            "busy_ms": busy_ms,  # how long each sample's precursor kept the GPU busy (CUDA events)
            "l2_reset": l2_reset,
        }
        if capture is None:
            self.send(header_out)
            return
        self.send_captured(header_out, captured)

    def send_captured(self, header_out: dict[str, Any], captured: Any) -> None:
        """Send a response with one call's output described and, where it is plain tensors, attached."""
        described = describe_output(self.torch, captured)
        header_out.update(described)
        if not all(d["plain_tensor"] for d in described["items"]):
            self.send(header_out)
            return
        items = list(captured) if isinstance(captured, (tuple, list)) else [captured]
        tree, tensors = wire.pack_values(items)
        self.send({**header_out, "captured": tree}, tensors)

    def op_recheck(self, header: dict[str, Any], args: Any) -> None:
        """After a graph's replays, one plain call on the graph's own buffer `buffer`, its output sent back.

        Each pool set is first copied back into its own buffer, the arrangement of the capture, which no
        replay uses: a candidate that answers from what it kept of earlier calls (its last answer, or a
        cache keyed on the buffer's storage) answers for other contents than the buffer holds now.
        """
        torch = self.torch
        key = (bool(header.get("compiled")), int(header["calls"]), int(header["graph_keep"]))
        model = self.compiled if header.get("compiled") else self.model
        if key not in self.graphs or model is None:
            self.send(describe_exception("time", RuntimeError("no CUDA graph to recheck: time with `graph` first")))
            return
        _, static, _ = self.graphs[key]
        try:
            with torch.no_grad():
                self.fill_static(static, self.staged)
                out = model(*static[int(header["buffer"])])
                self.synchronize()
        except BaseException as exc:
            self.send(describe_exception("time", exc))
            return
        self.send_captured({"type": "rechecked"}, out)

    def graph_for(self, model: Any, compiled: bool, pool: list[Any], calls: int, keep: int) -> tuple[Any, Any, Any]:
        """A CUDA graph of one sample's `calls` calls, captured once per (model, calls, kept call).

        The graph reads copies of the pool's sets (`static`, call i the copy of set i mod len(pool)); before
        each replay `load_static` writes that sample's sets into them. The warm-up and the capture see set 0
        in place, every replay other contents, so a graph that replays stale work (an output computed at
        capture time) returns wrong outputs. The output of call `keep` is kept for the parent's check.
        """
        key = (compiled, calls, keep)
        if key in self.graphs:
            return self.graphs[key]
        torch = self.torch
        if not self.staged:
            raise RuntimeError("a CUDA graph needs the staged timing pool")
        for position in range(len(pool[0])):
            leaves = [inputs[position] for inputs in pool]
            if not isinstance(leaves[0], torch.Tensor) and any(leaf != leaves[0] for leaf in leaves):
                raise RuntimeError("the input sets differ in a value that is not a tensor; a graph would fix it")
        static = [[wire.placed(t) if isinstance(t, torch.Tensor) else t for t in inputs] for inputs in pool]
        side = torch.cuda.Stream()  # warm up off the default stream, as graph capture wants
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(*static[0])
        torch.cuda.current_stream().wait_stream(side)
        self.synchronize()
        graph = torch.cuda.CUDAGraph()
        kept: Any = None
        with torch.cuda.graph(graph):
            for i in range(calls):
                out = model(*static[i % len(static)])
                if i == keep:
                    kept = out
        self.synchronize()
        self.graphs[key] = (graph, static, kept)
        return self.graphs[key]

    def load_static(self, static: list[Any], pool: list[Any], sample: int) -> None:
        """Copy sample `sample`'s input sets into the graph's buffers: buffer m holds the set that calls
        m, m + len(pool), ... of that sample use (`wire.timed_set`)."""
        self.fill_static(static, [pool[wire.timed_set(sample, m, len(pool))] for m in range(len(static))])

    def fill_static(self, static: list[Any], sources: list[Any]) -> None:
        """Copy input set `sources[m]` into the graph's buffer m, tensor by tensor."""
        for buffers, source in zip(static, sources, strict=True):
            for buffer, value in zip(buffers, source, strict=True):
                if isinstance(buffer, self.torch.Tensor):
                    buffer.copy_(value)

    def op_stage(self, header: dict[str, Any], args: Any) -> None:
        """Keep a pool of input sets on the device for the `time` requests that name it (`staged`)."""
        try:
            self.staged = [self.to_device(list(inputs)) for inputs in args]
            self.graphs = {}
            self.synchronize()
        except BaseException as exc:
            self.send(describe_exception("time", exc))
            return
        self.send({"type": "staged", "sets": len(self.staged)})

    def op_compile(self, header: dict[str, Any], args: Any) -> None:
        """Build the torch.compile'd model and run it once on the inputs, so compilation is never timed."""
        torch = self.torch
        try:
            inputs = self.to_device(list(args))
            with torch.no_grad():
                self.compiled = torch.compile(self.model)
                self.compiled(*inputs)
            self.synchronize()
        except BaseException as exc:
            self.compiled = None
            self.send(describe_exception("compile", exc))
            return
        self.send({"type": "compiled"})

    def sleep_cycles(self, precursor_ms: float) -> int:
        """GPU clock cycles of `torch.cuda._sleep` that last about `precursor_ms`, from one measurement."""
        if precursor_ms <= 0:
            return 0
        if self.cycles_per_ms is None:
            torch = self.torch
            probe = 2_000_000
            for _ in range(2):  # the first also loads the kernel
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                torch.cuda._sleep(probe)
                end.record()
                end.synchronize()
            self.cycles_per_ms = probe / max(start.elapsed_time(end), 1e-3)
        return int(precursor_ms * self.cycles_per_ms)

    def reset_persisting_l2(self) -> bool:
        """Return every persisting L2 line to normal (cudaCtxResetPersistingL2Cache); False if unavailable."""
        import ctypes

        try:
            if self.cudart is None:
                major = str(self.torch.version.cuda).split(".")[0]
                self.cudart = ctypes.CDLL(f"libcudart.so.{major}")  # torch has loaded it: dlopen returns that copy
            self.synchronize()
            return self.cudart.cudaCtxResetPersistingL2Cache() == 0
        except Exception:
            return False

    def flush_buffer(self, nbytes: int) -> Any:
        """A device buffer of `nbytes` to overwrite before each sample (L2 flush); kept between requests."""
        if nbytes <= 0 or self.device.type != "cuda":
            return None
        if self.flush is None or self.flush.numel() != nbytes:
            self.flush = self.torch.empty(nbytes, dtype=self.torch.int8, device=self.device)
        return self.flush

    # ------------------------------------------------------------ reference role

    def op_trial(self, header: dict[str, Any], args: Any) -> None:
        """Make inputs from a seed, run the reference natively and in float64 (the oracle).

        `train`: run the model in training mode, nn.Module's default, which KernelBench's harness keeps
        (task screening asks whether a reference is stochastic there); the worker's own mode is eval.
        `rng_seed`: reseed after making the inputs, so that the model's own random ops (dropout) draw
        from another state than the inputs left.
        """
        torch = self.torch
        seed = int(header["seed"])
        variant = header.get("variant") or {"kind": "standard"}
        train = bool(header.get("train")) and hasattr(self.model, "train")
        if train:
            self.model.train()
        try:
            self.set_seed(seed)
            inputs = list(self.module.get_inputs())
            if header.get("rng_seed") is not None:
                self.set_seed(int(header["rng_seed"]))
            oracle = bool(header.get("oracle", True))
            reference = None
            if variant["kind"] != "standard":
                varied = reshape_distribution(torch, inputs, variant, seed)
                result = self.run_reference(varied, oracle)
                if all_finite(torch, result[0]) and all_finite(torch, result[2]):
                    inputs, reference = varied, result
                else:  # the task does not allow this distribution: its own output is not finite
                    variant = {**variant, "rejected": "the reference's output is not finite on these inputs"}
            if reference is None:
                reference = self.run_reference(inputs, oracle)
        except BaseException as exc:
            self.send(describe_exception("reference", exc))
            return
        finally:
            if train:
                self.model.eval()
        out, observed, oracle_out = reference
        tree, tensors = wire.pack_values([inputs, out, oracle_out])
        reference_evidence = {k: observed[k] for k in ("inputs_mutated", "aliases_input")}
        self.send(
            {
                "type": "trial",
                "values": tree,
                "oracle_dtype": self.oracle_dtype,
                "evidence": reference_evidence,
                "variant": variant,
            },
            tensors,
        )

    def run_reference(self, inputs: list[Any], oracle: bool) -> tuple[Any, dict[str, Any], Any]:
        """The reference's output on private copies of the inputs, what it did to them, and the oracle's output."""
        torch = self.torch
        # Private copies: an in-place task must not change the inputs the candidate will get.
        device_inputs = [wire.placed(x, self.device) if isinstance(x, torch.Tensor) else x for x in inputs]
        watch = evidence.CallWatch(device_inputs, self.pinned_flags)
        with torch.no_grad():
            out = self.model(*device_inputs)
            self.synchronize()
            items = list(out) if isinstance(out, (tuple, list)) else [out]
            observed = watch.after(items, [], self.synchronize, 0.0)
            oracle_out = rounded_like(torch, self.run_oracle(inputs), out) if oracle else None
        return out, observed, oracle_out

    def run_oracle(self, inputs: list[Any]) -> Any:
        import copy

        torch = self.torch
        last_error: BaseException | None = None
        for dtype in (torch.float64, torch.float32):
            if self.oracle is not None and self.oracle_dtype != str(dtype).removeprefix("torch."):
                continue
            try:
                if self.oracle is None:
                    model = copy.deepcopy(self.model)
                    self.oracle = model.to(dtype) if hasattr(model, "to") else model
                    self.oracle_dtype = str(dtype).removeprefix("torch.")
                cast = [
                    x.to(self.device, dtype)
                    if isinstance(x, torch.Tensor) and x.is_floating_point()
                    else (x.to(self.device) if isinstance(x, torch.Tensor) else x)
                    for x in inputs
                ]
                out = self.oracle(*cast)
                self.synchronize()
                return out
            except Exception as exc:  # an op without float64 support: fall back to float32, TF32 off
                last_error = exc
                self.oracle = None
                self.oracle_dtype = None
        raise RuntimeError(f"the reference cannot run as an oracle: {last_error}")

    # ------------------------------------------------------------ candidate role

    def reuse_storage(self, inputs: list[Any]) -> list[Any]:
        """A canary: the new values copied into the previous call's input tensors (same storage)."""
        torch = self.torch
        if len(self.prev_inputs) != len(inputs):
            return inputs
        reused = []
        for old, new in zip(self.prev_inputs, inputs, strict=True):
            if (
                isinstance(new, torch.Tensor)
                and isinstance(old, torch.Tensor)
                and old.shape == new.shape
                and old.dtype == new.dtype
                and old.stride() == new.stride()
                and (old.is_contiguous() or wire.layout(old) is not None)
            ):
                old.copy_(new)
                reused.append(old)
            else:
                reused.append(new)
        return reused

    def op_call(self, header: dict[str, Any], args: Any) -> None:
        """Run the candidate once on private device copies of the inputs and report the output.

        With `trace` set (on CUDA) the call, the wait for its stream and the judge's own
        evidence work run under the profiler, each in a named range, and the kernel
        events go back with the output.
        """
        torch = self.torch
        inputs = self.to_device(list(args))
        if header.get("reuse_inputs"):
            inputs = self.reuse_storage(inputs)
        tracer = trace.KernelTrace(torch) if header.get("trace") and self.device.type == "cuda" else None
        with contextlib.ExitStack() as stack:
            span = tracer.range if tracer is not None else (lambda name: contextlib.nullcontext())
            try:
                watch = evidence.CallWatch(inputs, self.pinned_flags)
                if tracer is not None:
                    stack.enter_context(tracer.active())
                    with span("marker"):  # one tiny kernel that names the current stream in the trace
                        torch.zeros(1, device=self.device)
                # Poison last, after the judge's own allocations, so the next allocation is the candidate's.
                self.poison(int(header.get("poison_bytes", 0)))
                with torch.no_grad(), span("call"):
                    out = self.model(*inputs)
                # Snapshot after the current stream finishes, compare after the whole device has: a
                # difference means work was still running elsewhere when the call returned.
                with span("sync"):
                    self.stream_synchronize()
            except BaseException as exc:
                self.send(describe_exception("call", exc))
                return
            items = list(out) if isinstance(out, (tuple, list)) else [out]
            watched: list[Any] = []
            try:
                # Only outputs that really are tensors on this device can be re-read; the parent judges the rest.
                watched = [x for x in items if type(x) is torch.Tensor and x.device.type == self.device.type]
                with span("evidence"):
                    observed = watch.after(
                        watched, self.prev_outputs, self.synchronize, float(header.get("reread_s", 0.0))
                    )
            except Exception as exc:  # evidence that cannot be gathered is reported as such, never as a verdict
                observed = {"error": f"{type(exc).__name__}: {exc}"[:TEXT_CAP]}
        if tracer is not None:
            observed = {**observed, "trace": tracer.report()}
        self.prev_inputs, self.prev_outputs = inputs, watched
        described = describe_output(torch, out)
        header_out: dict[str, Any] = {"type": "output", **described, "evidence": observed}
        if not all(d["plain_tensor"] for d in described["items"]):
            self.send(header_out)
            return
        try:
            tree, tensors = wire.pack_values(items)
            blob = wire.encode_tensors(tensors)
        except Exception as exc:  # e.g. a meta tensor has no data to send
            self.send({**header_out, "unreadable": f"{type(exc).__name__}: {exc}"[:TEXT_CAP]})
            return
        wire.write_frame(self.resp_fd, {**header_out, "values": tree}, blob)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kerneljudge-worker")
    parser.add_argument("--role", choices=("reference", "candidate"), required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--req-fd", type=int, required=True)
    parser.add_argument("--resp-fd", type=int, required=True)
    ns = parser.parse_args(argv)
    worker = Worker(ns.role, ns.device, ns.source, ns.req_fd, ns.resp_fd)
    try:
        worker.serve()
    except wire.WireError:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
