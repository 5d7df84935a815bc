"""Structural checks of a candidate's output, from the worker's description of it.

The worker only describes; the parent decides. A candidate's output must have
the reference's structure (a tensor, or a sequence of the same length), each
item a plain torch.Tensor on the judged device with the reference's dtype and
shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class StructureProblem:
    kind: str
    summary: str
    evidence: dict[str, Any]


def reference_signature(output: Any) -> list[torch.Tensor]:
    return list(output) if isinstance(output, (tuple, list)) else [output]


def check_structure(response: dict[str, Any], reference_output: Any, device_type: str) -> StructureProblem | None:
    items = response.get("items")
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return StructureProblem("output_type", "the worker's output description is malformed", {})
    expected = reference_signature(reference_output)
    ref_is_sequence = isinstance(reference_output, (tuple, list))
    cand_is_sequence = response.get("container") in ("tuple", "list")
    if ref_is_sequence != cand_is_sequence or len(items) != len(expected):
        return StructureProblem(
            "output_type",
            f"returned {response.get('container')!s} with {len(items)} item(s); expected "
            f"{type(reference_output).__name__} with {len(expected)}",
            {"container": response.get("container"), "count": len(items), "expected_count": len(expected)},
        )
    for index, (item, ref) in enumerate(zip(items, expected, strict=True)):
        where = f"output {index}" if len(expected) > 1 else "output"
        if item.get("plain_tensor") is not True:
            return StructureProblem(
                "output_type",
                f"{where} is a {item.get('type')}, not a plain torch.Tensor",
                {"index": index, "type": item.get("type")},
            )
        if str(item.get("device", "")).split(":")[0] != device_type:
            return StructureProblem(
                "device_mismatch",
                f"{where} is on {item.get('device')}, expected {device_type}",
                {"index": index, "device": item.get("device"), "expected": device_type},
            )
        want_dtype = str(ref.dtype).removeprefix("torch.")
        if item.get("dtype") != want_dtype:
            return StructureProblem(
                "dtype_mismatch",
                f"{where} has dtype {item.get('dtype')}, expected {want_dtype}",
                {"index": index, "dtype": item.get("dtype"), "expected": want_dtype},
            )
        if item.get("shape") != list(ref.shape):
            return StructureProblem(
                "shape_mismatch",
                f"{where} has shape {item.get('shape')}, expected {list(ref.shape)}",
                {"index": index, "shape": item.get("shape"), "expected": list(ref.shape)},
            )
    return None


def check_received(values: Any, response: dict[str, Any]) -> StructureProblem | None:
    """The tensors that arrived must match what the worker described (a lying worker is caught here)."""
    items = response["items"]
    if values is None:
        return StructureProblem("output_type", f"the output could not be read: {response.get('unreadable')}", {})
    if not isinstance(values, list) or len(values) != len(items):
        return StructureProblem("output_type", "the output tensors sent do not match their description", {})
    for item, tensor in zip(items, values, strict=True):
        if (
            not isinstance(tensor, torch.Tensor)
            or list(tensor.shape) != item["shape"]
            or str(tensor.dtype).removeprefix("torch.") != item["dtype"]
        ):
            return StructureProblem("output_type", "the output tensors sent do not match their description", {})
    return None
