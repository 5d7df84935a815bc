"""Workers die with the judge: a lifeline pipe for the launcher, the parent-death signal for the rest.

The judge holds the write end of one pipe for its whole life and never writes to it; every launcher gets
the read end. When the judge dies, however it dies (a SIGKILL included), the kernel closes the write end and
each launcher reads end-of-file: it kills its namespace's init, and with it the worker and anything the
worker started (sandbox/enter.py). A pipe rather than PR_SET_PDEATHSIG for the launcher itself, because that
signal follows the *thread* that forked the child, and the judge starts workers from threads (batch lanes,
the red team's jobs, the sanitizer's pool) that may end before their workers do. Inside the launcher,
init and the worker are children of single-threaded processes, so there the parent-death signal is exact.

A worker started without the launcher (`--sandbox off`, or CUDA workers where the policy leaves them
unconfined) sets the parent-death signal itself (worker/main.py), with that caveat.
"""

from __future__ import annotations

import os
import threading

_pipe: tuple[int, int, int] | None = None  # (the judge's pid, read end, write end)
_lock = threading.Lock()  # batch lanes start workers side by side


def read_end() -> int:
    """The read end of this process's lifeline, made on first use (and again in a forked child, whose
    parent's pipe is not its own). Both ends are close-on-exec: only a launcher given it in pass_fds holds it."""
    global _pipe
    with _lock:
        if _pipe is None or _pipe[0] != os.getpid():
            read_fd, write_fd = os.pipe()
            _pipe = (os.getpid(), read_fd, write_fd)
        return _pipe[1]
