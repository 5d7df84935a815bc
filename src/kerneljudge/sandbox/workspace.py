"""A worker's private, disposable workspace: its cwd, HOME, temp and compiler caches.

The workspace is the one place a confined worker may write, so what it left there is evidence: a
manifest taken before the worker starts and another when it is closed say what was created, changed
or deleted (a disk cache, a dropped payload, a deleted source file). What it left is also hostile data:
the manifest's walk is bounded and says which bound a workspace went past, names are kept as bytes and
recorded escaped, and the removal cannot fail on what was made (sandbox/tree.py, docs/security.md, "What
a worker leaves behind").
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerneljudge.sandbox.tree import Bounds, Entry, Tally, remove_tree, shown, walk

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
    "PYTORCH_KERNEL_CACHE_PATH": "cache/torch_kernels",  # the jiterator's NVRTC builds (worker/seal/digest_kernels.py)
}
# A workspace's name: its role, then its owner's pid. Only such names are ever swept: the bytecode cache
# (sandbox/bytecode.py) and the workspaces of judges that do not record an owner are never touched.
OWNED_NAME = re.compile(r"^kerneljudge-[a-z_]+-p(?P<pid>[0-9]+)-")
_swept: list[list[str]] = []  # the first sweep's removals, once this process has made one
# Hashing reads files: each at most FILE_HASH_CAP_BYTES (a 1 TB sparse file is recorded by size and mtime only),
# all together at most HASHED_CAP_BYTES a manifest (past it, size and mtime say what changed). An honest
# worker's compiled extension and caches come to tens of MiB.
FILE_HASH_CAP_BYTES = 16 * 2**20
HASHED_CAP_BYTES = 256 * 2**20

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

    def remove(self) -> list[str]:
        """Remove the workspace whatever it holds; what could not be removed (never raised)."""
        return remove_tree(self.root)

    def manifest(self, bounds: Bounds | None = None) -> Manifest:
        """Every entry under the root (relative path as bytes -> kind, size, mtime, sha256 of regular files
        within the caps), as far as the walk's bounds go (`Manifest.tally` says which one stopped it).

        Nothing is followed or opened but regular files, with O_NOFOLLOW and O_NONBLOCK: the candidate
        chose these names and kinds, and a FIFO or a link to a device must not stall the judge.
        """
        entries: dict[bytes, FileEntry] = {}
        tally = Tally()
        hashed_bytes = 0
        try:
            with closing(walk(self.root, bounds, tally)) as found:
                for entry in found:
                    info = entry.info
                    digest = None
                    if stat.S_ISREG(info.st_mode) and info.st_size <= FILE_HASH_CAP_BYTES:
                        if hashed_bytes + info.st_size <= HASHED_CAP_BYTES:
                            digest = _sha256(entry)
                            hashed_bytes += info.st_size
                    kind = "dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
                    entries[entry.rel] = FileEntry(kind, info.st_size, info.st_mtime_ns, digest)
        except OSError:  # the root itself is gone or no folder: nothing under it to list
            pass
        return Manifest(entries, tally)


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
        remove_tree(entry.path)
        if not os.path.lexists(entry.path):
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
    entries: dict[bytes, FileEntry]
    tally: Tally = field(default_factory=Tally)  # what the walk counted, and the bound that stopped it

    @property
    def truncated(self) -> bool:
        return self.tally.bound is not None


@dataclass(frozen=True)
class WorkspaceChanges:
    """What a worker changed in its workspace; paths as `tree.shown` writes them (valid UTF-8, escaped)."""

    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    truncated: bool = False  # a manifest stopped at a bound: the lists may be incomplete
    # The bound a manifest stopped at ("depth", "entries", "name_bytes", "unreadable"; KJ-R070), else None
    bound: str | None = None
    walked: dict[str, Any] = field(default_factory=dict)  # the closing walk's counts (Tally), or the one that stopped
    not_removed: list[str] = field(default_factory=list)  # what the workspace's removal left, with why


def diff(before: Manifest, after: Manifest) -> WorkspaceChanges:
    """What changed between two manifests; a file counts as modified when its kind, size, mtime or hash did."""
    old, new = before.entries, after.entries
    stopped = before if before.truncated and not after.truncated else after
    modified = (p for p in set(old) & set(new) if old[p] != new[p] and new[p].kind != "dir")
    return WorkspaceChanges(
        created=[shown(p) for p in sorted(set(new) - set(old))],
        modified=[shown(p) for p in sorted(modified)],
        deleted=[shown(p) for p in sorted(set(old) - set(new))],
        truncated=before.truncated or after.truncated,
        bound=stopped.tally.bound,
        walked=stopped.tally.as_dict(),
    )


def _sha256(entry: Entry) -> str | None:
    """A regular file's digest, opened in its folder without following a link or blocking, and read no further
    than the cap (it may have grown since the walk saw it)."""
    try:
        fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=entry.dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = handle.read(FILE_HASH_CAP_BYTES + 1)
    return hashlib.sha256(data).hexdigest() if len(data) <= FILE_HASH_CAP_BYTES else None
