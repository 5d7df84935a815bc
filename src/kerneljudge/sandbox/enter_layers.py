"""The layers the trusted launcher (sandbox/enter.py) applies, one function each, in the order its three
processes apply them: outer's namespaces, init's mount view, and the worker's limits, user, no_new_privs and
seccomp filter. Each records its outcome in the `Report` by layer name; one that fails is recorded and
skipped, never fatal here (the launcher decides what a missing required layer means).

Standard library and libc only (and, for seccomp, a libseccomp binding; sandbox/tree.py, the workspace's
walk, is standard library too): it runs in the launcher, before any candidate code.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import stat
from contextlib import closing
from typing import Any

from kerneljudge.sandbox.tree import Tally, walk

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
SYS_MOUNT_SETATTR = {"x86_64": 442, "aarch64": 442}  # both use the generic syscall table for it

# Syscalls a worker has no business making: debugging or reading other processes, changing the
# mount view or the namespaces it was put in, and kernel-wide state. perf_event_open is left to the
# profiler. An unknown name (another architecture) is skipped.
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root", "chroot",
    "setns", "unshare", "mount_setattr", "move_mount", "open_tree", "fsopen", "fsmount", "fspick",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf", "keyctl",
    "add_key", "request_key", "userfaultfd", "reboot", "swapon", "swapoff", "acct", "quotactl",
    "open_by_handle_at", "name_to_handle_at",
)  # fmt: skip

# clone with any of these asks for new namespaces, in which the child would hold every capability: refused
# like unshare. CLONE_NEWTIME (0x80) is not among them: in clone's flags that bit is part of the exit signal,
# and only clone3 and unshare can ask for it. clone3 takes its flags in memory, which seccomp cannot read, so
# it answers ENOSYS and the C library falls back to clone, whose flags the filter sees (what container
# runtimes do); threads and fork keep working.
SYS_CLONE3 = 435  # the same on every architecture; older libseccomp do not know the name
CLONE_NAMESPACE_FLAGS = (
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWUSER,
    CLONE_NEWPID,
    CLONE_NEWNET,
)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.syscall.restype = ctypes.c_long
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


class MountAttr(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("attr_set", "attr_clr", "propagation", "userns_fd")]


def _libc_call(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def b(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    _libc_call(_libc.mount(b(source), b(target), b(fstype), flags, b(data)), f"mount {target}")


class Report:
    """The layers' outcomes, carried through the forks in memory and written once by the worker."""

    def __init__(self) -> None:
        self.layers: dict[str, dict[str, str]] = {}

    def set(self, name: str, status: str, detail: str) -> None:
        self.layers[name] = {"status": status, "detail": detail}

    def in_force(self, name: str) -> bool:
        return self.layers.get(name, {}).get("status") == "in_force"

    def missing_required(self, required: list[str]) -> list[str]:
        return [name for name in required if self.layers.get(name, {}).get("status") == "missing"]


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def skipped(spec: dict[str, Any], report: Report, name: str) -> bool:
    """Whether the policy leaves this layer out (recorded missing, so `require` still sees it)."""
    if name in spec.get("skip", ()):
        report.set(name, "missing", "skipped by the policy (SandboxPolicy.skip_layers)")
        return True
    return False


# ---------------------------------------------------------------- outer: namespaces


def enter_namespaces(spec: dict[str, Any], report: Report) -> None:
    """Unshare user (only when not root), network, mount, PID and IPC namespaces, one at a time."""
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0:
        # Without root, the other namespaces need a user namespace; the worker keeps the judge's uid
        # inside it and loses the namespace's capabilities at exec (a non-zero uid keeps none).
        try:
            _libc_call(_libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as handle:
                    handle.write(text)
        except OSError as exc:
            report.set("unprivileged_user", "missing", f"judge runs as uid {uid}; no user namespace: {_why(exc)}")
    for name, flag, done in (
        ("network_namespace", CLONE_NEWNET, "own network namespace: only a loopback, which is down"),
        ("mount_namespace", CLONE_NEWNS, "own mount namespace, private propagation"),
        ("pid_namespace", CLONE_NEWPID, "own PID namespace"),
        ("ipc_namespace", CLONE_NEWIPC, "own IPC namespace: its SysV and POSIX message queue objects end with it"),
    ):
        if skipped(spec, report, name):
            continue
        try:
            _libc_call(_libc.unshare(flag), f"unshare({name})")
            report.set(name, "in_force", done)
        except OSError as exc:
            report.set(name, "missing", f"unshare failed: {_why(exc)}")


# ---------------------------------------------------------------- init: the mount view


def _set_mount_attr(path: str, flags: int, *, set_: int = 0, clear: int = 0) -> None:
    number = SYS_MOUNT_SETATTR.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, f"mount_setattr number unknown on {platform.machine()}")
    attr = MountAttr(attr_set=set_, attr_clr=clear)
    result = _libc.syscall(number, AT_FDCWD, path.encode(), flags, ctypes.byref(attr), ctypes.sizeof(attr))
    _libc_call(0 if result == 0 else -1, f"mount_setattr({path}, set={set_:#x}, clear={clear:#x})")


