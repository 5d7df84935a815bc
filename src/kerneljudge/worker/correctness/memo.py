"""A group's reference keeps its trials' outputs for the group's next judgments (judgment/group.py).

A group's candidates meet the same hidden plan, so each candidate's judgment asks the group's reference worker for
the same trials: the same seeds, distributions and random states, at the same shapes, after the same loads. The
reference's and the float64 oracle's outputs of a trial are then what they were for the candidate before; the
worker keeps them (`OutputMemo`) and answers the next judgment's trial from them instead of running both again. The
inputs are still made and placed anew for every candidate (each candidate worker gets its own, and the kept copy
its checks use is its own), so only the two forwards are saved: the oracle's float64 forward is most of a trial's
reference work on the GPU.

What keeps a kept output the one a run would give:
- the key is everything the trial's outputs follow from: the load it comes after (the seed and the shape it built
  the model at), how many forwards the model ran since that load (a reference with state of its own, a counter or
  running statistics, gives the same outputs only after the same calls), the trial's seed, asked distribution,
  random state, whether the oracle runs and where the inputs are made;
- trials in training mode and task screening's swapped inputs are never kept (they exist to see what changes);
- the worker serves one group (the parent starts a fresh one for the next: judgment/stages/shared_reference.py),
  so nothing kept outlives its group, and a single judgment's reference is asked to keep nothing (`Load.keep` 0).
The outputs are kept on the device, up to `Load.keep` bytes (the gate reserves them with the group's reference);
past that a trial runs as it always did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kerneljudge.worker.base import items_of


@dataclass
class Kept:
    """One trial's outputs as its run left them, and what that run set on the worker."""

    out: Any
    observed: dict[str, Any]
    oracle_out: Any
    variant: dict[str, Any]
    oracle_dtype: str | None
    draws_random: bool
    no_oracle: str | None
    forwards: int  # the model's forwards since the load, after the run


class OutputMemo:
    """The trials' outputs a group's reference keeps, by key (module docstring)."""

    def __init__(self) -> None:
        self.kept: dict[tuple[Any, ...], Kept] = {}
        self.bytes = 0
        self.budget = 0
        self.load: tuple[Any, ...] = ()
        self.forwards = 0  # the model's forwards since the last load
        self.hits = 0

    def loaded(self, seed: int, shape: dict[str, Any] | None, keep: int) -> None:
        """A load built the model anew: forwards count from here; `keep` bytes may be kept (none forgets all)."""
        self.load = (seed, json.dumps(shape, sort_keys=True))
        self.forwards = 0
        self.budget = max(0, int(keep))
        if not self.budget:
            self.kept, self.bytes = {}, 0

    def key(self, request: Any) -> tuple[Any, ...] | None:
        """The trial's key, or None where its outputs are not kept (nothing may be, training mode, a swap)."""
        if not self.budget or request.train or request.swap:
            return None
        variant = json.dumps(request.variant or {"kind": "standard"}, sort_keys=True)
        asked = (request.seed, variant, request.call_seed, request.rng_seed, bool(request.oracle), request.on_device)
        return (self.load, self.forwards, *asked)

    def find(self, key: tuple[Any, ...] | None) -> Kept | None:
        found = self.kept.get(key) if key is not None else None
        if found is not None:
            self.hits += 1
            self.forwards = found.forwards
        return found

    def keep(self, key: tuple[Any, ...] | None, kept: Kept, torch: Any) -> None:
        """Keep a trial's outputs where its key allows and they fit what is left of the budget."""
        if key is None or key in self.kept:
            return
        size = sum(
            x.numel() * x.element_size()
            for value in (kept.out, kept.oracle_out)
            for x in items_of(value)
            if isinstance(x, torch.Tensor)
        )
        if self.bytes + size <= self.budget:
            self.kept[key] = kept
            self.bytes += size
