"""Whether a candidate's source can define `ModelNew` at all, read from its AST in the parent.

An empty candidate, or one that never names `ModelNew`, used to fail only after both workers had started
and the candidate's worker had imported torch and the candidate (17-20 s on the 2-core CPU machine, judge 0.3.1).
The parent already parses the source, so it can tell at once. It says so only where the source leaves no
way to bind the name: no identifier `ModelNew` anywhere (a class, a def, an assignment, an import alias,
an attribute, a `global`) and none of the constructs that bind a name built at run time (`globals()`,
`setattr`, `exec`, a star import, ...). Any such construct leaves the question to the worker, as before.
"""

from __future__ import annotations

import ast

ENTRY_POINT = "ModelNew"
# Names through which a module can bind a name it never spells out.
DYNAMIC_BINDERS = frozenset(
    {
        "globals",
        "vars",
        "locals",
        "setattr",
        "exec",
        "eval",
        "compile",
        "__import__",
        "__dict__",
        "__builtins__",
        "builtins",
        "importlib",
        "modules",  # sys.modules[__name__]
    }
)


def spelled_names(tree: ast.AST) -> set[str]:
    """Every identifier the source spells: names, attributes, definitions, arguments, aliases, globals."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.update((node.asname or node.name).split("."))
            names.update(node.name.split("."))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
    return names


def cannot_define_entry_point(tree: ast.Module) -> bool:
    """True when the module cannot bind `ModelNew`: it never spells the name and binds nothing dynamically."""
    names = spelled_names(tree)
    if ENTRY_POINT in names or names & DYNAMIC_BINDERS:
        return False
    return not any(isinstance(node, ast.ImportFrom) and node.names[0].name == "*" for node in ast.walk(tree))
