"""The allow-listed root: a worker sees only what it needs of the host's file system (docs/security.md).

The hide-list layers (`hidden_state`: an empty tmpfs over the home folders, the judge's folder and the
current directory) leave everything else in view: another project's folder, downloaded data, other tools'
output, the results store if it lies elsewhere. This layer turns the view around. The launcher's init
builds a fresh root on a tmpfs holding only read-only binds of what a worker needs (the system's programs
and libraries, the Python installation and its site-packages, the judge's package, a few files of /etc for
the loader, users and locale), the kernel's /dev, /proc and /sys as the namespaces made them, a fresh
private /tmp and /var/tmp, and its own workspace, writable; then it moves into that root (pivot_root) and
drops the old one. Nothing else of the host has a name there: not the judge's working directory, the
store's or the task's folder (the task's source comes over the wire), $HOME, or other workspaces.

`plan_allowlist` is pure (the parent's side, in the launcher's spec); `enter_allowlist` runs in the
launcher's init, standard library only. CUDA workers get it too (the GPU tests, the red team and the
suite ran inside it on an H200, docs/security.md); `KJ_ALLOWLIST_CUDA=0` gives them the hide-list instead.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

# The system's programs and libraries (a symlink such as /lib -> usr/lib is made again as a symlink).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# /etc, file by file: the dynamic loader, users and groups, name service, time zone and locale, the
# compilers' alternatives (cc, c++ on Debian), TLS roots. Not its secrets (shadow, ssh keys, credentials).
ETC_ENTRIES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "hosts", "host.conf",
    "gai.conf", "localtime", "timezone", "locale.alias", "locale.conf", "alternatives", "ssl",
    "ca-certificates", "os-release", "debian_version", "lsb-release", "mime.types",
)  # fmt: skip
KERNEL_PATHS = ("/dev", "/proc", "/sys")  # as the namespaces made them: a fresh /proc, a private /dev/shm
PRIVATE_TMP = ("/tmp", "/var/tmp")
NEW_ROOT = "/tmp/.kerneljudge-root"  # made on the private /tmp, in the launcher's own mount namespace
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
MNT_DETACH = 2
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC = 2, 4, 4096, 16384  # <sys/mount.h>, as sandbox/enter_layers.py has them


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def plan_allowlist(
    workspace: str, needed: list[str], etc: str = "/etc", masked: list[str] | tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The new root's entries, outermost first: {"path", "kind": bind|link|tmpfs|mask, "writable", "target"}.

    `needed` are the folders a worker reads (plan.needed_paths: the interpreter, site-packages, the
    judge's package, the bytecode cache); one inside another entry is covered by it, except under a
    private tmp (a fresh tmpfs), where it is bound in its place. `masked` are folders inside a bound one
    that a worker must not read (plan.PACKAGE_MASKED: the package's tasks and solutions): each is covered
    by an empty read-only tmpfs after the binds.
    """
    entries: list[dict[str, Any]] = []

    def covered(path: str) -> bool:
        return any(e["kind"] == "bind" and _inside(path, e["path"]) for e in entries)

    def add(path: str, writable: bool = False) -> None:
        if covered(path) or not os.path.lexists(path):
            return
        if os.path.islink(path):
            entries.append({"path": path, "kind": "link", "target": os.readlink(path), "writable": False})
        else:
            entries.append({"path": path, "kind": "bind", "writable": writable})

    for path in SYSTEM_PATHS:
        add(path)
    for name in ETC_ENTRIES:
        add(os.path.join(etc, name))
    for path in KERNEL_PATHS:
        add(path, writable=path != "/sys")  # /proc: CUDA names its threads there; /dev: its nodes
    entries += [{"path": p, "kind": "tmpfs", "writable": True} for p in PRIVATE_TMP]
    for path in sorted(needed, key=lambda p: p.count("/")):
        if path != "/" and not any(_inside(path, k) for k in KERNEL_PATHS):
            add(os.path.realpath(path))
    entries += [{"path": p, "kind": "mask", "writable": False} for p in masked if covered(p)]
    entries.append({"path": workspace, "kind": "bind", "writable": True})
    return entries


def describe(entries: list[dict[str, Any]]) -> str:
    """The allow-list in words, as the record keeps it: each path, read-only or writable."""
    words = []
    for e in entries:
        what = {"link": "symlink", "tmpfs": "fresh tmpfs", "mask": "emptied"}.get(e["kind"])
        words.append(f"{e['path']} ({what or ('rw' if e['writable'] else 'ro')})")
    return ", ".join(words)


def enter_allowlist(spec: dict[str, Any], report: Any, mount: Any, read_only: Any, libc: Any) -> None:
    """Build the allow-listed root and move into it (the launcher's init, after the mount view is set up).

    `mount(source, target, fstype, flags, data)`, `read_only(path, recursive)` and `libc` are the
    launcher's own (sandbox/enter_layers.py); a step that fails leaves the hide-list in force and says why.
    """
    entries = spec.get("allow")
    if entries is None:
        report.set("allowlist_root", "missing", spec.get("allow_why") or "not planned for this worker")
        return
    if not report.in_force("private_tmp"):
        report.set("allowlist_root", "missing", "the new root is built on the private /tmp, which is missing")
        return
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    try:
        if number is None:
            raise OSError(f"pivot_root's number is unknown on {os.uname().machine}")
        os.makedirs(NEW_ROOT, mode=0o755)
        mount("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
        for e in entries:
            target = NEW_ROOT + e["path"]
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if e["kind"] == "link":
                os.symlink(e["target"], target)
            elif e["kind"] == "tmpfs":
                os.makedirs(target, exist_ok=True)
                mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={spec['tmpfs_bytes']}")
            elif e["kind"] == "mask":  # inside a read-only bind: a mount point needs no write to the folder
                mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=555,size=4k")
                read_only(target, False)
            else:
                if os.path.isdir(e["path"]):
                    os.makedirs(target, exist_ok=True)
                else:
                    open(target, "a").close()
                mount(e["path"], target, None, MS_BIND | MS_REC)
                if not e["writable"]:
                    read_only(target, True)
        old = NEW_ROOT + "/.old-root"
        os.mkdir(old)
        if libc.syscall(number, os.fsencode(NEW_ROOT), os.fsencode(old)) != 0:
            raise OSError(ctypes.get_errno(), f"pivot_root: {os.strerror(ctypes.get_errno())}")
        os.chdir("/")
        if libc.umount2(b"/.old-root", MNT_DETACH) != 0:
            raise OSError(ctypes.get_errno(), f"detaching the old root: {os.strerror(ctypes.get_errno())}")
        os.rmdir("/.old-root")
        read_only("/", False)  # the new root's own tmpfs: nothing can be added beside the binds
    except OSError as exc:
        report.set("allowlist_root", "missing", f"the allow-listed root could not be built: {exc}")
        return
    report.set("allowlist_root", "in_force", f"a fresh root with only: {describe(entries)}")
