"""The device crossing's parts that need no GPU (worker/device_crossing.py): sizes rounded to the granularity, the
descriptors' message over a Unix socket, and, against a stand-in for libcuda, that the reader maps its own size
and that every import is released and every descriptor closed whichever call fails. The driver's own answers (a
map past an allocation's end refused, an allocation released by its exporter) are the probe's to show on a GPU
(benchmarks/cuda_ipc_probe.py, docs/conformance.md)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket

import pytest

from kerneljudge.worker import device_crossing as dc
from kerneljudge.worker.device_crossing import CrossingError, Driver

GRAIN = 2 * 2**20


def test_sizes_are_whole_granules_one_at_least():
    assert dc.rounded(1, GRAIN) == GRAIN
    assert dc.rounded(0, GRAIN) == GRAIN
    assert dc.rounded(GRAIN, GRAIN) == GRAIN
    assert dc.rounded(GRAIN + 1, GRAIN) == 2 * GRAIN
    with pytest.raises(CrossingError):
        dc.rounded(10, 0)


def open_fds() -> set[int]:
    """This process's open descriptors (the listing's own included: the lowest free number, each time)."""
    return {int(name) for name in os.listdir("/proc/self/fd")}


def test_a_header_and_its_descriptors_cross_a_unix_socket():
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    r, w = os.pipe()
    try:
        os.write(w, b"bytes")
        dc.send(left, {"bytes": 5, "dtype": "uint8"}, [r])
        header, fds = dc.receive(right, 2)
        assert header == {"bytes": 5, "dtype": "uint8"} and len(fds) == 1
        assert os.read(fds[0], 5) == b"bytes"  # the same pipe, through another descriptor
        os.close(fds[0])
    finally:
        for end in (left, right):
            end.close()
        os.close(r)
        os.close(w)


def test_more_descriptors_than_asked_for_a_bad_header_or_a_closed_end_is_refused_and_leaves_none_open():
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pipes = [os.pipe() for _ in range(3)]
    before = open_fds()
    try:
        dc.send(left, {"n": 3}, [r for r, _ in pipes])
        with pytest.raises(CrossingError, match="cut"):
            dc.receive(right, 2)
        assert open_fds() <= before  # what came was closed
        socket.send_fds(left, [b"not json"], [pipes[0][0]])
        with pytest.raises(CrossingError, match="no JSON"):
            dc.receive(right, 1)
        socket.send_fds(left, [b"[1, 2]"], [])
        with pytest.raises(CrossingError, match="no JSON object"):
            dc.receive(right, 1)
        assert open_fds() <= before
        left.close()
        with pytest.raises(CrossingError, match="closed"):
            dc.receive(right, 1)
    finally:
        right.close()
        for r, w in pipes:
            os.close(r)
            os.close(w)


class FakeDriver:
    """libcuda's calls as device_crossing makes them, on allocations that are byte counts: a map larger than its
    allocation is refused, as the probe is to show the real driver does; `fail` names a call to fail."""

    def __init__(self, fail: str | None = None) -> None:
        self.fail = fail
        self.sizes: dict[int, int] = {}  # handle -> allocation bytes
        self.fds: dict[int, int] = {}  # exported descriptor -> handle
        self.released: list[int] = []
        self.mapped: dict[int, int] = {}  # address -> bytes
        self.maps: list[int] = []  # the size of every map asked
        self.copies: list[tuple[int, int, int]] = []
        self.next = 1

    def _new(self) -> int:
        self.next += 1
        return self.next

    def _rc(self, name: str) -> int:
        return 1 if self.fail == name else 0

    def cuMemGetAllocationGranularity(self, value, prop, option):  # noqa: N802 - the driver's names
        value._obj.value = GRAIN
        return 0

    def cuMemCreate(self, handle, size, prop, flags):  # noqa: N802
        handle._obj.value = self._new()
        self.sizes[handle._obj.value] = size.value
        return self._rc("cuMemCreate")

    def cuMemAddressReserve(self, ptr, size, align, addr, flags):  # noqa: N802
        ptr._obj.value = self._new() << 32
        return 0

    def cuMemMap(self, ptr, size, offset, handle, flags):  # noqa: N802
        self.maps.append(size.value)
        if self.fail == "cuMemMap" or size.value > self.sizes[handle.value]:
            return 1
        self.mapped[ptr.value] = size.value
        return 0

    def cuMemSetAccess(self, ptr, size, access, count):  # noqa: N802
        return self._rc("cuMemSetAccess")

    def cuMemUnmap(self, ptr, size):  # noqa: N802
        self.mapped.pop(ptr.value, None)
        return 0

    def cuMemAddressFree(self, ptr, size):  # noqa: N802
        return 0

    def cuMemRelease(self, handle):  # noqa: N802
        self.released.append(handle.value)
        return 0

    def cuMemExportToShareableHandle(self, fd, handle, kind, flags):  # noqa: N802
        if self.fail == "cuMemExportToShareableHandle":
            return 1
        fd._obj.value = os.open(os.devnull, os.O_RDONLY)
        self.fds[fd._obj.value] = handle.value
        return 0

    def cuMemImportFromShareableHandle(self, handle, fd, kind):  # noqa: N802
        if self.fail == "cuMemImportFromShareableHandle":
            return 999
        handle._obj.value = self._new()
        self.sizes[handle._obj.value] = self.sizes[self.fds[fd.value]] if fd.value in self.fds else GRAIN
        return 0

    def cuMemcpyDtoD_v2(self, dst, src, nbytes):  # noqa: N802
        self.copies.append((dst.value, src.value, nbytes.value))
        return self._rc("cuMemcpyDtoD")

    def cuCtxSynchronize(self):  # noqa: N802
        return 0


def crossed(lib: FakeDriver, nbytes: int, expected: int) -> None:
    """A writer's export of `nbytes` read by a reader who expects `expected`, both on `lib`."""
    driver = Driver(lib, 0)
    exported = dc.export(driver, src=0x1000, nbytes=nbytes)
    try:
        reader_fd = os.dup(exported.fd)
        lib.fds[reader_fd] = lib.fds[exported.fd]  # the descriptor as the reader's process holds it
        dc.copy_in(driver, reader_fd, dst=0x2000, nbytes=expected)
        with pytest.raises(OSError):
            os.fstat(reader_fd)  # closed by copy_in
    finally:
        dc.release(driver, exported)


