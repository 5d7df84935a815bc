"""The sandbox's plan, policy and record, without GPUs: mount plans are pure, missing layers are recorded, and a
missing layer is fatal only under a policy that requires the sandbox."""

import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from kerneljudge.sandbox import confine, probe
from kerneljudge.sandbox.confine import Layer, SandboxPolicy, SandboxUnavailable
from kerneljudge.sandbox.ending import Lineage, descendants
from kerneljudge.sandbox.gpu_memory import GpuMemoryWatch, start_watch, used_bytes
from kerneljudge.sandbox.plan import WORKER_UIDS, _uids_in_use, plan_mounts, rlimits
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.workspace import Workspace, diff


def plan(workspace="/tmp/kj-ws", needed=("/work/src", "/root/venv"), temporary=("/tmp",), private=("/root", "/work")):
    return plan_mounts(workspace, list(needed), list(temporary), list(private))


def test_state_dirs_are_covered_and_needed_paths_bound_back():
    spec = plan()
    assert spec["hide"] == [
        {"path": "/tmp", "writable": True},
        {"path": "/root", "writable": False},
        {"path": "/work", "writable": False},
    ]
    assert {e["path"]: e["writable"] for e in spec["expose"]} == {
        "/tmp/kj-ws": True,
        "/work/src": False,
        "/root/venv": False,
    }


def test_a_folder_the_worker_needs_is_never_covered():
    spec = plan(private=("/", "/work/src", "/work/src/pkg", "/root/venv/lib"))
    assert [h["path"] for h in spec["hide"]] == ["/tmp"]


def test_nested_state_dirs_are_covered_once_and_binds_go_outermost_first():
    spec = plan(needed=("/root/a/b/c", "/root/a"), private=("/root/a/x", "/root"))
    assert [h["path"] for h in spec["hide"]] == ["/tmp", "/root"]
    assert [e["path"] for e in spec["expose"]] == ["/root/a", "/tmp/kj-ws"]


def test_policy_is_validated():
    with pytest.raises(ValueError):
        SandboxPolicy(enabled=False, require=True)
    with pytest.raises(ValueError, match="unknown sandbox layers"):
        SandboxPolicy(optional_layers=frozenset({"seccom"}))
    assert "seccomp" not in SandboxPolicy(require=True).required_layers()
    assert SandboxPolicy().required_layers() == []


def test_a_missing_layer_is_fatal_only_when_required():
    layers = confine.complete({"network_namespace": Layer("missing", "unshare failed: Operation not permitted")})
    assert layers["pid_namespace"].status == "missing" and list(layers) == list(confine.LAYERS)
    confine.check_required(layers, SandboxPolicy())
    with pytest.raises(SandboxUnavailable, match="network_namespace: unshare failed") as caught:
        confine.check_required(layers, SandboxPolicy(require=True))
    assert "\n" not in str(caught.value)
    optional = {name: Layer("in_force", "") for name in confine.LAYERS} | {"seccomp": Layer("missing", "no binding")}
    confine.check_required(optional, SandboxPolicy(require=True))


def test_a_garbled_report_is_the_judges_error():
    read, write = os.pipe()
    os.write(write, b"not json")
    os.close(write)
    with pytest.raises(SandboxUnavailable, match="died before reporting"):
        confine.read_report(read, timeout_s=5)
    os.close(read)


def test_every_layer_is_recorded_for_a_real_worker():
    worker = WorkerProcess("reference", "cpu", "", WorkerLimits(step_timeout_s=60))
    try:
        layers = worker.sandbox_layers
    finally:
        worker.close()
    assert list(layers) == list(confine.LAYERS)
    assert all(
        layer["status"] in ("in_force", "missing", "not_applicable") and layer["detail"] for layer in layers.values()
    )
    assert layers["gpu_memory_cap"]["status"] == "not_applicable"


@pytest.mark.skipif(os.geteuid() != 0, reason="a judge that is not root keeps its own uid in a user namespace")
def test_as_root_each_worker_runs_as_a_uid_of_its_own_given_back_when_it_is_gone():
    # RLIMIT_NPROC counts per uid: with one uid for every worker, eight lanes on two GPUs ran out of threads
    # (2026-11-30, judge 0.1.0).
    workers = [WorkerProcess(role, "cpu", "", WorkerLimits(step_timeout_s=60)) for role in ("reference", "candidate")]
    try:
        details = [worker.sandbox_layers["unprivileged_user"]["detail"] for worker in workers]
        uids = [worker.uid for worker in workers]
    finally:
        for worker in workers:
            worker.close()
    assert uids[0] != uids[1] and all(uid in WORKER_UIDS for uid in uids), uids
    assert [detail.split(",")[0] for detail in details] == [f"uid {uid}" for uid in uids], details
    assert not set(uids) & _uids_in_use and all(worker.uid is None for worker in workers)
    fixed = WorkerProcess("reference", "cpu", "", WorkerLimits(step_timeout_s=60), policy=SandboxPolicy(uid=65534))
    try:
        assert fixed.sandbox_layers["unprivileged_user"]["detail"].startswith("uid 65534,")
    finally:
        fixed.close()


