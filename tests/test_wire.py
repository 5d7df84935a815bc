"""The wire format: values round-trip, frames are capped, garbage is refused, nothing is unpickled."""

import os
import struct
import threading

import pytest
import torch

from kerneljudge.worker import wire


def roundtrip(header, blob=b"", max_blob_bytes=1 << 30):
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (wire.write_frame(w, header, blob), os.close(w)))
    writer.start()
    try:
        return wire.read_frame(r, max_blob_bytes)
    finally:
        writer.join()
        os.close(r)


def test_values_round_trip_with_tensors_of_every_common_dtype():
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
    ]
    tree, tensors = wire.pack_values(values)
    header, blob = roundtrip({"values": tree}, wire.encode_tensors(tensors))
    back = wire.unpack_values(header["values"], wire.decode_tensors(blob))
    assert torch.equal(back[0], values[0]) and torch.equal(back[1], values[1]) and back[2].dtype == torch.bfloat16
    assert back[3:5] == [7, 2.5] and back[5] != back[5] and back[6:8] == [None, "text"]
    assert isinstance(back[8], tuple) and back[8][1].dtype == torch.float16
    assert back[9] == [True, torch.float32]


def test_tensors_arrive_with_their_own_storage():
    base = torch.arange(10.0)
    _, tensors = wire.pack_values([base[:5], base[5:]])
    decoded = wire.decode_tensors(wire.encode_tensors(tensors))
    assert torch.equal(decoded["t0"], base[:5]) and torch.equal(decoded["t1"], base[5:])


def test_unsupported_values_are_refused():
    with pytest.raises(TypeError):
        wire.pack_values([object()])


def test_oversized_blob_is_refused_before_reading():
    r, w = os.pipe()
    os.write(w, struct.pack("<4sIQ", wire.MAGIC, 2, 10**12) + b"{}")
    with pytest.raises(wire.FrameTooLarge):
        wire.read_frame(r, max_blob_bytes=1024)
    os.close(r)
    os.close(w)


@pytest.mark.parametrize(
    "payload",
    [
        b"NOPE" + b"\0" * 12,
        struct.pack("<4sIQ", b"KJW1", 5, 0) + b"[1,2]",
        struct.pack("<4sIQ", b"KJW1", 4, 0) + b"\xff\xfe{}",
    ],
)
def test_malformed_frames_are_refused(payload):
    r, w = os.pipe()
    os.write(w, payload)
    os.close(w)
    with pytest.raises(wire.WireError):
        wire.read_frame(r, max_blob_bytes=1024)
    os.close(r)


def test_a_pickle_in_the_blob_is_not_unpickled():
    import pickle

    class Boom:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(wire.WireError):
        wire.decode_tensors(pickle.dumps(Boom()))


def test_unknown_tensor_reference_is_refused():
    with pytest.raises(wire.WireError):
        wire.unpack_values([{"tensor": "t9"}], {})
    with pytest.raises(wire.WireError):
        wire.unpack_values([{"__reduce__": "os.system"}], {})


def test_read_times_out():
    r, w = os.pipe()
    with pytest.raises(wire.PeerTimeout):
        wire.read_frame(r, 1024, deadline=__import__("time").monotonic() + 0.2)
    os.close(r)
    os.close(w)


def test_a_strided_tensor_keeps_its_layout_and_its_gaps_hold_nan():
    fused = torch.randn(4, 30)
    view, transposed = fused[:, 10:20], torch.randn(3, 5).t()
    tree, tensors = wire.pack_values([view, transposed, torch.randn(3, 1).expand(3, 4)])
    back = wire.unpack_values(tree, wire.decode_tensors(wire.encode_tensors(tensors)))
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
