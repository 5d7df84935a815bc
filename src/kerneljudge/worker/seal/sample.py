"""The seal between a timed sample and the copy of its checked output (H03 by H21; worker/timing/timer.py).

The parent names the call whose output it checks after the sample ran (judgment/stages/kept_call.py), and the worker
copies that output at once. Between the two, only the worker's own code may run: a profile hook, a signal handler, a
thread, a torch mode, a garbage collector's callback or a patched function that the worker's code calls could read
the named call and mend that output before the copy (the red team's `keep_hook_mender`: its timed calls did
nothing, the checked one was mended, PASS verified by 0.3.7). So after each sample, before the worker says the
sample is over, it looks at every such door (`Seal.open_doors`): anything found there fails the candidate
(KJ-R026), and its named output is not copied. What runs after the seal runs on names bound here when the worker
started and on namespaces the seal compares, entry by entry and by identity, with what they held then: its read of
the parent's `keep` (no JSON decoder, whose classes a candidate could patch), the copy (torch's C method, the
dispatcher's registration of `aten::copy_` compared) and the device's wait. The garbage collector is off until the
copy is made, so that no finaliser of the candidate's runs in between. docs/attacks.md (H03, H21) lists the doors.

The seal is this process's own objects, which a candidate's code that reaches them can blind (`seal_state_forger`
shadowed its methods and passed verified by 0.3.8): what holds without it is the commit (worker/seal/commit.py),
the digests of every output of the checked sample sent before the parent names the call.
"""

from __future__ import annotations

import _signal
import builtins
import gc
import operator
import os
import re
import signal
import struct
import sys
import threading
from typing import Any

import torch

from kerneljudge.worker.seal import signal_handlers
from kerneljudge.worker.seal.scope import COPY_OPS, CUDA_NAMES, SERVICES, TORCH_NAMES, WORKER_MODULES

# Bound when the worker starts: what runs after the seal uses these, never a lookup a candidate could redirect.
_read, _write, _is, _all, _map, _int, _len, _list = os.read, os.write, operator.is_, all, map, int, len, list
_tuple_iter, _list_iter = tuple.__iter__, list.__iter__
_prefix = struct.Struct("<4sI").pack  # wire.PREFIX
_gc_disable, _gc_enable, _gc_isenabled = gc.disable, gc.enable, gc.isenabled
_copy_ = torch._C.TensorBase.copy_  # a method of an immutable C type: no class attribute replaces it
_cuda_wait = getattr(torch._C, "_cuda_synchronize", None)  # what torch.cuda.synchronize calls, on a CUDA build
# ... and what the seal reads, so that a candidate that replaces `sys.gettrace` or `signal.getsignal` hides nothing
# (this module's namespace is itself one the seal compares).
_gettrace, _getprofile, _frames = sys.gettrace, sys.getprofile, sys._current_frames
_thread_trace, _thread_profile, _threads = threading.gettrace, threading.getprofile, threading.enumerate
_getsignal, _getitimer = _signal.getsignal, signal.getitimer  # the C module's: no enum made of each answer
SIGNALS = tuple(sorted(signal.valid_signals()))
_gc_callbacks = gc.callbacks  # the list the collector calls, whatever `gc.callbacks` is bound to later
_monitoring = getattr(sys, "monitoring", None)  # Python 3.12 and later
_function_modes, _dispatch_modes = torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack
_included, _excluded = torch._C._dispatch_tls_local_include_set, torch._C._dispatch_tls_local_exclude_set
_dispatch_dump, _listdir, _open, _tuple, _str = torch._C._dispatch_dump, os.listdir, open, tuple, str
Tensor = torch.Tensor
# The parent's `keep` as the parent writes protocol.Keep's header (json.dumps of {"op": "keep", "call": n}), and its
# `commit` (protocol.Commit: the digests of that many outputs of the sample first, worker/seal/commit.py).
KEEP = re.compile(rb'\{"op": "keep", "call": (-?[0-9]{1,9})\}')
COMMIT_FRAME = re.compile(rb'\{"op": "commit", "calls": ([0-9]{1,9})\}')
COMMIT = -2  # `read_keep` answers a `commit` of n outputs with COMMIT - n (`committed_calls`)
_keep_match, _commit_match = KEEP.fullmatch, COMMIT_FRAME.fullmatch


