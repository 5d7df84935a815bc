"""The registered head of a channel: the first HEAD_BYTES of each channel a CUDA worker copies a device tensor
through, mapped once and page-locked with the CUDA driver a grain at a time as bytes first pass there, so that
a tensor in it crosses between the device and the channel at the bus's rate. Measured on the H200 (docs/
conformance.md, "The host crossing"): 55 GB/s both ways through a mapping registered once, against 1.4 to 10
GB/s through windows mapped for each copy, which is what protocol/channel.py does with a tensor that does not
fit a head, on the CPU, or where registering fails.

Why the registered pages stay the channel's: page-locking pins the pages the file has, and a copy through the
registration moves those pages' bytes. They stop being the file's only if the file loses them, by a hole
punched (fallocate, MADV_REMOVE) or a truncation, after which a copy would move stale bytes. Channels are made
sealed against shrinking (channel.create), and no trusted process punches holes in one. The only process that
could punch a hole in a channel another process reads through a head is the candidate, in its own outbox; the
reference would then read an older output of the candidate's from it, which the candidate could as well have
written there again itself: it gains nothing it did not have. A channel's pages are never freed while its
workers live (channels have no release), so pinning costs no memory beyond the bytes used, rounded up to
a grain.

The driver's API (libcuda, through ctypes) is used rather than the runtime's: a failed cudaHostRegister
would be left as the runtime's last error, which torch's next kernel launch check raises as its own.
"""

from __future__ import annotations

import ctypes
import mmap
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kerneljudge.protocol.channel import Endpoint

HEAD_BYTES = 512 * 2**20
GRAIN = 16 * 2**20  # registered this many bytes at a time, and copies split at these boundaries

CU_MEMHOSTREGISTER_PORTABLE = 0x01
CU_MEMHOSTREGISTER_READ_ONLY = 0x08
CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED = 113

# register(address, bytes, read_only) -> 0 on success, else the driver's error code (or -1: no driver here)
Register = Callable[[int, int, bool], int]


class Driver:
    """cuMemHostRegister and cuMemHostUnregister of the CUDA driver already loaded in this process."""

    def __init__(self) -> None:
        self.lib: Any = None
        self.why: str | None = None
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            self.why = f"no CUDA driver library: {exc}"

    def register(self, address: int, size: int, read_only: bool) -> int:
        lib = self.lib
        if lib is None:
            return -1
        context = ctypes.c_void_p()
        if lib.cuCtxGetCurrent(ctypes.byref(context)) != 0 or not context.value:
            return -1  # no context current on this thread: the copy takes the windows instead
        flags = CU_MEMHOSTREGISTER_PORTABLE
        if read_only:
            device, supported = ctypes.c_int(), ctypes.c_int()
            if lib.cuCtxGetDevice(ctypes.byref(device)) != 0:
                return -1
            attribute = CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED
            if lib.cuDeviceGetAttribute(ctypes.byref(supported), attribute, device) != 0 or not supported.value:
                return -1
            flags |= CU_MEMHOSTREGISTER_READ_ONLY
        register = getattr(lib, "cuMemHostRegister_v2", None) or lib.cuMemHostRegister
        return int(register(ctypes.c_void_p(address), ctypes.c_size_t(size), ctypes.c_uint(flags)))

    def unregister(self, address: int) -> None:
        if self.lib is not None:
            self.lib.cuMemHostUnregister(ctypes.c_void_p(address))


class Head:
    """One channel's head in this process: its mapping, as a uint8 tensor, and how much of it is registered."""

    def __init__(self, endpoint: Endpoint, size: int) -> None:
        import torch

        prot = mmap.PROT_READ | (mmap.PROT_WRITE if endpoint.writable else 0)
        self.read_only = not endpoint.writable
        self.mapping = mmap.mmap(endpoint.fd, size, flags=mmap.MAP_SHARED, prot=prot)
        with warnings.catch_warnings():  # a read-only mapping: torch warns that it is not writable
            warnings.simplefilter("ignore", UserWarning)
            self.bytes = torch.frombuffer(self.mapping, dtype=torch.uint8)
        self.size = size
        self.registered = 0  # bytes [0, registered) are page-locked
        self.bases: list[int] = []  # the address of each registration, to unregister it
        self.failed: str | None = None

    def ready(self, end: int, register: Register) -> bool:
        """Whether bytes [0, end) are registered, registering the grains up to `end` that are not yet."""
        if self.failed is not None:
            return False
        if end <= self.registered:
            return True
        grown = min(self.size, -(-end // GRAIN) * GRAIN)
        address = self.bytes.data_ptr() + self.registered
        code = register(address, grown - self.registered, self.read_only)
        if code != 0:
            self.failed = f"registering bytes {self.registered}..{grown} failed ({code})"
            return False
        self.bases.append(address)
        self.registered = grown
        return True

    def close(self, driver: Driver | None) -> None:
        for address in self.bases:
            if driver is not None:
                driver.unregister(address)
        self.bases = []
        del self.bytes
        self.mapping.close()


def spans(offset: int, nbytes: int) -> list[tuple[int, int]]:
    """[offset, offset + nbytes) as (start, length) pieces that never cross a grain's boundary."""
    pieces, at, end = [], offset, offset + nbytes
    while at < end:
        stop = min(end, (at // GRAIN + 1) * GRAIN)
        pieces.append((at, stop - at))
        at = stop
    return pieces


class Heads:
    """The heads of one process's channels, made as device tensors first cross them."""

    def __init__(self, register: Register | None = None, synchronize: Callable[[Any], None] | None = None) -> None:
        self.driver = Driver() if register is None else None
        self.register: Register = register or self.driver.register  # type: ignore[union-attr]
        self.synchronize = synchronize or _synchronize
        self.heads: dict[str, Head] = {}

    def copy(self, endpoint: Endpoint, offset: int, device_bytes: Any, write: bool) -> bool:
        """Copy `device_bytes` (a flat uint8 tensor) into the channel at `offset` (`write`) or the channel's bytes
        there into it, through the channel's registered head; False, with nothing copied, where the head cannot
        take it (beyond the head, or its registration failed): the caller maps windows instead."""
        nbytes = device_bytes.numel()
        size = min(HEAD_BYTES, endpoint.capacity_bytes)
        if not nbytes or offset + nbytes > size or (write and not endpoint.writable):
            return False
        head = self.heads.get(endpoint.name)
        if head is None:
            head = self.heads[endpoint.name] = Head(endpoint, size)
        if not head.ready(offset + nbytes, self.register):
            return False
        for start, length in spans(offset, nbytes):
            host = head.bytes[start : start + length]
            device = device_bytes[start - offset : start - offset + length]
            if write:
                host.copy_(device, non_blocking=True)
            else:
                device.copy_(host, non_blocking=True)
        self.synchronize(device_bytes.device)
        return True

    def state(self) -> dict[str, Any]:
        """Per channel: the bytes registered, and why registering stopped where it failed."""
        return {name: {"registered": h.registered, "failed": h.failed} for name, h in self.heads.items()}

    def close(self) -> None:
        for head in self.heads.values():
            head.close(self.driver)
        self.heads = {}


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
