"""Holes a hostile worker found in the sandbox, each closed and kept closed: SysV IPC objects that outlived their
worker, `clone` granting new namespaces, a read-only channel opened again for writing, a SIGKILL reported as an
exit status, and the resource limits called missing under a lower inherited limit. Each test starts the launcher
around a snippet (a second or two); one judges a candidate end to end.
"""

import ctypes
import errno
import os
import platform
import resource
import stat
import subprocess
import sys
import uuid

import pytest

from helpers import run_judge
from kerneljudge.protocol import channel
from kerneljudge.sandbox import probe
from kerneljudge.sandbox.confine import DEFAULT_POLICY, Layer, complete, read_report
from kerneljudge.sandbox.plan import launcher_spec, release_worker_uid, take_worker_uid, wrap_argv
from kerneljudge.sandbox.workspace import Workspace

GiB = 1024**3


def launch(code, pass_fds=(), preexec_fn=None):
    """`python -c code` inside the launcher, as probe.run_confined, with descriptors passed on to the worker and
    a function run in the launcher's process before it starts (to lower an inherited limit)."""
    workspace = Workspace.create("holes")
    report_r, report_w = os.pipe()
    uid = take_worker_uid(DEFAULT_POLICY)
    try:
        spec = launcher_spec(workspace.root, DEFAULT_POLICY, probe.package_root(), lifetime_s=60, uid=uid)
        proc = subprocess.Popen(
            wrap_argv([sys.executable, "-c", code], spec, report_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(report_w, *pass_fds),
            cwd=workspace.root,
            env={"PYTHONPATH": str(probe.package_root()), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            start_new_session=True,
            preexec_fn=preexec_fn,
        )
        os.close(report_w)
        report_w = -1
        report = read_report(report_r, 60)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        for fd in (report_r, report_w):
            if fd >= 0:
                os.close(fd)
        workspace.remove()
        release_worker_uid(uid)
    return complete(report["layers"]), proc.returncode, stdout.decode(), stderr.decode()


def need(layers: dict[str, Layer], *names: str) -> None:
    missing = [f"{n} ({layers[n].detail})" for n in names if layers[n].status != "in_force"]
    if missing:
        pytest.skip("sandbox layers not in force here: " + "; ".join(missing))


# ---------------------------------------------------------------- SysV IPC

SHM_PROBE = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
key, create = int(sys.argv[1]), sys.argv[2] == "create"
shmid = libc.shmget(key, 1 << 20, 0o1666 if create else 0)
print("made" if create and shmid >= 0 else "found" if shmid >= 0 else f"none {ctypes.get_errno()}")
"""

_libc = ctypes.CDLL(None, use_errno=True)


def test_a_sysv_segment_ends_with_the_worker_that_made_it():
    key = int.from_bytes(uuid.uuid4().bytes[:3], "little") + 1  # a key no one else uses
    code = SHM_PROBE.replace("sys.argv[1]", str(key))
    try:
        layers, _, made, err = launch(code.replace("sys.argv[2]", "'create'"))
        need(layers, "network_namespace")  # namespaces can be made here: then an IPC namespace too
        assert layers["ipc_namespace"].status == "in_force", layers["ipc_namespace"]
        assert made.strip() == "made", err
        _, _, found, err = launch(code.replace("sys.argv[2]", "'look'"))  # the next worker, under another uid
        assert found.strip() == f"none {errno.ENOENT}", err
        assert _libc.shmget(key, 0, 0) == -1 and ctypes.get_errno() == errno.ENOENT  # nor on the host
    finally:
        host_id = _libc.shmget(key, 0, 0)
        if host_id >= 0:  # left behind (the hole): removed, so that a failure costs nothing
            _libc.shmctl(host_id, 0, None)  # IPC_RMID


# ---------------------------------------------------------------- clone and its namespace flags

CLONE_NUMBERS = {"x86_64": (56, 435), "aarch64": (220, 435)}

CLONE_PROBE = """
import ctypes, os, struct, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
CLONE, CLONE3 = NUMBERS
def outcome(result):
    if result == 0:  # the child of a clone granted: it must not go on running this script
        os._exit(0)
    if result > 0:
        os.waitpid(result, 0)
        return "ALLOWED"
    return os.strerror(ctypes.get_errno())
for name, flag in FLAGS:
    print("clone", name, outcome(libc.syscall(CLONE, flag | 17, 0, 0, 0, 0)))  # 17: SIGCHLD
args = ctypes.create_string_buffer(struct.pack("8Q", 0x10000000, 0, 0, 0, 17, 0, 0, 0))  # CLONE_NEWUSER
print("clone3 newuser", outcome(libc.syscall(CLONE3, args, 64)))
seen = []
thread = threading.Thread(target=seen.append, args=(1,))
thread.start(); thread.join()
print("thread", seen)
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
print("subprocess", subprocess.run([sys.executable, "-c", "print(3)"], capture_output=True).stdout)
import torch, triton
print("torch", torch.ones(2).sum().item())
"""

NAMESPACE_FLAGS = [
    ("newns", 0x00020000),
    ("newcgroup", 0x02000000),
    ("newuts", 0x04000000),
    ("newipc", 0x08000000),
    ("newuser", 0x10000000),
    ("newpid", 0x20000000),
    ("newnet", 0x40000000),
    ("newuser_net_ns", 0x10000000 | 0x40000000 | 0x00020000),
]


@pytest.mark.skipif(platform.machine() not in CLONE_NUMBERS, reason="clone's syscall number is known here")
def test_clone_cannot_make_namespaces_while_threads_fork_and_imports_still_work():
    code = CLONE_PROBE.replace("NUMBERS", repr(CLONE_NUMBERS[platform.machine()]))
    layers, returncode, said, err = launch(code.replace("FLAGS", repr(NAMESPACE_FLAGS)))
    need(layers, "seccomp")
    lines = said.splitlines()
    assert returncode == 0, err
    assert [line for line in lines if line.startswith("clone ")] == [
        f"clone {name} Operation not permitted" for name, _ in NAMESPACE_FLAGS
    ], said
    assert "clone3 newuser Function not implemented" in lines, said
    assert "thread [1]" in lines and "fork 7" in lines and "subprocess b'3\\n'" in lines, (said, err)
    assert "torch 2.0" in lines, err  # torch and triton start their threads through the fallback to clone


# ---------------------------------------------------------------- read-only channels

WRITE_PROBE = """
import mmap, os
fd = FD
for name, attempt in [
    ("reopen", lambda: os.open(f"/proc/self/fd/{fd}", os.O_RDWR)),
    ("write", lambda: os.pwrite(fd, b"forged", 0)),
    ("map", lambda: mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE)),
    ("chmod", lambda: os.fchmod(fd, 0o666)),
    ("chmod_path", lambda: os.chmod(f"/proc/self/fd/{fd}", 0o666)),
]:
    try:
        attempt()
        print(name, "ALLOWED")
    except OSError as exc:
        print(name, "denied", exc.errno)
"""


def test_a_channel_is_made_so_that_no_one_else_can_open_it_again():
    endpoint = channel.create("candidate_in", 1 << 20)
    try:
        assert stat.S_IMODE(os.fstat(endpoint.fd).st_mode) == channel.CHANNEL_MODE == 0o400
        os.pwrite(endpoint.fd, b"written", 0)  # the holder of the read-write descriptor still writes
        held = channel.reader(endpoint)
        assert os.pread(held.fd, 7, 0) == b"written"
        os.close(held.fd)
    finally:
        os.close(endpoint.fd)


@pytest.mark.skipif(os.geteuid() != 0, reason="a worker keeps a non-root judge's uid, and owns the channel's file")
def test_a_worker_handed_a_read_only_channel_cannot_write_it():
    endpoint = channel.create("candidate_in", 1 << 20)
    held = channel.reader(endpoint)
    try:
        os.pwrite(endpoint.fd, b"honest", 0)
        layers, _, said, err = launch(WRITE_PROBE.replace("FD", str(held.fd)), pass_fds=(held.fd,))
        need(layers, "unprivileged_user")
        assert os.pread(endpoint.fd, 6, 0) == b"honest"
    finally:
        os.close(held.fd)
        os.close(endpoint.fd)
    assert said.splitlines() == [
        f"reopen denied {errno.EACCES}",
        f"write denied {errno.EBADF}",
        f"map denied {errno.EACCES}",
        f"chmod denied {errno.EPERM}",
        f"chmod_path denied {errno.EPERM}",
    ], (said, err)


# ---------------------------------------------------------------- a worker's end


def test_the_launcher_dies_by_the_signal_that_killed_its_worker():
    layers, returncode, _, err = launch("import os; os.kill(os.getpid(), 9)")
    assert returncode == -9, (returncode, err)


KILLS_ITSELF = '''"""Kills its own process with SIGKILL in forward, as the kernel's out-of-memory killer would."""
import os

import torch


class ModelNew(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(width))

    def forward(self, x):
        os.kill(os.getpid(), 9)
'''


def test_a_worker_killed_by_sigkill_is_reported_so(tiny_task, tmp_path):
    candidate = tmp_path / "kills_itself.py"
    candidate.write_text(KILLS_ITSELF)
    record = run_judge(tiny_task, candidate)
    assert record.status == "FAIL", record.failure
    summary = record.failure.summary
    assert "killed by SIGKILL" in summary and "out-of-memory" in summary, summary
    assert "exit status" not in summary, summary


# ---------------------------------------------------------------- inherited limits


def test_a_lower_inherited_address_space_limit_keeps_the_limits_in_force():
    lower_bytes = 8 * GiB  # below the policy's 64 GiB; the launcher's interpreter starts well within it
    assert DEFAULT_POLICY.address_space_bytes > lower_bytes
    layers, returncode, said, err = launch(
        "import resource; print(resource.getrlimit(resource.RLIMIT_AS))",
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (lower_bytes, lower_bytes)),
    )
    limits = layers["resource_limits"]
    assert limits.status == "in_force", limits.detail
    assert f"AS={lower_bytes}" in limits.detail and f"AS {lower_bytes} (inherited" in limits.detail, limits.detail
    assert "NOFILE" not in limits.detail.split("policy asks:")[1], limits.detail  # only the lower one is named
    assert returncode == 0 and said.strip() == f"({lower_bytes}, {lower_bytes})", err