class Snapshot:
    """One namespace (a module's globals, a class's attributes) as it was: its keys and values, by identity."""

    def __init__(self, name: str, space: Any, exact: bool, only: tuple[str, ...] = ()) -> None:
        """`exact`: no key may be added either (a worker module's global would shadow a builtin its code uses);
        `only`: these keys alone are compared (of a large namespace, those the worker's code reads)."""
        self.name, self.space, self.exact, self.only = name, space, exact, only
        self.keys = only or tuple(space)
        self.values = tuple(space.get(key) for key in self.keys) if only else tuple(space.values())

    def changed(self) -> str | None:
        space = self.space
        if self.only:
            for key, value in zip(self.keys, self.values, strict=True):
                if space.get(key) is not value:
                    return f"{self.name}.{key}"
            return None
        if (self.exact and _len(space) != _len(self.keys)) or _len(space) < _len(self.keys):
            return self.name
        if _all(_map(_is, space, self.keys)) and _all(_map(_is, space.values(), self.values)):
            return None
        # Keys may be added at the end (a library's lazy attribute); then only the ones there before count.
        now = dict(space)
        for key, value in zip(self.keys, self.values, strict=True):
            if now.get(key, self) is not value:
                return f"{self.name}.{key}"
        return self.name if self.exact else None


def python_signal_handlers() -> tuple[Any, ...]:
    return _tuple(_map(_getsignal, SIGNALS))


def proc_lines(path: str, prefix: str = "") -> str:
    """Lines of a /proc file (those starting with `prefix`), or "" where it cannot be read."""
    try:
        with _open(path) as handle:
            return "".join(line for line in handle if line.startswith(prefix))
    except OSError:
        return ""


ITIMERS = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)


def monitoring_tools() -> tuple[Any, ...]:
    """The tools of sys.monitoring (Python 3.12 and later) and the events each is given."""
    monitoring = _monitoring
    if monitoring is None:
        return ()
    tools = []
    for tool in range(6):
        try:
            tools.append((monitoring.get_tool(tool), monitoring.get_events(tool)))
        except ValueError:  # a tool id that is not in use
            tools.append((monitoring.get_tool(tool), 0))
    return tuple(tools)


def process_state() -> dict[str, Any]:
    """What any code may hook into and a namespace cannot show, as comparable values."""
    return {
        "signal handlers": python_signal_handlers(),
        "timers": proc_lines("/proc/self/timers"),
        "interval timers": _tuple(_getitimer(t) != (0.0, 0.0) for t in ITIMERS),
        "sys.monitoring": monitoring_tools(),
        "gc.callbacks": _tuple(_gc_callbacks),
        "torch function modes": _function_modes(),
        "torch dispatch modes": _dispatch_modes(),
        "dispatch keys": (_str(_included()), _str(_excluded())),
    }


def kernels(ops: tuple[str, ...]) -> tuple[str, ...]:
    """The dispatcher's registrations of `ops` (a Python kernel registered over torch's shows there)."""
    return _tuple(_dispatch_dump(op) for op in ops)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return _len(a) == _len(b) and _all(_map(same, a, b))
    return a is b or (type(a) in (str, int, bool, float) and a == b)


def python_threads() -> set[int]:
    """Every thread with a Python state: those of threading and those a C library made run Python."""
    return {t.ident for t in _threads() if t.ident is not None} | set(_frames())


def native_tasks() -> int:
    try:
        return _len(_listdir("/proc/self/task"))
    except OSError:
        return 0


