"""A shape family derived from a task's size globals, for a task that declares none.

KernelBench tasks keep their sizes in module-level integers (`batch_size`, `dim`, `in_features`, `channels`,
`heads`) that `get_inputs()` and `get_init_inputs()` read, and declare no family (worker/correctness/family.py): without
one, a kernel with the public size baked in (a grid of `n // BLOCK` programs and no mask, a width it asserts)
is only ever checked where it is exact. The reference worker, where the task's code runs, derives one here
when the parent asks, after the public trials (a candidate that failed them costs nothing, and the public
inputs' size is known by then). It finds those integers, tries the values the parent drew for them
(tasks/size_classes.py: tiny, odd, even, powers of two, multiples of 16, 64 and 128, larger than public), and
keeps a shape only where the reference builds and runs, its inputs, parameters and outputs keep their number,
dtypes and ranks, some tensor's shape follows the size (an input's, or a parameter's or output's dimension
that moves with it: a width that reaches only `__init__`), and nothing (inputs, parameters, outputs, the
forward's working set) takes more bytes than at the public shape, so that the device memory reserved for the
public shape (kerneljudge/judgment/gate.py) still covers it. Why an integer could not vary is said too (`fixed`).

A small task (8 MiB of inputs and parameters, a public call of 0.1 s on the host) is tried by real runs on
the host, which also see a non-finite output; any other on torch's meta device, where tensors have shapes
but no storage, so a 16 GiB level-1 problem costs nothing (but the first call of some ops there imports
torch._dynamo: 1.5 to 2 s on a CPU, once per worker). docs/tasks.md#derived-shape-families.
"""

from __future__ import annotations

import contextlib
import dis
import time
import types
from dataclasses import dataclass, field
from typing import Any

from kerneljudge.worker.base import items_of
from kerneljudge.worker.correctness import family
from kerneljudge.worker.footprint import live_bytes, tensor_bytes

MAX_INTEGERS = 8  # integer globals considered, in the order the task's functions read them
MAX_SHAPES = 16  # shapes kept; the parent draws its shape trials from them
MAX_ATTEMPTS = 96  # shapes tried
BUDGET_S = 2.0  # wall time, after the public shape's probe, after which no further shape is tried
HELPER_DEPTH = 2  # module functions and classes reached from the roots, followed this many calls deep
REAL_RUN_BYTES = 8 * 2**20  # public inputs and parameters up to which shapes are tried by real runs on the host
REAL_RUN_S = 0.1  # the public shape's real run, at most, for the others to be real runs too
GLOBAL_LOADS = ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS")


def _codes(value: Any) -> list[types.CodeType]:
    value = getattr(value, "__func__", value)  # a staticmethod or classmethod
    if isinstance(value, property):
        return [f.__code__ for f in (value.fget, value.fset) if isinstance(f, types.FunctionType)]
    return [value.__code__] if isinstance(value, types.FunctionType) else []


def _globals_loaded(code: types.CodeType) -> list[str]:
    """The global names a code object loads; attribute names (`self.dim`) are not among them."""
    return [i.argval for i in dis.get_instructions(code) if i.opname in GLOBAL_LOADS]


def names_read(roots: list[Any], namespace: dict[str, Any]) -> list[str]:
    """Every global name the code of `roots` (functions, classes) reads, in order: their own code, nested
    code (comprehensions, lambdas, inner functions), and the module's own functions and classes they name."""
    found: dict[str, None] = {}
    seen: set[int] = set()
    pending = [(root, 0) for root in roots]
    while pending:
        value, depth = pending.pop(0)
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, type):
            if value.__module__ == namespace.get("__name__"):
                pending += [(member, depth) for member in vars(value).values()]
                pending += [(base, depth) for base in value.__bases__]
            continue
        codes = _codes(value)
        while codes:
            code = codes.pop(0)
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            for name in _globals_loaded(code):
                found.setdefault(name)
                target = namespace.get(name)
                own = isinstance(target, types.FunctionType) and target.__globals__ is namespace
                own = own or (isinstance(target, type) and target.__module__ == namespace.get("__name__"))
                if own and depth < HELPER_DEPTH:
                    pending.append((target, depth + 1))
    return list(found)


