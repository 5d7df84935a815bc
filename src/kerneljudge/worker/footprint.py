"""What a task's trial will hold on the device, told before any trial runs.

The reference worker describes the task's inputs, parameters and outputs in bytes without making them: the
task's `get_inputs()` and `Model` are run again on torch's meta device, where tensors have shapes and
dtypes but no storage and every op only works out the shapes of its results. A batch's lanes reserve
device memory by this description before their first trial (kerneljudge/gate.py), so that two lanes do
not start multi-GiB problems side by side and both run out.

What cannot run on the meta device (a `.item()`, data-dependent shapes, an extension's own op) leaves that
part unknown (None); a task whose inputs are made on the GPU explicitly (`device="cuda"`, as GPU MODE's
generators do) is measured on the real tensors, which are dropped at once.
"""

from __future__ import annotations

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


def describe(torch: Any, module: Any, init_inputs: list[Any]) -> dict[str, int | None]:
    """{"input_bytes", "parameter_bytes", "output_bytes"} of one call at the task's current shape; None
    where the meta device could not tell. Touches no random state the trials use (the meta device draws
    no numbers, and every trial seeds afresh)."""
    found: dict[str, int | None] = {"input_bytes": None, "parameter_bytes": None, "output_bytes": None}
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
            found["output_bytes"] = tensor_bytes(torch, model(*placed))
    except Exception:
        pass
    return found
