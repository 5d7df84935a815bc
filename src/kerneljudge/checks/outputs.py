"""Structural checks of a candidate's output, from the worker's description of it.

The worker only describes; the parent decides. A candidate's output must have
the reference's structure (a tensor, or a sequence of the same length), each
item a plain torch.Tensor on the judged device with the reference's dtype and
shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kerneljudge import protocol


@dataclass(frozen=True)
class StructureProblem:
    kind: str
    summary: str
    evidence: dict[str, Any]


def signature_items(signature: dict[str, Any]) -> list[dict[str, Any]]:
    """The reference output's items as its worker described them: {"dtype", "shape"} per tensor."""
    return list(signature.get("items") or [])


def expected_bytes(signature: dict[str, Any]) -> int:
    """The bytes the reference's outputs take: what a correct candidate's output takes too."""
    import torch

    total = 0
    for item in signature_items(signature):
        if "dtype" in item:
            numel = 1
            for size in item["shape"]:
                numel *= size
            total += numel * torch.empty((), dtype=getattr(torch, item["dtype"])).element_size()
    return total


def check_structure(
    output: protocol.Answer, signature: dict[str, Any], device_type: str, exact: bool = True
) -> StructureProblem | None:
    """The candidate's output, as its worker described it (`output`, its answer: one that describes no output is
    malformed), against the reference's `signature`. Not `exact` (a task with its own check of outputs): dtype and
    shape are that check's to judge."""
    if not isinstance(output, protocol.Described) or not all(isinstance(i, dict) for i in output.items):
        return StructureProblem("output_type", "the worker's output description is malformed", {})
    items, container = output.items, output.container
    expected = signature_items(signature)
    ref_is_sequence = signature.get("container") in ("tuple", "list")
    cand_is_sequence = container in ("tuple", "list")
    if ref_is_sequence != cand_is_sequence or len(items) != len(expected):
        return StructureProblem(
            "output_type",
            f"returned {container!s} with {len(items)} item(s); expected "
            f"{signature.get('container')} with {len(expected)}",
            {"container": container, "count": len(items), "expected_count": len(expected)},
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
        if not exact:
            continue
        if item.get("dtype") != ref["dtype"]:
            return StructureProblem(
                "dtype_mismatch",
                f"{where} has dtype {item.get('dtype')}, expected {ref['dtype']}",
                {"index": index, "dtype": item.get("dtype"), "expected": ref["dtype"]},
            )
        if item.get("shape") != ref["shape"]:
            return StructureProblem(
                "shape_mismatch",
                f"{where} has shape {item.get('shape')}, expected {ref['shape']}",
                {"index": index, "shape": item.get("shape"), "expected": ref["shape"]},
            )
    return None


def check_received(output: protocol.Described, unreadable: str | None) -> StructureProblem | None:
    """The tensors the worker wrote (`output.tree`) must be the ones it described (a lying worker is caught here);
    `unreadable`: why none were sent, where none were."""
    items, tree, described = output.items, output.tree, output.tensors or {}
    if tree is None:
        return StructureProblem("output_type", f"the output could not be read: {unreadable}", {})
    if not isinstance(tree, list) or len(tree) != len(items):
        return StructureProblem("output_type", "the output tensors sent do not match their description", {})
    for item, leaf in zip(items, tree, strict=True):
        description = described.get(leaf.get("tensor")) if isinstance(leaf, dict) else None
        if (
            not isinstance(description, dict)
            or description.get("shape") != item["shape"]
            or description.get("dtype") != item["dtype"]
            or set(leaf) - {"tensor", "strides"}
        ):
            return StructureProblem("output_type", "the output tensors sent do not match their description", {})
    return None