@pytest.mark.parametrize("skip", [{"network_namespace", "unprivileged_user"}, {"hidden_state"}, {"private_tmp"}])
def test_skipped_layers_are_left_out_and_recorded_the_rest_still_apply(skip):
    full = probe.probe_layers()
    policy = SandboxPolicy(skip_layers=frozenset(skip))
    worker = WorkerProcess("reference", "cpu", "", WorkerLimits(step_timeout_s=60), policy=policy)
    try:
        hello = worker.receive()
    finally:
        worker.close()
    assert hello["type"] == "hello"
    layers = worker.sandbox_layers
    for name in confine.LAYERS:
        if name in skip:
            assert layers[name] == {"status": "missing", "detail": "skipped by the policy (SandboxPolicy.skip_layers)"}
        elif name == "allowlist_root" and "private_tmp" in skip:  # the new root is built on the private /tmp
            assert layers[name]["status"] == "missing" and "private /tmp" in layers[name]["detail"]
        elif not (name == "unprivileged_user" and "hidden_state" in skip):
            # (Without the hidden state's tmpfs over a root-only home, uid 65534 may not reach an interpreter
            # installed there: then that layer is recorded missing too, as it should be.)
            assert layers[name]["status"] == full[name].status, (name, layers[name])
    with pytest.raises(SandboxUnavailable, match=sorted(skip)[0]):
        WorkerProcess(
            "reference", "cpu", "", WorkerLimits(), policy=SandboxPolicy(skip_layers=frozenset(skip), require=True)
        )


def test_a_layer_that_cannot_be_set_up_is_recorded_or_fatal(monkeypatch):
    # A limit this platform does not know cannot be set at all: the resource layer goes missing. (One above the
    # inherited hard limit is set at that, stricter than asked, and in force: tests/sandbox/test_sandbox_holes.py.)
    monkeypatch.setattr("kerneljudge.sandbox.plan.rlimits", lambda *a, **k: {**rlimits(*a, **k), "RLIMIT_NOSUCH": 1})
    worker = WorkerProcess("reference", "cpu", "", WorkerLimits(step_timeout_s=60))
    try:
        hello = worker.receive()
    finally:
        worker.close()
    assert hello["type"] == "hello" and worker.sandbox_layers["resource_limits"]["status"] == "missing"
    before = set(os.listdir("/tmp"))
    with pytest.raises(SandboxUnavailable, match="resource_limits"):
        WorkerProcess("reference", "cpu", "", WorkerLimits(), policy=SandboxPolicy(require=True))
    # This process's workspaces only: the tests run in parallel, and another's may be made meanwhile (a clean-clone
    # CI run found one, 2026-12-05)
    mine = f"kerneljudge-reference-p{os.getpid()}-"
    assert not {p for p in set(os.listdir("/tmp")) - before if p.startswith(mine)}


def test_workspace_changes_are_listed_and_odd_files_never_opened():
    workspace = Workspace.create("unit")
    try:
        kept, changed, removed = (workspace.write_source(n, "x") for n in ("kept.py", "changed.py", "removed.py"))
        before = workspace.manifest()
        changed.write_text("y")
        removed.unlink()
        os.mkfifo(workspace.root / "fifo")  # opening it would block the judge
        changes = diff(before, workspace.manifest())
    finally:
        workspace.remove()
    assert changes.created == ["fifo"] and changes.modified == ["changed.py"] and changes.deleted == ["removed.py"]
    assert not workspace.root.exists() and kept.name not in changes.created


class FakeNvml:
    def __init__(self, readings):
        self.readings = readings

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [type("P", (), {"pid": pid, "usedGpuMemory": used})() for pid, used in self.readings]


def test_gpu_memory_is_summed_over_the_worker_tree():
    nvml = FakeNvml([(10, 2**30), (11, 2**29), (99, 2**33), (12, None)])
    assert used_bytes(nvml, ["gpu0"], {10, 11, 12}.__contains__) == 2**30 + 2**29


