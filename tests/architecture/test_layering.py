"""The package's layout, held: kerneljudge's import graph between packages, read with `ast` (docs/architecture.md).

Every directory of src/kerneljudge with an `__init__.py` is a package, and a module belongs to its directory's
package. Candidate and task code that the judge reads as text and never imports is left out: the red team's
fixtures and tasks, the suite's operations and candidates. Every import counts, wherever it is written (inside a
function, under `TYPE_CHECKING`): a deferred import is still an edge of the layout. A failure names the module
that imports, the module it imports and the line.
"""

from __future__ import annotations

import ast
import graphlib
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "src" / "kerneljudge"

# Text the judge reads, never imports (each a folder without an __init__.py).
NOT_IMPORTED = ("redteam/fixtures", "redteam/tasks", "suite/candidates", "suite/ops")

# What the worker side imports from kerneljudge outside worker/ and protocol/ (protocol/ is what both sides
# share, whole). Pure functions of the parent's checks that a worker runs on the device; results.verdict may
# join them, nothing else of the parent side. A module added here is a deliberate change of the trust boundary.
WORKER_SHARES = frozenset(
    {
        "kerneljudge.checks.correctness",
        "kerneljudge.checks.reference_replay",
        "kerneljudge.checks.replay",
        "kerneljudge.checks.support",
    }
)


# Packages whose maps do not yet name every module: a known gap, listed so that no other package opens one.
MAPS_OWED = frozenset({"kerneljudge.protocol"})


@dataclass(frozen=True)
class Edge:
    """One import: `source` imports `target` (both module names) at `line` of the source's file."""

    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} imports {self.target} ({_path(self.source)}:{self.line})"


@cache
def modules() -> dict[str, Path]:
    """Every module the judge can import, by name (a package by its own name, for its __init__.py)."""
    found: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if "__pycache__" in relative.parts or relative.as_posix().startswith(NOT_IMPORTED):
            continue
        parts = ["kerneljudge", *relative.with_suffix("").parts]
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _path(module: str) -> str:
    return modules()[module].relative_to(ROOT.parents[1]).as_posix()


def _tree(module: str) -> ast.Module:
    return ast.parse(modules()[module].read_text())


def is_package(module: str) -> bool:
    return modules()[module].name == "__init__.py"


def package_of(module: str) -> str:
    return module if is_package(module) else module.rpartition(".")[0]


def _resolve(name: str) -> str:
    """The module an imported name lands in: the longest prefix of it that is a module."""
    while name not in modules():
        name = name.rpartition(".")[0]
    return name


