"""The C handlers of a worker's signals, for the seal (worker/seal/sample.py): which signals the process catches, where
each handler's code lies, and whether that is a library of the installed environment.

A handler set through the C library (sigaction from a ctypes callback, or from a compiled extension) runs what it
points at when its signal comes, and Python's `signal.getsignal` does not show it. Until 0.3.10 the seal compared the
caught signals (`SigCgt` of /proc/self/status) with those before any candidate code ran. But Triton's compiler sets
handlers of its own for nine signals the first time it compiles a kernel in a process, inside the candidate's first
call (`scripts/seal_signals_probe.py` on an H100: SIGHUP, SIGINT over Python's, SIGQUIT, SIGUSR1, SIGUSR2, SIGTERM,
SIGXCPU, SIGXFSZ and SIGSYS, all in libtriton.so), and every honest Triton candidate whose kernel was not in the
cache failed KJ-R026 (the GPU tests on an H100, 2026-12-06). So each caught signal's handler is read (sigaction, nothing
set) and a handler new since the seal was taken is a door unless its code lies in a shared object of the installed
environment (dladdr): the interpreter's prefixes, the system's library folders, and the folders torch and Triton were
loaded from, none of which a candidate's process can write in the sandbox (docs/security.md). A ctypes callback lies in
no object; a candidate's compiled extension lies in its build folder."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Any


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


SIGACTION_BYTES = 512  # more than the C library's struct sigaction (152 bytes on x86-64), whose handler comes first
IGNORED = (0, 1)  # SIG_DFL and SIG_IGN: no code runs
LIBRARY_FOLDERS = ("/usr", "/lib", "/lib64")

try:
    _libc: Any = ctypes.CDLL(None, use_errno=True)
    _sigaction, _dladdr = _libc.sigaction, _libc.dladdr
    _sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    _dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
except (OSError, AttributeError):  # no C library to ask: every change of the caught signals is a door
    _sigaction = _dladdr = None
_buffer = ctypes.create_string_buffer(SIGACTION_BYTES)
_pointer_at = ctypes.c_void_p.from_buffer
_info = _DlInfo()
_int, _open, _realpath, _sep = int, open, os.path.realpath, os.sep


def caught_now() -> list[int]:
    """The signals the process catches (`SigCgt`: bit n-1 for signal n); [] where it cannot be read."""
    try:
        with _open("/proc/self/status") as status:
            line = next((line for line in status if line.startswith("SigCgt")), "")
        mask = _int(line.split(":")[1].strip(), 16)
    except (OSError, IndexError, ValueError):
        return []
    return [n + 1 for n in range(64) if mask >> n & 1]


def handler(number: int) -> int:
    """Where signal `number`'s handler's code is (0 for none, or where it cannot be read)."""
    if _sigaction is None or _sigaction(number, None, _buffer) != 0:
        return 0
    return _pointer_at(_buffer).value or 0


def home(address: int) -> str | None:
    """The shared object (its real path) whose code `address` lies in, or None (a ctypes callback, a JIT page)."""
    if _dladdr is None or not _dladdr(address, _info) or not _info.dli_fname:
        return None
    return _realpath(_info.dli_fname.decode(errors="replace"))


def name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def library_roots() -> tuple[str, ...]:
    """The folders of the installed environment: the interpreter's prefixes, the system's library folders and
    those torch and Triton were loaded from (Triton's compiler is where the handlers of an honest candidate's
    first compile lie)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, *LIBRARY_FOLDERS}
    for module in ("torch", "triton"):
        loaded = sys.modules.get(module)
        where = getattr(loaded, "__file__", None)
        if where:
            roots.add(os.path.dirname(os.path.dirname(where)))
    return tuple(sorted(_realpath(root).rstrip(_sep) + _sep for root in roots))


def installed(address: int, roots: tuple[str, ...]) -> bool:
    """Whether the code at `address` lies in a shared object under one of `roots` (`library_roots`)."""
    where = home(address)
    return where is not None and any(where.startswith(root) for root in roots)


class Handlers:
    """Each caught signal's handler, as the seal was taken; `foreign` after each timed sample."""

    def __init__(self) -> None:
        self.roots = library_roots()
        self.then = {number: handler(number) for number in caught_now()}

    def trusted(self, address: int) -> bool:
        return installed(address, self.roots)

    def foreign(self) -> list[str]:
        """The handlers new since the seal whose code lies outside the installed environment's libraries."""
        found = []
        for number in caught_now():
            address = handler(number)
            if address in IGNORED or address == self.then.get(number):
                continue
            if self.trusted(address):
                self.then[number] = address  # looked up once: a later change of it is again new
                continue
            found.append(f"a C handler of {name(number)} ({home(address) or 'in no shared object'})")
        return found
