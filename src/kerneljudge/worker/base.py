"""What both kinds of worker share: the request loop, the device, seeds, building a model, timing.

A worker serves one role for one judgment (worker/reference.py, worker/candidate.py). It only reports
observations (tensors, shapes, times, exceptions); every decision is the parent's, or the reference
worker's, which never sees candidate code. Requests arrive as JSON frames on a pipe (protocol/wire.py) and
name their tensors in shared-memory channels (protocol/channel.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback
from typing import Any

from kerneljudge import protocol
from kerneljudge.protocol import channel, wire
from kerneljudge.worker import evidence, prepare
from kerneljudge.worker.timing.timer import Timer

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
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def items_of(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def container_of(out: Any) -> str:
    """ "tuple" for any tuple (a named one too: torch.return_types.geqrf, which a task's own check may require
    to be a tuple), "list" for any list, else the type's name."""
    return "tuple" if isinstance(out, tuple) else ("list" if isinstance(out, list) else type(out).__name__)


def describe_output(torch: Any, out: Any) -> dict[str, Any]:
    """What a call returned, item by item, for the parent's structural checks (checks/outputs.py)."""
    return {
        "container": container_of(out),
        "items": [
            {
                "type": f"{type(x).__module__}.{type(x).__qualname__}",
                "plain_tensor": type(x) is torch.Tensor,
                "dtype": str(x.dtype).removeprefix("torch.") if isinstance(x, torch.Tensor) else None,
                "shape": list(x.shape) if isinstance(x, torch.Tensor) else None,
                "device": str(x.device) if isinstance(x, torch.Tensor) else None,
            }
            for x in items_of(out)
        ],
    }


class Worker(Timer):
    role = "worker"

    def __init__(self, device: str, source: str, req_fd: int, resp_fd: int, channels: channel.Channels) -> None:
        import torch

        self.torch = torch
        prepare.begin_wrappers(device)  # torch._dynamo imported beside CUDA's start (worker/prepare.py)
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
        self.channels = channels
        self.clock: dict[str, float] = {}  # the parts of the request being served, seconds (send() reports them)
        self.module: Any = None
        self.model: Any = None
        pin_flags(torch)
        self.pinned_flags = evidence.numerics_flags()
        Timer.__init__(self)
        self.warm_up()
        self.triton_prepared_s = prepare.prepare_triton()  # a worker started ahead of its use (worker/prepare.py)
        if self.role != "candidate":  # the reference's, over before its hello, the originals taken again after it
            evidence.load_torch_wrappers()  # (a candidate's worker does this at its load, worker/evidence.py)
        self.threads_baseline = evidence.python_threads()

    # ------------------------------------------------------------ plumbing

    describe_exception = staticmethod(describe_exception)

    def describe_output(self, out: Any) -> dict[str, Any]:
        return describe_output(self.torch, out)

    def send(self, header: dict[str, Any], tensors: dict[str, Any] | None = None) -> None:
        """A response; its tensors go to this worker's outbox, described in the header, and the request's
        parts as this worker clocked them (`clock_s`: where a round trip's time went, docs/record.md)."""
        if tensors:
            began = time.perf_counter()
            header = {**header, "tensors": self.channels.write(f"{self.role}_out", tensors)}
            self.clocked("write", began)
        if self.clock:
            header = {**header, "clock_s": {k: round(v, 4) for k, v in self.clock.items()}}
            self.clock = {}
        wire.write_frame(self.resp_fd, header)

    def clocked(self, part: str, began: float) -> None:
        """Count the time since `began` (time.perf_counter) to `part` of the request being served."""
        self.clock[part] = self.clock.get(part, 0.0) + time.perf_counter() - began

    def send_values(self, header: dict[str, Any], **values: Any) -> None:
        """A response with values (nests of tensors and plain data) under the given keys."""
        tensors: dict[str, Any] = {}
        for key, value in values.items():
            tree, found = wire.pack_values(value)
            header[key] = wire.prefixed(tree, f"{key}.")
            tensors |= {f"{key}.{name}": t for name, t in found.items()}
        self.send(header, tensors)

    def serve(self) -> None:
        self.send(self.hello())
        if self.role == "candidate":
            # After the hello, before any request: the parent greets the reference first and loads it (a
            # judgment's admission waits there), so this import runs beside that, not before the hello. No
            # code of the candidate's has run yet; what torch's import starts or sets is the baseline.
            evidence.load_torch_wrappers()
            self.pinned_flags = evidence.numerics_flags()
            self.threads_baseline = evidence.python_threads()
        while True:
            header = wire.read_frame(self.req_fd)
            try:
                request = protocol.decode(header)
                if isinstance(request, protocol.Exit):
                    return
                handler = getattr(self, f"op_{request.op}", None)
                if handler is None:
                    raise LookupError(f"the {self.role} worker does not serve {request.op!r}")
                self.clock = {}
                began = time.perf_counter()
                args = self.channels.get(header.get("args", []), header.get("tensors") or {}, self.device)
                if header.get("tensors"):
                    self.clocked("read", began)
            except (protocol.ProtocolError, LookupError, channel.ChannelError, wire.WireError) as exc:
                self.send({**describe_exception("protocol", exc), "exc_module": "kerneljudge"})
                continue
            handler(request, args)

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

    def release_cached(self) -> None:
        """Give the allocator's cached device memory back before a step that allocates afresh: blocks cut for
        one trial's multi-GiB tensors, kept, left no block large enough for the next (an out-of-memory with
        54 GiB reserved in one worker, on KernelBench's 6 GiB elementwise tasks)."""
        if self.device.type == "cuda":
            self.torch.cuda.empty_cache()

    def warm_up(self) -> None:
        """Start torch's own thread pools and the CUDA context now, so the census sees only the candidate's."""
        if self.device.type == "cuda" and not self.torch.cuda.is_available():
            return  # the parent reports the missing device; the hello must still go out
        x = self.torch.ones(64, 64, device=self.device)
        (x @ x).sum().item()
        self.synchronize()

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
        if self.triton_prepared_s is not None:
            info["triton_prepared_s"] = self.triton_prepared_s
        return info

    # ------------------------------------------------------------ building

    def import_source(self, name: str) -> bool:
        """Import the source once; on failure the error goes to the parent and False comes back."""
        if self.module is not None:
            return True
        try:
            self.module = load_module(self.source, name)
        except BaseException as exc:  # a SystemExit or KeyboardInterrupt raised by import is a result too
            self.send(describe_exception("import", exc))
            return False
        return True

    def build(self, cls: Any, init_inputs: list[Any], seed: int) -> None:
        """Build the model after `seed` (KernelBench's convention), on this device, in eval mode."""
        torch = self.torch
        self.reset_timing_state()
        with torch.no_grad():
            self.set_seed(seed)
            self.model = cls(*self.to_device(init_inputs))
            if hasattr(self.model, "to"):
                self.model = self.model.to(self.device)
            if hasattr(self.model, "eval"):
                self.model.eval()
        self.synchronize()
