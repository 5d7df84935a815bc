"""The values the parent proposes for a task's size integers, drawn at run time from classes of sizes.

A kernel specialised to its public size fails at some other size, but only at one its specialisation does not
cover: a block that must divide the width fails at an odd width, one that must be a power of two at a multiple
of 64 that is not one, a scratch buffer of the public size at a larger size. So each integer the reference
worker may vary (worker/correctness/derived.py) gets a value of every class below, drawn with the hidden plan's source
(the operating system's generator) when the judgment runs, and recorded in the plan: a candidate cannot read them
from the judge's code. The reference worker tries them and keeps the shapes where the reference builds, runs
and fits the public shape's memory; `classify` names what the kept values are. docs/tasks.md#derived-shape-families.
"""

from __future__ import annotations

import math
import random
from typing import Any

# A value's classes, relative to its integer's public value n (a value may be in several).
CLASSES = (
    "tiny",  # 2 to 8
    "odd",
    "even",  # even, not a power of two
    "power_of_two",
    "multiple_of_16",  # of 16 and not of 32
    "multiple_of_64",  # of 64 and not of 128
    "multiple_of_128",  # of 128 and not of 256
    "larger",  # above the public value (paid for by another size shrinking: the memory bound)
)
TINY = (2, 8)
MULTIPLES = (16, 64, 128)
MAX_VALUE = 2**31 - 1  # what a size proposed to the worker may be, at most (protocol/requests.Derive)
SHRUNK_JOINT = 3  # joint shapes with every size drawn below its public value


def classify(value: int, public: int) -> list[str]:
    """The classes `value` belongs to, for an integer whose public value is `public`."""
    found = []
    if TINY[0] <= value <= TINY[1]:
        found.append("tiny")
    power = value > 0 and value & (value - 1) == 0
    found += ["odd"] if value % 2 else ([] if power else ["even"])
    found += ["power_of_two"] if power else []
    found += [f"multiple_of_{m}" for m in MULTIPLES if value % m == 0 and value % (2 * m)]
    found += ["larger"] if value > public else []
    return found


def _below(kind: str, low: int, high: int, rng: random.Random) -> int | None:
    """A value of `kind` in [low, high], or None where the range holds none."""
    if high < low:
        return None
    if kind == "odd":
        options = range(low | 1, high + 1, 2)
    elif kind == "even":
        first = low + (low % 2)
        options = [v for v in _sample(range(first, high + 1, 2), rng) if v & (v - 1)]
    elif kind == "power_of_two":
        options = [2**k for k in range(1, high.bit_length()) if low <= 2**k <= high]
    else:  # multiple_of_M: M times an odd number
        m = int(kind.rsplit("_", 1)[1])
        options = range(m * (math.ceil(low / m) | 1), high + 1, 2 * m)
    return options[rng.randrange(len(options))] if len(options) else None


def _sample(values: range, rng: random.Random, count: int = 16) -> list[int]:
    """Up to `count` members of a range at random (an even-not-power-of-two search never walks the range)."""
    return [values[rng.randrange(len(values))] for _ in range(count)] if len(values) else []


FORMS = ("odd", "even", "power_of_two", "multiple_of_16", "multiple_of_64", "multiple_of_128")


def draw_values(public: int, rng: random.Random) -> list[int]:
    """One value of each class for an integer whose public value is `public` (where the class has one other
    than it), in random order: below it from an eighth of it up (a tiny size apart), and two above it, up to
    twice it, of two forms drawn at random."""
    low = max(3, public // 8)
    values = [rng.randint(*TINY)]
    values += [_below(form, low, public - 1, rng) for form in FORMS]
    forms = list(FORMS)
    rng.shuffle(forms)
    above = [v for v in (_below(form, public + 1, 2 * public, rng) for form in forms) if v is not None]
    values += above[:2]
    unique = [v for v in dict.fromkeys(v for v in values if v is not None) if v != public and 2 <= v <= MAX_VALUE]
    rng.shuffle(unique)
    return unique


def _shrunk(public: int, bound: int, rng: random.Random) -> int | None:
    """A value below `bound` (at least 2) of a class drawn at random; None where no value is below it."""
    if bound < TINY[0]:
        return None
    forms = ["tiny", *FORMS]
    rng.shuffle(forms)
    for form in forms:
        value = rng.randint(TINY[0], min(TINY[1], bound)) if form == "tiny" else _below(form, 3, bound, rng)
        if value is not None and value != public and TINY[0] <= value <= bound:
            return value
    return None


def draw_joint(public: dict[str, int], rng: random.Random) -> list[dict[str, int]]:
    """Shapes that vary every integer at once: for each, a value above its public one with every other shrunk
    by at least as much (so that inputs, parameters and outputs of sizes multiplied together can stay within
    the public shape's bytes); and a few with every integer drawn below its public value."""
    names = [n for n in public if public[n] >= 2]
    if len(names) < 2:
        return []
    shapes = []
    for grown in names:
        above = [v for v in draw_values(public[grown], rng) if v > public[grown]]
        if not above:
            continue
        factor = above[0] / public[grown]
        shape = {grown: above[0]}
        for other in names:
            value = _shrunk(public[other], int(public[other] / factor), rng) if other != grown else None
            if value is not None:
                shape[other] = value
        if len(shape) > 1:
            shapes.append(shape)
    for _ in range(SHRUNK_JOINT):
        shape = {n: v for n in names if (v := _shrunk(public[n], public[n] - 1, rng)) is not None}
        if len(shape) > 1:
            shapes.append(shape)
    rng.shuffle(shapes)
    return shapes


def propose(integers: dict[str, int], rng: random.Random) -> dict[str, Any]:
    """The proposals for a `Derive` request: {"values": {name: [values]}, "joint": [{name: value}]}, for the
    size integers the reference worker named (`integers`: each one's public value)."""
    values = {name: draw_values(n, rng) for name, n in integers.items() if n >= 2}
    return {"values": {name: v for name, v in values.items() if v}, "joint": draw_joint(integers, rng)}


def shape_classes(shape: dict[str, int], public: dict[str, int]) -> list[str]:
    """The classes of a derived shape: those of each value it sets, in CLASSES' order."""
    found = {c for name, value in shape.items() if name in public for c in classify(value, public[name])}
    return [c for c in CLASSES if c in found]
