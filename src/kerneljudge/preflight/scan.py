"""Static analysis of candidate source, on the AST (comments and strings cannot hide or fake a construct).

Names are resolved through the candidate's own imports and simple aliases
(`import torch as t`, `from torch import cuda`, `S = torch.cuda.Stream`), so
that `t.cuda.Stream()` and `S()` are both seen as `torch.cuda.Stream`. Two kinds
of rule meet here: the deny-list of rules.py (each construct its own code) and
the allow-list of allowlist.py (an import, a builtin, a dunder or a module's
attribute outside the allowed forms, or a module handed around as a value where
no alias can follow it: KJ-S004, KJ-S054). The scan reports what it saw as
evidence; whether it matters is decided by the policy in preflight/__init__.py
and, above all, by runtime evidence.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from kerneljudge.checks.catalog import CATALOG
from kerneljudge.preflight.allowlist import (
    ATTRIBUTE_BUILTINS,
    MODULE_VALUES,
    RESTRICTED_MODULES,
    import_allowed,
    reach_allowed,
)
from kerneljudge.preflight.kernel_rules import (
    KERNEL_BUILDERS,
    KERNEL_DECORATORS,
    TENSOR_COMPUTE_METHODS,
    TORCH_NON_COMPUTE_PREFIXES,
    TORCH_STRUCTURAL,
)
from kerneljudge.preflight.reach import ReachChecks
from kerneljudge.preflight.rules import (
    ATTRIBUTE_RULES,
    BUILTIN_NAMES,
    CALL_RULES,
    FILE_METHODS,
    FLAG_PREFIXES,
    FLAG_QUERIES,
    IMPORT_RULES,
    PROTECTED,
    REDUCED_PRECISION_METHODS,
    STRICTER_SETTINGS,
    matches,
)
from kerneljudge.preflight.scopes import function_locals
from kerneljudge.sources import pyast

ALLOW_LIST_CODES = ("KJ-S004", "KJ-S054")


def stricter(name: str, value: ast.AST | None) -> bool:
    """A flag set to a constant that only makes numerics stricter (rules.STRICTER_SETTINGS)."""
    return (
        name in STRICTER_SETTINGS
        and isinstance(value, ast.Constant)
        and type(value.value) is type(STRICTER_SETTINGS[name])
        and value.value == STRICTER_SETTINGS[name]
    )


@dataclass(frozen=True)
class Construct:
    code: str
    line: int
    detail: str


@dataclass
class StaticReport:
    """What the source shows: constructs by catalog code and the custom kernels it declares."""

    constructs: list[Construct] = field(default_factory=list)
    declared_kernels: list[dict[str, object]] = field(default_factory=list)
    torch_compute: list[Construct] = field(default_factory=list)

    def codes(self) -> set[str]:
        return {c.code for c in self.constructs}


CUDA_KERNEL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\("
)


class Scanner(ReachChecks, ast.NodeVisitor):
    def __init__(self, tree: ast.Module) -> None:
        self.aliases: dict[str, str] = {}
        self.report = StaticReport()
        self.kernel_depth = 0  # inside a kernel body, or in __init__ (weight packing is fine there)
        self.class_stack: list[str] = []
        self.parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        # Names any statement rebinds: `TYPE_CHECKING = True` must not turn an import guard into an exemption.
        self.stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        self.module_aliases: set[str] = set()  # names bound to a module, or to a value of a restricted one
        self.scopes: list[tuple[ast.AST, set[str]]] = []  # enclosing function scopes and their local names
        self.class_body = 0  # directly in a class body: an alias there is a class attribute the scan cannot follow
        self.type_checking = 0  # inside `if TYPE_CHECKING:`, which never runs

    # ------------------------------------------------------------ names

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression refers to, through import aliases; None when unknowable."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            return node.id if node.id in BUILTIN_NAMES else None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            base = self.resolve(node.args[0])
            return f"{base}.{node.args[1].value}" if base else None
        return None

    def add(self, code: str, node: ast.AST, detail: str) -> None:
        self.report.constructs.append(Construct(code, getattr(node, "lineno", 0), detail))

    # ------------------------------------------------------------ imports and aliases

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            self.aliases[bound] = alias.name if alias.asname else alias.name.split(".")[0]
            self.module_aliases.add(bound)
            self._import_rules(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.add("KJ-S004", node, f"imports {'.' * node.level}{module} (a relative import)")
        else:
            self._import_rules(module, node)
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            if alias.name == "*":
                if module.split(".")[0] in RESTRICTED_MODULES:
                    self.add("KJ-S054", node, f"imports every name of {module}")
                continue
            self.aliases[alias.asname or alias.name] = full
            if module.split(".")[0] in RESTRICTED_MODULES:
                self.module_aliases.add(alias.asname or alias.name)
            for code, prefixes in CALL_RULES.items():
                if CATALOG[code].high_risk and matches(full, prefixes):
                    self.add(code, node, f"imports {full}")
            why = reach_allowed(full) if not node.level and import_allowed(module) else None
            if why:
                self.add("KJ-S054", node, f"imports {alias.name}: {why}")

    def _import_rules(self, module: str, node: ast.AST) -> None:
        for code, prefixes in IMPORT_RULES.items():
            if matches(module, prefixes):
                self.add(code, node, f"imports {module}")
        if not import_allowed(module) and not self.type_checking:
            self.add("KJ-S004", node, f"imports {module}")

    def visit_If(self, node: ast.If) -> None:
        guard = self.resolve(node.test) == "typing.TYPE_CHECKING" and not (
            isinstance(node.test, ast.Name) and node.test.id in self.stored
        )
        self.visit(node.test)
        self.type_checking += guard
        for statement in node.body:
            self.visit(statement)
        self.type_checking -= guard
        for statement in node.orelse:
            self.visit(statement)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target, node)
        value = self.resolve(node.value)
        if value and isinstance(node.value, (ast.Name, ast.Attribute)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = value
                    if self._module_value(node.value):
                        self.module_aliases.add(target.id)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_target(target, node)
        self.generic_visit(node)

    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_target(element, node)
            return
        if isinstance(target, ast.Subscript):
            name = self.resolve(target.value)
            if name == "os.environ":
                self.add("KJ-S052", node, "writes os.environ")
            return
        if not isinstance(target, ast.Attribute):
            return
        name = self.resolve(target)
        if name is None:
            return
        if name.startswith(FLAG_PREFIXES):
            if not (isinstance(node, (ast.Assign, ast.AnnAssign)) and stricter(name, node.value)):
                self.add("KJ-S002", node, f"sets {name}")
        elif name.split(".")[0] in PROTECTED:
            self.add("KJ-S001", node, f"assigns {name}")

    # ------------------------------------------------------------ definitions

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        decorators = [self.resolve(d.func if isinstance(d, ast.Call) else d) or "" for d in node.decorator_list]
        is_kernel = any(matches(d, KERNEL_DECORATORS) for d in decorators)
        if is_kernel:
            self.report.declared_kernels.append(
                {"name": node.name, "kind": "triton", "line": node.lineno, "decorators": decorators}
            )
        if node.name == "__del__" and self.class_stack:
            self.add("KJ-S011", node, f"defines {self.class_stack[-1]}.__del__")
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.visit(node.args)  # defaults and annotations run in the enclosing scope
        if node.returns:
            self.visit(node.returns)
        exempt = is_kernel or node.name == "__init__"
        self.kernel_depth += exempt
        self._in_scope(node, node.body)
        self.kernel_depth -= exempt

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.args)
        self._in_scope(node, [node.body])

    def _visit_comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        self.visit(node.generators[0].iter)  # the first iterable runs in the enclosing scope
        rest = [node.generators[0].target, *node.generators[0].ifs, *node.generators[1:]]
        elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        self._in_scope(node, [*rest, *elements])

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension  # type: ignore

    def _in_scope(self, node: ast.AST, body: list[ast.AST]) -> None:
        self.scopes.append((node, function_locals(node)))
        outer_class_body, self.class_body = self.class_body, 0
        for child in body:
            self.visit(child)
        self.class_body = outer_class_body
        self.scopes.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for child in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(child)
        self.class_stack.append(node.name)
        self.class_body += 1
        for statement in node.body:
            self.visit(statement)
        self.class_body -= 1
        self.class_stack.pop()

    # ------------------------------------------------------------ uses

    def visit_Call(self, node: ast.Call) -> None:
        name = self.resolve(node.func)
        if name:
            self._check_call(name, node)
        elif isinstance(node.func, ast.Attribute):
            self._check_method(node.func.attr, node)
        if isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_BUILTINS and not self._shadowed(node.func.id):
            self._attribute_builtin(node.func.id, node)
        self.generic_visit(node)

    def _check_call(self, name: str, node: ast.Call) -> None:
        if name in ("setattr", "delattr", "builtins.setattr", "builtins.delattr") and node.args:
            target = self.resolve(node.args[0])
            if target and target.split(".")[0] in PROTECTED:
                self.add("KJ-S001", node, f"{name}() on {target}")
        if (
            name in ("getattr", "builtins.getattr")
            and len(node.args) >= 2
            and not isinstance(node.args[1], ast.Constant)
        ):
            target = self.resolve(node.args[0])
            if target and target.split(".")[0] in PROTECTED:
                self.add("KJ-S053", node, f"getattr({target}, <computed>)")
        if name in ("vars", "builtins.vars") and len(node.args) == 1:
            target = self.resolve(node.args[0])  # a protected module's namespace, to index by a computed name
            if target and target.split(".")[0] in PROTECTED:
                self.add("KJ-S053", node, f"vars({target})")
        if (
            name.startswith(FLAG_PREFIXES)
            and not name.startswith("torch.backends.cuda.sdp_kernel")
            and not name.rsplit(".", 1)[-1].startswith(FLAG_QUERIES)
            and not (len(node.args) == 1 and not node.keywords and stricter(name, node.args[0]))
        ):
            self.add("KJ-S002", node, f"calls {name}")
        if matches(name, KERNEL_BUILDERS):
            self.report.declared_kernels.append(
                {"name": name.rsplit(".", 1)[-1], "kind": "cuda_source", "line": node.lineno, "builder": name}
            )
        for code, prefixes in CALL_RULES.items():
            if matches(name, prefixes):
                self.add(code, node, f"calls {name}")
        if (
            self.kernel_depth == 0
            and name.startswith("torch.")
            and not matches(name, TORCH_NON_COMPUTE_PREFIXES)
            and name.split(".")[-1] not in TORCH_STRUCTURAL
        ):
            self.report.torch_compute.append(Construct("KJ-S071", node.lineno, f"calls {name}"))

    def _check_method(self, method: str, node: ast.Call) -> None:
        if method in FILE_METHODS:
            self.add("KJ-S040", node, f"calls .{method}()")
        if method in REDUCED_PRECISION_METHODS:
            self.add("KJ-S060", node, f"calls .{method}()")
        if method in TENSOR_COMPUTE_METHODS and not self.kernel_depth:
            self.report.torch_compute.append(Construct("KJ-S071", node.lineno, f"calls .{method}()"))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        for code, attributes in ATTRIBUTE_RULES.items():
            if node.attr in attributes:
                self.add(code, node, f"reads .{node.attr}")
        if isinstance(node.ctx, ast.Load):
            self._check_dunder(node.attr, node.value, node)
            outermost = not (isinstance(self.parents.get(node), ast.Attribute) and self.parents[node].value is node)
            reached = self.resolve(node) if outermost else None
            if reached:
                self._reach(reached, node)
            if reached in MODULE_VALUES and self._bare(node):
                self.add("KJ-S054", node, f"uses the module {reached} as a value")
        name = self.resolve(node)
        if name == "sys.modules":  # any module, the judge's included, by a name computed at run time
            self.add("KJ-S053", node, "reads sys.modules")
        if node.attr == "__dict__" and (self.resolve(node.value) or "").split(".")[0] in PROTECTED:
            self.add("KJ-S053", node, f"reads {self.resolve(node.value)}.__dict__")
        if name and isinstance(node.ctx, ast.Load):
            if name in ("torch.float16", "torch.half", "torch.bfloat16"):
                self.add("KJ-S060", node, f"uses {name}")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self.kernel_depth == 0:
            self.report.torch_compute.append(Construct("KJ-S071", node.lineno, "uses the @ operator"))
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg in ("allow_tf32",) and isinstance(node.value, ast.Constant) and node.value.value is True:
            self.add("KJ-S060", node, "allow_tf32=True")
        if (
            node.arg == "input_precision"
            and isinstance(node.value, ast.Constant)
            and str(node.value.value).startswith("tf32")
        ):
            self.add("KJ-S060", node, f"input_precision={node.value.value!r}")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        # CUDA source handed to load_inline and friends: its __global__ functions are declared kernels
        # that the kernel trace looks for by name.
        if isinstance(node.value, str) and "__global__" in node.value:
            for name in CUDA_KERNEL.findall(node.value):
                self.report.declared_kernels.append({"name": name, "kind": "cuda", "line": node.lineno})


def _without_repeats(constructs: list[Construct]) -> list[Construct]:
    """The allow-list's findings, less those on a line a deny-list code already names (`os.fork()` is
    KJ-S010, not KJ-S054 too), and less exact repeats."""
    named = {c.line for c in constructs if CATALOG[c.code].high_risk and c.code not in ALLOW_LIST_CODES}
    kept: list[Construct] = []
    for construct in constructs:
        if construct.code in ALLOW_LIST_CODES and (construct.line in named or construct in kept):
            continue
        kept.append(construct)
    return kept


def scan(source: str) -> StaticReport:
    """Scan candidate source; raises SyntaxError if it does not parse."""
    tree = pyast.parse(source)
    scanner = Scanner(tree)
    scanner.visit(tree)
    scanner.report.constructs = _without_repeats(scanner.report.constructs)
    return scanner.report
