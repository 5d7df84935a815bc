"""The task's inputs without its reference: the source the candidate's worker makes trials' inputs from.

In the hardened modes the candidate's worker makes each trial's inputs itself, from its seed
(worker/correctness/seeded.py).
It needs the task's `get_inputs` for that, and must hold nothing else of the task: a candidate that finds the
task's `Model` in its own process (sys.modules, the collector, the frames above its call, the line cache) can
answer with it. So the parent, which only parses the task, reduces its source to what the inputs need, and that
text is all of the task the candidate's worker is sent (docs/process-model.md#where-a-trials-inputs-are-made).

Each module-level statement is a unit: the names it binds and the module-level names it reads (a function's or
a class's body read through its symbol table, so a local never counts). From `get_inputs` (and
`INPUT_CONTRACT`, which the hidden distributions read) the units are followed by name, transitively: the
imports, sizes and helpers the inputs reach. A statement that binds nothing but acts (a call, an attribute or
item set: `torch.set_default_dtype(...)`, `SIZES.append(7)`) is kept where what it reads is imports and
assignments only, since the inputs may depend on the state it sets. `from __future__` imports are kept; the
docstring, `Model`, every other function and class, and `if __name__ == "__main__":` are not.

Refused (no text; the trials' inputs are shipped from the reference's worker, as where remaking them fails):
a source that does not parse; no `get_inputs`; a star import (names the reduction cannot see); the inputs
reaching `Model`, or a function or class that `Model` reaches too (it may be the reference's arithmetic under
another name), or a module-level value that `Model` calls (`layer = nn.Linear(8, 8)`, called in the forward);
a name bound nowhere and not a builtin; a needed statement that reads namespaces or frames or
runs code built at run time (`globals()`, `vars()`, `exec`, `eval`, `compile`, `__import__`, `sys.modules`,
`f_globals`), where the names followed are not all it reaches.

Where `Model` itself reads namespaces or runs built code, it is taken to reach every statement.

The limit: names are followed, not values. An assignment that both the inputs and the forward read without
calling it (a size, a table of weights) is sent, as data the candidate could see among its inputs anyway.
"""

from __future__ import annotations

import ast
import builtins
import functools
import symtable
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kerneljudge.sources import pyast

ROOTS = ("get_inputs", "INPUT_CONTRACT")  # what the candidate's worker reads of the task (worker/correctness/seeded.py)
REFERENCE = "Model"
# Names every module has, and the builtins: read without a statement that binds them.
RESOLVED = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__"}
# Reads that reach names the reduction cannot follow, or run code it never saw.
DYNAMIC_NAMES = frozenset(
    {"globals", "locals", "vars", "exec", "eval", "compile", "__import__", "__builtins__", "breakpoint"}
)
DYNAMIC_ATTRIBUTES = frozenset(
    {"modules", "f_globals", "f_locals", "f_back", "__globals__", "__dict__", "_getframe", "currentframe"}
)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@dataclass(frozen=True)
class InputsSource:
    """The reduction of one task: `text`, the inputs-only source, or `refused`, why there is none."""

    text: str | None
    refused: str | None = None
    kept: tuple[str, ...] = ()  # the module-level names the text binds, in order


class Refused(Exception):
    """The task's inputs cannot be parted from its reference (the message says why)."""


@dataclass
class _Unit:
    node: ast.stmt
    binds: set[str]
    reads: set[str]
    kind: str  # "import", "data" (an assignment of names, no lambda), "effect" (binds nothing) or "code"

    @property
    def line(self) -> int:
        return self.node.lineno


@functools.lru_cache(maxsize=32)
def inputs_source(task_text: str) -> InputsSource:
    """The task's source reduced to what its inputs need (the module docstring says what is kept and what is
    refused); parsed only, never run."""
    try:
        units = _units(task_text)
        kept = _reduce(units)
    except Refused as exc:
        return InputsSource(text=None, refused=str(exc))
    except RecursionError:
        return InputsSource(text=None, refused="the task nests too deeply to follow")
    body = [units[i].node for i in kept]
    text = "\n\n".join(ast.unparse(node) for node in body) + "\n"
    names = tuple(dict.fromkeys(name for i in kept for name in sorted(units[i].binds)))
    return InputsSource(text=text, kept=names)


