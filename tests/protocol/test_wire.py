"""The wire format and the shared-memory channels: values round-trip, frames and tensors are capped, garbage
is refused, nothing is unpickled, a read-only end cannot write."""

import os
import struct
import threading
import time

import pytest
import torch

from helpers import allow_descriptors_past
from kerneljudge.protocol import channel, wire


def roundtrip(header):
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (wire.write_frame(w, header), os.close(w)))
    writer.start()
    try:
        return wire.read_frame(r)
    finally:
        writer.join()
        os.close(r)


@pytest.fixture
def ends():
    """A channel's writing end and a read-only end of it, as the parent hands them to two processes."""
    writer = channel.create("candidate_in", 1 << 24)
    reader = channel.reader(writer)
    yield channel.Channels([writer]), channel.Channels([reader])
    for end in (writer, reader):
        os.close(end.fd)


def through(ends, values):
    """Values written by one end and read back by the other, after their header crossed a pipe."""
    tree, described = ends[0].put("candidate_in", values)
    header = roundtrip({"values": tree, "tensors": described})
    return ends[1].get(header["values"], header["tensors"])


def test_values_round_trip_with_tensors_of_every_common_dtype(ends):
    values = [
        torch.randn(3, 4),
        torch.arange(5),
        torch.ones(2, dtype=torch.bfloat16),
        7,
        2.5,
        float("nan"),
        None,
        "text",
        (1, torch.zeros(1, dtype=torch.float16)),
        [True, torch.float32],
        torch.tensor(3.5),  # a scalar loss: 0-dim
        torch.tensor([True, False]),
        torch.randn(2, dtype=torch.complex64),
        torch.empty(0, 3),
    ]
    back = through(ends, values)
    assert torch.equal(back[0], values[0]) and torch.equal(back[1], values[1]) and back[2].dtype == torch.bfloat16
    assert back[3:5] == [7, 2.5] and back[5] != back[5] and back[6:8] == [None, "text"]
    assert isinstance(back[8], tuple) and back[8][1].dtype == torch.float16
    assert back[9] == [True, torch.float32]
    assert back[10].shape == () and back[10].item() == 3.5
    assert back[11].dtype == torch.bool and back[11].tolist() == [True, False]
    assert torch.equal(back[12], values[12]) and back[13].shape == (0, 3)


def test_tensors_arrive_with_their_own_storage(ends):
    base = torch.arange(10.0)
    back = through(ends, [base[:5], base[5:]])
    assert torch.equal(back[0], base[:5]) and torch.equal(back[1], base[5:])
    back[0].zero_()  # a read is a copy: the channel and the sender's tensor are untouched
    assert torch.equal(through(ends, [base])[0], base)


def test_unsupported_values_are_refused():
    with pytest.raises(TypeError):
        wire.pack_values([object()])


def test_an_oversized_header_is_refused_before_reading():
    r, w = os.pipe()
    os.write(w, struct.pack("<4sI", wire.MAGIC, 10**9) + b"{}")
    with pytest.raises(wire.FrameTooLarge):
        wire.read_frame(r)
    os.close(r)
    os.close(w)


@pytest.mark.parametrize(
    "payload",
    [
        b"NOPE" + b"\0" * 12,
        struct.pack("<4sI", b"KJW2", 5) + b"[1,2]",
        struct.pack("<4sI", b"KJW2", 4) + b"\xff\xfe{}",
    ],
)
def test_malformed_frames_are_refused(payload):
    r, w = os.pipe()
    os.write(w, payload)
    os.close(w)
    with pytest.raises(wire.WireError):
        wire.read_frame(r)
    os.close(r)


def test_a_pickle_in_a_channel_is_only_bytes(ends):
    import pickle

    class Boom:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    data = torch.frombuffer(bytearray(pickle.dumps(Boom())), dtype=torch.uint8)
    described = ends[0].write("candidate_in", {"t0": data})
    assert torch.equal(ends[1].read(described["t0"]), data)  # read back as bytes, never loaded
    with pytest.raises(channel.ChannelError, match="unsupported dtype"):
        ends[1].read({**described["t0"], "dtype": "object"})


@pytest.mark.parametrize(
    "change, why",
    [
        ({"offset": (1 << 24) - 8}, "outside"),
        ({"nbytes": 7}, "do not hold"),
        ({"shape": [-1]}, "malformed shape"),
        ({"shape": [1] * 17}, "malformed shape"),
        ({"offset": -4096}, "malformed offset"),
        ({"channel": "reference_out"}, "no channel"),
    ],
)
def test_forged_descriptions_are_refused(ends, change, why):
    described = ends[0].write("candidate_in", {"t0": torch.zeros(4)})["t0"]
    with pytest.raises(channel.ChannelError, match=why):
        ends[1].read({**described, **change})