class Seal:
    """Taken once in a candidate's worker before any of its code runs; `open_doors` after each timed sample."""

    def __init__(self, worker: Any) -> None:
        spaces = [
            Snapshot("builtins", vars(builtins), False),
            Snapshot("torch", vars(torch), False, TORCH_NAMES),
            Snapshot("torch.Tensor", vars(Tensor), True),
            Snapshot("torch.cuda", vars(torch.cuda), False, CUDA_NAMES),
            Snapshot("torch.cuda.CUDAGraph", vars(torch.cuda.CUDAGraph), True),
        ]
        spaces += [Snapshot(name, vars(sys.modules[name]), True) for name in WORKER_MODULES if name in sys.modules]
        spaces += [Snapshot(c.__qualname__, vars(c), True) for c in type(worker).__mro__ if c is not object]
        self.spaces = spaces
        self.ops = tuple(op for op in COPY_OPS if _dispatch_dump(op))
        self.kernels = kernels(self.ops)
        self.state = process_state()
        self.handlers = signal_handlers.Handlers()
        self.threads = python_threads()

    def begin(self, threads_baseline: set[int]) -> tuple[set[int], int]:
        """What `open_doors` counts new threads against, taken as a timed request begins: the Python threads alive
        when the seal was taken or before any code of the candidate's ran (`threads_baseline`) and library service
        threads, and the native threads alive now (an earlier request's are in the evidence of that request)."""
        services = {t.ident for t in _threads() if type(t).__module__ + "." + type(t).__qualname__ in SERVICES}
        return self.threads | set(threads_baseline) | services, native_tasks()

    def open_doors(self, before: tuple[set[int], int]) -> list[str]:
        """What could run code of the candidate's in the worker before the named output is copied (`before`: what
        `begin` took)."""
        found = [f"replaced {name}" for name in (s.changed() for s in self.spaces) if name is not None]
        if _gettrace() is not None or _thread_trace() is not None:
            found.append("sys.settrace")
        if _getprofile() is not None or _thread_profile() is not None:
            found.append("sys.setprofile")
        now = process_state()
        found += [what for what, value in now.items() if not same(value, self.state[what])]
        found += self.handlers.foreign()  # handlers set through the C library, outside the installed libraries
        threads, tasks = before
        if python_threads() - threads:
            found.append(f"{_len(python_threads() - threads)} thread(s) alive beside the worker's own")
        if native_tasks() > tasks:
            found.append(f"{native_tasks() - tasks} native thread(s) started in the request")
        return found

    def kernels_replaced(self) -> list[str]:
        """The copy's and the digest's operators whose kernels differ from those at the seal's taking: looked at
        after the `keep`, before the copy (no operator runs in between)."""
        now = kernels(self.ops)
        return [f"a kernel of {op}" for op, mine, then in zip(self.ops, now, self.kernels, strict=True) if mine != then]


def read_keep(fd: int) -> int | None:
    """The call a `keep` frame names, or COMMIT - n for a `commit` of n outputs, read with what the worker bound when
    it started; None for any other frame (the caller then breaks the request)."""
    prefix = _read_exact(fd, 8)
    if prefix[:4] != b"KJW2":
        return None
    size = _int.from_bytes(prefix[4:], "little")
    if size > 64:
        return None
    header = _read_exact(fd, size)
    found = _commit_match(header)
    if found is not None:
        return COMMIT - _int(found.group(1))
    found = _keep_match(header)
    return None if found is None else _int(found.group(1))


def committed_calls(answer: int | None) -> int | None:
    """How many outputs a `commit` that `read_keep` answered `answer` asks for; None where it read no commit."""
    return None if answer is None or answer > COMMIT else COMMIT - answer


def _read_exact(fd: int, n: int) -> bytes:
    data = b""
    while _len(data) < n:
        chunk = _read(fd, n - _len(data))
        if not chunk:
            raise EOFError("the parent closed the channel inside a `keep`")
        data += chunk
    return data


def copy_kept(into: Any, value: Any) -> bool:
    """Copy a nest of tensors made alike (worker/seal/timed_outputs.py) into storage made before the seal (a tuple or
    list of the built-in kind, `timed_outputs.empty_alike`), by torch's C method, the nest read by the built-in
    types' own iterators; False where the nest is no tensor, tuple or list of them like `into`."""
    if type(value) is Tensor:
        if type(into) is not Tensor:
            return False
        _copy_(into, value)
        return True
    if isinstance(value, tuple) and type(into) is tuple:
        items = _list(_tuple_iter(value))
    elif isinstance(value, list) and type(into) is list:
        items = _list(_list_iter(value))
    else:
        return False
    return _len(items) == _len(into) and _all(_map(copy_kept, into, items))


def write_sampled(fd: int, sample: int) -> None:
    """Say sample `sample` is over: the `sampled` frame, made without a JSON encoder."""
    header = b'{"type": "sampled", "sample": %d}' % sample
    _write(fd, _prefix(b"KJW2", _len(header)) + header)


def device_wait(cuda: bool) -> None:
    """Wait for the whole device (torch.cuda.synchronize's own call, bound at import) where `cuda`."""
    if cuda and _cuda_wait is not None:
        _cuda_wait()


def gc_off() -> bool:
    """Turn the garbage collector off until `gc_back` (no finaliser runs between the seal and the copy)."""
    was = _gc_isenabled()
    _gc_disable()
    return was


def gc_back(was: bool) -> None:
    if was:
        _gc_enable()