def test_the_reader_maps_its_own_size_and_releases_the_import():
    lib = FakeDriver()
    crossed(lib, 3 * GRAIN - 5, 3 * GRAIN - 5)
    assert lib.maps == [3 * GRAIN, 3 * GRAIN]  # the writer's allocation, the reader's map of what it expects
    (written, read) = lib.copies
    assert written[1:] == (0x1000, 3 * GRAIN - 5) and read[0] == 0x2000 and read[2] == 3 * GRAIN - 5
    assert not lib.mapped and len(lib.released) == 2  # the reader's import and the writer's allocation


def test_a_writer_that_sent_less_than_the_reader_expects_is_refused_and_nothing_is_left_held():
    lib = FakeDriver()
    before = open_fds()
    with pytest.raises(CrossingError, match="cuMemMap"):
        crossed(lib, GRAIN, GRAIN + 1)  # two granules mapped, one granule allocated
    assert not lib.mapped and len(lib.released) == 2 and len(lib.copies) == 1  # the writer's copy only
    assert open_fds() <= before


@pytest.mark.parametrize("call", ["cuMemImportFromShareableHandle", "cuMemSetAccess", "cuMemcpyDtoD"])
def test_a_failing_call_on_the_readers_side_closes_its_descriptor_and_releases_what_it_held(call):
    lib = FakeDriver()
    driver = Driver(lib, 0)
    exported = dc.export(driver, src=0x1000, nbytes=GRAIN)
    before = open_fds()
    lib.fail = call
    reader_fd = os.dup(exported.fd)
    lib.fds[reader_fd] = lib.fds[exported.fd]
    with pytest.raises(CrossingError, match=call):
        dc.copy_in(driver, reader_fd, dst=0x2000, nbytes=GRAIN)
    with pytest.raises(OSError):
        os.fstat(reader_fd)  # closed by copy_in
    assert open_fds() <= before
    assert not [ptr for ptr in lib.mapped if ptr != exported.ptr]  # only the writer's own mapping is left
    imported = 0 if call == "cuMemImportFromShareableHandle" else 1
    assert len(lib.released) == imported
    dc.release(driver, exported)


@pytest.mark.parametrize("call", ["cuMemCreate", "cuMemSetAccess", "cuMemcpyDtoD", "cuMemExportToShareableHandle"])
def test_a_failing_call_on_the_writers_side_leaves_nothing_mapped(call):
    lib = FakeDriver(fail=call)
    with pytest.raises(CrossingError, match=call):
        dc.export(Driver(lib, 0), src=0x1000, nbytes=GRAIN)
    assert not lib.mapped
    assert len(lib.released) == (0 if call == "cuMemCreate" else 1)


def test_without_a_driver_there_is_nothing_to_load():
    if ctypes.util.find_library("cuda") is not None:
        pytest.skip("this machine has libcuda")
    assert Driver.load(0) is None
