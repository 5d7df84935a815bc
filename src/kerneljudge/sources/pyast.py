"""`ast.parse` (and `symtable`) behind one lock.

CPython 3.11 builds AST objects with interpreter-wide recursion bookkeeping that
is not safe across threads: two judgments parsing at once (`kerneljudge redteam
--jobs 2`) raised "SystemError: AST constructor recursion depth mismatch" on
this project's CI (CPython issue gh-106905). Parsing is fast; serialising it
costs nothing measurable.
"""

from __future__ import annotations

import ast
import symtable
import threading

_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    with _LOCK:
        return ast.parse(source)


def symbols(source: str, filename: str = "<task>") -> symtable.SymbolTable:
    """The module's symbol tables (which names each function and class reads from the module), under the
    same lock: symtable builds its AST as `ast.parse` does. Nothing of `source` runs."""
    with _LOCK:
        return symtable.symtable(source, filename, "exec")
