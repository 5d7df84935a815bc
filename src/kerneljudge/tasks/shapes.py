"""A task's shape family on the trusted side: read from the reference worker's description, hidden shapes
drawn from it at run time.

The reference worker describes the family (kerneljudge/worker/correctness/family.py, which documents how a task
declares one), or derives one from the task's size integers for values the parent drew (worker/correctness/derived.py,
tasks/size_classes.py); the parent validates the description like any worker message, draws the hidden
shapes with the operating system's generator, and names each in a `load` request. The candidate learns a hidden
shape only from the inputs it is called with. Every value stays in the wire format's JSON form (tuples
marked), so a shape goes back to the worker exactly as it came.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import secrets
from dataclasses import dataclass
from typing import Any

from kerneljudge import protocol
from kerneljudge.protocol import wire
from kerneljudge.protocol.limits import MAX_FAMILY_SHAPES as MAX_SHAPES
from kerneljudge.tasks import size_classes

ENUMERATE_BELOW = 4096  # a table of axes with fewer combinations is drawn from without replacement


class MalformedFamily(Exception):
    """The reference worker's description of the family does not have the expected form."""


def _key(shape: dict[str, Any]) -> str:
    return json.dumps(shape, sort_keys=True)


def plain(tree: Any) -> Any:
    """A wire value as plain JSON (tuples as lists), for the record."""
    value = wire.unpack_values(tree, {})

    def listed(v: Any) -> Any:
        if isinstance(v, (tuple, list)):
            return [listed(x) for x in v]
        return str(v).removeprefix("torch.") if not isinstance(v, (bool, int, float, str, type(None))) else v

    return listed(value)


def describe_shape(shape: dict[str, Any]) -> str:
    """`SHAPE=(7, 4097)`, `batch_size=1, dim=127`: a shape in words, for summaries and progress."""
    return ", ".join(f"{name}={wire.unpack_values(tree, {})!r}" for name, tree in shape.items())


@dataclass(frozen=True)
class Axis:
    values: tuple[Any, ...] = ()
    span: tuple[int, int, int] | None = None  # a range(start, stop, step), sent as its bounds

    def __len__(self) -> int:
        return len(range(*self.span)) if self.span else len(self.values)

    def pick(self, rng: random.Random) -> Any:
        if self.span:
            bounds = range(*self.span)
            return bounds[rng.randrange(len(bounds))]
        return self.values[rng.randrange(len(self.values))]

    def all(self) -> list[Any]:
        return list(range(*self.span)) if self.span else list(self.values)


