"""The channels' registered heads on CUDA (protocol/pinned.py), with the driver's registration: device tensors
cross a head both ways, read-only where the reader holds the channel read-only, and a write that lands where
an earlier one did is read fresh (a registration that had pinned pages the file no longer held would move the
old bytes), in one process and across two, as a candidate worker writes and the reference worker reads; and a
reader's registration that ran past the bytes written (a grain is registered whole) sees what is written
there later through windows, as the parent writes a worker's inbox."""

import json
import os
import subprocess
import sys

import pytest
import torch

from kerneljudge.protocol import channel, pinned

pytestmark = pytest.mark.gpu

READER = r"""
import json, sys, torch
from kerneljudge.worker import channel
reader = channel.Channels([channel.Endpoint.parse(sys.argv[1])], heads=True)
for line in sys.stdin:
    got = reader.read(json.loads(line), device="cuda")
    print(json.dumps({"sum": int(got.to(torch.int64).sum()), "heads": reader.heads.state()}), flush=True)
"""


@pytest.fixture
def ends():
    writer = channel.create("candidate_out", pinned.HEAD_BYTES)
    reader = channel.reader(writer)
    yield writer, reader
    for end in (writer, reader):  # a Channels holding one of these closed it already
        try:
            os.close(end.fd)
        except OSError:
            pass


def payload(seed: int, numel: int = 40 * 2**20) -> torch.Tensor:
    """160 MiB of float32 on the device: ten grains of the head."""
    return torch.randn(numel, generator=torch.Generator(device="cuda").manual_seed(seed), device="cuda")


def test_device_tensors_cross_a_head_and_a_second_write_is_read_fresh(ends):
    writer, reader = ends
    sender = channel.Channels([writer], heads=True)
    receiver = channel.Channels([reader], heads=True)
    try:
        for seed in (1, 2):
            sent = payload(seed)
            described = sender.write("candidate_out", {"t": sent})["t"]
            assert torch.equal(receiver.read(described, device="cuda"), sent)
            host = torch.frombuffer(bytearray(os.pread(writer.fd, described["nbytes"], 0)), dtype=torch.float32)
            assert torch.equal(host, sent.cpu())  # the file holds what the device wrote: the parent reads it so
        for heads, read_only in ((sender.heads, False), (receiver.heads, True)):
            state = heads.state()["candidate_out"]
            assert state["failed"] is None and state["registered"] >= 160 * 2**20, (read_only, state)
    finally:
        sender.close()
        receiver.close()


def test_another_process_reads_each_write_fresh(ends):
    writer, reader = ends
    sender = channel.Channels([writer], heads=True)
    argument = f"{reader.name}:{reader.fd}:ro:{reader.capacity_bytes}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", READER, argument],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=[reader.fd],
        env=env,
    )
    try:
        for seed in (3, 4, 5):
            sent = (payload(seed) * 1000).to(torch.int32)
            described = sender.write("candidate_out", {"t": sent})["t"]
            child.stdin.write(json.dumps(described) + "\n")
            child.stdin.flush()
            answer = json.loads(child.stdout.readline())
            assert answer["sum"] == int(sent.to(torch.int64).sum()), seed
            assert answer["heads"]["candidate_out"]["failed"] is None, answer
    finally:
        child.stdin.close()
        child.wait(timeout=60)
        sender.close()


def test_bytes_written_later_where_a_registration_ran_ahead_are_read_fresh(ends):
    """The reader registers a whole grain when it reads a small tensor at its start, pinning pages nobody had
    written yet; the parent (no heads: windows) then writes another tensor inside that grain. The reader must
    see it: the pages it pinned are the file's, not a zero page of its own."""
    writer, reader = ends
    parent = channel.Channels([writer])  # the parent's way: windows mapped per copy
    receiver = channel.Channels([reader], heads=True)
    try:
        first = parent.write("candidate_out", {"t": torch.arange(1024.0)})["t"]
        assert torch.equal(receiver.read(first, device="cuda").cpu(), torch.arange(1024.0))
        assert receiver.heads.state()["candidate_out"]["registered"] == pinned.GRAIN  # past the 4 KiB written
        later = torch.randn(2**20)  # 4 MiB at 8 MiB: inside the registered grain, never written before
        described = parent.write("candidate_out", {"t": later}, start=8 * 2**20)["t"]
        assert torch.equal(receiver.read(described, device="cuda").cpu(), later)
    finally:
        receiver.close()
