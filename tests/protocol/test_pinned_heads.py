"""The channels' registered heads (protocol/pinned.py), on the CPU with a stand-in for the driver's registration:
bytes cross a head both ways and a second write is read fresh, registration grows a grain at a time and never
past the head, a tensor beyond the head or a failed registration leaves the copy to the windows, and a
channel cannot be shrunk under a mapping. tests/gpu/test_gpu_pinned_heads.py does the same with the driver.
"""

from __future__ import annotations

import os

import pytest
import torch

from kerneljudge.protocol import channel, pinned


class Registrar:
    """Records what would be page-locked; fails from the call numbered `fail_at` on."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls: list[tuple[int, int, bool]] = []
        self.fail_at = fail_at

    def __call__(self, address: int, size: int, read_only: bool) -> int:
        self.calls.append((address, size, read_only))
        return 1 if self.fail_at is not None and len(self.calls) > self.fail_at else 0


@pytest.fixture
def ends():
    writer = channel.create("candidate_out", pinned.HEAD_BYTES + 4 * pinned.GRAIN)
    reader = channel.reader(writer)
    yield writer, reader
    for end in (writer, reader):
        os.close(end.fd)


def heads(registrar: Registrar) -> pinned.Heads:
    return pinned.Heads(register=registrar, synchronize=lambda device: None)


def test_spans_never_cross_a_grain():
    g = pinned.GRAIN
    assert pinned.spans(0, 10) == [(0, 10)]
    assert pinned.spans(g - 4, 8) == [(g - 4, 4), (g, 4)]
    pieces = pinned.spans(3, 2 * g + 5)
    assert pieces[0] == (3, g - 3) and sum(n for _, n in pieces) == 2 * g + 5
    assert all(start // g == (start + n - 1) // g for start, n in pieces)


def test_bytes_cross_both_ways_and_a_second_write_is_read_fresh(ends):
    writer, reader = ends
    wrote, read = Registrar(), Registrar()
    out, back = heads(wrote), heads(read)
    size = pinned.GRAIN + 12345  # two grains
    for seed in (1, 2):  # the second write lands where the first did: the read must see it, not the first
        data = torch.randint(0, 256, (size,), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))
        assert out.copy(writer, 4096, data, write=True)
        got = torch.empty(size, dtype=torch.uint8)
        assert back.copy(reader, 4096, got, write=False)
        assert torch.equal(got, data)
        raw = os.pread(writer.fd, size, 4096)  # what the file holds: the parent's own reads see the same bytes
        assert raw == data.numpy().tobytes()
    # registered once each, from the head's start to the grain past the bytes used, read-only for the reader
    assert [(size_, ro) for _, size_, ro in wrote.calls] == [(2 * pinned.GRAIN, False)]
    assert [(size_, ro) for _, size_, ro in read.calls] == [(2 * pinned.GRAIN, True)]
    assert back.state()["candidate_out"] == {"registered": 2 * pinned.GRAIN, "failed": None}
    out.close()
    back.close()


def test_registration_grows_a_grain_at_a_time_up_to_the_head(ends):
    writer, _ = ends
    registrar = Registrar()
    out = heads(registrar)
    small = torch.ones(100, dtype=torch.uint8)
    assert out.copy(writer, 0, small, write=True)
    assert out.copy(writer, pinned.GRAIN // 2, small, write=True)  # within what is registered: no new call
    assert out.copy(writer, 3 * pinned.GRAIN, small, write=True)
    head = out.heads["candidate_out"]
    base = head.bytes.data_ptr()
    assert registrar.calls == [(base, pinned.GRAIN, False), (base + pinned.GRAIN, 3 * pinned.GRAIN, False)]
    assert not out.copy(writer, pinned.HEAD_BYTES - 50, small, write=True)  # it would end past the head
    assert head.registered == 4 * pinned.GRAIN
    out.close()


def test_a_failed_registration_leaves_the_copy_to_the_windows(ends):
    writer, reader = ends
    registrar = Registrar(fail_at=0)
    out = heads(registrar)
    data = torch.full((64,), 7, dtype=torch.uint8)
    assert not out.copy(writer, 0, data, write=True)
    assert os.pread(writer.fd, 64, 0) == bytes(64)  # nothing was copied
    assert not out.copy(writer, 0, data, write=True)  # and the head is not tried again
    assert len(registrar.calls) == 1 and "failed" in out.state()["candidate_out"]["failed"]
    assert not heads(Registrar()).copy(reader, 0, data, write=True)  # a read-only end is never written
    out.close()


def test_a_channel_cannot_be_shrunk_under_a_mapping(ends):
    writer, _ = ends
    with pytest.raises(PermissionError):
        os.ftruncate(writer.fd, 4096)
    assert os.fstat(writer.fd).st_size == pinned.HEAD_BYTES + 4 * pinned.GRAIN


def test_channels_take_the_windows_for_host_tensors(ends):
    """A CPU tensor never goes through a head, even in a process that has heads (a CUDA worker's inputs made on
    the host): the head is for device copies only."""
    writer, reader = ends
    sender, receiver = channel.Channels([writer], heads=True), channel.Channels([reader], heads=True)
    values = torch.arange(1000, dtype=torch.float32)
    described = sender.write("candidate_out", {"t": values})
    assert torch.equal(receiver.read(described["t"]), values)
    assert sender.heads is not None and sender.heads.state() == {}