@dataclass(frozen=True)
class ShapeFamily:
    """Either axes (hidden shapes combine one value of each) or explicit shapes; `public` is each named
    global's value in the task as written (the public shape)."""

    public: dict[str, Any]
    axes: dict[str, Axis] | None = None
    shapes: tuple[dict[str, Any], ...] | None = None
    every: bool = False  # SHAPE_TRIALS = "all": a trial at every shape, not a few drawn
    timing: tuple[dict[str, Any], ...] = ()  # TIMING_SHAPES: timed at each, their geometric mean reported
    # Derived by the reference worker from the task's size globals (worker/correctness/derived.py), not declared: the
    # integers it varies. A candidate that refuses such a shape fails `shape_refused` (checks/refusals.py).
    derived: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        if self.axes is not None:
            return math.prod(len(axis) for axis in self.axes.values())
        return len(self.shapes or ())

    def is_public(self, shape: dict[str, Any]) -> bool:
        return _key({**self.public, **shape}) == _key(self.public)

    def shape_classes(self, shape: dict[str, Any]) -> list[str]:
        """The size classes of a shape's integers against their public values (tasks/size_classes.py)."""
        public = {name: v for name, v in self.public.items() if type(v) is int}
        return size_classes.shape_classes({name: v for name, v in shape.items() if type(v) is int}, public)

    @property
    def classes(self) -> list[str]:
        """The size classes a derived family's shapes come from; [] for a declared family."""
        if not self.derived:
            return []
        found = {c for shape in self.shapes or () for c in self.shape_classes(shape)}
        return [c for c in size_classes.CLASSES if c in found]

    def draw(self, count: int, rng: random.Random | None = None) -> list[dict[str, Any]]:
        """Up to `count` distinct shapes of the family other than the public one, at random; of a derived
        family, each next one of those that set the most integers off the powers of two, then to an odd value,
        where no shape drawn yet set them so (block sizes and public sizes mostly are powers of two: a value
        off them is one that a power-of-two size assumed, and an odd one that any power-of-two block dividing
        the size, never covers), then the most integers in size classes not yet drawn for them."""
        rng = rng or secrets.SystemRandom()
        if self.derived and self.shapes is not None:
            pool = list({_key(s): s for s in self.shapes if not self.is_public(s)}.values())
            rng.shuffle(pool)
            chosen: list[dict[str, Any]] = []
            covered: set[str] = set()

            def news(shape: dict[str, Any]) -> set[str]:
                pairs = {f"{n}:{c}" for n, v in shape.items() for c in self.shape_classes({n: v})}
                off = {f"{n}:off" for n, v in shape.items() if "power_of_two" not in self.shape_classes({n: v})}
                return (pairs | off) - covered

            def score(shape: dict[str, Any]) -> tuple[int, int, int]:
                new = news(shape)
                return sum(n.endswith(":off") for n in new), sum(n.endswith(":odd") for n in new), len(new)

            while pool and len(chosen) < count:
                best = max(pool, key=score)  # the first of equals: at random
                pool.remove(best)
                chosen.append(best)
                covered |= news(best)
            return chosen
        if self.axes is not None and self.size > ENUMERATE_BELOW:
            drawn: dict[str, dict[str, Any]] = {}
            for _ in range(50 * count):
                if len(drawn) == count:
                    break
                shape = {name: axis.pick(rng) for name, axis in self.axes.items()}
                if not self.is_public(shape):
                    drawn.setdefault(_key(shape), shape)
            return list(drawn.values())
        if self.axes is not None:
            names = list(self.axes)
            pool = [
                dict(zip(names, combo, strict=True))
                for combo in itertools.product(*(a.all() for a in self.axes.values()))
            ]
        else:
            pool = list(self.shapes or ())
        unique = {_key(s): s for s in pool if not self.is_public(s)}
        return rng.sample(list(unique.values()), min(count, len(unique)))

    def trial_shapes(self, count: int) -> list[dict[str, Any]]:
        """The hidden shapes to check: every one but the public (SHAPE_TRIALS = "all"), or `count` drawn."""
        return self.draw(self.size if self.every else count) if count else []

    def trials_detail(self, drawn: int, refused: int = 0, skipped: list[str] | None = None) -> str:
        """The `hidden_shapes` capability's detail: how many shapes were checked, of which family; for a
        derived one, the integers it varies, the shapes the candidate refused and those skipped because the
        reference itself failed there."""
        if not drawn:
            return "the task's shape family has no shape but the public one"
        if not self.derived:
            return f"{drawn} hidden shape(s) of a family of {self.size}"
        detail = (
            f"{drawn} hidden shape(s) of a family of {self.size} derived from the task's integers "
            f"{', '.join(self.derived)} (sizes {', '.join(self.classes) or 'of no class'})"
        )
        if refused:
            detail += f"; the candidate refused {refused} (shape_refused, KJ-C003)"
        if skipped:
            detail += f"; {len(skipped)} skipped, where the reference itself failed: {'; '.join(skipped)}"
        return detail

    def summary(self) -> dict[str, Any]:
        """What the record keeps of the family: its form, size, the globals it varies, the public shape, and
        whether it was derived from the task's integers rather than declared, and then the size classes its
        shapes come from (tasks/size_classes.py)."""
        return {
            "form": "axes" if self.axes is not None else "shapes",
            "size": self.size,
            "names": list(self.public),
            "public": {name: plain(tree) for name, tree in self.public.items()},
            "every_shape": self.every,
            "timing_shapes": len(self.timing),
            "derived": bool(self.derived),
        } | ({"classes": self.classes} if self.derived else {})