def test_a_read_only_end_cannot_write(ends):
    with pytest.raises(channel.ChannelError, match="writable"):
        ends[1].write("candidate_in", {"t0": torch.zeros(4)})
    import mmap

    read_only = ends[1].endpoints["candidate_in"].fd
    with pytest.raises(PermissionError):  # the descriptor itself refuses a shared writable mapping
        mmap.mmap(read_only, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)


def test_a_cap_on_the_tensors_a_value_names(ends):
    tree, described = ends[0].put("candidate_in", [torch.zeros(1024)])
    with pytest.raises(channel.ChannelError, match="exceed the cap"):
        ends[1].get(tree, described, max_bytes=1000)


def test_unknown_tensor_reference_is_refused():
    with pytest.raises(wire.WireError):
        wire.unpack_values([{"tensor": "t9"}], {})
    with pytest.raises(wire.WireError):
        wire.unpack_values([{"__reduce__": "os.system"}], {})


def test_read_times_out():
    r, w = os.pipe()
    with pytest.raises(wire.PeerTimeout):
        wire.read_frame(r, deadline=__import__("time").monotonic() + 0.2)
    os.close(r)
    os.close(w)


def test_a_strided_tensor_keeps_its_layout_and_its_gaps_hold_nan(ends):
    fused = torch.randn(4, 30)
    view, transposed = fused[:, 10:20], torch.randn(3, 5).t()
    back = through(ends, [view, transposed, torch.randn(3, 1).expand(3, 4)])
    assert back[0].stride() == (30, 1) and torch.equal(back[0], view)
    assert back[1].stride() == (1, 5) and torch.equal(back[1], transposed)
    assert back[2].is_contiguous()  # an expand overlaps itself: it travels dense
    storage = torch.as_strided(back[0], (back[0].untyped_storage().nbytes() // 4,), (1,), 0)
    assert storage.isnan().sum() == storage.numel() - view.numel()  # everything between the rows


@pytest.mark.parametrize(
    "strides, why",
    [([1, 1], "overlap"), ([10**9, 1], "reach more"), ([-1, 1], "malformed"), ([1], "malformed"), ("x", "malformed")],
)
def test_forged_strides_are_refused(strides, why):
    tensors = {"t0": torch.zeros(4, 3)}
    with pytest.raises(wire.WireError, match=why):
        wire.unpack_values([{"tensor": "t0", "strides": strides}], tensors)


def test_packed_and_unpacked_tensors_are_freed_by_reference_counting_alone():
    """No reference cycle holds what crossed a channel: with the cyclic collector off, a tensor packed and
    unpacked is gone once its last user drops it (a cycle kept every output a worker sent or read alive until
    the collector ran: ten to sixteen times a KernelBench output on an H200)."""
    import gc
    import weakref

    import torch

    from kerneljudge.protocol.wire import pack_values, unpack_values

    gc.collect()
    gc.disable()
    try:
        t = torch.zeros(1024)
        alive = weakref.ref(t)
        tree, tensors = pack_values([(t, {"w": t}), 1.0])
        back = unpack_values(tree, tensors)
        assert back[0][0] is t and back[0][1]["w"] is t
        del t, tree, tensors, back
        assert alive() is None
    finally:
        gc.enable()


def test_a_kept_output_is_copied_into_storage_made_ahead_with_its_layout():
    """A timed call's kept output is copied into a nest made like it before the seal (worker/seal/timed_outputs.py,
    worker/seal/sample.py): the same values, layout and structure, in the storage made ahead."""
    import torch

    from kerneljudge.worker.seal.sample import copy_kept
    from kerneljudge.worker.seal.timed_outputs import empty_alike

    value = (torch.arange(6.0).reshape(2, 3).t(), [torch.ones(2, dtype=torch.int32)])
    into = empty_alike(value)
    assert copy_kept(into, value)
    assert into[0].stride() == value[0].stride() and torch.equal(into[0], value[0])
    assert isinstance(into[1], list) and torch.equal(into[1][0], value[1][0])
    value[0].add_(1)  # the copy is its own storage
    assert not torch.equal(into[0], value[0])


def test_frames_cross_descriptors_numbered_past_select_s_limit():
    """A judge with many workers holds descriptors past 1024, where select refuses: frames are waited on by poll."""
    allow_descriptors_past(1501)
    r, w = os.pipe()
    high_r, high_w = os.dup2(r, 1500), os.dup2(w, 1501)
    os.close(r)
    os.close(w)
    try:
        assert not wire.ready(high_r, 0)  # nothing written yet
        wire.write_frame(high_w, {"op": "x"}, time.monotonic() + 5)
        assert wire.ready(high_r, 0)
        assert wire.read_frame(high_r, time.monotonic() + 5) == {"op": "x"}
        os.close(high_w)
        assert wire.ready(high_r, 0)  # hung up: a read would say so at once
    finally:
        os.close(high_r)
