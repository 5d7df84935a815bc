"""The commit's digest (worker/seal/digest.py): splitmix64's finaliser and the tree over a tensor's words, as a
plain Python model of them computes them; any one word changed changes the root; a large tensor's pieces and a
stack of small ones digest as one tensor does."""

from __future__ import annotations

import random

import pytest
import torch

from kerneljudge.worker import evidence
from kerneljudge.worker.seal import digest as commit_digest
from kerneljudge.worker.seal import digest_graphs

MASK = (1 << 64) - 1


def mix_model(x: int) -> int:
    x &= MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def combine_model(left: int, right: int, level: int) -> int:
    node = ((left * 0xD6E8FEB86659FD93) & MASK) ^ (right & MASK) ^ level
    return ((node ^ (node >> 29)) * 0xBF58476D1CE4E5B9) & MASK


def pack_model(words: list[int]) -> list[int]:
    """Two 32-bit words to a 64-bit leaf, little-endian, where they pair up."""
    if len(words) % 2:
        return words
    return [(lo & 0xFFFFFFFF) | ((hi & 0xFFFFFFFF) << 32) for lo, hi in zip(words[0::2], words[1::2], strict=True)]


def root_model(words: list[int], seed: int = 0) -> int:
    if not words:
        return 0
    nodes = [mix_model((w & MASK) ^ ((i * 0x9E3779B97F4A7C15 + seed) & MASK)) for i, w in enumerate(words)]
    level = 1
    while len(nodes) > 1:
        step = 2 if level == 1 else 3  # two levels from the leaves, then three a step, each padded to whole groups
        nodes += [0x5851F42D4C957F2D] * (-len(nodes) % (1 << step))
        for _ in range(step):
            nodes = [combine_model(a, b, level) for a, b in zip(nodes[0::2], nodes[1::2], strict=True)]
            level += 1
    return nodes[0]


def test_mix_is_splitmix64s_finaliser():
    values = [0, 1, 2**63, MASK, 0x0123456789ABCDEF] + [random.Random(7).getrandbits(64) for _ in range(50)]
    signed = torch.tensor([commit_digest._signed(v) for v in values], dtype=torch.int64)
    assert [v % 2**64 for v in commit_digest.mix(signed).tolist()] == [mix_model(v) for v in values]


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 8, 9, 33, 36, 37])
def test_the_tree_root_is_the_models(size):
    words = [random.Random(size).randrange(-(2**31), 2**31) for _ in range(size)]
    root = commit_digest.tree_root(torch.tensor(words, dtype=torch.int64).reshape(1, size))
    assert [r % 2**64 for r in root.tolist()] == [root_model(words)]


@pytest.mark.parametrize(
    "t",
    [
        torch.randn(8),
        torch.randn(7),
        torch.randn(5, dtype=torch.float16),
        torch.arange(6, dtype=torch.int64),
        torch.randn(9)[1:],  # its words start four bytes into their storage: no int64 view of them
        torch.randn(3, 5)[:, 1:],  # not contiguous
    ],
)
def test_a_tensors_root_is_the_models_over_its_words_paired_where_they_pair(t):
    words = evidence.digest_words(t)
    leaves = pack_model(words.tolist()) if words.dtype == torch.int32 else words.tolist()  # bytes stay bytes
    assert commit_digest.digest(t)[3] == root_model(leaves)
    assert commit_digest.stacked([t, t])[0] == commit_digest.digest(t)


def test_any_one_word_changed_changes_the_root_and_a_first_sum_kept_does_not_keep_it():
    x = torch.randn(257)
    before = commit_digest.digest(x)
    for position in (0, 1, 128, 255, 256):
        y = x.clone()
        y[position] = torch.nextafter(y[position], torch.tensor(float("inf")))
        assert commit_digest.digest(y)[3] != before[3]
    # Words 0 and 1 moved by -3 and +1 keep evidence.digest's first sum (weights 1 and 3): its second sum is linear
    # too, and a few dozen such moves solved together keep both; the tree's root is not kept.
    words = evidence.digest_words(x).clone()
    words[0] -= 3
    words[1] += 1
    y = words.view(torch.float32)
    assert evidence.digest(y)[2] == evidence.digest(x)[2] and commit_digest.digest(y)[2] == before[2]
    assert commit_digest.digest(y)[3] != before[3]


