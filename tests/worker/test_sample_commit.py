"""The commit of a checked sample (worker/seal/commit.py): every call's output digested as commit_digest.digest
digests one tensor, many at a time where they are small, and the `committed` frame as the parent reads it."""

from __future__ import annotations

import os

import pytest
import torch

from kerneljudge.protocol import wire
from kerneljudge.worker.seal import commit as sample_commit
from kerneljudge.worker.seal import digest as commit_digest


def single(outputs):
    """The digests commit_digest.digest takes of each call's output, one tensor at a time."""
    return [[list(commit_digest.digest(t)) for t in sample_commit.tensors_of(value)] for value in outputs]


@pytest.mark.parametrize(
    "make",
    [
        lambda i: torch.randn(16, 33) + i,  # float32, one stack
        lambda i: torch.randn(7, dtype=torch.float16) * i,  # an odd number of 16-bit words: bytes
        lambda i: torch.randn(6, 5)[:, :3] - i,  # not contiguous
        lambda i: torch.arange(5, dtype=torch.int64) * i,
        lambda i: torch.rand(9) > 0.5,  # bool
        lambda i: torch.empty(0, 3),  # nothing
        lambda i: (torch.full((3,), float(i)), [torch.ones(2, dtype=torch.int8) * i]),  # a nest
    ],
)
def test_each_calls_digests_are_commit_digests_of_its_tensors(make):
    outputs = [make(i) for i in range(5)]
    assert sample_commit.commit_digests(outputs) == single(outputs)


def test_outputs_past_one_stack_are_digested_in_several_and_alone_where_each_is_larger(monkeypatch):
    outputs = [torch.randn(64) * i for i in range(7)]
    expected = single(outputs)
    stacked, reads = [], []
    real, real_settled = commit_digest.stacked_pending, commit_digest.settled
    monkeypatch.setattr(commit_digest, "stacked_pending", lambda group: stacked.append(len(group)) or real(group))
    monkeypatch.setattr(commit_digest, "settled", lambda items: reads.append(len(items)) or real_settled(items))
    monkeypatch.setattr(sample_commit, "STACK_BYTES", 3 * 64 * 4)
    assert sample_commit.commit_digests(outputs) == expected and stacked == [3, 3, 1]
    assert reads == [7]  # every output's digest read from the device at once
    stacked.clear()
    reads.clear()
    monkeypatch.setattr(sample_commit, "STACK_BYTES", 100)  # each output larger: commit_digest.pending alone
    assert sample_commit.commit_digests(outputs) == expected and stacked == [] and reads == [7]


def test_a_changed_word_in_any_call_changes_that_calls_digest_only():
    outputs = [torch.randn(100) for _ in range(4)]
    before = sample_commit.commit_digests(outputs)
    outputs[2][57] = torch.nextafter(outputs[2][57], torch.tensor(float("inf")))
    after = sample_commit.commit_digests(outputs)
    assert [a == b for a, b in zip(before, after, strict=True)] == [True, True, False, True]


def test_the_committed_frame_reads_as_the_parent_reads_frames():
    outputs = [torch.randn(3), (torch.ones(2, dtype=torch.float16), [torch.arange(4)])]
    digests = sample_commit.commit_digests(outputs)
    read, write = os.pipe()
    try:
        sample_commit.write_committed(write, 12, digests)
        assert wire.read_frame(read) == {"type": "committed", "sample": 12, "digests": digests}
        sample_commit.write_committed(write, 0, [])
        assert wire.read_frame(read) == {"type": "committed", "sample": 0, "digests": []}
    finally:
        os.close(read)
        os.close(write)
