"""The commit's digest (worker/seal/commit.py, and the reference's worker checking a kept copy against it): a
fingerprint of a tensor's bytes that an output mended after the parent names its call cannot be made to match.

`evidence.digest` is two position-weighted sums of the words, modulo 2**64, its weights public and fixed: linear. A
few dozen words moved by a few units in their last bits (within any tolerance) can take its sums anywhere, solved
with a lattice basis reduced before the sample from the public weights alone: a candidate's code left to run between
the name and the copy (the seal blinded, as `seal_state_forger` does) could mend the named output and restore the
committed digests in microseconds, inside the time the parent's clock allows a call (judgment/stages/untimed_work.py;
the residual docs/attacks.md named under H03 until 0.3.11). The commit's digest keeps the first sum and puts a tree in
place of the second: every 64-bit word of the bytes mixed with its position (splitmix64's finaliser, a bijection of
64-bit words), then pairs combined level by level to one root. Nothing linear is left to solve; matching a root from
changed leaves is a meet-in-the-middle search over about 2**32 subtrees, seconds of work where the clock allows a
call's time. A change of any one word changes the root (each step is a bijection in each of its inputs).

The tree is climbed in steps, the first of two levels and each after of three, with the nodes padded before each to
a whole number of its groups, so that on a CUDA device each step is one fused kernel (worker/seal/digest_kernels.py,
since
0.3.14): the operators below define the digest, and the kernels compute it to the bit."""

from __future__ import annotations

from typing import Any

import torch

from kerneljudge.worker import evidence
from kerneljudge.worker.seal import digest_graphs, digest_kernels


def _signed(value: int) -> int:
    """A 64-bit constant as torch's int64 holds it."""
    return value - (1 << 64) if value >= 1 << 63 else value


M1, M2 = _signed(0xBF58476D1CE4E5B9), _signed(0x94D049BB133111EB)  # splitmix64's finaliser
GOLDEN = _signed(0x9E3779B97F4A7C15)  # the leaves' position key
PAIR = _signed(0xD6E8FEB86659FD93)  # a left child's multiplier in a pair
PAD = _signed(0x5851F42D4C957F2D)  # the right child of a level's odd last node
PIECES = _signed(0xA0761D6478BD642F)  # the seed of the tree over a large tensor's pieces' roots
EMPTY = 0
LEAF_LEVELS, STEP_LEVELS = 2, 3  # the levels of the tree's first step, from the leaves, and of each step after it
_fused_refused: set[str] = set()  # "jiterator" once its kernels failed to build or run in this process


def logical_right(x: torch.Tensor, shift: int) -> torch.Tensor:
    """x >> shift with zeros shifted in (torch's int64 shift keeps the sign)."""
    return (x >> shift) & ((1 << (64 - shift)) - 1)


