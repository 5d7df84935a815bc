"""worker/seal/digest_kernels.py's two kernels emulated by torch's operators, for the CPU: what each computes, word for
word as its CUDA source says, so that commit_digest.fused_sums (the steps, their tails and padding) is tested where no
GPU is (the source itself runs in tests/gpu/test_gpu_digest_graphs.py)."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import _disable_current_modes

from kerneljudge.worker.seal import digest as commit_digest

combine = commit_digest.combine


def leaves(views, group, seed, start, packed, count):
    with _disable_current_modes():  # a test recording the digest's operators sees the kernel as one launch
        nodes, parts = [], torch.zeros_like(views[0])
        for k, words in enumerate(views):
            index = group * 4 + k
            inside = index < count
            nodes.append(
                torch.where(inside, commit_digest.mix(words ^ (index * commit_digest.GOLDEN + seed)), commit_digest.PAD)
            )
            if packed:
                low, high, at = ((words & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000, words >> 32, start + 2 * index
                part = low * (2 * at + 1) + high * (2 * at + 3)
            else:
                part = words * (2 * (start + index) + 1)
            parts = parts + torch.where(inside, part, 0)
        return combine(combine(nodes[0], nodes[1], 1), combine(nodes[2], nodes[3], 1), 2), parts


def levels(views, level):
    with _disable_current_modes():
        pairs = [combine(views[k], views[k + 1], level) for k in range(0, 8, 2)]
        return combine(combine(pairs[0], pairs[1], level + 1), combine(pairs[2], pairs[3], level + 1), level + 2)


def install(monkeypatch, kernels) -> None:
    """Route commit_digest's CPU digests through the emulated kernels."""
    monkeypatch.setattr(kernels, "leaves", leaves)
    monkeypatch.setattr(kernels, "levels", levels)
    monkeypatch.setattr(kernels, "usable", lambda t: True)
    monkeypatch.setattr(commit_digest, "_fused_refused", set())