def _units(text: str) -> list[_Unit]:
    try:
        tree = pyast.parse(text)
        table = pyast.symbols(text)
    except (SyntaxError, ValueError) as exc:
        raise Refused(f"the task does not parse ({exc})") from None
    scopes = table.get_children()
    units = []
    for node in _statements(tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            raise Refused(f"a star import (line {node.lineno}) binds names the reduction cannot see")
        binds, reads = _module_scope_names(node)
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        for scope in scopes:
            if start <= scope.get_lineno() <= (node.end_lineno or node.lineno):
                _scope_names(scope, binds, reads)
        units.append(_Unit(node, binds, reads, _kind(node, binds)))
    return units


def _statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """The module's statements that run where it is loaded under another name, an import of several names
    split in one statement per name (so that only the names the inputs use are imported)."""
    for node in tree.body:
        if _is_docstring(node) or _is_main_block(node):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)) and len(node.names) > 1:
            for alias in node.names:
                one = (
                    ast.Import([alias])
                    if isinstance(node, ast.Import)
                    else ast.ImportFrom(node.module, [alias], node.level)
                )
                yield ast.copy_location(one, node)
        else:
            yield node


def _reduce(units: list[_Unit]) -> list[int]:
    """The indices of the units kept, in source order."""
    binders: dict[str, list[int]] = {}
    for index, unit in enumerate(units):
        for name in unit.binds:
            binders.setdefault(name, []).append(index)
    if "get_inputs" not in binders:
        raise Refused("the task defines no get_inputs")
    needed = _closure([r for r in ROOTS if r in binders], units, binders, strict=True)
    reference = _closure([REFERENCE], units, binders, strict=False) if REFERENCE in binders else set()
    if any(_dynamic_read(units[i].node) is not None for i in reference):  # it may reach any name: say it does
        reference = set(range(len(units)))
    for index in sorted(needed):
        unit = units[index]
        if REFERENCE in unit.binds:
            raise Refused(f"get_inputs reaches {REFERENCE} (line {unit.line})")
        if index in reference and unit.kind not in ("import", "data"):
            name = ", ".join(sorted(unit.binds)) or "a statement"
            raise Refused(f"get_inputs reaches {name} (line {unit.line}), which {REFERENCE} reaches too")
        dynamic = _dynamic_read(unit.node)
        if dynamic is not None:
            raise Refused(f"get_inputs reaches a statement that {dynamic} (line {unit.line})")
    shared = {name for i in needed & reference if units[i].kind == "data" for name in units[i].binds}
    for index in sorted(reference):
        called = _called(units[index].node) & shared
        if called:  # a value the forward calls (a module, a function) is code, whatever its statement
            name = sorted(called)[0]
            raise Refused(f"get_inputs reaches {name}, which {REFERENCE} calls (line {units[index].line})")
    for index, unit in enumerate(units):
        if unit.kind == "effect":
            needed |= _effect(index, units, binders, needed, reference)
    futures = [i for i, u in enumerate(units) if isinstance(u.node, ast.ImportFrom) and u.node.module == "__future__"]
    return sorted(needed | set(futures))


def _effect(
    index: int, units: list[_Unit], binders: dict[str, list[int]], needed: set[int], reference: set[int]
) -> set[int]:
    """A statement that only acts, with what it reads, where that is imports and assignments the forward does not
    reach beyond those already kept (the inputs may read the state it sets); else nothing."""
    if _dynamic_read(units[index].node) is not None:
        return set()
    try:
        acting = _closure(sorted(units[index].reads), units, binders, strict=True)
    except Refused:
        return set()
    added = acting - needed
    if all(units[i].kind == "import" or (units[i].kind == "data" and i not in reference) for i in added):
        return added | {index}
    return set()


def _closure(roots: Iterable[str], units: list[_Unit], binders: dict[str, list[int]], strict: bool) -> set[int]:
    """The units that bind `roots` and, transitively, every name they read; with `strict`, a name bound nowhere
    (not a builtin) is refused."""
    found: set[int] = set()
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in binders:
            if strict and name not in RESOLVED:
                raise Refused(f"`{name}` is bound nowhere in the task, and is not a builtin")
            continue
        for index in binders[name]:
            if index not in found:
                found.add(index)
                todo.extend(units[index].reads)
    return found


