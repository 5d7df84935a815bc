"""The trusted launcher that confines one worker: ``python -m kerneljudge.sandbox.enter SPEC -- ARGV``.

It runs before any candidate code, as the judge's user, and imports only the standard library (and, for
the seccomp layer, a libseccomp binding). Python 3.11 has no ``os.unshare`` and a ``preexec_fn`` is unsafe
in the judge's threaded parent, so the layers are applied here, through libc, in three processes:

    outer  (the pid the parent spawned): enters the network, mount and PID namespaces, waits, and
           exits the way the worker did, so the parent sees the worker's signal or exit status; if the
           judge dies first (its lifeline pipe reads end-of-file, sandbox/lifeline.py), it kills init
           and its own process group, and with them the worker;
    init   (pid 1 of the new PID namespace): builds the mount view and reaps; when it exits, the
           kernel kills everything left in the namespace; it dies with outer (PR_SET_PDEATHSIG);
    worker (pid 2): resource limits, workspace ownership, the unprivileged user, no_new_privs,
           seccomp, the parent-death signal (after the change of user, which clears it), then exec of
           the real worker.

Each step that fails is recorded and skipped, never fatal, unless the spec lists the layer as
required: then the worker is not started. The record goes to the parent over ``--report-fd`` as one
JSON line, written and closed before the exec, so candidate code can neither write nor forge it.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import resource
import select
import signal
import stat
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
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
SETUP_FAILED = 70  # exit status when the launcher itself could not start the worker

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
    """Unshare user (only when not root), network, mount and PID namespaces, one at a time."""
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
    if skipped(spec, report, "resource_limits"):
        return
    applied = []
    try:
        for name, value in spec["rlimits"].items():
            resource.setrlimit(getattr(resource, name), (value, value))
            applied.append(f"{name.removeprefix('RLIMIT_')}={value}")
        report.set("resource_limits", "in_force", " ".join(applied))
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
        for top, dirs, files in os.walk(spec["workspace"]):
            for name in [top, *(os.path.join(top, n) for n in dirs + files)]:
                os.chown(name, uid, gid, follow_symlinks=False)
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
        rules.load()
        report.set("seccomp", "in_force", f"{len(denied)} syscalls answer EPERM ({', '.join(denied[:6])}, ...)")
    except Exception as exc:  # any binding failure leaves the worker without the layer, recorded
        report.set("seccomp", "missing", f"{type(exc).__name__}: {exc}")


# ---------------------------------------------------------------- the three processes


def _only_fds(*keep: int) -> None:
    """Close every inherited descriptor but these, with stdio on /dev/null, so EOFs reach the parent."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def die_with_parent(parent_pid: int | None) -> None:
    """SIGKILL this process when its parent dies (a single-threaded parent here); exit now if `parent_pid` is
    no longer its parent (it died before the request took effect). None: the parent cannot be seen from
    here (init's, outside its PID namespace), and kills this process itself before it exits."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(SETUP_FAILED)


def wait_init(init: int, lifeline: int | None) -> int:
    """init's wait status; or, if the judge dies first (end-of-file on its lifeline), kill init (and so the
    PID namespace) and this process group, which holds the worker where there is no namespace."""
    if lifeline is None:
        return os.waitpid(init, 0)[1]
    try:
        init_fd = os.pidfd_open(init)
    except (AttributeError, OSError):  # before Linux 5.3: init and the worker still die with this process
        die_with_parent(os.getppid())
        return os.waitpid(init, 0)[1]
    while True:
        ready, _, _ = select.select([init_fd, lifeline], [], [])
        if init_fd in ready:
            return os.waitpid(init, 0)[1]
        if not os.read(lifeline, 1):  # the judge is gone: nothing is left to report to
            os.kill(init, signal.SIGKILL)
            os.killpg(0, signal.SIGKILL)


def _exit_like(status: int) -> None:
    """Exit with the worker's wait status: the same signal, or the same exit code."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else SETUP_FAILED)


def _fail(report: Report, report_fd: int, error: str) -> None:
    try:
        os.write(report_fd, (json.dumps({"layers": report.layers, "error": error}) + "\n").encode())
    finally:
        os._exit(SETUP_FAILED)


def run_worker(spec: dict[str, Any], report: Report, report_fd: int, argv: list[str], init_pid: int) -> None:
    if spec.get("lifeline_fd") is not None:  # the candidate has no use for the judge's lifeline
        os.close(spec["lifeline_fd"])
    os.chdir(spec["workspace"])  # the cwd inherited from the parent is the copy under the covered /tmp
    set_limits(spec, report)
    drop_user(spec, report)
    die_with_parent(init_pid)  # after drop_user: a change of credentials clears the parent-death signal
    no_new_privs(spec, report)
    load_seccomp(spec, report)
    missing = report.missing_required(spec["required"])
    if missing:
        _fail(report, report_fd, f"required sandbox layers missing: {', '.join(missing)}")
    os.write(report_fd, (json.dumps({"layers": report.layers}) + "\n").encode())
    os.close(report_fd)
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(SETUP_FAILED)


def _read_only(path: str, recursive: bool) -> None:
    _set_mount_attr(path, AT_RECURSIVE if recursive else 0, set_=MOUNT_ATTR_RDONLY)


def run_init(spec: dict[str, Any], report: Report, report_fd: int, argv: list[str], status_w: int) -> None:
    if report.in_force("mount_namespace"):
        setup_mounts(spec, report)
        if not skipped(spec, report, "allowlist_root"):
            from kerneljudge.sandbox.allowlist import enter_allowlist

            enter_allowlist(spec, report, _mount, _read_only, _libc)
    else:
        for name in ("read_only_root", "hidden_state", "private_tmp", "allowlist_root"):
            report.set(name, "missing", "no mount namespace")
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of the worker come here, not to the host
    init_pid = os.getpid()
    worker = os.fork()
    if worker == 0:
        os.close(status_w)
        try:
            run_worker(spec, report, report_fd, argv, init_pid)
        except Exception as exc:  # the worker cannot start confined as asked: say why instead
            _fail(report, report_fd, f"launcher: {type(exc).__name__}: {exc}")
    _only_fds(status_w)
    while True:
        pid, status = os.wait()
        if pid == worker:
            os.write(status_w, str(status).encode())
            os._exit(0)


def main(args: list[str]) -> None:
    spec, report_fd, argv = json.loads(args[0]), int(args[1]), args[3:]
    report = Report()
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:  # inherited: the OOM killer takes a worker first
            handle.write(str(spec["oom_score_adj"]))
        enter_namespaces(spec, report)
        status_r, status_w = os.pipe()
        init = os.fork()
    except Exception as exc:  # no worker can start: say why, the parent turns it into a judge error
        _fail(report, report_fd, f"launcher: {type(exc).__name__}: {exc}")
    if init == 0:
        os.close(status_r)
        die_with_parent(None)
        run_init(spec, report, report_fd, argv, status_w)
    lifeline = spec.get("lifeline_fd")
    _only_fds(status_r, *([lifeline] if lifeline is not None else []))
    init_status = wait_init(init, lifeline)
    worker_status = os.read(status_r, 64)
    _exit_like(int(worker_status) if worker_status else init_status)


if __name__ == "__main__":
    main(sys.argv[1:])
