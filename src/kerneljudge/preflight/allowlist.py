"""The preflight's allow-list: the modules, builtins and attributes a candidate's source may reach.

Everything else is a finding (KJ-S004 for an import, KJ-S054 for a reach), named by its line; docs/findings.md
lists these tables in prose. The lists are what kernels need: the kernel languages and their runtimes, the
numerical and functional standard library, and a few read-only corners of `os`, `sys` and `time`. Adding a
library is one line here; the scan judges spellings it can resolve through the candidate's own imports and
aliases (preflight/scan.py), and the OS sandbox stays the wall behind it (docs/security.md).
"""

from __future__ import annotations

# Imported with every submodule and reached by any attribute chain (but those of DENIED_CHAINS, or through a
# component named in OUTSIDE_MODULE_NAMES, or a dunder outside DATA_MODEL_DUNDERS).
FREE_MODULES = frozenset(
    {
        # kernel languages, their runtimes and the array libraries they hand tensors to
        "torch",
        "triton",
        "cutlass",  # CUTLASS's CuTe DSL
        "cuda",  # cuda-python (cuda.bindings, cuda.core): the CuTe DSL's streams and pointers
        "cupy",
        "numba",
        "helion",
        "aiter",  # ROCm's kernel library (GPU MODE's AMD problems)
        "numpy",
        "einops",
        # the numerical and functional standard library
        "__future__",
        "math",
        "cmath",
        "numbers",
        "fractions",
        "decimal",
        "statistics",
        "random",
        "bisect",
        "heapq",
        "functools",
        "itertools",
        "operator",
        "collections",
        "typing",
        "typing_extensions",
        "dataclasses",
        "enum",
        "abc",
        "contextlib",
        "warnings",
        "copy",
        "string",
        "re",
        "struct",
    }
)

# Imported, and reached only by the dotted names listed (relative to the module; a trailing `.*` allows any
# further attribute of a read-only value). `os.environ` writes are KJ-S052 whatever the list says.
RESTRICTED_MODULES: dict[str, frozenset[str]] = {
    "os": frozenset(
        {
            "environ",
            "environ.get",
            "environ.copy",
            "environ.items",
            "environ.keys",
            "environ.values",
            "getenv",
            "cpu_count",
            "sched_getaffinity",
            "getpid",
            "fspath",
            "PathLike",
            "name",
            "sep",
            "pathsep",
            "linesep",
            "curdir",
            "devnull",
            "path",
            "path.join",
            "path.basename",
            "path.dirname",
            "path.split",
            "path.splitext",
            "path.normpath",
            "path.abspath",
            "path.isabs",
            "path.exists",
            "path.isfile",
            "path.isdir",
            "path.sep",
        }
    ),
    "sys": frozenset(
        {
            "version",
            "version_info",
            "version_info.*",
            "hexversion",
            "implementation.name",
            "platform",
            "byteorder",
            "maxsize",
            "float_info",
            "float_info.*",
            "int_info",
            "int_info.*",
            "getsizeof",
            "getrecursionlimit",
            "stdout",
            "stdout.write",
            "stdout.flush",
            "stderr",
            "stderr.write",
            "stderr.flush",
        }
    ),
    "time": frozenset(
        {
            "time",
            "time_ns",
            "perf_counter",
            "perf_counter_ns",
            "monotonic",
            "monotonic_ns",
            "process_time",
            "process_time_ns",
            "sleep",
        }
    ),
}

# Values of restricted modules that are modules or writable namespaces themselves: passed around as a value,
# their attributes escape the list.
MODULE_VALUES = frozenset({"os.path", "os.environ"})

# Attribute chains under a free module that exist to start processes, load native code, reach files or the
# network, or hook the interpreter (a prefix of the resolved dotted name).
DENIED_CHAINS = (
    "torch._C",
    "torch.hub",
    "torch.multiprocessing",
    "torch.package",
    "torch.utils.data",
    "torch.utils.tensorboard",
    "numpy.ctypeslib",
    "operator.attrgetter",  # attribute access by a string, on an object passed later
    "operator.methodcaller",
    "typing.get_type_hints",  # evaluates string annotations as code
    "typing.ForwardRef",
)

