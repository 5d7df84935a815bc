"""The wire format between the trusted parent and a worker.

A frame is a fixed prefix (magic, header length) and a JSON header. Tensors do
not travel in frames: they lie in shared-memory channels (protocol/channel.py) and
a header describes where (`tensors`: name -> channel, offset, dtype, shape).
Nothing is ever unpickled: the header is JSON, a tensor is raw bytes whose
description the reader checks, and lengths are capped before reading. This
module is imported by the worker, so it imports only the standard library and torch.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from typing import Any

MAGIC = b"KJW2"
PREFIX = struct.Struct("<4sI")
MAX_HEADER_BYTES = 32 * 1024 * 1024  # a kernel trace of 60,000 events, at about 250 bytes each


def timed_set(sample: int, call: int, sets: int) -> int:
    """Which input set of a timing pool of `sets` call `call` of sample `sample` uses.

    Consecutive calls differ, and every sample starts one or two sets past set 0, which the warm-up
    calls (and a CUDA graph's capture) use: a replayed graph never sees the contents it was captured on.
    """
    if sets <= 1:
        return 0
    return (call + 1 + sample % (sets - 1)) % sets


class WireError(Exception):
    """A frame could not be read or written: malformed, oversized, or the peer is gone."""


class FrameTooLarge(WireError):
    """The peer announced more bytes than the reader allows."""

    def __init__(self, what: str, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"{what} of {size_bytes} bytes exceeds the cap of {limit_bytes} bytes")
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


class PeerTimeout(WireError):
    """No complete frame arrived before the deadline."""


class PeerClosed(WireError):
    """The peer closed its end of the pipe: it exited, or closed the descriptor."""


# ---------------------------------------------------------------- layouts

# A strided tensor's storage may span at most this many times its elements (plus a page of them): a slice of
# a fused projection spans 3x; a forged layout must not make the reader allocate without bound.
MAX_SPAN_FACTOR = 16
SPAN_SLACK = 1 << 16


def layout(t: Any) -> list[int] | None:
    """The strides of a non-contiguous tensor whose elements do not overlap (a slice, a transpose), which
    the wire keeps; None for a contiguous tensor, or an overlapping one (an expand), which travels dense."""
    if t.is_contiguous() or t.dim() == 0 or t.numel() == 0 or not _apart(t.shape, t.stride()):
        return None
    return list(t.stride())


def _apart(shape: Any, strides: Any) -> bool:
    """No two indices reach one element: walking the dimensions by stride, each steps past the last's reach."""
    reach = 1
    for stride, size in sorted((stride, size) for size, stride in zip(shape, strides, strict=True) if size > 1):
        if stride < reach:
            return False
        reach = stride * size
    return True


def span(shape: Any, strides: list[int]) -> int:
    """Elements of storage a tensor of this shape and these strides reaches."""
    if any(size == 0 for size in shape):
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True))


def placed(t: Any, device: Any = None, strides: list[int] | None = None) -> Any:
    """A copy of `t` on `device` laid out with `strides` (default: the layout `t` has, if kept). The gaps a
    strided layout leaves hold NaN (zero for integers), so a kernel that ignores the strides reads garbage."""
    import torch

    strides = layout(t) if strides is None else strides
    device = t.device if device is None else device
    if strides is None:
        return t.to(device, copy=True)
    fill = float("nan") if t.is_floating_point() or t.is_complex() else 0
    storage = torch.full((span(t.shape, strides),), fill, dtype=t.dtype, device=device)
    out = storage.as_strided(tuple(t.shape), tuple(strides))
    out.copy_(t)
    return out


def _restrided(t: Any, strides: Any) -> Any:
    """A decoded dense tensor given back the layout its sender described, once the description is checked."""
    if not (
        isinstance(strides, list)
        and len(strides) == t.dim()
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in strides)
    ):
        raise WireError(f"malformed strides {strides!r} for a tensor of {t.dim()} dimensions")
    if span(t.shape, strides) > MAX_SPAN_FACTOR * t.numel() + SPAN_SLACK:
        raise WireError(f"strides {strides} reach more than {MAX_SPAN_FACTOR}x the tensor's elements")
    if not _apart(t.shape, strides):
        raise WireError(f"strides {strides} make elements overlap")
    return placed(t, strides=strides)


# ---------------------------------------------------------------- values <-> JSON


def pack_values(values: Any) -> tuple[Any, dict[str, Any]]:
    """Split a nest of Python values into a JSON-able tree and a dict of tensors."""
    tensors: dict[str, Any] = {}
    return _pack(values, tensors), tensors


def _pack(v: Any, tensors: dict[str, Any]) -> Any:
    """One value of pack_values, its tensors added to `tensors`. A module function, not a closure: a nested
    function that calls itself is a reference cycle holding `tensors`, which only the cyclic collector frees,
    and every output and input that crossed a channel stayed alive until it ran (on an H200, workers held
    ten to sixteen times a KernelBench problem's output, docs/batch.md#device-memory)."""
    import torch

    if isinstance(v, torch.Tensor):
        name = f"t{len(tensors)}"
        tensors[name] = v
        strides = layout(v)
        return {"tensor": name} if strides is None else {"tensor": name, "strides": strides}
    if isinstance(v, torch.dtype):
        return {"dtype": str(v).removeprefix("torch.")}
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": repr(v)}
    if isinstance(v, tuple):
        return {"tuple": [_pack(x, tensors) for x in v]}
    if isinstance(v, list):
        return [_pack(x, tensors) for x in v]
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):  # weights and configs by name
        return {"dict": [[k, _pack(x, tensors)] for k, x in v.items()]}
    raise TypeError(f"cannot send a value of type {type(v).__name__} to a worker")


