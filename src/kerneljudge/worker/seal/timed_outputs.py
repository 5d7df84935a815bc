"""What the worker looks at in a timed sample's outputs before it copies the one the parent named
(worker/timing/timer.py,
judgment/stages/kept_call.py): each a plain tensor (a subclass can answer the copy: H22), all made alike (a copy into
storage made like the first's hides another precision or layout), the named one not written over by a later call
(outputs in one storage, whose earlier calls cannot be checked one by one).
"""

from __future__ import annotations

from typing import Any

import torch

from kerneljudge.worker.evidence import live_spans, overlaps

# The named tuples torch's own functions return (torch.return_types.geqrf: GPU MODE's QR), the one kind of tuple
# subclass an output may be; taken at import, before any candidate code runs.
RETURN_TYPES = frozenset(c for c in vars(torch.return_types).values() if isinstance(c, type) and issubclass(c, tuple))


def items(out: Any) -> list[Any]:
    """The items of one call's output (a tensor, or a tuple or list of them), read by the built-in types' own
    iterators: no `__iter__` or `__len__` of a subclass runs (a container that computes as it is read, H22)."""
    if isinstance(out, tuple):
        return list(tuple.__iter__(out))
    if isinstance(out, list):
        return list(list.__iter__(out))
    return [out]


def kind(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


def not_plain(outputs: list[Any]) -> str | None:
    """The type of the first output of `outputs` that is a tuple or list of another class than the built-in ones
    (torch's named tuples aside), or of the first item that is a tensor but not exactly a `torch.Tensor` (a subclass
    can compute, or answer, when it is read or copied: H22), or None."""
    for out in outputs:
        if isinstance(out, (tuple, list)) and type(out) not in (tuple, list) and type(out) not in RETURN_TYPES:
            return kind(out)
        for item in items(out):
            if isinstance(item, torch.Tensor) and type(item) is not torch.Tensor:
                return kind(item)
    return None


def unlike(outputs: list[Any]) -> list[str] | None:
    """Where the outputs of one sample's calls differ in structure from the first's: [what, detail] (what: container,
    dtype, shape, stride or device), or None. A call of a sample that answered in another precision or layout would
    otherwise be hidden by a copy into storage made like the first's (a graph's kept output, worker/timing/timer.py)."""
    first = items(outputs[0]) if outputs else []
    for call, out in enumerate(outputs[1:], start=1):
        these = items(out)
        if type(out) is not type(outputs[0]) or len(these) != len(first):
            return ["container", f"call {call} answered {type(out).__name__} of {len(these)}"]
        for a, b in zip(first, these, strict=True):
            if not isinstance(b, torch.Tensor) or not isinstance(a, torch.Tensor):
                continue
            for what, mine, theirs in (
                ("dtype", b.dtype, a.dtype),
                ("shape", tuple(b.shape), tuple(a.shape)),
                ("stride", b.stride(), a.stride()),
                ("device", b.device, a.device),
            ):
                if mine != theirs:
                    return [what, f"call {call}'s output has {what} {mine}, call 0's {theirs}"]
    return None


def call_spans(outputs: list[Any], besides: tuple[Any, ...] | list[Any] = ()) -> list[list[tuple[int, int]]]:
    """The storage spans of each call's output (one tensor, or a tuple or list of them), as plain integers taken
    before the seal (worker/seal/sample.py), those that lie in the storage of one of `besides` left out (a view of
    an input: two calls on one input set return views of one storage, and no call writes there)."""
    inputs = live_spans(list(besides))

    def spans(value: Any) -> list[tuple[int, int]]:
        return [a for a in live_spans(items(value)) if not any(overlaps(a, b) for b in inputs)]

    return [spans(out) for out in outputs]


def written_over(spans: list[list[tuple[int, int]]], call: int) -> bool:
    """Whether call `call`'s output lies where a later call of its sample put its own (`call_spans`)."""
    return any(overlaps(a, b) for later in spans[call + 1 :] for a in spans[call] for b in later)


def empty_alike(out: Any) -> Any:
    """Storage for a copy of `out` (a tensor, or a tuple or list of them, all plain: `not_plain`), each made with
    its dtype, shape, strides and device, a named tuple's as a plain tuple (a tuple to the parent's check too);
    anything else in the nest as it is."""
    if isinstance(out, torch.Tensor):
        return torch.empty_strided(out.shape, out.stride(), dtype=out.dtype, device=out.device)
    if isinstance(out, (tuple, list)):
        made = [empty_alike(item) for item in items(out)]
        return made if isinstance(out, list) else tuple(made)
    return out