def survey(module: Any) -> tuple[dict[str, int], dict[str, str]]:
    """The integer globals (a bool is not one) that get_inputs() and get_init_inputs() read that may vary,
    each with its public value, and those read that may not, each with why: one the task's `Model` reads
    itself (varied, it would change the reference in a way a candidate learns from neither its init inputs
    nor its inputs), one of public value below 2 (a flag, a stride or a padding more often than a size, and a
    dimension of one changes what some references compute), one past the first MAX_INTEGERS."""
    namespace = vars(module)
    read = names_read([namespace.get("get_inputs"), namespace.get("get_init_inputs")], namespace)
    own = set(names_read([namespace.get("Model")], namespace))
    varied: dict[str, int] = {}
    fixed: dict[str, str] = {}
    for name in (n for n in read if type(namespace.get(n)) is int):
        if name in own:
            fixed[name] = "the task's Model reads it itself: varied, the reference would change unseen"
        elif len(varied) >= MAX_INTEGERS:
            fixed[name] = f"past the first {MAX_INTEGERS} integers read"
        elif namespace[name] < 2:
            fixed[name] = f"its public value {namespace[name]} is below 2"
        else:
            varied[name] = namespace[name]
    return varied, fixed


def read_integers(module: Any) -> list[str]:
    """The names of the integers a derivation may vary (`survey`), in the order the task's functions read them."""
    return list(survey(module)[0])


