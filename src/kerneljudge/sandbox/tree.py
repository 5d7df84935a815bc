"""Walking and removing a tree a worker made: the parent and the launcher read it as hostile data.

A candidate chooses every name, kind, mode and depth under its workspace. Both walks here are iterative
(a chain 1,200 folders deep raised RecursionError in `os.walk` and in `shutil.rmtree`, which
`ignore_errors` does not catch), look every name up in a directory already open (`dir_fd`), never follow a
link and never open anything but a directory here. Names stay bytes: a name need not be UTF-8, and `shown`
is how one is written into a record. The walk is bounded (`Bounds`) and says which bound a tree went past;
the removal is not, since whatever was made must go.

Standard library only: the launcher (sandbox/enter_layers.py) walks with it before any candidate code runs.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

# Generous bounds that an honest worker never reaches: a Triton, Inductor or torch-extension cache in the
# workspace holds thousands of files at most a dozen folders deep, with paths of ~100 bytes. Depth also
# bounds the descriptors a walk holds (two a level), entries and name bytes the manifest's memory and the
# record's size.
MAX_DEPTH = 64
MAX_ENTRIES = 50_000
MAX_NAME_BYTES = 8 * 2**20  # the relative paths of every entry, together

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # a newline or a terminal's escape must not forge a report's line
_MAX_FAILURES = 20
_HELD_LEVELS = 32  # folders whose descriptors a removal keeps open on its way down (two each)


@dataclass(frozen=True)
class Bounds:
    depth: int = MAX_DEPTH
    entries: int = MAX_ENTRIES
    name_bytes: int = MAX_NAME_BYTES


@dataclass
class Tally:
    """What a walk counted, and the first bound the tree went past (the walk stopped there)."""

    entries: int = 0
    depth: int = 0  # the deepest level reached; the root's entries are at level 1
    name_bytes: int = 0
    bound: str | None = None  # "depth", "entries", "name_bytes", or "unreadable" (a folder the walker may not open)
    limit: int | None = None  # the bound's value

    def stop(self, bound: str, limit: int | None = None) -> None:
        self.bound, self.limit = bound, limit

    def as_dict(self) -> dict[str, int | str | None]:
        return asdict(self)

    def describe(self) -> str:
        return f"{self.bound} past {self.limit}" if self.limit is not None else str(self.bound)


@dataclass
class Entry:
    """One entry found by `walk`; `dir_fd` is its folder's descriptor, open until the walk moves on. Set
    `descend` to False to keep the walk out of a folder."""

    rel: bytes  # the path from the walk's root, "/"-separated
    name: bytes
    dir_fd: int
    info: os.stat_result  # lstat: a link is a link
    depth: int
    descend: bool = True


def shown(name: bytes) -> str:
    """A name as a record writes it: valid UTF-8 kept, each other byte and each control character written
    `\\xNN`, a backslash doubled, so that two names never show alike and any name is valid in JSON."""
    text = name.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda char: "".join(f"\\x{byte:02x}" for byte in char[0].encode()), text)


def walk(root: str | os.PathLike[str], bounds: Bounds | None = None, tally: Tally | None = None) -> Iterator[Entry]:
    """Every entry under `root` (not `root` itself), depth first, parents before their contents; stops at
    the first bound the tree goes past, recorded in `tally`. Raises OSError only where `root` is not a folder
    that can be opened. Close the iterator (contextlib.closing) when leaving it early: it holds descriptors."""
    bounds = bounds or Bounds()
    tally = tally if tally is not None else Tally()
    root_fd = os.open(root, _DIR_FLAGS)
    stack: list[tuple[int, Iterator[os.DirEntry[str]], bytes, int]] = []
    try:
        stack.append((root_fd, os.scandir(root_fd), b"", 0))
    except OSError:
        os.close(root_fd)
        raise
    try:
        while stack:
            fd, listing, prefix, depth = stack[-1]
            found = next(listing, None)
            if found is None:
                stack.pop()
                listing.close()  # type: ignore[attr-defined]
                os.close(fd)
                continue
            name = os.fsencode(found.name)
            rel = prefix + name
            tally.entries += 1
            tally.name_bytes += len(rel)
            tally.depth = max(tally.depth, depth + 1)
            if depth + 1 > bounds.depth:
                tally.stop("depth", bounds.depth)
                return
            if tally.entries > bounds.entries:
                tally.stop("entries", bounds.entries)
                return
            if tally.name_bytes > bounds.name_bytes:
                tally.stop("name_bytes", bounds.name_bytes)
                return
            try:
                info = found.stat(follow_symlinks=False)  # fstatat in `fd`
            except PermissionError:  # a folder listed but not searchable
                tally.stop("unreadable")
                return
            except OSError:  # gone since it was listed
                continue
            entry = Entry(rel, name, fd, info, depth + 1)
            yield entry
            if not stat.S_ISDIR(info.st_mode) or not entry.descend:
                continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except PermissionError:
                tally.stop("unreadable")
                return
            except OSError:  # gone, or no longer a folder, since it was listed
                continue
            try:
                stack.append((child, os.scandir(child), rel + b"/", depth + 1))
            except OSError:
                os.close(child)
    finally:
        for fd, listing, _, _ in stack:
            listing.close()  # type: ignore[attr-defined]
            os.close(fd)


def remove_tree(path: str | os.PathLike[str]) -> list[str]:
    """Remove `path` and everything under it, whatever its depth, names, kinds and modes; never raises. A
    link is removed, never followed. A folder that lacks the bits its emptying needs (its owner, a worker of
    the judge's own uid, can set them to 0) is given u+rwx first. Returns what could not be removed, one line
    each (the first 20, then a count), empty when all is gone."""
    failures: list[str] = []
    whole = os.fsencode(path).rstrip(b"/")
    parent, name = os.path.split(whole)
    if not name:
        return [f"{shown(whole)}: not a path to remove"]
    try:
        parent_fd = os.open(parent or b".", _DIR_FLAGS)
    except OSError as exc:
        return [f"{shown(whole)}: {exc.strerror}"]
    try:
        _remove_in(parent_fd, name, parent + b"/" if parent else b"", failures)
    except OSError as exc:  # the top folder itself could not be opened for emptying
        _failed(failures, whole, exc)
    finally:
        os.close(parent_fd)
    if len(failures) > _MAX_FAILURES:
        failures[_MAX_FAILURES:] = [f"and {len(failures) - _MAX_FAILURES} more"]
    return failures


@dataclass
class _Level:
    """A folder being emptied: its name in the folder above, its identity, and while held its descriptor and
    listing (below `_HELD_LEVELS` they are let go, and the folder opened again through ".." on the way up)."""

    name: bytes
    ident: tuple[int, int]
    fd: int = -1
    listing: Iterator[os.DirEntry[str]] | None = None
    acted: bool = False  # the current listing removed or entered something: list once more before rmdir
    skipped: set[bytes] = field(default_factory=set)  # what could not be removed

    def let_go(self) -> None:
        if self.listing is not None:
            self.listing.close()  # type: ignore[attr-defined]
            self.listing = None
        if self.fd != -1:
            os.close(self.fd)
            self.fd = -1


def _remove_in(parent_fd: int, name: bytes, prefix: bytes, failures: list[str]) -> None:
    """Remove `name` of the folder `parent_fd`, depth first, each folder's files as it is listed."""
    try:
        info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        problem = _unlinked(parent_fd, name)
        if problem is not None:
            _failed(failures, prefix + name, problem)
        return
    levels = [_Level(name, _ident(info), _open_dir(parent_fd, name, info))]

    def where(child: bytes | None = None) -> bytes:
        names = [level.name for level in levels]
        return prefix + b"/".join(names if child is None else [*names, child])

    try:
        while levels:
            level = levels[-1]
            if level.listing is None:
                level.listing, level.acted = os.scandir(level.fd), False
            found = next(level.listing, None)
            if found is not None:
                child = os.fsencode(found.name)
                if child in level.skipped:
                    continue
                try:
                    child_info = found.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                level.acted = True
                if not stat.S_ISDIR(child_info.st_mode):
                    problem = _unlinked(level.fd, child)
                    if problem is not None:
                        _failed(failures, where(child), problem)
                        level.skipped.add(child)
                    continue
                try:
                    child_fd = _open_dir(level.fd, child, child_info)
                except OSError as exc:
                    _failed(failures, where(child), exc)
                    level.skipped.add(child)
                    continue
                if len(levels) > _HELD_LEVELS:
                    level.let_go()
                levels.append(_Level(child, _ident(child_info), child_fd))
                continue
            level.listing.close()  # type: ignore[attr-defined]
            level.listing = None
            if level.acted:  # once more: what a listing changed under it may have missed
                continue
            done = where()
            levels.pop()
            above = levels[-1] if levels else None
            if above is not None and above.fd == -1:
                above.fd = os.open(b"..", _DIR_FLAGS, dir_fd=level.fd)
                if _ident(os.fstat(above.fd)) != above.ident:  # moved meanwhile: never remove elsewhere
                    level.let_go()
                    raise OSError(0, "a folder was moved during the removal")
            level.let_go()
            try:
                os.rmdir(level.name, dir_fd=above.fd if above is not None else parent_fd)
            except OSError as exc:
                _failed(failures, done, exc)
                if above is not None:
                    above.skipped.add(level.name)
    except OSError as exc:
        _failed(failures, where(), exc)
    finally:
        for level in levels:
            level.let_go()


def _ident(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _open_dir(parent_fd: int, name: bytes, info: os.stat_result) -> int:
    """The folder `name` opened for emptying; given u+rwx first where it lacks them, and checked to be the
    folder that was listed (not a link or another folder put in its place)."""
    if info.st_mode & stat.S_IRWXU != stat.S_IRWXU:
        _add_owner_bits(parent_fd, name)
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    seen = os.fstat(fd)
    if _ident(seen) != _ident(info):
        os.close(fd)
        raise OSError(0, "replaced since it was listed")
    return fd


def _add_owner_bits(parent_fd: int, name: bytes) -> None:
    """chmod u+rwx the folder `name` itself, never a link's target: through an O_PATH descriptor, which
    needs no permission on the folder, and /proc's name for it (fchmodat cannot refuse to follow a link)."""
    try:
        fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError:
        return
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode) | stat.S_IRWXU
        os.chmod(f"/proc/self/fd/{fd}", mode)
    except OSError:  # not the owner, or no /proc: the folder's emptying then reports what it could not do
        pass
    finally:
        os.close(fd)


def _unlinked(dir_fd: int, name: bytes) -> OSError | None:
    """Unlink `name` of the folder `dir_fd`; the error, where it stays."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return exc
    return None


def _failed(failures: list[str], path: bytes, exc: OSError) -> None:
    failures.append(f"{shown(path)}: {exc.strerror or exc}")
