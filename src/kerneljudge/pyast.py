"""`ast.parse` behind one lock.

CPython 3.11 builds AST objects with interpreter-wide recursion bookkeeping that
is not safe across threads: two judgments parsing at once (`kerneljudge redteam
--jobs 2`) raised "SystemError: AST constructor recursion depth mismatch" on
this project's CI (CPython issue gh-106905). Parsing is fast; serialising it
costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    with _LOCK:
        return ast.parse(source)
