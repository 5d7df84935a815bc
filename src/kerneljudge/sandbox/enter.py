"""The trusted launcher that confines one worker: ``python -m kerneljudge.sandbox.enter SPEC -- ARGV``.

It runs before any candidate code, as the judge's user, and imports only the standard library and its layers
(sandbox/enter_layers.py, which import the same; for the seccomp layer, a libseccomp binding). Python 3.11 has
no ``os.unshare`` and a ``preexec_fn`` is unsafe in the judge's threaded parent, so the layers are applied
here, through libc, in three processes:

    outer  (the pid the parent spawned): enters the network, mount, PID and IPC namespaces, waits, and
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

import json
import os
import resource
import select
import signal
import sys
from typing import Any

from kerneljudge.sandbox.enter_layers import (
    PR_SET_CHILD_SUBREAPER,
    PR_SET_PDEATHSIG,
    Report,
    _libc,
    _mount,
    _read_only,
    drop_user,
    enter_namespaces,
    load_seccomp,
    no_new_privs,
    set_limits,
    setup_mounts,
    skipped,
)

SETUP_FAILED = 70  # exit status when the launcher itself could not start the worker


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
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # no handler can be set for these (ValueError): none needed
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
