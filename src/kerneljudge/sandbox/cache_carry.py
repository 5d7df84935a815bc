"""The compiler-cache carry: a candidate's compiled kernels, from its checked worker to its timing worker.

A timing worker is a fresh process (judgment/stages/timing_pair.py) with a fresh workspace, so without this it
compiles the candidate's kernels again as its first timed side's calibration runs: Triton's JIT took 1.0 to
1.2 s of a 2 s timing stage on an H200 (docs/batch.md, "The timing stage's busy share"). These caches are
keyed by what was compiled, not by where, so the timing worker finds its kernels in the copies.

What it lets through, and why that is harmless (docs/batch.md): anything the checked worker wrote in these
folders reaches the timing worker, a memo of its outputs keyed by its inputs included (H26). The carry is
therefore only made where the timing pool is made of fresh draws that no checked worker saw
(`HiddenPlan.timing_seeds`, every hardened judgment's since 0.3.4): a memo of the correctness trials
answers none of the timed calls, and the kept outputs of the timed calls are checked as before. Only the
candidate's own workers are linked, never two candidates.

The parent reads the checked worker's folders after that worker is gone (its processes killed, its
workspace not yet removed) and copies regular files and folders only: a link, FIFO or device node is left
behind, nothing is opened by following a link, and a carry over `MAX_BYTES` or `MAX_ENTRIES` is dropped
whole (a partial Triton cache is only a slower one, but a partial carry says nothing).
"""

from __future__ import annotations

import os
import shutil
import stat
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kerneljudge.sandbox.tree import Entry, Tally, remove_tree, shown, walk
from kerneljudge.sandbox.workspace import CACHE_DIRS

# The caches whose entries are named by content (Triton's kernels and launchers, Inductor's graphs, the
# driver's JIT of PTX). A torch extension's build is not among them: its build file names the workspace's
# own path, so a copy under another workspace is built again anyway.
CARRIED = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH")
MAX_BYTES = 512 * 2**20
MAX_ENTRIES = 20_000


@dataclass(frozen=True)
class Carried:
    files: int = 0
    bytes: int = 0
    left_behind: int = 0  # links and other entries that are neither a regular file nor a folder
    dropped: str | None = None  # why nothing was carried

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class TooMuch(Exception):
    pass


def carry(source_root: Path, dest_root: Path, owner: tuple[int, int] | None) -> Carried:
    """Copy the CARRIED caches of one workspace into another's; `owner` (uid, gid): whom the copies belong to
    (the timing worker's uid, where workers have their own), else the parent's."""
    counts = {"files": 0, "bytes": 0, "left_behind": 0, "entries": 0}
    made: list[Path] = []
    try:
        for var in CARRIED:
            sub = CACHE_DIRS[var]
            if not _real_folders(source_root, sub):  # a link on the way: the worker pointed its cache elsewhere
                counts["left_behind"] += 1
                continue
            _copy_tree(source_root / sub, dest_root / sub, owner, counts, made)
    except TooMuch as exc:
        for path in reversed(made):  # deepest first: files, then their folders
            remove_tree(path)
        return Carried(dropped=str(exc))
    return Carried(counts["files"], counts["bytes"], counts["left_behind"])


def _real_folders(root: Path, sub: str) -> bool:
    """Whether every step from `root` to `root/sub` is a folder and none a link (the checked worker could have
    replaced `cache` or `cache/triton` by a link to anywhere the parent can read)."""
    path = root
    for part in Path(sub).parts:
        path = path / part
        try:
            info = os.lstat(path)
        except OSError:
            return False
        if not stat.S_ISDIR(info.st_mode):
            return False
    return True


def _copy_tree(
    source: Path, dest: Path, owner: tuple[int, int] | None, counts: dict[str, int], made: list[Path]
) -> None:
    """Copy what is under `source` (a folder, `_real_folders`) into `dest`."""
    tally = Tally()
    with closing(walk(source, tally=tally)) as found:  # bounded, no recursion, no link followed (sandbox/tree.py)
        for entry in found:
            _copy_entry(entry, dest / os.fsdecode(entry.rel), owner, counts, made)
    if tally.bound is not None:
        raise TooMuch(f"the checked worker's caches are past the walk's bound ({tally.describe()})")


def _copy_entry(
    entry: Entry, target: Path, owner: tuple[int, int] | None, counts: dict[str, int], made: list[Path]
) -> None:
    counts["entries"] += 1
    if counts["entries"] > MAX_ENTRIES:
        raise TooMuch(f"more than {MAX_ENTRIES} entries in the checked worker's caches")
    info = entry.info
    if stat.S_ISDIR(info.st_mode):
        if not os.path.lexists(target):
            target.mkdir(mode=0o755)
            made.append(target)
            _own(target, owner)
        elif not target.is_dir() or target.is_symlink():
            counts["left_behind"] += 1
            entry.descend = False
    elif stat.S_ISREG(info.st_mode) and not os.path.lexists(target):
        counts["bytes"] += info.st_size
        if counts["bytes"] > MAX_BYTES:
            raise TooMuch(f"more than {MAX_BYTES // 2**20} MiB in the checked worker's caches")
        try:
            _copy_file(entry, target)
        except OSError:  # gone, unreadable or no longer a regular file since the scan
            target.unlink(missing_ok=True)
            counts["left_behind"] += 1
            return
        made.append(target)
        _own(target, owner)
        counts["files"] += 1
    else:
        counts["left_behind"] += 1


def _copy_file(entry: Entry, target: Path) -> None:
    """A regular file's bytes, opened in its folder without following a link or blocking on a FIFO put there
    since the scan, into a new file (never through a name already there); its mtime kept."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    with os.fdopen(os.open(entry.name, flags, dir_fd=entry.dir_fd), "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise OSError(f"{shown(entry.rel)} is no longer a regular file")
        fd_out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd_out, "wb") as dst:
            shutil.copyfileobj(src, dst)  # every byte, however the writes are split
    info = entry.info
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)


def _own(path: Path, owner: tuple[int, int] | None) -> None:
    if owner is not None and os.geteuid() == 0:
        os.chown(path, *owner, follow_symlinks=False)