@cache
def imports(module: str) -> tuple[Edge, ...]:
    """The kerneljudge modules that `module` imports, one edge per name imported."""
    path = modules()[module]
    here = package_of(module)
    edges = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from kerneljudge import protocol` imports the module kerneljudge.protocol, not a name of the root.
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base for alias in node.names]
        else:
            continue
        for name in names:
            if name == "kerneljudge" or name.startswith("kerneljudge."):
                edges.append(Edge(module, _resolve(name), node.lineno))
    return tuple(edges)


def all_edges() -> list[Edge]:
    return [edge for module in modules() for edge in imports(module)]


def wing(module: str) -> str:
    """A top-level package with everything nested in it; the root's own modules each stand alone (config, errors,
    logs at the bottom, the API's __init__ and the entry point __main__ at the top)."""
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and not is_package(module)):
        return module
    return ".".join(parts[:2])


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _cycle_message(graph: dict[str, set[str]], witnesses: dict[tuple[str, str], Edge], what: str) -> str | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        cycle = error.args[1]  # [a, b, ..., a], each importing the next's predecessor
        steps = [witnesses[(cycle[i + 1], cycle[i])] for i in range(len(cycle) - 1)]
        return (
            f"an import cycle between {what}: "
            + " -> ".join(reversed(cycle))
            + "\n  "
            + "\n  ".join(str(step) for step in reversed(steps))
        )
    return None


def test_the_tree_is_read():
    # A guard on the reading itself: a layout test that reads nothing passes anything.
    assert {"kerneljudge.worker.main", "kerneljudge.judgment.pipeline", "kerneljudge.protocol"} <= set(modules())
    assert any(edge.target == "kerneljudge.protocol.wire" for edge in imports("kerneljudge.worker.main"))
    # Every module lives in a package: a new folder without an __init__.py is either a package that forgot it or
    # text to add to NOT_IMPORTED.
    strays = [name for name in modules() if not (modules()[name].parent / "__init__.py").exists()]
    assert not strays, f"modules outside any package: {strays}"


def test_no_cycle_between_wings():
    """(a) The wings (top-level packages, with what is nested in them) import each other in one order."""
    graph: dict[str, set[str]] = defaultdict(set)
    witnesses: dict[tuple[str, str], Edge] = {}
    for edge in all_edges():
        source, target = wing(edge.source), wing(edge.target)
        if source != target:
            graph[source].add(target)
            witnesses.setdefault((source, target), edge)
    message = _cycle_message(graph, witnesses, "wings")
    assert message is None, message


def test_no_cycle_between_nested_packages():
    """(a) Within and across wings, packages form no cycle either, except that a package and the packages nested in
    it may use each other (judgment/pipeline.py runs judgment/stages/, whose stages use judgment/gate.py)."""
    graph: dict[str, set[str]] = defaultdict(set)
    witnesses: dict[tuple[str, str], Edge] = {}
    for edge in all_edges():
        source, target = package_of(edge.source), package_of(edge.target)
        if _within(source, target) or _within(target, source):
            continue
        graph[source].add(target)
        witnesses.setdefault((source, target), edge)
    message = _cycle_message(graph, witnesses, "packages")
    assert message is None, message


def test_only_the_worker_imports_the_worker():
    """(b) kerneljudge.worker is what runs in a worker; what the parent shares with it lives in protocol/."""
    crossings = [
        str(edge)
        for edge in all_edges()
        if _within(edge.target, "kerneljudge.worker") and not _within(edge.source, "kerneljudge.worker")
    ]
    assert not crossings, "the parent side imports the worker side:\n  " + "\n  ".join(crossings)


def test_adapters_and_serve_do_not_import_each_other():
    """(c) The adapters reach the judge through client/ and api/; the server knows nothing of them."""
    crossings = [
        str(edge)
        for edge in all_edges()
        if (_within(edge.source, "kerneljudge.adapters") and _within(edge.target, "kerneljudge.serve"))
        or (_within(edge.source, "kerneljudge.serve") and _within(edge.target, "kerneljudge.adapters"))
    ]
    assert not crossings, "adapters/ and serve/ import each other:\n  " + "\n  ".join(crossings)


def _worker_may_import(module: str) -> bool:
    return _within(module, "kerneljudge.worker") or _within(module, "kerneljudge.protocol") or module in WORKER_SHARES


def test_the_worker_imports_few_modules():
    """(d) Modules under kerneljudge.worker import only worker/, protocol/ and the pinned checks (WORKER_SHARES)."""
    extra = [
        str(edge)
        for edge in all_edges()
        if _within(edge.source, "kerneljudge.worker") and not _worker_may_import(edge.target)
    ]
    assert not extra, (
        "the worker side imports beyond worker/, protocol/ and WORKER_SHARES (a new edge of the trust boundary: "
        "move what both sides need to protocol/, or pin it in WORKER_SHARES deliberately):\n  " + "\n  ".join(extra)
    )


def test_what_a_worker_loads_stays_on_its_side():
    """(d) Followed through every import, and through the packages Python runs on the way (each one's __init__),
    a worker loads nothing of kerneljudge but worker/, protocol/, the pinned checks and the empty packages above
    them: a pinned module that starts importing the parent side shows here."""
    loaded: dict[str, Edge | None] = {}
    todo: list[tuple[str, Edge | None]] = [(name, None) for name in modules() if _within(name, "kerneljudge.worker")]
    while todo:
        module, via = todo.pop()
        if module in loaded:
            continue
        loaded[module] = via
        parts = module.split(".")
        todo.extend((".".join(parts[:i]), via) for i in range(1, len(parts)))
        todo.extend((edge.target, edge) for edge in imports(module))
    # The root's __init__ and checks/__init__ run on the way; they must stay free of imports (test below).
    beyond = [
        f"{module}, by {via}"
        for module, via in loaded.items()
        if not _worker_may_import(module) and module not in ("kerneljudge", "kerneljudge.checks")
    ]
    assert not beyond, "a worker loads parent-side modules:\n  " + "\n  ".join(beyond)


def test_the_packages_a_worker_passes_import_nothing():
    # Importing kerneljudge.worker.main runs kerneljudge/__init__.py, and kerneljudge/checks/__init__.py for the
    # pinned checks: the root's API is re-exported lazily for that reason (its names are strings until asked for).
    for package in ("kerneljudge", "kerneljudge.checks"):
        inside = [str(edge) for edge in imports(package)]
        assert not inside, f"{_path(package)} imports what every worker would load:\n  " + "\n  ".join(inside)


def test_every_package_opens_with_a_docstring():
    """(e) Every package's __init__.py opens with a docstring: the package's map."""
    missing = [_path(name) for name in modules() if is_package(name) and not ast.get_docstring(_tree(name))]
    assert not missing, f"packages whose __init__.py opens with no docstring: {missing}"


def _named_in(docstring: str, name: str) -> bool:
    return re.search(rf"(?<![\w/]){re.escape(name)}(?![\w/])", docstring) is not None


def test_every_package_maps_its_modules():
    """Each package's docstring names each of its modules (`name.py`) and nested packages (`name/`), so that its map
    stays true as modules come and go; and a map names no module that is not there."""
    gaps = []
    for package in (name for name in modules() if is_package(name)):
        folder = modules()[package].parent
        docstring = ast.get_docstring(_tree(package)) or ""
        present = {
            f"{name.rpartition('.')[2]}.py"
            for name in modules()
            if not is_package(name) and name.rpartition(".")[0] == package
        }
        present |= {
            f"{name.rpartition('.')[2]}/"
            for name in modules()
            if is_package(name) and name.rpartition(".")[0] == package
        }
        if package not in MAPS_OWED:
            gaps += [
                f"{_path(package)} does not name {name}" for name in sorted(present) if not _named_in(docstring, name)
            ]
        # A bullet that heads a map line names something of this package's own folder.
        for head in re.findall(r"^- `([\w/]+\.py|\w+/)`", docstring, re.M):
            if not (folder / head).exists():
                gaps.append(f"{_path(package)} maps {head}, which is not there")
    assert not gaps, "package maps out of date:\n  " + "\n  ".join(gaps)
