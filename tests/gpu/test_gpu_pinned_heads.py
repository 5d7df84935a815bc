"""The channels' registered heads on CUDA (worker/pinned.py), with the driver's registration: device tensors
cross a head both ways, read-only where the reader holds the channel read-only, and a write that lands where
an earlier one did is read fresh (a registration that had pinned pages the file no longer held would move the
old bytes), in one process and across two, as a candidate worker writes and the reference worker reads."""

import json
import os
import subprocess
import sys

import pytest
import torch

from kerneljudge.worker import channel, pinned

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