def prefixed(tree: Any, prefix: str) -> Any:
    """A packed tree whose tensor names carry a prefix (values packed apart that share one message)."""
    if isinstance(tree, list):
        return [prefixed(x, prefix) for x in tree]
    if isinstance(tree, dict):
        if isinstance(tree.get("tensor"), str):
            return {**tree, "tensor": prefix + tree["tensor"]}
        if isinstance(tree.get("tuple"), list):
            return {"tuple": [prefixed(x, prefix) for x in tree["tuple"]]}
        if isinstance(tree.get("dict"), list):
            return {"dict": [[k, prefixed(x, prefix)] for k, x in tree["dict"]]}
    return tree


def cloned(value: Any) -> Any:
    """A copy of a nest of values (lists, tuples, dicts) with every tensor cloned, layout kept."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(cloned(v) for v in value)
    if isinstance(value, dict):
        return {k: cloned(v) for k, v in value.items()}
    return value


def tensor_names(tree: Any) -> set[str]:
    """The tensor names a packed tree refers to (malformed parts are left to unpack_values)."""
    if isinstance(tree, list):
        return set().union(*(tensor_names(x) for x in tree)) if tree else set()
    if isinstance(tree, dict):
        if isinstance(tree.get("tensor"), str):
            return {tree["tensor"]}
        if isinstance(tree.get("tuple"), list):
            return tensor_names(tree["tuple"])
        if isinstance(tree.get("dict"), list):
            return tensor_names([p[1] for p in tree["dict"] if isinstance(p, list) and len(p) == 2])
    return set()


def unpack_values(tree: Any, tensors: dict[str, Any]) -> Any:
    """Inverse of pack_values; unknown tensor names and shapes of tree raise WireError."""
    return _unpack(tree, tensors)


def _unpack(v: Any, tensors: dict[str, Any]) -> Any:
    """One value of unpack_values (a module function for the reason _pack is one)."""
    import torch

    if isinstance(v, list):
        return [_unpack(x, tensors) for x in v]
    if isinstance(v, dict):
        if set(v) in ({"tensor"}, {"tensor", "strides"}):
            if v["tensor"] not in tensors:
                raise WireError(f"frame refers to a missing tensor {v['tensor']!r}")
            t = tensors[v["tensor"]]
            return _restrided(t, v["strides"]) if "strides" in v else t
        if set(v) == {"tuple"} and isinstance(v["tuple"], list):
            return tuple(_unpack(x, tensors) for x in v["tuple"])
        if set(v) == {"dict"} and isinstance(v["dict"], list):
            pairs = v["dict"]
            if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
                raise WireError("malformed mapping in frame")
            return {key: _unpack(x, tensors) for key, x in pairs}
        if set(v) == {"dtype"} and isinstance(v["dtype"], str):
            dtype = getattr(torch, v["dtype"], None)
            if not isinstance(dtype, torch.dtype):
                raise WireError(f"unknown dtype {v['dtype']!r}")
            return dtype
        if set(v) == {"float"} and v["float"] in ("nan", "inf", "-inf"):
            return float(v["float"])
        raise WireError(f"malformed value in frame: keys {sorted(v)}")
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise WireError(f"malformed value in frame: {type(v).__name__}")


# ---------------------------------------------------------------- frames


def write_frame(fd: int, header: dict[str, Any], deadline: float | None = None) -> None:
    """Write one frame; with a deadline the peer must drain the pipe in time."""
    data = json.dumps(header, allow_nan=False).encode()
    _write_all(fd, PREFIX.pack(MAGIC, len(data)) + data, deadline)


def ready(fd: int, wait_s: float, write: bool = False) -> bool:
    """Whether `fd` can be read (or written) within `wait_s` seconds, or has hung up. By poll: select refuses
    descriptors numbered past 1024, which a judge running many workers at once reaches."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    return bool(poller.poll(max(0.0, wait_s) * 1000))


def _write_all(fd: int, data: bytes, deadline: float | None) -> None:
    view = memoryview(data)
    while view:
        if deadline is not None:
            wait_s = deadline - time.monotonic()
            if wait_s <= 0:
                raise PeerTimeout("the peer did not read a frame before the deadline")
            if not ready(fd, wait_s, write=True):
                continue
        try:
            n = os.write(fd, view[: 1 << 16])
        except BlockingIOError:
            continue
        except OSError as exc:
            raise PeerClosed(f"peer closed the channel: {exc}") from None
        view = view[n:]


def read_frame(fd: int, deadline: float | None = None, max_header_bytes: int = MAX_HEADER_BYTES) -> dict[str, Any]:
    """Read one frame; deadline is a time.monotonic() value or None to wait forever."""
    magic, header_len = PREFIX.unpack(_read_exact(fd, PREFIX.size, deadline))
    if magic != MAGIC:
        raise WireError("frame does not start with the protocol magic")
    if header_len > max_header_bytes:
        raise FrameTooLarge("header", header_len, max_header_bytes)
    try:
        header = json.loads(_read_exact(fd, header_len, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError(f"frame header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise WireError("frame header is not a JSON object")
    return header


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        if deadline is not None:
            wait_s = deadline - time.monotonic()
            if wait_s <= 0:
                raise PeerTimeout(f"no complete frame before the deadline ({n - remaining}/{n} bytes)")
            if not ready(fd, wait_s):
                continue
        chunk = os.read(fd, min(remaining, 1 << 22))
        if not chunk:
            raise PeerClosed(f"peer closed the channel ({n - remaining}/{n} bytes of a frame read)")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
