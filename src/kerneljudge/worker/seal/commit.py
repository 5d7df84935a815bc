"""The commit of a checked sample: the digests of every call's output, sent before the parent names the call it
checks (judgment/stages/kept_call.py; H03 by H21).

The seal (worker/seal/sample.py) looks for code of the candidate's that could run between a sample's end and the
copy of its named output; but the seal is this process's own objects, and a candidate that reaches them can
blind them (the red team's `seal_state_forger`: its methods shadowed on the seal object, PASS verified by 0.3.8).
So the parent does not rely on it alone: for the sample whose call it will check, it asks first for the digests of
every call's output of that sample (`commit`), and names the call only once they are with it. The reference's
worker takes the digests again of the copy it is sent (worker/correctness/compare.py, method `timed`), and they must
be the committed ones: an output mended after the call is named no longer matches, and one mended before must be every
call's of the sample, a sample's whole work in the time the parent's clock sees between `commit` and `committed`
(judgment/stages/untimed_work.py). The digests are worker/seal/digest.py's (since 0.3.11: evidence.digest's linear sums
could be restored after a mend), taken many outputs at a time where they are small.
"""

from __future__ import annotations

from typing import Any

import torch

from kerneljudge.protocol import wire
from kerneljudge.worker import evidence
from kerneljudge.worker.seal import digest as commit_digest
from kerneljudge.worker.seal import timed_outputs

# At most this many bytes of outputs are digested in one stack (its int64 words take twice that).
STACK_BYTES = evidence.DIGEST_BYTES


def tensors_of(value: Any) -> list[torch.Tensor]:
    """The tensors of one call's output nest, in order, read as timed_outputs.items reads a call's output."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in timed_outputs.items(value) for t in tensors_of(item)]
    return []


def commit_digests(outputs: list[Any]) -> list[list[list[Any]]]:
    """The digests of each call's output (a list per call, one digest per tensor of its nest), as commit_digest.digest
    takes them of one tensor: outputs alike and small are digested a stack at a time, and all are read with one wait
    for the device (commit_digest.settled)."""
    flat = [(call, t) for call, value in enumerate(outputs) for t in tensors_of(value)]
    found: dict[int, Any] = {}
    groups: dict[tuple[Any, ...], list[int]] = {}
    for position, (_, t) in enumerate(flat):
        nbytes = t.numel() * t.element_size()
        if nbytes == 0 or nbytes > STACK_BYTES:
            found[position] = commit_digest.pending(t)
        else:
            groups.setdefault((t.dtype, t.numel(), t.device), []).append(position)
    for positions in groups.values():
        per_stack = max(1, STACK_BYTES // (flat[positions[0]][1].numel() * flat[positions[0]][1].element_size()))
        for start in range(0, len(positions), per_stack):
            chunk = positions[start : start + per_stack]
            found.update(zip(chunk, commit_digest.stacked_pending([flat[p][1] for p in chunk]), strict=True))
    digests = commit_digest.settled([found[position] for position in range(len(flat))])
    per_call: list[list[list[Any]]] = [[] for _ in outputs]
    for (call, _), taken in zip(flat, digests, strict=True):
        per_call[call].append(list(taken))
    return per_call


def warm(device: Any) -> None:
    """Run the commit once on a few bytes of `device`: the first use of its operators in a process costs tens of
    milliseconds on the CPU, and on a CUDA device the fused kernels' build (commit_digest.warm) more, which the
    parent's clock would otherwise see in one side's first commit."""
    commit_digest.warm(torch.device(device))
    commit_digests([torch.zeros(4, device=device), torch.ones(4, device=device), torch.zeros(0, device=device)])


def committed_frame(sample: int, digests: list[list[list[Any]]]) -> bytes:
    """The `committed` frame (its prefix and header) for `sample`: made by hand, its values ints and dtype names."""
    calls = b",".join(
        b"[" + b",".join(b'[%d,"%s",%d,%d]' % (n, dtype.encode(), a, b) for n, dtype, a, b in call) + b"]"
        for call in digests
    )
    header = b'{"type": "committed", "sample": %d, "digests": [%s]}' % (sample, calls)
    return wire.PREFIX.pack(wire.MAGIC, len(header)) + header


def write_committed(fd: int, sample: int, digests: list[list[list[Any]]]) -> None:
    wire._write_all(fd, committed_frame(sample, digests), None)  # the frame written whole, as write_frame writes
