"""A device tensor carried from one sandboxed worker to another on the GPU, by file descriptor: CUDA's virtual
memory management (docs/conformance.md, "Crossing outputs on the device").

Not yet on the judge's path: benchmarks/cuda_ipc_probe.py runs it between two workers in the judge's sandbox, and
the channels (protocol/channel.py) still carry every tensor through the host. It is meant for the largest outputs,
whose crossing through the host is half of a judgment's correctness (21-28 s written and 23-29 s read for
KernelBench's 6 GiB problems on an H100), and for the timed checks' kept outputs in the measuring hold.

The writer (`export`) copies the tensor into an allocation made to be shared (`cuMemCreate` with a POSIX
descriptor handle type), exports it as a descriptor and keeps it until `release`. The descriptor crosses a Unix
socket (`send`, `receive`: SCM_RIGHTS). The reader (`copy_in`) imports it, maps the bytes it expects itself,
rounded up to the allocation granularity, never a size the writer told, copies them into memory of its own and
unmaps and releases at once: what the writer does to the allocation meanwhile is no more than choosing the bytes
it sends, as it does writing a channel. Legacy CUDA IPC handles (`cuIpcOpenMemHandle`) do not open across the
sandboxes, and forged ones opened nothing (probe, H100, 2026-12-05); a descriptor cannot be forged, only chosen
among those its process holds, and the driver refused one that is no allocation's.

Only libcuda is used (ctypes), beside torch's own context: the calls act on the context current on the calling
thread, which a worker's torch has made current by its first device tensor.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
from dataclasses import dataclass
from typing import Any

POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
MINIMUM = 0  # CU_MEM_ALLOC_GRANULARITY_MINIMUM
HEADER_BYTES = 1 << 16  # a crossing's JSON header, at most


class CrossingError(Exception):
    """A step of a crossing failed: the driver's call and its error, or a header that does not hold."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _Prop(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