def test_a_large_tensors_pieces_and_a_stack_of_small_ones_digest_as_one_does(monkeypatch):
    x = torch.randn(1000)
    monkeypatch.setattr(evidence, "DIGEST_BYTES", 4 * 300)  # four pieces
    pieces = commit_digest.digest(x)
    words = evidence.digest_words(x).tolist()
    roots = [root_model(pack_model(words[s : s + 300])) for s in range(0, 1000, 300)]
    assert pieces[3] == root_model([commit_digest._signed(r) for r in roots], 0xA0761D6478BD642F)
    assert pieces[:3] == tuple(evidence.digest(x)[:3])  # the first sum, as evidence.digest's
    y = x.clone()
    y[999] += 1
    assert commit_digest.digest(y)[3] != pieces[3]
    monkeypatch.undo()
    group = [torch.randn(7, 5) * i for i in range(4)]
    assert commit_digest.stacked(group) == [commit_digest.digest(t) for t in group]


def test_off_a_cuda_device_the_digest_runs_eagerly_and_captures_nothing(monkeypatch):
    monkeypatch.setattr(digest_graphs, "_graphs", {})
    t = torch.randn(64)
    assert digest_graphs.replayed("stack", commit_digest.stack_sums, evidence.digest_words(t)[None]).tolist()[0] == [
        commit_digest.first_sum(evidence.digest_words(t).to(torch.int64)).item(),
        commit_digest.tree_root(commit_digest.packed(evidence.digest_words(t))).item(),
    ]
    assert not digest_graphs._graphs


class OnCuda:
    """Words that say they lie on a CUDA device (this machine has none): how `replayed` decides, not its result."""

    device = torch.device("cuda")
    shape, dtype = (4,), torch.int32

    def numel(self):
        return 4

    def element_size(self):
        return 4


def test_with_the_caching_allocator_off_no_graph_is_captured(monkeypatch):
    """A sanitized worker runs with torch's caching allocator off, where a capture fails and leaves the CUDA generator
    in capture mode (every random draw after it raised): there the digest runs eagerly and nothing is captured."""
    assert digest_graphs.capturable({}) and digest_graphs.capturable({"PYTORCH_NO_CUDA_MEMORY_CACHING": "0"})
    assert not digest_graphs.capturable({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    from kerneljudge.judgment.sanitizer import SANITIZED_ENV

    assert not digest_graphs.capturable(SANITIZED_ENV)  # the sanitized worker's own environment

    def capture(compute, words):
        raise AssertionError("captured with the caching allocator off")

    monkeypatch.setattr(digest_graphs, "capture", capture)
    monkeypatch.setattr(digest_graphs, "_graphs", {})
    monkeypatch.setattr(digest_graphs, "CAPTURABLE", False)
    assert digest_graphs.replayed("stack", lambda words: "eager", OnCuda()) == "eager"
    monkeypatch.setattr(digest_graphs, "CAPTURABLE", True)
    with pytest.raises(AssertionError, match="captured"):  # (where it may, it does)
        digest_graphs.replayed("stack", lambda words: "eager", OnCuda())


def test_digests_left_on_the_device_and_read_at_once_are_each_tensors_own(monkeypatch):
    """The commit reads every output's digest in one copy to the host (commit_digest.settled): a mixed lot (no
    bytes, a large tensor's pieces, a stack of small ones, two dtypes) settles to what each tensor's own digest is."""
    large, empty = torch.randn(1000), torch.zeros(0, dtype=torch.float16)
    small = [torch.randn(7, 5) * i for i in range(3)]
    half = torch.randn(9).to(torch.float16)
    monkeypatch.setattr(evidence, "DIGEST_BYTES", 4 * 300)
    expected = [commit_digest.digest(t) for t in (large, empty, *small, half)]
    lot = [commit_digest.pending(large), commit_digest.pending(empty), *commit_digest.stacked_pending(small)]
    lot.append(commit_digest.pending(half))
    assert commit_digest.settled(lot) == expected
    assert expected[1] == (0, "torch.float16", 0, commit_digest.EMPTY)
    assert commit_digest.settled([]) == []