def test_a_process_is_of_the_worker_tree_by_its_parents_chain():
    """`Lineage`, which the GPU memory watch asks of each process NVML lists: a grandchild descends from this
    process and from its parent, this process from itself, no process outside the chain; asked again, a known
    process is answered from what was learnt, and a pid whose process ended is not."""
    script = (
        "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
        "print(p.pid, flush=True); time.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        mine, childs = Lineage(os.getpid()), Lineage(child.pid)
        assert mine(grandchild) and childs(grandchild) and mine(os.getpid())
        assert not Lineage(grandchild)(child.pid) and not childs(os.getpid())
        assert set(mine.known) == {grandchild, child.pid}  # its chain up to the root, remembered
        assert mine(grandchild) and not childs(os.getpid())  # the same answers from what it knows
        assert sorted(descendants(child.pid)) == [grandchild]  # the full scan the kill uses agrees
        assert not mine(2**22 + 12345)  # no such process
    finally:
        for pid in descendants(child.pid):
            os.kill(pid, 9)
        child.kill()
        child.wait()
    assert not Lineage(child.pid)(grandchild)  # ended: no chain to read


def test_the_gpu_memory_watch_kills_over_the_cap():
    killed = []
    nvml = FakeNvml([(10, 3 * 2**30)])
    watch = GpuMemoryWatch(nvml, ["gpu0"], {10}.__contains__, lambda: killed.append(1), 2**31, 0.01)
    watch.start()
    watch.join(timeout=5)
    assert killed == [1] and "3.00 GiB of GPU memory, over its cap of 2.00 GiB" in watch.reason()


def test_without_a_cap_the_watch_keeps_the_most_held_and_kills_nothing():
    killed, readings = [], [(10, 2**30)]
    watch = GpuMemoryWatch(FakeNvml(readings), ["gpu0"], {10}.__contains__, lambda: killed.append(1), None, 0.01)
    watch.start()
    time.sleep(0.1)
    readings[0] = (10, 5 * 2**30)
    time.sleep(0.1)
    readings[0] = (10, 2**29)
    time.sleep(0.1)
    watch.stop()
    watch.join(timeout=5)
    assert watch.peak_bytes == 5 * 2**30 and killed == [] and watch.reason() is None


def test_the_gpu_memory_cap_does_not_apply_on_the_cpu():
    watch, layer = start_watch("cpu", 2**30, set, time.sleep)
    assert watch is None and layer.status == "not_applicable"
    assert start_watch("cuda", None, set, time.sleep)[1].status == "not_applicable"


def test_cuda_workers_are_confined_unless_the_policy_says_not_and_then_say_so():
    assert confine.DEFAULT_POLICY.confine_cuda
    unconfined = SandboxPolicy(confine_cuda=False)
    with pytest.raises(SandboxUnavailable, match="confine_cuda"):
        WorkerProcess("reference", "cuda", "", WorkerLimits(), policy=replace(unconfined, require=True))
    worker = WorkerProcess("reference", "cuda", "", WorkerLimits(step_timeout_s=60), policy=unconfined)
    try:
        layers = worker.sandbox_layers
    finally:
        worker.close()
    assert layers["network_namespace"] == {"status": "missing", "detail": confine.CUDA_UNCONFINED}


# What the NVIDIA driver needs while CUDA starts (error 304 otherwise, measured on an H200): each thread
# names itself through its own /proc/<pid>/task/<tid>/comm, and /proc/self must be the process's own.
WHAT_CUDA_NEEDS = """
import ctypes, os, threading
def name_thread():
    tid = ctypes.CDLL(None).syscall(186)  # gettid on x86-64
    with open(f"/proc/{os.getpid()}/task/{tid}/comm", "w") as handle:
        handle.write("cuda-EvtHandlr")
    print("named", open(f"/proc/self/task/{tid}/comm").read().strip())
thread = threading.Thread(target=name_thread)
thread.start(); thread.join()
print("pid", os.getpid(), os.readlink("/proc/self"))
try:
    open("/usr/kerneljudge-probe", "w")
except OSError as exc:
    print("root", exc.strerror)
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe calls gettid by its x86-64 number")
def test_proc_stays_writable_for_the_workers_own_threads_while_the_root_is_read_only():
    layers, done = probe.run_confined(WHAT_CUDA_NEEDS)
    if layers["read_only_root"].status != "in_force":
        pytest.skip(f"no read-only root here: {layers['read_only_root'].detail}")
    said = done.stdout.decode().split("\n")
    assert "named cuda-EvtHandlr" in said, done
    assert "root Read-only file system" in said, done
    if layers["pid_namespace"].status == "in_force":
        assert "pid 2 2" in said, done  # the launcher's init is 1, the worker 2, and /proc is theirs
