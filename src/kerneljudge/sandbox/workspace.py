"""A worker's private, disposable workspace: its cwd, HOME, temp and compiler caches.

The workspace is the one place a confined worker may write, so what it left there is evidence: a
manifest taken before the worker starts and another when it is closed say what was created, changed
or deleted (a disk cache, a dropped payload, a deleted source file).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Each cache a compiler or framework may write goes inside the workspace, so that
# nothing a candidate builds survives it or leaks into the next candidate (H26).
CACHE_DIRS = {
    "HOME": "home",
    "TMPDIR": "tmp",
    "XDG_CACHE_HOME": "cache",
    "TRITON_CACHE_DIR": "cache/triton",
    "TRITON_DUMP_DIR": "cache/triton_dump",
    "TRITON_OVERRIDE_DIR": "cache/triton_override",
    "TORCH_EXTENSIONS_DIR": "cache/torch_extensions",
    "TORCHINDUCTOR_CACHE_DIR": "cache/inductor",
    "CUDA_CACHE_PATH": "cache/nv",
    "PYTORCH_KERNEL_CACHE_PATH": "cache/torch_kernels",  # the jiterator's NVRTC builds (worker/digest_kernels.py)
}
# A workspace's name: its role, then its owner's pid. Only such names are ever swept: the bytecode cache
# (sandbox/bytecode.py) and the workspaces of judges that do not record an owner are never touched.
OWNED_NAME = re.compile(r"^kerneljudge-[a-z_]+-p(?P<pid>[0-9]+)-")
_swept: list[list[str]] = []  # the first sweep's removals, once this process has made one

# Python's bytecode cache is not among them: a prefix there (PYTHONPYCACHEPREFIX) hides the installed
# packages' own `__pycache__`, so each worker compiled torch's thousand modules again, 3.1 s more of its
# start (5.7 s against 2.6 s to import torch, docs/process-model.md). Workers read the installed bytecode,
# which the read-only root keeps out of their reach, and write none (PYTHONDONTWRITEBYTECODE).


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def create(cls, role: str) -> Workspace:
        """A fresh workspace whose name records its owner, this process (`kerneljudge-ROLE-pPID-...`); the
        first in each process removes those whose owner is gone (`remove_stale`)."""
        if not _swept:
            _swept.append(remove_stale(Path(tempfile.gettempdir())))
        root = Path(tempfile.mkdtemp(prefix=f"kerneljudge-{role}-p{os.getpid()}-"))
        for sub in CACHE_DIRS.values():
            (root / sub).mkdir(parents=True, exist_ok=True)
        return cls(root)

    def env(self) -> dict[str, str]:
        return {var: str(self.root / sub) for var, sub in CACHE_DIRS.items()}

    def write_source(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def manifest(self, max_entries: int = 10_000, hash_cap_bytes: int = 16 * 1024**2) -> Manifest:
        """Every entry under the root (relative path -> size, mtime, sha256 of regular files up to the cap).

        Nothing is followed or opened but regular files, with O_NOFOLLOW and O_NONBLOCK: the candidate
        chose these names and kinds, and a FIFO or a link to a device must not stall the judge.
        """
        entries: dict[str, FileEntry] = {}
        truncated = False
        for top, dirs, files in os.walk(self.root):
            for name in dirs + files:
                if len(entries) >= max_entries:
                    truncated = True
                    break
                path = os.path.join(top, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                digest = _sha256(path, info, hash_cap_bytes)
                kind = "dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
                rel = os.path.relpath(path, self.root)
                entries[rel] = FileEntry(kind, info.st_size, info.st_mtime_ns, digest)
        return Manifest(entries, truncated)


def owner_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user's counts: its workspace is left alone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(folder: Path) -> list[str]:
    """Remove the workspaces in `folder` whose owner process is gone (a judge killed before it could clean
    up, docs/process-model.md); return their names. A pid taken again by a later process keeps its dead
    owner's workspace until that process ends too: never a live judge's workspace removed."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        owned = OWNED_NAME.match(entry.name)
        if owned is None or not entry.is_dir(follow_symlinks=False) or owner_alive(int(owned["pid"])):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.exists(entry.path):
            removed.append(entry.name)
    return removed


@dataclass(frozen=True)
class FileEntry:
    kind: str  # "file", "dir" or "other" (a link, FIFO, socket or device node)
    size_bytes: int
    mtime_ns: int
    sha256: str | None  # None for anything but a regular file within the hashing cap


@dataclass(frozen=True)
class Manifest:
    entries: dict[str, FileEntry]
    truncated: bool = False


@dataclass(frozen=True)
class WorkspaceChanges:
    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    truncated: bool = False  # a manifest stopped at its entry cap: the lists may be incomplete


def diff(before: Manifest, after: Manifest) -> WorkspaceChanges:
    """What changed between two manifests; a file counts as modified when its kind, size, mtime or hash did."""
    old, new = before.entries, after.entries
    return WorkspaceChanges(
        created=sorted(set(new) - set(old)),
        modified=sorted(p for p in set(old) & set(new) if old[p] != new[p] and new[p].kind != "dir"),
        deleted=sorted(set(old) - set(new)),
        truncated=before.truncated or after.truncated,
    )


def _sha256(path: str, info: os.stat_result, cap_bytes: int) -> str | None:
    if not stat.S_ISREG(info.st_mode) or info.st_size > cap_bytes:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return hashlib.sha256(handle.read(cap_bytes + 1)).hexdigest()
