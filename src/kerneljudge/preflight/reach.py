"""The allow-list's side of the preflight's scan: what a name, an attribute or a builtin reaches, judged on the
name the scan resolved rather than on its spelling (preflight/allowlist.py holds the lists, docs/findings.md
KJ-S004 and KJ-S054).

`ReachChecks` is a part of the scanner (preflight/scan.py), which keeps the aliases, the enclosing scopes and
every node's parent that these checks read: a module handed around as a value, a builtin named anywhere, a
dunder outside the data model, a computed name given to getattr and its kin.
"""

from __future__ import annotations

import ast
from typing import Any

from kerneljudge.checks.catalog import CATALOG
from kerneljudge.preflight.allowlist import (
    ATTRIBUTE_BUILTINS,
    DATA_MODEL_DUNDERS,
    FORBIDDEN_BUILTINS,
    MODULE_VALUES,
    SELF_DUNDERS,
    is_dunder,
    reach_allowed,
)
from kerneljudge.preflight.rules import ATTRIBUTE_RULES, CALL_RULES, matches
from kerneljudge.preflight.scopes import COMPREHENSIONS, FUNCTION_SCOPES, parameters


class ReachChecks:
    """The scanner's allow-list checks; the scanner provides `add`, `resolve`, `aliases`, `module_aliases`,
    `parents`, `scopes` and `class_body`."""

    aliases: dict[str, str]
    module_aliases: set[str]
    parents: dict[ast.AST, ast.AST]
    scopes: list[tuple[ast.AST, set[str]]]
    class_body: int

    add: Any  # (code, node, detail): records a construct
    resolve: Any  # (node) -> the dotted name it refers to, or None

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load) or self._shadowed(node.id):
            return
        called = self._is_called(node)
        if node.id in FORBIDDEN_BUILTINS and not (
            called and matches(node.id, CALL_RULES.get(FORBIDDEN_BUILTINS[node.id], ()))
        ):
            self.add(FORBIDDEN_BUILTINS[node.id], node, f"names the builtin {node.id}")
        if node.id in ATTRIBUTE_BUILTINS and not called:
            self.add("KJ-S054", node, f"passes the builtin {node.id} as a value")
        if node.id in self.module_aliases and self._bare(node):
            self.add("KJ-S054", node, f"uses the module {self.aliases.get(node.id, node.id)} as a value")

    def _reach(self, name: str, node: ast.AST) -> None:
        """A resolved dotted name: the deny-list's code where one names it (a call has it from _check_call;
        `f = os.fork` here), else whatever the allow-list says."""
        for code, prefixes in CALL_RULES.items():
            if CATALOG[code].high_risk and matches(name, prefixes):
                if not self._is_called(node):
                    self.add(code, node, f"reaches {name}")
                return
        why = reach_allowed(name)
        if why:
            self.add("KJ-S054", node, why)

    def _check_dunder(self, attribute: str, base: ast.AST, node: ast.AST) -> None:
        if not is_dunder(attribute) or attribute in DATA_MODEL_DUNDERS:
            return
        if any(attribute in attributes for attributes in ATTRIBUTE_RULES.values()):
            return  # already its own code
        on_self = (isinstance(base, ast.Name) and base.id == "self") or (
            isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super"
        )
        if attribute in SELF_DUNDERS and on_self:
            return
        self.add("KJ-S051" if attribute == "__import__" else "KJ-S054", node, f"reads .{attribute}")

    def _shadowed(self, name: str) -> bool:
        return any(name in local for _, local in self.scopes)

    def _is_called(self, node: ast.AST) -> bool:
        parent = self.parents.get(node)
        return isinstance(parent, ast.Call) and parent.func is node

    def _module_value(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.module_aliases and not self._parameter(node.id)
        return self.resolve(node) in MODULE_VALUES

    def _parameter(self, name: str) -> bool:
        """A name a function's parameter or a comprehension's target binds: not the module of that name."""
        return any(
            name in (parameters(scope) if isinstance(scope, FUNCTION_SCOPES) else local)
            for scope, local in self.scopes
            if isinstance(scope, (*FUNCTION_SCOPES, *COMPREHENSIONS))
        )

    def _bare(self, node: ast.AST) -> bool:
        """A module used as a value (a tuple's item, an argument, a return value, a default, an attribute's
        value) rather than as the base of an attribute chain or a plain alias the scan follows."""
        if isinstance(node, ast.Name) and self._parameter(node.id):
            return False
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return False
        if (  # getattr(torch, "compile", None) is torch.compile
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id in ATTRIBUTE_BUILTINS
            and len(parent.args) >= 2
            and parent.args[0] is node
            and isinstance(parent.args[1], ast.Constant)
            and isinstance(parent.args[1].value, str)
        ):
            return False
        plain_alias = isinstance(parent, ast.Assign) and all(isinstance(t, ast.Name) for t in parent.targets)
        return not (plain_alias and not self.class_body)

    def _attribute_builtin(self, builtin: str, node: ast.Call) -> None:
        """`getattr(x, "name")` is judged as `x.name`; a computed name reaches what the scan cannot see."""
        args = node.args
        if len(args) < 2 or any(isinstance(a, ast.Starred) for a in args[:2]):
            self.add("KJ-S054", node, f"{builtin}() with unpacked arguments")
        elif isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
            attribute = args[1].value
            for code, attributes in ATTRIBUTE_RULES.items():
                if attribute in attributes:
                    self.add(code, node, f"{builtin}(..., {attribute!r})")
            self._check_dunder(attribute, args[0], node)
            name = self.resolve(node) if builtin == "getattr" else None
            if name:
                self._reach(name, node)
        elif not (isinstance(args[0], ast.Name) and args[0].id == "self"):
            self.add("KJ-S054", node, f"{builtin}() with a computed name")
