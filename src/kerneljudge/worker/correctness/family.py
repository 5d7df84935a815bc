"""A task's shape family, read and applied inside the reference worker (the task is code only it runs).

A task may declare the shapes a kernel for it must handle, as `SHAPE_FAMILY` or `get_shape_family()` in
the task file (KernelBench files without one keep working). A shape is an assignment of module globals
that `get_inputs()` and `get_init_inputs()` read (`batch_size`, `dim`, the suite's `SHAPE`). The family is
either a table of axes, `{"dim": [127, 4096], "batch_size": range(1, 65)}`, whose hidden shapes combine
one value of each axis, or a list of shapes, `[{"batch_size": 1, "dim": 127}, ...]`. Values are plain
data (numbers, strings, booleans, tuples and lists of them; a range on an axis). The parent draws hidden
shapes from the description `describe` sends (kerneljudge.tasks.shapes) and names one in a `load` request.

Two more declarations go with a family: `SHAPE_TRIALS = "all"` asks for a trial at every shape of it instead
of a few drawn at random (a GPU MODE problem's tests and benchmarks: a kernel may cut corners at the large
sizes alone), and `TIMING_SHAPES`, a list of shapes in the list form, asks for timing at each of them, the
speedup being their geometric mean (as GPU MODE's leaderboard ranks), instead of at the public shape.

A task that declares no family gets one derived from its size globals (worker/correctness/derived.py); `SHAPE_FAMILY =
[]`
declares that it has no shape but the public one, and then none is derived.
"""

from __future__ import annotations

from typing import Any

from kerneljudge.protocol import wire
from kerneljudge.protocol.limits import MAX_FAMILY_SHAPES

MAX_SHAPES = MAX_FAMILY_SHAPES


class FamilyError(Exception):
    """The task's shape family is malformed; the message says how."""


def _plain(value: Any, where: str) -> Any:
    try:
        tree, tensors = wire.pack_values(value)
    except TypeError as exc:  # a mapping, an object: not a value the wire carries
        raise FamilyError(f"{where}: {exc}") from None
    if tensors:
        raise FamilyError(f"{where} holds a tensor; a shape is plain values that get_inputs reads")
    return tree


def _check_name(name: Any, module: Any, where: str) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise FamilyError(f"{where}: {name!r} is not a global's name")
    if not hasattr(module, name):
        raise FamilyError(f"{where} names {name!r}, which the task does not define")
    return name


def declared(module: Any) -> Any:
    """The task's family as declared, or None."""
    table = getattr(module, "SHAPE_FAMILY", None)
    function = getattr(module, "get_shape_family", None)
    if table is not None and function is not None:
        raise FamilyError("the task defines both SHAPE_FAMILY and get_shape_family(); keep one")
    if not callable(function):
        return table
    try:
        return function()
    except Exception as exc:  # the task's own function failed
        raise FamilyError(f"get_shape_family() raised {type(exc).__name__}: {exc}") from None


def describe(module: Any) -> dict[str, Any]:
    """The family as JSON for the parent: {"axes": {name: {"values": [...]} | {"range": [a, b, s]}}} or
    {"shapes": [{name: value}]}, with "public": each named global's value now; {} when none is declared
    or it is declared empty (`SHAPE_FAMILY = []`)."""
    family = declared(module)
    if family is None or (isinstance(family, (list, tuple)) and not family):  # [] opts out of derived shapes
        return {}
    if isinstance(family, dict):
        if not family:
            raise FamilyError("SHAPE_FAMILY has no axes")
        axes: dict[str, Any] = {}
        for name, values in family.items():
            where = f"SHAPE_FAMILY[{name!r}]"
            _check_name(name, module, "SHAPE_FAMILY")
            if isinstance(values, range):
                if len(values) == 0:
                    raise FamilyError(f"{where} is an empty range")
                axes[name] = {"range": [values.start, values.stop, values.step]}
                continue
            if not isinstance(values, (list, tuple)) or not values:
                raise FamilyError(f"{where} must be a non-empty list of values or a range")
            if len(values) > MAX_SHAPES:
                raise FamilyError(f"{where} has {len(values)} values; at most {MAX_SHAPES}")
            axes[name] = {"values": [_plain(v, where) for v in values]}
        names = list(axes)
        described: dict[str, Any] = {"axes": axes}
    elif isinstance(family, (list, tuple)):
        if not family or len(family) > MAX_SHAPES:
            raise FamilyError(f"SHAPE_FAMILY must list 1 to {MAX_SHAPES} shapes; it lists {len(family)}")
        shapes = []
        for i, shape in enumerate(family):
            where = f"SHAPE_FAMILY[{i}]"
            if not isinstance(shape, dict) or not shape:
                raise FamilyError(f"{where} must be a non-empty mapping of global names to values")
            shapes.append({_check_name(k, module, where): _plain(v, where) for k, v in shape.items()})
        names = list(dict.fromkeys(k for shape in shapes for k in shape))
        described = {"shapes": shapes}
    else:
        raise FamilyError(f"SHAPE_FAMILY must be a mapping of axes or a list of shapes, not {type(family).__name__}")
    trials = getattr(module, "SHAPE_TRIALS", None)
    if trials not in (None, "all"):
        raise FamilyError(f'SHAPE_TRIALS must be "all" when set, not {trials!r}')
    described["every"] = trials == "all"
    timing = getattr(module, "TIMING_SHAPES", None)
    if timing is not None:
        if not isinstance(timing, (list, tuple)) or not timing or len(timing) > MAX_SHAPES:
            raise FamilyError(f"TIMING_SHAPES must list 1 to {MAX_SHAPES} shapes")
        described["timing"] = []
        for i, shape in enumerate(timing):
            where = f"TIMING_SHAPES[{i}]"
            if not isinstance(shape, dict) or not shape:
                raise FamilyError(f"{where} must be a non-empty mapping of global names to values")
            described["timing"].append({_check_name(k, module, where): _plain(v, where) for k, v in shape.items()})
            names += [k for k in shape if k not in names]
    described["public"] = {name: _plain(getattr(module, name), f"the global {name}") for name in names}
    return described


def apply(module: Any, shape: dict[str, Any], public: dict[str, Any]) -> None:
    """Set the module's globals to `shape`, every other family global back to its public value."""
    for name, tree in {**public, **shape}.items():
        _check_name(name, module, "the shape")
        setattr(module, name, wire.unpack_values(tree, {}))
