"""The preflight's rule tables: which names, imports and attributes reveal which construct.

Dotted names are matched as prefixes (a trailing dot matches a whole module,
a trailing `*` every name it begins: `os.exec*` is `os.execv` and `os.execvpe`).
Codes are those of kerneljudge.checks.catalog. What is not denied here is still
judged by the allow-list (allowlist.py).
"""

from __future__ import annotations

from kerneljudge.preflight.allowlist import FREE_MODULES, RESTRICTED_MODULES

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
    *sorted(FREE_MODULES | set(RESTRICTED_MODULES)),
)

# Calls under a flag's namespace that only read (`torch.backends.mps.is_available()`): not a change of flags.
FLAG_QUERIES = ("is_available", "is_built", "is_enabled", "version", "get_")

# Settings that only make numerics stricter than the judge pins them (TF32 off, exact matmuls, deterministic
# algorithms, no autotuned cuDNN choice): a solution that asks for them, as GPU MODE's pmpp conv2d does,
# changes nothing a reward depends on. By dotted name, the value an assignment or a call's one argument sets.
STRICTER_SETTINGS: dict[str, object] = {
    "torch.backends.cuda.matmul.allow_tf32": False,
    "torch.backends.cudnn.allow_tf32": False,
    "torch.backends.cudnn.deterministic": True,
    "torch.backends.cudnn.benchmark": False,
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": False,
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": False,
    "torch.set_float32_matmul_precision": "highest",
    "torch.use_deterministic_algorithms": True,
}

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
        "os.fork*",
        "os.spawn*",
        "os.system",
        "os.popen",
        "os.exec*",
        "os.posix_spawn*",
        "posix.fork*",
        "posix.system",
        "posix.exec*",
        "posix.posix_spawn*",
        "asyncio.",
        "pty.",
        "torch.multiprocessing.",
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
    "KJ-S030": (
        "ctypes.",
        "_ctypes.",
        "cffi.",
        "mmap.",
        "importlib.machinery.ExtensionFileLoader",
        "torch.ops.load_library",
        "torch.classes.load_library",
        "numpy.ctypeslib.",
    ),
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
        "numpy.load*",
        "numpy.save*",
        "numpy.fromfile",
        "numpy.memmap",
        "numpy.genfromtxt",
        "torch.load",
        "torch.save",
        "torch.from_file",
        "torch.serialization.",  # torch.load's home: `_open_file` opens any path under an innocent name
        "torch.storage.",
        "numpy.lib.format.",
        "numpy.lib.npyio.",
        "posix.open",
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
    "KJ-S010": (
        "threading",
        "_thread",
        "multiprocessing",
        "concurrent",
        "subprocess",
        "_posixsubprocess",
        "asyncio",
        "pty",
        "torch.multiprocessing",
    ),
    "KJ-S030": ("ctypes", "_ctypes", "cffi", "mmap"),
    "KJ-S041": ("socket", "_socket", "urllib", "http", "requests", "httpx", "ftplib", "smtplib", "aiohttp"),
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
FILE_METHODS = {
    "read_text",
    "write_text",
    "read_bytes",
    "write_bytes",
    "unlink",
    "rmdir",
    "touch",
    "mkdir",
    "from_file",  # torch.UntypedStorage.from_file, reached through type(tensor.untyped_storage())
    "tofile",  # numpy's ndarray.tofile
    "fromfile",
}
REDUCED_PRECISION_METHODS = {"half", "bfloat16"}


def matches(name: str, prefixes: tuple[str, ...]) -> bool:
    """A prefix matches itself and its attributes; one ending in `.` or `*` matches any name it begins."""
    return any(
        name == p or (p.endswith((".", "*")) and name.startswith(p.rstrip("*"))) or name.startswith(p + ".")
        for p in prefixes
    )
