"""A bytecode cache for workers where the installed packages carry none: written by the judge, read by workers.

A worker is a fresh interpreter that writes no bytecode (PYTHONDONTWRITEBYTECODE). It reads what the
installed packages carry beside their sources; where they carry none, it compiles every module it imports
again, each time. On the H200 machine torch's 2,141 modules have no bytecode installed (2026-12-02, judge 0.2.0,
benchmarks/worker_start.py): every worker compiled torch, and a candidate's worker torch._dynamo's Triton and sympy too,
seconds of each start.

There, the judge keeps one cache of its own (`cache_root`, by Python's layout under PYTHONPYCACHEPREFIX),
filled once per machine by a trusted interpreter that imports what workers import and nothing of a task's or
a candidate's, and hands it to confined workers only: their root is mounted read-only and they run as
other users, so no candidate can write bytecode there that a later judgment's reference would load. A
worker that is not confined gets no cache (docs/process-model.md).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

CACHE_ENV = "KJ_BYTECODE_CACHE"  # where the cache lives, if not under the user's cache folder
# What workers import: a candidate's worker loads torch._dynamo on CUDA (worker/evidence.py).
WARM_IMPORTS = "import torch, torch._dynamo, kerneljudge.worker.reference, kerneljudge.worker.candidate"
WARM_TIMEOUT_S = 900.0


def cache_root() -> Path:
    """`$KJ_BYTECODE_CACHE`, else a folder of the judge's user in the temporary folder: a worker runs as
    another user, so every folder above the cache must let others through (a home such as /root does not)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(tempfile.gettempdir(), f"kerneljudge-bytecode-{os.geteuid()}")


def usable(root: Path) -> bool:
    """Whether `root` is the judge's own (not a link, owned by it, writable by no one else) and every folder
    above it lets other users through: else a worker could not reach it, or someone else could write there."""
    try:
        info = os.lstat(root)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return False
        if info.st_mode & 0o005 != 0o005:  # others read and enter it
            return False
        folder = root
        while folder != folder.parent:
            folder = folder.parent
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                return False
    except OSError:
        return False
    return True


def torch_bytecode_installed() -> bool:
    """Whether torch's package carries its bytecode beside its sources (then workers read that)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return True  # no torch to speed up
    return os.path.exists(importlib.util.cache_from_source(spec.origin))


def interpreter_key(package_root: Path) -> str:
    """This interpreter, its torch and the judge's sources: a change of any is a cache filled again."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "none"
    text = "|".join([sys.executable, sys.implementation.cache_tag, torch_version, str(package_root)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def prepared(package_root: Path) -> str | None:
    """The cache's folder, filled for this interpreter, where workers need one; None where they read the
    installed bytecode, or where the cache cannot be made (they compile then, as before)."""
    if torch_bytecode_installed():
        return None
    root = cache_root()
    marker = root / f"ready-{interpreter_key(package_root)}"
    if marker.exists():
        return str(root) if usable(root) else None
    try:
        root.mkdir(mode=0o755, parents=True, exist_ok=True)
        if not root.is_symlink() and root.stat().st_uid == os.geteuid():
            root.chmod(0o755)  # whatever the umask made of it
        if not usable(root):
            return None
        with open(root / ".lock", "w") as lock:  # one filling per machine; the others wait for it
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not marker.exists():
                fill(root, package_root)
                marker.write_text(f"{sys.executable} {sys.implementation.cache_tag}\n")
    except (OSError, subprocess.SubprocessError):
        return None
    return str(root)


def fill(root: Path, package_root: Path) -> None:
    """Import what workers import in a trusted interpreter that writes its bytecode under `root`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(root)
    paths = [str(package_root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    subprocess.run(  # its files readable by the workers' users, writable by the judge's alone
        [sys.executable, "-c", WARM_IMPORTS],
        env=env,
        umask=0o022,
        check=True,
        capture_output=True,
        timeout=WARM_TIMEOUT_S,
    )
