"""The commit's fused digest (worker/seal/digest_kernels.py, driven by commit_digest.fused_sums), its kernels emulated
on the CPU (tests/digest_emulation.py): the operators' first sum and root for every length, padding and packing of words
and rows, a digest and a stack alike; a kernel that fails to build leaves the operators to digest, with the same
values, for the rest of the process."""

from __future__ import annotations

import digest_emulation
import pytest
import torch

from kerneljudge.worker import evidence
from kerneljudge.worker.seal import digest as commit_digest
from kerneljudge.worker.seal import digest_kernels

LENGTHS = [*range(2, 70), 255, 256, 257, 1000, 4097]


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8])
@pytest.mark.parametrize("start", [0, 123_457])
def test_the_fused_steps_give_the_operators_sums_for_every_length(monkeypatch, dtype, start):
    digest_emulation.install(monkeypatch, digest_kernels)
    generator = torch.Generator().manual_seed(5)
    for length in LENGTHS:
        for rows in ((), (3,)):
            words = torch.randint(-(2**31), 2**31, (*rows, length), generator=generator, dtype=torch.int64).to(dtype)
            leaves = commit_digest.packed(words)
            if leaves.shape[-1] < 2:  # one leaf is its own root: commit_digest.sums takes no step for it
                continue
            fused = commit_digest.fused_sums(leaves, start, leaves.shape[-1] != words.shape[-1])
            first = commit_digest.first_sum(words.to(torch.int64), start)
            assert torch.equal(fused[0], first), (length, rows)
            assert torch.equal(fused[1], commit_digest.tree_root(leaves)), (length, rows)


def test_digests_and_stacks_through_the_fused_steps_are_the_operators(monkeypatch):
    tensors = [
        torch.randn(8),
        torch.randn(7),
        torch.randn(5, dtype=torch.float16),
        torch.randn(9)[1:],
        torch.randn(3, 5)[:, 1:],
        torch.randn(1 << 12),
        torch.ones(1),
    ]
    eager = [commit_digest.digest(t) for t in tensors]
    stacked = commit_digest.stacked([t * 2 for t in tensors[:1] * 3])
    digest_emulation.install(monkeypatch, digest_kernels)
    assert [commit_digest.digest(t) for t in tensors] == eager
    assert commit_digest.stacked([t * 2 for t in tensors[:1] * 3]) == stacked
    monkeypatch.setattr(evidence, "DIGEST_BYTES", 4 * 300)  # pieces, each with its own start
    x = torch.randn(1000)
    fused = commit_digest.digest(x)
    monkeypatch.setattr(digest_kernels, "usable", lambda t: False)
    assert fused == commit_digest.digest(x)
    assert not commit_digest._fused_refused


def test_a_kernel_that_fails_to_build_leaves_the_operators_to_digest(monkeypatch):
    x = torch.randn(100)
    before = commit_digest.digest(x)
    digest_emulation.install(monkeypatch, digest_kernels)
    calls = []

    def refused(*args):
        calls.append(args)
        raise RuntimeError("nvrtc: error: failed to open libnvrtc-builtins.so")

    monkeypatch.setattr(digest_kernels, "leaves", refused)
    assert commit_digest.digest(x) == before and commit_digest._fused_refused == {"jiterator"}
    assert commit_digest.digest(x) == before and len(calls) == 1  # not tried again


def test_the_kernels_are_only_for_int64_words_on_a_cuda_device_where_torch_has_the_jiterator():
    assert not digest_kernels.usable(torch.zeros(4, dtype=torch.int64))  # the CPU
    assert ("kj_leaves" in digest_kernels.LEAVES) and ("kj_levels" in digest_kernels.LEVELS)