def _read_only_root() -> None:
    _set_mount_attr("/", AT_RECURSIVE, set_=MOUNT_ATTR_RDONLY)


def _read_only(path: str, recursive: bool) -> None:
    _set_mount_attr(path, AT_RECURSIVE if recursive else 0, set_=MOUNT_ATTR_RDONLY)


def setup_mounts(spec: dict[str, Any], report: Report) -> None:
    """Read-only everything, tmpfs over the judge's state dirs, the needed paths bound back, private tmp."""
    try:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        # Handles on what must stay reachable, taken before anything is covered.
        handles = {entry["path"]: os.open(entry["path"], os.O_PATH | os.O_DIRECTORY) for entry in spec["expose"]}
    except OSError as exc:
        for name in ("read_only_root", "hidden_state", "private_tmp"):
            report.set(name, "missing", f"mount setup failed: {_why(exc)}")
        return
    proc_writable = not os.statvfs("/proc").f_flag & os.ST_RDONLY
    try:
        if not skipped(spec, report, "read_only_root"):
            _read_only_root()
            report.set("read_only_root", "in_force", "every mount read-only but /proc, the workspace and private tmp")
    except OSError as exc:
        report.set("read_only_root", "missing", _why(exc))
    # /proc stays writable, and is mounted after the read-only pass: the NVIDIA driver names its threads
    # through /proc/self/task/<tid>/comm while CUDA starts, and a refused write fails cuInit with error 304
    # (measured on an H200, driver 580; docs/security.md). The worker's uid can write only its own entries.
    if report.in_force("pid_namespace"):
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV)
            report.set("pid_namespace", "in_force", "own PID namespace and /proc: the judge's processes are unseen")
        except OSError as exc:
            report.set("pid_namespace", "in_force", f"own PID namespace, but the host /proc stays: {_why(exc)}")
    if proc_writable and report.in_force("read_only_root") and os.statvfs("/proc").f_flag & os.ST_RDONLY:
        try:
            _set_mount_attr("/proc", 0, clear=MOUNT_ATTR_RDONLY)
        except OSError as exc:
            report.set("read_only_root", "in_force", f"every mount read-only, /proc too (no CUDA then): {_why(exc)}")
    # The writable covers are the private tmp, the others hide the judge's state; either may be skipped.
    skip_hidden, skip_tmp = skipped(spec, report, "hidden_state"), skipped(spec, report, "private_tmp")
    covered = [e for e in spec["hide"] if not (skip_tmp if e["writable"] else skip_hidden)]
    try:
        for entry in covered:
            size = spec["tmpfs_bytes"] if entry["writable"] else 1024 * 1024
            mode = "1777" if entry["writable"] else "755"
            _mount("tmpfs", entry["path"], "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},size={size}")
        for entry in spec["expose"]:
            os.makedirs(entry["path"], exist_ok=True)
            _mount(f"/proc/self/fd/{handles[entry['path']]}", entry["path"], None, MS_BIND | MS_REC)
            flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV
            _mount(None, entry["path"], None, flags if entry["writable"] else flags | MS_RDONLY)
        for entry in covered:
            if not entry["writable"]:
                _mount(None, entry["path"], None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        if not skip_hidden:  # the package's tasks and solutions, inside a folder bound back (plan.PACKAGE_MASKED)
            for path in spec.get("mask", []):
                _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "mode=555,size=4k")
        if not skip_hidden:
            hidden = ", ".join(e["path"] for e in covered if not e["writable"]) or "none"
            report.set("hidden_state", "in_force", f"empty read-only tmpfs over {hidden}; needed paths bound back")
    except OSError as exc:
        report.set("hidden_state", "missing", _why(exc))
    if not skip_tmp:
        try:
            _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={spec['tmpfs_bytes']}")
            private = [e["path"] for e in covered if e["writable"]] + ["/dev/shm"]
            report.set("private_tmp", "in_force", f"fresh tmpfs of {spec['tmpfs_bytes']} bytes on {', '.join(private)}")
        except OSError as exc:
            report.set("private_tmp", "missing", _why(exc))
    for fd in handles.values():
        os.close(fd)


# ---------------------------------------------------------------- worker: limits and identity