def smaller(n: int) -> list[int]:
    """The fixed values below `n` tried where the parent proposes none: one less, and about a half and about a
    quarter made odd (4096: 4095, 2049, 1025). Never below 2."""
    return [v for v in dict.fromkeys((n - 1, (n // 2) | 1, (n // 4) | 1)) if 2 <= v < n]


def joint(public: dict[str, int], sizes: list[str]) -> list[dict[str, int]]:
    """The fixed joint shapes tried where the parent proposes none: all one less, all about halved, and each
    pair with one halved and the other one more than its public value."""
    if len(sizes) < 2:
        return []
    shapes = [{n: public[n] - 1 for n in sizes}, {n: (public[n] // 2) | 1 for n in sizes}]
    shapes += [{a: (public[a] // 2) | 1, b: public[b] + 1} for a in sizes for b in sizes if a != b]
    return [s for s in shapes if all(v >= 2 for v in s.values())]


Items = tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Probe:
    """One build and call of the reference at the task's current globals: per input, parameter and output,
    its kind, dtype and shape (a tensor) or its type's name; the bytes of the inputs, parameters, outputs and
    the forward's working set; and, after a real run, whether every output was finite."""

    inputs: Items
    outputs: Items
    sizes: tuple[int, ...]  # the forward's working set last, measured on the meta device only
    finite: bool | None = None
    parameters: Items = ()

    def follows(self, public: Probe) -> bool:
        """The same number of inputs, parameters and outputs, each of the same kind, dtype and rank; no output
        empty or (after a real run) non-finite that is not so at the public shape."""

        def structure(items: Items) -> list[tuple[Any, ...]]:
            return [(i[0], i[1], len(i[2]), 0 in i[2]) if i[0] == "tensor" else i for i in items]

        inputs = [i[:3] for i in structure(self.inputs)] == [i[:3] for i in structure(public.inputs)]
        parameters = [i[:3] for i in structure(self.parameters)] == [i[:3] for i in structure(public.parameters)]
        finite = public.finite is not True or self.finite is not False
        return inputs and parameters and finite and structure(self.outputs) == structure(public.outputs)

    def fits(self, public: Probe) -> bool:
        """No more bytes than at the public shape in any part the memory reservation counts: inputs,
        parameters, outputs and (measured on the meta device) the forward's working set."""
        return all(a <= b for a, b in zip(self.sizes, public.sizes, strict=True))

    def reshapes(self, public: Probe) -> bool:
        """Some input's shape differs from the public shape's."""
        return [i[2] for i in self.inputs if i[0] == "tensor"] != [i[2] for i in public.inputs if i[0] == "tensor"]

    def changes(self, public: Probe) -> bool:
        """Some input's, parameter's or output's shape differs from the public shape's."""
        return self.reshapes(public) or self.parameters != public.parameters or self.outputs != public.outputs

    def tracks(self, public: Probe, public_value: int, value: int) -> bool:
        """Whether a size changed from `public_value` to `value` shows in some tensor's shape: an input's, or a
        parameter's or output's dimension that moved with it, by its ratio (a width, a channel count) or its
        difference (a length through a convolution). A reduction's axis moves an output's dimensions by
        neither, and changes no input's."""
        if self.reshapes(public):
            return True
        pairs = zip(self.parameters + self.outputs, public.parameters + public.outputs, strict=True)
        return any(
            d != p and (d * public_value == p * value or d - p == value - public_value)
            for mine, theirs in pairs
            if mine[0] == "tensor"
            for d, p in zip(mine[2], theirs[2], strict=True)
        )


def _described(torch: Any, values: list[Any]) -> Items:
    return tuple(
        ("tensor", str(v.dtype), tuple(v.shape)) if isinstance(v, torch.Tensor) else (type(v).__name__,) for v in values
    )


def _finite(torch: Any, values: list[Any]) -> bool:
    return all(bool(torch.isfinite(v).all()) for v in values if isinstance(v, torch.Tensor) and v.is_floating_point())


def run(torch: Any, module: Any, real: bool = False) -> Probe | str:
    """Build the reference from get_init_inputs() and call it on get_inputs(), at the globals as they are
    now: on the meta device, or for real on the host; where that fails, the error in words. The host's
    random state is left as it was."""
    device = torch.device("cpu" if real else "meta")
    # On the host, neither a device context nor the working set's dispatch mode: under either, some ops run
    # torch's Python references, whose first call imports torch._dynamo (seconds); the host is the default
    # device in a worker, and the inputs, parameters and outputs bound the memory there.
    placement = contextlib.nullcontext() if real else device
    try:
        with torch.random.fork_rng(devices=[]), placement, torch.no_grad():
            init_inputs = list(module.get_init_inputs())
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
            model = module.Model(*init_inputs)
            if hasattr(model, "eval"):
                model.eval()
            watch = None if real else live_bytes(torch)
            with watch or contextlib.nullcontext():
                out = model(*inputs)
            parameters = list(model.parameters()) if hasattr(model, "parameters") else []
            output_bytes = tensor_bytes(torch, out)
            sizes = (tensor_bytes(torch, inputs), tensor_bytes(torch, parameters), output_bytes)
            outputs = items_of(out)
            finite = _finite(torch, outputs) if real else None
            sizes += (watch.peak,) if watch is not None else ()
            described = _described(torch, inputs), _described(torch, outputs)
            return Probe(*described, sizes, finite, _described(torch, parameters))
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:160]}"


def probe(torch: Any, module: Any, real: bool = False) -> Probe | None:
    """`run`, None where the reference fails."""
    found = run(torch, module, real)
    return found if isinstance(found, Probe) else None


def _public_probe(torch: Any, module: Any, small: bool) -> tuple[Probe | None, bool]:
    """The public shape's probe and whether the other shapes are tried by real runs: so where the task is
    small and quick on the host, on the meta device otherwise or where the host cannot run it."""
    if small:
        started = time.monotonic()
        base = probe(torch, module, real=True)
        if base is not None and time.monotonic() - started <= REAL_RUN_S:
            return base, True
    return probe(torch, module), False


@dataclass
class Derivation:
    """A derivation's outcome: the family in the list form family.describe sends ({} when no shape
    qualifies), and why each integer read was not varied."""

    family: dict[str, Any] = field(default_factory=dict)
    fixed: dict[str, str] = field(default_factory=dict)


def _why_not(name: str, rejected: list[str], proposed: bool) -> str:
    """Why no value of `name` alone qualified, from the reason each was turned down."""
    if not rejected:
        return "no value was proposed for it" if proposed else "no other value of it is 2 or more"
    counts: dict[str, int] = {}
    for reason in rejected:
        key = reason if not reason.startswith("the reference failed") else "the reference failed"
        counts[key] = counts.get(key, 0) + 1
    failed = next((r for r in rejected if r.startswith("the reference failed")), None)
    parts = [f"{key} at {n} of {len(rejected)} values" for key, n in counts.items()]
    detail = f" (first: {failed.split(': ', 1)[1]})" if failed else ""
    return "no value qualified: " + "; ".join(parts) + detail


def explore(torch: Any, module: Any, small: bool = False, proposals: dict[str, Any] | None = None) -> Derivation:
    """The family derived from the task's integers, with "derived" naming the integers varied, and why the
    others were not. `small`: the public inputs and parameters are small enough for real runs on the host.
    `proposals`: the values the parent drew (protocol.Derive); None: the fixed ones (`smaller`, `joint`).
    The globals are left at their public values."""
    public, fixed = survey(module)
    if not public:
        return Derivation({}, fixed)
    kept: list[dict[str, int]] = []
    tried: set[tuple[tuple[str, int], ...]] = set()
    rejected: dict[str, list[str]] = {name: [] for name in public}
    if proposals is None:
        values = {name: smaller(n) for name, n in public.items()}
    else:
        given = proposals.get("values", {})
        values = {name: [v for v in given.get(name, []) if v != public[name]] for name in public}
    try:
        base, real = _public_probe(torch, module, small)
        if base is None:
            return Derivation({}, {**fixed, **dict.fromkeys(public, "the reference fails at the public shape")})
        started = time.monotonic()  # after the public probe, which may pay the meta device's imports

        def attempt(shape: dict[str, int]) -> bool:
            key = tuple(sorted(shape.items()))
            if key in tried or len(kept) >= MAX_SHAPES or len(tried) >= MAX_ATTEMPTS:
                return False
            if time.monotonic() - started > BUDGET_S:
                return False
            tried.add(key)
            for name, value in {**public, **shape}.items():
                setattr(module, name, value)
            found, why = run(torch, module, real), ""
            if not isinstance(found, Probe):
                why = f"the reference failed: {found}"
            elif not found.follows(base):
                why = "the number, dtypes or ranks of its tensors change"
            elif not found.fits(base):
                why = "more bytes than the public shape"
            elif len(shape) == 1 and not found.tracks(base, public[next(iter(shape))], next(iter(shape.values()))):
                why = "no tensor's shape follows it"
            elif len(shape) > 1 and not found.changes(base):
                why = "no tensor's shape changes"
            if why:
                if len(shape) == 1:
                    rejected[next(iter(shape))].append(why)
                return False
            kept.append({name: shape[name] for name in public if name in shape})  # in the task's order
            return True

        # An integer is a size when one value of it alone gives a shape that qualifies; only sizes join the
        # joint variations.
        sizes = [name for name in public if any(attempt({name: v}) for v in values[name])]
        if proposals is None:
            shapes = joint(public, sizes)
        else:
            restricted = ({n: v for n, v in s.items() if n in sizes} for s in proposals.get("joint", []))
            shapes = [s for s in restricted if s]
        for shape in shapes:
            attempt(shape)
        for turn in range(max((len(values[name]) for name in sizes), default=0)):  # each size in turn, to the cap
            for name in sizes:
                if turn < len(values[name]):
                    attempt({name: values[name][turn]})
    finally:
        for name, value in public.items():
            setattr(module, name, value)
    for name in public:
        if name not in sizes:
            fixed[name] = _why_not(name, rejected[name], proposals is not None)
    if not kept:
        return Derivation({}, fixed)
    varied = [name for name in public if any(name in shape for shape in kept)]
    family = {"shapes": kept, "public": {n: public[n] for n in varied}, "every": False, "derived": varied}
    return Derivation(family, fixed)


def derive(torch: Any, module: Any, small: bool = False, proposals: dict[str, Any] | None = None) -> dict[str, Any]:
    """The derived family alone (`explore`), {} when no shape qualifies."""
    return explore(torch, module, small, proposals).family


def declares(module: Any) -> bool:
    """Whether the task declares a family, an empty one (`SHAPE_FAMILY = []`: no shape but the public one)
    included; a malformed declaration counts."""
    try:
        return family.declared(module) is not None
    except family.FamilyError:
        return True


def integers(module: Any) -> dict[str, int]:
    """The integers a derivation may vary and their public values, for the parent to draw values for; {} for
    a task that declares a family. Never raises."""
    try:
        return {} if declares(module) else survey(module)[0]
    except Exception:
        return {}


def family_for(
    torch: Any, module: Any, public_bytes: int | None = None, proposals: dict[str, Any] | None = None
) -> Derivation:
    """The derivation for a task that declares no family; an empty one for a task that declares a family or
    where nothing qualifies. `public_bytes`: its public inputs and parameters, where known; up to
    REAL_RUN_BYTES, shapes are tried by real runs on the host. Never raises: a task that cannot be varied is
    judged at its public shape, as before."""
    if declares(module):
        return Derivation()
    try:
        return explore(torch, module, public_bytes is not None and public_bytes <= REAL_RUN_BYTES, proposals)
    except Exception as exc:
        return Derivation({}, {"*": f"the derivation failed: {type(exc).__name__}: {str(exc)[:160]}"})