def _module_scope_names(node: ast.stmt) -> tuple[set[str], set[str]]:
    """The names a top-level statement binds and reads in the module's own scope (decorators, default values,
    annotations, base classes, a comprehension's first iterable: what runs as the module does)."""
    binds: set[str] = set()
    reads: set[str] = set()
    for child in _module_scope(node):
        if isinstance(child, ast.Name):
            (reads if isinstance(child.ctx, ast.Load) else binds).add(child.id)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            binds.update((alias.asname or alias.name).split(".")[0] for alias in child.names)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.add(child.name)
        elif isinstance(child, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and child.name:
            binds.add(child.name)
        elif isinstance(child, ast.MatchMapping) and child.rest:
            binds.add(child.rest)
    return binds, reads


def _module_scope(node: ast.AST) -> Iterator[ast.AST]:
    stack = [node]
    while stack:
        child = stack.pop()
        yield child
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack += [*child.decorator_list, *_signature(child.args), *([child.returns] if child.returns else [])]
        elif isinstance(child, ast.ClassDef):
            stack += [*child.decorator_list, *child.bases, *(k.value for k in child.keywords)]
        elif isinstance(child, ast.Lambda):
            stack += [*child.args.defaults, *(d for d in child.args.kw_defaults if d is not None)]
        elif isinstance(child, _COMPREHENSIONS):
            stack.append(child.generators[0].iter)
        else:
            stack += ast.iter_child_nodes(child)


def _signature(args: ast.arguments) -> list[ast.expr]:
    """What a `def` evaluates where it stands: its default values and its annotations."""
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
    annotations = [a.annotation for a in every if a.annotation is not None]
    return [*args.defaults, *(d for d in args.kw_defaults if d is not None), *annotations]


def _scope_names(scope: symtable.SymbolTable, binds: set[str], reads: set[str]) -> None:
    """Add the module-level names a function's or class's body (and what it nests) reads, and those it binds
    through `global`."""
    for symbol in scope.get_symbols():
        if symbol.is_global() and symbol.is_referenced():
            reads.add(symbol.get_name())
        if symbol.is_declared_global() and symbol.is_assigned():
            binds.add(symbol.get_name())
    for child in scope.get_children():
        _scope_names(child, binds, reads)


def _kind(node: ast.stmt, binds: set[str]) -> str:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "import"
    if not binds:
        return "effect"
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names_only = all(isinstance(n, ast.Name) for t in targets for n in _target_leaves(t))
        if names_only and not any(isinstance(n, ast.Lambda) for n in ast.walk(node)):
            return "data"
    return "code"


def _called(node: ast.stmt) -> set[str]:
    """The names whose value `node` calls, directly or through an attribute (`f(x)`, `layer.forward(x)`)."""
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            func = child.func
            while isinstance(func, ast.Attribute):
                func = func.value
            if isinstance(func, ast.Name):
                names.add(func.id)
    return names


def _target_leaves(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [leaf for element in target.elts for leaf in _target_leaves(element)]
    if isinstance(target, ast.Starred):
        return _target_leaves(target.value)
    return [target]


def _dynamic_read(node: ast.stmt) -> str | None:
    """What in `node` (any scope of it) reads a namespace or runs built code, in words; None where nothing does.
    A method call of one of those names is not (`self.modules()`, nn.Module's; `sys.modules` is never called)."""
    methods = {id(child.func) for child in ast.walk(node) if isinstance(child, ast.Call)}
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and child.id in DYNAMIC_NAMES:
            return f"uses {child.id}"
        if isinstance(child, ast.Attribute) and child.attr in DYNAMIC_ATTRIBUTES:
            if not (child.attr == "modules" and id(child) in methods):
                return f"reads .{child.attr}"
        if isinstance(child, ast.ImportFrom):
            for alias in child.names:
                if alias.name in DYNAMIC_ATTRIBUTES:
                    return f"imports {alias.name}"
    return None


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_main_block(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":`, which never runs where the module is loaded under another name."""
    if not isinstance(node, ast.If) or node.orelse or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    sides = [test.left, *test.comparators]
    return (
        len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
        and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    )
