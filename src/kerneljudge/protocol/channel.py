"""Shared-memory channels: how tensors travel between the parent and the workers.

A request or response is a JSON header on a pipe (protocol/wire.py); the tensors it names lie in a channel,
an anonymous shared-memory file (memfd) that the parent creates, sizes and hands to each process that
writes or reads it. A tensor is described by where its bytes lie: channel, offset, byte count, dtype and
shape. Nothing is serialised: the writer copies a tensor's bytes into the channel (straight from the GPU
where it lives there) and the reader copies them out onto its own device, so a 4 GiB input costs two
copies instead of the six a pipe and a serialiser took (KernelBench's level-1 inputs are 4-16 GiB).

Channels are named for the role that writes them and the direction: `reference_in` (the parent writes,
the reference reads), `reference_out`, `candidate_in`, `candidate_out`. The reference worker also writes
`candidate_in` (a trial's inputs go to the candidate without passing through the parent) and reads
`candidate_out` (it compares the candidate's outputs with the oracle on the device). The candidate gets
its own two channels only, `candidate_in` read-only: it never holds a reference channel, where the
oracle's outputs lie. A reader trusts nothing it is told: a description is checked against the channel's
capacity, the dtype against a list, the byte count against the shape, before a byte is read.

Windows of the file are mapped one at a time (`WINDOW_BYTES`): a worker's address-space limit never has to
cover a whole tensor twice. A CUDA worker copies a device tensor that lies in a channel's first HEAD_BYTES
through that channel's registered head instead (protocol/pinned.py): mapped once, page-locked as it is used.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import warnings
from dataclasses import dataclass
from typing import Any

from kerneljudge.protocol import pinned

WINDOW_BYTES = 256 * 2**20
ALIGN = mmap.ALLOCATIONGRANULARITY
MAX_DIMS = 16

DTYPES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "complex64",
    "complex128",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
)


class ChannelError(Exception):
    """A tensor description that does not fit its channel, or a channel this process does not hold."""


@dataclass(frozen=True)
class Endpoint:
    """One process's handle on a channel: its descriptor, whether it may write, and the fixed capacity."""

    name: str
    fd: int
    writable: bool
    capacity_bytes: int

    def argument(self) -> str:
        return f"{self.name}:{self.fd}:{'rw' if self.writable else 'ro'}:{self.capacity_bytes}"

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        name, fd, mode, capacity = text.split(":")
        return cls(name, int(fd), mode == "rw", int(capacity))


# Only a channel's owner (the judge's uid) may open its file again, and only for reading. A memfd is made
# 0777, and a worker handed a read-only descriptor could open /proc/self/fd/N read-write and write the inputs
# the reference writes and reads, or punch holes under its registered head (protocol/pinned.py). Reopening checks
# the file's mode against the opener's uid: this holds for a worker under a uid of its own (a root judge's);
# one keeping the judge's uid owns the file and could change its mode back (docs/security.md). Seals cannot
# say it instead: F_SEAL_WRITE and F_SEAL_FUTURE_WRITE refuse writes to every holder, and the parent and the
# reference write these channels for as long as the reader reads them.
CHANNEL_MODE = 0o400