def rounded(nbytes: int, granularity: int) -> int:
    """`nbytes` rounded up to a whole number of `granularity` (one granule at least)."""
    if granularity <= 0:
        raise CrossingError(f"an allocation granularity of {granularity} bytes")
    return max(1, -(-nbytes // granularity)) * granularity


class Driver:
    """The libcuda calls a crossing makes, each checked; `Driver.load()` is None where there is no driver."""

    def __init__(self, lib: Any, device: int) -> None:
        self.lib = lib
        self.device = device

    @classmethod
    def load(cls, device: int) -> Driver | None:
        try:
            return cls(ctypes.CDLL("libcuda.so.1"), device)
        except OSError:
            return None

    def _call(self, what: str, rc: int) -> None:
        if rc:
            raise CrossingError(f"{what}: CUDA driver error {rc}")

    def _prop(self) -> _Prop:
        return _Prop(type=PINNED, requestedHandleTypes=POSIX_FD, location=_Location(ON_DEVICE, self.device))

    def granularity(self) -> int:
        value = ctypes.c_size_t()
        self._call(
            "cuMemGetAllocationGranularity",
            self.lib.cuMemGetAllocationGranularity(ctypes.byref(value), ctypes.byref(self._prop()), MINIMUM),
        )
        return int(value.value)

    def create(self, size: int) -> int:
        handle = ctypes.c_uint64()
        prop = self._prop()
        self._call(
            "cuMemCreate",
            self.lib.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_uint64(0)),
        )
        return int(handle.value)

    def map(self, handle: int, size: int) -> int:
        """The allocation behind `handle` mapped readable and writable at a fresh address, its first `size` bytes."""
        ptr = ctypes.c_uint64()
        self._call(
            "cuMemAddressReserve",
            self.lib.cuMemAddressReserve(
                ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_uint64(0)
            ),
        )
        try:
            self._call(
                "cuMemMap",
                self.lib.cuMemMap(
                    ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(handle), ctypes.c_uint64(0)
                ),
            )
        except CrossingError:
            self.lib.cuMemAddressFree(ptr, ctypes.c_size_t(size))
            raise
        access = _Access(_Location(ON_DEVICE, self.device), READ_WRITE)
        try:
            self._call(
                "cuMemSetAccess",
                self.lib.cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1)),
            )
        except CrossingError:
            self.unmap(int(ptr.value), size)
            raise
        return int(ptr.value)

    def unmap(self, ptr: int, size: int) -> None:
        self.lib.cuMemUnmap(ctypes.c_uint64(ptr), ctypes.c_size_t(size))
        self.lib.cuMemAddressFree(ctypes.c_uint64(ptr), ctypes.c_size_t(size))

    def release(self, handle: int) -> None:
        self.lib.cuMemRelease(ctypes.c_uint64(handle))

    def export(self, handle: int) -> int:
        fd = ctypes.c_int(-1)
        self._call(
            "cuMemExportToShareableHandle",
            self.lib.cuMemExportToShareableHandle(
                ctypes.byref(fd), ctypes.c_uint64(handle), ctypes.c_int(POSIX_FD), ctypes.c_uint64(0)
            ),
        )
        return int(fd.value)

    def imported(self, fd: int) -> int:
        handle = ctypes.c_uint64()
        self._call(
            "cuMemImportFromShareableHandle",
            self.lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), ctypes.c_int(POSIX_FD)),
        )
        return int(handle.value)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Device to device, finished before it returns."""
        self._call(
            "cuMemcpyDtoD",
            self.lib.cuMemcpyDtoD_v2(ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_size_t(nbytes)),
        )
        self._call("cuCtxSynchronize", self.lib.cuCtxSynchronize())


@dataclass
class Exported:
    """An allocation the writer made and keeps until `release`: its descriptor, mapping and sizes."""

    fd: int
    handle: int
    ptr: int
    size: int
    nbytes: int


def export(driver: Driver, src: int, nbytes: int) -> Exported:
    """`nbytes` of device memory at address `src` (a contiguous tensor's `data_ptr()`) copied into an allocation
    made to be shared, and its descriptor."""
    size = rounded(nbytes, driver.granularity())
    handle = driver.create(size)
    try:
        ptr = driver.map(handle, size)
    except CrossingError:
        driver.release(handle)
        raise
    try:
        driver.copy(ptr, src, nbytes)
        fd = driver.export(handle)
    except CrossingError:
        driver.unmap(ptr, size)
        driver.release(handle)
        raise
    return Exported(fd, handle, ptr, size, nbytes)


def release(driver: Driver, exported: Exported) -> None:
    """The writer's side, once the reader is done (or gone): unmapped, released, its descriptor closed."""
    driver.unmap(exported.ptr, exported.size)
    driver.release(exported.handle)
    os.close(exported.fd)


def copy_in(driver: Driver, fd: int, dst: int, nbytes: int) -> None:
    """`nbytes` from the start of the allocation behind `fd` copied to device memory at `dst`, which the reader
    owns; the size mapped is the reader's own `nbytes`, rounded up to the granularity. The descriptor is closed and
    the import released whatever happens; a `CrossingError` says which call failed."""
    try:
        size = rounded(nbytes, driver.granularity())
        handle = driver.imported(fd)
        try:
            ptr = driver.map(handle, size)
            try:
                driver.copy(dst, ptr, nbytes)
            finally:
                driver.unmap(ptr, size)
        finally:
            driver.release(handle)
    finally:
        os.close(fd)


def send(sock: socket.socket, header: dict[str, Any], fds: list[int]) -> None:
    """A header and the descriptors it describes, in one message."""
    data = json.dumps(header).encode()
    if len(data) > HEADER_BYTES:
        raise CrossingError(f"a crossing's header of {len(data)} bytes, more than {HEADER_BYTES}")
    socket.send_fds(sock, [data], fds)


def receive(sock: socket.socket, max_fds: int) -> tuple[dict[str, Any], list[int]]:
    """One message: its header and descriptors, at most `max_fds` of them; more, a cut header or one that is no
    JSON object is a `CrossingError` (the descriptors that came are closed)."""
    data, fds, flags, _ = socket.recv_fds(sock, HEADER_BYTES, max_fds)
    try:
        if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
            raise CrossingError("a crossing's message was cut: too many descriptors or too long a header")
        if not data:
            raise CrossingError("the writer's end of the crossing closed")
        try:
            header = json.loads(data)
        except ValueError:
            raise CrossingError("a crossing's header that is no JSON") from None
        if not isinstance(header, dict):
            raise CrossingError("a crossing's header that is no JSON object")
    except CrossingError:
        for fd in fds:
            os.close(fd)
        raise
    return header, fds
