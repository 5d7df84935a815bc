"""Which names a function scope binds, so that a parameter called `input` is not read as the builtin.

Only function scopes (a def, a lambda, a comprehension) shadow soundly: any binding in one, executed or not,
makes the name local for the whole body, so it never falls back to the builtin. A module's or a class's
binding may never run (`if 0: open = None`), after which the name is the builtin again; the scan therefore
treats a forbidden builtin's name as the builtin there (preflight/allowlist.py).
"""

from __future__ import annotations

import ast

FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _bindings(node: ast.AST, names: set[str], declared: set[str]) -> None:
    """Names bound directly in the scope whose body holds `node`; nested scopes bind their own."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        names.add(node.id)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names.add(node.name)  # its decorators, defaults and bases run here; its body is another scope
        for child in [*node.decorator_list, *getattr(node, "bases", []), *getattr(node, "keywords", [])]:
            _bindings(child, names, declared)
        if not isinstance(node, ast.ClassDef):
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    _bindings(default, names, declared)
        return
    elif isinstance(node, ast.Lambda):
        return
    elif isinstance(node, COMPREHENSIONS):
        # Only a walrus inside binds in the enclosing function; the loop targets are the comprehension's.
        names.update(n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr))
        return
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
    elif isinstance(node, ast.ExceptHandler) and node.name:
        names.add(node.name)
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        declared.update(node.names)
    for child in ast.iter_child_nodes(node):
        _bindings(child, names, declared)


def function_locals(node: ast.AST) -> set[str]:
    """The names local to a function, lambda or comprehension scope (global and nonlocal ones excepted)."""
    if isinstance(node, COMPREHENSIONS):
        return {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
    assert isinstance(node, FUNCTION_SCOPES)
    names, declared = parameters(node), set()
    body = [node.body] if isinstance(node, ast.Lambda) else node.body
    for statement in body:
        _bindings(statement, names, declared)
    return names - declared
