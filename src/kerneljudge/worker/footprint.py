"""What a task's trial will hold on the device, told before any trial runs.

The reference worker describes the task's inputs, parameters and outputs in bytes without making them: the
task's `get_inputs()` and `Model` are run again on torch's meta device, where tensors have shapes and
dtypes but no storage and every op only works out the shapes of its results. A batch's lanes reserve
device memory by this description before their first trial (kerneljudge/judgment/gate.py), so that two lanes do
not start multi-GiB problems side by side and both run out.

The forward's working set is followed too: every new storage an op makes counts from its making until it is
freed (`LiveBytes`), so a chain of ops (a flip, a cumsum, a flip back) shows the intermediates it holds at once
(`activation_bytes`, the output included), where the output alone would show a third of them.

What cannot run on the meta device (a `.item()`, data-dependent shapes, an extension's own op) leaves that
part unknown (None); a task whose inputs are made on the GPU explicitly (`device="cuda"`, as GPU MODE's
generators do) is measured on the real tensors, which are dropped at once.
"""

from __future__ import annotations

import weakref
from typing import Any


def tensor_bytes(torch: Any, value: Any) -> int:
    """The bytes of every tensor in a nest of tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(tensor_bytes(torch, v) for v in value)
    if isinstance(value, dict):
        return sum(tensor_bytes(torch, v) for v in value.values())
    return 0


def live_bytes(torch: Any) -> Any:
    """A dispatch mode that keeps the most bytes of storage the ops under it made and had alive at once."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class LiveBytes(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.live = self.peak = 0
            self.seen: weakref.WeakSet[Any] = weakref.WeakSet()  # storages counted: views and in-place ops add none

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor):
                    storage = t.untyped_storage()
                    if storage not in self.seen:
                        self.seen.add(storage)
                        self.live += storage.nbytes()
                        self.peak = max(self.peak, self.live)
                        weakref.finalize(storage, self.freed, storage.nbytes())
            return out

        def freed(self, nbytes: int) -> None:
            self.live -= nbytes

    return LiveBytes()


def describe(torch: Any, module: Any, init_inputs: list[Any]) -> dict[str, int | None]:
    """{"input_bytes", "parameter_bytes", "output_bytes", "activation_bytes"} of one call at the task's
    current shape; None where the meta device could not tell. Touches no random state the trials use (the
    meta device draws no numbers, and every trial seeds afresh)."""
    found: dict[str, int | None] = dict.fromkeys(("input_bytes", "parameter_bytes", "output_bytes", "activation_bytes"))
    meta = torch.device("meta")
    try:
        with torch.device(meta), torch.no_grad():
            inputs = list(module.get_inputs())
        found["input_bytes"] = tensor_bytes(torch, inputs)
    except Exception:
        return found
    try:
        with torch.device(meta), torch.no_grad():
            model = module.Model(*init_inputs)
            found["parameter_bytes"] = (
                tensor_bytes(torch, list(model.parameters())) if hasattr(model, "parameters") else 0
            )
            placed = [x.to(meta) if isinstance(x, torch.Tensor) else x for x in inputs]
            watch = live_bytes(torch)
            with watch:
                out = model(*placed)
            found["output_bytes"] = tensor_bytes(torch, out)
            found["activation_bytes"] = max(watch.peak, found["output_bytes"])
    except Exception:
        pass
    return found