def size_integers(raw: Any) -> dict[str, int]:
    """The integers the reference worker says a derived family may vary ({name: public value}), from its
    `loaded` answer; {} where it names none or names them wrongly (then the worker's fixed values are tried)."""
    if not isinstance(raw, dict) or len(raw) > MAX_SHAPES:
        return {}
    valid = all(
        isinstance(k, str) and k.isidentifier() and type(v) is int and 2 <= v <= size_classes.MAX_VALUE
        for k, v in raw.items()
    )
    return dict(raw) if valid else {}


def _value(tree: Any, where: str) -> Any:
    try:
        wire.unpack_values(tree, {})
    except wire.WireError as exc:
        raise MalformedFamily(f"{where}: {exc}") from None
    return tree


def _names(mapping: Any, where: str) -> dict[str, Any]:
    if not isinstance(mapping, dict) or not all(isinstance(k, str) and k.isidentifier() for k in mapping):
        raise MalformedFamily(f"{where} is not a mapping of global names")
    return mapping


def family_from(loaded: protocol.Loaded) -> ShapeFamily | None:
    """The family a reference worker's `loaded` answer describes, None when the task declares none; a
    MalformedFamily when the worker found it malformed or describes it wrongly."""
    if loaded.family_error:
        raise MalformedFamily(loaded.family_error)
    return read_family(loaded.family)


def read_family(description: Any) -> ShapeFamily | None:
    """The family the reference worker described; None when the task declares none."""
    if description in (None, {}):
        return None
    if not isinstance(description, dict):
        raise MalformedFamily("the family description is not a mapping")
    public = {k: _value(v, f"public {k}") for k, v in _names(description.get("public"), "public").items()}
    timing = description.get("timing") or []
    if not isinstance(timing, list) or len(timing) > MAX_SHAPES:
        raise MalformedFamily("the timing shapes are not a list")
    extra = {"every": description.get("every", False) is True, "timing": _shapes(timing, public, "timing shape")}
    if "axes" in description:
        axes = {}
        for name, axis in _names(description["axes"], "axes").items():
            if name not in public:
                raise MalformedFamily(f"axis {name} has no public value")
            if isinstance(axis, dict) and isinstance(axis.get("range"), list):
                span = axis["range"]
                if len(span) != 3 or not all(isinstance(v, int) and not isinstance(v, bool) for v in span):
                    raise MalformedFamily(f"axis {name}: a range needs three integers")
                if span[2] == 0 or len(range(*span)) == 0:
                    raise MalformedFamily(f"axis {name}: an empty range")
                axes[name] = Axis(span=(span[0], span[1], span[2]))
            elif isinstance(axis, dict) and isinstance(axis.get("values"), list) and 0 < len(axis["values"]):
                if len(axis["values"]) > MAX_SHAPES:
                    raise MalformedFamily(f"axis {name}: more than {MAX_SHAPES} values")
                axes[name] = Axis(values=tuple(_value(v, f"axis {name}") for v in axis["values"]))
            else:
                raise MalformedFamily(f"axis {name} is neither a list of values nor a range")
        if not axes:
            raise MalformedFamily("a family of no axes")
        return ShapeFamily(public=public, axes=axes, **extra)
    shapes = description.get("shapes")
    if not isinstance(shapes, list) or not 0 < len(shapes) <= MAX_SHAPES:
        raise MalformedFamily(f"the family needs axes or 1 to {MAX_SHAPES} shapes")
    derived = description.get("derived") or []
    if not isinstance(derived, list) or not all(isinstance(name, str) and name in public for name in derived):
        raise MalformedFamily("a derived family names integers without a public value")
    return ShapeFamily(public=public, shapes=_shapes(shapes, public, "shape"), derived=tuple(derived), **extra)


def _shapes(listed: list[Any], public: dict[str, Any], what: str) -> tuple[dict[str, Any], ...]:
    """Shapes in the list form, each naming globals that have a public value."""
    read = []
    for i, shape in enumerate(listed):
        entries = _names(shape, f"{what} {i}")
        if not entries or any(name not in public for name in entries):
            raise MalformedFamily(f"{what} {i} names a global without a public value, or none")
        read.append({name: _value(v, f"{what} {i}") for name, v in entries.items()})
    return tuple(read)