def create(name: str, capacity_bytes: int) -> Endpoint:
    """A new channel (the parent's read-write endpoint): sparse, so capacity costs nothing until written, and
    sealed against shrinking, so that no process holding it can take pages from under another's mapping or
    registered head (protocol/pinned.py); its mode lets no one else open it again (`CHANNEL_MODE`)."""
    fd = os.memfd_create(f"kerneljudge-{name}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.fchmod(fd, CHANNEL_MODE)
    os.ftruncate(fd, capacity_bytes)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    return Endpoint(name, fd, True, capacity_bytes)


def reader(endpoint: Endpoint) -> Endpoint:
    """A read-only descriptor of the same channel (to hand to a process that must not write it): a process
    under another uid cannot open it again for writing (`CHANNEL_MODE`)."""
    fd = os.open(f"/proc/self/fd/{endpoint.fd}", os.O_RDONLY | os.O_CLOEXEC)
    return Endpoint(endpoint.name, fd, False, endpoint.capacity_bytes)


def _align(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def _byte_view(torch: Any, t: Any) -> Any:
    """A dense tensor's bytes as a flat uint8 tensor (a 0-dim tensor has one element)."""
    flat = t.reshape(-1)
    return flat.view(torch.uint8) if flat.dtype != torch.uint8 else flat


class Channels:
    """The channels one process holds, by name; writes and reads of described tensors. With `heads` (a CUDA
    worker's), device tensors in a channel's head cross through its registered mapping (protocol/pinned.py)."""

    def __init__(self, endpoints: list[Endpoint], heads: bool = False) -> None:
        self.endpoints = {e.name: e for e in endpoints}
        self.heads = pinned.Heads() if heads else None

    def _endpoint(self, name: Any, write: bool) -> Endpoint:
        endpoint = self.endpoints.get(name) if isinstance(name, str) else None
        if endpoint is None or (write and not endpoint.writable):
            raise ChannelError(f"no {'writable ' if write else ''}channel {name!r} here")
        return endpoint

    def _through_head(self, endpoint: Endpoint, offset: int, device_bytes: Any, write: bool) -> bool:
        """A device tensor's bytes copied through the channel's registered head, where this process has heads
        and the head takes them; False: the caller maps windows."""
        heads = self.heads
        return device_bytes.is_cuda and heads is not None and heads.copy(endpoint, offset, device_bytes, write)

    def _each_window(self, endpoint: Endpoint, offset: int, nbytes: int, write: bool, copy: Any) -> None:
        """Call copy(window, at) for mapped windows (uint8 tensors) covering bytes [offset, offset + nbytes);
        `at` is the window's position in the tensor's bytes. Each window is unmapped once copy returns."""
        import torch

        done = 0
        while done < nbytes:
            start = offset + done
            base = start - start % ALIGN
            length = min(nbytes - done, WINDOW_BYTES)
            # Populated at once: faulting pages in one by one made writes ten times slower, and reads slow too.
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if write else 0)
            window = mmap.mmap(endpoint.fd, start - base + length, flags=flags, prot=prot, offset=base)
            try:
                with warnings.catch_warnings():  # a read-only window: torch warns that it is not writable
                    warnings.simplefilter("ignore", UserWarning)
                    view = torch.frombuffer(window, dtype=torch.uint8, count=length, offset=start - base)
                copy(view, done)
                del view
            finally:
                window.close()
            done += length

    def write(self, name: str, tensors: dict[str, Any], start: int = 0) -> dict[str, dict[str, Any]]:
        """Copy tensors (any device) into channel `name` from byte `start`; their descriptions by tensor name."""
        import torch

        endpoint = self._endpoint(name, write=True)
        described: dict[str, dict[str, Any]] = {}
        offset = _align(start)
        for key, t in tensors.items():
            t = t.detach()
            nbytes = t.numel() * t.element_size()
            if offset + nbytes > endpoint.capacity_bytes:
                raise ChannelError(
                    f"channel {name} holds {endpoint.capacity_bytes} bytes; {offset + nbytes} needed"
                    " (raise max_message_bytes)"
                )
            source = _byte_view(torch, t.contiguous()) if nbytes else None
            if source is not None and not self._through_head(endpoint, offset, source, write=True):
                self._each_window(
                    endpoint,
                    offset,
                    nbytes,
                    True,
                    lambda window, at, s=source: window.copy_(s[at : at + window.numel()]),
                )
            described[key] = {
                "channel": name,
                "offset": offset,
                "nbytes": nbytes,
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
            }
            offset = _align(offset + nbytes)
        return described

    def check(self, description: Any, max_bytes: int | None = None) -> tuple[Endpoint, Any, list[int], int, int]:
        """A description made safe to read: (endpoint, dtype, shape, offset, nbytes), or ChannelError."""
        import torch

        if not isinstance(description, dict):
            raise ChannelError("a tensor description is not a mapping")
        endpoint = self._endpoint(description.get("channel"), write=False)
        dtype_name, shape = description.get("dtype"), description.get("shape")
        offset, nbytes = description.get("offset"), description.get("nbytes")
        if dtype_name not in DTYPES or not isinstance(getattr(torch, str(dtype_name), None), torch.dtype):
            raise ChannelError(f"unsupported dtype {dtype_name!r}")
        if not (
            isinstance(shape, list)
            and len(shape) <= MAX_DIMS
            and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
        ):
            raise ChannelError(f"malformed shape {shape!r}")
        dtype = getattr(torch, dtype_name)
        numel = 1
        for size in shape:
            numel *= size
        itemsize = torch.empty((), dtype=dtype).element_size()
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (offset, nbytes)):
            raise ChannelError("malformed offset or byte count")
        if nbytes != numel * itemsize:
            raise ChannelError(f"{nbytes} bytes do not hold a {dtype_name} tensor of shape {shape}")
        if offset + nbytes > endpoint.capacity_bytes:
            raise ChannelError(f"bytes {offset}..{offset + nbytes} lie outside channel {endpoint.name}")
        if max_bytes is not None and nbytes > max_bytes:
            raise ChannelError(f"a tensor of {nbytes} bytes exceeds the cap of {max_bytes} bytes")
        return endpoint, dtype, shape, offset, nbytes

    def read(self, description: Any, device: Any = "cpu", max_bytes: int | None = None) -> Any:
        """A new tensor on `device` holding the described bytes (never a view of the channel)."""
        import torch

        endpoint, dtype, shape, offset, nbytes = self.check(description, max_bytes)
        out = torch.empty(shape, dtype=dtype, device=device)
        if not nbytes:
            return out
        target = _byte_view(torch, out)
        if out.device.type == "cpu":  # one system call straight into the new tensor
            view = memoryview(target.numpy()).cast("B")
            done = 0
            while done < nbytes:
                got = os.preadv(endpoint.fd, [view[done:]], offset + done)
                if got <= 0:
                    raise ChannelError(f"channel {endpoint.name} ended before byte {offset + done}")
                done += got
            return out
        if self._through_head(endpoint, offset, target, write=False):
            return out
        self._each_window(
            endpoint, offset, nbytes, False, lambda window, at: target[at : at + window.numel()].copy_(window)
        )
        return out

    def close(self) -> None:
        if self.heads is not None:
            self.heads.close()
        for endpoint in self.endpoints.values():
            try:
                os.close(endpoint.fd)
            except OSError:
                pass
        self.endpoints = {}

    def put(self, name: str, values: Any) -> tuple[Any, dict[str, dict[str, Any]]]:
        """Values (a nest of tensors and plain data) written to channel `name`: their tree and descriptions."""
        from kerneljudge.protocol import wire

        tree, tensors = wire.pack_values(values)
        return tree, self.write(name, tensors)

    def get(self, tree: Any, descriptions: Any, device: Any = "cpu", max_bytes: int | None = None) -> Any:
        """The values a tree names, their tensors read onto `device` (strided ones laid out as described)."""
        from kerneljudge.protocol import wire

        descriptions = {} if descriptions is None else descriptions
        if not isinstance(descriptions, dict):
            raise ChannelError("tensor descriptions are not a mapping")
        names = wire.tensor_names(tree)
        missing = names - set(descriptions)
        if missing:
            raise ChannelError(f"a value refers to an undescribed tensor {sorted(missing)[0]!r}")
        total = sum(self.check(descriptions[n])[4] for n in names)
        if max_bytes is not None and total > max_bytes:
            raise ChannelError(f"tensors of {total} bytes exceed the cap of {max_bytes} bytes")
        return wire.unpack_values(tree, {n: self.read(descriptions[n], device) for n in names})