# Modules that give the process itself (files, processes, native code, the import system, the interpreter's
# internals): reached as an attribute of an allowed module (`torch.os`, `numpy.sys`), they are not the
# library any more. Names the kernel libraries also use for their own members (`torch.select`,
# `torch.signal`, `torch.random`) are left out.
OUTSIDE_MODULE_NAMES = frozenset(
    {
        "os",
        "posix",
        "nt",
        "sys",
        "builtins",
        "importlib",
        "_imp",
        "imp",
        "io",
        "_io",
        "gc",
        "inspect",
        "ctypes",
        "_ctypes",
        "cffi",
        "mmap",
        "socket",
        "_socket",
        "subprocess",
        "_posixsubprocess",
        "threading",
        "_thread",
        "multiprocessing",
        "pty",
        "shutil",
        "pathlib",
        "tempfile",
        "glob",
        "marshal",
        "pickle",
        "runpy",
        "atexit",
        "faulthandler",
        "resource",
        "fcntl",
        "pkgutil",
        "zipimport",
        "site",
        "sysconfig",
        "urllib",
        "http",
        "asyncio",
        "concurrent",
        "code",
        "codeop",
    }
)

# Builtins a candidate may not name at all (called or not): they open files, run code from strings, import by
# a run-time name, hand out namespaces, or wait on a terminal. By the code each already means.
FORBIDDEN_BUILTINS = {
    "open": "KJ-S040",
    "exec": "KJ-S051",
    "eval": "KJ-S051",
    "compile": "KJ-S051",
    "__import__": "KJ-S051",
    "globals": "KJ-S054",
    "locals": "KJ-S054",
    "vars": "KJ-S054",
    "breakpoint": "KJ-S054",
    "input": "KJ-S054",
    "__builtins__": "KJ-S054",
    "__loader__": "KJ-S054",
    "__spec__": "KJ-S054",
}
# Builtins that reach an attribute by a name given at run time: allowed as calls with a constant name, or on
# `self`; anything else (a computed name, the builtin passed as a value) is a reach the scan cannot follow.
ATTRIBUTE_BUILTINS = frozenset({"getattr", "setattr", "delattr", "hasattr"})

# Dunder attributes of the data model's ordinary protocol: construction, naming, operators, containers,
# context managers, copying, numbers and the array interfaces kernels hand tensors through.
_OPERATORS = (
    "add sub mul matmul truediv floordiv mod divmod pow lshift rshift and xor or".split()  # binary, each 3 ways
)
DATA_MODEL_DUNDERS = frozenset(
    {f"__{op}__" for op in _OPERATORS}
    | {f"__r{op}__" for op in _OPERATORS}
    | {f"__i{op}__" for op in _OPERATORS}
    | {
        f"__{name}__"
        for name in (
            "init new post_init init_subclass class_getitem set_name call "
            "name qualname module doc class annotations version slots all wrapped "
            "repr str format bytes hash bool len length_hint iter next reversed contains "
            "getitem setitem delitem missing enter exit "
            "eq ne lt le gt ge neg pos abs invert round trunc floor ceil "
            "int float complex index sizeof copy deepcopy getstate setstate "
            "array array_interface cuda_array_interface dlpack dlpack_device torch_function torch_dispatch"
        ).split()
    }
)
# Dunders reached only through super() or self: a class's own attribute protocol.
SELF_DUNDERS = frozenset({"__getattr__", "__setattr__", "__delattr__", "__getattribute__", "__dict__"})


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def import_allowed(module: str) -> bool:
    """Whether `import module` (or `from module import ...`) is on the allow-list."""
    root = module.split(".")[0]
    if root in RESTRICTED_MODULES:
        return module == root or reach_allowed(module) is None
    return root in FREE_MODULES and not _denied_chain(module)


def _denied_chain(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in DENIED_CHAINS)


def reach_allowed(name: str) -> str | None:
    """Why the resolved dotted name `name` (rooted at an imported module) is outside the allowed forms, or
    None where it is allowed. Modules outside the allow-list are judged at their import, not here."""
    root, _, rest = name.partition(".")
    if root in RESTRICTED_MODULES:
        listed = RESTRICTED_MODULES[root]
        if rest and rest not in listed and not any(rest.startswith(e[:-1]) for e in listed if e.endswith(".*")):
            return f"{name} is not among {root}'s allowed attributes"
        return None
    if root not in FREE_MODULES:
        return None
    if _denied_chain(name):
        return f"reaches {name}"
    for part in rest.split(".") if rest else ():
        if part in OUTSIDE_MODULE_NAMES:
            return f"reaches the module {part} through {name}"
    return None


__all__ = [
    "ATTRIBUTE_BUILTINS",
    "DATA_MODEL_DUNDERS",
    "FORBIDDEN_BUILTINS",
    "FREE_MODULES",
    "MODULE_VALUES",
    "RESTRICTED_MODULES",
    "SELF_DUNDERS",
    "import_allowed",
    "is_dunder",
    "reach_allowed",
]