def set_limits(spec: dict[str, Any], report: Report) -> None:
    """Each limit at what the policy asks, or at the inherited hard limit where that is lower (stricter, and no
    process may raise its hard limit without privilege). Missing only where a limit cannot be set at all."""
    if skipped(spec, report, "resource_limits"):
        return
    applied, lower = [], []
    try:
        for name, wanted in spec["rlimits"].items():
            which = getattr(resource, name, None)
            if which is None:
                raise ValueError(f"{name} is not known on this platform")
            hard = resource.getrlimit(which)[1]
            value = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
            resource.setrlimit(which, (value, value))
            short = name.removeprefix("RLIMIT_")
            applied.append(f"{short}={value}")
            if value < wanted:
                lower.append(f"{short} {value} (inherited, below the {wanted} asked)")
        detail = " ".join(applied) + (f"; lower than the policy asks: {', '.join(lower)}" if lower else "")
        report.set("resource_limits", "in_force", detail)
    except (OSError, ValueError) as exc:
        report.set("resource_limits", "missing", f"{' '.join(applied)}; then failed: {exc}")


def _reachable(path: str, uid: int, gid: int) -> bool:
    """Whether uid:gid, with no supplementary groups, can enter every directory up to path."""
    while True:
        info = os.stat(path)
        bit = stat.S_IXUSR if info.st_uid == uid else stat.S_IXGRP if info.st_gid == gid else stat.S_IXOTH
        if not info.st_mode & bit:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def drop_user(spec: dict[str, Any], report: Report) -> None:
    if skipped(spec, report, "unprivileged_user"):
        return
    uid, gid = spec["uid"], spec["gid"]
    if os.geteuid() != 0:
        if "unprivileged_user" not in report.layers:
            report.set("unprivileged_user", "in_force", f"the judge itself runs unprivileged (uid {os.geteuid()})")
        return
    try:
        # A sanitized worker shares the workspace of a candidate's worker that already ran: this walk, as root,
        # reads a tree the candidate made (sandbox/tree.py: bounded, no recursion, no link followed).
        os.chown(spec["workspace"], uid, gid, follow_symlinks=False)
        tally = Tally()
        with closing(walk(spec["workspace"], tally=tally)) as found:
            for entry in found:
                os.chown(entry.name, uid, gid, dir_fd=entry.dir_fd, follow_symlinks=False)
        if tally.bound is not None:
            # The candidate's doing: its code never runs as root for it, whatever the policy requires (the
            # launcher reports the error and starts nothing).
            why = f"the workspace is past the walk's bound ({tally.describe()})"
            report.set("unprivileged_user", "missing", why)
            raise RuntimeError(f"{why}: no worker starts in it")
        blocked = [path for path in spec["needed"] if not _reachable(path, uid, gid)]
        if blocked:
            report.set("unprivileged_user", "missing", f"uid {uid} could not reach {blocked[0]}")
            return
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        report.set("unprivileged_user", "in_force", f"uid {uid}, gid {gid}, no supplementary groups")
    except OSError as exc:
        report.set("unprivileged_user", "missing", _why(exc))


def no_new_privs(spec: dict[str, Any], report: Report) -> None:
    if skipped(spec, report, "no_new_privs"):
        return
    try:
        _libc_call(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        report.set("no_new_privs", "in_force", "setuid binaries and file capabilities grant nothing")
    except OSError as exc:
        report.set("no_new_privs", "missing", _why(exc))


def load_seccomp(spec: dict[str, Any], report: Report) -> None:
    if skipped(spec, report, "seccomp"):
        return
    try:
        import seccomp  # libseccomp's own binding, where the system ships it
    except ImportError:
        try:
            import pyseccomp as seccomp  # the same API over ctypes (a dependency on Linux)
        except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: pyseccomp found no libseccomp
            report.set("seccomp", "missing", f"no usable libseccomp binding (seccomp or pyseccomp): {exc}")
            return
    try:
        rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
        denied = []
        for name in DENIED_SYSCALLS:
            try:
                rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
                denied.append(name)
            except (RuntimeError, ValueError, OSError):
                continue
        for flag in CLONE_NAMESPACE_FLAGS:  # one rule per bit: a rule's comparisons must all hold, not any
            rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), SYS_CLONE3)
        rules.load()
        report.set(
            "seccomp",
            "in_force",
            f"{len(denied)} syscalls answer EPERM ({', '.join(denied[:6])}, ...), clone with namespace flags too; "
            "clone3 answers ENOSYS (the C library falls back to clone)",
        )
    except Exception as exc:  # any binding failure leaves the worker without the layer, recorded
        report.set("seccomp", "missing", f"{type(exc).__name__}: {exc}")