def mix(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finaliser on int64 words, wrapping: a bijection."""
    x = (x ^ logical_right(x, 30)) * M1
    x = (x ^ logical_right(x, 27)) * M2
    return x ^ logical_right(x, 31)


def combine(left: torch.Tensor, right: torch.Tensor, level: int) -> torch.Tensor:
    """A pair's parent: (left * PAIR) ^ right ^ level, then one xorshift-multiply round. For a fixed left it is a
    bijection of the right, and the reverse; half of `mix`'s operators, as every level costs each of its own."""
    node = (left * PAIR) ^ right ^ level
    return (node ^ logical_right(node, 29)) * M1


def padded(nodes: torch.Tensor, multiple: int) -> torch.Tensor:
    """`nodes` with PAD appended to the last dimension up to a multiple of `multiple`."""
    extra = -nodes.shape[-1] % multiple
    if not extra:
        return nodes
    return torch.cat([nodes, nodes.new_full((*nodes.shape[:-1], extra), PAD)], -1)


def tree_root(words: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """The root of the tree over the last dimension of `words` (int64), one per row: the leaves each word mixed
    with its position (`mix`), then steps of LEAF_LEVELS and then STEP_LEVELS levels, the nodes padded with PAD to a
    whole number of the step's groups before it, each level's pairs `combine`d."""
    if words.shape[-1] == 0:
        return words.new_full(words.shape[:-1], EMPTY)
    index = torch.arange(words.shape[-1], device=words.device, dtype=torch.int64)
    nodes = mix(words ^ (index * GOLDEN + seed))
    level = 1
    while nodes.shape[-1] > 1:
        step = LEAF_LEVELS if level == 1 else STEP_LEVELS
        nodes = padded(nodes, 1 << step)
        for _ in range(step):
            nodes = combine(nodes[..., 0::2], nodes[..., 1::2], level)
            level += 1
    return nodes[..., 0]


def grouped(nodes: torch.Tensor, size: int) -> list[list[torch.Tensor]]:
    """Views of the k-th of each `size` nodes (k = 0 .. size - 1) over the last dimension: one list for the whole
    groups, one for the tail padded with PAD to a group, as each step's kernel takes them."""
    whole = nodes.shape[-1] - nodes.shape[-1] % size
    parts = [nodes[..., :whole]] if whole else []
    if whole < nodes.shape[-1]:
        parts.append(padded(nodes[..., whole:], size))
    return [[part[..., k::size] for k in range(size)] for part in parts]


def joined(parts: list[torch.Tensor]) -> torch.Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts, -1)


def fused_sums(leaves: torch.Tensor, start: int, packed_words: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(`first_sum`, `tree_root`) over the last dimension of `leaves` (`packed` words, at least two), by
    worker/seal/digest_kernels.py's kernels: each step's whole groups in one launch and its padded tail in another (the
    tail's padding words are the leaves kernel's PAD leaves, past `count`)."""
    count = leaves.shape[-1]
    groups = torch.arange((count + 3) // 4, device=leaves.device, dtype=torch.int64)
    made, first_group = [], 0
    for views in grouped(leaves, 4):
        width = views[0].shape[-1]
        made.append(
            digest_kernels.leaves(views, groups[first_group : first_group + width], 0, start, packed_words, count)
        )
        first_group += width
    first = joined([part for _, part in made]).sum(-1)
    top, level = joined([node for node, _ in made]), 1 + LEAF_LEVELS
    while top.shape[-1] > 1:
        top = joined([digest_kernels.levels(views, level) for views in grouped(top, 8)])
        level += STEP_LEVELS
    return first, top[..., 0]


def packed(words: torch.Tensor) -> torch.Tensor:
    """The tree's leaves over the last dimension of `words` (evidence.digest_words, contiguous): two 32-bit words to
    each 64-bit leaf where they pair up (half the leaves: half the tree's cost), else each word a leaf."""
    if words.dtype != torch.int32 or words.shape[-1] % 2:
        return words.to(torch.int64)
    if words.storage_offset() % 2 == 0:
        return words.view(torch.int64)
    low, high = words[..., 0::2].to(torch.int64), words[..., 1::2].to(torch.int64)  # a view of int32s off 8 bytes
    return (low & 0xFFFFFFFF) | (high << 32)  # the same leaves, little-endian


def first_sum(words: torch.Tensor, start: int = 0) -> torch.Tensor:
    """evidence.digest's first sum over the last dimension of `words` (int64), the words from position `start`."""
    index = torch.arange(start, start + words.shape[-1], device=words.device, dtype=torch.int64)
    return (words * evidence.digest_weights(index)[0]).sum(-1)


def sums(words: torch.Tensor, start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(`first_sum`, `tree_root`) over the last dimension of `words` (evidence.digest_words), the words from position
    `start`: by the fused kernels on a CUDA device where the jiterator builds them, else by the operators."""
    leaves = packed(words)
    if leaves.shape[-1] > 1 and digest_kernels.usable(leaves) and not _fused_refused:
        try:
            return fused_sums(leaves, start, leaves.shape[-1] != words.shape[-1])
        except Exception:  # no NVRTC, a build or launch that failed: the operators give the same digest
            _fused_refused.add("jiterator")
    return first_sum(words.to(torch.int64), start), tree_root(leaves)


def warm(device: torch.device) -> None:
    """Build the fused kernels on `device` (NVRTC, once a process) when the seal is taken, before any code of the
    candidate's runs (worker/sample_commit.warm), so that no commit's span holds the build: 67 words take both
    kernels' whole groups and tails."""
    if device.type == "cuda":
        sums(torch.zeros(67, dtype=torch.int32, device=device))


def piece_sums(start: int) -> Any:
    """The first sum and the tree root of a piece of words that starts at word `start`, as one int64 pair."""
    return lambda words: torch.stack(sums(words, start))


def stack_sums(rows: torch.Tensor) -> torch.Tensor:
    """The first sum and the tree root of each row of words, one int64 pair a row."""
    return torch.stack(sums(rows), 1)


Pending = tuple[int, str, "torch.Tensor | None"]  # bytes, dtype, the figures on the device (None: no bytes)


def pending(t: torch.Tensor) -> Pending:
    """`digest` of one tensor left on its device: (bytes, dtype, int64 tensor of each piece's first sum and then the
    root, None for no bytes), no wait for the device. A large tensor's pieces' roots are the leaves of one more tree.
    On a CUDA device each piece's sums replay a graph (worker/seal/digest_graphs.py); the stack copies them out of
    the graphs' own outputs, so a later digest of the same shape does not overwrite them."""
    words = evidence.digest_words(t)
    step = evidence.DIGEST_BYTES // words.element_size()
    starts = range(0, words.numel(), step)
    if not starts:
        return (0, str(t.dtype), None)
    # Each piece's graph is its own (its first sum starts at its own word), so the pairs stand until stacked.
    sums = torch.stack([digest_graphs.replayed(("piece", s), piece_sums(s), words[s : s + step]) for s in starts])
    root = sums[0, 1] if len(starts) == 1 else tree_root(sums[:, 1], PIECES)
    return (t.numel() * t.element_size(), str(t.dtype), torch.cat([sums[:, 0], root.reshape(1)]))


def stacked_pending(group: list[torch.Tensor]) -> list[Pending]:
    """`pending` of each of `group` (tensors of one dtype and size, on one device, each within one piece), taken
    together: one stack (on a CUDA device, one graph's replay, its output cloned)."""
    rows = torch.stack([evidence.digest_words(t) for t in group])
    found = digest_graphs.replayed("stack", stack_sums, rows).clone()
    nbytes = group[0].numel() * group[0].element_size()
    return [(nbytes, str(group[0].dtype), found[row]) for row in range(len(group))]


def settled(items: list[Pending]) -> list[tuple[Any, ...]]:
    """The digests (bytes, dtype, first sum, tree root) of `pending` ones, with one wait for the device: their
    figures read in one copy to the host, not one each (each wait would put the host's launches and the device's
    work end to end, a commit's span the longer and the more the process's own host speed; docs/timing.md)."""
    host: dict[int, list[int]] = {}
    by_device: dict[torch.device, list[tuple[int, torch.Tensor]]] = {}
    for index, (_, _, figures) in enumerate(items):
        if figures is None:
            host[index] = [0, EMPTY]
        else:
            by_device.setdefault(figures.device, []).append((index, figures))
    for parts in by_device.values():
        flat, at = torch.cat([figures.reshape(-1) for _, figures in parts]).tolist(), 0
        for index, figures in parts:
            host[index], at = flat[at : at + figures.numel()], at + figures.numel()
    return [
        (nbytes, dtype, sum(host[i][:-1]) % 2**64, host[i][-1] % 2**64) for i, (nbytes, dtype, _) in enumerate(items)
    ]


def digest(t: torch.Tensor) -> tuple[Any, ...]:
    """(bytes, dtype, first sum, tree root) of one tensor, a piece of evidence.DIGEST_BYTES at a time."""
    return settled([pending(t)])[0]


def stacked(group: list[torch.Tensor]) -> list[tuple[Any, ...]]:
    """`digest` of each of `group` (tensors of one dtype and size, on one device, each within one piece), taken
    together: one stack, one wait for the sums and roots."""
    return settled(stacked_pending(group))
