"""Static analysis of candidate source, on the AST (comments and strings cannot hide or fake a construct).

Names are resolved through the candidate's own imports and simple aliases
(`import torch as t`, `from torch import cuda`, `S = torch.cuda.Stream`), so
that `t.cuda.Stream()` and `S()` are both seen as `torch.cuda.Stream`. The scan
reports what it saw as evidence; whether it matters is decided by the policy in
preflight/__init__.py and, above all, by runtime evidence.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kerneljudge.checks.catalog import CATALOG

# Modules whose attributes a candidate must not assign, delete or reach by computed name.
PROTECTED = (
    "torch",
    "triton",
    "kerneljudge",
    "time",
    "builtins",
    "sys",
    "os",
    "gc",
    "safetensors",
    "numpy",
    "threading",
    "importlib",
)

FLAG_PREFIXES = (
    "torch.backends.",
    "torch.set_float32_matmul_precision",
    "torch.use_deterministic_algorithms",
    "torch.set_default_dtype",
    "torch.set_flush_denormal",
)

# Calls (resolved dotted names, matched as prefixes) that reveal a construct.
CALL_RULES: dict[str, tuple[str, ...]] = {
    "KJ-S010": (
        "threading.Thread",
        "threading.Timer",
        "_thread.",
        "multiprocessing.",
        "concurrent.futures.",
        "subprocess.",
        "os.fork",
        "os.spawn",
        "os.system",
        "os.popen",
        "os.exec",
        "os.posix_spawn",
        "asyncio.",
        "pty.",
    ),
    "KJ-S011": (
        "sys.setprofile",
        "sys.settrace",
        "threading.setprofile",
        "threading.settrace",
        "atexit.",
        "signal.signal",
        "signal.setitimer",
        "signal.alarm",
        "weakref.finalize",
        "sys.addaudithook",
        "sys.set_asyncgen_hooks",
    ),
    "KJ-S020": (
        "torch.cuda.Stream",
        "torch.cuda.stream",
        "torch.cuda.set_stream",
        "torch.cuda.ExternalStream",
        "torch.Stream",
        "torch.cuda.StreamContext",
    ),
    "KJ-S021": ("torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.make_graphed_callables"),
    "KJ-S030": ("ctypes.", "cffi.", "mmap.", "importlib.machinery.ExtensionFileLoader"),
    "KJ-S040": (
        "open",
        "io.open",
        "os.open",
        "os.remove",
        "os.unlink",
        "os.rename",
        "os.replace",
        "os.rmdir",
        "os.makedirs",
        "os.mkdir",
        "os.listdir",
        "os.scandir",
        "os.walk",
        "os.chmod",
        "os.truncate",
        "shutil.",
        "pathlib.",
        "tempfile.",
        "glob.",
        "numpy.load",
        "numpy.save",
        "torch.load",
        "torch.save",
        "os.write",
        "os.read",
        "os.dup",
        "os.dup2",
        "os.fdopen",
        "os.pipe",
        "os.sendfile",
        "io.FileIO",
    ),
    "KJ-S041": ("socket.", "urllib.", "http.", "requests.", "httpx.", "ftplib.", "smtplib.", "aiohttp."),
    "KJ-S050": (
        "sys._getframe",
        "inspect.currentframe",
        "inspect.stack",
        "inspect.getouterframes",
        "inspect.trace",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.exc_info",
        "traceback.extract_stack",
        "traceback.walk_stack",
    ),
    "KJ-S051": (
        "exec",
        "eval",
        "compile",
        "__import__",
        "importlib.import_module",
        "importlib.reload",
        "importlib.util.",
        "marshal.",
        "pickle.",
        "types.CodeType",
        "types.FunctionType",
        "runpy.",
    ),
    "KJ-S052": (
        "os.putenv",
        "os.unsetenv",
        "os.environ.update",
        "os.environ.setdefault",
        "os.environ.pop",
        "os.environ.clear",
    ),
    "KJ-S060": ("torch.autocast", "torch.cuda.amp.", "torch.amp.", "torch.float16", "torch.half", "torch.bfloat16"),
}
IMPORT_RULES: dict[str, tuple[str, ...]] = {
    "KJ-S003": ("kerneljudge",),
    "KJ-S010": ("threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio", "pty"),
    "KJ-S030": ("ctypes", "cffi", "mmap"),
    "KJ-S041": ("socket", "urllib", "http", "requests", "httpx", "ftplib", "smtplib", "aiohttp"),
    "KJ-S051": ("marshal", "pickle", "runpy"),
}
ATTRIBUTE_RULES: dict[str, tuple[str, ...]] = {
    "KJ-S050": (
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "__globals__",
        "__closure__",
        "__code__",
        "__subclasses__",
        "__mro__",
    ),
}
# Builtins that matter; any other unbound name is a local whose type the scan cannot know.
BUILTIN_NAMES = {
    "open",
    "exec",
    "eval",
    "compile",
    "__import__",
    "setattr",
    "delattr",
    "getattr",
    "breakpoint",
    "input",
    "globals",
    "locals",
    "vars",
}
# Methods that read or write files whatever the receiver (pathlib objects).
FILE_METHODS = {"read_text", "write_text", "read_bytes", "write_bytes", "unlink", "rmdir", "touch", "mkdir"}
REDUCED_PRECISION_METHODS = {"half", "bfloat16"}

KERNEL_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics")
KERNEL_BUILDERS = (
    "torch.utils.cpp_extension.load_inline",
    "torch.utils.cpp_extension.load",
    "cupy.RawKernel",
    "cupy.RawModule",
    "numba.cuda.jit",
)

# torch entry points that only allocate, view or reshape: fine under the strict policy.
TORCH_STRUCTURAL = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "tensor",
    "as_tensor",
    "from_numpy",
    "arange",
    "reshape",
    "flatten",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "permute",
    "transpose",
    "t",
    "narrow",
    "select",
    "split",
    "chunk",
    "unbind",
    "view_as_real",
    "view_as_complex",
    "as_strided",
    "broadcast_to",
    "broadcast_tensors",
    "manual_seed",
    "no_grad",
    "inference_mode",
    "is_tensor",
    "device",
    "dtype",
    "Size",
    "Tensor",
    "Generator",
    "get_default_dtype",
    "is_floating_point",
    "numel",
    "result_type",
    "promote_types",
    "finfo",
    "iinfo",
    "randn",
    "rand",
    "randint",
    "randperm",
    "randn_like",
    "rand_like",
    "randint_like",
    "normal",
}
TORCH_NON_COMPUTE_PREFIXES = (
    "torch.nn.Module",
    "torch.nn.Parameter",
    "torch.nn.ParameterList",
    "torch.nn.ModuleList",
    "torch.nn.init.",
    "torch.cuda.",
    "torch.utils.",
    "torch.backends.",
    "torch.library.",
    "torch.Size",
    "torch.float",
    "torch.int",
    "torch.bool",
    "torch.uint",
    "torch.bfloat16",
    "torch.half",
    "torch.double",
    "torch.long",
    "torch.complex",
)
TENSOR_COMPUTE_METHODS = {
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "softmax",
    "log_softmax",
    "exp",
    "log",
    "sum",
    "mean",
    "var",
    "std",
    "max",
    "min",
    "relu",
    "sigmoid",
    "tanh",
    "sqrt",
    "rsqrt",
    "pow",
    "norm",
    "cumsum",
    "prod",
    "einsum",
    "conv2d",
    "gelu",
    "silu",
    "layer_norm",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "clamp",
    "clamp_min",
    "abs",
    "add",
    "mul",
    "sub",
    "div",
    "addcmul",
    "baddbmm",
    "logsumexp",
    "topk",
    "sort",
}


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


def _matches(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or (p.endswith(".") and name.startswith(p)) or name.startswith(p + ".") for p in prefixes)


class Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.report = StaticReport()
        self.kernel_depth = 0  # inside a kernel body, or in __init__ (weight packing is fine there)
        self.class_stack: list[str] = []

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
            self.aliases[alias.asname or alias.name.split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )
            self._import_rules(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._import_rules(module, node)
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            self.aliases[alias.asname or alias.name] = full
            for code, prefixes in CALL_RULES.items():
                if CATALOG[code].high_risk and _matches(full, prefixes):
                    self.add(code, node, f"imports {full}")

    def _import_rules(self, module: str, node: ast.AST) -> None:
        for code, prefixes in IMPORT_RULES.items():
            if _matches(module, prefixes):
                self.add(code, node, f"imports {module}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target, node)
        value = self.resolve(node.value)
        if value and isinstance(node.value, (ast.Name, ast.Attribute)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = value
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
            self.add("KJ-S002", node, f"sets {name}")
        elif name.split(".")[0] in PROTECTED:
            self.add("KJ-S001", node, f"assigns {name}")

    # ------------------------------------------------------------ definitions

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        decorators = [self.resolve(d.func if isinstance(d, ast.Call) else d) or "" for d in node.decorator_list]
        is_kernel = any(_matches(d, KERNEL_DECORATORS) for d in decorators)
        if is_kernel:
            self.report.declared_kernels.append(
                {"name": node.name, "kind": "triton", "line": node.lineno, "decorators": decorators}
            )
        if node.name == "__del__" and self.class_stack:
            self.add("KJ-S011", node, f"defines {self.class_stack[-1]}.__del__")
        for decorator in node.decorator_list:
            self.visit(decorator)
        exempt = is_kernel or node.name == "__init__"
        self.kernel_depth += exempt
        for statement in node.body:
            self.visit(statement)
        self.kernel_depth -= exempt

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.class_stack.append(node.name)
        self.generic_visit(node)
        self.class_stack.pop()

    # ------------------------------------------------------------ uses

    def visit_Call(self, node: ast.Call) -> None:
        name = self.resolve(node.func)
        if name:
            self._check_call(name, node)
        elif isinstance(node.func, ast.Attribute):
            self._check_method(node.func.attr, node)
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
        if name.startswith(FLAG_PREFIXES) and not name.startswith("torch.backends.cuda.sdp_kernel"):
            self.add("KJ-S002", node, f"calls {name}")
        if _matches(name, KERNEL_BUILDERS):
            self.report.declared_kernels.append(
                {"name": name.rsplit(".", 1)[-1], "kind": "cuda_source", "line": node.lineno, "builder": name}
            )
        for code, prefixes in CALL_RULES.items():
            if _matches(name, prefixes):
                self.add(code, node, f"calls {name}")
        if (
            self.kernel_depth == 0
            and name.startswith("torch.")
            and not _matches(name, TORCH_NON_COMPUTE_PREFIXES)
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
        name = self.resolve(node)
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


def scan(source: str) -> StaticReport:
    """Scan candidate source; raises SyntaxError if it does not parse."""
    scanner = Scanner()
    scanner.visit(ast.parse(source))
    return scanner.report
